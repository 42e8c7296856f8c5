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
import importlib.util
import os
import shutil
import sys
import tempfile

import cffi


def _load_cdef():
    """rill/_cdef.py alone: importing the package would load the module
    that a previous build made, whose declarations may be older than the
    package's (an incremental build after a new function)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rill", "_cdef.py")
    spec = importlib.util.spec_from_file_location("_rill_cdef", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cdef = _load_cdef()
DLPACK, FUNCS, LIBC, TYPES = _cdef.DLPACK, _cdef.FUNCS, _cdef.LIBC, _cdef.TYPES


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
