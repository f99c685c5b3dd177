/**
 * Validation of rendered manifests against the Kubernetes schemas, two ways:
 * - schema: each object through its typed model's `validate()`
 *   (kubernetes-models for the built-in kinds, @kubernetes-models/prometheus-
 *   operator for PodMonitor, ServiceMonitor and PrometheusRule: types, enums,
 *   required fields, formats), and the InferencePool through the JSON schema
 *   in inferencepool-schema.ts;
 * - field names: those models' schemas accept unknown fields (a typo such as
 *   `readinesProbe` would pass), so every object is also type-checked by the
 *   TypeScript compiler as an object literal of the same model's interface,
 *   where an unknown field at any depth is an error (excess property check).
 */
import { Ajv } from "ajv";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { Secret, Service } from "kubernetes-models/v1";
import { PodMonitor, PrometheusRule, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { INFERENCE_POOL_SCHEMA } from "./inferencepool-schema.js";
import type { K8sObject } from "./kustomize.js";

interface Kind {
  /** Validates against the schema; throws with the violations. */
  validate(o: K8sObject): void;
  /** The TypeScript module and interface the object must be an instance of. */
  typeModule?: string;
  typeName?: string;
}

function model(Ctor: new (data: never) => { validate(): void }, typeModule: string, typeName: string): Kind {
  return { validate: (o) => new Ctor(o as never).validate(), typeModule, typeName };
}

const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
const validatePool = ajv.compile(INFERENCE_POOL_SCHEMA);

export const KINDS: Record<string, Kind> = {
  "apps/v1/Deployment": model(Deployment, "kubernetes-models/apps/v1", "IDeployment"),
  "v1/Service": model(Service, "kubernetes-models/v1", "IService"),
  "v1/Secret": model(Secret, "kubernetes-models/v1", "ISecret"),
  "autoscaling/v2/HorizontalPodAutoscaler": model(HorizontalPodAutoscaler, "kubernetes-models/autoscaling/v2", "IHorizontalPodAutoscaler"),
  "policy/v1/PodDisruptionBudget": model(PodDisruptionBudget, "kubernetes-models/policy/v1", "IPodDisruptionBudget"),
  "networking.k8s.io/v1/NetworkPolicy": model(NetworkPolicy, "kubernetes-models/networking.k8s.io/v1", "INetworkPolicy"),
  "monitoring.coreos.com/v1/PodMonitor": model(
    PodMonitor,
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
    "IPodMonitor",
  ),
  "monitoring.coreos.com/v1/ServiceMonitor": model(
    ServiceMonitor,
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
    "IServiceMonitor",
  ),
  "monitoring.coreos.com/v1/PrometheusRule": model(
    PrometheusRule,
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
    "IPrometheusRule",
  ),
  "inference.networking.k8s.io/v1/InferencePool": {
    validate(o) {
      if (!validatePool(o)) throw new Error(ajv.errorsText(validatePool.errors, { dataVar: "InferencePool" }));
    },
  },
};

/** Schema violations of one object ("" when valid). */
export function schemaErrors(o: K8sObject): string {
  const kind = KINDS[`${o.apiVersion}/${o.kind}`];
  if (!kind) return `no schema for ${o.apiVersion} ${o.kind}`;
  try {
    kind.validate(o);
    return "";
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * TypeScript diagnostics of `const o: IKind = <object>;` for every object
 * (unknown fields, wrong types), as "label: message" lines.
 */
export function typeErrors(objects: { label: string; object: K8sObject }[]): string[] {
  const imports = new Map<string, Set<string>>();
  const lines: string[] = [];
  const labels: string[] = [];
  objects.forEach(({ label, object }) => {
    const kind = KINDS[`${object.apiVersion}/${object.kind}`];
    if (!kind?.typeModule || !kind.typeName) return;
    if (!imports.has(kind.typeModule)) imports.set(kind.typeModule, new Set());
    imports.get(kind.typeModule)!.add(kind.typeName);
    labels.push(label);
    lines.push(`export const o${labels.length - 1}: ${kind.typeName} = ${JSON.stringify(object, null, 1)};`);
  });
  const header = [...imports].map(([m, names]) => `import type { ${[...names].join(", ")} } from ${JSON.stringify(m)};`);
  const source = [...header, ...lines].join("\n") + "\n";
  // a virtual file inside the repository, so node_modules resolves as for a test
  const file = path.join(root, "test/deploy/__manifests__.ts");
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) =>
    path.resolve(name) === file ? ts.createSourceFile(name, source, lang) : getSourceFile(name, lang, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => path.resolve(name) === file || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (path.resolve(name) === file ? source : readFile(name));
  const program = ts.createProgram([file], options, host);
  const sf = program.getSourceFile(file)!;
  const declStart = header.length; // line index of o0
  const lineStarts = lines.map((_, i) => sf.getPositionOfLineAndCharacter(declStart + countLines(lines, i), 0));
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (d.file?.fileName !== sf.fileName || d.start === undefined) return `(setup) ${msg}`;
    let which = 0;
    while (which + 1 < lineStarts.length && lineStarts[which + 1]! <= d.start) which++;
    const text = sf.text.slice(d.start, d.start + (d.length ?? 0));
    return `${labels[which]}: ${msg} (at ${text.slice(0, 60)})`;
  });
}

function countLines(lines: string[], upTo: number): number {
  let n = 0;
  for (let i = 0; i < upTo; i++) n += lines[i]!.split("\n").length;
  return n;
}
