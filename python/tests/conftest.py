# SPDX-License-Identifier: MIT
"""Fixtures of rill's Python tests. The package is imported from this
source tree (python/), and librill.so from $RILL_LIBRARY when set (ctest
sets it to the library it built), else as rill._ffi finds it."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rill  # noqa: E402


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
    """The test runs on a runtime with two CPU devices (RILL_CPU_DEVICES=2,
    read when the runtime starts after rill.shutdown()); the one after it
    has the devices the environment gives."""
    before = os.environ.get("RILL_CPU_DEVICES")
    rill.shutdown()
    os.environ["RILL_CPU_DEVICES"] = "2"
    try:
        assert rill.device_count() == 2
        yield
    finally:
        rill.set_device(0)
        rill.shutdown()
        if before is None:
            del os.environ["RILL_CPU_DEVICES"]
        else:
            os.environ["RILL_CPU_DEVICES"] = before
