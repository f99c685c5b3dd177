// The linter (`make lint`, part of `make test`): ESLint's and typescript-eslint's recommended rules
// over the sources, tests, benchmarks, scripts and worker entry points. Prettier owns the layout, tsc the types.
import js from "@eslint/js";
import { defineConfig, globalIgnores } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  globalIgnores(["dist/", "node_modules/", "scratch/", "coverage/", "test/fixtures/", "bench/data/"]),
  {
    files: ["**/*.{ts,js,mjs}"],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    rules: {
      // a rest sibling is how the code leaves fields out of a copy: `const { restore: _, ...options } = o`
      "@typescript-eslint/no-unused-vars": ["error", { ignoreRestSiblings: true }],
      // `l` is V8's linear-time engine (node --enable-experimental-regexp-engine), which bench/ measures
      "no-invalid-regexp": ["error", { allowConstructorFlags: ["l"] }],
    },
  },
  // the inspector page's script runs in the browser; the scripts on Node
  { files: ["src/inspect/app.js"], languageOptions: { globals: globals.browser } },
  { files: ["scripts/**/*.mjs", "eslint.config.js"], languageOptions: { globals: globals.node } },
);
