/**
 * Which engine bodies the sidecar's /metrics takes ahead of its own
 * (src/upstream/metrics.ts `expositionProblem`): Prometheus text format 0.0.4
 * that a scrape parses whole, with no series named like the sidecar's.
 */
import { describe, expect, it } from "vitest";
import { expositionProblem } from "../../src/upstream/metrics.js";

const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="openai/gpt-oss-20b"} 0.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="a\\\\b \\"q\\" \\n"} 3 1700000000000
# a comment
python_gc_objects_collected_total{generation="0"} 1234.0
x_bucket{le="+Inf"} 2
y NaN
z -Inf
`;

describe("expositionProblem", () => {
  it("takes Prometheus text, labels with escapes, timestamps, NaN and Inf", () => {
    expect(expositionProblem(VLLM)).toBeNull();
    expect(expositionProblem("")).toBeNull();
    expect(expositionProblem("a 1\r\nb 2\r\n")).toBeNull();
  });

  it.each([
    ["trtllm-serve's /metrics: a JSON list of iteration stats", '[{"iter": 1, "numActiveRequests": 0}]'],
    ["an HTML error page", "<html><body>502 Bad Gateway</body></html>"],
    ["a sample without a value", 'vllm:x{a="b"}\n'],
    ["labels that do not close", 'vllm:x{a="b} 1\n'],
    ["a label value with a bad escape", 'vllm:x{a="\\q"} 1\n'],
    ["a value that is not a number", "vllm:x 1,5\n"],
    ["a second TYPE for one metric", "# TYPE a gauge\n# TYPE a counter\na 1\n"],
    ["an OpenMetrics end marker", "a 1\n# EOF\n"],
  ])("refuses %s", (_name, text) => {
    expect(expositionProblem(text)?.reason).toBe("not_exposition");
  });

  it("refuses a series named like the sidecar's: it would clash in one scrape", () => {
    expect(expositionProblem("harmony_tokens_total 5\n")?.reason).toBe("name_clash");
    expect(expositionProblem("# TYPE harmony_x gauge\n")?.reason).toBe("name_clash");
    expect(expositionProblem("harmony_tokens_total 5\n", null)).toBeNull();
  });

  it("says which line", () => {
    expect(expositionProblem("a 1\nb 2\nc{ 3\n")?.detail).toMatch(/^line 3:/);
  });
});
