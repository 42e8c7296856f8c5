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
