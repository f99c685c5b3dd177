/**
 * Who may reach the HTTP edge (docs/security.md): a service on 127.0.0.1 is
 * still reachable from every web page open on the machine, and from a page
 * whose host name is re-pointed at 127.0.0.1 (DNS rebinding). So:
 * - a request or WebSocket upgrade that carries an `Origin` is refused
 *   unless the origin is allowed (`--allow-origin`) or is the service's own
 *   (the inspector page calling its server);
 * - a browser's cross-site request without an `Origin` (`Sec-Fetch-Site:
 *   cross-site` or `same-site`) is refused;
 * - a POST body must be JSON (`content-type: application/json`, or none):
 *   a form or `text/plain` post is what a page can send without asking;
 * - the `Host` must be the bound address (a loopback name when bound to
 *   loopback) or an allowed name (`--allow-host`).
 * Engines and SDKs send no `Origin`, no `Sec-Fetch-*`, and JSON.
 */
import type http from "node:http";
import { ACCESS_DEFAULTS } from "../core/defaults.js";
import type { HttpErrorCode } from "../core/errors.js";

export interface AccessPolicy {
  /** Origins (`scheme://host[:port]`) whose pages may use the service. */
  allowOrigins: readonly string[];
  /** Host names clients may address the service by, besides the bound address. */
  allowHosts: readonly string[];
  /** `/metrics` without the bearer token when one is set. */
  publicMetrics: boolean;
}

/** The default policy (src/core/defaults.ts): the bound address only, no web page but the service's own. */
export const OPEN_ACCESS: AccessPolicy = ACCESS_DEFAULTS;

export interface Refusal {
  status: number;
  code: HttpErrorCode;
  message: string;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host) || host.endsWith(".localhost");
}

/** The host name of a Host header (no port), lower case; "" when absent. */
function hostName(header: string | undefined): string {
  if (!header) return "";
  const h = header.trim().toLowerCase();
  if (h.startsWith("[")) return h.slice(0, h.indexOf("]") + 1);
  const colon = h.lastIndexOf(":");
  return colon >= 0 ? h.slice(0, colon) : h;
}

export class Access {
  private readonly origins: ReadonlySet<string>;
  private readonly hosts: ReadonlySet<string>;
  private readonly loopbackOnly: boolean;

  constructor(
    readonly policy: AccessPolicy,
    /** The address the edge is bound to. */
    bound: string,
  ) {
    this.origins = new Set(policy.allowOrigins.map((o) => o.replace(/\/+$/, "").toLowerCase()));
    this.hosts = new Set(policy.allowHosts.map((h) => h.toLowerCase()));
    this.loopbackOnly = isLoopback(bound.toLowerCase());
  }

  /** Why a request (or WebSocket upgrade) is refused, or null when it may go on. */
  check(req: http.IncomingMessage): Refusal | null {
    const host = hostName(req.headers.host);
    if (this.hosts.size > 0 || this.loopbackOnly) {
      const ok = this.hosts.has(host) || (this.loopbackOnly && isLoopback(host));
      if (!ok) return { status: 421, code: "forbidden_host", message: "this Host is not the service's (see --allow-host)" };
    }
    const origin = req.headers.origin;
    if (origin !== undefined) {
      const o = origin.replace(/\/+$/, "").toLowerCase();
      const own =
        req.headers.host !== undefined &&
        (o === `http://${req.headers.host.toLowerCase()}` || o === `https://${req.headers.host.toLowerCase()}`);
      if (!own && !this.origins.has(o))
        return {
          status: 403,
          code: "forbidden_origin",
          message: "requests from web pages of this origin are refused (see --allow-origin)",
        };
    } else {
      const site = req.headers["sec-fetch-site"];
      if (site === "cross-site" || site === "same-site")
        return { status: 403, code: "forbidden_origin", message: "cross-site browser requests are refused" };
    }
    if (req.method === "POST") {
      const type = req.headers["content-type"];
      if (type !== undefined && !/^application\/json\s*(;|$)/i.test(type)) {
        return { status: 415, code: "unsupported_media_type", message: "the body must be JSON (content-type: application/json)" };
      }
    }
    return null;
  }
}
