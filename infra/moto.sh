#!/usr/bin/env bash
# moto.sh — run one moto_server (DynamoDB, S3, SQS, SNS, KMS, Secrets Manager,
# SSM) on 127.0.0.1 for the AWS adapter tests and `make run-aws`.
#
#   infra/moto.sh start      start a server on a free port; print its endpoint
#   infra/moto.sh stop       stop the server this state dir started; remove its files
#   infra/moto.sh endpoint   print the running server's endpoint
#
# State (pid, port, log) lives in $SLUICE_MOTO_STATE_DIR (default: a per-user
# directory under $TMPDIR). Give each concurrent run its own directory: the
# Makefile targets use a fresh mktemp directory per run.
set -euo pipefail

state_dir="${SLUICE_MOTO_STATE_DIR:-${TMPDIR:-/tmp}/sluice-moto-$(id -u)}"
pid_file="$state_dir/moto.pid"
port_file="$state_dir/moto.port"
log_file="$state_dir/moto.log"

die() { printf 'moto.sh: %s\n' "$*" >&2; exit 1; }

# moto_bin prints the real moto_server executable. Through a pyenv shim, $!
# would be the shim's pid and stopping it would leave the server running.
moto_bin() {
  command -v moto_server >/dev/null 2>&1 || die "moto_server is not on PATH.
  It comes preinstalled with Python (pip package 'moto[server]' under pyenv) on this kind of
  machine; PyPI cannot be reached from here, so it cannot be installed by a script.
  Use a machine that has it, or put an existing moto_server on PATH."
  local bin=""
  if command -v pyenv >/dev/null 2>&1; then
    bin=$(pyenv which moto_server 2>/dev/null || true)
  fi
  [ -n "$bin" ] || bin=$(command -v moto_server)
  printf '%s\n' "$bin"
}

# free_port asks the kernel for an unused 127.0.0.1 port, using the Python that
# runs moto (it is there whenever moto is).
free_port() {
  local py
  py="$(dirname "$1")/python3"
  [ -x "$py" ] || py=$(command -v python3 || command -v python || true)
  [ -n "$py" ] || die "no python found to pick a free port"
  "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

running() {
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

ready() {
  curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$1/moto-api/data.json" 2>/dev/null
}

cmd_start() {
  if running; then
    printf 'http://127.0.0.1:%s\n' "$(cat "$port_file")"
    return
  fi
  local bin port pid attempt i
  bin=$(moto_bin)
  command -v curl >/dev/null 2>&1 || die "curl is needed to check that moto_server is ready"
  mkdir -p "$state_dir"
  # Another process may take the port between picking and binding: retry.
  for attempt in 1 2 3; do
    port=$(free_port "$bin")
    "$bin" -H 127.0.0.1 -p "$port" >"$log_file" 2>&1 </dev/null &
    pid=$!
    printf '%s\n' "$pid" >"$pid_file"
    printf '%s\n' "$port" >"$port_file"
    for i in $(seq 1 300); do
      if ! kill -0 "$pid" 2>/dev/null; then
        break
      fi
      if ready "$port"; then
        printf 'http://127.0.0.1:%s\n' "$port"
        return
      fi
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$pid_file" "$port_file"
    printf 'moto.sh: attempt %s: moto_server did not become ready on port %s:\n' "$attempt" "$port" >&2
    tail -n 20 "$log_file" >&2 || true
  done
  die "could not start moto_server (log: $log_file)"
}

cmd_stop() {
  if [ -f "$pid_file" ]; then
    local pid i
    pid=$(cat "$pid_file")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pid_file" "$port_file" "$log_file"
  rmdir "$state_dir" 2>/dev/null || true
}

cmd_endpoint() {
  running || die "moto_server is not running (state dir $state_dir); run: infra/moto.sh start"
  printf 'http://127.0.0.1:%s\n' "$(cat "$port_file")"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  endpoint) cmd_endpoint ;;
  *) die "usage: $0 start|stop|endpoint" ;;
esac
