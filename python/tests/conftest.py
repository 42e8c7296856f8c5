# SPDX-License-Identifier: MIT
"""Fixtures of rill's Python tests. They test the package of this source
tree (python/rill), with librill.so from $RILL_LIBRARY when set (ctest sets
it to the library it built), else as rill._ffi finds it; or an installed
package (a wheel, cmake --install), which RILL_TEST_INSTALLED=1 asks for
and which is taken without the variable when this tree has no build to
load (no $RILL_LIBRARY, no build/release or build/default librill.so) and
`import rill` finds one. RILL_TEST_INSTALLED=0 asks for the source tree's."""

import importlib.util
import os
import sys

import pytest

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/


def _installed_wanted():
    value = os.environ.get("RILL_TEST_INSTALLED")
    if value is not None:
        word = value.strip().lower()
        if word in ("1", "true", "yes", "on"):
            return True
        if word in ("0", "false", "no", "off", ""):
            return False
        raise pytest.UsageError(f"RILL_TEST_INSTALLED is {value!r}; set it to 1 to test the "
                                "installed rill package, or to 0 (or unset it) for this "
                                "source tree's")
    if os.environ.get("RILL_LIBRARY"):
        return False
    root = os.path.dirname(SOURCE)
    if any(os.path.exists(os.path.join(root, "build", preset, "librill.so"))
           for preset in ("release", "default")):
        return False
    return _without_source(lambda: importlib.util.find_spec("rill") is not None)


def _is_source(entry):
    try:
        return os.path.samefile(entry or os.curdir, SOURCE)
    except OSError:
        return False


def _without_source(fn):
    """fn() with this tree's python/ off sys.path (where `python -m pytest`
    run in python/ puts it, as the current directory)."""
    kept = sys.path[:]
    sys.path[:] = [entry for entry in sys.path if not _is_source(entry)]
    try:
        return fn()
    finally:
        sys.path[:] = kept


INSTALLED = _installed_wanted()
if INSTALLED:
    sys.path[:] = [entry for entry in sys.path if not _is_source(entry)]
    if importlib.util.find_spec("rill") is None:
        raise pytest.UsageError(f"RILL_TEST_INSTALLED asks for the installed rill package, but "
                                f"{sys.executable} finds none: install it (pip install, or "
                                "cmake --install and PYTHONPATH), or unset RILL_TEST_INSTALLED")
    import rill  # noqa: E402
    if _is_source(os.path.dirname(os.path.dirname(os.path.abspath(rill.__file__)))):
        raise pytest.UsageError(f"the tests should test an installed rill package but import "
                                f"{rill.__file__} of the source tree")
else:
    sys.path.insert(0, SOURCE)
    import rill  # noqa: E402


def pytest_report_header(config):
    which = "installed" if INSTALLED else "source tree's"
    return f"rill: the {which} package, {os.path.dirname(rill.__file__)}; " \
           f"librill {rill.library_path}; cffi {rill._ffi.mode} mode"


@pytest.fixture(autouse=True)
def clean_device():
    """Each test starts and ends on the default stream with no work pending;
    a sticky error a test leaves behind fails that test, not the next."""
    rill.set_stream(None)
    yield
    rill.set_stream(None)
    rill.synchronize()


class Gate:
    """A host function that holds its stream until opened (or, so that a
    broken test fails instead of hanging, for 10 s; `timed_out` then)."""

    def __init__(self):
        import threading
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.timed_out = False

    def __call__(self):
        self.entered.set()
        if not self.opened.wait(10):
            self.timed_out = True

    def open(self):
        self.opened.set()


@pytest.fixture
def gate():
    g = Gate()
    yield g
    g.open()


@pytest.fixture
def two_devices():
    """The test runs on a runtime whose devices 0 and 1 are of one kind:
    two CPU devices (RILL_CPU_DEVICES=2, read when the runtime starts after
    rill.shutdown()), or two GPUs of the stand-in CUDA driver
    (RILL_FAKE_CUDA_DEVICES=2); skipped with one GPU. The runtime after it
    has the devices the environment gives."""
    names = ("RILL_CPU_DEVICES", "RILL_FAKE_CUDA_DEVICES")
    before = {name: os.environ.get(name) for name in names}
    rill.shutdown()
    for name in names:
        os.environ[name] = "2"
    try:
        kind = rill.device(0).kind
        if rill.device_count() < 2 or rill.device(1).kind != kind:
            pytest.skip(f"needs two devices of one kind; rill has one {kind} device")
        yield
    finally:
        rill.set_device(0)
        rill.shutdown()
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


@pytest.fixture
def cpu_device():
    """The test runs on rill's CPU device (whose memory the host reads, and
    whose kernels are C functions) where rill has CUDA devices too; the
    current device is restored after it."""
    before = rill.current_device()
    rill.set_device(rill.device("cpu"))
    try:
        yield
    finally:
        rill.set_stream(None)
        rill.synchronize()
        rill.set_device(before.index)  # an ordinal outlives a rill.shutdown() in the test
