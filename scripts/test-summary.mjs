// Prints vitest's JSON report as one plain closing line: "N passed, N failed, N skipped".
import { readFileSync } from "node:fs";
const r = JSON.parse(readFileSync(process.argv[2], "utf8"));
const skipped = r.numPendingTests + r.numTodoTests;
console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`);
process.exit(r.numFailedTests > 0 || r.numTotalTests === 0 || !r.success ? 1 : 0);
