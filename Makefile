# fluidbox — everything here needs only Go, except `make e2e` (Node, Chromium).
GO        ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
BUILD     := .build
FN        ?= control
EVENT     ?= events/control/create-session.json

.PHONY: run test test-chaos build invoke bench validate e2e e2e-asl e2e-browser e2e-mcp e2e-claude e2e-claude-install e2e-runner e2e-agent-sdk e2e-conformance fmt

## run: the local control plane on 127.0.0.1:8080 (FLUIDBOX_ADDR to change).
## It builds .build/fluidbox first, naming each package as it compiles (-v):
## on a fresh machine that is every dependency, a few minutes; after, seconds.
run:
	@mkdir -p $(BUILD)
	@echo "building .build/fluidbox (the first build compiles every dependency, a few minutes on 2 cores; later builds take seconds)..."
	@$(GO) build -v -o $(BUILD)/fluidbox ./cmd/fluidbox
	$(BUILD)/fluidbox dev --print-webhook-secret

## test: gofmt and vet, then every Go test with -race, against real local servers
# vet runs with -race so that it type-checks against the race build of every
# package, which the tests then reuse; plain vet compiled them all a second
# time, in the default configuration, on a fresh cache.
test:
	@unformatted="$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(find . -name '*.go' -not -path './.build/*' -not -path '*/node_modules/*'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files are not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -race ./...
	@# No function of shared/ past cyclomatic complexity 25 (it exits 1
	@# and lists them): split it into named steps.
	$(GO) tool gocyclo -over 25 shared
	@# The e2e suites build only with their tag; vet them here so that a
	@# change that breaks them fails make test, not the next make e2e.
	$(GO) vet -tags e2e ./cmd/fluidbox/ ./shared/connection/ ./shared/web/ ./shared/internal/e2e/...
	$(GO) test -race -count=1 -timeout 15m ./...

## test-chaos: the table-talking suites with every test's DynamoDB failing
## 20% of transactions for TransactionConflict and 5% of requests for throttling
test-chaos:
	FLUIDBOX_TEST_CHAOS=conflict=0.2,throttle=0.05 $(GO) test -count=1 -timeout 15m ./shared/api/ ./shared/admission/ ./shared/approval/ ./shared/ledger/ ./shared/client/ ./shared/connection/ ./shared/expiry/

## build: each function as a linux/arm64 bootstrap in .build/<fn>/
build:
	@for fn in $(FUNCTIONS); do \
	  echo "build $$fn"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' \
	    -o $(BUILD)/$$fn/bootstrap ./functions/$$fn || exit 1; \
	done
	@ls -l $(BUILD)/*/bootstrap

## invoke: FN=control EVENT=events/control/create-session.json — run a built
## bootstrap under the Lambda Runtime Interface Emulator (our `sam local invoke`)
invoke:
	$(GO) run ./shared/internal/invoke -fn $(FN) -event $(EVENT)

## bench: benchmarks against minidyn and the pure gate (not part of test),
## then each HTTP function's bootstrap init and gzipped size beside hello-world's,
## and the model proxy's inspection beside a plain httputil.ReverseProxy
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./shared/ledger/ ./shared/run/ ./shared/gate/ ./bench/cedar/ ./shared/schemaguard/ ./shared/policy/
	$(GO) test -run '^$$' -bench . -benchtime 50x ./shared/permission/
	$(GO) test -run '^$$' -bench . -benchtime 20x ./bench/lambdainit/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./bench/modelproxy/
	$(GO) test -run '^$$' -bench MultiProcess -benchtime 400x ./cmd/fluidbox/

## validate: template.yaml against the SAM schema and our IAM rules, offline
validate:
	$(GO) test -count=1 ./infra/...

## e2e: suites that need Node or a browser. Installs what it needs into
## .build/node (ignored): asl-validator over infra/*.asl.json, offline; and
## the approvals page in headless Chromium (Debian's chromium package,
## installed with apt-get when missing): admin token, SSO sign-in through a
## test issuer, phone width, render.js against shared/render; screenshots
## in .build/e2e.
NODE_DIR      := $(BUILD)/node
ASL_VALIDATOR := $(NODE_DIR)/node_modules/.bin/asl-validator
ASL_VERSION   := 4.0.0

e2e: e2e-asl e2e-browser e2e-mcp e2e-claude e2e-runner e2e-agent-sdk e2e-conformance

e2e-asl:
	@command -v node >/dev/null || { echo "e2e: node is not installed; it is needed for asl-validator (install Node.js 20+)"; exit 1; }
	@command -v npm >/dev/null || { echo "e2e: npm is not installed; it is needed to install asl-validator@$(ASL_VERSION)"; exit 1; }
	@if [ "$$($(ASL_VALIDATOR) --version 2>/dev/null)" != "$(ASL_VERSION)" ]; then \
	  echo "e2e: installing asl-validator@$(ASL_VERSION) into $(NODE_DIR)"; \
	  mkdir -p $(NODE_DIR) && npm install --prefix $(NODE_DIR) --no-save --no-audit --no-fund --silent asl-validator@$(ASL_VERSION) \
	    || { echo "e2e: could not install asl-validator@$(ASL_VERSION) from the npm registry"; exit 1; }; \
	fi
	@set -e; for f in infra/*.asl.json; do $(ASL_VALIDATOR) --json-path $$f; done

# CHROMIUM: the browser the page test drives (FLUIDBOX_CHROMIUM to the test).
CHROMIUM ?= $(shell command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null)
E2E_OUT  := $(abspath $(BUILD)/e2e)

e2e-browser:
	@chromium="$(CHROMIUM)"; \
	if [ -z "$$chromium" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "e2e: Chromium is missing; installing Debian's chromium package (apt-get update && apt-get install -y chromium)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	      || { echo "e2e: apt-get could not install chromium"; exit 1; }; \
	  else \
	    echo "e2e: Chromium is missing and cannot be installed here (needs root and apt-get): install Debian's chromium package, or set CHROMIUM=/path/to/chromium"; exit 1; \
	  fi; \
	fi
	@mkdir -p $(E2E_OUT)
	FLUIDBOX_CHROMIUM="$$(command -v $(or $(CHROMIUM),chromium))" $(GO) test -tags e2e -count=1 -timeout 5m -run 'TestBrowser' -v \
	  -artifacts -outputdir $(E2E_OUT) ./cmd/fluidbox/ ./shared/web/

# MCP interop: refresh and a brokered call against a server nobody here wrote,
# @modelcontextprotocol/server-everything in Streamable HTTP mode, pinned to
# 127.0.0.1 by a `node -r` preload. Its own prefix: `npm install --no-save`
# removes whatever else a prefix holds.
MCP_NODE_DIR       := $(BUILD)/node-mcp
MCP_EVERYTHING_VER := 2026.8.31
MCP_EVERYTHING     := $(abspath $(MCP_NODE_DIR))/node_modules/@modelcontextprotocol/server-everything

e2e-mcp:
	@command -v node >/dev/null || { echo "e2e: node is not installed; it is needed for @modelcontextprotocol/server-everything (install Node.js 20+)"; exit 1; }
	@command -v npm >/dev/null || { echo "e2e: npm is not installed; it is needed to install @modelcontextprotocol/server-everything@$(MCP_EVERYTHING_VER)"; exit 1; }
	@if [ "$$(node -p "require('$(MCP_EVERYTHING)/package.json').version" 2>/dev/null)" != "$(MCP_EVERYTHING_VER)" ]; then \
	  echo "e2e: installing @modelcontextprotocol/server-everything@$(MCP_EVERYTHING_VER) into $(MCP_NODE_DIR)"; \
	  mkdir -p $(MCP_NODE_DIR) && npm install --prefix $(MCP_NODE_DIR) --no-save --no-audit --no-fund --silent @modelcontextprotocol/server-everything@$(MCP_EVERYTHING_VER) \
	    || { echo "e2e: could not install @modelcontextprotocol/server-everything@$(MCP_EVERYTHING_VER) from the npm registry"; exit 1; }; \
	fi
	FLUIDBOX_E2E_MCP_EVERYTHING=$(MCP_EVERYTHING)/dist/index.js $(GO) test -tags e2e -count=1 -timeout 10m -run 'TestInterop' -v ./shared/connection/

# e2e-claude: the real Claude Code CLI, headless, governed by fluidbox
# against a scripted model (shared/internal/e2e/claudecode), all on
# 127.0.0.1. The version is pinned: the claude-code bundle's schemas were
# checked against it, and the suite refuses another (its pinnedVersion).
# Its own prefix, like e2e-mcp's.
CLAUDE_CODE_VERSION := 2.1.332
CLAUDE_DIR          := $(BUILD)/claude
CLAUDE_BIN          := $(CLAUDE_DIR)/node_modules/.bin/claude

e2e-claude: e2e-claude-install
	FLUIDBOX_CLAUDE="$(abspath $(CLAUDE_BIN))" $(GO) test -tags e2e -count=1 -timeout 10m -v ./shared/internal/e2e/claudecode/

# e2e-claude-install: the pinned Claude Code CLI, with npm, into .build/claude.
e2e-claude-install:
	@command -v node >/dev/null || { echo "e2e-claude: node is not installed; it is needed to install Claude Code with npm (install Node.js 20+ and npm)"; exit 1; }
	@command -v npm >/dev/null || { echo "e2e-claude: npm is not installed; it is needed to install @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)"; exit 1; }
	@if [ "$$($(CLAUDE_BIN) --version 2>/dev/null)" != "$(CLAUDE_CODE_VERSION) (Claude Code)" ]; then \
	  echo "e2e-claude: installing @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) into $(CLAUDE_DIR)"; \
	  mkdir -p $(CLAUDE_DIR) && npm install --prefix $(CLAUDE_DIR) --no-save --no-audit --no-fund --silent @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) \
	    || { echo "e2e-claude: could not install @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) from the npm registry"; exit 1; }; \
	  $(CLAUDE_BIN) --version >/dev/null 2>&1 \
	    || { echo "e2e-claude: $(CLAUDE_BIN) does not run: npm brings the native CLI as an optional package (@anthropic-ai/claude-code-<platform>); make sure optional dependencies are not omitted"; exit 1; }; \
	fi

# e2e-runner: a pull request in, a governed run out: the local launcher
# starts `fluidbox runner` in a loopback-only network namespace, which runs
# the pinned Claude Code CLI (installed as for e2e-claude) as nobody under
# managed settings against the scripted model, on a commit served by git
# http-backend; then the runner's and the launcher's own suites (stand-in
# agent: what the agent can see from inside). Needs root (namespaces, the
# agent's user), as .ci/run has.
e2e-runner: e2e-claude-install
	FLUIDBOX_CLAUDE="$(abspath $(CLAUDE_BIN))" $(GO) test -tags e2e -count=1 -timeout 10m -v ./shared/internal/e2e/runner/
	$(GO) test -race -count=1 ./shared/runner/ ./shared/launcher/

# e2e-agent-sdk: @fluidbox/claude-agent-sdk (clients/agent-sdk) built from a
# clean install (npm ci: the SDK pinned by its package-lock.json, whose
# Claude Code is CLAUDE_CODE_VERSION), its unit tests (node --test), then a
# program on the real Agent SDK governed by fluidbox against the scripted
# model (shared/internal/e2e/agentsdk), all on 127.0.0.1. node_modules and
# dist stay in clients/agent-sdk (ignored).
AGENT_SDK_DIR := clients/agent-sdk

e2e-agent-sdk:
	@command -v node >/dev/null || { echo "e2e-agent-sdk: node is not installed; it is needed for the Agent SDK (install Node.js 20+ and npm)"; exit 1; }
	@command -v npm >/dev/null || { echo "e2e-agent-sdk: npm is not installed; it is needed to install clients/agent-sdk's dependencies"; exit 1; }
	cd $(AGENT_SDK_DIR) && npm ci --no-audit --no-fund --silent && npm test --silent
	@test -x $(AGENT_SDK_DIR)/node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude -o -x $(AGENT_SDK_DIR)/node_modules/@anthropic-ai/claude-agent-sdk-linux-arm64/claude \
	  || { echo "e2e-agent-sdk: the SDK's native Claude Code is missing: npm brings it as an optional package (@anthropic-ai/claude-agent-sdk-<platform>); make sure optional dependencies are not omitted"; exit 1; }
	FLUIDBOX_AGENT_SDK_DIR="$(abspath $(AGENT_SDK_DIR))" $(GO) test -tags e2e -count=1 -timeout 10m -v ./shared/internal/e2e/agentsdk/

# e2e-conformance: fluidbox's OAuth client (the control plane: create,
# authorize, callback, a brokered call) against every auth scenario of the
# MCP conformance suite's client mode (shared/internal/e2e/conformance),
# with its expected failures in baseline.yml, each with a reason. Its
# servers are pinned to 127.0.0.1 by the same `node -r` preload as
# e2e-mcp's. Its own prefix, like e2e-mcp's. Results in .build/e2e/conformance.
CONFORMANCE_DIR := $(BUILD)/node-conformance
CONFORMANCE_VER := 0.2.0-alpha.12
CONFORMANCE     := $(abspath $(CONFORMANCE_DIR))/node_modules/@modelcontextprotocol/conformance

e2e-conformance:
	@command -v node >/dev/null || { echo "e2e-conformance: node is not installed; it is needed for @modelcontextprotocol/conformance (install Node.js 20+)"; exit 1; }
	@command -v npm >/dev/null || { echo "e2e-conformance: npm is not installed; it is needed to install @modelcontextprotocol/conformance@$(CONFORMANCE_VER)"; exit 1; }
	@if [ "$$(node -p "require('$(CONFORMANCE)/package.json').version" 2>/dev/null)" != "$(CONFORMANCE_VER)" ]; then \
	  echo "e2e-conformance: installing @modelcontextprotocol/conformance@$(CONFORMANCE_VER) into $(CONFORMANCE_DIR)"; \
	  mkdir -p $(CONFORMANCE_DIR) && npm install --prefix $(CONFORMANCE_DIR) --no-save --no-audit --no-fund --silent @modelcontextprotocol/conformance@$(CONFORMANCE_VER) \
	    || { echo "e2e-conformance: could not install @modelcontextprotocol/conformance@$(CONFORMANCE_VER) from the npm registry"; exit 1; }; \
	fi
	@mkdir -p $(E2E_OUT)/conformance
	FLUIDBOX_E2E_CONFORMANCE=$(CONFORMANCE)/dist/index.js FLUIDBOX_E2E_OUT=$(E2E_OUT)/conformance \
	  $(GO) test -tags e2e -count=1 -timeout 20m -run 'TestConformance$$' -v ./shared/internal/e2e/conformance/

fmt:
	gofmt -w $$(git ls-files '*.go')
