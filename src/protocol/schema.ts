/**
 * The wire schema, loaded from proto/ with protobufjs (the .proto files are
 * the single source of truth for both transports). Field names keep the
 * proto spelling (snake_case), which is also how the JSON form is printed.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import { CodedError } from "../core/errors.js";

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
  const root = new protobuf.Root();
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
  const root = protobuf.Root.fromJSON(json);
  root.resolveAll();
  cached = schemaOf(root);
  return cached;
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
