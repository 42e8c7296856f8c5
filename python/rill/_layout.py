# SPDX-License-Identifier: MIT
"""Where a tensor's elements lie: strides, contiguous copies, broadcasting,
and copies to another device.

A view (rill._views) shows its base's memory with a shape and strides in
elements (None when it is contiguous, the form every op takes directly).
An op that needs contiguous memory gathers a view with strides first
(contiguous(): rill_op_copy_strided_f32 on the current stream); the
broadcasting ops read strides directly (rill_op_binary_f32)."""

from . import _stream
from ._core import TensorCore
from ._dtype import float32, numel
from ._errors import check
from ._ffi import ffi, lib
from ._guard import on_device, on_operands_device


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def strides_of(t):
    """t's strides in elements (its contiguous ones when it has none)."""
    return t._strides if t._strides is not None else contiguous_strides(t._shape)


def f32_only(t, where):
    if t._dtype is not float32:
        raise NotImplementedError(f"{where}: rill gathers strided views of float32 tensors only; "
                                  f"convert first (t.float()), then take the view")


def copy_strided(dst, dst_strides, src, src_strides, shape, where):
    """dst at i = src at i for every index of shape, on the current stream."""
    if numel(shape) == 0:
        return
    s = _stream.current()
    nd = len(shape)
    sh = ffi.new("size_t[]", list(shape) or [1])
    ds = ffi.new("size_t[]", list(dst_strides) or [1])
    ss = ffi.new("size_t[]", list(src_strides) or [1])
    check(lib.rill_op_copy_strided_f32(s._handle(where), dst._valid(where), ds,
                                       src._valid(where), ss, sh, nd))
    dst._written(s)


@on_operands_device("rill.Tensor.contiguous")
def contiguous(t, where="rill.Tensor.contiguous"):
    """t itself when contiguous, else a contiguous copy made on the current
    stream."""
    if t._strides is None:
        return t
    f32_only(t, where)
    out = type(t)._empty(t._shape, t._dtype, _stream.current(), where)
    copy_strided(out, contiguous_strides(t._shape), t, t._strides, t._shape, where)
    return out


def broadcast_shape(a, b, where):
    """The shape two shapes broadcast to, as torch's rules give it."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise ValueError(f"{where}: the size of tensor a ({x}) must match the size of "
                               f"tensor b ({y}) at non-singleton dimension {-i}: shapes {a} and "
                               f"{b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def broadcast_strides(t, shape):
    """t's strides as seen in shape: 0 along the dimensions it repeats."""
    st = strides_of(t)
    nd, new = len(t._shape), len(shape)
    out = []
    for i in range(new):
        j = i - (new - nd)
        out.append(0 if j < 0 or (t._shape[j] == 1 and shape[i] != 1) else st[j])
    return tuple(out)


def to_device(t, dev, where):
    """A copy of t on dev's current stream, after the work that writes t.
    A CPU device cannot read a GPU's memory: from a GPU to a CPU device, the
    copy runs on t's device's current stream, between waits that order it
    after the allocation and before dev's later work."""
    if not isinstance(t, TensorCore):
        raise TypeError(f"{where}: self must be a rill.Tensor, not {type(t).__name__}")
    t._valid(where)
    if t._strides is not None:
        t = contiguous(t, where)  # gathered on t's own device first
    src = t._stream.device
    with on_device(dev, where):
        s = _stream.current()
        if s.device.kind != "cpu" or src.kind == "cpu":
            if t._event is not None:
                check(lib.rill_stream_wait_event(s._handle(where), t._event))
            return t._copy(s)
        out = type(t)._empty(t._shape, t._dtype, s, where)
    with on_device(src, where):
        c = _stream.current()
    if t._numel:
        c.wait_stream(s)  # the allocation
        if t._event is not None:
            check(lib.rill_stream_wait_event(c._handle(where), t._event))
        check(lib.rill_memcpy_async(out._ptr, t._ptr, t.nbytes, c._handle(where)))
        s.wait_stream(c)
        out._written(s)
    return out
