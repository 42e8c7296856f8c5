#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes (once) and prints the virtual environment that builds and tests the
# PyTorch device package, python/torch_rill: Debian's python3 with the
# pinned PyTorch from PyPI (about 5 GB with its CUDA libraries), pytest,
# numpy, cffi and expecttest. It is kept in RILL_TORCH_VENV (default
# ~/.cache/rill/torch-2.15) and reused while its PyTorch is the pinned one.
# Prints the environment's python on standard output.
set -euo pipefail
version=2.15.0
venv=${RILL_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rill/torch-${version%.*}}
python=$venv/bin/python
# expecttest: PyTorch's test helpers (torch.testing._internal, whose
# OpInfo samples test_opinfo.py runs) import it.
extras="numpy pytest cffi expecttest"
if [ -x "$python" ] &&
  [ "$("$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$version" ]; then
  if ! "$python" -c 'import pytest, numpy, cffi, expecttest' 2>/dev/null; then
    "$venv/bin/pip" install -q --disable-pip-version-check --progress-bar off $extras >&2
  fi
  echo "$python"
  exit 0
fi
echo "rill: installing PyTorch $version into $venv (once; about 5 GB)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --progress-bar off \
  "torch==$version" $extras >&2
echo "$python"
