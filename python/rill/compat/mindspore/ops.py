# SPDX-License-Identifier: MIT
"""mindspore.ops on rill's built-in ops, run on the current stream."""

import numbers

from ... import _internal
from ._tensor import Tensor


def _unsupported(name, **given):
    bad = ", ".join(f"{k}={v!r}" for k, v in given.items())
    raise NotImplementedError(f"mindspore.ops.{name}: rill does not provide {bad}")


def add(input, other):
    """input + other (tensors of one shape, or a tensor and a number)."""
    return _internal.add(input, other)


def mul(input, other):
    """input * other elementwise."""
    return _internal.mul(input, other)


def matmul(input, other):
    """The matrix product of 2-D tensors."""
    return _internal.matmul(input, other)


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 - mindspore's name
    """The sum of all elements (dim=None), a 0-d tensor."""
    if dim is not None or keepdim or dtype is not None:
        _unsupported("sum", dim=dim, keepdim=keepdim, dtype=dtype)
    return _internal.sum(input)


def _pads(pad_mode, padding, size, kernel, stride, where):
    """(top, bottom, left, right) for pad_mode: 'valid' none, 'pad' the
    padding given (an int, or four ints), 'same' what makes the output
    ceil(size / stride), its odd unit at the bottom and right."""
    if pad_mode == "pad":
        if isinstance(padding, numbers.Integral):
            return (int(padding),) * 4
        pads = tuple(padding)
        if len(pads) != 4 or not all(isinstance(p, numbers.Integral) and p >= 0 for p in pads):
            raise ValueError(f"{where}: padding must be an int or four ints (top, bottom, left, "
                             f"right) of at least 0, not {padding!r}")
        return tuple(int(p) for p in pads)
    if padding != 0:
        raise ValueError(f"{where}: padding must be 0 unless pad_mode is 'pad', not {padding!r}")
    if pad_mode == "valid":
        return (0, 0, 0, 0)
    if pad_mode == "same":
        pads = []
        for n, k, s in zip(size, kernel, stride):
            total = max((-(-n // s) - 1) * s + k - n, 0)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    raise ValueError(f"{where}: pad_mode must be 'valid', 'same' or 'pad', not {pad_mode!r}")


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1,
           groups=1):
    """2-D convolution, NCHW: strides, pad_mode 'valid', 'same' or 'pad'
    (rill pads both sides of a dimension alike), and a bias [k]."""
    where = "mindspore.ops.conv2d"
    if dilation not in (1, (1, 1)) or groups != 1:
        _unsupported("conv2d", **{k: v for k, v in (("dilation", dilation), ("groups", groups))
                                  if v not in (1, (1, 1))})
    stride = (stride, stride) if isinstance(stride, numbers.Integral) else tuple(stride)
    if len(stride) != 2 or not all(isinstance(s, numbers.Integral) and s >= 1 for s in stride):
        raise ValueError(f"{where}: stride must be an int or two ints of at least 1, not "
                         f"{stride!r}")
    if len(input.shape) != 4 or len(weight.shape) != 4:
        raise ValueError(f"{where}: input {tuple(input.shape)} and weight "
                         f"{tuple(weight.shape)} must be 4-D, [n, c, h, w] and [k, c, r, s]")
    top, bottom, left, right = _pads(pad_mode, padding, input.shape[2:], weight.shape[2:],
                                     stride, where)
    if top != bottom or left != right:
        raise NotImplementedError(f"{where}: pad_mode={pad_mode!r} pads (top, bottom, left, "
                                  f"right) = {(top, bottom, left, right)} here, and rill pads "
                                  "both sides of a dimension alike")
    return _internal.conv2d(input, weight, bias, stride, (top, left), where=where)


def ones(shape, dtype=None):
    """A tensor of ones of shape (an int or a sequence of ints)."""
    return _internal.filled(shape, 1.0, dtype, "mindspore.ops.ones", Tensor)


def zeros(shape, dtype=None):
    """A tensor of zeros of shape (an int or a sequence of ints)."""
    return _internal.filled(shape, 0.0, dtype, "mindspore.ops.zeros", Tensor)


__all__ = ["add", "conv2d", "matmul", "mul", "ones", "sum", "zeros"]
