/** Rule 12's repairs of a call's arguments, and rule 11's judgement of recipients, on their own. */
import { describe, expect, it } from "vitest";
import { checkArguments } from "../../src/core/arguments.js";
import { HARMONY } from "../../src/core/preset.js";
import { DeclaredTools, judgeRecipient } from "../../src/core/tools.js";

describe("checkArguments", () => {
  it("passes JSON through untouched", () => {
    expect(checkArguments('{"a": 1}', "<|constrain|>json", false)).toEqual({ arguments: '{"a": 1}', validJson: true, repair: null });
  });

  it.each([
    ["over-escaped (rw-018)", '{\\"url\\":\\"https://x\\",\\"max_length\\":5000}', '{"url":"https://x","max_length":5000}', "over_escaped"],
    ["a code fence", '```json\n{"a":1}\n```', '{"a":1}', "code_fence"],
    ["a leading json word", 'json{"a":1}', '{"a":1}', "json_prefix"],
    ["a leading JSON word, after whitespace", '\n JSON {"a":1}', '{"a":1}', "json_prefix"],
    ["a fence after a blank line", "\n```\n[1,2]\n```", "[1,2]", "code_fence"],
    ["a trailing stray word (rw-022)", '{"file_path":"/README.md"}commentary', '{"file_path":"/README.md"}', "trailing_text"],
    ["an extra closing brace", '{"a":{"b":1}}}', '{"a":{"b":1}}', "trailing_text"],
  ])("repairs %s", (_name, raw, fixed, repair) => {
    expect(checkArguments(raw, "<|constrain|>json", false)).toEqual({ arguments: fixed, validJson: true, repair });
  });

  it("closes brackets a stream ended short of, never a string it cut", () => {
    expect(checkArguments('{"a":{"b":[1,2]', "json", true)).toEqual({
      arguments: '{"a":{"b":[1,2]}}',
      validJson: true,
      repair: "missing_closers",
    });
    expect(checkArguments('{"a":{"b":[1,2]', "json", false).repair).toBeNull(); // only at the end of the stream
    expect(checkArguments('{"timezone": "America/Tor', "json", true)).toEqual({
      arguments: '{"timezone": "America/Tor',
      validJson: false,
      repair: null,
    });
  });

  it("leaves what is not meant as JSON alone", () => {
    expect(checkArguments('print("hi")', "code", true)).toEqual({ arguments: 'print("hi")', validJson: false, repair: null });
    expect(checkArguments("not json at all", "<|constrain|>json", true).repair).toBeNull();
    // a python tool's code, with no content type: returned at once (no shape starts with a letter but j)
    for (const code of ["import math\nprint(math.pi)", "  x = {'a': [1]}", "(1, 2)"])
      expect(checkArguments(code, null, true)).toEqual({ arguments: code, validJson: false, repair: null });
  });
});

describe("judgeRecipient", () => {
  const h = (recipient: string | null, contentType: string | null = null) => ({
    role: "assistant",
    name: null,
    channel: "final",
    recipient,
    contentType,
  });

  it("role, channel and content-type words are no tools", () => {
    expect(judgeRecipient(h("json"), null, HARMONY).header).toMatchObject({ recipient: null, contentType: "json" });
    expect(judgeRecipient(h("assistant"), null, HARMONY).header.recipient).toBeNull();
    expect(judgeRecipient(h("analysis"), null, HARMONY).header.recipient).toBeNull();
    expect(judgeRecipient(h("<|constrain|>json"), null, HARMONY).header).toMatchObject({
      recipient: null,
      contentType: "<|constrain|>json",
    });
  });

  it("keeps functions, built-ins and names that read as a function's", () => {
    for (const r of ["functions.get_weather", "python", "browser.search", "container.exec", "search_files"]) {
      expect(judgeRecipient(h(r), null, HARMONY)).toEqual({ header: h(r), repaired: null, unknown: false });
    }
  });

  it("with declared tools: a bare declared name gets functions., an undeclared call is reported", () => {
    const tools = new DeclaredTools(["read_file", "Web Search"]);
    expect(judgeRecipient(h("read_file"), tools, HARMONY).header.recipient).toBe("functions.read_file");
    expect(judgeRecipient(h("functions.Web Search"), tools, HARMONY)).toMatchObject({ repaired: null, unknown: false });
    expect(judgeRecipient(h("functions.nope"), tools, HARMONY).unknown).toBe(true);
    expect(judgeRecipient(h("python"), tools, HARMONY).unknown).toBe(false);
  });

  it("leaves other authors' recipients alone (a tool result is addressed to the assistant)", () => {
    const result = { role: "tool", name: "functions.f", channel: "commentary", recipient: "assistant", contentType: null };
    expect(judgeRecipient(result, null, HARMONY).header).toBe(result);
  });
});
