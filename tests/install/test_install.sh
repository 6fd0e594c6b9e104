#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer
# found through the CMake package and through pkg-config.
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"

cmake -S "$source_dir" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/cmake" > "$work/build.log"
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}" "$work/cmake/consumer"

pc_dir=$(dirname "$(find "$work/prefix" -name dml.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs dml)
cc "$source_dir/consumer.c" -o "$work/consumer_pc" $flags
LD_LIBRARY_PATH="$(PKG_CONFIG_PATH="$pc_dir" pkg-config --variable=libdir dml):${LD_LIBRARY_PATH:-}" "$work/consumer_pc"
echo "1 passed, 0 failed"
