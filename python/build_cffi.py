# SPDX-License-Identifier: MIT
"""Writes rill's cffi declarations (rill/_cdef.py) in cffi's API mode as the
C source of the extension module _rill_cffi, which CMake compiles
(python/CMakeLists.txt): direct C calls, about a fifth of the cost of an
ABI-mode call, which the per-op overhead of the tensors is made of. The
module does not link librill: rill._ffi loads the library it chose with
RTLD_GLOBAL first, and the module's references resolve to it.

    python3 build_cffi.py OUT_C_FILE

CMake runs it at build time with the package's interpreter (Debian's
/usr/bin/python3, or the one that runs pip), which compiles the result
against its own headers (python3-dev); without them the package runs in
ABI mode as before."""

import importlib.util
import os
import sys

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


def main(out_c):
    ffi = cffi.FFI()
    ffi.cdef("typedef ... FILE;")
    ffi.cdef(TYPES)
    ffi.cdef(FUNCS)
    ffi.cdef(LIBC)
    ffi.cdef(DLPACK)
    ffi.set_source("_rill_cffi", "#include <stdio.h>\n#include <stdlib.h>\n#include \"rill.h\"\n"
                   + DLPACK)
    # Written beside, then renamed: an interrupted build leaves no half file
    # that the next one would take as up to date.
    ffi.emit_c_code(out_c + ".tmp")
    os.replace(out_c + ".tmp", out_c)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_cffi.py OUT_C_FILE")
    sys.exit(main(sys.argv[1]))
