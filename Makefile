# sluice — make help lists the targets.
SHELL := bash
.DEFAULT_GOAL := help
GO ?= go
export CGO_ENABLED ?= 0

# Capability packages reach storage only through pkg/store interfaces: they may not
# depend on aws-lambda-go or the SDK clients of the storage services (ARCHITECTURE §2).
# Provider packages may use the SDK signer and credential chain to call Bedrock. Test
# harnesses that run the whole gateway (pkg/gateway/gatewaytest, pkg/gateway/chattest) are not capabilities.
CAPABILITY_PKGS = $(shell $(GO) list ./pkg/... | grep -v -e /pkg/store/aws -e /pkg/lambdaedge -e /pkg/gateway)

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# make run's config: SLUICE_CONFIG, else ./sluice.yaml, else the example config, whose mock
# model answers chat completions on a fresh clone with no provider key.
.PHONY: run
run: ## Run the gateway locally on embedded storage (127.0.0.1:4000, data in ./.sluice; config: SLUICE_CONFIG, ./sluice.yaml or sluice.example.yaml)
	SLUICE_CONFIG="$${SLUICE_CONFIG:-$$(test -f sluice.yaml && echo sluice.yaml || echo sluice.example.yaml)}" $(GO) run ./functions/local

.PHONY: cli
cli: ## Build the sluice command-line client into bin/sluice (go install ./infra/sluice installs it)
	$(GO) build -o bin/sluice ./infra/sluice

.PHONY: redrive
redrive: ## Re-drive the log events waiting in the delivery dead-letter queue (stop `make run` first: it holds the data dir)
	$(GO) run ./functions/local redrive

.PHONY: test
test: export SLUICE_REQUIRE_NODE = 1
test: export SLUICE_REQUIRE_RIE = 1
test: export SLUICE_TEST_ALL_BOOTSTRAPS = 1
test: export SLUICE_REQUIRE_CHROMIUM = 1
test: ## Everything: vet, dependency check, cfn-lint, every test (-race) on both backends, moto_server started and stopped
	@# The checks and installs run side by side (the installs wait on the
	@# network, vet on the CPU), then the tests.
	$(MAKE) -j4 --output-sync=target test-prerequisites
	$(MAKE) test-aws

.PHONY: test-prerequisites
test-prerequisites: vet check-deps lint-template node-deps rie chromium test-allocations

# Allocation counts mean nothing under the race detector, so the packages
# whose tests count them (a race_on_test.go beside them) also run once
# without it: otherwise `make test`, all -race, would never check a count.
RACE_SENSITIVE := $(sort $(patsubst %/race_on_test.go,./%,$(wildcard pkg/*/race_on_test.go pkg/*/*/race_on_test.go)))

.PHONY: test-allocations
test-allocations: ## The allocation-counting tests without the race detector
	$(GO) test -count=1 $(RACE_SENSITIVE)

# The official Node clients the tests drive (openai, @anthropic-ai/sdk; the AWS SDK for
# JavaScript's Bedrock client in pkg/gateway), one copy per package that
# uses it (pkg/*/testdata/node, at the version its package-lock.json pins):
# installed once into the ignored node_modules, again only when the lockfile
# changes.
NODE_CLIENT_DIRS := $(patsubst %/package-lock.json,%,$(wildcard pkg/*/testdata/node/package-lock.json))

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: chromium
chromium: ## Install Debian's chromium, which the admin page's browser test drives (apt-get, once)
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium; }

.PHONY: node-deps
node-deps: $(addsuffix /node_modules/.package-lock.json,$(NODE_CLIENT_DIRS)) ## Install the Node client the tests drive (npm ci, once)

%/node_modules/.package-lock.json: %/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is not installed: tests drive the official Node clients (Node 20 or later)"; exit 1; }
	npm ci --prefix $* --no-audit --no-fund
	@touch $@

.PHONY: vet
vet: ## go vet and gofmt
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags aws ./functions/local

.PHONY: check-deps
check-deps: ## Capability packages, and the local process unless built with -tags aws, must not depend on aws-lambda-go or the storage SDK clients
	@bad=0; for p in $(CAPABILITY_PKGS) ./functions/local; do \
	  deps=$$($(GO) list -deps $$p | grep -E '^github.com/aws/(aws-lambda-go|aws-sdk-go-v2/service/(dynamodb|s3|sqs|sns|kms|secretsmanager|ssm))(/|$$)' || true); \
	  if [ -n "$$deps" ]; then echo "$$p imports:"; echo "$$deps"; bad=1; fi; \
	done; exit $$bad

.PHONY: test-unit
test-unit: ## Quick run without moto_server: every test on the embedded backend (-race); AWS cases skip
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

.PHONY: fuzz
fuzz: ## Run each fuzz test for FUZZTIME (default 20s)
	@for p in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$p | grep ^Fuzz); do \
	    echo "== $$p $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-20s} $$p || exit 1; \
	  done; done

-include infra/aws.mk
-include infra/bench.mk
-include infra/lambda.mk
-include infra/deploy.mk
