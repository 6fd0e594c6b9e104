#!/usr/bin/env bash
# Installs the Debian packages libdml needs to build and test, when missing.
# As root it runs apt-get itself; otherwise it prints the command to run.
set -euo pipefail

packages=(gcc g++ make cmake pkg-config libcjson-dev libdnnl-dev clang clang-format libclang-rt-14-dev libomp-dev valgrind
  # make package: cpack's DEB generator computes Depends with dpkg-shlibdeps, which finds the binaries with file.
  dpkg-dev file
  # The Python package (python/) and its tests: headers, build tools, DLPack, NumPy, PyTorch, torchvision.
  python3-dev python3-setuptools python3-pip libdlpack-dev python3-numpy python3-pytest python3-torch
  python3-torchvision)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "libdml setup: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "Run as root:  apt-get update && apt-get install -y ${missing[*]}"
  exit 1
fi
