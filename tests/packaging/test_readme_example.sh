#!/usr/bin/env bash
# README.md's short example, as printed there, compiles clean with
# -Wall -Wextra -Werror and computes the output its comment states.
#   test_readme_example.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1
build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The first ```c block: its #include lines at file scope, the rest as main's
# body, then a check of the output it names ("output = {4, 4, 6, 7}").
awk '/^```c$/ {inside = 1; next} inside && /^```$/ {exit} inside {print}' "$source_dir/README.md" > "$work/snippet.c"
grep -q 'dmlDispatch' "$work/snippet.c" || { echo "FAIL: no C example found in README.md"; exit 1; }
expected=$(sed -n 's/.*output = {\([0-9, ]*\)}.*/\1/p' "$work/snippet.c")
[ -n "$expected" ] || { echo "FAIL: the example does not state its output"; exit 1; }
{
  grep '^#include' "$work/snippet.c"
  echo 'int main(void) {'
  grep -v '^#include' "$work/snippet.c"
  echo '    printf("output = {%g, %g, %g, %g}\n", output[0], output[1], output[2], output[3]);'
  echo '    dmlReleaseCompiledOperator(compiled);'
  echo '    dmlReleaseOperator(op);'
  echo '    dmlReleaseDevice(device);'
  echo '    return 0;'
  echo '}'
} > "$work/example.c"
cc -std=c11 -Wall -Wextra -Werror -I"$source_dir/include" "$work/example.c" -o "$work/example" \
  -L"$build_dir" -Wl,-rpath,"$build_dir" -ldml
output=$("$work/example")
echo "$output"
[ "$output" = "output = {$expected}" ] || { echo "FAIL: expected output = {$expected}"; exit 1; }
echo "1 passed, 0 failed"
