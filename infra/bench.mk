# Benchmarks: the harness of infra/bench, included by the main Makefile.
#   make bench                  every scenario, the bootstrap sizes and cold starts; report in .bench/bench.{txt,json}
#   make bench-embeddings       one scenario (bench-embeddings-titan also runs embeddings)
#   make bench BENCH_FLAGS='-rounds 5 -duration 3s'
# Run `.bench/bin/load -h` for every flag; docs/benchmarks.md explains the figures.

BENCH_OUT ?= .bench
BENCH_FLAGS ?=
BENCH_UPSTREAM_ADDR ?= 127.0.0.1:8090
BENCH_UPSTREAM_FLAGS ?=
BENCH_SCENARIOS := noop embeddings titan-fanout chat chat-c1 chat-c64 chat-stream chat-anthropic chat-anthropic-stream passthrough passthrough-stream upload batch callback budget telemetry
BENCH_LOAD = $(BENCH_OUT)/bin/load -out $(BENCH_OUT)

.PHONY: bench bench-tools bench-delivery valgrind run-upstream bench-embeddings-titan $(addprefix bench-,$(BENCH_SCENARIOS))

bench-tools: ## Build the bench upstream, bare proxy, load generator and delivery bench into .bench/bin
	@mkdir -p $(BENCH_OUT)/bin
	go build -o $(BENCH_OUT)/bin/ ./infra/bench/upstream ./infra/bench/proxy ./infra/bench/load ./infra/bench/delivery

bench: bench-tools rie valgrind ## Run every benchmark scenario (a few minutes), the bootstrap sizes and the delivery bench; report in .bench/bench.{txt,json} and .bench/bench-delivery.json
	$(BENCH_LOAD) -json $(BENCH_OUT)/bench.json -txt $(BENCH_OUT)/bench.txt $(BENCH_FLAGS)
	$(BENCH_DELIVERY)

# The callback delivery path (infra/bench/delivery): log events to the
# upstream's Langfuse sink through the embedded bus, the durable delivery
# queue and the callback-delivery job — emitted by 32 concurrent calls, then
# preloaded 1 and 10 to a message. One JSON line each.
BENCH_DELIVERY_EVENTS ?= 20000
define BENCH_DELIVERY
@for mode in "-producers 32" "-per-message 1" "-per-message 10"; do \
  $(BENCH_OUT)/bin/delivery -upstream $(BENCH_OUT)/bin/upstream -events $(BENCH_DELIVERY_EVENTS) $$mode || exit 1; \
done > $(BENCH_OUT)/bench-delivery.json && cat $(BENCH_OUT)/bench-delivery.json
endef

# The telemetry scenario's metrics check counts instructions under cachegrind.
valgrind: ## Install Debian's valgrind, which the telemetry check counts instructions with (apt-get, once)
	@command -v valgrind >/dev/null 2>&1 || { $(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends valgrind; }

bench-delivery: bench-tools ## Benchmark callback delivery: events/s to a local Langfuse sink (target ≥ 5,000), CPU per event
	$(BENCH_DELIVERY)

bench-noop: ## Benchmark the authenticated no-op (GET /v1/models with a team key)
bench-embeddings: ## Benchmark POST /v1/embeddings (1536-dim answers)
bench-titan-fanout: ## Benchmark 16 Titan inputs vs one call, upstream at 100 ms per call (≤ 2× one call)
bench-chat: ## Benchmark POST /v1/chat/completions, non-streaming
bench-chat-c1: ## Benchmark chat latency at concurrency 1 (closed loop)
bench-chat-c64: ## Benchmark chat latency at concurrency 64 (closed loop)
bench-chat-stream: ## Benchmark POST /v1/chat/completions, streaming (TTFB)
bench-chat-anthropic: ## Benchmark POST /v1/chat/completions translated to Anthropic Messages (CPU ≤ 2× the proxy's)
bench-chat-anthropic-stream: ## Benchmark a chat stream translated from Anthropic's events (TTFB, CPU per event)
bench-passthrough: ## Benchmark the Anthropic passthrough, POST /anthropic/v1/messages
bench-passthrough-stream: ## Benchmark the Anthropic passthrough, streaming (TTFB)
bench-upload: ## Benchmark a 200 MB upload and download vs a direct disk write
bench-batch: ## Benchmark a 50,000-line batch vs the ideal
bench-callback: ## Benchmark embeddings with and without a team logging callback
bench-budget: ## Benchmark embeddings by a key with a budget vs a key without (≤ 0.05 ms p50, ≤ 5 % CPU)
bench-telemetry: valgrind ## Benchmark embeddings and passthrough with metrics off, on (≤ 2 % CPU) and with OTLP traces, three sluices interleaved
$(addprefix bench-,$(BENCH_SCENARIOS)): bench-%: bench-tools
	$(BENCH_LOAD) -scenarios $* -sizes=false -json $(BENCH_OUT)/bench-$*.json -txt $(BENCH_OUT)/bench-$*.txt $(BENCH_FLAGS)

# embeddings-titan runs with embeddings: its report line sets sluice's CPU
# per translated answer next to the pass-through's of the same run.
bench-embeddings-titan: bench-tools ## Benchmark POST /v1/embeddings translated to Bedrock Titan (base64), next to the OpenAI pass-through
	$(BENCH_LOAD) -scenarios embeddings,embeddings-titan -sizes=false -json $(BENCH_OUT)/bench-embeddings-titan.json -txt $(BENCH_OUT)/bench-embeddings-titan.txt $(BENCH_FLAGS)

# Profile-guided optimization: $(PGO_PROFILE) (infra/lambda.mk) is a CPU
# profile of sluice under the relay scenarios below, merged (each weighs its
# samples). go build uses it for functions/local by itself (make run, the
# bench), and the Lambda builds pass it with -pgo. Refresh it after a change
# to the hot path: a stale profile still serves the code that did not move.
PGO_SCENARIOS ?= embeddings,embeddings-titan,chat,chat-stream,chat-anthropic,messages-openai,messages-anthropic,passthrough,passthrough-stream
.PHONY: pgo
pgo: bench-tools ## Record the profile sluice is built with (functions/local/default.pgo): sluice's CPU under the relay scenarios (~6 min)
	rm -rf $(BENCH_OUT)/pgo
	$(BENCH_OUT)/bin/load -out $(BENCH_OUT)/pgo -scenarios $(PGO_SCENARIOS) -sizes=false -rounds 1 -warmup 1s -duration 6s -open-duration 1s -cpu-slices 0 -profile
	$(GO) tool pprof -proto $(BENCH_OUT)/pgo/profiles/*-sluice.pprof > $(PGO_PROFILE).new
	mv $(PGO_PROFILE).new $(PGO_PROFILE)

run-upstream: bench-tools ## Run the bench upstream (fake OpenAI/Anthropic/Gemini/Vertex/Bedrock) on 127.0.0.1:8090 for demos
	$(BENCH_OUT)/bin/upstream -addr $(BENCH_UPSTREAM_ADDR) $(BENCH_UPSTREAM_FLAGS)
