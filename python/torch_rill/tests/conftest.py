# SPDX-License-Identifier: MIT
"""torch_rill's tests: PyTorch with the rill device, exercised as PyTorch's
own tests of an accelerator do (OpenReg's, and the CUDA tests' streams,
events and allocator)."""

import threading
import time

import pytest
import torch

import torch_rill  # noqa: F401  registers the device

import rill
from rill._ffi import ffi


def rill_stream(stream):
    """rill's Python Stream object for a torch stream on rill."""
    return rill.Stream._wrap(ffi.cast("rill_stream *", stream.rill_handle))


def delay(stream, seconds):
    """Queues a host function that sleeps on stream: the work after it
    waits, which makes the order of two streams visible."""
    rill_stream(stream).launch_host_func(time.sleep, seconds)


def gate(stream, timeout=20.0):
    """Queues a host function that waits for the returned threading.Event
    (at most timeout seconds): the work after it runs once the test sets it,
    so the test sees that work still queued, with certainty."""
    opened = threading.Event()
    rill_stream(stream).launch_host_func(opened.wait, timeout)
    return opened


@pytest.fixture(autouse=True)
def _synchronized():
    yield
    for index in range(torch.rill.device_count()):
        torch.rill.synchronize(index)
