# SPDX-License-Identifier: MIT
"""The element-wise ops' fast path gives what the general path gives, on the
current stream, and leaves every other case (and every error) to it."""

import threading
import weakref

import numpy as np
import pytest

import rill
from rill import _core, _ops

F32 = np.float32


def test_fast_and_general_paths_agree():
    x = np.arange(-7, 8, dtype=F32) / 3
    y = np.linspace(1, 2, 15, dtype=F32)
    a, b = rill.Tensor(x), rill.Tensor(y)
    cases = [(a + b, _ops.add(a, b), x + y), (a - b, _ops.sub(a, b), x - y),
             (a * b, _ops.mul(a, b), x * y), (a + 2, _ops.add(a, 2), x + 2),
             (a - 2.5, _ops.sub(a, 2.5), x - 2.5), (a * 2.5, _ops.mul(a, 2.5), x * F32(2.5)),
             (a * 3, _ops.mul(a, 3), x * 3), (2.5 * a, _ops.mul(2.5, a), F32(2.5) * x),
             (2 + a, _ops.add(2, a), 2 + x), (3.5 - a, _ops.sub(3.5, a), F32(3.5) - x),
             (-a, _ops.neg(a), -x)]
    for fast, general, want in cases:
        assert type(fast) is rill.Tensor and fast.dtype is rill.float32
        assert np.array_equal(fast.numpy(), general.numpy())
        assert np.array_equal(fast.numpy(), want)


def test_negation_and_products_with_numbers_keep_signs_and_specials():
    x = np.array([0.0, -0.0, 1.5, -np.inf, np.inf], dtype=F32)
    a = rill.Tensor(x)
    for got, want in ((-a, -x), (a * -1.0, x * F32(-1)), (a * 0, x * F32(0)), (-1 * a, -x)):
        assert np.array_equal(got.numpy(), want, equal_nan=True)
        assert np.array_equal(np.signbit(got.numpy()), np.signbit(want))
    assert np.isnan((-rill.Tensor(np.array([np.nan], F32))).numpy()[0])


def test_negation_and_numbers_off_the_fast_path():
    h = rill.Tensor(np.array([1.5, -2.0], np.float16))
    assert (-h).dtype is rill.float16 and (-h).numpy().tolist() == [-1.5, 2.0]
    assert (h * 2).dtype is rill.float16 and (2 * h).numpy().tolist() == [3.0, -4.0]
    v = rill.Tensor(np.arange(6, dtype=F32).reshape(2, 3))[:, 1:]  # a view with strides
    assert (-v).numpy().tolist() == [[-1, -2], [-4, -5]]
    assert (v * 2).numpy().tolist() == [[2, 4], [8, 10]]
    assert (-rill.ones(0)).shape == (0,)
    a = rill.ones(2)
    with pytest.raises(OverflowError):
        a * 10 ** 400
    with pytest.raises(OverflowError):
        10 ** 400 - a


def test_new_tensors_of_every_form():
    import rill.compat.torch as torch
    for make, value in ((rill.zeros, 0), (rill.ones, 1)):
        for shape in ((2, 3), ((2, 3),), ([2, 3],), (np.int64(2), 3)):
            t = make(*shape)
            assert type(t) is rill.Tensor and t.shape == (2, 3) and t.dtype is rill.float32
            assert t.numpy().tolist() == [[value] * 3] * 2
        assert make(4, dtype=rill.float16).dtype is rill.float16
        assert make(0).shape == (0,) and make().shape == ()
        with pytest.raises(ValueError, match="negative"):
            make(2, -1)
        with pytest.raises(TypeError):
            make(2.5)
    assert rill.full((3,), 2.5).numpy().tolist() == [2.5] * 3
    assert rill.full((2,), 7).numpy().tolist() == [7, 7]
    with pytest.raises(OverflowError):
        rill.full((2,), 10 ** 400)
    e = rill.empty(5)
    assert type(e) is rill.Tensor and e.shape == (5,) and e.dtype is rill.float32
    assert rill.empty((2, 2)).shape == (2, 2) and rill.empty(3, dtype=rill.float16).nbytes == 6
    assert type(torch.zeros(2)) is torch.Tensor and torch.zeros(2).numpy().tolist() == [0, 0]
    s = rill.Stream()
    with rill.stream(s):
        assert rill.zeros(2).stream is s and rill.empty(2).stream is s


def test_new_tensors_give_their_memory_back():
    rill.synchronize()
    before = rill.memory_allocated()
    for _ in range(100):
        t = rill.zeros(1 << 10)  # noqa: F841: each replaces (and frees) the previous one
    del t
    rill.synchronize()
    assert rill.memory_allocated() == before


def test_fast_path_runs_on_the_current_stream_and_follows_its_changes():
    s1, s2 = rill.Stream(), rill.Stream()
    a = rill.ones(4)
    rill.synchronize()
    for s in (s1, s2, s1):
        with rill.stream(s):
            c = a + a
        assert c.stream is s
    assert (a + a).stream is rill.default_stream()


def test_cases_the_fast_path_leaves_to_the_general_one():
    a = rill.ones(3)
    for bad in (None, "x", [1, 2, 3]):
        for op in (lambda: a + bad, lambda: a - bad, lambda: a * bad):
            with pytest.raises(TypeError):
                op()
    with pytest.raises(ValueError, match="shapes"):
        a + rill.ones(4)
    assert (a + True).numpy().tolist() == [2, 2, 2]  # a bool is a number, not an int here
    empty = rill.ones(0)
    assert (empty + empty).shape == (0,)
    h = rill.ones(3, dtype=rill.float16)
    assert (a + h).dtype is rill.float32 and (h + h).dtype is rill.float16
    import rill.compat.torch as torch
    t = torch.ones(3)
    assert type(t + t) is torch.Tensor and type(t + a) is torch.Tensor
    assert type(a + t) is rill.Tensor


def test_fast_path_refuses_tensors_of_a_shut_down_runtime():
    a = rill.ones(2)
    rill.shutdown()
    with pytest.raises(rill.InvalidArgumentError, match="rill.shutdown"):
        a + a
    with pytest.raises(rill.InvalidArgumentError, match="rill.shutdown"):
        a + 1
    b = rill.ones(2)
    assert (b + b).numpy().tolist() == [2, 2]


def test_fast_path_records_the_output_event_and_reuses_freed_ones():
    gate = threading.Event()
    s = rill.Stream()
    a = rill.ones(5)
    rill.synchronize()
    with rill.stream(s):
        s.launch_host_func(gate.wait, 10)
        c = a * a + 2
    assert rill._ffi.lib.rill_event_query(c._event) == rill._ffi.lib.RILL_NOT_READY
    gate.set()
    assert c.numpy().tolist() == [3] * 5  # waits for c's event
    ev = c._event
    del c  # its memory goes back on s, its event to the device's pool
    assert ev in s._events
    d = a + a
    assert d._event == ev and ev not in s._events
    assert d.numpy().tolist() == [2] * 5


def test_fast_path_failure_raises_and_keeps_the_event_for_reuse():
    a = rill.ones(1 << 20)
    rill.synchronize()
    pool = rill.current_stream()._events
    before = len(pool)
    rill.set_memory_limit(rill.memory_reserved())
    try:
        with pytest.raises(rill.OutOfMemoryError, match="cannot allocate"):
            a + a
        with pytest.raises(rill.OutOfMemoryError, match="cannot allocate"):
            a + 1
    finally:
        rill.set_memory_limit(None)
    assert len(pool) == max(before, 1)
    assert (a + a).numpy()[0] == 2


def test_fast_path_number_too_large_for_a_float_takes_nothing():
    a = rill.ones(2)
    c = a + a
    del c  # an event in the pool
    pool = rill.current_stream()._events
    before = len(pool)
    for op in (lambda: a + 10 ** 400, lambda: a - 10 ** 400):
        with pytest.raises(OverflowError):
            op()
    assert len(pool) == before


def test_fast_path_subtracts_a_number_as_the_general_path_does():
    z = rill.Tensor(np.array([-0.0, 1.5], dtype=F32))
    for fast, general in ((z - 0, _ops.sub(z, 0)), (z - 0.0, _ops.sub(z, 0.0))):
        assert np.array_equal(np.signbit(fast.numpy()), np.signbit(general.numpy()))
        assert np.array_equal(fast.numpy(), general.numpy())


# ---- the fast path in C (_rill_fast), where the build compiled it

needs_c = pytest.mark.skipif(rill._ffi.fast is None, reason="no _rill_fast: pure Python tensors")


@needs_c
def test_the_c_slots_are_what_python_calls():
    # A Tensor class that defined an operator in Python would replace the C
    # slot with a lookup of that method on every op.
    import rill.compat.mindspore as ms
    import rill.compat.torch as torch
    for cls in (rill.Tensor, ms.Tensor, torch.Tensor):
        assert issubclass(cls, rill._ffi.fast.TensorBase)
        for name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                     "__neg__", "__del__"):
            assert all(name not in k.__dict__ for k in cls.__mro__[:-2]), (cls, name)


@needs_c
def test_c_fields_read_and_write_as_the_package_s_objects():
    a = rill.ones(3)
    c = a + a
    ffi, lib = rill._ffi.ffi, rill._ffi.lib
    assert ffi.typeof(c._ptr) is ffi.typeof("void *") and c._ptr != ffi.NULL
    assert ffi.typeof(c._event) is ffi.typeof("rill_event *")
    out = np.zeros(3, F32)
    assert lib.rill_event_synchronize(c._event) == 0
    assert lib.rill_memcpy(ffi.from_buffer(out), c._ptr, out.nbytes) == 0
    assert out.tolist() == [2, 2, 2]
    assert c._gen == a._gen and c._owner is None and c._stream is a._stream
    ref = weakref.ref(c)
    del c
    assert ref() is None
    with pytest.raises(AttributeError):
        rill.Tensor.__new__(rill.Tensor)._shape  # a field never set
    b = a + a
    for field in ("_ptr", "_event"):
        with pytest.raises(TypeError, match="cdata"):
            setattr(b, field, 5)  # an int is not an address here
    assert b.numpy().tolist() == [2, 2, 2]


@needs_c
def test_tensors_freed_by_the_c_finalizer_give_their_memory_back():
    a = rill.ones(1 << 10)
    rill.synchronize()
    before = rill.memory_allocated()
    for _ in range(1000):
        c = a + a  # noqa: F841: each replaces (and frees) the previous one
    del c
    rill.synchronize()
    assert rill.memory_allocated() == before


@needs_c
def test_a_tensor_of_a_closed_stream_is_freed_at_the_end_of_its_work():
    gate = threading.Event()
    s = rill.Stream()
    a = rill.ones(1 << 10)
    rill.synchronize()
    before = rill.memory_allocated()
    with rill.stream(s):
        s.launch_host_func(gate.wait, 10)
        c = a + a
    s.close()
    del c  # rill_free: its stream's work still runs
    gate.set()
    rill.synchronize()
    assert rill.memory_allocated() == before


@needs_c
def test_tensors_in_reference_cycles_are_collected():
    import gc
    a = rill.ones(4)
    rill.synchronize()
    before = rill.memory_allocated()
    refs = []
    for _ in range(10):
        c = a + a
        holder = [c]
        c._shape = (4, holder)  # a cycle through one of the tensor's fields
        refs.append(weakref.ref(c))
        del c, holder
    gc.collect()
    assert all(r() is None for r in refs)
    rill.synchronize()
    assert rill.memory_allocated() == before


@needs_c
def test_threads_on_their_own_streams_race_on_the_fast_path():
    # Each op runs without the GIL; the stream the last op found must not
    # leak into another thread's op.
    a = rill.Tensor(np.arange(64, dtype=F32))
    rill.synchronize()
    errors = []

    def work(k):
        try:
            s = rill.Stream()
            with rill.stream(s):
                for i in range(300):
                    c = a + float(k)
                    d = c * a - a
                    assert c.stream is s and d.stream is s
            assert np.array_equal(d.numpy(), (np.arange(64) + k) * np.arange(64) - np.arange(64))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@needs_c
def test_an_event_pool_hands_each_event_to_one_taker_across_threads():
    # A device's tensors share its pool of events: a pop that gives one
    # event to two tensors lets one's numpy() wait for the other's op, and
    # one that drops the count below 0 makes len() fail without an
    # exception (SystemError). pop() runs Python code (a cdata is made), so
    # the GIL may pass to another thread in its middle. Bounded: 2 seconds.
    import sys
    import time
    from rill._ffi import ffi

    pool = rill._ffi.fast.EventPool()
    for _ in range(4):
        pool.append(_core.new_event())
    held, lock, failures = set(), threading.Lock(), []
    stop = time.monotonic() + 2

    def taker():
        while time.monotonic() < stop and not failures:
            try:
                ev = pool.pop()
            except IndexError:
                continue
            except SystemError as exc:
                failures.append(f"pop: {exc}")
                return
            addr = int(ffi.cast("uintptr_t", ev))
            with lock:
                if addr in held:
                    failures.append(f"event {addr:#x} handed to two takers")
                held.add(addr)
            time.sleep(0)  # held a moment, as a tensor holds its event
            with lock:
                held.discard(addr)
            pool.append(ev)
            try:
                if len(pool) < 0:
                    failures.append(f"the pool holds {len(pool)} events")
            except SystemError as exc:
                failures.append(f"len: {exc}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the GIL passes between threads as often as it can
    try:
        threads = [threading.Thread(target=taker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == [], failures[:3]
    assert len(pool) == 4
