/**
 * A streamed HTTP response written to a socket of one's own, as node's
 * server makes one for an HTTP/1.1 POST (chunked framing, the head on the
 * first write): for running the front's answers in process, with no server
 * in front of them (./inproc.ts, and the tests of the answers' bytes).
 */
import http from "node:http";
import type net from "node:net";

export function responseOn(sock: net.Socket): http.ServerResponse {
  const req = new http.IncomingMessage(sock);
  req.method = "POST";
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = "1.1";
  const res = new http.ServerResponse(req);
  res.assignSocket(sock);
  return res;
}
