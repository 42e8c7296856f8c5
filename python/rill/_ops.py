# SPDX-License-Identifier: MIT
"""The general path of the built-in ops on tensors (rill.ops, the
operators, rill.Tensor's arithmetic methods): the element-wise ops, matmul,
sum and conv2d on the current stream of their tensors' device (which the
op makes current meanwhile), with every argument check and error. The
fast paths of + - * and -a (rill._fastpath, and _rill_fast in C) give
what these give and leave every other case to them. float16 tensors store
halves and compute in float32, each result rounded once
(docs/python.md)."""

import numpy as np

from . import _stream
from ._core import TensorCore, finish, is_scalar
from ._dtype import dtype_arg, float16, float32, int64
from ._errors import check
from ._ffi import ffi, lib
from ._guard import on_operands_device
from ._layout import broadcast_shape, broadcast_strides, contiguous
from ._makers import converted, filled


def neg(a):
    """-a element-wise on the current stream (RILL_MAP_NEG)."""
    return map_op(lib.RILL_MAP_NEG, a, 0.0, "rill.ops.neg")


def _operand(x):
    if isinstance(x, np.ndarray):
        _no_array(x)
    return isinstance(x, TensorCore) or is_scalar(x)


def _no_array(x):
    raise TypeError(f"rill.Tensor: an op between a tensor and a numpy.ndarray {x.shape} is not "
                    "run on the host; make the array a tensor first (rill.from_numpy(a), "
                    "torch.from_numpy(a).cuda()), or the tensor an array (t.numpy())")


def _tensor_arg(x, where, name):
    if not isinstance(x, TensorCore):
        raise TypeError(f"{where}: {name} must be a rill.Tensor, not {type(x).__name__}")
    if x._dtype is int64:
        raise NotImplementedError(f"{where}: {name} is an int64 tensor (positions from max or "
                                  "min along a dimension), which rill stores but computes "
                                  "nothing on; read it with numpy() or tolist()")
    if x._strides is not None:
        raise ValueError(f"{where}: {name} is a view with strides; this op takes contiguous "
                         f"tensors: pass {name}.contiguous()")
    return x._valid(where)


def _same_shape(a, b, where):
    if a._shape != b._shape:
        raise ValueError(f"{where}: shapes {a._shape} and {b._shape} differ; rill's "
                         "elementwise ops take tensors of one shape, or a tensor and a number")


def _new(shape, where, like, dt=float32):
    """A new tensor of dtype dt on the current stream, of the class of like
    (a Tensor subclass of a compatibility module stays itself through the
    ops)."""
    s = _stream.current()
    return s, type(like)._empty(shape, dt, s, where)


def _zeros(out, s):
    """Fills out (float32 or float16) with zeros on s: the result of a sum
    or product over nothing."""
    fill = lib.rill_op_fill_f16 if out._dtype is float16 else lib.rill_op_fill_f32
    return finish(out, s, fill(s._h, out._ptr, 0.0, max(out._numel, 1)))


def _add32(a, b, alpha=1):
    """a + alpha*b on the current stream; a or b may be a number."""
    where = "rill.ops.add"
    if not is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    if is_scalar(a) and isinstance(b, TensorCore):
        if alpha == 1:
            a, b = b, a
        else:
            return _sub32(a, b, alpha=-alpha)
    pa = _tensor_arg(a, where, "a")
    if is_scalar(b):
        s, out = _new(a._shape, where, a)
        if out._numel:
            return finish(out, s, lib.rill_op_add_scalar_f32(s._h, out._ptr, pa,
                                                             float(b) * alpha, out._numel))
        return out
    pb = _tensor_arg(b, where, "b")
    _same_shape(a, b, where)
    s, out = _new(a._shape, where, a)
    if out._numel:
        return finish(out, s, lib.rill_op_add_f32(s._h, out._ptr, pa, pb, alpha, out._numel))
    return out


def _sub32(a, b, alpha=1):
    """a - alpha*b on the current stream; a or b may be a number."""
    where = "rill.ops.sub"
    if not is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    if isinstance(a, TensorCore):
        if is_scalar(b):
            return _add32(a, -float(b) * alpha)
        _tensor_arg(b, where, "b")
        return _add32(a, b, alpha=-alpha)
    if not is_scalar(a):
        raise TypeError(f"{where}: a must be a rill.Tensor or a number, not {type(a).__name__}")
    pb = _tensor_arg(b, where, "b")
    s, out = _new(b._shape, where, b)  # out = a, then out = out - alpha*b
    if out._numel:
        check(lib.rill_op_fill_f32(s._h, out._ptr, float(a), out._numel))
        return finish(out, s, lib.rill_op_add_f32(s._h, out._ptr, out._ptr, pb, -alpha,
                                                  out._numel))
    return out


def _mul32(a, b):
    """a * b elementwise on the current stream; a or b may be a number."""
    where = "rill.ops.mul"
    if is_scalar(a) and isinstance(b, TensorCore):
        a, b = b, a
    pa = _tensor_arg(a, where, "a")
    if is_scalar(b):
        s, out = _new(a._shape, where, a)
        if out._numel:
            return finish(out, s, lib.rill_op_map_f32(s._h, lib.RILL_MAP_SCALE, out._ptr, pa,
                                                      float(b), out._numel))
        return out
    pb = _tensor_arg(b, where, "b")
    _same_shape(a, b, where)
    s, out = _new(a._shape, where, a)
    if out._numel:
        return finish(out, s, lib.rill_op_mul_f32(s._h, out._ptr, pa, pb, out._numel))
    return out


def _matmul_same(a, b):
    """The matrix product of 2-D tensors a [m, k] and b [k, n] of one dtype
    (float32, or float16 with rill_op_matmul_f16), on the current stream."""
    where = "rill.ops.matmul"
    pa = _tensor_arg(a, where, "a")
    pb = _tensor_arg(b, where, "b")
    if len(a._shape) != 2 or len(b._shape) != 2 or a._shape[1] != b._shape[0]:
        raise ValueError(f"{where}: shapes {a._shape} and {b._shape} do not multiply; pass "
                         "2-D tensors [m, k] and [k, n]")
    (m, k), n = a._shape, b._shape[1]
    s, out = _new((m, n), where, a, a._dtype)
    if out._numel == 0:
        return out
    if k == 0:
        return _zeros(out, s)
    op = lib.rill_op_matmul_f16 if a._dtype is float16 else lib.rill_op_matmul_f32
    return finish(out, s, op(s._h, out._ptr, pa, pb, m, k, n))


def _sum_same(a):
    """The sum of all elements, a 0-d tensor of a's dtype (float16 with
    rill_op_sum_f16), on the current stream."""
    where = "rill.ops.sum"
    pa = _tensor_arg(a, where, "a")
    s, out = _new((), where, a, a._dtype)
    if a._numel == 0:
        return _zeros(out, s)
    op = lib.rill_op_sum_f16 if a._dtype is float16 else lib.rill_op_sum_f32
    return finish(out, s, op(s._h, out._ptr, pa, a._numel))


def _conv2d_same(input, weight):
    """2-D convolution of input [n, c, h, w] with weight [k, c, r, s] (NCHW,
    stride 1, no padding): [n, k, h-r+1, w-s+1], on the current stream."""
    where = "rill.ops.conv2d"
    pi = _tensor_arg(input, where, "input")
    pw = _tensor_arg(weight, where, "weight")
    if len(input._shape) != 4 or len(weight._shape) != 4:
        raise ValueError(f"{where}: input {input._shape} and weight {weight._shape} must be "
                         "4-D: [n, c, h, w] and [k, c, r, s]")
    n, c, h, w = input._shape
    k, c2, r, sz = weight._shape
    if c != c2 or r > h or sz > w or r == 0 or sz == 0:
        raise ValueError(f"{where}: input {input._shape} and weight {weight._shape} do not fit: "
                         "the channels must agree and the kernel fit inside the image")
    s, out = _new((n, k, h - r + 1, w - sz + 1), where, input, input._dtype)
    if out._numel == 0:
        return out
    if c == 0:
        return _zeros(out, s)
    op = lib.rill_op_conv2d_f16 if input._dtype is float16 else lib.rill_op_conv2d_f32
    return finish(out, s, op(s._h, out._ptr, pi, pw, n, c, h, w, k, r, sz))


def _via_float32(op32, where, *args, **kwargs):
    """op32 on args whose float16 tensors are converted to float32 first;
    the result is rounded back to float16 when every tensor was float16."""
    s = _stream.current()
    conv = []
    all_half = True
    for x in args:
        if isinstance(x, TensorCore):
            if x._dtype is float16:
                x = converted(x, float32, s, where)
            else:
                all_half = False
        conv.append(x)
    out = op32(*conv, **kwargs)
    return converted(out, float16, s, where) if all_half else out


def _has_half(a, b=None):
    return ((isinstance(a, TensorCore) and a._dtype is float16)
            or (isinstance(b, TensorCore) and b._dtype is float16))


def _mixed(*xs):
    """Whether the tensors among xs have both dtypes: then the float16 ones
    go through float32 (torch's promotion), else one dtype's op runs."""
    return len({x._dtype for x in xs if isinstance(x, TensorCore)}) > 1


def _half_op(kind, a, b, alpha, where):
    """kind ("add" or "mul") on float16 operands with rill's f16 ops, or None
    when they do not fit them (a float32 tensor among them, shapes that
    differ, a number first in a subtraction): the caller goes through float32."""
    if isinstance(a, TensorCore):
        t, other = a, b
    elif kind == "add" and alpha == 1 or kind == "mul":
        t, other = b, a
    else:
        return None
    if not (isinstance(t, TensorCore) and t._dtype is float16):
        return None
    if isinstance(other, TensorCore):
        if other._dtype is not float16 or other._shape != t._shape:
            return None
    elif not is_scalar(other):
        return None
    if not is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    pt = t._valid(where)
    s = _stream.current()
    out = type(t)._empty(t._shape, float16, s, where)
    if not out._numel:
        return out
    if isinstance(other, TensorCore):
        po = other._valid(where)
        if kind == "add":
            return finish(out, s, lib.rill_op_add_f16(s._h, out._ptr, pt, po, alpha, out._numel))
        return finish(out, s, lib.rill_op_mul_f16(s._h, out._ptr, pt, po, out._numel))
    if kind == "add":
        return finish(out, s, lib.rill_op_add_scalar_f16(s._h, out._ptr, pt,
                                                         float(other) * alpha, out._numel))
    return None  # tensor * number: through float32 (fill, then multiply)


def _needs_layout(a, b):
    """Whether a (op) b broadcasts or reads a view with strides: then
    rill_op_binary_f32 (or a gather first) computes it."""
    ta, tb = isinstance(a, TensorCore), isinstance(b, TensorCore)
    return ((ta and a._strides is not None) or (tb and b._strides is not None)
            or (ta and tb and a._shape != b._shape))


def _layout_binary(kind, a, b, alpha=1):
    if not is_scalar(alpha):
        raise TypeError(f"rill.ops.{kind}: alpha must be a number, not {type(alpha).__name__}")
    if alpha != 1:
        b = b * alpha if is_scalar(b) else binary("mul", b, alpha)
    if isinstance(a, TensorCore) and isinstance(b, TensorCore):
        return binary(kind, a, b)
    if isinstance(a, TensorCore):
        a = contiguous(a, f"rill.ops.{kind}")
    if isinstance(b, TensorCore):
        b = contiguous(b, f"rill.ops.{kind}")
    return {"add": add, "sub": sub, "mul": mul}[kind](a, b)


@on_operands_device("rill.ops.add")
def add(a, b, alpha=1):
    """a + alpha*b on the current stream; a or b may be a number, and two
    tensors broadcast."""
    if _needs_layout(a, b):
        return _layout_binary("add", a, b, alpha)
    if _has_half(a, b):
        out = _half_op("add", a, b, alpha, "rill.ops.add")
        if out is not None:
            return out
        return _via_float32(_add32, "rill.ops.add", a, b, alpha=alpha)
    return _add32(a, b, alpha)


@on_operands_device("rill.ops.sub")
def sub(a, b, alpha=1):
    """a - alpha*b on the current stream; a or b may be a number, and two
    tensors broadcast."""
    if _needs_layout(a, b):
        return _layout_binary("sub", a, b, alpha)
    if _has_half(a, b):
        if isinstance(a, TensorCore) and is_scalar(alpha):
            out = _half_op("add", a, b, -alpha, "rill.ops.sub")
            if out is not None:
                return out
        return _via_float32(_sub32, "rill.ops.sub", a, b, alpha=alpha)
    return _sub32(a, b, alpha)


@on_operands_device("rill.ops.mul")
def mul(a, b):
    """a * b elementwise on the current stream; a or b may be a number, and
    two tensors broadcast."""
    if _needs_layout(a, b):
        return _layout_binary("mul", a, b)
    if _has_half(a, b):
        out = _half_op("mul", a, b, 1, "rill.ops.mul")
        if out is not None:
            return out
        return _via_float32(_mul32, "rill.ops.mul", a, b)
    return _mul32(a, b)


# ---- broadcasting and maps
#
# The other element-wise ops, each one C op: two tensors of different
# shapes, or views with strides (rill_op_binary_f32 with its kinds, +
# - * / ** maximum minimum), and the maps of one tensor (rill_op_map_f32:
# activations, and / and ** with numbers). float16 goes through float32.

_BINARY = {"add": lib.RILL_BINARY_ADD, "sub": lib.RILL_BINARY_SUB, "mul": lib.RILL_BINARY_MUL,
           "div": lib.RILL_BINARY_DIV, "maximum": lib.RILL_BINARY_MAX,
           "minimum": lib.RILL_BINARY_MIN, "pow": lib.RILL_BINARY_POW}


def _as_f32(x, where):
    """x as a float32 tensor (views keep their strides) and whether it was
    float16."""
    if x._dtype is float32:
        return x, False
    if x._dtype is float16:
        if x._strides is not None:
            raise NotImplementedError(f"{where}: rill reads float16 views with strides through "
                                      "float32 only; convert first (t.float())")
        return converted(x, float32, _stream.current(), where), True
    _tensor_arg(x, where, "input")  # raises for int64
    return x, False


def _result(out, half):
    return converted(out, float16, _stream.current(), "rill") if half else out


@on_operands_device(lambda kind, *args, **kwargs: f"rill.ops.{kind}")
def binary(kind, a, b, where=None):
    """a (kind) b for two tensors, broadcast to one shape, or a tensor and a
    number, on the current stream."""
    where = where or f"rill.ops.{kind}"
    if not isinstance(a, TensorCore):
        if not is_scalar(a):
            raise TypeError(f"{where}: a must be a rill.Tensor or a number, "
                            f"not {type(a).__name__}")
        a = _scalar_like(a, b)
    if not isinstance(b, TensorCore):
        if not is_scalar(b):
            raise TypeError(f"{where}: b must be a rill.Tensor or a number, "
                            f"not {type(b).__name__}")
        return _with_number(kind, a, float(b), where)
    x, hx = _as_f32(a, where)
    y, hy = _as_f32(b, where)
    shape = broadcast_shape(x._shape, y._shape, where)
    s = _stream.current()
    out = type(a)._empty(shape, float32, s, where)
    if out._numel:
        nd = len(shape)
        sh = ffi.new("size_t[]", list(shape) or [1])
        xs = ffi.new("size_t[]", list(broadcast_strides(x, shape)) or [1])
        ys = ffi.new("size_t[]", list(broadcast_strides(y, shape)) or [1])
        finish(out, s, lib.rill_op_binary_f32(s._handle(where), _BINARY[kind], out._ptr,
                                              x._valid(where), xs, y._valid(where), ys, sh, nd))
    return _result(out, hx and hy)


def _scalar_like(value, t):
    """A one-element tensor of value, which broadcasts against t."""
    return filled((), float(value), float32, "rill", cls=type(t))


def _with_number(kind, a, value, where):
    if kind == "add":
        return add(a, value)
    if kind == "sub":
        return sub(a, value)
    if kind == "mul":
        return map_op(lib.RILL_MAP_SCALE, a, value, where)
    if kind == "div":
        return map_op(lib.RILL_MAP_DIV, a, value, where)
    if kind == "maximum":
        return map_op(lib.RILL_MAP_MAX, a, value, where)
    if kind == "minimum":
        return map_op(lib.RILL_MAP_MIN, a, value, where)
    return map_op(lib.RILL_MAP_POW, a, value, where)


@on_operands_device("rill.ops.map")
def map_op(op, a, alpha=0.0, where="rill.ops.map"):
    """op(a) element-wise (a rill_map_op with its number alpha), a new
    tensor like a on the current stream."""
    if not isinstance(a, TensorCore):
        raise TypeError(f"{where}: input must be a rill.Tensor, not {type(a).__name__}")
    x, half = _as_f32(a, where)
    x = contiguous(x, where)
    s = _stream.current()
    out = type(a)._empty(x._shape, float32, s, where)
    if out._numel:
        finish(out, s, lib.rill_op_map_f32(s._handle(where), op, out._ptr, x._valid(where),
                                           float(alpha), out._numel))
    return _result(out, half)


def rdiv(value, a, where="rill.ops.div"):
    return map_op(lib.RILL_MAP_RDIV, a, value, where)


def rsub(value, a, where="rill.ops.sub"):
    return map_op(lib.RILL_MAP_RSUB, a, value, where)


@on_operands_device("rill.ops.matmul")
def matmul(a, b):
    """The matrix product of 2-D tensors a [m, k] and b [k, n], on the
    current stream (views are gathered first)."""
    if (isinstance(a, TensorCore) and a._strides is not None) or \
            (isinstance(b, TensorCore) and b._strides is not None):
        a, b = contiguous(a, "rill.ops.matmul"), contiguous(b, "rill.ops.matmul")
    if _mixed(a, b):
        return _via_float32(_matmul_same, "rill.ops.matmul", a, b)
    return _matmul_same(a, b)


@on_operands_device("rill.ops.sum")
def sum(a):
    """The sum of all elements, a 0-d tensor, on the current stream."""
    return _sum_same(a)


@on_operands_device("rill.ops.conv2d")
def conv2d(input, weight):
    """2-D convolution of input [n, c, h, w] with weight [k, c, r, s] (NCHW,
    stride 1, no padding): [n, k, h-r+1, w-s+1], on the current stream."""
    if _mixed(input, weight):
        return _via_float32(_conv2d_same, "rill.ops.conv2d", input, weight)
    return _conv2d_same(input, weight)


@on_operands_device("rill.Tensor.add_")
def add_(t, other, alpha=1):
    """t += alpha*other in place, on the current stream; returns t."""
    where = "rill.Tensor.add_"
    pt = _tensor_arg(t, where, "self")
    if not is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    if not _operand(other):
        raise TypeError(f"{where}: other must be a rill.Tensor or a number, "
                        f"not {type(other).__name__}")
    if isinstance(other, TensorCore):
        _tensor_arg(other, where, "other")
        _same_shape(t, other, where)
    if t._dtype is float16:
        s = _stream.current()
        if not t._numel:
            return t
        if not isinstance(other, TensorCore):
            return finish(t, s, lib.rill_op_add_scalar_f16(s._h, pt, pt, float(other) * alpha,
                                                           t._numel))
        if other._dtype is float16:
            return finish(t, s, lib.rill_op_add_f16(s._h, pt, pt, other._ptr, alpha, t._numel))
        result = _via_float32(_add32, where, converted(t, float32, s, where), other,
                              alpha=alpha)
        return finish(t, s, lib.rill_op_cast_f32_f16(s._h, pt, result._ptr, t._numel))
    if not t._numel:
        return t
    s = _stream.current()
    if isinstance(other, TensorCore):
        if other._dtype is float16:
            other = converted(other, float32, s, where)
        return finish(t, s, lib.rill_op_add_f32(s._h, pt, pt, other._ptr, alpha, t._numel))
    return finish(t, s, lib.rill_op_add_scalar_f32(s._h, pt, pt, float(other) * alpha,
                                                   t._numel))


@on_operands_device("rill.Tensor.to")
def to_dtype(t, dt, where="rill.Tensor.to"):
    """t as dtype dt: t itself when it has that dtype, else a converted copy
    on the current stream (of an int64 tensor, through the host)."""
    if not isinstance(t, TensorCore):
        raise TypeError(f"{where}: self must be a rill.Tensor, not {type(t).__name__}")
    dt = dtype_arg(dt, where)
    if dt is None or dt is t._dtype:
        return t
    if t._dtype is int64:
        return type(t)(t.numpy().astype(dt.numpy), dt)
    if t._strides is not None:
        t = contiguous(t, where)
    _tensor_arg(t, where, "self")
    return converted(t, dt, _stream.current(), where)

