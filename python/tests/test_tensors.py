# SPDX-License-Identifier: MIT
"""Tensors: construction, the ops against numpy, numpy() ordered after the
work that writes the tensor (an event, not a device-wide wait), and
record_stream."""

import sys
import threading

import numpy as np
import pytest

import rill

F32 = np.float32


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def test_tensor_from_numpy_list_and_number_round_trips():
    x = rand(3, 5)
    assert np.array_equal(rill.Tensor(x).numpy(), x)
    assert np.array_equal(rill.Tensor(x.T).numpy(), x.T)  # not contiguous
    assert rill.Tensor([[1, 2], [3, 4]], rill.float32).numpy().tolist() == [[1, 2], [3, 4]]
    t = rill.Tensor(2.5, dtype="float32")
    assert t.shape == () and t.item() == 2.5 and float(t) == 2.5
    assert np.array_equal(rill.from_numpy(x).numpy(), x)
    assert np.array_equal(rill.Tensor(rill.Tensor(x)).numpy(), x)
    assert np.array_equal(np.asarray(rill.Tensor(x)), x)


def test_tensor_converts_other_dtypes_only_when_asked():
    x64 = np.ones((2, 2))
    with pytest.raises(TypeError, match="dtype=rill.float32"):
        rill.Tensor(x64)
    assert rill.Tensor(x64, rill.float32).dtype is rill.float32
    assert rill.Tensor(np.arange(3), np.float32).numpy().tolist() == [0, 1, 2]
    with pytest.raises(TypeError):
        rill.Tensor(x64, "float64")
    with pytest.raises(TypeError):
        rill.Tensor(x64, dtype=3)


def test_tensor_properties():
    t = rill.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.numel() == 24 and t.size == 24
    assert t.nbytes == 96 and len(t) == 2 and t.dtype is rill.float32
    assert t.stream is rill.default_stream() and t.device == rill.current_device()
    assert "shape=(2, 3, 4)" in repr(t)
    with pytest.raises(TypeError):
        len(rill.Tensor(1.0, rill.float32))
    with pytest.raises(ValueError):
        t.item()


def test_ones_zeros_empty_full_take_shapes_as_ints_or_a_sequence():
    assert rill.ones(2, 3).numpy().tolist() == [[1] * 3] * 2
    assert rill.ones((2, 3)).shape == (2, 3)
    assert rill.zeros([4]).numpy().tolist() == [0] * 4
    assert rill.empty(5).shape == (5,)
    assert rill.full((2,), 7).numpy().tolist() == [7, 7]
    assert rill.ones().shape == ()
    assert rill.zeros(0, 3).shape == (0, 3) and rill.zeros(0, 3).numpy().shape == (0, 3)
    with pytest.raises(ValueError):
        rill.ones(-1)
    with pytest.raises(TypeError):
        rill.ones("3")
    with pytest.raises(TypeError):
        rill.full((2,), "x")
    with pytest.raises(TypeError):
        rill.zeros(2, dtype="int32")


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_elementwise_ops_match_numpy_in_float32(op):
    x, y = rand(7, 9, seed=1), rand(7, 9, seed=2)
    a, b = rill.Tensor(x), rill.Tensor(y)
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
    pyop = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q}[op]
    assert np.array_equal(pyop(a, b).numpy(), fn(x, y))
    assert np.array_equal(pyop(a, 1.5).numpy(), fn(x, F32(1.5)))
    assert np.array_equal(pyop(1.5, a).numpy(), fn(F32(1.5), x))
    assert np.array_equal(getattr(rill.ops, op)(a, b).numpy(), fn(x, y))


def test_add_and_sub_with_alpha_and_negation():
    x, y = rand(10, seed=3), rand(10, seed=4)
    a, b = rill.Tensor(x), rill.Tensor(y)
    assert np.allclose(rill.ops.add(a, b, alpha=2).numpy(), x + 2 * y)
    assert np.allclose(rill.ops.sub(a, b, alpha=0.5).numpy(), x - 0.5 * y)
    assert np.allclose(rill.ops.add(3, b, alpha=2).numpy(), 3 + 2 * y)
    assert np.array_equal((-a).numpy(), -x)
    assert np.array_equal((a - a).numpy(), np.zeros(10, F32))


def test_matmul_sum_and_conv2d_match_numpy():
    x, y = rand(17, 33, seed=5), rand(33, 9, seed=6)
    assert np.allclose((rill.Tensor(x) @ rill.Tensor(y)).numpy(), x @ y, rtol=1e-5, atol=1e-5)
    assert np.allclose(rill.ops.matmul(rill.Tensor(x), rill.Tensor(y)).numpy(), x @ y,
                       rtol=1e-5, atol=1e-5)
    s = rill.ops.sum(rill.Tensor(x))
    assert s.shape == () and np.isclose(s.item(), x.sum(dtype=np.float64), rtol=1e-5)
    assert rill.ops.sum(rill.zeros(0)).item() == 0.0
    img, w = rand(2, 3, 8, 7, seed=7), rand(4, 3, 3, 2, seed=8)
    windows = np.lib.stride_tricks.sliding_window_view(img, (3, 2), axis=(2, 3))
    ref = np.einsum("nchwrs,kcrs->nkhw", windows, w)
    out = rill.ops.conv2d(rill.Tensor(img), rill.Tensor(w))
    assert out.shape == (2, 4, 6, 6)
    assert np.allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_ops_refuse_shapes_that_do_not_fit():
    a, b = rill.ones(2, 3), rill.ones(3, 2)
    with pytest.raises(ValueError, match="do not broadcast"):
        a + b
    with pytest.raises(ValueError, match="do not multiply"):
        a @ a
    with pytest.raises(ValueError, match="do not multiply"):
        rill.ones(3) @ rill.ones(3)
    with pytest.raises(ValueError):
        rill.ops.conv2d(rill.ones(1, 2, 4, 4), rill.ones(1, 3, 2, 2))
    with pytest.raises(ValueError):
        rill.ops.conv2d(rill.ones(1, 2, 4, 4), rill.ones(1, 2, 5, 2))
    with pytest.raises(ValueError):
        rill.ops.conv2d(rill.ones(4, 4), rill.ones(2, 2))


def test_ops_refuse_operands_that_are_not_tensors_or_numbers():
    a = rill.ones(3)
    for bad in ("x", None, [1, 2, 3], np.ones(3)):
        with pytest.raises(TypeError):
            rill.ops.add(a, bad)
        with pytest.raises(TypeError):
            rill.ops.mul(bad, a)
    with pytest.raises(TypeError):
        a @ 2
    with pytest.raises(TypeError):
        rill.ops.matmul(a, "x")
    with pytest.raises(TypeError):
        rill.ops.sum([1, 2])
    with pytest.raises(TypeError):
        rill.ops.add(a, a, alpha="2")
    with pytest.raises(TypeError):
        rill.ops.conv2d(a, None)


def test_numpy_waits_for_the_event_of_the_work_that_wrote_the_tensor(gate):
    """The op on s sits behind a gate that opens only once the main thread
    is inside numpy(): the right values prove that numpy() waited."""
    s = rill.Stream()
    a = rill.Tensor(np.arange(1 << 16, dtype=F32))
    rill.synchronize()
    s.launch_host_func(gate)
    with rill.stream(s):
        b = a * 2
    main = threading.get_ident()

    def open_when_main_is_in_numpy():
        for _ in range(100000):
            frame = sys._current_frames().get(main)
            # numpy() on the stack: waiting, or running the gate itself (a
            # thread that waits for work no awake worker took runs it).
            while frame is not None and frame.f_code.co_name != "numpy":
                frame = frame.f_back
            if frame is not None:
                break
            gate.opened.wait(0.0001)
        gate.open()
    opener = threading.Thread(target=open_when_main_is_in_numpy)
    opener.start()
    got = b.numpy()
    opener.join()
    assert np.array_equal(got, np.arange(1 << 16, dtype=F32) * 2)
    assert not gate.timed_out


def test_numpy_does_not_wait_for_unrelated_work_on_other_streams(gate):
    """An event, not a device-wide wait: another stream held by a gate does
    not hold numpy() of a tensor written elsewhere."""
    other = rill.Stream()
    other.launch_host_func(gate)
    t = rill.ones(4) + 1
    assert t.numpy().tolist() == [2.0] * 4
    assert other.query() is False
    gate.open()
    other.synchronize()


def test_record_stream_keeps_memory_for_uses_rill_cannot_see():
    s = rill.Stream()
    t = rill.ones(8)
    t.record_stream(s)
    with pytest.raises(TypeError):
        t.record_stream("s")


def test_in_a_tensor_subclass_ops_keep_the_class():
    class Mine(rill.Tensor):
        __slots__ = ()
    a = Mine(np.ones(3, F32))
    assert type(a + 1) is Mine and type(a * a) is Mine and type(rill.ops.sum(a)) is Mine


def test_copies_and_pickles_own_their_memory():
    import copy
    import pickle
    a = rill.Tensor(np.arange(4, dtype=np.float32))
    for b in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert type(b) is rill.Tensor and b.dtype is rill.float32
        assert b._ptr != a._ptr
        assert b.numpy().tolist() == [0, 1, 2, 3]
    h = pickle.loads(pickle.dumps(a.half()))
    assert h.dtype is rill.float16 and h.numpy().tolist() == [0, 1, 2, 3]
    a.add_(1)  # the copies are apart
    assert b.numpy().tolist() == [0, 1, 2, 3]
    import rill.compat.torch as torch
    t = copy.deepcopy(torch.ones(2))
    assert type(t) is torch.Tensor and t.numpy().tolist() == [1, 1]


def test_truth_of_a_tensor_is_its_one_value_and_ambiguous_otherwise():
    # torch: bool() of a one-element tensor is its value; of any other it raises.
    assert bool(rill.ones(1)) and not bool(rill.zeros(())) and bool(rill.full((1, 1), -2.0))
    for t in (rill.ones(3), rill.zeros(2, 2), rill.empty(0)):
        with pytest.raises(RuntimeError, match="ambiguous"):
            bool(t)
        with pytest.raises(RuntimeError, match="ambiguous"):
            if t:
                pass


def test_equality_of_tensors_is_refused_not_identity():
    # torch compares element-wise; rill has no bool tensors, so it says so
    # instead of comparing identities.
    a, b = rill.ones(3), rill.ones(3)
    for x, y in ((a, b), (a, a), (a, 1.0), (2, a), (a, np.ones(3, F32))):
        with pytest.raises(TypeError, match="element-wise comparison"):
            x == y
        with pytest.raises(TypeError, match="element-wise comparison"):
            x != y
    assert (a == "x") is False and (a != None) is True  # noqa: E711 - other objects
    assert {a: 1}[a] == 1 and a in {a} and hash(a) != hash(b)  # hashed by identity


def test_an_op_with_a_numpy_array_raises_instead_of_returning_an_array():
    a = rill.ones(3)
    arr = np.ones(3, F32)
    for op in (lambda: a + arr, lambda: arr + a, lambda: a - arr, lambda: arr * a,
               lambda: a @ arr, lambda: arr @ a, lambda: a.add_(arr), lambda: np.add(arr, a)):
        with pytest.raises(TypeError, match="numpy.ndarray|ufunc"):
            op()
    assert a.numpy().tolist() == [1, 1, 1]
    assert np.array_equal(np.asarray(a) + arr, [2, 2, 2])  # on the host when asked
    assert (a + np.float32(2)).numpy().tolist() == [3, 3, 3]  # numpy scalars are numbers
    assert (np.float32(2) * a).numpy().tolist() == [2, 2, 2]
