# SPDX-License-Identifier: MIT
"""The tensor ops of a small model on the current stream, each one of rill's
C ops: broadcasting + - * / and the rest of rill_binary_op (tensors of
different shapes, or views with strides), the maps (activations, and / and
** with numbers), reductions and softmax along a dimension, conv2d with
strides and padding, and pooling.

dtypes: float32 computes directly; float16 tensors are converted to
float32 on the stream, and a result of only float16 inputs is rounded back
to float16 (rill's float16 rule, as for + - *). The positions that max and
min along a dimension give are int64 tensors (storage only)."""

import collections
import numbers

from . import _stream
from . import _tensor as T
from . import _views as V
from ._errors import check
from ._ffi import ffi, lib

_BINARY = {"add": lib.RILL_BINARY_ADD, "sub": lib.RILL_BINARY_SUB, "mul": lib.RILL_BINARY_MUL,
           "div": lib.RILL_BINARY_DIV, "maximum": lib.RILL_BINARY_MAX,
           "minimum": lib.RILL_BINARY_MIN, "pow": lib.RILL_BINARY_POW}


def _as_f32(x, where):
    """x as a float32 tensor (views keep their strides) and whether it was
    float16."""
    if x._dtype is T.float32:
        return x, False
    if x._dtype is T.float16:
        if x._strides is not None:
            raise NotImplementedError(f"{where}: rill reads float16 views with strides through "
                                      "float32 only; convert first (t.float())")
        return T._converted(x, T.float32, _stream.current(), where), True
    T._tensor_arg(x, where, "input")  # raises for int64
    return x, False


def _result(out, half):
    return T._converted(out, T.float16, _stream.current(), "rill") if half else out


def binary(kind, a, b, where=None):
    """a (kind) b for two tensors, broadcast to one shape, or a tensor and a
    number, on the current stream."""
    where = where or f"rill.ops.{kind}"
    if not isinstance(a, T.Tensor):
        if not T._is_scalar(a):
            raise TypeError(f"{where}: a must be a rill.Tensor or a number, "
                            f"not {type(a).__name__}")
        a = _scalar_like(a, b)
    if not isinstance(b, T.Tensor):
        if not T._is_scalar(b):
            raise TypeError(f"{where}: b must be a rill.Tensor or a number, "
                            f"not {type(b).__name__}")
        return _with_number(kind, a, float(b), where)
    x, hx = _as_f32(a, where)
    y, hy = _as_f32(b, where)
    shape = V.broadcast_shape(x._shape, y._shape, where)
    s = _stream.current()
    out = type(a)._empty(shape, T.float32, s, where)
    if out._numel:
        nd = len(shape)
        sh = ffi.new("size_t[]", list(shape) or [1])
        xs = ffi.new("size_t[]", list(V.broadcast_strides(x, shape)) or [1])
        ys = ffi.new("size_t[]", list(V.broadcast_strides(y, shape)) or [1])
        T._finish(out, s, lib.rill_op_binary_f32(s._handle(where), _BINARY[kind], out._ptr,
                                                 x._valid(where), xs, y._valid(where), ys, sh, nd))
    return _result(out, hx and hy)


def _scalar_like(value, t):
    """A one-element tensor of value, which broadcasts against t."""
    return T.filled((), float(value), T.float32, "rill", cls=type(t))


def _with_number(kind, a, value, where):
    if kind == "add":
        return T.add(a, value)
    if kind == "sub":
        return T.sub(a, value)
    if kind == "mul":
        return map_op(lib.RILL_MAP_SCALE, a, value, where)
    if kind == "div":
        return map_op(lib.RILL_MAP_DIV, a, value, where)
    if kind == "maximum":
        return map_op(lib.RILL_MAP_MAX, a, value, where)
    if kind == "minimum":
        return map_op(lib.RILL_MAP_MIN, a, value, where)
    return map_op(lib.RILL_MAP_POW, a, value, where)


def map_op(op, a, alpha=0.0, where="rill.ops.map"):
    """op(a) element-wise (a rill_map_op with its number alpha), a new
    tensor like a on the current stream."""
    if not isinstance(a, T.Tensor):
        raise TypeError(f"{where}: input must be a rill.Tensor, not {type(a).__name__}")
    x, half = _as_f32(a, where)
    x = V.contiguous(x, where)
    s = _stream.current()
    out = type(a)._empty(x._shape, T.float32, s, where)
    if out._numel:
        T._finish(out, s, lib.rill_op_map_f32(s._handle(where), op, out._ptr, x._valid(where),
                                              float(alpha), out._numel))
    return _result(out, half)


def rdiv(value, a, where="rill.ops.div"):
    return map_op(lib.RILL_MAP_RDIV, a, value, where)


def rsub(value, a, where="rill.ops.sub"):
    return map_op(lib.RILL_MAP_RSUB, a, value, where)


# ---- along a dimension

def _split(shape, d):
    return T._numel(shape[:d]), shape[d], T._numel(shape[d + 1:])


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
    x = V.contiguous(x, where)
    outer, dim, inner = _split(x._shape, d)
    shape = x._shape[:d] + ((1,) if keepdim else ()) + x._shape[d + 1:]
    s = _stream.current()
    out = type(x)._empty(shape, T.float32, s, where)
    idx = type(x)._empty(shape, T.int64, s, where) if want_indices else None
    if out._numel == 0:
        return out, idx
    if dim == 0:
        if kind in ("max", "min"):
            raise IndexError(f"{where}: cannot take the {kind} of an empty dimension")
        T._zeros(out, s) if kind == "sum" else T._finish(
            out, s, lib.rill_op_fill_f32(s._h, out._ptr, float("nan"), out._numel))
        return out, idx
    check(lib.rill_op_reduce_dim_f32(s._handle(where), _REDUCE[kind], out._ptr,
                                     ffi.cast("int64_t *", idx._ptr) if idx is not None
                                     else ffi.NULL, x._valid(where), outer, dim, inner))
    out._written(s)
    if idx is not None:
        idx._written(s)
    return out, idx


def reduce(kind, a, dim=None, keepdim=False, where=None):
    """sum or mean of a over dim (an int, a tuple of ints, or None: all),
    keeping the reduced dimensions as 1 when keepdim."""
    where = where or f"rill.Tensor.{kind}"
    x, half = _as_f32(a, where)
    dims = _dims_arg(dim, len(x._shape), where)
    if dims is None:
        if kind == "sum" and x._strides is None:
            out = T._sum_same(x)
        else:
            out, _ = _reduce_one(kind, V.reshape(x, x._numel, where=where), 0, False, False,
                                 where)
            out = V.reshape(out, (), where=where)
        if keepdim:
            out = V.reshape(out, (1,) * len(x._shape), where=where)
        return _result(out, half)
    out = x
    for d in dims:
        out, _ = _reduce_one(kind, out, d, True, False, where)
    if not keepdim:
        out = V.reshape(out, tuple(n for i, n in enumerate(out._shape) if i not in dims),
                        where=where)
    return _result(out, half)


def extreme(kind, a, dim=None, keepdim=False, where=None):
    """max or min: of all elements (dim None: a 0-d tensor), or along dim:
    (values, indices), indices int64."""
    where = where or f"rill.Tensor.{kind}"
    x, half = _as_f32(a, where)
    if dim is None:
        if x._numel == 0:
            raise RuntimeError(f"{where}: the {kind} of an empty tensor is undefined; pass a "
                               "non-empty tensor")
        out, _ = _reduce_one(kind, V.reshape(x, x._numel, where=where), 0, False, False, where)
        return _result(V.reshape(out, (), where=where), half)
    d = V._dim(dim, len(x._shape), where)
    if not x._shape:
        x = V.reshape(x, 1, where=where)
    values, indices = _reduce_one(kind, x, d, keepdim, True, where)
    if not a._shape:
        values, indices = V.reshape(values, (), where=where), V.reshape(indices, (), where=where)
    return values_indices(_result(values, half), indices)


def argextreme(kind, a, dim=None, keepdim=False, where=None):
    where = where or f"rill.Tensor.arg{kind}"
    if dim is None:
        a = V.reshape(a, a._numel, where=where)
        dim = 0
    return extreme(kind, a, dim, keepdim, where).indices


def softmax(a, dim, log=False, where=None):
    where = where or ("rill.ops.log_softmax" if log else "rill.ops.softmax")
    if dim is None:
        raise TypeError(f"{where}: pass dim, the dimension to normalise along")
    x, half = _as_f32(a, where)
    x = V.contiguous(x, where)
    d = V._dim(dim, len(x._shape), where)
    outer, n, inner = _split(x._shape, d) if x._shape else (1, 1, 1)
    s = _stream.current()
    out = type(a)._empty(x._shape, T.float32, s, where)
    if out._numel:
        op = lib.rill_op_log_softmax_f32 if log else lib.rill_op_softmax_f32
        T._finish(out, s, op(s._handle(where), out._ptr, x._valid(where), outer, n, inner))
    return _result(out, half)


# ---- images

def _pair(v, name, where):
    if isinstance(v, numbers.Integral):
        return int(v), int(v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(x, numbers.Integral) for x in v):
        raise TypeError(f"{where}: {name} must be an int or a pair of ints, not {v!r}")
    return int(v[0]), int(v[1])


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
        out = T.conv2d(V.contiguous(input, where), V.contiguous(weight, where))
    else:
        x, hx = _as_f32(input, where)
        wt, hw = _as_f32(weight, where)
        x, wt = V.contiguous(x, where), V.contiguous(wt, where)
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
        out = type(input)._empty((n, k, oh, ow), T.float32, s, where)
        if out._numel:
            T._finish(out, s, lib.rill_op_conv2d_ex_f32(
                s._handle(where), out._ptr, x._valid(where), wt._valid(where), n, c, h, w, k, r,
                q, sh, sw, ph, pw))
        out = _result(out, hx and hw)
    if bias is not None:
        out = binary("add", out, V.reshape(bias, (1, -1, 1, 1), where=where), where)
    return out


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
    x, half = _as_f32(input, where)
    x = V.contiguous(x, where)
    if len(x._shape) not in (3, 4):
        raise ValueError(f"{where}: input {x._shape} must be 3-D or 4-D: [c, h, w] or "
                         "[n, c, h, w]")
    h, w = x._shape[-2:]
    planes = T._numel(x._shape[:-2])
    if ph > r // 2 or pw > q // 2:
        raise RuntimeError(f"{where}: pad should be at most half of effective kernel size, but "
                           f"got pad=({ph}, {pw}), kernel_size=({r}, {q})")
    if sh < 1 or sw < 1 or r > h + 2 * ph or q > w + 2 * pw:
        raise ValueError(f"{where}: kernel ({r}, {q}), stride ({sh}, {sw}) and padding "
                         f"({ph}, {pw}) do not fit input {x._shape}")
    oh, ow = (h + 2 * ph - r) // sh + 1, (w + 2 * pw - q) // sw + 1
    s = _stream.current()
    out = type(input)._empty(x._shape[:-2] + (oh, ow), T.float32, s, where)
    if out._numel:
        op = lib.RILL_POOL_MAX if kind == "max" else lib.RILL_POOL_AVG
        T._finish(out, s, lib.rill_op_pool2d_f32(s._handle(where), op, out._ptr,
                                                 x._valid(where), planes, h, w, r, q, sh, sw,
                                                 ph, pw))
    return _result(out, half)


def matmul(a, b, where="rill.ops.matmul"):
    """The matrix product: 2-D by 2-D, or [..., m, k] by [k, n] (the
    leading dimensions folded into m), of contiguous copies of views."""
    if not isinstance(a, T.Tensor) or not isinstance(b, T.Tensor):
        raise TypeError(f"{where}: both operands must be rill.Tensors")
    if len(b._shape) == 2 and len(a._shape) > 2:
        lead = a._shape[:-1]
        out = T.matmul(V.reshape(a, (-1, a._shape[-1]), where=where), V.contiguous(b, where))
        return V.reshape(out, lead + (b._shape[1],), where=where)
    if len(a._shape) != 2 or len(b._shape) != 2:
        raise NotImplementedError(f"{where}: rill multiplies 2-D tensors, and [..., m, k] by "
                                  f"[k, n]; shapes {a._shape} and {b._shape} need PyTorch "
                                  "(torch.from_dlpack(t))")
    return T.matmul(V.contiguous(a, where), V.contiguous(b, where))
