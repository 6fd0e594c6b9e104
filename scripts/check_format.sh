#!/usr/bin/env bash
# Checks that every C, C++ and CUDA source of the tree is formatted with the
# project's .clang-format (clang-format from Debian 12, installed by
# scripts/setup.sh). Prints the files that differ; `clang-format -i FILE`
# fixes one.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cpp')
bad=()
for file in "${files[@]}"; do
  clang-format --dry-run --Werror "$file" > /dev/null 2>&1 || bad+=("$file")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format check: ${#bad[@]} file(s) differ from .clang-format (run clang-format -i on them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format check: ${#files[@]} files formatted"
