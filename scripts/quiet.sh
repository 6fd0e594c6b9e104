#!/usr/bin/env bash
# quiet.sh LABEL COMMAND...: runs COMMAND with its output kept aside and
# prints one line, "LABEL: done (N s)"; when COMMAND fails, its whole output
# follows, then its exit status is returned (make run's steps).
set -uo pipefail
label=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
printf '%s: ' "$label"
if "$@" > "$log" 2>&1; then
  echo "done ($((SECONDS - start)) s)"
  exit 0
else
  status=$?
  echo "FAILED (exit status $status); its output:"
  cat "$log"
  exit "$status"
fi
