#!/usr/bin/env bash
# Start the distributed shape on one host without Docker: the same processes docker-compose.yml runs.
#
#   scripts/run-local.sh [--config FILE] [--workers N] [--threads T] [--no-serve] [--run-dir DIR]
#                        [--replicas N --snapshots DIR [--replica-port P]] [--replicas-only]
#
# Starts, in this order, each in the background with its pid and log in the run directory:
#   writer.pid     knowledge writer                       (the write queue, one thread, the store's lock)
#   worker.pid     knowledge worker --processes N -t T    (the ingest and embed queues)
#   serve.pid      knowledge serve                        (the query server; skipped with --no-serve)
#   replica-I.pid  knowledge serve --snapshots DIR --port P+I-1, for I in 1..N (--replicas N): read
#                  replicas of the generations `knowledge publish` (or index --publish) writes into
#                  DIR, replica I on port P+I-1 (P: --replica-port, default 8090); --replicas-only
#                  starts only these (a replica host, no writer or workers).
# The broker and store come from the config as for any knowledge command (--config, or
# KNOWLEDGE_CONFIG, KNOWLEDGE_BROKER_URL, KNOWLEDGE_STORE_DIR). Stop them with scripts/stop-local.sh.
# Metrics (docs/observability.md): with KNOWLEDGE_METRICS_PORT=P the writer serves a Prometheus
# scrape at 127.0.0.1:P/metrics and worker process i at P+1+i; `knowledge serve` has /metrics on its
# own port. OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables) export traces and metrics.
# Exit status: 0 when everything started; the writer's own status (75: another writer holds the
# store) or 1 when a process died while starting.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
knowledge="${KNOWLEDGE_BIN:-}"
if [[ -z "$knowledge" ]]; then
  if [[ -x "$here/../.venv/bin/knowledge" ]]; then knowledge="$here/../.venv/bin/knowledge"; else knowledge="knowledge"; fi
fi
workers=2
threads=""
serve=1
run_dir="${KNOWLEDGE_RUN_DIR:-./.knowledge-run}"
wait_s="${KNOWLEDGE_START_TIMEOUT:-30}"
replicas=0
snapshots=""
replica_port=8090
primary=1

while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) export KNOWLEDGE_CONFIG="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --no-serve) serve=0; shift ;;
    --run-dir) run_dir="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --snapshots) snapshots="$2"; shift 2 ;;
    --replica-port) replica_port="$2"; shift 2 ;;
    --replicas-only) primary=0; serve=0; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "run-local: unknown argument $1" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! [[ "$replicas" =~ ^[0-9]+$ && "$replica_port" =~ ^[0-9]+$ ]]; then
  echo "run-local: --replicas and --replica-port take a number, got $replicas and $replica_port" >&2
  exit 2
fi
if (( replicas > 0 )) && [[ -z "$snapshots" ]]; then
  echo "run-local: --replicas $replicas needs --snapshots DIR: the directory the primary publishes into" \
    "(knowledge.publish.directory, or \`knowledge publish --to DIR\`)" >&2
  exit 2
fi
if (( replicas == 0 && primary == 0 )); then
  echo "run-local: --replicas-only starts nothing without --replicas N" >&2
  exit 2
fi

mkdir -p "$run_dir"
for pidfile in "$run_dir"/writer.pid "$run_dir"/worker.pid "$run_dir"/serve.pid "$run_dir"/replica-*.pid; do
  name="$(basename "$pidfile" .pid)"
  if [[ -f "$pidfile" ]] && alive "$(cat "$pidfile")"; then
    echo "run-local: $name is already running (pid $(cat "$pidfile")); scripts/stop-local.sh first" >&2
    exit 75
  fi
done

# start NAME READY-PATTERN COMMAND...: background it, record its pid, wait (bounded) until
# READY-PATTERN shows in its log (an empty pattern: until it has stayed up for a second).
start() {
  local name="$1" ready="$2"; shift 2
  "$@" >"$run_dir/$name.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$run_dir/$name.pid"
  local deadline=$((SECONDS + wait_s)) settle=$((SECONDS + 1))
  while true; do
    if ! kill -0 "$pid" 2>/dev/null; then
      local status=0
      wait "$pid" || status=$?
      rm -f "$run_dir/$name.pid"
      echo "run-local: $name exited while starting (status $status):" >&2
      tail -n 5 "$run_dir/$name.log" >&2
      return "$(( status == 0 ? 1 : status ))"
    fi
    if [[ -n "$ready" ]]; then
      grep -q -- "$ready" "$run_dir/$name.log" 2>/dev/null && break
    elif (( SECONDS >= settle )); then
      break
    fi
    if (( SECONDS >= deadline )); then
      echo "run-local: $name did not report ready within ${wait_s}s; see $run_dir/$name.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "run-local: $name started (pid $pid, log $run_dir/$name.log)"
}

start_primary() {
  local status=0
  local metrics_port="${KNOWLEDGE_METRICS_PORT:-}"
  if [[ -n "$metrics_port" && "$metrics_port" != 0 ]]; then
    KNOWLEDGE_METRICS_PORT="$metrics_port" start writer "writer started" "$knowledge" writer || status=$?
  else
    start writer "writer started" "$knowledge" writer || status=$?
  fi
  if (( status != 0 )); then exit "$status"; fi
  local worker_args=(worker --processes "$workers")
  if [[ -n "$threads" ]]; then worker_args+=(--threads "$threads"); fi
  local worker_port="$metrics_port"
  if [[ -n "$metrics_port" && "$metrics_port" != 0 ]]; then worker_port=$((metrics_port + 1)); fi
  if ! KNOWLEDGE_METRICS_PORT="$worker_port" start worker "worker started" "$knowledge" "${worker_args[@]}"; then
    "$here/stop-local.sh" --run-dir "$run_dir" >/dev/null
    exit 1
  fi
}

if (( primary )); then start_primary; fi
if (( serve )); then
  if "$knowledge" serve --help >/dev/null 2>&1; then
    KNOWLEDGE_METRICS_PORT="" start serve "" "$knowledge" serve || echo "run-local: the query server did not start; see $run_dir/serve.log" >&2
  else
    echo "run-local: this knowledge has no serve command yet; query server not started" >&2
  fi
fi
# The read replicas: each a `knowledge serve --snapshots DIR` on a port of its own, ready once it says
# where it serves. One that does not start stops everything this script started (exit 1).
for ((i = 1; i <= replicas; i++)); do
  port=$((replica_port + i - 1))
  if ! KNOWLEDGE_METRICS_PORT="" start "replica-$i" "knowledge: serving http" \
      "$knowledge" serve --snapshots "$snapshots" --port "$port"; then
    "$here/stop-local.sh" --run-dir "$run_dir" >/dev/null
    exit 1
  fi
done
