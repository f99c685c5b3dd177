/**
 * deploy/Dockerfile laid out without a container engine (none runs here):
 * each stage's filesystem is a folder, its COPY lines copy from the build
 * context (the repository less .dockerignore) or an earlier stage, and its
 * RUN lines run where this file knows how. It reads exactly the part of the
 * Dockerfile syntax the project's file uses and refuses everything else by
 * name, so a new instruction has to be taught here before the test passes:
 * - FROM image [AS name], ARG name=default, WORKDIR, ENV k=v …, USER,
 *   EXPOSE, HEALTHCHECK … CMD [json], ENTRYPOINT [json];
 * - COPY [--from=stage] src… dest (shell form; a directory is copied whole);
 * - RUN a && b && … where each command is one of `npm ci …` (run for real;
 *   `--omit=dev` installs production dependencies into the layout; a full
 *   install links the repository's installed node_modules instead, which a
 *   fresh `npm ci` from the same lockfile equals), `node scripts/…` (run in
 *   the stage's WORKDIR) or a cleanup that touches nothing of the layout
 *   (`npm cache clean --force`, `rm -rf /root/.npm /tmp/*`: skipped).
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import path from "node:path";

export interface Instruction {
  op: string;
  /** The rest of the line, continuations joined. */
  args: string;
}

export interface Stage {
  name: string;
  image: string;
  instructions: Instruction[];
}

/** Stages in order, `ARG` defaults applied to FROM. */
export function parseDockerfile(text: string): Stage[] {
  const lines: string[] = [];
  let cur = "";
  for (const raw of text.split("\n")) {
    const line = raw.trimEnd();
    if (cur === "" && (line.trim() === "" || line.trimStart().startsWith("#"))) continue;
    if (line.endsWith("\\")) cur += line.slice(0, -1) + " ";
    else {
      lines.push((cur + line).trim());
      cur = "";
    }
  }
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of lines) {
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`Dockerfile: cannot read ${JSON.stringify(line)}`);
    const op = m[1]!.toUpperCase();
    const rest = m[2]!;
    if (op === "ARG") {
      const [k, v] = rest.split("=");
      args[k!] = v ?? "";
      continue;
    }
    if (op === "FROM") {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      if (!f) throw new Error(`Dockerfile: cannot read FROM ${rest}`);
      const image = f[1]!.replace(/\$\{(\w+)\}/g, (_, k: string) => args[k] ?? "");
      stages.push({ name: f[2] ?? String(stages.length), image, instructions: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`Dockerfile: ${op} before FROM`);
    stages.at(-1)!.instructions.push({ op, args: rest });
  }
  return stages;
}

/** Whether `rel` (a path in the build context) is left out by .dockerignore's patterns. */
export function dockerignored(patterns: string[], rel: string): boolean {
  const parts = rel.split("/");
  for (const p of patterns) {
    if (p.startsWith("!")) throw new Error(`.dockerignore: exceptions (${p}) are not taught to this layout`);
    const re = new RegExp(
      "^" +
        p
          .replace(/^\/+|\/+$/g, "")
          .split("**")
          .map((s) =>
            s
              .replace(/[.+^${}()|[\]\\]/g, "\\$&")
              .replace(/\*/g, "[^/]*")
              .replace(/\?/g, "[^/]"),
          )
          .join(".*") +
        "$",
    );
    // a pattern matches a path or any of its parent folders
    for (let i = 1; i <= parts.length; i++) if (re.test(parts.slice(0, i).join("/"))) return true;
  }
  return false;
}

export interface Layout {
  /** Each stage's root folder, by name. */
  roots: Map<string, string>;
  /** The final stage's WORKDIR, ENV, USER, ENTRYPOINT and HEALTHCHECK command. */
  workdir: string;
  env: Record<string, string>;
  user: string | null;
  entrypoint: string[];
  healthcheck: string[] | null;
  /** What was run, skipped or linked, for the test's messages. */
  log: string[];
}

function jsonArray(text: string, what: string): string[] {
  const v = JSON.parse(text) as unknown;
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw new Error(`Dockerfile: ${what} must be a JSON array of strings`);
  return v;
}

/** Shell words of a RUN command (no quoting is used in the project's file). */
function words(cmd: string): string[] {
  if (/["'`$]/.test(cmd.replace(/^rm -rf \/root\/\.npm \/tmp\/\*$/, "")))
    throw new Error(`Dockerfile: RUN ${cmd}: quoting and variables are not taught to this layout`);
  return cmd.split(/\s+/).filter((w) => w !== "");
}

/**
 * Lay every stage out under `dir`: `context` is the repository root,
 * `installed` a node_modules folder a full `npm ci` of the same lockfile made.
 */
export function layOut(dockerfile: string, context: string, dir: string, installed: string): Layout {
  const stages = parseDockerfile(readFileSync(dockerfile, "utf8"));
  const ignore = readFileSync(path.join(context, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const roots = new Map<string, string>();
  const log: string[] = [];
  let last: Layout | null = null;
  for (const stage of stages) {
    const root = path.join(dir, stage.name);
    mkdirSync(root, { recursive: true });
    roots.set(stage.name, root);
    let workdir = "/";
    const env: Record<string, string> = {};
    let user: string | null = null;
    let entrypoint: string[] = [];
    let healthcheck: string[] | null = null;
    const at = (p: string) => path.join(root, path.posix.isAbsolute(p) ? p : path.posix.join(workdir, p));
    for (const { op, args } of stage.instructions) {
      switch (op) {
        case "WORKDIR":
          workdir = path.posix.isAbsolute(args) ? args : path.posix.join(workdir, args);
          mkdirSync(at("."), { recursive: true });
          break;
        case "ENV":
          for (const pair of args.split(/\s+/)) {
            const eq = pair.indexOf("=");
            if (eq <= 0) throw new Error(`Dockerfile: ENV ${args}: only k=v pairs are taught to this layout`);
            env[pair.slice(0, eq)] = pair.slice(eq + 1);
          }
          break;
        case "USER":
          user = args;
          break;
        case "EXPOSE":
          break;
        case "ENTRYPOINT":
          entrypoint = jsonArray(args, "ENTRYPOINT");
          break;
        case "HEALTHCHECK": {
          const cmd = /\bCMD\s+(\[.*\])$/.exec(args);
          if (!cmd) throw new Error(`Dockerfile: HEALTHCHECK ${args}: only the CMD [json] form is taught to this layout`);
          healthcheck = jsonArray(cmd[1]!, "HEALTHCHECK CMD");
          break;
        }
        case "COPY": {
          const parts = args.split(/\s+/);
          const from = parts[0]!.startsWith("--from=") ? parts.shift()!.slice("--from=".length) : null;
          if (parts.some((p) => p.startsWith("--")))
            throw new Error(`Dockerfile: COPY ${args}: flags other than --from are not taught to this layout`);
          const dest = parts.pop()!;
          for (const src of parts) {
            const target = dest.endsWith("/") || parts.length > 1 ? path.join(at(dest), path.basename(src)) : at(dest);
            if (from !== null) {
              const fromRoot = roots.get(from);
              if (!fromRoot) throw new Error(`Dockerfile: COPY --from=${from}: no such stage before it`);
              const s = path.join(fromRoot, src);
              if (!existsSync(s)) throw new Error(`Dockerfile: COPY --from=${from} ${src}: not in that stage`);
              cpSync(s, target, { recursive: true, dereference: true });
            } else {
              if (dockerignored(ignore, src)) throw new Error(`Dockerfile: COPY ${src}: .dockerignore leaves it out of the context`);
              const s = path.join(context, src);
              if (!existsSync(s)) throw new Error(`Dockerfile: COPY ${src}: not in the context`);
              cpSync(s, target, {
                recursive: true,
                filter: (p) =>
                  !dockerignored(ignore, path.relative(context, p).split(path.sep).join("/")) || path.relative(context, p) === "",
              });
            }
          }
          break;
        }
        case "RUN":
          for (const cmd of args.split("&&").map((c) => c.trim())) {
            const w = words(cmd);
            const cwd = at(".");
            if (w[0] === "npm" && w[1] === "ci") {
              if (w.includes("--omit=dev")) {
                execFileSync("npm", [...w.slice(1), "--no-audit", "--no-fund"], {
                  cwd,
                  stdio: "pipe",
                  env: { ...process.env, NODE_ENV: env.NODE_ENV ?? "" },
                });
                log.push(`${stage.name}: ran ${cmd}`);
              } else {
                symlinkSync(installed, path.join(cwd, "node_modules"), "dir");
                log.push(`${stage.name}: ${cmd}: linked the repository's node_modules`);
              }
            } else if (w[0] === "node" && w[1]?.startsWith("scripts/")) {
              execFileSync(process.execPath, w.slice(1), { cwd, stdio: "pipe" });
              log.push(`${stage.name}: ran ${cmd}`);
            } else if (cmd === "npm cache clean --force" || cmd === "rm -rf /root/.npm /tmp/*") {
              log.push(`${stage.name}: skipped ${cmd} (cleans nothing of the layout)`);
            } else throw new Error(`Dockerfile: RUN ${cmd}: not taught to this layout`);
          }
          break;
        default:
          throw new Error(`Dockerfile: ${op} is not taught to this layout`);
      }
    }
    last = { roots, workdir, env, user, entrypoint, healthcheck, log };
  }
  if (!last) throw new Error("Dockerfile: no stage");
  return last;
}

/** Every file under `dir` (not following links) with its size and mtime: what a read-only root would forbid changing. */
export function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isSymbolicLink()) out.set(p, "link");
      else if (e.isDirectory()) walk(p);
      else {
        const s = statSync(p);
        out.set(p, `${s.size}:${s.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return out;
}
