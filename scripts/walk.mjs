// How far a value travels through the code: a walk from one function's parameter along the calls that
// pass it (or what was made from it) on, read with the TypeScript compiler's type checker.
//   node scripts/walk.mjs [root]       the two walks of issue #34 (the front's request, a connection's frame)
//   node scripts/walk.mjs --list       also print each walk's path, indented by depth
//
// What it counts, per walk:
// - stays: function visits (a function reached again counts again; its calls are walked at its first visit only);
// - rooms: distinct files visited;
// - climbs: calls into a file the path has already left (A -> B -> A: the value went back up);
// - returns: visits whose function hands a value made from the walked one back to its caller.
//
// A call-graph approximation of data flow, not a full one: inside a function the walked value is its
// parameter, and every local variable (or destructured name) whose initializer or assignment mentions a
// walked name is walked too. A call is followed when one of its arguments mentions a walked name, into the
// callee the checker resolves (functions, methods, constructors, and arrow functions bound to a name);
// and into the callbacks a caller handed it (an arrow function, one in an object literal of options, or a
// method of an object of one of our classes, called through the parameter or a local copy of it). Calls through an interface
// or a callback kept in a field (no body to read), into node_modules or the standard library end there.
// Values kept in fields (`this.x = value`) and read by another method are not followed.
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const args = process.argv.slice(2);
const list = args.includes("--list");
const root = path.resolve(args.find((a) => !a.startsWith("--")) ?? path.join(path.dirname(fileURLToPath(import.meta.url)), ".."));

/** The walks: a class's method (or a function) in a file, and the parameter the walk starts from. */
const WALKS = [
  { name: "request", file: "src/transport/openai-front.ts", cls: "OpenAIFront", fn: "handle", param: "req" },
  { name: "frame", file: "src/service/connection.ts", cls: "Connection", fn: "onFrame", param: "data" },
];

const config = ts.getParsedCommandLineOfConfigFile(
  path.join(root, "tsconfig.json"),
  {},
  { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
);
const program = ts.createProgram(config.fileNames, config.options);
const checker = program.getTypeChecker();
const srcDir = path.join(root, "src") + path.sep;

const rel = (f) => path.relative(root, f).split(path.sep).join("/");

function findStart(w) {
  const sf = program.getSourceFile(path.join(root, w.file));
  if (!sf) throw new Error(`bug: ${w.file} is not in the program`);
  let found = null;
  const visit = (n) => {
    if (found) return;
    if (w.cls && ts.isClassDeclaration(n) && n.name?.text === w.cls) {
      for (const m of n.members) if (ts.isMethodDeclaration(m) && m.name.getText() === w.fn) found = m;
    } else if (!w.cls && ts.isFunctionDeclaration(n) && n.name?.text === w.fn) found = n;
    ts.forEachChild(n, visit);
  };
  visit(sf);
  if (!found) throw new Error(`bug: ${w.cls ?? ""}.${w.fn} not found in ${w.file}`);
  const index = found.parameters.findIndex((p) => p.name.getText() === w.param);
  return { fn: found, index };
}

/** The function-like declaration with a body in src/ that a call's callee names, or null. */
function calleeOf(call) {
  let sym = checker.getSymbolAtLocation(ts.isNewExpression(call) ? call.expression : call.expression);
  if (!sym && ts.isPropertyAccessExpression(call.expression)) sym = checker.getSymbolAtLocation(call.expression.name);
  if (!sym) return null;
  if (sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
  for (const d of sym.declarations ?? []) {
    const file = d.getSourceFile().fileName;
    if (!path.resolve(file).startsWith(srcDir) || file.endsWith(".d.ts")) continue;
    if (ts.isClassDeclaration(d) && ts.isNewExpression(call)) {
      const ctor = d.members.find((m) => ts.isConstructorDeclaration(m) && m.body);
      if (ctor) return ctor;
      continue;
    }
    if ((ts.isFunctionDeclaration(d) || ts.isMethodDeclaration(d)) && d.body) return d;
    if ((ts.isVariableDeclaration(d) || ts.isPropertyDeclaration(d)) && d.initializer) {
      const init = d.initializer;
      if ((ts.isArrowFunction(init) || ts.isFunctionExpression(init)) && init.body) return init;
    }
  }
  return null;
}

/** Whether `node` mentions one of the walked symbols. */
function mentions(node, walked) {
  let hit = false;
  const visit = (n) => {
    if (hit) return;
    if (ts.isIdentifier(n)) {
      const s = checker.getSymbolAtLocation(n);
      if (s && walked.has(s)) hit = true;
      // a shorthand property `{ request }` names the local
      if (!hit && ts.isShorthandPropertyAssignment(n.parent)) {
        const v = checker.getShorthandAssignmentValueSymbol(n.parent);
        if (v && walked.has(v)) hit = true;
      }
      return;
    }
    ts.forEachChild(n, visit);
  };
  visit(node);
  return hit;
}

function bindingNames(name, out) {
  if (ts.isIdentifier(name)) out.push(name);
  else for (const e of name.elements) if (!ts.isOmittedExpression(e)) bindingNames(e.name, out);
}

function names(name) {
  const out = [];
  bindingNames(name, out);
  return out;
}

/** A callback's walked symbols: what its definer walked, and its own parameters (it is handed results). */
function walkedAll(fn, outer) {
  const walked = new Set(outer);
  for (let i = 0; i < fn.parameters.length; i++) for (const s of walkedIn(fn, i)) walked.add(s);
  return walked;
}

/** Callbacks kept in parameter properties, by the property's symbol (filled as constructors are visited). */
const fieldBindings = new Map();

const isFn = (n) => n && (ts.isArrowFunction(n) || ts.isFunctionExpression(n));

/** What an argument hands a callee that it may call back: an arrow function, or an object literal of some. */
function bindable(a, bindings, walked) {
  if (isFn(a)) return { node: a, outer: walked };
  if (ts.isObjectLiteralExpression(a)) return { node: a, outer: walked };
  if (ts.isIdentifier(a)) {
    const s = checker.getSymbolAtLocation(a);
    if (s && bindings.has(s)) return bindings.get(s);
    const d = s?.valueDeclaration;
    if (d && ts.isVariableDeclaration(d) && (isFn(d.initializer) || (d.initializer && ts.isObjectLiteralExpression(d.initializer))))
      return { node: d.initializer, outer: walked };
    // an object of a class of ours (`const answer = new ChatAnswer(…)`): its methods are what the callee calls
    if (d && ts.isVariableDeclaration(d) && d.initializer && ts.isNewExpression(d.initializer)) {
      let c = checker.getSymbolAtLocation(d.initializer.expression);
      if (c && c.flags & ts.SymbolFlags.Alias) c = checker.getAliasedSymbol(c);
      const cls = c?.declarations?.find((x) => ts.isClassDeclaration(x));
      if (cls && path.resolve(cls.getSourceFile().fileName).startsWith(srcDir)) return { node: cls, outer: walked };
    }
  }
  return null;
}

/** The callback a call's callee names through the bindings (`onObject(…)`, `opts.onIds?.(…)`, a local copy of one), or null. */
function callbackOf(expr, bindings, depth = 0) {
  if ((bindings.size === 0 && fieldBindings.size === 0) || depth > 8) return null;
  const resolve = (e) => {
    if (ts.isParenthesizedExpression(e)) return resolve(e.expression);
    if (ts.isIdentifier(e)) {
      const s = checker.getSymbolAtLocation(e);
      if (s && bindings.has(s)) return bindings.get(s);
      const d = s?.valueDeclaration;
      if (d && ts.isVariableDeclaration(d) && d.initializer && !isFn(d.initializer)) return resolve(d.initializer);
      return null;
    }
    if (ts.isPropertyAccessExpression(e)) {
      const field = e.expression.kind === ts.SyntaxKind.ThisKeyword ? checker.getSymbolAtLocation(e.name) : undefined;
      if (field && fieldBindings.has(field)) return fieldBindings.get(field);
      const holder = resolve(e.expression);
      if (holder && ts.isClassDeclaration(holder.node)) {
        const m = holder.node.members.find((x) => ts.isMethodDeclaration(x) && x.name.getText() === e.name.text && x.body);
        return m ? { node: m, outer: holder.outer } : null;
      }
      if (!holder || !ts.isObjectLiteralExpression(holder.node)) return null;
      for (const p of holder.node.properties) {
        if (p.name?.getText() !== e.name.text) continue;
        if (ts.isPropertyAssignment(p) && isFn(p.initializer)) return { node: p.initializer, outer: holder.outer };
        if (ts.isMethodDeclaration(p)) return { node: p, outer: holder.outer };
      }
      return null;
    }
    if (ts.isBinaryExpression(e)) return resolve(e.left) ?? resolve(e.right);
    return null;
  };
  const got = resolve(expr);
  if (!got || ts.isObjectLiteralExpression(got.node) || ts.isClassDeclaration(got.node)) return null;
  return { fn: got.node, outer: got.outer };
}

/** The symbols holding the walked value (or what was made from it) in `fn`, from parameter `index`. */
function walkedIn(fn, index) {
  const walked = new Set();
  const p = fn.parameters[index];
  if (!p) return walked;
  const names = [];
  bindingNames(p.name, names);
  for (const n of names) walked.add(checker.getSymbolAtLocation(n));
  // to a fixed point: a variable made from a walked one is walked
  for (let changed = true; changed;) {
    changed = false;
    const visit = (n) => {
      let target = null;
      let source = null;
      if (ts.isVariableDeclaration(n) && n.initializer) [target, source] = [n.name, n.initializer];
      else if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isIdentifier(n.left))
        [target, source] = [n.left, n.right];
      // `for (const x of walked)`: each x
      if (ts.isForOfStatement(n) && ts.isVariableDeclarationList(n.initializer) && n.initializer.declarations[0])
        [target, source] = [n.initializer.declarations[0].name, n.expression];
      // a collection a walked value is put into (`list.push(value)`, `map.set(k, value)`) holds it
      if (
        ts.isCallExpression(n) &&
        ts.isPropertyAccessExpression(n.expression) &&
        ts.isIdentifier(n.expression.expression) &&
        ["push", "unshift", "set", "add"].includes(n.expression.name.text) &&
        n.arguments.some((a) => mentions(a, walked))
      )
        [target, source] = [n.expression.expression, n];
      if (target && source && mentions(source, walked)) {
        const ids = [];
        if (ts.isIdentifier(target)) ids.push(target);
        else bindingNames(target, ids);
        for (const id of ids) {
          const s = checker.getSymbolAtLocation(id);
          if (s && !walked.has(s)) {
            walked.add(s);
            changed = true;
          }
        }
      }
      ts.forEachChild(n, visit);
    };
    visit(fn.body);
  }
  return walked;
}

function label(fn) {
  const file = rel(fn.getSourceFile().fileName);
  let name = fn.name?.getText() ?? "";
  if (ts.isConstructorDeclaration(fn)) name = "constructor";
  if (!name && ts.isVariableDeclaration(fn.parent)) name = fn.parent.name.getText();
  const cls = ts.isClassDeclaration(fn.parent) ? `${fn.parent.name?.text}.` : "";
  return `${file} ${cls}${name}`;
}

function walk(w) {
  const start = findStart(w);
  const seen = new Map(); // functions read, by file, position and parameter
  const stats = { stays: 0, rooms: new Set(), climbs: 0, returns: 0, lines: [] };
  const returnsOf = new Map();
  const MAX_DEPTH = 40;
  /**
   * Visit `fn` with its parameters at `index` walked (-1: a callback, whose parameters are all walked, as is
   * what it closes over). `bindings`: the callbacks its parameters were given at this call (parameter
   * symbol -> an arrow function or an object literal holding some), so that calling one is followed back.
   */
  const visit = (fn, index, pathFiles, depth, bindings, outer) => {
    const file = rel(fn.getSourceFile().fileName);
    stats.stays++;
    stats.rooms.add(file);
    const key = `${file}:${fn.pos}:${index}`;
    const again = seen.has(key);
    if (list)
      stats.lines.push(
        `${"  ".repeat(depth)}${label(fn)} (${index < 0 ? "callback" : `arguments ${index.join(", ")}`})${again ? " (again)" : ""}`,
      );
    if (again) {
      if (returnsOf.get(key)) stats.returns++;
      return; // read once: its calls were walked at its first visit
    }
    const walked = index < 0 ? walkedAll(fn, outer) : new Set(index.flatMap((i) => [...walkedIn(fn, i)]));
    // a constructor keeps the callbacks it is handed in its parameter properties: calls through them are followed
    if (ts.isConstructorDeclaration(fn))
      for (const p of fn.parameters) {
        const b = bindings.get(checker.getSymbolAtLocation(p.name));
        if (b && ts.isIdentifier(p.name) && p.modifiers?.length)
          for (const s of checker.getSymbolsOfParameterPropertyDeclaration(p, p.name.text)) fieldBindings.set(s, b);
      }
    const calls = [];
    let gives = ts.isArrowFunction(fn) && !ts.isBlock(fn.body) && mentions(fn.body, walked);
    const body = (n) => {
      if ((ts.isCallExpression(n) || ts.isNewExpression(n)) && n.arguments) {
        const back = ts.isCallExpression(n) ? callbackOf(n.expression, bindings) : null;
        const target = back ? null : calleeOf(n);
        if (back) calls.push({ target: back.fn, index: -1, bindings: new Map(), outer: back.outer });
        else if (target) {
          const passed = new Map();
          n.arguments.forEach((a, i) => {
            const p = target.parameters[i];
            const cb = p && bindable(a, bindings, walked);
            if (cb) for (const id of names(p.name)) passed.set(checker.getSymbolAtLocation(id), cb);
          });
          const indices = [];
          n.arguments.forEach((a, i) => {
            if (i < target.parameters.length && mentions(a, walked)) indices.push(i);
          });
          if (indices.length > 0 || passed.size > 0) calls.push({ target, index: indices, bindings: passed, outer: walked });
        }
      }
      if (ts.isReturnStatement(n) && n.expression && mentions(n.expression, walked)) gives = true;
      ts.forEachChild(n, body);
    };
    body(fn.body);
    seen.set(key, true);
    returnsOf.set(key, gives);
    if (gives) stats.returns++;
    if (depth >= MAX_DEPTH) return;
    const here = [...pathFiles, file];
    for (const c of calls) {
      const to = rel(c.target.getSourceFile().fileName);
      // a climb: into a file the path has already left (not the one it is in)
      if (to !== file && here.includes(to)) {
        stats.climbs++;
        if (list) stats.lines.push(`${"  ".repeat(depth + 1)}^ climb: ${file} -> ${to}`);
      }
      visit(c.target, c.index, here, depth + 1, c.bindings, c.outer);
    }
  };
  visit(start.fn, [start.index], [], 0, new Map(), new Set());
  return stats;
}

for (const w of WALKS) {
  const s = walk(w);
  console.log(
    `${w.name} (${w.cls}.${w.fn}'s ${w.param}): ${s.stays} stays in ${s.rooms.size} rooms, ${s.climbs} climbs back up, ${s.returns} returns`,
  );
  if (list) console.log(s.lines.join("\n"));
}
