#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What `pip install` gives a user, in fresh virtualenvs of the tests'
# interpreter (Debian's /usr/bin/python3) with nothing else set, from
# outside the source tree:
#  1. pip installs the repository (its root) into one: scikit-build-core
#     builds the wheel with CMake;
#  2. `pip wheel ./python` makes the wheel again from python/ (each build
#     takes about 15 s: sharing one would not pay, since scikit-build-core
#     starts a build directory afresh in each new isolated environment);
#  3. that wheel installs into a second fresh virtualenv, as it would on
#     another machine of the same kind: its binaries need nothing but the C
#     library, and name no path of this one;
#  4. in each, the package imports from the virtualenv, in API mode with the
#     C fast path, loads the librill inside it, has the project's version,
#     and computes on a stream; in the second, the repository's Python tests
#     run against it (at most 300 s).
# pip needs PyPI (its cache, ~/.cache/pip, spares the downloads next time).
# Usage: check_wheel.sh PYTHON SOURCE_DIR WORK_DIR VERSION
set -euo pipefail
python=$1 src=$2 work=$3 version=$4
rm -rf "$work"
mkdir -p "$work"
cd "$work"
unset RILL_LIBRARY RILL_PYTHON_ABI RILL_INCLUDE_DIR PYTHONPATH PYTHONHOME
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
step() { echo "== wheel: $* ($SECONDS s)"; }

step "a virtualenv, and pip install $src"
"$python" -m venv root-venv
root-venv/bin/pip install -q "$src"
step "pip wheel $src/python"
root-venv/bin/pip wheel -q --no-deps -w dist "$src/python"
wheels=(dist/rill-*.whl)
[ ${#wheels[@]} -eq 1 ] || { echo "expected one wheel in dist/: ${wheels[*]}"; exit 1; }
step "a second virtualenv, and pip install ${wheels[0]#dist/} pytest"
"$python" -m venv wheel-venv
wheel-venv/bin/pip install -q "${wheels[0]}" pytest

# The installed package, from the virtualenv, in API mode, with librill
# from inside it; the wheel (platform-tagged) holds the library and both
# modules, whose dependencies are the C library's alone, without RPATH.
cat >check_installed.py <<'EOF'
import glob, importlib.metadata, os, subprocess, sys, zipfile
import numpy as np
import rill

version, wheel = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
package = os.path.dirname(os.path.realpath(rill.__file__))
assert package.startswith(os.path.realpath(sys.prefix) + os.sep), (package, sys.prefix)
assert os.path.dirname(os.path.realpath(rill.library_path)) == package, rill.library_path
assert rill._ffi.mode == "api", rill._ffi.mode
assert rill._ffi.fast is not None and os.path.dirname(rill._ffi.fast.__file__) == package
assert rill.__version__ == version == importlib.metadata.version("rill"), rill.__version__
s = rill.Stream()
with rill.stream(s):
    s.wait_stream(rill.default_stream())
    a = rill.ones(64, 64)
    c = a @ a + 1
    done = s.record_event()
rill.current_stream().wait_event(done)
assert np.array_equal((c * 2).numpy(), np.full((64, 64), 130, np.float32))
if wheel:
    assert "-linux_" in os.path.basename(wheel) and not wheel.endswith("-none-any.whl"), wheel
    names = zipfile.ZipFile(wheel).namelist()
    for prefix in ("rill/librill.so.0", "rill/_rill_cffi.", "rill/_rill_fast.", "rill/_install.py"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    system = ("libc.so.", "libm.so.", "libpthread.so.", "libdl.so.", "librt.so.", "ld-linux")
    for lib in glob.glob(os.path.join(package, "*.so*")):
        dynamic = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True,
                                 text=True).stdout
        assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, (lib, dynamic)
        for line in dynamic.splitlines():
            if "(NEEDED)" in line:
                needed = line.split("[")[1].rstrip("]")
                assert needed.startswith(system), (lib, needed)
print("rill", rill.__version__, rill._ffi.mode, rill.library_path)
EOF
step "the package pip installed from the root"
root-venv/bin/python check_installed.py "$version"
step "the package installed from the wheel"
wheel-venv/bin/python check_installed.py "$version" "${wheels[0]}"

# The repository's Python tests, in place, against the installed wheel:
# RILL_TEST_INSTALLED=1 makes conftest.py import the package installed in
# the virtualenv instead of the source tree's (torch is not installed there:
# its tests skip). Nothing is written into the tree (no bytecode, no cache).
step "the repository's Python tests against the installed wheel"
RILL_TEST_INSTALLED=1 RILL_EXPECT_CFFI_MODE=api RILL_CPU_WORKERS=4 PYTHONDONTWRITEBYTECODE=1 \
  timeout 300 wheel-venv/bin/python -m pytest -q -p no:cacheprovider "$src/python/tests"
step "done"
