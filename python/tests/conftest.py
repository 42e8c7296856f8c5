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
