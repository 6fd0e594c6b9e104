#!/usr/bin/env bash
# make package's Debian package: built by cpack from the build, named after
# the version of include/dml/dml.h, with its dependencies and contents; then
# unpacked into a scratch root (dpkg -x), where a consumer, the packaged
# examples and dmlrun's tour are built and run against it alone.
#   test_package.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

version=$(sed -n 's/^#define DML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$source_dir/include/dml/dml.h" |
  paste -sd.)
deb_name="libdml_${version}_$(dpkg --print-architecture).deb"
cpack --config "$build_dir/CPackConfig.cmake" -B "$work/package" > "$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; exit 1; }
deb=$work/package/$deb_name
[ -f "$deb" ] || { fail "cpack made $(ls "$work/package"/*.deb), not $deb_name"; exit 1; }
echo "$deb_name: $(dpkg-deb -f "$deb" Depends)"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is $(dpkg-deb -f "$deb" Version), not $version"
depends=$(dpkg-deb -f "$deb" Depends)
for needed in libc6 libgomp1; do
  [[ $depends == *"$needed"* ]] || fail "Depends lacks $needed: $depends"
done
[[ $depends != *cuda* ]] || fail "Depends names a CUDA package: $depends"

root=$work/root
dpkg -x "$deb" "$root"
for file in usr/lib/libdml.so.0 usr/lib/libdml.a usr/include/dml/dml.h usr/include/dml/dml_types.h \
  usr/lib/pkgconfig/dml.pc usr/lib/cmake/dml/dmlConfig.cmake usr/bin/dmlrun usr/share/doc/libdml/README.md \
  usr/share/doc/libdml/dmlrun.md usr/share/doc/libdml/spec/tensors.md usr/share/doc/libdml/examples/CMakeLists.txt; do
  [ -e "$root/$file" ] || fail "the package lacks /$file"
done
export LD_LIBRARY_PATH="$root/usr/lib:${LD_LIBRARY_PATH:-}"

# A consumer through the packaged CMake and pkg-config files.
cmake -S "$source_dir/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$root/usr" > "$work/consumer.log"
cmake --build "$work/consumer" >> "$work/consumer.log" || { cat "$work/consumer.log"; exit 1; }
"$work/consumer/consumer" || fail "the CMake consumer failed"
"$work/consumer/consumer_static" || fail "the CMake consumer of libdml.a failed"
cc "$source_dir/tests/install/consumer.c" -o "$work/consumer_pc" \
  $(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --cflags --libs dml)
"$work/consumer_pc" || fail "the pkg-config consumer failed"

# The packaged examples, built as a user would from /usr/share/doc/libdml.
cmake -S "$root/usr/share/doc/libdml/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$root/usr" > "$work/examples.log"
cmake --build "$work/examples" >> "$work/examples.log" || { cat "$work/examples.log"; exit 1; }
"$work/examples/max_pooling_example" > /dev/null || fail "the packaged example failed"

# dmlrun from the package: its version, its tour, a packaged example model.
"$root/usr/bin/dmlrun" --version | grep -qx "dmlrun (libdml $version)" || fail "dmlrun --version is not $version"
"$root/usr/bin/dmlrun" > "$work/tour.log" 2>&1 || fail "the tour failed: $(cat "$work/tour.log")"
grep -qx "tour: 12 operators, all results as expected" "$work/tour.log" || fail "the tour's summary is missing"
tail -n 4 "$work/tour.log"
"$root/usr/bin/dmlrun" "$root/usr/share/doc/libdml/examples/models/max_pooling2_mp1.json" > "$work/model.log" 2>&1 ||
  fail "the packaged model max_pooling2_mp1.json failed: $(cat "$work/model.log")"

[ $failed = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $failed
