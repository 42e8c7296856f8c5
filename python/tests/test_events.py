# SPDX-License-Identifier: MIT
"""Events: record, wait, query, synchronize, timing, tagged events and
inter-process handles (opened in this process: a second event sharing the
state)."""

import time

import pytest

import rill


def test_event_query_is_true_when_never_recorded():
    assert rill.Event().query() is True
    rill.Event().synchronize()


def test_event_query_follows_the_recorded_work(gate):
    s = rill.Stream()
    ev = rill.Event()
    s.launch_host_func(gate)
    ev.record(s)
    assert ev.query() is False
    gate.open()
    ev.synchronize()
    assert ev.query() is True


def test_record_without_stream_uses_the_current_stream(gate):
    s = rill.Stream()
    ev = rill.Event()
    s.launch_host_func(gate)
    with rill.stream(s):
        ev.record()
    assert ev.query() is False
    gate.open()
    ev.synchronize()


def test_event_wait_makes_the_given_or_current_stream_wait(gate):
    s1, s2 = rill.Stream(), rill.Stream()
    ev = rill.Event()
    order = []
    s1.launch_host_func(gate)
    s1.launch_host_func(order.append, "s1")
    ev.record(s1)
    ev.wait(s2)
    s2.launch_host_func(order.append, "s2")
    with rill.stream(s2):
        ev.wait()
    gate.open()
    s2.synchronize()
    assert order == ["s1", "s2"]


def test_elapsed_time_measures_milliseconds_between_records():
    s = rill.Stream()
    start, end = rill.Event(enable_timing=True), rill.Event(enable_timing=True)
    start.record(s)
    s.launch_host_func(time.sleep, 0.02)
    end.record(s)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert ms >= 19.0  # at least the sleep, less the clocks' microsecond resolution


def test_elapsed_time_errors():
    plain, timed = rill.Event(), rill.Event(enable_timing=True)
    with pytest.raises(rill.NotRecordedError):
        timed.elapsed_time(rill.Event(enable_timing=True))
    plain.record()
    timed.record()
    with pytest.raises(rill.TimingDisabledError):
        plain.elapsed_time(timed)
    with pytest.raises(TypeError):
        timed.elapsed_time(1.0)


def test_blocking_event_synchronize_waits_as_well(gate):
    s = rill.Stream()
    ev = rill.Event(blocking=True)
    s.launch_host_func(gate)
    ev.record(s)
    gate.entered.wait(10)
    gate.open()
    ev.synchronize()
    assert ev.query()


def test_tagged_event_is_the_same_event_for_the_same_tag():
    a = rill.tagged_event("py-ev-1")
    assert rill.tagged_event("py-ev-1") is a
    assert rill.tagged_event("py-ev-2") is not a
    with pytest.raises(rill.InvalidArgumentError):
        a.close()


def test_tagged_event_orders_tagged_streams(gate):
    s1 = rill.tagged_stream("py-order-1")
    s2 = rill.tagged_stream("py-order-2")
    ev = rill.tagged_event("py-order-ev")
    order = []
    s1.launch_host_func(gate)
    s1.launch_host_func(order.append, 1)
    ev.record(s1)
    rill.tagged_event("py-order-ev").wait(s2)
    s2.launch_host_func(order.append, 2)
    gate.open()
    s2.synchronize()
    assert order == [1, 2]


def test_ipc_handle_opened_in_the_same_process_shares_the_event(gate):
    ev = rill.Event(interprocess=True)
    handle = ev.ipc_handle()
    assert isinstance(handle, bytes) and len(handle) == 64
    opened = rill.Event.from_ipc_handle(None, handle)
    s = rill.Stream()
    s.launch_host_func(gate)
    ev.record(s)
    assert opened.query() is False
    gate.open()
    opened.synchronize()
    assert opened.query() is True
    assert rill.Event.from_ipc_handle(rill.current_device(), bytearray(handle)).query()


def test_ipc_handle_errors():
    with pytest.raises(rill.InvalidArgumentError):
        rill.Event().ipc_handle()  # not interprocess
    with pytest.raises(rill.IpcError):
        rill.Event.from_ipc_handle(None, bytes(64))
    damaged = bytearray(rill.Event(interprocess=True).ipc_handle())
    damaged[20] ^= 0xFF
    with pytest.raises(rill.IpcError):
        rill.Event.from_ipc_handle(None, bytes(damaged))
    with pytest.raises(ValueError):
        rill.Event.from_ipc_handle(None, b"short")
    with pytest.raises(TypeError):
        rill.Event.from_ipc_handle(None, "not bytes")
    with pytest.raises(TypeError):
        rill.Event.from_ipc_handle(0.5, bytes(64))


def test_closed_event_refuses_every_call():
    ev = rill.Event(enable_timing=True)
    ev.close()
    ev.close()
    other = rill.Event(enable_timing=True)
    for call in (ev.record, ev.wait, ev.query, ev.synchronize, ev.ipc_handle,
                 lambda: ev.elapsed_time(other), lambda: other.elapsed_time(ev),
                 lambda: rill.default_stream().wait_event(ev),
                 lambda: rill.default_stream().record_event(ev)):
        with pytest.raises(rill.InvalidArgumentError, match="closed"):
            call()


def test_event_flags_must_be_bools():
    with pytest.raises(TypeError):
        rill.Event(enable_timing="yes")
    with pytest.raises(rill.InvalidArgumentError):
        rill.Event(enable_timing=True, interprocess=True)
