/**
 * The gRPC edge (@grpc/grpc-js): the bidirectional `harmony.v1.Harmony/Stream`
 * call, and the standard `grpc.health.v1.Health` service.
 *
 * Stream messages pass through as raw bytes: the connection reads ClientFrames
 * with the same reader as the WebSocket edge, and workers' ServerFrame bytes
 * go out untouched. With a token configured, calls must carry
 * `authorization: Bearer <token>` metadata (else UNAUTHENTICATED).
 *
 * A call that fails ends with a gRPC status and `code: message` as its
 * details ({@link grpcError}); a stream's own errors are `error` events, as
 * on the WebSocket edge.
 */
import * as grpc from "@grpc/grpc-js";
import { CLOSE_CODES, type ErrorCode } from "../core/errors.js";
import { HARMONY_SERVICE, HEALTH_SERVICE, raw } from "../protocol/grpc-methods.js";
import { ConnectionGroup, type Transport } from "../service/connection.js";
import type { Service } from "../service/service.js";

export interface GrpcEdge {
  port: number;
  stopAccepting(): void;
  close(): Promise<void>;
}

/** A failed call's status: the gRPC status, and `code` (src/core/errors.ts; at `path` of the request, when given) and the message as its details. */
export function grpcError(
  status: grpc.status,
  code: ErrorCode | keyof typeof CLOSE_CODES,
  message: string,
  path = "",
): Partial<grpc.StatusObject> {
  return { code: status, details: `${code}${path ? ` at ${path}` : ""}: ${message}` };
}

const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;

/**
 * Calls one HTTP/2 connection may have open at once (its SETTINGS
 * MAX_CONCURRENT_STREAMS). Each call is a connection of its own to the
 * service, but they share one budget (`ConnectionGroup`): their streams
 * count together against --max-connection-bytes, their unread answers
 * against the buffer bound.
 */
export const MAX_CALLS_PER_CONNECTION = 128;

export async function startGrpc(svc: Service, host: string, port: number): Promise<GrpcEdge> {
  const limits = svc.limits;
  /** The budgets of the HTTP/2 connections with calls open, by peer address (one TCP connection each). */
  const groups = new Map<string, ConnectionGroup>();
  const server = new grpc.Server({
    "grpc.max_concurrent_streams": MAX_CALLS_PER_CONNECTION,
    "grpc.max_receive_message_length": limits.maxFrameBytes,
    "grpc.keepalive_time_ms": limits.pingIntervalMs,
    "grpc.keepalive_timeout_ms": Math.min(20_000, limits.pingIntervalMs),
    "grpc.max_connection_idle_ms": limits.idleTimeoutMs,
    "grpc.keepalive_permit_without_calls": 1,
  });
  const { HealthCheckRequest, HealthCheckResponse } = svc.schema;
  const healthOf = (request: Buffer): number => {
    let name = "";
    try {
      name = (HealthCheckRequest.toObject(HealthCheckRequest.decode(request)) as { service?: string }).service ?? "";
    } catch {
      return SERVICE_UNKNOWN;
    }
    if (name !== "" && name !== "harmony.v1.Harmony") return SERVICE_UNKNOWN;
    return svc.ready() ? SERVING : NOT_SERVING;
  };
  const healthBytes = (status: number) => Buffer.from(HealthCheckResponse.encode({ status }).finish());

  server.addService(HEALTH_SERVICE, {
    Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const status = healthOf(call.request);
      if (status === SERVICE_UNKNOWN) cb(grpcError(grpc.status.NOT_FOUND, "not_found", "unknown service"));
      else cb(null, healthBytes(status));
    },
    Watch: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      let last = -1;
      const tick = () => {
        const status = healthOf(call.request);
        if (status !== last) call.write(healthBytes(status));
        last = status;
      };
      tick();
      const timer = setInterval(tick, 1000);
      call.on("cancelled", () => clearInterval(timer));
      call.on("close", () => clearInterval(timer));
    },
  });

  server.addService(HARMONY_SERVICE, {
    Render: async (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      if (!svc.authorized(call.metadata.get("authorization")[0]?.toString())) {
        cb(grpcError(grpc.status.UNAUTHENTICATED, "unauthorized", "a valid bearer token is required"));
        return;
      }
      let req: { request_id: string; request_json: string };
      try {
        req = svc.schema.Render.toObject(svc.schema.Render.decode(call.request), { defaults: true }) as typeof req;
      } catch {
        cb(grpcError(grpc.status.INVALID_ARGUMENT, "bad_frame", "not a harmony.v1.Render message"));
        return;
      }
      let r: Awaited<ReturnType<Service["renderJson"]>>;
      try {
        r = await svc.renderJson(req.request_json, svc.tenantOf(call.metadata.get("authorization")[0]?.toString()));
      } catch (e) {
        // a bug, not the request's fault: a status, never a rejection nobody handles
        svc.logger.error({ err: e instanceof Error ? e.message : String(e) }, "render failed");
        cb(grpcError(grpc.status.INTERNAL, "internal", "the render failed"));
        return;
      }
      if (!r.ok) {
        const status = r.error.code === "render_timeout" ? grpc.status.UNAVAILABLE : grpc.status.INVALID_ARGUMENT;
        cb(grpcError(status, r.error.code, r.error.message, r.error.path));
        return;
      }
      const { Rendered } = svc.schema;
      cb(null, Buffer.from(Rendered.encode({ request_id: req.request_id, ids: r.ids, text: r.text, restored: r.restored }).finish()));
    },
    Stream: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      if (!svc.authorized(call.metadata.get("authorization")[0]?.toString())) {
        call.emit("error", grpcError(grpc.status.UNAUTHENTICATED, "unauthorized", "a valid bearer token is required"));
        return;
      }
      let ended = false;
      const transport: Transport = {
        kind: "grpc",
        send(frame, done) {
          const bytes = typeof frame === "string" ? Buffer.from(frame) : raw.serialize(frame);
          call.write(bytes, () => done());
        },
        pause: () => call.pause(),
        resume: () => call.resume(),
        end: (code) => {
          if (ended) return;
          ended = true;
          // a drained call has already told every stream why it ended: finish cleanly
          if (code === CLOSE_CODES.idle_timeout)
            call.emit("error", grpcError(grpc.status.UNAVAILABLE, "idle_timeout", "nothing arrived in time"));
          else if (code === CLOSE_CODES.slow_reader)
            call.emit("error", grpcError(grpc.status.RESOURCE_EXHAUSTED, "slow_reader", "answers left unread"));
          else call.end();
        },
      };
      const peer = call.getPeer();
      let group = groups.get(peer);
      if (group === undefined) groups.set(peer, (group = new ConnectionGroup()));
      const conn = svc.newConnection(transport, svc.tenantOf(call.metadata.get("authorization")[0]?.toString()), group);
      const shared = group;
      call.on("data", (b: Buffer) => conn.onFrame(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)));
      call.on("end", () => {
        conn.finish().catch((e: unknown) => svc.logger.error({ err: e instanceof Error ? e.message : String(e) }, "ending a call failed"));
      });
      call.on("cancelled", () => conn.close());
      call.on("error", () => conn.close());
      call.on("close", () => {
        conn.close();
        if (shared.members.size === 0 && groups.get(peer) === shared) groups.delete(peer);
      });
    },
  });

  // grpc-js logs a failed bind on stderr itself; the rejection is what the caller reports (in one line), so
  // while binding its lines are held (its logger is the console unless set), and given back when the bind works
  const held: unknown[][] = [];
  grpc.setLogger({ error: (...a: unknown[]) => held.push(a) });
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  }).finally(() => grpc.setLogger(console));
  for (const a of held) console.error(...a);
  return {
    port: bound,
    stopAccepting() {
      // tryShutdown refuses new calls and lets open ones finish
      server.tryShutdown(() => undefined);
    },
    async close() {
      server.forceShutdown();
    },
  };
}
