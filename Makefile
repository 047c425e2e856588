# fluidbox — everything here needs only Go, except `make e2e` (Node, Chromium).
GO        ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
BUILD     := .build
FN        ?= control
EVENT     ?= events/control/create-session.json

.PHONY: run test build invoke bench validate e2e fmt

## run: the local control plane on 127.0.0.1:8080 (FLUIDBOX_ADDR to change)
run:
	$(GO) run ./cmd/fluidbox dev

## test: vet, then every Go test with -race, against real local servers
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...

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

## bench: benchmarks against minidyn and the pure gate (not part of test)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./shared/ledger/ ./shared/run/

## validate: template.yaml against the SAM schema and our IAM rules, offline
validate:
	$(GO) test -count=1 ./infra/...

## e2e: suites that need Node or a browser
e2e:
	@echo "e2e: no Node or browser suites yet (they arrive with the broker and the Claude Code issues)"

fmt:
	gofmt -w $$(git ls-files '*.go')
