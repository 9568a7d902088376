# Lambda functions: build, size and run the per-route bootstraps
# (functions/<fn>/main.go, one per Lambda function; functions/local is the
# local process, not a function). Included by the Makefile.

LAMBDA_FUNCTIONS = $(sort $(filter-out local,$(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))))
# The flags of a deployable bootstrap (pkg/lambdaedge/rie.Flags, which the
# tests' and infra/invoke's builds use): static, no legacy RPC start path, no
# paths or VCS stamp, stripped, no build id (an unchanged function builds
# byte for byte the same), optimized with the profile of make pgo.
PGO_PROFILE := functions/local/default.pgo
LAMBDA_BUILD_FLAGS = -tags lambda.norpc -trimpath -buildvcs=false -ldflags '-s -w -buildid=' -pgo=$(CURDIR)/$(PGO_PROFILE)
LAMBDA_GOOS ?= linux
LAMBDA_GOARCH ?= arm64
# The largest bootstrap make sizes accepts (22.5 MB): 20 MB until the
# bootstraps outgrew it with metrics and traces (20.78 MB), then 1.05 MB for
# the o200k_base ranks count_tokens reads (pkg/tokenizer), which every
# bootstrap links and only a count touches, then 0.13 MB for the inlining of
# profile-guided optimization (22.15 MB; docs/benchmarks.md, "Size").
LAMBDA_MAX_BYTES ?= 22500000
LAMBDA_STARTUP_RUNS ?= 5

.PHONY: build
build: ## Build every Lambda function (linux/arm64) into bin/<fn>/bootstrap
	@rm -rf bin/.build && mkdir -p bin/.build
	GOOS=$(LAMBDA_GOOS) GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 $(GO) build $(LAMBDA_BUILD_FLAGS) -o bin/.build/ $(addprefix ./functions/,$(LAMBDA_FUNCTIONS))
	@for f in $(LAMBDA_FUNCTIONS); do mkdir -p bin/$$f && mv bin/.build/$$f bin/$$f/bootstrap; done; rm -rf bin/.build
	@echo "built $(words $(LAMBDA_FUNCTIONS)) functions for $(LAMBDA_GOOS)/$(LAMBDA_GOARCH) into bin/<fn>/bootstrap"

.PHONY: sizes
sizes: build ## Size of each bootstrap (linux/arm64, stripped); fails over 22 MB
	@for f in $(LAMBDA_FUNCTIONS); do echo "$$f $$(wc -c < bin/$$f/bootstrap)"; done | \
	  awk -v max=$(LAMBDA_MAX_BYTES) '{ printf "  %-24s %10d bytes  %6.2f MB%s\n", $$1, $$2, $$2/1e6, ($$2 > max ? "  OVER THE LIMIT" : ""); if ($$2 > max) over = 1 } \
	    END { printf "  limit %.0f MB ($(LAMBDA_GOOS)/$(LAMBDA_GOARCH), stripped)\n", max/1e6; exit over }'

# AWS's Lambda Runtime Interface Emulator, built from its Go module into
# bin/tools (not committed); tests and make invoke run bootstraps under it
# (pkg/lambdaedge/rie). RIE_VERSION is a version the module proxy serves.
RIE_VERSION ?= v0.0.0-20261030222936-bef5c4ba774d
RIE := bin/tools/aws-lambda-rie

.PHONY: rie
rie: $(RIE) ## Install aws-lambda-rie (AWS's Lambda emulator) into bin/tools, once

$(RIE):
	@mkdir -p $(dir $(RIE))
	GOBIN=$(CURDIR)/$(dir $(RIE)) CGO_ENABLED=0 $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: invoke
invoke: $(RIE) ## Run a function on an event under aws-lambda-rie: make invoke FN=models EVENT=events/models/list.json
	@if [ -z "$(FN)" ] || [ -z "$(EVENT)" ]; then echo "usage: make invoke FN=<function> EVENT=<event file>"; exit 2; fi
	$(GO) run ./infra/invoke -fn $(FN) -event $(EVENT)

.PHONY: lambda-startup
lambda-startup: $(RIE) ## Cold start of every function on its first sample event, on this machine under aws-lambda-rie (median of LAMBDA_STARTUP_RUNS=5 execs)
	@rm -rf bin/.host && mkdir -p bin/.host
	@CGO_ENABLED=0 $(GO) build $(LAMBDA_BUILD_FLAGS) -o bin/.host/ $(addprefix ./functions/,$(LAMBDA_FUNCTIONS)) ./infra/invoke
	@for f in $(LAMBDA_FUNCTIONS); do \
	  e=$$(ls events/$$f/*.json 2>/dev/null | head -1); \
	  if [ -z "$$e" ]; then echo "$$f: no sample event"; continue; fi; \
	  bin/.host/invoke -q -n $(LAMBDA_STARTUP_RUNS) -fn $$f -bin bin/.host/$$f -event $$e 2>&1 >/dev/null; \
	done; rm -rf bin/.host

.PHONY: sizing
sizing: bench-tools rie ## Measure each relaying function's memory size under aws-lambda-rie in cgroups (root; SIZING_FLAGS="-fns embeddings -n 500"); figures in .bench/sizing.json
	nice -n -20 $(GO) run ./infra/sizing $(SIZING_FLAGS)
