# SPDX-License-Identifier: MIT
"""Devices by name ("cuda:N", "cpu:N") wherever a device is taken, and what
a tensor of the current device tells DLPack consumers: these run on the
current device, a GPU where rill has one (the stand-in driver's in CI)."""

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
    with pytest.raises(RuntimeError, match="device"):  # numpy takes host memory only
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
    for other in (b, host):
        with pytest.raises(rill.DeviceMismatchError, match="cannot reach"):
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
