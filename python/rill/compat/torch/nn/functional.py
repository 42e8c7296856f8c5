# SPDX-License-Identifier: MIT
"""torch.nn.functional on rill: the activations, linear, conv2d, pooling,
softmax, dropout (the identity where it drops nothing) and the losses of a
small model, forward only, on the current stream."""

import numpy as np

from .... import Tensor as _RillTensor, _internal
from .._missing import module_getattr, not_provided
from .._tensor import Tensor

__getattr__ = module_getattr("torch.nn.functional")
_lib = _internal.lib


def relu(input, inplace=False):
    return _internal.map_op(_lib.RILL_MAP_RELU, input, 0.0, "torch.nn.functional.relu")


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _internal.map_op(_lib.RILL_MAP_LEAKY_RELU, input, negative_slope,
                            "torch.nn.functional.leaky_relu")


def gelu(input, approximate="none"):
    op = _lib.RILL_MAP_GELU_TANH if approximate == "tanh" else _lib.RILL_MAP_GELU
    return _internal.map_op(op, input, 0.0, "torch.nn.functional.gelu")


def sigmoid(input):
    return _internal.map_op(_lib.RILL_MAP_SIGMOID, input, 0.0, "torch.nn.functional.sigmoid")


def tanh(input):
    return _internal.map_op(_lib.RILL_MAP_TANH, input, 0.0, "torch.nn.functional.tanh")


def silu(input, inplace=False):
    return _internal.map_op(_lib.RILL_MAP_SILU, input, 0.0, "torch.nn.functional.silu")


def softmax(input, dim=None, dtype=None):
    return _internal.softmax(input, dim, where="torch.nn.functional.softmax")


def log_softmax(input, dim=None, dtype=None):
    return _internal.softmax(input, dim, log=True, where="torch.nn.functional.log_softmax")


def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    where = "torch.nn.functional.linear"
    out = _internal.matmul_nd(input, _internal.transpose(weight, 0, 1), where)
    return out if bias is None else _internal.binary("add", out, bias, where)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _internal.conv2d(input, weight, bias, stride, padding, dilation, groups,
                            "torch.nn.functional.conv2d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _internal.pool2d("max", input, kernel_size, stride, padding,
                            "torch.nn.functional.max_pool2d", dilation=dilation,
                            ceil_mode=ceil_mode, return_indices=return_indices)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _internal.pool2d("avg", input, kernel_size, stride, padding,
                            "torch.nn.functional.avg_pool2d", ceil_mode=ceil_mode,
                            count_include_pad=count_include_pad, divisor_override=divisor_override)


def adaptive_avg_pool2d(input, output_size):
    """Only output_size 1 (global average pooling): the mean over h and w."""
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if size != (1, 1):
        raise not_provided(f"torch.nn.functional.adaptive_avg_pool2d(output_size={output_size!r})"
                           " (rill has output size 1)")
    return _internal.reduce("mean", input, (-2, -1), True,
                            "torch.nn.functional.adaptive_avg_pool2d")


def dropout(input, p=0.5, training=True, inplace=False):
    """The input itself where nothing is dropped (not training, or p 0)."""
    if training and p > 0:
        raise not_provided("torch.nn.functional.dropout while training (rill drops nothing: "
                           "call model.eval() for inference)")
    return input


def _class_rows(target, n, classes, where):
    """The class indices of target (a tensor of integral values, or a
    sequence), read on the host, checked against classes."""
    arr = target.numpy() if isinstance(target, _RillTensor) else np.asarray(target)
    if arr.shape != (n,):
        raise ValueError(f"{where}: target has shape {arr.shape}; pass one class index per row "
                         f"({n})")
    idx = arr.astype(np.int64)
    if np.any(idx != arr) or np.any(idx < 0) or np.any(idx >= classes):
        raise IndexError(f"{where}: target holds values that are not class indices in "
                         f"[0, {classes})")
    return idx


def nll_loss(input, target, reduction="mean"):
    """The negative log likelihood of the target classes (target read on the
    host) under input, log-probabilities [n, classes]."""
    where = "torch.nn.functional.nll_loss"
    if len(input.shape) != 2:
        raise not_provided(f"{where} on input of shape {tuple(input.shape)} (rill takes "
                           "[n, classes])")
    n, classes = input.shape
    idx = _class_rows(target, n, classes, where)
    onehot = np.zeros((n, classes), dtype=np.float32)
    onehot[np.arange(n), idx] = -1.0
    picked = _internal.binary("mul", input, Tensor(onehot), where)
    if reduction == "none":
        return _internal.reduce("sum", picked, 1, False, where)
    if reduction == "sum":
        return _internal.reduce("sum", picked, None, False, where)
    if reduction == "mean":
        return _internal.binary("div", _internal.reduce("sum", picked, None, False, where),
                                float(n), where)
    raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")


def cross_entropy(input, target, reduction="mean"):
    """nll_loss of log_softmax(input, 1): target holds class indices."""
    return nll_loss(log_softmax(input, 1), target, reduction)


def mse_loss(input, target, reduction="mean"):
    where = "torch.nn.functional.mse_loss"
    d = _internal.binary("sub", input, target, where)
    sq = _internal.binary("mul", d, d, where)
    if reduction == "none":
        return sq
    if reduction in ("mean", "sum"):
        return _internal.reduce(reduction, sq, None, False, where)
    raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")
