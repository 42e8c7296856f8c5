# SPDX-License-Identifier: MIT
"""Compiles rill's cffi declarations (rill/_cdef.py) in cffi's API mode into
the extension module _rill_cffi: direct C calls, about a fifth of the cost
of an ABI-mode call, which the per-op overhead of the tensors is made of.
The module does not link librill: rill._ffi loads the library it chose
with RTLD_GLOBAL first, and the module's references resolve to it.

    python3 build_cffi.py OUT_DIR INCLUDE_DIR

CMake runs it at build time (python/CMakeLists.txt) with Debian's
/usr/bin/python3, which needs python3-dev's headers; without them the
package runs in ABI mode as before."""

import importlib.machinery
import os
import shutil
import sys
import tempfile

import cffi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rill._cdef import DLPACK, FUNCS, LIBC, TYPES  # noqa: E402


def main(out_dir, include_dir):
    ffi = cffi.FFI()
    ffi.cdef("typedef ... FILE;")
    ffi.cdef(TYPES)
    ffi.cdef(FUNCS)
    ffi.cdef(LIBC)
    ffi.cdef(DLPACK)
    ffi.set_source("_rill_cffi", "#include <stdio.h>\n#include <stdlib.h>\n#include \"rill.h\"\n"
                   + DLPACK,
                   include_dirs=[os.path.abspath(include_dir)], extra_compile_args=["-O2"])
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = ffi.compile(tmpdir=tmp, verbose=False)
        name = "_rill_cffi" + importlib.machinery.EXTENSION_SUFFIXES[0]
        shutil.copyfile(built, os.path.join(out_dir, name + ".tmp"))
        os.replace(os.path.join(out_dir, name + ".tmp"), os.path.join(out_dir, name))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: build_cffi.py OUT_DIR INCLUDE_DIR")
    sys.exit(main(sys.argv[1], sys.argv[2]))
