# SPDX-License-Identifier: MIT
"""rill.shutdown() from Python: it waits for the work, every object of the
released runtime then refuses its calls with InvalidArgumentError (never a
crash), their finalizers do nothing, and new objects work."""

import gc

import numpy as np
import pytest

import rill


def test_shutdown_runs_pending_host_functions_first(gate):
    s = rill.Stream()
    ran = []
    s.launch_host_func(ran.append, 1)
    rill.shutdown()
    assert ran == [1]


def test_objects_of_a_shut_down_runtime_refuse_every_call_and_new_ones_work():
    s = rill.Stream()
    ev = rill.Event()
    t = rill.ones(4)
    dev = rill.current_device()
    tagged = rill.tagged_stream("py-shutdown")
    rill.shutdown()
    calls = [s.query, s.synchronize, lambda: s.launch_host_func(print), ev.record, ev.query,
             lambda: rill.set_stream(s), t.numpy, lambda: t + 1, lambda: rill.ops.sum(t),
             lambda: t.record_stream(rill.Stream()), dev.synchronize, tagged.query,
             lambda: rill.Stream(device=dev), lambda: rill.memory_allocated(dev)]
    for call in calls:
        with pytest.raises(rill.InvalidArgumentError, match=r"rill\.shutdown\(\)"):
            call()
    s.close()   # nothing to do
    ev.close()
    calls = s = ev = t = tagged = None
    gc.collect()  # finalizers of released objects touch nothing
    a = rill.Tensor(np.arange(4, dtype=np.float32))
    with rill.stream(rill.Stream()):
        assert (a * 2).numpy().tolist() == [0, 2, 4, 6]
    assert rill.current_device() is rill.device(0)  # the new runtime starts on device 0
    assert rill.tagged_stream("py-shutdown") is not None


def test_current_stream_after_shutdown_is_the_new_default():
    s = rill.Stream()
    rill.set_stream(s)
    rill.shutdown()
    assert rill.current_stream() is rill.default_stream()
    assert rill.ones(2).numpy().tolist() == [1, 1]


def test_stream_context_exit_after_shutdown_restores_the_default():
    with rill.stream(rill.Stream()):
        rill.shutdown()
    assert rill.current_stream() is rill.default_stream()


def test_memory_is_released_by_shutdown():
    t = rill.empty(1 << 20)
    assert rill.memory_allocated() >= 4 << 20
    rill.shutdown()
    assert rill.memory_allocated() == 0
    del t
    assert rill.memory_allocated() == 0
