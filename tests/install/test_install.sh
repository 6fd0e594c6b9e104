#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs programs
# against it: a consumer found through the CMake package (dml::dml and
# dml::dml_static) and through pkg-config (shared and --static), and
# examples/ on its own.
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
examples_dir=$(cd "$source_dir/../../examples" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0

# run NAME PROGRAM: runs it; the static ones must not need libdml.so.
run() {
  echo "== $1"
  "$2"
  passed=$((passed + 1))
}

cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
pc_dir=$(dirname "$(find "$work/prefix" -name dml.pc | head -n 1)")
libdir=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --variable=libdir dml)
export LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}"

cmake -S "$source_dir" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/cmake" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
run "CMake, dml::dml" "$work/cmake/consumer"
run "CMake, dml::dml_static" "$work/cmake/consumer_static"

flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs dml)
cc "$source_dir/consumer.c" -o "$work/consumer_pc" $flags
run "pkg-config" "$work/consumer_pc"
# --static: libdml.a and everything it needs (-Wl,-Bstatic picks libdml.a
# over libdml.so beside it).
static_flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --static --cflags --libs dml)
cc "$source_dir/consumer.c" -o "$work/consumer_pc_static" ${static_flags/ -ldml / -Wl,-Bstatic -ldml -Wl,-Bdynamic }
run "pkg-config --static" "$work/consumer_pc_static"

for program in "$work/cmake/consumer_static" "$work/consumer_pc_static"; do
  if [ "$(readelf -d "$program" | grep -c 'libdml')" != 0 ]; then
    echo "FAIL: $program, linked statically, needs libdml.so"
    exit 1
  fi
done

cmake -S "$examples_dir" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_C_FLAGS="-Werror" > "$work/examples.log"
cmake --build "$work/examples" >> "$work/examples.log" || { cat "$work/examples.log"; exit 1; }
run "examples/ against the installed libdml" "$work/examples/max_pooling_example"
echo "$passed passed, 0 failed"
