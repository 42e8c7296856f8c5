#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages rill needs to build and test, when they are
# missing. As root it runs apt-get itself; otherwise it prints the exact
# command to run and fails.
set -euo pipefail

# BLIS runs the ops' matrix products and oneDNN the CPU device's convolutions;
# clang and its runtime libraries (libFuzzer) build the fuzz targets; Debian's
# python3 with cffi, numpy and pytest runs and tests the Python package, and
# python3-dev's headers let the build compile its cffi declarations (API
# mode); python3-venv makes the fresh virtualenvs that `pip install .` is
# tested in; python3-torch (CPU) is what the Python tests check DLPack
# exchange and torch semantics against; OpenMPI builds librill_mpi and runs
# its tests (mpirun); clang-format checks the sources' layout; g++ builds seed
# 004's ACL program, which is C++, on librill_acl.
packages=(cmake ninja-build pkg-config gcc g++ libc6-dev libcmocka-dev libblis-serial-dev
  libdnnl-dev clang libclang-rt-dev clang-format python3 python3-cffi python3-numpy python3-pytest python3-dev
  python3-venv python3-torch
  libopenmpi-dev
  openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "rill: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "rill: missing Debian packages; install them with:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
