# harmony-sidecar: every target installs what it needs first.
NODE_MODULES := node_modules/.package-lock.json
BUILD := dist/.built

.PHONY: install build test test-node-lines run bench bench-front bench-store typecheck lint format format-check clean

$(NODE_MODULES): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: $(NODE_MODULES)

# tsc, the files of src/ the built code reads (the inspector page), the vocabulary table file (scripts/build.mjs)
$(BUILD): $(NODE_MODULES) $(shell find src -type f 2>/dev/null) $(shell find workers bench -name "*.ts" 2>/dev/null) tsconfig.json scripts/build.mjs
	node scripts/build.mjs

# the browser tests drive Debian's Chromium (never a browser download)
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "make test needs Debian's chromium package: sudo apt-get install -y chromium" >&2; exit 1; fi

# the shared reasoning store's tests start Debian's redis-server (never a mock, never a download)
REDIS_SERVER := /usr/bin/redis-server
$(REDIS_SERVER):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	else echo "make test needs Debian's redis-server package: sudo apt-get install -y redis-server" >&2; exit 1; fi

build: $(BUILD)

# the sources, the inspector page and the tests (vitest itself runs tests without checking types)
typecheck: $(NODE_MODULES)
	npx tsc -p tsconfig.json --noEmit
	npx tsc -p src/inspect/tsconfig.json
	npx tsc -p test/tsconfig.json

# the linter: ESLint with typescript-eslint's recommended rules (eslint.config.js) over src/, test/, bench/, scripts/, workers/
lint: $(NODE_MODULES)
	npx eslint .

format: $(NODE_MODULES)
	npx prettier --write .

# the formatter's check runs first: a mis-formatted file fails make test (make format fixes it)
format-check: $(NODE_MODULES)
	npx prettier --check .

# formatting, lint and types, the suite, then the build and the tests that differ between Node lines on each other supported line (scripts/node-lines.sh)
test: $(BUILD) $(CHROMIUM) $(REDIS_SERVER) format-check lint typecheck
	npx vitest run --reporter=default --reporter=json --outputFile.json=dist/test-report.json; \
	  status=$$?; node scripts/test-summary.mjs dist/test-report.json || status=1; \
	  if [ $$status -eq 0 ]; then scripts/node-lines.sh || status=1; fi; exit $$status

test-node-lines: $(BUILD) $(CHROMIUM) $(REDIS_SERVER)
	scripts/node-lines.sh

run: $(BUILD)
	node dist/src/cli.js serve

# one folder per benchmark, bench/<name>/main.ts, each run with its own flags: make bench-service FLAGS="--runs 1"
.PHONY: bench-service bench-hostile bench-answer-check bench-bpe bench-startup bench-front-inproc
bench: $(BUILD)
	node dist/bench/parser/main.js $(FLAGS)

bench-service: $(BUILD)
	node dist/bench/service/main.js $(FLAGS)

bench-hostile: $(BUILD)
	node dist/bench/hostile/main.js $(FLAGS)

# the OpenAI front's cost per token beside a plain SSE relay (bench/front/README.md; FLAGS="..." passes flags)
bench-front: $(BUILD)
	node dist/bench/front/main.js $(FLAGS)

# the front's own work per token in one process, tight and paced (bench/front/README.md)
bench-front-inproc: $(BUILD)
	node dist/bench/front/inproc.js $(FLAGS)

bench-store: $(BUILD) $(REDIS_SERVER)
	node dist/bench/store/main.js $(FLAGS)

bench-answer-check: $(BUILD)
	node dist/bench/answer-check/main.js $(FLAGS)

bench-bpe: $(BUILD)
	node dist/bench/bpe/main.js $(FLAGS)

bench-startup: $(BUILD)
	node dist/bench/startup/main.js $(FLAGS)

clean:
	rm -rf dist
