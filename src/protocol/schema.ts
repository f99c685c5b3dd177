/**
 * The wire schema, loaded from proto/ with protobufjs (the .proto files are
 * the single source of truth for both transports). Field names keep the
 * proto spelling (snake_case), which is also how the JSON form is printed.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type protobuf from "protobufjs";
import { CodedError } from "../core/errors.js";

/**
 * protobufjs, loaded on first use (it is CommonJS, so `require` loads it
 * synchronously): a parser worker needs it only for the events its frame
 * writer does not encode itself, and starts without it.
 */
let protobufjs: typeof protobuf | undefined;
const loadProtobuf = (): typeof protobuf => (protobufjs ??= createRequire(import.meta.url)("protobufjs") as typeof protobuf);

/** proto/ from both src/ (tests) and dist/src/ (built). */
export function protoDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = path.join(dir, "proto");
    if (existsSync(path.join(candidate, "harmony", "v1", "harmony.proto"))) return candidate;
    dir = path.dirname(dir);
  }
  throw new CodedError("not_built", "proto/ directory not found next to the package");
}

export interface Schema {
  root: protobuf.Root;
  ClientFrame: protobuf.Type;
  Op: protobuf.Type;
  Open: protobuf.Type;
  Close: protobuf.Type;
  Render: protobuf.Type;
  Rendered: protobuf.Type;
  ServerFrame: protobuf.Type;
  Event: protobuf.Type;
  HealthCheckRequest: protobuf.Type;
  HealthCheckResponse: protobuf.Type;
}

let cached: Schema | undefined;

/** The schema, read from proto/ once per thread. */
export function schema(): Schema {
  if (cached) return cached;
  const dir = protoDir();
  const root = new (loadProtobuf().Root)();
  root.resolvePath = (_origin, target) => (path.isAbsolute(target) ? target : path.join(dir, target));
  root.loadSync(["harmony/v1/harmony.proto", "grpc/health/v1/health.proto"], { keepCase: true });
  root.resolveAll();
  cached = schemaOf(root);
  return cached;
}

/** The schema as JSON (`schema().root.toJSON()`), for a worker thread to rebuild without reading and parsing the .proto files again. */
export type SchemaJson = ReturnType<protobuf.Root["toJSON"]>;

/** The schema from its JSON form (see SchemaJson), kept as this thread's. */
export function schemaFromJson(json: SchemaJson): Schema {
  if (cached) return cached;
  const root = loadProtobuf().Root.fromJSON(json);
  root.resolveAll();
  cached = schemaOf(root);
  return cached;
}

const SCHEMA_KEYS = [
  "root",
  "ClientFrame",
  "Op",
  "Open",
  "Close",
  "Render",
  "Rendered",
  "ServerFrame",
  "Event",
  "HealthCheckRequest",
  "HealthCheckResponse",
] as const satisfies readonly (keyof Schema)[];

/**
 * {@link schemaFromJson}, built when one of its members is first read: a
 * worker thread answers its first tasks without loading protobufjs or
 * rebuilding the schema, which most of them never need.
 */
export function lazySchemaFromJson(json: SchemaJson): Schema {
  const lazy = {} as Schema;
  for (const key of SCHEMA_KEYS) Object.defineProperty(lazy, key, { get: () => schemaFromJson(json)[key], enumerable: true });
  return lazy;
}

function schemaOf(root: protobuf.Root): Schema {
  const t = (name: string) => root.lookupType(name);
  return {
    root,
    ClientFrame: t("harmony.v1.ClientFrame"),
    Op: t("harmony.v1.Op"),
    Open: t("harmony.v1.Open"),
    Close: t("harmony.v1.Close"),
    Render: t("harmony.v1.RenderRequest"),
    Rendered: t("harmony.v1.Rendered"),
    ServerFrame: t("harmony.v1.ServerFrame"),
    Event: t("harmony.v1.Event"),
    HealthCheckRequest: t("grpc.health.v1.HealthCheckRequest"),
    HealthCheckResponse: t("grpc.health.v1.HealthCheckResponse"),
  };
}
