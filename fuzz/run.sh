#!/usr/bin/env bash
# fuzz/run.sh BUILD_DIR SECONDS [TARGET...]: for each fuzz target (all three
# by default), replays its corpus (fuzz/corpus/TARGET: every file must pass),
# then fuzzes it for SECONDS, starting from that corpus. New inputs go to
# BUILD_DIR/fuzz-work/TARGET/corpus, a failing input to
# BUILD_DIR/fuzz-work/TARGET/artifacts (the script then stops with status 1
# and shows how to reproduce it). `make fuzz` and `make test-fuzz` call it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
seconds=$2
shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_create fuzz_dispatch fuzz_dmlrun)

for target in "${targets[@]}"; do
  program="$build/fuzz/$target"
  work="$build/fuzz-work/$target"
  mkdir -p "$work/corpus" "$work/artifacts"
  # Absolute paths: fuzz_dmlrun changes directory while it runs.
  options=(-artifact_prefix="$work/artifacts/" -close_fd_mask=3 -timeout=20 -rss_limit_mb=2048
           -print_final_stats=1)
  case $target in
    fuzz_dmlrun) options+=(-dict="$root/fuzz/dmlrun.dict" -max_len=8192) ;;
    *) options+=(-max_len=4096) ;;
  esac
  echo "== $target: replaying $(ls "$root/fuzz/corpus/$target" | wc -l) corpus inputs"
  files=("$root/fuzz/corpus/$target"/*)
  if ! "$program" "${options[@]}" -runs=1 "${files[@]}" > "$work/replay.log" 2>&1; then
    tail -n 60 "$work/replay.log"
    echo "== $target: a corpus input fails (log: $work/replay.log)"
    exit 1
  fi
  echo "== $target: fuzzing for $seconds seconds"
  if ! "$program" "${options[@]}" -max_total_time="$seconds" "$work/corpus" "$root/fuzz/corpus/$target" \
       > "$work/fuzz.log" 2>&1; then
    tail -n 60 "$work/fuzz.log"
    echo "== $target: FAILED; the input is in $work/artifacts/ (reproduce: $program FILE;" \
         "DML_FUZZ_VERBOSE=1 shows what it decodes to)"
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)" "$work/fuzz.log" \
    | sed "s/^/   /"
done
# A closing line in the plain "N passed, N failed" form (a failure exits above).
echo "fuzz: ${#targets[@]} passed, 0 failed"
