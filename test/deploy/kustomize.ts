/**
 * A small Kustomize renderer for deploy/kustomize/, so the manifests are
 * rendered and checked by `make test` on any machine with Node (no kubectl).
 * It implements exactly the part of Kustomize those kustomizations use, and
 * refuses everything else by name instead of guessing:
 * - `resources`: YAML files (one or more documents) and directories holding a
 *   kustomization.yaml, rendered first, in order;
 * - `patches` with `path`: strategic-merge patches, each aimed at the one
 *   resource with the patch's apiVersion, kind and metadata.name. Maps merge
 *   key by key (a null deletes); a list merges by its patch merge key where
 *   Kubernetes gives one (containers, initContainers and volumes by name, env
 *   by name, volumeMounts by mountPath, a container's ports by containerPort,
 *   a Service's ports by port; the patch's items come first, as Kustomize
 *   orders them) and is replaced where Kubernetes replaces it (args,
 *   command). Any other list in a patch, and any `$patch` directive, is an
 *   error;
 * - `images`: name → newName / newTag / digest on containers and
 *   initContainers of pod templates.
 * Where kubectl is installed, manifests.test.ts also compares this renderer's
 * output with `kubectl kustomize`.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";

export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
};

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

const KUSTOMIZATION_FIELDS = new Set(["apiVersion", "kind", "resources", "patches", "images"]);
const PATCH_FIELDS = new Set(["path"]);
const IMAGE_FIELDS = new Set(["name", "newName", "newTag", "digest"]);

export function readYamlDocuments(file: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(file, "utf8"), { prettyErrors: true });
  const out: unknown[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join("; ")}`);
    const v = d.toJS({ maxAliasCount: 0 });
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function asK8sObject(v: unknown, where: string): K8sObject {
  if (!isObject(v) || typeof v.apiVersion !== "string" || typeof v.kind !== "string" || !isObject(v.metadata))
    throw new Error(`${where}: not a Kubernetes object (apiVersion, kind and metadata are required)`);
  if (typeof v.metadata.name !== "string" || v.metadata.name === "") throw new Error(`${where}: metadata.name is required`);
  return v as unknown as K8sObject;
}

export function objectId(o: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }): string {
  return `${o.apiVersion}/${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
}

/** Render the kustomization in `dir` (a directory holding kustomization.yaml). */
export function renderKustomization(dir: string): K8sObject[] {
  const file = path.join(dir, "kustomization.yaml");
  if (!existsSync(file)) throw new Error(`${dir}: no kustomization.yaml`);
  const [k, ...rest] = readYamlDocuments(file);
  if (!isObject(k) || rest.length > 0) throw new Error(`${file}: one mapping expected`);
  if (k.apiVersion !== "kustomize.config.k8s.io/v1beta1" || k.kind !== "Kustomization")
    throw new Error(`${file}: apiVersion kustomize.config.k8s.io/v1beta1, kind Kustomization expected`);
  for (const key of Object.keys(k))
    if (!KUSTOMIZATION_FIELDS.has(key)) throw new Error(`${file}: field ${key} is not supported by this renderer`);

  const objects: K8sObject[] = [];
  for (const r of list(k.resources, `${file}: resources`)) {
    if (typeof r !== "string") throw new Error(`${file}: a resource must be a path`);
    const p = path.resolve(dir, r);
    if (!existsSync(p)) throw new Error(`${file}: resource ${r} does not exist`);
    if (statSync(p).isDirectory()) objects.push(...renderKustomization(p));
    else {
      if (path.relative(dir, p).startsWith("..")) throw new Error(`${file}: ${r} is outside the kustomization root (Kustomize refuses it)`);
      readYamlDocuments(p).forEach((d, i) => objects.push(asK8sObject(d, `${p} document ${i + 1}`)));
    }
  }
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new Error(`${file}: ${id} appears twice`);
    seen.add(id);
  }

  for (const p of list(k.patches, `${file}: patches`)) {
    if (!isObject(p)) throw new Error(`${file}: a patch must be a mapping`);
    for (const key of Object.keys(p)) if (!PATCH_FIELDS.has(key)) throw new Error(`${file}: patch field ${key} is not supported`);
    if (typeof p.path !== "string") throw new Error(`${file}: a patch needs a path`);
    const pf = path.resolve(dir, p.path);
    for (const [i, doc] of readYamlDocuments(pf).entries()) {
      const patch = asK8sObject(doc, `${pf} document ${i + 1}`);
      const targets = objects.filter(
        (o) => o.apiVersion === patch.apiVersion && o.kind === patch.kind && o.metadata.name === patch.metadata.name,
      );
      if (targets.length !== 1) throw new Error(`${pf}: ${targets.length} resources match ${patch.kind}/${patch.metadata.name}`);
      const target = targets[0]!;
      const merged = strategicMerge(
        target as unknown as JsonObject,
        patch as unknown as JsonObject,
        patch.kind,
        pf,
      ) as unknown as K8sObject;
      objects[objects.indexOf(target)] = merged;
    }
  }

  for (const img of list(k.images, `${file}: images`)) {
    if (!isObject(img) || typeof img.name !== "string") throw new Error(`${file}: an image needs a name`);
    for (const key of Object.keys(img)) if (!IMAGE_FIELDS.has(key)) throw new Error(`${file}: image field ${key} is not supported`);
    for (const o of objects) for (const c of podContainers(o)) c.image = retag(c.image, img);
  }
  return objects;
}

function list(v: Json | undefined, where: string): Json[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new Error(`${where} must be a list`);
  return v;
}

/** The containers and init containers of an object's pod template (Deployment, StatefulSet, …) or pod. */
export function podContainers(o: K8sObject): { name: string; image?: string; [k: string]: unknown }[] {
  const spec = o.spec as JsonObject | undefined;
  const podSpec = o.kind === "Pod" ? spec : ((spec?.template as JsonObject | undefined)?.spec as JsonObject | undefined);
  if (!podSpec) return [];
  return [...((podSpec.initContainers as JsonObject[]) ?? []), ...((podSpec.containers as JsonObject[]) ?? [])] as {
    name: string;
    image?: string;
  }[];
}

function retag(image: string | undefined, img: JsonObject): string | undefined {
  if (image === undefined) return image;
  const at = image.indexOf("@");
  const beforeDigest = at >= 0 ? image.slice(0, at) : image;
  const colon = beforeDigest.lastIndexOf(":");
  const name = colon > beforeDigest.lastIndexOf("/") ? beforeDigest.slice(0, colon) : beforeDigest;
  if (name !== img.name) return image;
  const tag = colon > beforeDigest.lastIndexOf("/") ? beforeDigest.slice(colon + 1) : undefined;
  const newName = typeof img.newName === "string" ? img.newName : name;
  if (typeof img.digest === "string") return `${newName}@${img.digest}`;
  const newTag = typeof img.newTag === "string" ? img.newTag : tag;
  return newTag === undefined ? newName : `${newName}:${newTag}`;
}

/**
 * Which type a field leads to, and how its lists merge: the part of the
 * Kubernetes types (their patchMergeKey / patchStrategy tags) the patches here
 * touch. A list not named here may not appear in a patch.
 */
const FIELD_TYPES: Record<string, Record<string, string>> = {
  Deployment: { metadata: "ObjectMeta", spec: "DeploymentSpec" },
  StatefulSet: { metadata: "ObjectMeta", spec: "DeploymentSpec" },
  Service: { metadata: "ObjectMeta", spec: "ServiceSpec" },
  DeploymentSpec: { template: "PodTemplateSpec", selector: "LabelSelector" },
  PodTemplateSpec: { metadata: "ObjectMeta", spec: "PodSpec" },
  PodSpec: { containers: "Container", initContainers: "Container", volumes: "Volume" },
  Container: { ports: "ContainerPort", env: "EnvVar", volumeMounts: "VolumeMount" },
  ServiceSpec: { ports: "ServicePort" },
};
const MERGE_KEYS: Record<string, Record<string, string>> = {
  PodSpec: { containers: "name", initContainers: "name", volumes: "name" },
  Container: { ports: "containerPort", env: "name", volumeMounts: "mountPath" },
  ServiceSpec: { ports: "port" },
};
const REPLACED_LISTS: Record<string, Set<string>> = {
  Container: new Set(["args", "command"]),
};

function strategicMerge(base: Json | undefined, patch: Json, type: string | undefined, where: string): Json {
  // nothing to merge with: the patch's value is taken whole
  if (base === undefined) return plain(patch, where);
  if (!isObject(patch)) return patch;
  const out: JsonObject = isObject(base) ? { ...base } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith("$")) throw new Error(`${where}: the ${key} directive is not supported by this renderer`);
    if (value === null) {
      delete out[key];
      continue;
    }
    const fieldType = type ? FIELD_TYPES[type]?.[key] : undefined;
    if (Array.isArray(value)) {
      const mergeKey = type ? MERGE_KEYS[type]?.[key] : undefined;
      if (mergeKey) out[key] = mergeList(out[key], value, mergeKey, fieldType, `${where}: ${key}`);
      else if (type && REPLACED_LISTS[type]?.has(key)) out[key] = value;
      else throw new Error(`${where}: this renderer does not know how Kustomize merges the list ${type ?? "?"}.${key}`);
    } else out[key] = strategicMerge(out[key], value, fieldType, where);
  }
  return out;
}

function mergeList(base: Json | undefined, patch: Json[], key: string, itemType: string | undefined, where: string): Json[] {
  // Kustomize's order: the patch's items first, in its order (merged into the
  // base's item with the same key, if any), then the base's other items
  const rest: Json[] = Array.isArray(base) ? [...base] : [];
  const out: Json[] = [];
  for (const item of patch) {
    if (!isObject(item) || item[key] === undefined) throw new Error(`${where}: every item needs its merge key ${key}`);
    const i = rest.findIndex((b) => isObject(b) && b[key] === item[key]);
    if (i >= 0) out.push(strategicMerge(rest.splice(i, 1)[0], item, itemType, where));
    else out.push(plain(item, where));
  }
  return [...out, ...rest];
}

/** A value with no patch directive and no null in it (both would mean something to Kustomize). */
function plain(v: Json, where: string): Json {
  if (Array.isArray(v)) return v.map((x) => plain(x, where));
  if (!isObject(v)) return v;
  for (const [k, x] of Object.entries(v)) {
    if (k.startsWith("$")) throw new Error(`${where}: the ${k} directive is not supported by this renderer`);
    if (x === null) throw new Error(`${where}: a null (${k}) in a new value is not supported by this renderer`);
    plain(x, where);
  }
  return v;
}
