/**
 * Flag and setting text shared by the commands, in a module of its own so
 * `parse` does not load the server's settings table to split a list.
 */

/** A comma-separated setting or flag as a list, each item trimmed (empty: none). */
export function commaList(text: string): string[] {
  return text
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
}
