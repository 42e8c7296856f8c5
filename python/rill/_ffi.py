# SPDX-License-Identifier: MIT
"""librill.so loaded, and its functions called through cffi: in API mode
when the build compiled _rill_cffi (from rill/_cdef.py), else in ABI mode
(RILL_PYTHON_ABI=1, true, yes or on forces it; 0, false, no, off or empty
does not, and another value is a ValueError); `mode` says which, and `fast` is
_rill_fast (rill_fast.c) when built. The library is looked for in
$RILL_LIBRARY, beside this package (_install.py), in build/release or
build/default of the source tree, then on the linker's path."""

import importlib.machinery
import importlib.util
import os

import cffi

from ._cdef import DLPACK, FUNCS, LIBC, TYPES

_abi = cffi.FFI()
_abi.cdef("typedef struct _IO_FILE FILE;")
_abi.cdef(TYPES)
_abi.cdef(FUNCS)
_abi.cdef(LIBC)
_abi.cdef(DLPACK)

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "librill.so.0"


def _source_tree_library():
    """librill.so of a build of the source tree this package sits in
    (python/rill/ of the repository), the newest of the unsanitised presets:
    a sanitised library cannot be loaded into an uninstrumented python."""
    root = os.path.dirname(os.path.dirname(_HERE))
    found = []
    for preset in ("release", "default"):
        path = os.path.join(root, "build", preset, "librill.so")
        if os.path.exists(path):
            found.append((os.path.getmtime(path), path))
    return max(found)[1] if found else None


def _candidates():
    env = os.environ.get("RILL_LIBRARY")
    if env:
        return [("$RILL_LIBRARY", env)]
    out = []
    try:
        from . import _install  # written by cmake --install
        installed = os.path.normpath(os.path.join(_HERE, _install.LIBRARY))
        out.append(("the installed package", installed))
    except ImportError:
        pass
    built = _source_tree_library()
    if built:
        out.append(("the build tree", built))
    out.append(("the dynamic linker's search path", _SONAME))
    return out


def abi_requested(value):
    """Whether RILL_PYTHON_ABI's value (None: unset) asks for ABI mode."""
    word = "" if value is None else value.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"rill: RILL_PYTHON_ABI is {value!r}; set it to 1, true, yes or on for "
                     "cffi's ABI mode, or to 0, false, no or off (or unset it) for the mode "
                     "the build allows")


def _compiled_module(path, where, module="_rill_cffi"):
    """The compiled module (_rill_cffi or _rill_fast) built with the library
    at path, or None: the one in build/<preset>/python/ beside a build's
    librill.so, or the one installed in this package beside the installed
    library."""
    if abi_requested(os.environ.get("RILL_PYTHON_ABI")):
        return None
    name = module + importlib.machinery.EXTENSION_SUFFIXES[0]
    if where == "the installed package":
        found = os.path.join(_HERE, name)
    else:
        found = os.path.join(os.path.dirname(os.path.realpath(path)), "python", name)
    if not os.path.exists(found):
        return None
    spec = importlib.util.spec_from_file_location("rill." + module, found)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:  # a library older than the module (a partial rebuild): ABI mode
        return None
    return module


def _load():
    tried = []
    for where, path in _candidates():
        try:
            # RTLD_NODELETE: the library stays mapped after cffi closes it
            # at interpreter finalisation, since its worker threads still
            # run (they sleep, and wake to unmapped code otherwise).
            # RTLD_GLOBAL: the compiled module's references resolve to it.
            handle = _abi.dlopen(path, _abi.RTLD_NOW | _abi.RTLD_NODELETE | _abi.RTLD_GLOBAL)
            compiled = _compiled_module(path, where)
            if compiled is not None:
                fast = _compiled_module(path, where, "_rill_fast")
                return compiled.ffi, compiled.lib, compiled.lib, path, "api", fast
            return _abi, handle, _abi.dlopen(None), path, "abi", None
        except OSError as exc:
            tried.append(f"{path} ({where}): {exc}")
            if where == "$RILL_LIBRARY":
                break
    raise ImportError(
        "rill: cannot load librill.so; tried " + "; ".join(tried) + ". Build rill "
        "(cmake --preset release -G Ninja && cmake --build build/release) and set "
        "RILL_LIBRARY=build/release/librill.so, or install it with "
        "cmake --install build/release")


ffi, lib, libc, library_path, mode, fast = _load()
