# SPDX-License-Identifier: MIT
"""Views: tensors that show another tensor's memory, as torch's views do.

A view has its base (the tensor that owns the memory, kept alive by the
view), a pointer into the base's memory, a shape, and strides in elements
(None when it is contiguous; _tensor's contiguous() gathers the others).
reshape and view of a contiguous tensor, slicing and indexing with ints,
slices, None and ..., transpose, permute, t(), unsqueeze, squeeze, flatten
and expand give views; writes through a view (x[i] = v, in-place ops)
change the base. cat and stack write their inputs into slices of the
output. ViewMethods are rill.Tensor's view methods."""

import numbers
import operator

from . import _stream
from ._core import TensorCore, build, is_scalar, new
from ._dtype import float32, numel
from ._errors import check
from ._ffi import ffi, lib
from ._guard import on_operands_device
from ._layout import (broadcast_shape, broadcast_strides, contiguous, contiguous_strides,
                      copy_strided, f32_only, strides_of, to_device)
from ._makers import filled
from ._ops import to_dtype


def _is_contiguous(shape, strides):
    return all(st == c for d, st, c in zip(shape, strides, contiguous_strides(shape))
               if d != 1)


def make_view(t, shape, strides, offset, where, strided=False):
    """A tensor of t's class that shows t's memory from element offset with
    shape and strides (kept when strided, else only when they are not
    contiguous)."""
    ptr = t._valid(where)
    base = t._base if t._base is not None else t
    cls = getattr(type(t), "_view_class", None) or type(t)  # a Parameter's views are tensors
    return build(new(cls), ffi.cast("void *", ffi.cast("char *", ptr) + offset * t._dtype.itemsize),
                 tuple(shape), numel(shape), t._dtype, t._stream, None, t._gen, None, base,
                 tuple(strides) if strided or not _is_contiguous(shape, strides) else None)


def _dim(d, ndim, where):
    try:
        d = operator.index(d)
    except TypeError:
        raise TypeError(f"{where}: dim must be an int, not {type(d).__name__}") from None
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError(f"{where}: dimension {d} is out of range for a tensor of {ndim} "
                         f"dimensions (expected in [{-max(ndim, 1)}, {max(ndim, 1) - 1}])")
    return d % max(ndim, 1)


def _with_minus_one(shape, where):
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = tuple(shape[0])
    return tuple(operator.index(d) for d in shape)


def _resolve(t, shape, where):
    shape = list(_with_minus_one(shape, where))
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in shape):
        raise RuntimeError(f"{where}: shape {tuple(shape)} is invalid: only one dimension can "
                           "be inferred (-1), and none may be below -1")
    known = numel([d for d in shape if d != -1])
    if unknown:
        if known == 0 or t._numel % known:
            raise RuntimeError(f"{where}: shape {tuple(shape)} is invalid for input of size "
                               f"{t._numel}")
        shape[unknown[0]] = t._numel // known
    if numel(shape) != t._numel:
        raise RuntimeError(f"{where}: shape {tuple(shape)} is invalid for input of size "
                           f"{t._numel}")
    return tuple(shape)


def reshape(t, *shape, where="rill.Tensor.reshape"):
    """A view of t with shape (-1 inferred) when t is contiguous, else a
    contiguous copy so shaped, as torch's reshape."""
    shape = _resolve(t, shape, where)
    t = contiguous(t, where)
    return make_view(t, shape, contiguous_strides(shape), 0, where)


def view(t, *shape, where="rill.Tensor.view"):
    """A view of t with shape (-1 inferred); t must be contiguous."""
    shape = _resolve(t, shape, where)
    if t._strides is not None:
        raise RuntimeError(f"{where}: view size is not compatible with input tensor's size and "
                           "stride (the tensor is a view with strides); use .reshape(...) "
                           "instead")
    return make_view(t, shape, contiguous_strides(shape), 0, where)


def _offset_of(t):
    """The element offset of t's pointer from its base's."""
    if t._base is None:
        return 0
    diff = int(ffi.cast("uintptr_t", t._valid("rill.Tensor")))
    diff -= int(ffi.cast("uintptr_t", t._base._valid("rill.Tensor")))
    return diff // t._dtype.itemsize


def _restrided(t, shape, strides, where, strided=False):
    base = t._base if t._base is not None else t
    return make_view(base, shape, strides, _offset_of(t), where, strided)


def transpose(t, dim0, dim1, where="rill.Tensor.transpose"):
    nd = len(t._shape)
    d0, d1 = _dim(dim0, nd, where), _dim(dim1, nd, where)
    if nd < 2:
        return t
    shape, strides = list(t._shape), list(strides_of(t))
    shape[d0], shape[d1] = shape[d1], shape[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return _restrided(t, shape, strides, where)


def permute(t, *dims, where="rill.Tensor.permute"):
    if len(dims) == 1 and not isinstance(dims[0], numbers.Integral):
        dims = tuple(dims[0])
    nd = len(t._shape)
    dims = [_dim(d, nd, where) for d in dims]
    if sorted(dims) != list(range(nd)):
        raise RuntimeError(f"{where}: dims {tuple(dims)} are not a permutation of the tensor's "
                           f"{nd} dimensions")
    st = strides_of(t)
    return _restrided(t, [t._shape[d] for d in dims], [st[d] for d in dims], where)


def unsqueeze(t, dim, where="rill.Tensor.unsqueeze"):
    nd = len(t._shape)
    d = _dim(dim, nd + 1, where)
    shape, strides = list(t._shape), list(strides_of(t))
    shape.insert(d, 1)
    strides.insert(d, strides[d] * shape[d + 1] if d < nd else 1)
    return _restrided(t, shape, strides, where)


def squeeze(t, dim=None, where="rill.Tensor.squeeze"):
    shape, strides = list(t._shape), list(strides_of(t))
    if dim is None:
        keep = [i for i, d in enumerate(shape) if d != 1]
    else:
        d = _dim(dim, len(shape), where)
        keep = [i for i in range(len(shape)) if i != d or shape[i] != 1]
    return _restrided(t, [shape[i] for i in keep], [strides[i] for i in keep], where)


def flatten(t, start_dim=0, end_dim=-1, where="rill.Tensor.flatten"):
    nd = len(t._shape)
    if nd == 0:
        return reshape(t, 1, where=where)
    a, b = _dim(start_dim, nd, where), _dim(end_dim, nd, where)
    if a > b:
        raise RuntimeError(f"{where}: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = t._shape[:a] + (numel(t._shape[a:b + 1]),) + t._shape[b + 1:]
    return reshape(t, shape, where=where)


def expand(t, *sizes, where="rill.Tensor.expand"):
    """A view of t repeated along its dimensions of 1 (stride 0) to sizes,
    -1 keeping a dimension."""
    if len(sizes) == 1 and not isinstance(sizes[0], numbers.Integral):
        sizes = tuple(sizes[0])
    sizes = tuple(operator.index(d) for d in sizes)
    nd, new = len(t._shape), len(sizes)
    if new < nd:
        raise RuntimeError(f"{where}: sizes {sizes} have fewer dimensions than the tensor's "
                           f"shape {t._shape}")
    shape, strides = [], []
    old_strides = strides_of(t)
    for i, size in enumerate(sizes):
        j = i - (new - nd)
        have = t._shape[j] if j >= 0 else 1
        stride = old_strides[j] if j >= 0 else 0
        if size == -1:
            if j < 0:
                raise RuntimeError(f"{where}: -1 is not allowed for a new leading dimension")
            size = have
        if have != size:
            if have != 1:
                raise RuntimeError(f"{where}: the expanded size {size} must match the existing "
                                   f"size {have} at dimension {i}, which is not 1")
            stride = 0
        shape.append(size)
        strides.append(stride)
    return broadcast_view(t, shape, strides, where)


def broadcast_view(t, shape, strides, where):
    """A read-only view with strides that may be 0 (broadcasting)."""
    return _restrided(t, shape, strides, where,
                      any(s == 0 for d, s in zip(shape, strides) if d > 1))


# ---- indexing

def _index_view(t, index, where):
    if not isinstance(index, tuple):
        index = (index,)
    for i in index:
        if not (i is None or i is Ellipsis or isinstance(i, (slice, numbers.Integral))) or \
                isinstance(i, bool):
            raise NotImplementedError(
                f"{where}: indexing with {type(i).__name__} (advanced indexing) is not provided "
                "by rill; use ints, slices, None and ..., or move the tensor to PyTorch with "
                "torch.from_dlpack(t) and index it there")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError(f"{where}: an index can only have a single ellipsis ('...')")
    if used > len(t._shape):
        raise IndexError(f"{where}: too many indices for a tensor of dimension "
                         f"{len(t._shape)}")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(t._shape) - used) + index[at + 1:]
    else:
        index = index + (slice(None),) * (len(t._shape) - used)
    shape, strides, offset, d = [], [], _offset_of(t), 0
    old = strides_of(t)
    for i in index:
        if i is None:
            shape.append(1)
            strides.append(0)
            continue
        size, stride = t._shape[d], old[d]
        d += 1
        if isinstance(i, slice):
            if i.step is not None and operator.index(i.step) <= 0:
                raise ValueError(f"{where}: step must be greater than zero")
            start, stop, step = i.indices(size)
            length = max(0, (stop - start + step - 1) // step)
            offset += start * stride if length else 0
            shape.append(length)
            strides.append(stride * step)
        else:
            k = operator.index(i)
            if not -size <= k < size:
                raise IndexError(f"{where}: index {k} is out of bounds for dimension {d - 1} "
                                 f"with size {size}")
            offset += (k % size) * stride
    base = t._base if t._base is not None else t
    return make_view(base, shape, strides, offset, where)


def getitem(t, index):
    return _index_view(t, index, "rill.Tensor.__getitem__")


def copy_into(dst, src, where):
    """Writes src (a tensor broadcast to dst's shape, or a number) into dst,
    a tensor or a view, on the current stream of dst's device; a tensor
    src of another device is copied there first, after its writes."""
    if isinstance(src, TensorCore) and src._stream._dev != dst._stream._dev:
        src = to_device(src, dst._stream.device, where)
    _copy_into(dst, src, where)


@on_operands_device("rill.Tensor.__setitem__")
def _copy_into(dst, src, where):
    if dst._numel == 0:
        return
    f32_only(dst, where)
    if not isinstance(src, TensorCore):
        if not is_scalar(src):
            raise TypeError(f"{where}: the value must be a tensor or a number, "
                            f"not {type(src).__name__}")
        s = _stream.current()
        if dst._strides is None:
            check(lib.rill_op_fill_f32(s._handle(where), dst._valid(where), float(src),
                                       dst._numel))
            dst._written(s)
            return
        one = filled((1,), float(src), float32, where, type(dst))
        copy_strided(dst, dst._strides, one, (0,) * len(dst._shape), dst._shape, where)
        return
    if src._dtype is not float32:
        src = to_dtype(contiguous(src, where), float32, where)
    shape = broadcast_shape(dst._shape, src._shape, where)
    if shape != dst._shape:
        raise RuntimeError(f"{where}: a tensor of shape {src._shape} cannot be written into "
                           f"one of shape {dst._shape}")
    if _shares_memory(dst, src):
        src = TensorCore._copy(contiguous(src, where), _stream.current())
    copy_strided(dst, strides_of(dst), src, broadcast_strides(src, shape), shape, where)


def _shares_memory(a, b):
    return (a._base if a._base is not None else a) is (b._base if b._base is not None else b)


def setitem(t, index, value):
    where = "rill.Tensor.__setitem__"
    copy_into(_index_view(t, index, where), value, where)


# ---- cat and stack

@on_operands_device("rill.cat")
def cat(tensors, dim=0, where="rill.cat"):
    """The tensors joined along dim (of one dtype, float32; the other
    dimensions equal), on the current stream."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{where}: expected a non-empty list of tensors")
    for x in tensors:
        if not isinstance(x, TensorCore):
            raise TypeError(f"{where}: expected tensors, got {type(x).__name__}")
    first = tensors[0]
    nd = len(first._shape)
    d = _dim(dim, nd, where)
    for x in tensors:
        if len(x._shape) != nd or any(x._shape[i] != first._shape[i]
                                      for i in range(nd) if i != d):
            raise RuntimeError(f"{where}: sizes of tensors must match except in dimension {d}: "
                               f"{first._shape} and {x._shape}")
    shape = list(first._shape)
    shape[d] = sum(x._shape[d] for x in tensors)
    out = type(first)._empty(tuple(shape), float32, _stream.current(), where)
    at = 0
    for x in tensors:
        if x._shape[d]:
            index = (slice(None),) * d + (slice(at, at + x._shape[d]),)
            copy_into(_index_view(out, index, where), x, where)
        at += x._shape[d]
    return out


def stack(tensors, dim=0, where="rill.stack"):
    """The tensors (of one shape) joined along a new dimension dim."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{where}: expected a non-empty list of tensors")
    nd = len(tensors[0]._shape) + 1
    d = _dim(dim, nd, where)
    for x in tensors:
        if x._shape != tensors[0]._shape:
            raise RuntimeError(f"{where}: stack expects each tensor to be equal size, but got "
                               f"{tensors[0]._shape} and {x._shape}")
    return cat([unsqueeze(x, d, where) for x in tensors], d, where)


# ---- rill.Tensor's view methods

class ViewMethods:
    """The methods of rill.Tensor that make views (a base class of
    rill.Tensor)."""

    __slots__ = ()

    def __getitem__(self, index):
        return getitem(self, index)

    def __setitem__(self, index, value):
        setitem(self, index, value)

    def __iter__(self):
        """The sub-tensors along the first dimension (views)."""
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def reshape(self, *shape):
        """A view with shape (-1 inferred) when contiguous, else a copy."""
        return reshape(self, *shape)

    def view(self, *shape):
        """A view with shape (-1 inferred) of a contiguous tensor."""
        return view(self, *shape)

    def transpose(self, dim0, dim1):
        """A view with dimensions dim0 and dim1 swapped."""
        return transpose(self, dim0, dim1)

    def permute(self, *dims):
        """A view with the dimensions in the order dims."""
        return permute(self, *dims)

    def t(self):
        """transpose(0, 1) of a tensor of at most 2 dimensions."""
        if self.ndim > 2:
            raise RuntimeError(f"rill.Tensor.t: the tensor has {self.ndim} dimensions; t() "
                               "expects at most 2 (use transpose(dim0, dim1))")
        return self.transpose(0, 1) if self.ndim == 2 else self

    @property
    def T(self):
        """The dimensions reversed (a view)."""
        return self.permute(*reversed(range(self.ndim)))

    def unsqueeze(self, dim):
        return unsqueeze(self, dim)

    def squeeze(self, dim=None):
        return squeeze(self, dim)

    def flatten(self, start_dim=0, end_dim=-1):
        return flatten(self, start_dim, end_dim)

    def expand(self, *sizes):
        """A view repeated along its dimensions of 1 (no copy)."""
        return expand(self, *sizes)

