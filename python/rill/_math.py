# SPDX-License-Identifier: MIT
"""The tensor ops of a small model beyond rill._ops' element-wise ones,
each one of rill's C ops on the current stream: reductions and softmax
along a dimension, conv2d with strides and padding, pooling, and matmul of
[..., m, k] by [k, n]. MathMethods are rill.Tensor's methods for them.

dtypes: float32 computes directly; float16 tensors are converted to
float32 on the stream, and a result of only float16 inputs is rounded back
to float16 (rill's float16 rule, as for + - *). The positions that max and
min along a dimension give are int64 tensors (storage only)."""

import collections
import numbers

from . import _ops as O
from . import _stream
from . import _views as V
from ._core import TensorCore, finish
from ._dtype import float32, int64, numel
from ._errors import check
from ._ffi import ffi, lib
from ._guard import on_operands_device
from ._layout import contiguous


# ---- along a dimension

def _split(shape, d):
    return numel(shape[:d]), shape[d], numel(shape[d + 1:])


def _dims_arg(dim, nd, where):
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    return sorted({V._dim(d, nd, where) for d in dims}, reverse=True)


_REDUCE = {"sum": lib.RILL_REDUCE_DIM_SUM, "mean": lib.RILL_REDUCE_DIM_MEAN,
           "max": lib.RILL_REDUCE_DIM_MAX, "min": lib.RILL_REDUCE_DIM_MIN}

values_indices = collections.namedtuple("values_indices", ["values", "indices"])


def _reduce_one(kind, x, d, keepdim, want_indices, where):
    """x (float32) reduced along dimension d."""
    x = contiguous(x, where)
    outer, dim, inner = _split(x._shape, d)
    shape = x._shape[:d] + ((1,) if keepdim else ()) + x._shape[d + 1:]
    s = _stream.current()
    out = type(x)._empty(shape, float32, s, where)
    idx = type(x)._empty(shape, int64, s, where) if want_indices else None
    if out._numel == 0:
        return out, idx
    if dim == 0:
        if kind in ("max", "min"):
            raise IndexError(f"{where}: cannot take the {kind} of an empty dimension")
        O._zeros(out, s) if kind == "sum" else finish(
            out, s, lib.rill_op_fill_f32(s._h, out._ptr, float("nan"), out._numel))
        return out, idx
    check(lib.rill_op_reduce_dim_f32(s._handle(where), _REDUCE[kind], out._ptr,
                                     ffi.cast("int64_t *", idx._ptr) if idx is not None
                                     else ffi.NULL, x._valid(where), outer, dim, inner))
    out._written(s)
    if idx is not None:
        idx._written(s)
    return out, idx


@on_operands_device(lambda kind, *args, **kwargs: f"rill.Tensor.{kind}")
def reduce(kind, a, dim=None, keepdim=False, where=None):
    """sum or mean of a over dim (an int, a tuple of ints, or None: all),
    keeping the reduced dimensions as 1 when keepdim."""
    where = where or f"rill.Tensor.{kind}"
    x, half = O._as_f32(a, where)
    dims = _dims_arg(dim, len(x._shape), where)
    if dims is None:
        if kind == "sum" and x._strides is None:
            out = O._sum_same(x)
        else:
            out, _ = _reduce_one(kind, V.reshape(x, x._numel, where=where), 0, False, False,
                                 where)
            out = V.reshape(out, (), where=where)
        if keepdim:
            out = V.reshape(out, (1,) * len(x._shape), where=where)
        return O._result(out, half)
    out = x
    for d in dims:
        out, _ = _reduce_one(kind, out, d, True, False, where)
    if not keepdim:
        out = V.reshape(out, tuple(n for i, n in enumerate(out._shape) if i not in dims),
                        where=where)
    return O._result(out, half)


@on_operands_device(lambda kind, *args, **kwargs: f"rill.Tensor.{kind}")
def extreme(kind, a, dim=None, keepdim=False, where=None):
    """max or min: of all elements (dim None: a 0-d tensor), or along dim:
    (values, indices), indices int64."""
    where = where or f"rill.Tensor.{kind}"
    x, half = O._as_f32(a, where)
    if dim is None:
        if x._numel == 0:
            raise RuntimeError(f"{where}: the {kind} of an empty tensor is undefined; pass a "
                               "non-empty tensor")
        out, _ = _reduce_one(kind, V.reshape(x, x._numel, where=where), 0, False, False, where)
        return O._result(V.reshape(out, (), where=where), half)
    d = V._dim(dim, len(x._shape), where)
    if not x._shape:
        x = V.reshape(x, 1, where=where)
    values, indices = _reduce_one(kind, x, d, keepdim, True, where)
    if not a._shape:
        values, indices = V.reshape(values, (), where=where), V.reshape(indices, (), where=where)
    return values_indices(O._result(values, half), indices)


@on_operands_device(lambda kind, *args, **kwargs: f"rill.Tensor.arg{kind}")
def argextreme(kind, a, dim=None, keepdim=False, where=None):
    where = where or f"rill.Tensor.arg{kind}"
    if dim is None:
        a = V.reshape(a, a._numel, where=where)
        dim = 0
    return extreme(kind, a, dim, keepdim, where).indices


@on_operands_device("rill.ops.softmax")
def softmax(a, dim, log=False, where=None):
    where = where or ("rill.ops.log_softmax" if log else "rill.ops.softmax")
    if dim is None:
        raise TypeError(f"{where}: pass dim, the dimension to normalise along")
    x, half = O._as_f32(a, where)
    x = contiguous(x, where)
    d = V._dim(dim, len(x._shape), where)
    outer, n, inner = _split(x._shape, d) if x._shape else (1, 1, 1)
    s = _stream.current()
    out = type(a)._empty(x._shape, float32, s, where)
    if out._numel:
        op = lib.rill_op_log_softmax_f32 if log else lib.rill_op_softmax_f32
        finish(out, s, op(s._handle(where), out._ptr, x._valid(where), outer, n, inner))
    return O._result(out, half)


# ---- images

def _pair(v, name, where):
    if isinstance(v, numbers.Integral):
        return int(v), int(v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(x, numbers.Integral) for x in v):
        raise TypeError(f"{where}: {name} must be an int or a pair of ints, not {v!r}")
    return int(v[0]), int(v[1])


@on_operands_device("rill.ops.conv2d")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           where="rill.ops.conv2d"):
    """torch's conv2d: input [n, c, h, w], weight [k, c, r, s], optional bias
    [k]; strides and zero padding (rill_op_conv2d_ex_f32; with stride 1 and
    no padding, rill_op_conv2d_f32)."""
    if _pair(dilation, "dilation", where) != (1, 1) or groups != 1:
        raise NotImplementedError(f"{where}: dilation and groups other than 1 are not provided "
                                  "by rill; move the tensors to PyTorch with "
                                  "torch.from_dlpack(t) for them")
    sh, sw = _pair(stride, "stride", where)
    if isinstance(padding, str):
        raise NotImplementedError(f"{where}: padding={padding!r} is not provided by rill; pass "
                                  "the padding as ints")
    ph, pw = _pair(padding, "padding", where)
    if (sh, sw, ph, pw) == (1, 1, 0, 0):
        out = O.conv2d(contiguous(input, where), contiguous(weight, where))
    else:
        x, hx = O._as_f32(input, where)
        wt, hw = O._as_f32(weight, where)
        x, wt = contiguous(x, where), contiguous(wt, where)
        if len(x._shape) != 4 or len(wt._shape) != 4 or x._shape[1] != wt._shape[1]:
            raise ValueError(f"{where}: input {x._shape} and weight {wt._shape} must be 4-D, "
                             "[n, c, h, w] and [k, c, r, s], with the same c")
        n, c, h, w = x._shape
        k, _, r, q = wt._shape
        if sh < 1 or sw < 1 or ph < 0 or pw < 0 or r > h + 2 * ph or q > w + 2 * pw:
            raise ValueError(f"{where}: stride ({sh}, {sw}) and padding ({ph}, {pw}) do not fit "
                             f"input {x._shape} and weight {wt._shape}")
        oh, ow = (h + 2 * ph - r) // sh + 1, (w + 2 * pw - q) // sw + 1
        s = _stream.current()
        out = type(input)._empty((n, k, oh, ow), float32, s, where)
        if out._numel:
            finish(out, s, lib.rill_op_conv2d_ex_f32(
                s._handle(where), out._ptr, x._valid(where), wt._valid(where), n, c, h, w, k, r,
                q, sh, sw, ph, pw))
        out = O._result(out, hx and hw)
    if bias is not None:
        out = O.binary("add", out, V.reshape(bias, (1, -1, 1, 1), where=where), where)
    return out


@on_operands_device(lambda kind, *args, **kwargs: f"rill.ops.{kind}_pool2d")
def pool2d(kind, input, kernel_size, stride=None, padding=0, where=None, **unsupported):
    """max_pool2d and avg_pool2d (count_include_pad, no ceil_mode)."""
    where = where or f"rill.ops.{kind}_pool2d"
    for name, value in unsupported.items():
        default = {"dilation": 1, "ceil_mode": False, "return_indices": False,
                   "count_include_pad": True, "divisor_override": None}.get(name)
        if value != default:
            raise NotImplementedError(f"{where}: {name}={value!r} is not provided by rill; move "
                                      "the tensors to PyTorch with torch.from_dlpack(t) for it")
    r, q = _pair(kernel_size, "kernel_size", where)
    sh, sw = _pair(stride if stride not in (None, ()) else (r, q), "stride", where)
    ph, pw = _pair(padding, "padding", where)
    x, half = O._as_f32(input, where)
    x = contiguous(x, where)
    if len(x._shape) not in (3, 4):
        raise ValueError(f"{where}: input {x._shape} must be 3-D or 4-D: [c, h, w] or "
                         "[n, c, h, w]")
    h, w = x._shape[-2:]
    planes = numel(x._shape[:-2])
    if ph > r // 2 or pw > q // 2:
        raise RuntimeError(f"{where}: pad should be at most half of effective kernel size, but "
                           f"got pad=({ph}, {pw}), kernel_size=({r}, {q})")
    if sh < 1 or sw < 1 or r > h + 2 * ph or q > w + 2 * pw:
        raise ValueError(f"{where}: kernel ({r}, {q}), stride ({sh}, {sw}) and padding "
                         f"({ph}, {pw}) do not fit input {x._shape}")
    oh, ow = (h + 2 * ph - r) // sh + 1, (w + 2 * pw - q) // sw + 1
    s = _stream.current()
    out = type(input)._empty(x._shape[:-2] + (oh, ow), float32, s, where)
    if out._numel:
        op = lib.RILL_POOL_MAX if kind == "max" else lib.RILL_POOL_AVG
        finish(out, s, lib.rill_op_pool2d_f32(s._handle(where), op, out._ptr,
                                              x._valid(where), planes, h, w, r, q, sh, sw,
                                              ph, pw))
    return O._result(out, half)


@on_operands_device("rill.ops.matmul")
def matmul(a, b, where="rill.ops.matmul"):
    """The matrix product: 2-D by 2-D, or [..., m, k] by [k, n] (the
    leading dimensions folded into m), of contiguous copies of views."""
    if not isinstance(a, TensorCore) or not isinstance(b, TensorCore):
        raise TypeError(f"{where}: both operands must be rill.Tensors")
    if len(b._shape) == 2 and len(a._shape) > 2:
        lead = a._shape[:-1]
        out = O.matmul(V.reshape(a, (-1, a._shape[-1]), where=where), contiguous(b, where))
        return V.reshape(out, lead + (b._shape[1],), where=where)
    if len(a._shape) != 2 or len(b._shape) != 2:
        raise NotImplementedError(f"{where}: rill multiplies 2-D tensors, and [..., m, k] by "
                                  f"[k, n]; shapes {a._shape} and {b._shape} need PyTorch "
                                  "(torch.from_dlpack(t))")
    return O.matmul(contiguous(a, where), contiguous(b, where))


# ---- rill.Tensor's methods along dimensions

class MathMethods:
    """The methods of rill.Tensor along dimensions (a base class of
    rill.Tensor)."""

    __slots__ = ()

    def sum(self, dim=None, keepdim=False):
        """The sum of all elements (a 0-d tensor) or along dim."""
        return reduce("sum", self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return reduce("mean", self, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        """The largest element, or (values, indices) along dim."""
        if isinstance(dim, TensorCore):
            return O.binary("maximum", self, dim)
        return extreme("max", self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        if isinstance(dim, TensorCore):
            return O.binary("minimum", self, dim)
        return extreme("min", self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return argextreme("max", self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return argextreme("min", self, dim, keepdim)

    def softmax(self, dim):
        return softmax(self, dim)

    def log_softmax(self, dim):
        return softmax(self, dim, log=True)

