# infra/aws.mk — the AWS backend on a local moto_server; the Makefile includes it.
#
#   make test-aws   start moto_server, run the AWS adapter suites and every package
#                   in AWS_TEST_PKGS against it (nothing may skip), stop it
#   make run-aws    start moto_server, provision, run functions/local on the AWS
#                   adapters against it, stop it on exit (with a fresh master key,
#                   printed once, unless SLUICE_MASTER_KEY is set)
#
# Each run gets its own moto_server on a free 127.0.0.1 port and its own state
# directory, so runs do not collide; the trap stops the server however the run
# ends (failure, Ctrl-C). moto_server must be on PATH (see infra/moto.sh).

GO ?= go
MOTO ?= infra/moto.sh
# Packages whose tests need AWS besides ./pkg/store/aws/...: tests that find no
# SLUICE_TEST_AWS_ENDPOINT skip, so the default runs them all.
AWS_TEST_PKGS ?= ./...
# -p 4: on two cores, two packages' tests that wait (on moto, on timers)
# would otherwise leave the CPU idle while the rest wait to be compiled.
AWS_TEST_FLAGS ?= -race -count=1 -p 4
# Resource name prefix for run-aws.
AWS_PREFIX ?= sluice-local

# moto_run starts moto_server for the recipe's shell and stops it on exit.
define moto_run
state=$$(mktemp -d); export SLUICE_MOTO_STATE_DIR="$$state"; \
trap '$(MOTO) stop; rm -rf "$$state"' EXIT; trap 'exit 130' INT TERM; \
endpoint=$$($(MOTO) start) || exit 1; \
echo "moto_server: $$endpoint"
endef

.PHONY: test-aws
test-aws: ## AWS adapter suites (and AWS_TEST_PKGS) against a moto_server started for the run
	@$(moto_run); \
	SLUICE_TEST_AWS_ENDPOINT="$$endpoint" SLUICE_REQUIRE_AWS=1 CGO_ENABLED=1 \
	  $(GO) test $(AWS_TEST_FLAGS) ./pkg/store/aws/... $(AWS_TEST_PKGS)

.PHONY: run-aws
run-aws: ## Run the gateway locally on the AWS adapters, against a moto_server started for the run
	@$(moto_run); \
	export AWS_ENDPOINT_URL="$$endpoint" AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test; \
	unset AWS_PROFILE AWS_SESSION_TOKEN; \
	$(GO) run ./infra/provision -prefix $(AWS_PREFIX) >"$$state/env" || exit 1; \
	cat "$$state/env"; \
	set -a; . "$$state/env"; set +a; \
	if [ -z "$${SLUICE_MASTER_KEY:-}" ]; then \
	  SLUICE_MASTER_KEY="sk-$$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')"; export SLUICE_MASTER_KEY; \
	  echo "master key for this run (moto keeps nothing after it): $$SLUICE_MASTER_KEY"; \
	fi; \
	SLUICE_BACKEND=aws $(GO) run -tags aws ./functions/local
