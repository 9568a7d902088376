#!/usr/bin/env bash
# infra/deploy.sh — `make deploy` after `sam build`: deploys the stack of
# samconfig.toml's SAM_CONFIG_ENV so that a failed first create rolls back
# cleanly and can be retried with the same command.
#
# The records table's deletion protection refuses the delete of a rollback,
# so the first create runs with ProtectRecords=false and, once it has
# succeeded, a second deploy switches the protection on (a table update, no
# replacement). A stack left in ROLLBACK_COMPLETE by a failed first create is
# deleted first (nothing of it is kept: stateful resources are
# RetainExceptOnCreate). Every later deploy keeps ProtectRecords=true.
#
# SLUICE_DEPLOY_DRY_RUN=1 prints the commands instead of running them, and
# SLUICE_STACK_STATUS stands in for the stack's status (the tests' plan).
set -euo pipefail

env="${SAM_CONFIG_ENV:-default}"
sam="${SAM:-sam}"
aws="${AWS:-aws}"
read -r -a flags <<<"${SAM_DEPLOY_FLAGS:-}"

# The stack name and parameter overrides of the environment: sam deploy
# replaces the file's overrides with the command line's, so the script
# passes them all, ProtectRecords last.
config=$(python3 - "$env" <<'PY'
import sys, tomllib
env = sys.argv[1]
with open("samconfig.toml", "rb") as f:
    cfg = tomllib.load(f)
stack = cfg.get(env, {}).get("global", {}).get("parameters", {}).get("stack_name", "")
overrides = cfg.get(env, {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides", "")
if not stack:
    sys.exit(f"samconfig.toml: no [{env}.global.parameters] stack_name")
kept = [kv for kv in overrides.split() if not kv.startswith("ProtectRecords=")]
print(stack)
print(" ".join(kept))
PY
)
stack=$(sed -n 1p <<<"$config")
overrides=$(sed -n 2p <<<"$config")

run() {
	if [ -n "${SLUICE_DEPLOY_DRY_RUN:-}" ]; then
		echo "$*"
	else
		"$@"
	fi
}

deploy() { # deploy PROTECT [extra sam flags…]
	local protect=$1
	shift
	run "$sam" deploy --config-env "$env" --parameter-overrides "$overrides ProtectRecords=$protect" "$@"
}

status="${SLUICE_STACK_STATUS:-}"
if [ -z "$status" ]; then
	# Only "does not exist" means a first create: any other failure stops
	# here, so an existing stack is never deployed unprotected.
	if ! status=$("$aws" cloudformation describe-stacks --stack-name "$stack" --query 'Stacks[0].StackStatus' --output text 2>/tmp/sluice-describe.$$); then
		if grep -q "does not exist" /tmp/sluice-describe.$$; then
			status=NONE
		else
			cat /tmp/sluice-describe.$$ >&2
			rm -f /tmp/sluice-describe.$$
			exit 1
		fi
	fi
	rm -f /tmp/sluice-describe.$$
fi

case "$status" in
ROLLBACK_COMPLETE)
	echo "deploy: stack $stack is in ROLLBACK_COMPLETE (a failed first create): deleting it, then creating it again" >&2
	run "$aws" cloudformation delete-stack --stack-name "$stack"
	run "$aws" cloudformation wait stack-delete-complete --stack-name "$stack"
	;&
NONE)
	deploy false ${flags[@]+"${flags[@]}"}
	echo "deploy: first create done: switching on the records table's deletion protection" >&2
	deploy true --no-confirm-changeset --no-fail-on-empty-changeset
	;;
*_IN_PROGRESS)
	echo "deploy: stack $stack is $status: wait for it to end" >&2
	exit 1
	;;
*)
	deploy true ${flags[@]+"${flags[@]}"}
	;;
esac
