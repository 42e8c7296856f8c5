# SPDX-License-Identifier: MIT
"""Interprocess events: torch.rill.Event(interprocess=True), ipc_handle()
and torch.rill.Event.from_ipc_handle, on rill's interprocess events."""

import os
import pickle
import struct
import subprocess
import sys

import pytest
import torch

from conftest import gate, rill_stream

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ipc_event_child.py")


def test_another_process_waits_for_a_record_made_after_a_host_function(tmp_path):
    counter = tmp_path / "counter"
    counter.write_bytes(struct.pack("<q", 0))
    child = subprocess.Popen([sys.executable, CHILD, str(counter)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    opened = None
    try:
        event = torch.rill.Event(interprocess=True)
        side = torch.rill.Stream()
        opened = gate(side)  # the write waits until the child has queued its wait

        def write():
            with open(counter, "r+b") as f:
                f.write(struct.pack("<q", 42))

        rill_stream(side).launch_host_func(write)
        event.record(side)
        child.stdin.write(event.ipc_handle().hex() + "\n")
        child.stdin.flush()
        first = child.stdout.readline().strip()
        opened.set()
        rest, err = child.communicate(timeout=120)
    finally:
        if opened is not None:
            opened.set()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    # The child saw the record pending, and its stream's host function,
    # queued behind the wait, read the parent's write.
    assert first == "queued pending=True", (first, err)
    assert rest.strip() == "seen=42 after=42", (rest, err)
    side.synchronize()


def test_an_opened_event_in_the_same_process_follows_the_record():
    event = torch.rill.Event(interprocess=True)
    opened_event = torch.rill.Event.from_ipc_handle(0, event.ipc_handle())
    assert isinstance(opened_event, torch.Event) and opened_event.device == event.device
    s = torch.rill.Stream()
    opened = gate(s)
    event.record(s)
    pending = not opened_event.query()
    opened.set()
    opened_event.synchronize()
    assert pending and opened_event.query() and event.query()
    again = pickle.loads(pickle.dumps(event))  # multiprocessing sends it so
    assert isinstance(again, torch.rill.InterprocessEvent) and again.query()


def test_bad_handles_and_flags_are_refused_with_a_sentence():
    with pytest.raises(RuntimeError, match="from_ipc_handle.*RILL_ERROR_IPC"):
        torch.rill.Event.from_ipc_handle(0, bytes(64))
    handle = bytearray(torch.rill.Event(interprocess=True).ipc_handle())
    handle[20] ^= 0xFF
    with pytest.raises(RuntimeError, match="RILL_ERROR_IPC"):
        torch.rill.Event.from_ipc_handle(0, bytes(handle))
    with pytest.raises(ValueError, match="64 bytes"):
        torch.rill.Event.from_ipc_handle(0, b"short")
    with pytest.raises(ValueError, match="RILL_ERROR_INVALID_ARGUMENT"):
        torch.rill.Event(interprocess=True, enable_timing=True)
    with pytest.raises(ValueError, match="without RILL_EVENT_INTERPROCESS"):
        torch.rill.InterprocessEvent.ipc_handle(torch.rill.Event(blocking=True))
    with pytest.raises(RuntimeError, match="not interprocess"):
        torch.rill.InterprocessEvent.ipc_handle(torch.rill.Event())


def test_a_blocking_event_records_waits_and_times():
    start = torch.rill.Event(enable_timing=True, blocking=True)
    end = torch.rill.Event(enable_timing=True, blocking=True)
    s = torch.rill.Stream()
    start.record(s)
    opened = gate(s)
    end.record(s)
    pending = not end.query()
    opened.set()
    end.synchronize()
    assert pending and end.query()
    assert start.elapsed_time(end) >= 0.0
