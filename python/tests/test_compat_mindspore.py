# SPDX-License-Identifier: MIT
"""rill.compat.mindspore beyond the seeds' examples: the rest of hal, the
context, nn.Cell, and what the ops refuse."""

import numpy as np
import pytest

import rill
import rill.compat.mindspore as ms
from rill.compat.mindspore import Tensor, context, nn, ops


def test_hal_names_are_rill_streams_and_events():
    assert ms.hal.Stream is rill.Stream and ms.hal.Event is rill.Event
    assert ms.hal.StreamCtx is rill.StreamContext
    s = ms.hal.Stream(priority=0)
    ms.hal.set_cur_stream(s)
    assert ms.hal.current_stream() is s
    ms.hal.set_cur_stream(ms.hal.default_stream())
    assert ms.hal.current_stream() is ms.hal.default_stream()


def test_hal_event_timing():
    start, end = ms.hal.Event(enable_timing=True), ms.hal.Event(enable_timing=True)
    start.record()
    a = Tensor(np.ones([64, 64]), ms.float32)
    b = ops.matmul(a, a)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert b.asnumpy()[0, 0] == 64.0


def test_hal_memory_calls():
    t = ops.ones((256, 256), ms.float32)
    assert ms.hal.memory_allocated() >= t.nbytes
    assert ms.hal.max_memory_allocated() >= ms.hal.memory_allocated()
    assert ms.hal.memory_reserved() >= ms.hal.memory_allocated()
    assert ms.hal.max_memory_reserved() >= ms.hal.memory_reserved()
    stats = ms.hal.memory_stats()
    assert stats["total_allocated_memory"] == ms.hal.memory_allocated()
    assert stats["total_idle_memory"] == stats["total_reserved_memory"] - \
        stats["total_allocated_memory"]
    ms.hal.reset_max_memory_allocated()
    assert ms.hal.max_memory_allocated() == ms.hal.memory_allocated()
    ms.hal.reset_max_memory_reserved()
    ms.hal.reset_peak_memory_stats()
    assert ms.hal.max_memory_reserved() == ms.hal.memory_reserved()
    ms.hal.empty_cache()
    assert "rill memory summary" in ms.hal.memory_summary()


def test_tensor_results_stay_mindspore_tensors():
    a = Tensor(np.ones([2, 2]), ms.float32)
    for out in (a + a, a * 2, 1 - a, ops.matmul(a, a), ops.sum(a), ops.add(a, 1),
                ops.mul(a, a), ops.zeros(3), ops.ones([2])):
        assert isinstance(out, Tensor)
        assert isinstance(out.asnumpy(), np.ndarray)
    with pytest.raises(TypeError):
        Tensor()


def test_ops_refuse_what_rill_does_not_support():
    a = Tensor(np.ones([1, 1, 4, 4]), ms.float32)
    w = Tensor(np.ones([1, 1, 3, 3]), ms.float32)
    assert ops.conv2d(a, w, stride=(1, 1), pad_mode="valid").shape == (1, 1, 2, 2)
    with pytest.raises(NotImplementedError, match="pad_mode='same'"):
        ops.conv2d(a, w[:, :, :2, :2], pad_mode="same")  # one unit of padding: one side only
    with pytest.raises(NotImplementedError, match="dilation=2"):
        ops.conv2d(a, w, dilation=2)
    with pytest.raises(ValueError, match="padding must be 0"):
        ops.conv2d(a, w, padding=1)
    with pytest.raises(ValueError, match="pad_mode"):
        ops.conv2d(a, w, pad_mode="full")
    with pytest.raises(NotImplementedError, match="dim=0"):
        ops.sum(a, dim=0)


@pytest.mark.parametrize("stride, pad_mode, padding", [
    (1, "valid", 0), (2, "valid", 0), ((2, 1), "valid", 0), (1, "same", 0), (2, "same", 0),
    (1, "pad", 1), (2, "pad", (2, 2, 1, 1)), (3, "pad", 2)])
def test_conv2d_strides_and_padding_match_pytorch(stride, pad_mode, padding):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = ops.conv2d(Tensor(x), Tensor(w), Tensor(b), stride=stride, pad_mode=pad_mode,
                     padding=padding)
    assert isinstance(got, Tensor)
    pads = {"valid": 0, "same": 1}.get(pad_mode, padding)  # 'same' of a 3x3 kernel: 1 each side
    if isinstance(pads, tuple):
        pads = (pads[0], pads[2])
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                      torch.from_numpy(b), stride=stride, padding=pads)
    if pad_mode == "same":  # the output is ceil(size / stride)
        s = (stride, stride) if isinstance(stride, int) else stride
        assert got.shape[2:] == (-(-9 // s[0]), -(-11 // s[1]))
    np.testing.assert_allclose(got.asnumpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_context_sets_the_mode_and_the_memory_limit():
    context.set_context(mode=context.PYNATIVE_MODE)
    assert context.get_context("mode") == ms.PYNATIVE_MODE
    with pytest.raises(NotImplementedError):
        ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ValueError):
        ms.set_context(mode=7)
    with pytest.raises(ValueError):
        ms.set_context(no_such_key=1)
    with pytest.raises(ValueError):
        ms.set_context(max_device_memory="lots")
    ms.set_context(max_device_memory="3.5GB")
    try:
        assert rill.memory_limit() == int(3.5 * (1 << 30))
    finally:
        rill.set_memory_limit(None)
    with pytest.raises(ValueError):
        ms.get_context("no_such_key")


def test_context_device_target_makes_the_device_current():
    """"GPU" and "Ascend" with device_id N: rill's cuda:N where it has CUDA
    devices, else its device of ordinal N; "CPU": its CPU device where it
    has CUDA devices (else every device is a CPU device: unchanged)."""
    first = rill.current_device()
    gpu = rill.device("cuda:0") if rill.device(0).kind == "cuda" else rill.device(0)
    try:
        ms.set_context(device_target="CPU")
        assert rill.current_device().kind == "cpu"
        ms.set_context(device_target="GPU", device_id=0)
        assert rill.current_device() is gpu
        assert ms.get_context("device_target") == "GPU"
        with pytest.raises(ValueError, match="device_target"):
            ms.set_context(device_target="TPU")
        with pytest.raises(ValueError, match="device_id"):
            ms.set_context(device_id=-1)
        with pytest.raises(rill.NoDeviceError):
            ms.set_context(device_target="Ascend", device_id=rill.device_count())
        assert rill.current_device() is gpu and ms.get_context("device_target") == "GPU"
    finally:
        ms.set_context(device_target="CPU", device_id=0)
        rill.set_device(first)


def test_cell_calls_construct():
    class Double(nn.Cell):
        def __init__(self):
            super().__init__()
            self.s1 = ms.hal.Stream()

        def construct(self, x):
            self.s1.wait_stream(ms.hal.current_stream())
            with ms.hal.StreamCtx(self.s1):
                y = x * 2
            ms.hal.current_stream().wait_stream(self.s1)
            return y
    x = Tensor(np.arange(4), ms.float32)
    assert Double()(x).asnumpy().tolist() == [0, 2, 4, 6]
    with pytest.raises(NotImplementedError):
        nn.Cell()(x)


def test_float16_tensors_and_ops():
    a = Tensor(np.ones([2, 3]), ms.float16)
    assert a.dtype is ms.float16 and a.asnumpy().dtype == np.float16
    b = ops.ones((2, 3), ms.float16)
    c = ops.add(a, b)
    assert type(c) is Tensor and c.dtype is ms.float16 and np.all(c.asnumpy() == 2)
    d = ops.matmul(a, Tensor(np.ones([3, 2]), ms.float16))
    assert d.dtype is ms.float16 and np.all(d.asnumpy() == 3)
