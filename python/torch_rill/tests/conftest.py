# SPDX-License-Identifier: MIT
"""torch_rill's tests: PyTorch with the rill device, exercised as PyTorch's
own tests of an accelerator do (OpenReg's, and the CUDA tests' streams,
events and allocator)."""

import json
import os
import subprocess
import sys
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


def captured(tmp_path, fn):
    """fn() captured into a graph in debug mode, without autograd: the
    graph, fn's result, and the graph's nodes as DOT text."""
    g = torch.rill.RillGraph()
    g.enable_debug_mode()
    with torch.no_grad(), torch.rill.graph(g):
        result = fn()
    path = tmp_path / "graph.dot"
    g.debug_dump(str(path))
    return g, result, path.read_text()


def delay(stream, seconds):
    """Queues a host function that sleeps on stream: the work after it
    waits, which makes the order of two streams visible."""
    rill_stream(stream).launch_host_func(time.sleep, seconds)


def traced_names(tmp_path, code):
    """Runs the Python code in a new process with RILL_TRACE set, and
    returns the names of the commands its trace shows as run."""
    path = tmp_path / "trace.json"
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, RILL_TRACE=str(path)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    return {e.get("name", "") for e in events if e.get("ph") == "X"}


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


# Results against the CPU's, for the suites of rill kernels.

BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t):
    """t's elements as integers of their width, so that NaNs compare by
    payload and zeros by sign; bool and 16-byte elements as they are."""
    if t.dtype == torch.bool or t.element_size() not in BITS:
        return t
    return t.view(BITS[t.element_size()])


def assert_same(got, want, what="", exact=True):
    """got (on rill) has want's dtype, shape, strides and bits; not exact:
    its values, a NaN for a NaN and a zero for a zero of either sign."""
    assert got.device.type == "rill", what
    assert (got.dtype, got.shape) == (want.dtype, want.shape), what
    assert got.stride() == want.stride(), (what, got.stride(), want.stride())
    got = got.cpu()
    if exact:
        assert torch.equal(bits(got), bits(want)), (what, got, want)
    else:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=what)


def first_line(error):
    return str(error).split("\n")[0]


def stream_error():
    """The error that failed the stream, cleared, or None."""
    try:
        torch.rill.synchronize()
    except RuntimeError as e:
        torch.rill.clear_errors()
        return first_line(e)
    return None


def assert_stream_works():
    """The stream was not failed: it runs work without clear_errors()."""
    assert stream_error() is None
    assert torch.equal((torch.ones(3, device="rill") + 1).cpu(), torch.full((3,), 2.0))


def as_on_the_cpu(fn, *tensors, what="", exact=True):
    """fn of the CPU tensors and of rill copies: the same result and inputs
    afterwards, or the same error raised at the call with the stream left
    working."""
    devs = [t.to("rill") for t in tensors]
    try:
        want = fn(*tensors)
    except Exception as e:  # the CPU's error, whatever it is
        try:
            fn(*devs)
        except Exception as got:
            failed = stream_error()
            assert (type(got), first_line(got)) == (type(e), first_line(e)), what
            assert failed is None, what
            for dev, t in zip(devs, tensors):
                assert_same(dev, t, f"{what}: an input after the error")
        else:
            pytest.fail(f"{what}: no error at the call (the CPU raises {first_line(e)!r}); "
                        f"the stream: {stream_error()}")
        return
    assert_same(fn(*devs), want, what, exact)
    for dev, t in zip(devs, tensors):
        assert_same(dev, t, f"{what}: an input afterwards", exact)
