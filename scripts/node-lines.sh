#!/usr/bin/env bash
# The build checked on each supported Node.js line besides the machine's own
# (make test runs it after the suite): npm's `node` package provides each line.
# On each line:
#   - npm's engine check over the lockfile (npm ci --dry-run): no EBADENGINE;
#   - the build (scripts/build.mjs: its output is the same on every line);
#   - the tests that exercise what differs between lines: the codec against the
#     reference vectors, the vocabulary against tiktoken (and V8's Unicode tables),
#     worker threads, the real binary, and the container image's layout (run as
#     the image runs it, on its own line).
# NODE_LINES overrides the lines (default: the lines package.json's engines names,
# the first number of each `||` alternative).
set -euo pipefail
cd "$(dirname "$0")/.."

lines="${NODE_LINES:-$(node -p 'require("./package.json").engines.node.split("||").map((r) => r.match(/\d+/)[0]).join(" ")')}"
own="$(node -p 'process.versions.node.split(".")[0]')"
# the machine's npm, run by each line's node (its engine check reads the node that runs it)
npm_cli="$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js"
[ -f "$npm_cli" ] || { echo "node-lines: cannot find npm's npm-cli.js beside $(command -v npm)" >&2; exit 1; }
tests=(test/core/conformance.test.ts test/vocab test/pool test/service/deadline-worker.test.ts test/e2e/serve-process.test.ts test/e2e/cli.test.ts test/deploy/image.test.ts)

for line in $lines; do
  [ "$line" = "$own" ] && continue
  echo "== Node $line"
  bin="$(npx -y "node@$line" -p process.execPath)"
  "$bin" --version
  out="$("$bin" "$npm_cli" ci --dry-run --no-audit --no-fund 2>&1)"
  if grep -q EBADENGINE <<<"$out"; then
    echo "$out" | grep -A4 EBADENGINE >&2
    echo "node-lines: npm reports packages that do not support Node $line" >&2
    exit 1
  fi
  PATH="$(dirname "$bin"):$PATH" "$bin" scripts/build.mjs
  PATH="$(dirname "$bin"):$PATH" "$bin" node_modules/vitest/vitest.mjs run --reporter=dot "${tests[@]}"
done
