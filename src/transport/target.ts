/**
 * The request target, read once: the one normalised path that decides what
 * the edge serves, whether a token is needed, and what the proxy forwards
 * (./proxy.ts). Read twice, a target can mean two things: WHATWG URL
 * parsing reads `//x/health` as host `x` and path `/health` (so it was
 * authorized as the upstream's open probe) while the raw target went on to
 * the upstream as it was; `//tokenize/x/../../health` arrived as `//health`.
 *
 * Only origin-form targets (RFC 9112 §3.2.1: `/path?query`) are taken.
 * Absolute-form (`http://host/path`), authority-form (`host:443`), the
 * asterisk (`*`), and a path that starts with `//` or `/\` (which URL
 * parsers read as a host) are refused with 400 `bad_request_target`. What is
 * served and forwarded is the parsed path: dot segments (`..`, `%2e%2e`)
 * resolved, `\` read as `/`, as WHATWG URL parsing reads them.
 */

/** Where a target is parsed against: a host no request can name, so that one naming a host is seen. */
const BASE_HOST = "sidecar.invalid";

export type Target = { ok: true; url: URL; path: string } | { ok: false; message: string };

/** The request target `raw` (`req.url`) as a URL and the path to serve and forward (`pathname` + `search`), or why it is refused. */
export function readTarget(raw: string | undefined): Target {
  const t = raw ?? "";
  if (!t.startsWith("/")) return { ok: false, message: "the request target must be a path (origin-form, /…), not a URL, a host or *" };
  if (t[1] === "/" || t[1] === "\\") return { ok: false, message: "the request target must not start with // (it would name a host)" };
  let url: URL;
  try {
    url = new URL(t, `http://${BASE_HOST}`);
  } catch {
    return { ok: false, message: "the request target is not a usable path" };
  }
  if (url.host !== BASE_HOST) return { ok: false, message: "the request target must not name a host" };
  return { ok: true, url, path: url.pathname + url.search };
}
