# Shared helpers of run-local.sh and stop-local.sh (sourced, not run).

# alive PID: running and not a zombie waiting for its reaper (run-local.sh's children outlive it).
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  [[ -n "$state" && "$state" != Z* ]]
}
