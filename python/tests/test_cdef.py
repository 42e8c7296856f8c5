# SPDX-License-Identifier: MIT
"""The package's C declarations (rill/_ffi.py, used in cffi's ABI mode,
where nothing checks them against the header) agree with include/rill.h:
a C compiler sees every function declared again after the header, which it
refuses unless the two agree, and asserts every enum value and every
struct's size and field offsets as cffi lays them out."""

import os
import shutil
import subprocess
import sys

import pytest

from rill import _ffi

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.environ.get("RILL_INCLUDE_DIR",
                         os.path.join(os.path.dirname(os.path.dirname(HERE)), "include"))


def _checks():
    ffi = _ffi.ffi
    lines = ["#include <stddef.h>", "#include \"rill.h\"", _ffi.FUNCS]
    for enum in ("rill_status", "rill_device_kind", "enum rill_event_flags", "rill_capture_mode",
                 "rill_capture_status", "rill_mem_pool"):
        for name, value in ffi.typeof(enum).relements.items():
            lines.append(f'_Static_assert({name} == {value}, "{name} is {value} in _ffi.py");')
    for struct in ("rill_device_info", "rill_ipc_event_handle", "rill_mem_stats",
                   "rill_mem_pool_stats"):
        t = ffi.typeof(struct)
        lines.append(f'_Static_assert(sizeof({struct}) == {ffi.sizeof(t)}, "sizeof {struct}");')
        for name, field in t.fields:
            lines.append(f'_Static_assert(offsetof({struct}, {name}) == {field.offset}, '
                         f'"offset of {struct}.{name}");')
    return "\n".join(lines) + "\n"


def test_cdef_agrees_with_rill_h(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler to check the declarations with")
    assert os.path.exists(os.path.join(INCLUDE, "rill.h")), INCLUDE
    src = tmp_path / "cdef_check.c"
    src.write_text(_checks())
    run = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-I", INCLUDE,
                          str(src)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


def test_cdef_check_catches_a_wrong_declaration(tmp_path):
    """The check above can fail: a declaration that disagrees is refused."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler to check the declarations with")
    src = tmp_path / "wrong.c"
    src.write_text('#include "rill.h"\nrill_status rill_stream_query(rill_stream *s, int x);\n')
    run = subprocess.run([cc, "-std=c11", "-fsyntax-only", "-I", INCLUDE, str(src)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0


def test_the_build_s_cffi_mode_is_in_use():
    # ctest says which mode the build made possible: API when it compiled
    # the declarations, unless RILL_PYTHON_ABI asks for ABI mode.
    expected = os.environ.get("RILL_EXPECT_CFFI_MODE")
    if expected is None:
        pytest.skip("not run by ctest")
    if _ffi.abi_requested(os.environ.get("RILL_PYTHON_ABI")):
        expected = "abi"
    assert _ffi.mode == expected
    # The build compiles _rill_fast wherever it compiles _rill_cffi.
    assert (_ffi.fast is not None) == (expected == "api")


def test_a_compiled_module_that_cannot_load_leaves_abi_mode(tmp_path, monkeypatch):
    # As a module built for a newer library than the one found would: ABI mode.
    import importlib.machinery
    monkeypatch.delenv("RILL_PYTHON_ABI", raising=False)
    (tmp_path / "python").mkdir()
    name = "_rill_cffi" + importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / "python" / name).write_bytes(b"not a shared object")
    assert _ffi._compiled_module(str(tmp_path / "librill.so"), "the build tree") is None
    assert _ffi._compiled_module(str(tmp_path / "elsewhere" / "librill.so"),
                                 "the build tree") is None  # none there


def _mode_with(value):
    """rill._ffi.mode in a new interpreter with RILL_PYTHON_ABI=value (None:
    unset), importing the package this one imported; or the import's error."""
    env = dict(os.environ)
    env.pop("RILL_PYTHON_ABI", None)
    if value is not None:
        env["RILL_PYTHON_ABI"] = value
    root = os.path.dirname(os.path.dirname(os.path.abspath(_ffi.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", "import rill; print(rill._ffi.mode)"], env=env,
                         capture_output=True, text=True, timeout=120)
    return run.stdout.strip() if run.returncode == 0 else run.stderr


def test_rill_python_abi_takes_true_and_false_values():
    # Only a true value asks for ABI mode; a false or empty one keeps the
    # mode the build allows, and anything else is an error naming it.
    for value in ("1", "true", "Yes", " on "):
        assert _ffi.abi_requested(value) is True, value
    for value in (None, "0", "false", "NO", "off", ""):
        assert _ffi.abi_requested(value) is False, value
    for value in ("2", "sometimes"):
        with pytest.raises(ValueError, match=f"RILL_PYTHON_ABI is '{value}'; set it to 1"):
            _ffi.abi_requested(value)
    # At the package's import: RILL_PYTHON_ABI=0 keeps the build's mode.
    built = _mode_with(None)
    assert built in ("api", "abi"), built
    assert _mode_with("0") == built
    assert _mode_with("1") == "abi"
    err = _mode_with("sometimes")
    assert "ValueError: rill: RILL_PYTHON_ABI is 'sometimes'" in err, err
