/**
 * The gRPC methods of proto/harmony/v1/harmony.proto and the standard
 * health service, as @grpc/grpc-js definitions whose messages pass through
 * as raw bytes: the server's edge and the bundled client share them, and
 * each side reads and writes the protobuf itself.
 */
import type * as grpc from "@grpc/grpc-js";

export const raw = {
  serialize: (b: Buffer | Uint8Array) => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)),
  deserialize: (b: Buffer) => b,
};

/** A method whose messages pass through as raw bytes. */
function rawMethod(path: string, requestStream: boolean, responseStream: boolean, originalName?: string) {
  return {
    path,
    requestStream,
    responseStream,
    requestSerialize: raw.serialize,
    requestDeserialize: raw.deserialize,
    responseSerialize: raw.serialize,
    responseDeserialize: raw.deserialize,
    ...(originalName ? { originalName } : {}),
  };
}

export const HARMONY_SERVICE: grpc.ServiceDefinition = {
  Stream: rawMethod("/harmony.v1.Harmony/Stream", true, true, "stream"),
  Render: rawMethod("/harmony.v1.Harmony/Render", false, false, "render"),
};

export const HEALTH_SERVICE: grpc.ServiceDefinition = {
  Check: rawMethod("/grpc.health.v1.Health/Check", false, false),
  Watch: rawMethod("/grpc.health.v1.Health/Watch", false, true),
};
