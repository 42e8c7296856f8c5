# SPDX-License-Identifier: MIT
"""Devices by name ("cuda:N", "cpu:N") wherever a device is taken, and what
a tensor of the current device tells DLPack consumers: these run on the
current device, a GPU where rill has one (the stand-in driver's in CI)."""

import copy

import numpy as np
import pytest

import rill
from rill._ffi import ffi


def kinds():
    return {rill.device(i).kind for i in range(rill.device_count())}


def test_names_give_the_devices_of_their_kind_in_order():
    for kind in kinds():
        devices = [rill.device(i) for i in range(rill.device_count())
                   if rill.device(i).kind == kind]
        for n, dev in enumerate(devices):
            assert rill.device(f"{kind}:{n}") is dev
            assert dev.kind_index == n and str(dev) == f"{kind}:{n}"
        cur = rill.current_device()
        assert rill.device(kind) is (cur if cur.kind == kind else devices[0])


def test_a_name_works_wherever_a_device_is_taken():
    name = str(rill.current_device())
    s = rill.Stream(device=name)
    assert s.device is rill.current_device()
    assert rill.current_stream(name) is rill.current_stream()
    assert rill.memory_allocated(name) == rill.memory_allocated()
    rill.synchronize(name)
    cpu = rill.device("cpu")
    assert rill.Stream(device="cpu").device is cpu


def test_a_kind_without_devices_and_an_index_past_them_say_why():
    if "cuda" not in kinds():
        with pytest.raises(rill.NoDeviceError, match="no cuda device: .*CUDA"):
            rill.device("cuda:0")
    n = len([i for i in range(rill.device_count()) if rill.device(i).kind == "cpu"])
    with pytest.raises(rill.NoDeviceError, match=f"rill has {n} cpu device"):
        rill.device(f"cpu:{n}")
    with pytest.raises(ValueError, match="names no device"):
        rill.device("gpu")


def test_dlpack_device_is_the_tensors():
    t = rill.ones(3)
    dev = t.device
    expected = (2, dev.kind_index) if dev.kind == "cuda" else (1, 0)
    assert t.__dlpack_device__() == expected


@pytest.mark.skipif(rill.current_device().kind != "cuda", reason="needs rill's CUDA device "
                    "(the stand-in driver in CI): the current device is rill's CPU device")
def test_a_consumer_that_refuses_a_gpu_tensor_raises_and_holds_nothing():
    t = rill.ones(3)
    # numpy takes host memory only (older numpy raises RuntimeError, newer BufferError)
    with pytest.raises((RuntimeError, BufferError), match="(?i)device"):
        np.from_dlpack(t)
    del t
    rill.shutdown()  # no export is left alive


def test_a_rill_tensor_comes_back_as_itself_on_its_device():
    """The round trip through a capsule, on the current device (rill's GPU
    where it has one): the same memory, and ops on it."""
    x = rill.ones(4)
    y = rill.from_dlpack(x)
    assert y.device is x.device
    assert int(ffi.cast("uintptr_t", y._ptr)) == int(ffi.cast("uintptr_t", x._ptr))
    y.add_(1.0)
    assert x.numpy().tolist() == [2.0] * 4


def test_native_is_the_cuda_stream_or_0_on_a_cpu_device():
    s = rill.Stream()
    cpu = rill.Stream(device="cpu")
    assert cpu.native == 0
    if s.device.kind == "cuda":
        assert s.native != 0 and s.native != rill.default_stream().native
        import rill.compat.torch as torch
        assert torch.cuda.Stream().cuda_stream != 0
    with pytest.raises(rill.InvalidArgumentError):
        cpu.close()
        cpu.native


@pytest.mark.skipif(rill.current_device().kind != "cuda", reason="needs rill's CUDA device "
                    "(the stand-in driver in CI): the current device is rill's CPU device")
def test_an_op_on_the_gpu_refuses_host_tensors_with_a_device_mismatch():
    a = rill.ones(3)
    with rill.stream(rill.Stream(device="cpu")):
        b = rill.ones(3)
    host = rill.from_dlpack(np.ones(3, np.float32))
    for other in (b, host):  # tensors of rill's CPU device: refused before the op
        with pytest.raises(rill.DeviceMismatchError, match="on the same device"):
            (a + other).numpy()
    assert (a + a).numpy().tolist() == [2.0] * 3  # the stream's own memory


def test_makers_take_a_device_and_to_moves_between_devices():
    cur = rill.current_device()
    for make in (lambda d: rill.ones(2, 3, device=d), lambda d: rill.zeros(4, device=d),
                 lambda d: rill.full((2,), 7.0, device=d), lambda d: rill.empty(5, device=d),
                 lambda d: rill.randn(3, device=d),
                 lambda d: rill.Tensor([1.0, 2.0], rill.float32, device=d)):
        t = make("cpu")
        assert t.device is rill.device("cpu")
        assert make(None).device is cur
    assert rill.current_device() is cur  # each maker left the current device as it was
    x = rill.Tensor([1.0, 2.0, 3.0], rill.float32)
    assert x.to(cur) is x and x.to(str(cur)) is x and x.to(rill.float32) is x
    host = x.to("cpu")
    assert host.device is rill.device("cpu") and host.numpy().tolist() == [1.0, 2.0, 3.0]
    back = host.to(cur, rill.float16)
    assert back.device is cur and back.dtype is rill.float16
    assert back.numpy().tolist() == [1.0, 2.0, 3.0]
    assert x.to("float16").dtype is rill.float16
    with pytest.raises(ValueError, match="names no device"):
        x.to("cuda:x")
    with pytest.raises(rill.NoDeviceError):
        rill.ones(2, device="cpu:9")


def test_an_op_runs_on_its_operands_device_after_the_work_that_writes_them(two_devices, gate):
    # PyTorch's device guard: an op runs on the current stream of its
    # operands' device, whatever device is current, so it comes after the
    # work there that writes them (held back here by a host function), and
    # its result lives there. The fast paths (+ - * with a tensor or a
    # number, -a) and the general path (broadcasting, float16, matmul,
    # reductions, views, copies...).
    assert rill.current_device().index == 0
    dev1 = rill.device(1)
    rill.current_stream(1).launch_host_func(gate)
    n = 4096
    a = rill.full((n,), 2.0, device=1)  # written behind the host function
    b = rill.full((n,), 3.0, device=1)
    m = rill.full((4, 4), 1.0, device=1)
    cases = {
        "a + b": (lambda: a + b, 5.0), "a - b": (lambda: a - b, -1.0),
        "a * b": (lambda: a * b, 6.0), "a + 1": (lambda: a + 1, 3.0),
        "1 - a": (lambda: 1 - a, -1.0), "a * 0.5": (lambda: a * 0.5, 1.0),
        "-a": (lambda: -a, -2.0), "a / b": (lambda: a / b, 2.0 / 3.0),
        "a ** 2": (lambda: a ** 2, 4.0), "ops.add": (lambda: rill.ops.add(a, b), 5.0),
        "broadcast": (lambda: a.reshape(n, 1) + b[:4], 5.0),
        "sum": (lambda: a.sum(), 2.0 * n), "mean": (lambda: a.mean(), 2.0),
        "max": (lambda: a.max(), 2.0), "min along 0": (lambda: m.min(0).values, 1.0),
        "softmax": (lambda: m.softmax(1), 0.25), "matmul": (lambda: m @ m, 4.0),
        "half": (lambda: a.half() + a.half(), 4.0), "copy": (lambda: copy.copy(a), 2.0),
        "view": (lambda: a.reshape(64, 64).t().contiguous(), 2.0),
        "cat": (lambda: rill._views.cat([a, b])[:n], 2.0),
    }
    out = {name: (make(), want) for name, (make, want) in cases.items()}
    c = rill.zeros(n)  # on device 0: its own device
    c[:] = a  # a copy from device 1, after the work that writes a
    gate.open()
    for name, (t, want) in out.items():
        assert t.device is dev1, name
        assert np.allclose(t.numpy().astype(np.float64), want), name
    assert c.device.index == 0 and set(c.numpy().tolist()) == {2.0}
    assert rill.current_device().index == 0  # the op's device was current only during the op


def test_operands_on_two_devices_are_refused(two_devices):
    # As PyTorch: RuntimeError "Expected all tensors to be on the same
    # device" (rill.DeviceMismatchError, a RuntimeError), nothing runs.
    a = rill.ones(4)
    b = rill.ones(4, device=1)
    for name, op in {"a + b": lambda: a + b, "b * a": lambda: b * a,
                     "a - b": lambda: a - b, "a / b": lambda: a / b,
                     "ops.matmul": lambda: rill.ops.matmul(a.reshape(2, 2), b.reshape(2, 2)),
                     "add_": lambda: a.add_(b), "cat": lambda: rill._views.cat([a, b]),
                     "half": lambda: a.half() + b.half()}.items():
        with pytest.raises(rill.DeviceMismatchError,
                           match="Expected all tensors to be on the same device, but found at "
                                 "least two devices, [a-z]+:[01] and [a-z]+:[01]!"):
            op()
        assert isinstance(pytest.raises(RuntimeError, op).value, rill.DeviceMismatchError), name
    assert a.numpy().tolist() == [1] * 4
