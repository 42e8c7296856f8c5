# SPDX-License-Identifier: MIT
"""rill.from_dlpack: a rill tensor on numpy's or PyTorch's memory, without
a copy, that keeps the producer's memory until the tensor is collected and
its stream's work is done."""

import gc
import weakref

import numpy as np
import pytest

import rill
from rill import _from_dlpack

torch = pytest.importorskip("torch")

# numpy's and PyTorch's host memory: rill's CPU device.
pytestmark = pytest.mark.usefixtures("cpu_device")

F32 = np.float32


def released(ref):
    """Whether the producer's object is gone, after a reap of finished deleters."""
    gc.collect()
    _from_dlpack._reap()
    gc.collect()
    return ref() is None


def test_numpy_memory_is_shared_both_ways():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    t = rill.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype is rill.float32 and t.device.kind == "cpu"
    a[0, 0] = 100.0  # the host's write shows in rill
    assert (t + 1).numpy().tolist() == [[101, 2, 3], [4, 5, 6]]
    t.add_(1.0)  # rill's write shows in numpy, once done
    rill.synchronize()
    assert a.tolist() == [[101, 2, 3], [4, 5, 6]]


def test_torch_tensors_with_strides_and_float16():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = rill.from_dlpack(base.t())  # a transposed view: strides (1, 4)
    assert t.shape == (4, 3)
    assert t.numpy().tolist() == base.t().tolist()
    assert (t * 2).numpy().tolist() == (base.t() * 2).tolist()
    h = rill.from_dlpack(torch.ones(5, dtype=torch.float16))
    assert h.dtype is rill.float16 and (h + h).numpy().tolist() == [2.0] * 5


def test_what_rill_cannot_take_is_refused_and_not_kept():
    a = np.ones(4)  # float64
    ref = weakref.ref(a)
    with pytest.raises(TypeError, match="float32 or float16"):
        rill.from_dlpack(a)
    with pytest.raises(BufferError, match="negative strides"):
        rill.from_dlpack(np.arange(4, dtype=F32)[::-1])
    with pytest.raises(TypeError, match="__dlpack__"):
        rill.from_dlpack([1.0, 2.0])
    capsule = np.ones(2, dtype=F32).__dlpack__()
    rill.from_dlpack(capsule)
    with pytest.raises(BufferError, match="consumed already"):
        rill.from_dlpack(capsule)
    del a
    assert released(ref)  # the refused capsule's deleter ran


def test_the_producer_lives_until_the_tensor_and_its_work_are_done(gate):
    a = np.full(1000, 3.0, dtype=F32)
    ref = weakref.ref(a)
    s = rill.Stream()
    with rill.stream(s):
        t = rill.from_dlpack(a)
    del a
    assert not released(ref)  # the tensor holds it
    s.launch_host_func(gate)
    with rill.stream(s):
        total = rill.ops.sum(t)  # reads the memory after the gate
    del t
    assert not released(ref)  # collected, but its stream's work is pending
    gate.open()
    s.synchronize()
    assert total.item() == 3000.0
    assert released(ref)


def test_shutdown_lets_go_of_live_imports():
    a = np.ones(3, dtype=F32)
    ref = weakref.ref(a)
    t = rill.from_dlpack(a)
    del a
    rill.shutdown()
    gc.collect()
    assert ref() is None
    with pytest.raises(rill.InvalidArgumentError, match="shutdown"):
        t + 1


def test_compat_torch_from_dlpack_takes_a_real_torch_tensor():
    import rill.compat.torch as ctorch
    real = torch.arange(4, dtype=torch.float32)
    t = ctorch.from_dlpack(real)
    assert isinstance(t, ctorch.Tensor)
    t.add_(10.0)
    rill.synchronize()
    assert real.tolist() == [10.0, 11.0, 12.0, 13.0]
