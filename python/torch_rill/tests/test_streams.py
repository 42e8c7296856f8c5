# SPDX-License-Identifier: MIT
"""Streams and events: PyTorch's torch.Stream and torch.Event, and
torch.rill's, on rill's streams and events."""

import threading

import pytest
import torch

import rill

from conftest import delay, rill_stream


def test_the_default_stream_is_current_until_changed():
    default = torch.rill.default_stream()
    assert torch.rill.current_stream() == default
    assert default.stream_id == 0
    assert torch.accelerator.current_stream() == default
    assert rill_stream(default) is rill.default_stream()


def test_new_streams_come_from_a_pool_and_scope_with_with():
    s = torch.rill.Stream()
    assert s != torch.rill.default_stream()
    with torch.rill.stream(s):
        assert torch.rill.current_stream() == s
        inner = torch.Stream(device="rill")
        with inner:
            assert torch.accelerator.current_stream() == inner
        assert torch.rill.current_stream() == s
    assert torch.rill.current_stream() == torch.rill.default_stream()
    streams = {torch.rill.Stream().stream_id for _ in range(100)}
    assert len(streams) <= 32  # reused, as CUDA's pool does


def test_a_stream_context_nests_restores_and_refuses_what_is_not_a_rill_stream():
    s, t = torch.rill.Stream(), torch.rill.Stream()
    default = torch.rill.default_stream()
    ctx = torch.rill.stream(s)
    assert ctx.stream == s
    with ctx:
        with torch.rill.stream(t):
            with ctx:  # one object entered twice: each exit restores its own entry
                assert torch.rill.current_stream() == s
            assert torch.rill.current_stream() == t
        assert torch.rill.current_stream() == s
        with torch.rill.stream(None):
            assert torch.rill.current_stream() == s
    assert torch.rill.current_stream() == default
    with pytest.raises(TypeError, match="rill torch.Stream"):
        torch.rill.stream("rill")


def test_the_current_stream_is_the_one_rills_package_sees():
    s = torch.rill.Stream()
    with torch.rill.stream(s):
        assert rill.current_stream() is rill_stream(s)
    mine = rill.Stream()
    with rill.stream(mine):
        assert torch.rill.current_stream().rill_handle == int(rill._ffi.ffi.cast("uintptr_t", mine._h))


def test_priorities_map_to_rills():
    high = torch.rill.Stream(priority=-1)
    low = torch.rill.Stream(priority=0)
    assert rill_stream(high).priority < rill_stream(low).priority


def test_the_current_stream_is_per_thread():
    s = torch.rill.Stream()
    seen = []
    with torch.rill.stream(s):
        t = threading.Thread(target=lambda: seen.append(torch.rill.current_stream()))
        t.start()
        t.join()
    assert seen == [torch.rill.default_stream()]


def test_query_and_synchronize_follow_the_work():
    s = torch.rill.Stream()
    delay(s, 0.2)
    assert not s.query()
    s.synchronize()
    assert s.query()


def test_wait_stream_orders_work_on_two_streams():
    side = torch.rill.Stream()
    src = torch.zeros(1 << 16, device="rill")
    dst = torch.empty_like(src)
    torch.rill.synchronize()
    delay(side, 0.2)
    with torch.rill.stream(side):
        src.fill_(7.0)  # runs after the delay: fill_ waits for the side stream's work
    with torch.rill.stream(torch.rill.Stream()) as other:
        other.wait_stream(side)
        dst.copy_(src)  # a rill copy queued after the wait
    torch.rill.current_stream().wait_stream(other)
    assert torch.equal(dst.cpu(), torch.full_like(dst.cpu(), 7.0))


def test_events_record_wait_query_synchronize_and_time():
    s = torch.rill.Stream()
    start = torch.rill.Event(enable_timing=True)
    end = torch.Event(device="rill", enable_timing=True)
    start.record(s)
    delay(s, 0.05)
    end.record(s)
    assert not end.query()
    other = torch.rill.Stream()
    other.wait_event(end)
    end.synchronize()
    assert end.query()
    assert 45.0 <= start.elapsed_time(end) < 5000.0
    other.synchronize()


def test_an_event_without_timing_refuses_elapsed_time():
    a, b = torch.rill.Event(), torch.rill.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(Exception, match="enable_timing|TIMING"):
        a.elapsed_time(b)


def test_an_unrecorded_event_is_complete_and_waiting_on_it_is_nothing():
    e = torch.rill.Event()
    assert e.query()
    e.synchronize()
    torch.rill.current_stream().wait_event(e)


def test_record_stream_is_accepted():
    t = torch.ones(4, device="rill")
    t.record_stream(torch.rill.Stream())


def test_ctrl_c_interrupts_a_synchronize():
    import os
    import signal
    import time
    s = torch.rill.Stream()
    # The stream's work ends only once the gate opens (or 30 s pass), so a
    # SIGINT that comes late still finds the wait.
    gate = threading.Event()
    rill_stream(s).launch_host_func(gate.wait, 30)
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            s.synchronize()
        assert time.monotonic() - start < 20
        assert not s.query()  # the work is still waiting
    finally:
        gate.set()
        timer.join()
    s.synchronize()  # the work itself still runs to its end
    assert s.query()
