# SPDX-License-Identifier: MIT
"""mindspore.ops on rill's built-in ops, run on the current stream."""

from ... import _tensor
from ._tensor import Tensor


def _unsupported(name, **given):
    bad = ", ".join(f"{k}={v!r}" for k, v in given.items())
    raise NotImplementedError(f"mindspore.ops.{name}: rill supports only the default values of "
                              f"{bad}")


def add(input, other):
    """input + other (tensors of one shape, or a tensor and a number)."""
    return _tensor.add(input, other)


def mul(input, other):
    """input * other elementwise."""
    return _tensor.mul(input, other)


def matmul(input, other):
    """The matrix product of 2-D tensors."""
    return _tensor.matmul(input, other)


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 - mindspore's name
    """The sum of all elements (dim=None), a 0-d tensor."""
    if dim is not None or keepdim or dtype is not None:
        _unsupported("sum", dim=dim, keepdim=keepdim, dtype=dtype)
    return _tensor.sum(input)


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1,
           groups=1):
    """2-D convolution, NCHW, with the defaults: stride 1, pad_mode 'valid'."""
    given = {}
    for name, value, default in (("bias", bias, None), ("stride", stride, 1),
                                 ("pad_mode", pad_mode, "valid"), ("padding", padding, 0),
                                 ("dilation", dilation, 1), ("groups", groups, 1)):
        if value != default and not (isinstance(value, tuple) and set(value) == {default}):
            given[name] = value
    if given:
        _unsupported("conv2d", **given)
    return _tensor.conv2d(input, weight)


def ones(shape, dtype=None):
    """A tensor of ones of shape (an int or a sequence of ints)."""
    return _tensor.filled(shape, 1.0, dtype, "mindspore.ops.ones", Tensor)


def zeros(shape, dtype=None):
    """A tensor of zeros of shape (an int or a sequence of ints)."""
    return _tensor.filled(shape, 0.0, dtype, "mindspore.ops.zeros", Tensor)


__all__ = ["add", "conv2d", "matmul", "mul", "ones", "sum", "zeros"]
