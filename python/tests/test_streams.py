# SPDX-License-Identifier: MIT
"""Streams: creation, query and synchronize, waits, the current stream and
its scopes, tagged streams, and use after close. Gates are host functions
that hold a stream until the test opens them."""

import threading

import numpy as np
import pytest

import rill


def test_stream_query_is_false_while_work_is_pending_and_true_after_synchronize(gate):
    s = rill.Stream()
    assert s.query() is True  # nothing submitted
    s.launch_host_func(gate)
    assert s.query() is False
    gate.open()
    s.synchronize()
    assert s.query() is True
    assert not gate.timed_out


def test_stream_priority_is_clamped_into_the_device_range():
    greatest, least = rill.current_device().priority_range
    assert rill.Stream(priority=least + 100).priority == least
    assert rill.Stream(priority=greatest - 100).priority == greatest
    assert rill.Stream().priority == 0


def test_stream_on_a_device_given_by_ordinal_or_device():
    dev = rill.current_device()
    assert rill.Stream(device=dev.index).device == dev
    assert rill.Stream(device=dev).device == dev
    with pytest.raises(rill.NoDeviceError):
        rill.Stream(device=rill.device_count() + 5)


def test_wait_stream_orders_later_work_after_everything_submitted_before(gate):
    s1, s2 = rill.Stream(), rill.Stream()
    order = []
    s1.launch_host_func(gate)
    s1.launch_host_func(order.append, "s1")
    s2.wait_stream(s1)
    s2.launch_host_func(order.append, "s2")
    gate.open()
    s2.synchronize()
    assert order == ["s1", "s2"]


def test_wait_event_waits_for_the_event_as_recorded_at_the_time_of_the_wait(gate):
    """rill.h: "as recorded at the time of this call (later records of event
    do not matter)": a snapshot."""
    s1, s2 = rill.Stream(), rill.Stream()
    ev = rill.Event()
    order = []
    s1.launch_host_func(order.append, "first")
    ev.record(s1)
    s2.wait_event(ev)  # for "first" only
    s1.launch_host_func(gate)
    ev.record(s1)  # moves ev past the gate: s2's wait does not see it
    s2.launch_host_func(order.append, "s2")
    s2.synchronize()  # returns although s1 is still held by the gate
    assert order == ["first", "s2"]
    assert s1.query() is False
    gate.open()
    s1.synchronize()


def test_wait_event_on_a_never_recorded_event_does_nothing():
    s = rill.Stream()
    s.wait_event(rill.Event())
    s.synchronize()


def test_record_event_returns_a_new_event_or_the_given_one():
    s = rill.Stream()
    ev = s.record_event()
    assert isinstance(ev, rill.Event)
    given = rill.Event()
    assert s.record_event(given) is given
    ev.synchronize()
    assert given.query() is True


def test_current_stream_is_the_default_stream_until_changed():
    assert rill.current_stream() == rill.default_stream()
    assert rill.current_stream() is rill.default_stream()


def test_stream_context_sets_and_restores_the_current_stream_and_nests():
    s1, s2 = rill.Stream(), rill.Stream()
    with rill.stream(s1) as entered:
        assert entered is s1
        assert rill.current_stream() is s1
        with rill.StreamCtx(s2):
            assert rill.current_stream() is s2
        assert rill.current_stream() is s1
        with rill.stream(None):
            assert rill.current_stream() is s1
    assert rill.current_stream() is rill.default_stream()


def test_stream_context_restores_after_an_exception():
    s = rill.Stream()
    with pytest.raises(KeyError):
        with rill.stream(s):
            raise KeyError("x")
    assert rill.current_stream() is rill.default_stream()


def test_set_stream_returns_the_previous_stream():
    s = rill.Stream()
    prev = rill.set_stream(s)
    assert prev is rill.default_stream()
    assert rill.set_stream(None) is s
    assert rill.current_stream() is rill.default_stream()


def test_current_stream_is_per_thread():
    s = rill.Stream()
    seen = []
    with rill.stream(s):
        t = threading.Thread(target=lambda: seen.append(rill.current_stream()))
        t.start()
        t.join()
        assert rill.current_stream() is s
    assert seen == [rill.default_stream()]


def test_a_stream_stays_alive_while_it_is_current():
    rill.set_stream(rill.Stream(name="only-current"))  # no other reference
    import gc
    gc.collect()
    t = rill.ones(4)  # runs on it
    assert t.stream is rill.current_stream()
    assert t.numpy().tolist() == [1.0] * 4
    rill.set_stream(None)


def test_ops_run_on_the_current_stream(gate):
    s = rill.Stream()
    a = rill.ones(8)
    rill.synchronize()
    s.launch_host_func(gate)
    with rill.stream(s):
        b = a + 1
    assert b.stream is s
    assert s.query() is False
    gate.open()
    assert b.numpy().tolist() == [2.0] * 8


def test_synchronize_waits_for_every_stream(gate):
    streams = [rill.Stream() for _ in range(3)]
    done = []
    streams[0].launch_host_func(gate)
    for i, s in enumerate(streams):
        s.launch_host_func(done.append, i)
    gate.open()
    rill.synchronize()
    assert sorted(done) == [0, 1, 2]


def test_tagged_stream_is_the_same_stream_for_the_same_tag():
    a = rill.tagged_stream("py-tag-1", priority=-1)
    assert rill.tagged_stream("py-tag-1") is a
    assert rill.tagged_stream("py-tag-2") is not a
    x = rill.ones(3)
    with rill.stream(a):
        y = x * 2
    assert y.numpy().tolist() == [2.0] * 3


def test_default_and_tagged_streams_cannot_be_closed():
    with pytest.raises(rill.InvalidArgumentError):
        rill.default_stream().close()
    with pytest.raises(rill.InvalidArgumentError):
        rill.tagged_stream("py-tag-close").close()
    rill.default_stream().synchronize()


def test_closed_stream_refuses_every_call_with_invalid_argument():
    s = rill.Stream()
    s.close()
    s.close()  # twice is harmless
    for call in (s.query, s.synchronize, s.clear_error, lambda: s.wait_stream(s),
                 lambda: s.wait_event(rill.Event()), lambda: s.record_event(),
                 lambda: s.launch_host_func(print), lambda: s.priority,
                 lambda: rill.set_stream(s), lambda: rill.Event().record(s),
                 lambda: rill.ones(2).record_stream(s)):
        with pytest.raises(rill.InvalidArgumentError, match="closed"):
            call()
    assert "closed" in repr(s)


def test_close_lets_submitted_work_finish(gate):
    s = rill.Stream()
    ran = []
    s.launch_host_func(gate)
    s.launch_host_func(ran.append, 1)
    s.close()
    gate.open()
    rill.synchronize()
    assert ran == [1]


def test_tensors_on_a_closed_stream_are_still_freed():
    before = rill.memory_allocated()
    s = rill.Stream()
    with rill.stream(s):
        t = rill.ones(1 << 16)
    s.close()
    assert t.numpy()[0] == 1.0
    del t
    rill.synchronize()
    assert rill.memory_allocated() == before


def test_stream_equality_and_hash_follow_the_handle():
    s = rill.Stream()
    with rill.stream(s):
        assert rill.current_stream() == s
        assert hash(rill.current_stream()) == hash(s)
    assert s != rill.Stream()
    assert s != "stream"


def test_stream_name_appears_in_error_sentences():
    s = rill.Stream(name="named-py-stream")
    assert s.name == "named-py-stream"

    def fail():
        raise RuntimeError("x")
    s.launch_host_func(fail)
    with pytest.raises(rill.KernelFailedError, match="named-py-stream"):
        s.synchronize()
    s.clear_error()


def test_many_streams_run_concurrently_and_compute_right():
    streams = [rill.Stream() for _ in range(8)]
    base = rill.Tensor(np.arange(64, dtype=np.float32))
    rill.synchronize()
    outs = []
    for i, s in enumerate(streams):
        with rill.stream(s):
            outs.append(base * (i + 1) + i)
    for i, out in enumerate(outs):
        assert np.array_equal(out.numpy(), np.arange(64, dtype=np.float32) * (i + 1) + i)


def test_stream_context_makes_the_streams_device_current_and_restores_it(two_devices):
    # torch.cuda.stream(s) on another device's stream switches the device too.
    s1 = rill.Stream(device=1)
    assert rill.current_device().index == 0
    with rill.stream(s1):
        assert rill.current_device().index == 1 and rill.current_stream() is s1
        t = rill.ones(2) + 1
        assert t.device.index == 1 and t.stream is s1
        with rill.stream(rill.Stream(device=0)):
            assert rill.current_device().index == 0
        assert rill.current_device().index == 1 and rill.current_stream() is s1
    assert rill.current_device().index == 0
    assert rill.current_stream() is rill.default_stream()
    assert rill.current_stream(1) is rill.default_stream(1)
    assert t.numpy().tolist() == [2, 2]
    with pytest.raises(KeyError):
        with rill.stream(s1):
            raise KeyError("inside")
    assert rill.current_device().index == 0
