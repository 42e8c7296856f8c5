# SPDX-License-Identifier: MIT
"""Tests of torch.distributed's backend "rill", run under mpirun: every rank
runs the same tests in the same order, so their collectives match. The
process group lives for the session, its rendezvous in a FileStore that the
ranks of one mpirun name alike (by their launcher's process id)."""

import ctypes
import os
import tempfile
import threading
import time

import pytest
import torch
import torch.distributed as dist

import torch_rill  # noqa: F401  registers the device and the backend

import rill
from rill._ffi import ffi


def _rendezvous_path():
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"torch_rill_dist_{uid}_{os.getppid()}")


@pytest.fixture(scope="session", autouse=True)
def process_group():
    if "OMPI_COMM_WORLD_SIZE" not in os.environ and "PMI_SIZE" not in os.environ:
        pytest.exit("run these tests under mpirun -np 2", returncode=2)
    # torch_rill set RANK and WORLD_SIZE from mpirun's variables.
    dist.init_process_group("rill", init_method="file://" + _rendezvous_path(),
                            rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _synchronized():
    yield
    torch.rill.synchronize()


def rill_stream(stream):
    """rill's Python Stream object for a torch stream on rill."""
    return rill.Stream._wrap(ffi.cast("rill_stream *", stream.rill_handle))


def delay(stream, seconds):
    """Queues a host function that sleeps on stream: the work after it waits."""
    rill_stream(stream).launch_host_func(time.sleep, seconds)


def gate(stream, timeout=20.0):
    """Queues a host function that waits for the returned threading.Event:
    the work after it runs once the test sets it."""
    opened = threading.Event()
    rill_stream(stream).launch_host_func(opened.wait, timeout)
    return opened


def librill():
    """librill's C functions that rill's package does not wrap (traces):
    the library is loaded RTLD_GLOBAL, so the process's symbols have them."""
    lib = ctypes.CDLL(None)
    lib.rill_trace_start.argtypes = [ctypes.c_char_p]
    lib.rill_trace_start.restype = ctypes.c_int
    lib.rill_trace_stop.restype = ctypes.c_int
    return lib
