# infra/deploy.mk — the SAM application (template.yaml, samconfig.toml); the
# Makefile includes it after infra/lambda.mk.
#
#   make deploy          sam build + infra/deploy.sh (SAM_CONFIG_ENV=prod for the prod stack;
#                        SAM_DEPLOY_FLAGS="--no-confirm-changeset --no-fail-on-empty-changeset" in CI)
#   make deploy-guided   the first deployment: sam build + sam deploy --guided
#   make lint-template   cfn-lint template.yaml (part of make test)
#
# sam build builds each function with BuildMethod: makefile from the
# repository root: it runs `make build-<LogicalId>` with ARTIFACTS_DIR set, and
# the pattern rule below builds functions/<fn> into $(ARTIFACTS_DIR)/bootstrap
# with the production flags of infra/lambda.mk, for the template's arm64.

SAM ?= sam
CFN_LINT ?= cfn-lint
SAM_CONFIG_ENV ?= default
# Extra sam deploy flags, e.g. --no-confirm-changeset for a deploy without a person.
SAM_DEPLOY_FLAGS ?=

# lambda_id turns a function name into its template logical ID
# (files-upload → FilesUploadFunction), as pkg/deploy.LogicalID does.
lambda_id = $(shell echo '$(1)' | awk -F- '{ for (i = 1; i <= NF; i++) printf "%s%s", toupper(substr($$i, 1, 1)), substr($$i, 2) } END { print "Function" }')

# Only a build-* goal needs the logical IDs: other goals skip the awk calls.
ifneq ($(filter build-%,$(MAKECMDGOALS)),)
$(foreach f,$(LAMBDA_FUNCTIONS),$(eval build-$(call lambda_id,$(f)): LAMBDA_FN := $(f)))
endif

# SAM's makefile builder calls build-<LogicalId>. The architecture is the
# template's (arm64) whatever LAMBDA_GOARCH says.
build-%Function:
	@if [ -z "$(LAMBDA_FN)" ]; then echo "$@: no functions/<fn>/main.go has the logical ID $*Function"; exit 2; fi
	@if [ -z "$(ARTIFACTS_DIR)" ]; then echo "$@: ARTIFACTS_DIR is not set (sam build sets it)"; exit 2; fi
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build $(LAMBDA_BUILD_FLAGS) -o "$(ARTIFACTS_DIR)/bootstrap" ./functions/$(LAMBDA_FN)

# need_sam fails with a clear message when the SAM CLI is missing.
define need_sam
@command -v $(SAM) >/dev/null 2>&1 || { echo "the AWS SAM CLI ($(SAM)) is not installed: see https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/install-sam-cli.html"; exit 1; }
endef

# MAKEFLAGS is cleared so the make that sam build runs is not this one's child.
.PHONY: deploy
deploy: ## Build every function with SAM and deploy the stack (SAM_CONFIG_ENV=prod for prod); a first create, or its retry, switches the table's deletion protection on after it
	$(need_sam)
	MAKEFLAGS= $(SAM) build --config-env $(SAM_CONFIG_ENV)
	SAM="$(SAM)" SAM_CONFIG_ENV="$(SAM_CONFIG_ENV)" SAM_DEPLOY_FLAGS="$(SAM_DEPLOY_FLAGS)" infra/deploy.sh

.PHONY: deploy-guided
deploy-guided: ## First deployment: sam build, sam deploy --guided (asks for the parameters, saves them in samconfig.toml), then the table's deletion protection on
	$(need_sam)
	MAKEFLAGS= $(SAM) build --config-env $(SAM_CONFIG_ENV)
	$(SAM) deploy --guided --config-env $(SAM_CONFIG_ENV) --parameter-overrides ProtectRecords=false
	SAM="$(SAM)" SAM_CONFIG_ENV="$(SAM_CONFIG_ENV)" SAM_DEPLOY_FLAGS="--no-confirm-changeset --no-fail-on-empty-changeset" infra/deploy.sh

.PHONY: lint-template
lint-template: ## cfn-lint template.yaml (with the SAM transform), informational checks included
	@command -v $(CFN_LINT) >/dev/null 2>&1 || { echo "cfn-lint is not installed (pip install cfn-lint): make lint-template and make test need it"; exit 1; }
	$(CFN_LINT) --include-checks I -- template.yaml

.PHONY: template
template: ## Write template.yaml's generated sections (functions, log groups, alarms, queue-job parameters) from the route and jobs tables
	$(GO) run ./infra/template

# The stack of SAM_CONFIG_ENV, as samconfig.toml names it.
STACK_NAME ?= $(shell awk -v sec='[$(SAM_CONFIG_ENV).global.parameters]' '/^\[/ { in_sec = ($$0 == sec) } in_sec && $$1 == "stack_name" { gsub(/"/, "", $$3); print $$3 }' samconfig.toml)

.PHONY: env-json
env-json: ## Write env.json (sam local invoke --env-vars env.json) from the deployed stack's outputs (SAM_CONFIG_ENV picks the stack)
	@command -v aws >/dev/null 2>&1 || { echo "the AWS CLI (aws) is not installed"; exit 1; }
	aws cloudformation describe-stacks --stack-name $(STACK_NAME) --output json | $(GO) run ./infra/envjson > env.json.tmp && mv env.json.tmp env.json
	@echo "wrote env.json for stack $(STACK_NAME)"
