#!/usr/bin/env bash
# The GPU checks of libdml, for a machine with an NVIDIA GPU and nvcc:
# builds with the CUDA backend, runs every test (the *_cuda variants run the
# same tests on the GPU), runs every example model through
# `dmlrun --backend cuda`, and runs the CUDA tests under compute-sanitizer
# (memcheck and racecheck). Logs go to $LOG_DIR (default build-gpu/logs).
#
#   scripts/gpu_check.sh            # everything
#   SANITIZE=0 scripts/gpu_check.sh # without compute-sanitizer
#   SANITIZE_TOOLS=racecheck scripts/gpu_check.sh  # one tool (racecheck alone takes minutes)
#   SANITIZE_TESTS='roi_align' scripts/gpu_check.sh  # sanitize only the CUDA tests matching a regex
#   SKIP_TESTS=1 scripts/gpu_check.sh  # no ctest or models: the sanitizers only
# Under the sanitizers the whole set takes longer than one 10-minute device
# call; SANITIZE_TESTS and SKIP_TESTS split it into calls that together cover it.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}
logs=${LOG_DIR:-$build/logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd) # absolute: some steps run inside the build directory
status=0

cmake -S . -B "$build" -DDML_CUDA=ON -DDML_WERROR=ON -DCMAKE_BUILD_TYPE=Release ${CMAKE_FLAGS:-} \
  > "$logs/configure.log" 2>&1 || { tail -20 "$logs/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" > "$logs/build.log" 2>&1 || { grep -E 'error' "$logs/build.log" | head -20; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== ctest (CPU and CUDA)"
  (cd "$build" && ctest --output-on-failure -j 4 > "$logs/ctest.log" 2>&1) || status=1
  grep -E 'tests passed|Skipped|Failed|\*\*\*' "$logs/ctest.log" | tail -15

  if [ -x "$build/tools/dmlrun/dmlrun" ]; then
    echo "== dmlrun --backend cuda on every example model"
    passed=0; failed=0
    for model in examples/models/*.json; do
      if "$build/tools/dmlrun/dmlrun" "$model" --backend cuda > "$logs/model_$(basename "$model" .json).log" 2>&1; then
        passed=$((passed + 1))
      else
        failed=$((failed + 1)); status=1
        echo "FAILED: $model"; tail -5 "$logs/model_$(basename "$model" .json).log"
      fi
    done
    "$build/tools/dmlrun/dmlrun" --backend cuda > "$logs/tour_cuda.log" 2>&1 || { status=1; echo "FAILED: the tour on CUDA"; }
    echo "models on CUDA: $passed passed, $failed failed"
  fi
fi

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    echo "== compute-sanitizer --tool $tool"
    for test in $(cd "$build" && ctest -N -L cuda -R "${SANITIZE_TESTS:-.}" | sed -n 's/^ *Test *#[0-9]*: //p'); do
      program=${test%_cuda}
      # API errors are expected: tests provoke out-of-memory and bad arguments.
      extra=""; [ "$tool" = memcheck ] && extra="--leak-check full --report-api-errors no"
      # application-only: test_cuda_backend provokes a GPU fault on purpose in a child process.
      started=$SECONDS
      DML_TEST_BACKEND=cuda compute-sanitizer --tool "$tool" $extra --target-processes application-only \
        --error-exitcode 99 \
        "$build/tests/$program" > "$logs/${tool}_${test}.log" 2>&1
      code=$?
      seconds=$((SECONDS - started))
      summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$logs/${tool}_${test}.log" | tr '\n' ' ')
      echo "$test: exit $code, ${seconds} s; $summary"
      [ $code -eq 99 ] && status=1
    done
  done
fi
exit $status
