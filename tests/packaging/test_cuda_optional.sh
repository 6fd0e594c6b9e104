#!/usr/bin/env bash
# The CUDA backend is optional at run time (docs/cuda.md): libdml.so links the
# CUDA runtime statically, so it needs no CUDA library to load.
#
#   test_cuda_optional.sh deps   BUILD_DIR   libdml.so and dmlrun need no libcudart/libcuda
#   test_cuda_optional.sh hidden BUILD_DIR   with every CUDA library directory hidden (a
#                                            private mount namespace: root only, else
#                                            skipped with 77), the CPU programs and tests
#                                            run and a CUDA device fails with a clear message
set -euo pipefail
mode=$1
build_dir=$(cd "$2" && pwd)
library=$(readlink -f "$build_dir/libdml.so")
programs=("$library" "$build_dir/tools/dmlrun/dmlrun" "$build_dir/examples/max_pooling_example")
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

case $mode in
deps)
  for program in "${programs[@]}"; do
    needed=$(readelf -d "$program" | grep NEEDED || true)
    echo "$(basename "$program"): $(echo "$needed" | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
    [ "$(echo "$needed" | grep -c 'libcud')" = 0 ] || fail "$program needs a CUDA library"
    [ "$(ldd "$program" | grep -c 'libcud')" = 0 ] || fail "$program loads a CUDA library (ldd)"
  done
  # The static runtime is inside, not exported.
  [ "$(nm -D --defined-only "$library" | grep -c ' cudaGetDeviceCount$')" = 0 ] ||
    fail "libdml.so exports the CUDA runtime's functions"
  [ "$(nm "$library" | grep -c ' cudaGetDeviceCount$')" = 1 ] ||
    fail "libdml.so has no CUDA runtime inside (not a CUDA build?)"
  ;;
hidden)
  if [ "${DML_IN_NAMESPACE:-}" != 1 ]; then
    # Re-run this script in a private mount namespace.
    if ! unshare -m --propagation private true 2>/dev/null; then
      echo "SKIPPED: no private mount namespace here (unshare -m needs root)"
      exit 77
    fi
    exec env DML_IN_NAMESPACE=1 unshare -m --propagation private "$0" "$@"
  fi
  empty=$build_dir/empty-directory # stays mounted until the namespace ends
  mkdir -p "$empty"
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  # Every directory that holds a CUDA library (the toolkit's and the
  # driver's, as the loader's cache knows them), hidden under an empty one.
  mapfile -t directories < <(ldconfig -p | sed -n 's/.*=> \(.*\/\)libcud[a-z_]*\.so.*/\1/p' | sort -u)
  directories+=("$DML_CUDA_LIBRARY_DIR")
  for directory in "${directories[@]}"; do
    [ -d "$directory" ] && mount --bind "$empty" "$directory"
  done
  for directory in "${directories[@]}"; do
    if ls "$directory" 2>/dev/null | grep -q '^libcud'; then fail "$directory still shows CUDA libraries"; fi
  done
  echo "hidden: ${directories[*]}"

  "$build_dir/examples/max_pooling_example" || fail "max_pooling_example (CPU, shared libdml) failed"
  # CPU test programs (libdml.a with the CUDA runtime inside).
  for program in test_api test_max_pooling test_roi_align test_batch_normalization; do
    "$build_dir/tests/$program" > "$log" 2>&1 || fail "$program failed: $(tail -n 5 "$log")"
    echo "$program: $(tail -n 1 "$log")"
  done
  "$build_dir/tools/dmlrun/dmlrun" > "$log" 2>&1 || fail "the CPU tour failed: $(cat "$log")"
  grep -x "tour: 12 operators, all results as expected" "$log" || fail "the CPU tour's summary is missing"
  status=0
  message=$("$build_dir/tools/dmlrun/dmlrun" --backend cuda 2>&1) || status=$?
  echo "dmlrun --backend cuda: exit $status: $message"
  [ "$status" = 1 ] || fail "a CUDA device without the driver: exit status $status, not 1"
  echo "$message" | grep -q "no usable CUDA device: the NVIDIA driver (libcuda.so.1) is missing" ||
    fail "a CUDA device without the driver: the message does not say the driver is missing"
  echo "$message" | grep -q "DXGI_ERROR_UNSUPPORTED" || fail "a CUDA device without the driver: not DXGI_ERROR_UNSUPPORTED"
  ;;
*)
  echo "usage: $0 deps|hidden BUILD_DIR" >&2
  exit 2
  ;;
esac
[ $failed = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $failed
