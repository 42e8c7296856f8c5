#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pip builds torch_rill's wheel against the PyTorch of the given interpreter
# (no build isolation: PyTorch is not fetched again), the wheel installs
# into a scratch folder, and `import torch` alone then loads the device
# through PyTorch's backend autoload entry point.
# Usage: check_wheel.sh PYTHON SOURCE_DIR WORK_DIR LIBRILL
set -euo pipefail
python=$1 src=$2 work=$3 librill=$4
rm -rf "$work"
mkdir -p "$work/wheel" "$work/site"
# A copy of the package folder, so that the build leaves the tree clean.
cp -r "$src/python/torch_rill" "$work/src"
mkdir -p "$work/include" && cp "$src/include/rill.h" "$work/include/"
mv "$work/src" "$work/pkg" && mkdir -p "$work/python" && mv "$work/pkg" "$work/python/torch_rill"
rm -rf "$work/python/torch_rill/build" "$work/python/torch_rill/torch_rill/"_C*.so
"$python" -m pip wheel -q --no-build-isolation --no-deps -w "$work/wheel" "$work/python/torch_rill"
wheel=$(ls "$work"/wheel/torch_rill-*.whl)
"$python" -m pip install -q --no-deps --target "$work/site" "$wheel"
cd "$work"
out=$(env -u TORCH_RILL_EXTENSION TORCH_DEVICE_BACKEND_AUTOLOAD=1 RILL_LIBRARY="$librill" \
  PYTHONPATH="$work/site:$src/python" "$python" -c '
import torch
x = torch.arange(4.0, device="rill")
print(x.device, (x * 2).sum().item(), torch.rill.device_count() >= 1)')
echo "$out"
[ "$out" = "rill:0 12.0 True" ] || { echo "check_wheel: unexpected output" >&2; exit 1; }
echo "torch_rill wheel: built, installed and autoloaded"
