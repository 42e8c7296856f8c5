# SPDX-License-Identifier: MIT
"""Bad arguments of every public function: a TypeError or ValueError (or
the RillError rill returns) with a sentence, never a crash, and nothing
changed."""

import gc

import numpy as np
import pytest

import rill


@pytest.fixture
def objs():
    return {"s": rill.Stream(), "e": rill.Event(), "t": rill.ones(2, 2), "u": rill.ones(3, 3),
            "v": rill.ones(4)}


CASES = [
    # streams
    ("Stream priority str", lambda o: rill.Stream(priority="high"), TypeError),
    ("Stream priority bool", lambda o: rill.Stream(priority=True), TypeError),
    ("Stream device bad name", lambda o: rill.Stream(device="gpu:0"), ValueError),
    ("Stream device bad index", lambda o: rill.Stream(device="cpu:x"), ValueError),
    ("Stream device name missing", lambda o: rill.Stream(device="cpu:99"), rill.NoDeviceError),
    ("Stream device float", lambda o: rill.Stream(device=0.0), TypeError),
    ("Stream device missing", lambda o: rill.Stream(device=99), rill.NoDeviceError),
    ("Stream name int", lambda o: rill.Stream(name=3), TypeError),
    ("Stream name NUL", lambda o: rill.Stream(name="a\0b"), ValueError),
    ("Stream unknown kwarg", lambda o: rill.Stream(stream=1), TypeError),
    ("wait_event int", lambda o: o["s"].wait_event(1), TypeError),
    ("wait_event None", lambda o: o["s"].wait_event(None), TypeError),
    ("wait_stream event", lambda o: o["s"].wait_stream(o["e"]), TypeError),
    ("record_event stream", lambda o: o["s"].record_event(o["s"]), TypeError),
    ("launch_host_func None", lambda o: o["s"].launch_host_func(None), TypeError),
    ("name set int", lambda o: setattr(o["s"], "name", 5), TypeError),
    ("set_stream event", lambda o: rill.set_stream(o["e"]), TypeError),
    ("StreamContext int", lambda o: rill.StreamContext(3), TypeError),
    ("stream str", lambda o: rill.stream("s"), TypeError),
    ("current_stream device str", lambda o: rill.current_stream("tpu"), ValueError),
    ("default_stream device float", lambda o: rill.default_stream(0.0), TypeError),
    ("synchronize device missing", lambda o: rill.synchronize(99), rill.NoDeviceError),
    ("tagged_stream int tag", lambda o: rill.tagged_stream(1), TypeError),
    ("tagged_stream empty tag", lambda o: rill.tagged_stream(""), rill.InvalidArgumentError),
    ("tagged_stream NUL tag", lambda o: rill.tagged_stream("a\0"), ValueError),
    ("tagged_stream priority", lambda o: rill.tagged_stream("t", priority=1.5), TypeError),
    ("tagged_event bytes", lambda o: rill.tagged_event(b"t"), TypeError),
    ("tagged_event empty", lambda o: rill.tagged_event(""), rill.InvalidArgumentError),
    # events
    ("Event flag str", lambda o: rill.Event(blocking="no"), TypeError),
    ("Event timing+ipc", lambda o: rill.Event(True, False, True), rill.InvalidArgumentError),
    ("record int", lambda o: o["e"].record(1), TypeError),
    ("wait str", lambda o: o["e"].wait("s"), TypeError),
    ("elapsed_time None", lambda o: o["e"].elapsed_time(None), TypeError),
    ("from_ipc_handle int", lambda o: rill.Event.from_ipc_handle(None, 5), TypeError),
    ("from_ipc_handle short", lambda o: rill.Event.from_ipc_handle(None, b"x"), ValueError),
    ("from_ipc_handle zeros", lambda o: rill.Event.from_ipc_handle(None, bytes(64)),
     rill.IpcError),
    ("ipc_handle not ipc", lambda o: o["e"].ipc_handle(), rill.InvalidArgumentError),
    # devices
    ("Device()", lambda o: rill.Device(), TypeError),
    ("device str", lambda o: rill.device("tpu"), ValueError),
    ("device missing", lambda o: rill.device(-1), rill.NoDeviceError),
    ("set_device str", lambda o: rill.set_device("tpu"), ValueError),
    # tensors
    ("Tensor str data", lambda o: rill.Tensor("abc"), TypeError),
    ("Tensor object data", lambda o: rill.Tensor(object()), TypeError),
    ("Tensor ragged", lambda o: rill.Tensor([[1], [1, 2]], rill.float32), ValueError),
    ("Tensor bad dtype", lambda o: rill.Tensor([1.0], dtype=object), TypeError),
    ("Tensor float64", lambda o: rill.Tensor(np.zeros(2)), TypeError),
    ("from_numpy list", lambda o: rill.from_numpy([1.0]), TypeError),
    ("ones negative", lambda o: rill.ones(2, -1), ValueError),
    ("ones float", lambda o: rill.ones(2.5), TypeError),
    ("ones huge", lambda o: rill.ones(1 << 62), ValueError),
    ("ones too big", lambda o: rill.ones(1 << 50), rill.OutOfMemoryError),
    ("zeros dtype", lambda o: rill.zeros(2, dtype=np.int32), TypeError),
    ("empty str", lambda o: rill.empty("2"), TypeError),
    ("full value", lambda o: rill.full(2, None), TypeError),
    ("record_stream event", lambda o: o["t"].record_stream(o["e"]), TypeError),
    ("add str", lambda o: o["t"] + "x", TypeError),
    ("sub list", lambda o: [1] - o["t"], TypeError),
    ("mul None", lambda o: o["t"] * None, TypeError),
    ("matmul number", lambda o: o["t"] @ 2, TypeError),
    ("matmul shapes", lambda o: o["t"] @ o["u"], ValueError),
    ("ops.add shapes", lambda o: rill.ops.add(o["t"], o["v"]), ValueError),
    ("ops.sum number", lambda o: rill.ops.sum(1.0), TypeError),
    ("ops.conv2d 2-D", lambda o: rill.ops.conv2d(o["t"], o["t"]), ValueError),
    ("item of many", lambda o: o["t"].item(), ValueError),
    # memory
    ("memory_allocated str", lambda o: rill.memory_allocated("tpu"), ValueError),
    ("max_memory_allocated missing", lambda o: rill.max_memory_allocated(42), rill.NoDeviceError),
    ("memory_reserved float", lambda o: rill.memory_reserved(0.5), TypeError),
    ("max_memory_reserved str", lambda o: rill.max_memory_reserved("x"), ValueError),
    ("reset_peak str", lambda o: rill.reset_peak_memory_stats("x"), ValueError),
    ("empty_cache str", lambda o: rill.empty_cache("x"), ValueError),
    ("memory_stats str", lambda o: rill.memory_stats("x"), ValueError),
    ("memory_summary missing", lambda o: rill.memory_summary(77), rill.NoDeviceError),
    ("set_memory_limit str", lambda o: rill.set_memory_limit("1GB"), TypeError),
    ("set_memory_limit negative", lambda o: rill.set_memory_limit(-5), ValueError),
    ("memory_limit str", lambda o: rill.memory_limit("x"), ValueError),
]


@pytest.mark.parametrize("name,call,exc", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_raises_a_clear_error_and_changes_nothing(objs, name, call, exc):
    gc.collect()
    allocated = rill.memory_allocated()
    with pytest.raises(exc) as info:
        call(objs)
    assert str(info.value)
    gc.collect()
    assert rill.memory_allocated() == allocated
    objs["s"].synchronize()
    assert rill.current_stream() is rill.default_stream()


def test_huge_priorities_are_clamped_not_refused():
    assert rill.Stream(priority=1 << 80).priority == rill.current_device().priority_range[1]
    assert rill.tagged_stream("huge-priority", priority=-(1 << 80)) is not None
