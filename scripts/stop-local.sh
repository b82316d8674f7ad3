#!/usr/bin/env bash
# Stop what scripts/run-local.sh started: SIGTERM each recorded pid (the read replicas, the query
# server and workers first, the writer last, so it applies what the workers staged), wait up to
# KNOWLEDGE_STOP_TIMEOUT seconds (default 40) for each, then SIGKILL a straggler.
#
#   scripts/stop-local.sh [--run-dir DIR]
set -euo pipefail

run_dir="${KNOWLEDGE_RUN_DIR:-./.knowledge-run}"
wait_s="${KNOWLEDGE_STOP_TIMEOUT:-40}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) run_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "stop-local: unknown argument $1" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for pidfile in "$run_dir"/replica-*.pid "$run_dir"/serve.pid "$run_dir"/worker.pid "$run_dir"/writer.pid; do
  [[ -f "$pidfile" ]] || continue
  name="$(basename "$pidfile" .pid)"
  pid="$(cat "$pidfile")"
  if kill -TERM "$pid" 2>/dev/null; then
    deadline=$((SECONDS + wait_s))
    while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
    if alive "$pid"; then
      echo "stop-local: $name (pid $pid) did not stop within ${wait_s}s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stop-local: $name stopped (pid $pid)"
  fi
  rm -f "$pidfile"
done
