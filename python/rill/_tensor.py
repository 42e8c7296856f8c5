# SPDX-License-Identifier: MIT
"""rill.Tensor, whole here: device memory with a shape and a dtype, and
the ops on the current stream of its device. Memory is
rill_malloc_async'd on the tensor's stream and freed in stream order when
it is garbage-collected; each op that writes a tensor records the tensor's
event, which numpy() waits for. float16 tensors store halves and compute
in float32, each result rounded once (docs/python.md).

The class is put together from the modules below it, by concept:
rill._core (fields, memory, events), rill._views (views), rill._math
(along dimensions), rill._ops (the ops' general path) and rill._fastpath
(the element-wise fast path); here are its own methods and the public
makers (rill.ones, zeros, empty, full, randn, from_numpy)."""

import numpy as np

from . import _device, _makers, _stream, _wait
from ._core import TensorCore, allocate, build, is_scalar
from ._dtype import DTYPES, dtype_arg, float16, float32, shape_arg
from ._errors import check
from ._fastpath import Operators
from ._ffi import fast, ffi, lib
from ._guard import on_device, on_operands_device
from ._layout import contiguous, strides_of, to_device
from ._math import MathMethods
from ._ops import _no_array, _operand, add_, binary, matmul, rdiv, to_dtype
from ._runtime import life
from ._views import ViewMethods

# The operators of the Python form of the fields (the C form has them).
_OPERATORS = () if fast is not None else (Operators,)


class Tensor(ViewMethods, MathMethods, *_OPERATORS, TensorCore):
    """A tensor in device memory.

    Tensor(data, dtype=None, device=None): a copy of data (a numpy array, a
    sequence or a number) on the current stream of device (None: the
    current device; else as rill.device takes it, "cuda:0" say); dtype
    rill.float32 or rill.float16 converts, None keeps float32 and float16
    data as they are. rill.ones/zeros/empty/full/randn make others; + - * @
    and rill.ops run on the current stream of their tensors' device (tensors
    on two devices: DeviceMismatchError); t.to(device) copies to another
    device.

    Its methods are those below and those of its bases: ViewMethods
    (rill._views), MathMethods (rill._math), TensorCore (rill._core: the
    fields and the memory) and, in the Python form of the fields,
    Operators (rill._fastpath: + - * and -a; else _rill_fast's C slots).
    """

    __slots__ = ()

    def __init__(self, data, dtype=None, device=None):
        self._ptr = None
        if device is not None:
            with on_device(device, "rill.Tensor"):
                self.__init__(data, dtype)
            return
        where = "rill.Tensor"
        dt = dtype_arg(dtype, where)
        if isinstance(data, Tensor):
            arr = data.numpy()
        else:
            arr = np.asarray(data)
        if dt is None:
            dt = DTYPES.get(arr.dtype)
            if dt is None:
                raise TypeError(f"{where}: data of dtype {arr.dtype} is not supported; pass "
                                "dtype=rill.float32 or rill.float16 to convert it")
        arr = np.asarray(arr, dtype=dt.numpy, order="C")  # keeps 0-d arrays 0-d
        s = _stream.current()
        ptr, n, owner = allocate(arr.shape, dt, s, where)
        build(self, ptr, arr.shape, n, dt, s, owner=owner)
        if self._numel:
            # rill_memcpy comes after the current stream's work: waited for
            # here first, so that Ctrl-C can interrupt the wait.
            check(_wait.stream(s._h))
            check(lib.rill_memcpy(self._ptr, ffi.from_buffer(arr), arr.nbytes))

    # ---- what it is

    @property
    def shape(self):
        """The dimensions, a tuple of ints."""
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return len(self._shape)

    def numel(self):
        """The number of elements."""
        return self._numel

    @property
    def size(self):
        return self._numel

    @property
    def nbytes(self):
        return self._numel * self._dtype.itemsize

    @property
    def stream(self):
        """The stream the tensor's memory belongs to (where it is freed)."""
        return self._stream

    @property
    def device(self):
        return self._stream.device

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d rill.Tensor")
        return self._shape[0]

    # ---- to the host

    def numpy(self):
        """A numpy copy, once the work that writes the tensor is done: waits
        for the tensor's event (KernelFailedError if that work failed), and
        copies after the current stream's work, as rill_memcpy does. Ctrl-C
        raises KeyboardInterrupt out of the wait (on the main thread); the
        work runs on."""
        where = "rill.Tensor.numpy"
        ptr = self._valid(where)
        if self._strides is not None:  # a view with strides: gathered first
            return contiguous(self).numpy()
        arr = np.empty(self._shape, dtype=self._dtype.numpy)
        if self._base is not None and self._base._event is not None:
            check(_wait.event(self._base._event))  # writes to the memory through the base
        if self._event is not None:
            check(_wait.event(self._event))
        if self._numel:
            check(_wait.stream(lib.rill_current_stream(ffi.NULL)))  # what rill_memcpy waits for
            check(lib.rill_memcpy(ffi.from_buffer(arr), ptr, arr.nbytes))
        return arr

    def __array__(self, dtype=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def item(self):
        """The value of a one-element tensor, as a Python float."""
        if self._numel != 1:
            raise ValueError(f"rill.Tensor.item: the tensor has {self._numel} elements, not 1")
        return self.numpy().item()

    def __float__(self):
        return float(self.item())

    # ---- truth and comparison, as torch's tensors on a device

    def __bool__(self):
        """The truth of a one-element tensor's value; RuntimeError for any
        other tensor, as torch raises (an empty or a longer tensor has no
        single truth)."""
        if self._numel != 1:
            what = "no values" if self._numel == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self.item())

    def __eq__(self, other):
        return _no_comparison(self, other, "==")

    def __ne__(self, other):
        return _no_comparison(self, other, "!=")

    __hash__ = object.__hash__  # by identity, as torch hashes tensors

    # numpy defers its operators to the tensor's (which refuse arrays with
    # a sentence), instead of converting the tensor to an array.
    __array_ufunc__ = None

    def __str__(self):
        return str(self.numpy())

    def __repr__(self):
        if self._gen != life.generation:
            return f"rill.Tensor(<released>, shape={self._shape}, dtype={self._dtype})"
        return f"rill.Tensor({self.numpy()!r}, shape={self._shape}, dtype={self._dtype})"

    # ---- copies

    @on_operands_device("rill.Tensor.__copy__")
    def __copy__(self):
        """A copy made on the current stream of the tensor's device
        (copy.copy, copy.deepcopy): a tensor owns its memory, and no two
        tensors share it."""
        return self._copy(_stream.current())

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce__(self):
        """Pickled by value: numpy() and the dtype."""
        return (type(self), (self.numpy(), self._dtype))

    # ---- DLPack

    def __dlpack__(self, stream=None):
        """A DLPack capsule of the tensor's memory, for numpy.from_dlpack and
        torch.from_dlpack: no copy. Waits for the work that writes the tensor
        first; later writes by rill's ops show through it, in their stream's
        order. The memory stays allocated while the consumer holds it, and
        rill.shutdown() refuses to release it meanwhile (NotPermittedError)."""
        from . import _dlpack
        return _dlpack.export(self, stream, "rill.Tensor.__dlpack__")

    def __dlpack_device__(self):
        """(kDLCPU, 0) on a CPU device, whose memory is host memory;
        (kDLCUDA, N) on cuda:N."""
        from . import _dlpack
        return _dlpack.device_of(self)

    # ---- streams

    def record_stream(self, stream):
        """Marks the memory as used by all work submitted to stream until the
        tensor is freed: needed only for uses rill cannot see (host
        functions); the ops declare theirs."""
        where = "rill.Tensor.record_stream"
        if not isinstance(stream, _stream.Stream):
            raise TypeError(f"{where}: stream must be a rill.Stream, not {type(stream).__name__}")
        check(lib.rill_record_stream(self._valid(where), stream._handle(where)))

    # ---- arithmetic on the current stream

    # + - * and their reflections, and -a: TensorBase's C slots, or
    # Operators' methods (rill._fastpath; their general path is rill._ops'
    # add, sub, mul and neg).

    def __matmul__(self, other):
        if isinstance(other, np.ndarray):
            _no_array(other)
        return matmul(self, other) if isinstance(other, Tensor) else NotImplemented

    def __rmatmul__(self, other):
        if isinstance(other, np.ndarray):
            _no_array(other)
        return NotImplemented

    def __truediv__(self, other):
        return binary("div", self, other) if _operand(other) else NotImplemented

    def __rtruediv__(self, other):
        return rdiv(float(other), self) if is_scalar(other) else NotImplemented

    def __pow__(self, other):
        return binary("pow", self, other) if _operand(other) else NotImplemented

    def add_(self, other, alpha=1):
        """self += alpha*other in place on the current stream; returns self."""
        return add_(self, other, alpha)

    def to(self, *args, dtype=None, device=None):
        """t.to(dtype), t.to(device), t.to(device, dtype): this tensor itself
        when it is on device with dtype already; else a copy on device's
        current stream (after the work that writes this tensor) and/or
        converted there. device as rill.device takes it ("cuda:0", "cpu")."""
        where = "rill.Tensor.to"
        for a in args:
            if _names_device(a):
                device = a
            else:
                dtype = a
        t = self
        target = _device.device(device) if device is not None else None
        if target is not None and t._stream.device is not target:
            t = to_device(t, target, where)
        with on_device(target, where):
            return to_dtype(t, dtype, where)

    def half(self):
        """to(rill.float16)."""
        return to_dtype(self, float16, "rill.Tensor.half")

    def float(self):
        """to(rill.float32)."""
        return to_dtype(self, float32, "rill.Tensor.float")

    # ---- layout: a view shares its base's memory, with strides

    def contiguous(self):
        """Itself when contiguous, else a contiguous copy."""
        return contiguous(self)

    def is_contiguous(self):
        return self._strides is None

    def stride(self, dim=None):
        """The strides in elements (or dimension dim's)."""
        st = strides_of(self)
        return st if dim is None else st[dim]


def _no_comparison(a, b, op):
    """a == b and a != b: torch compares element-wise into a bool tensor,
    which rill has no dtype and op for; rather than compare identities in
    silence, say so. Other objects are never equal to a tensor."""
    if not (isinstance(b, (Tensor, np.ndarray)) or is_scalar(b)):
        return NotImplemented
    raise TypeError(f"rill.Tensor {op}: rill has no element-wise comparison on the device "
                    "(torch's gives a bool tensor); compare on the host (a.numpy() "
                    f"{op} b.numpy()), or test identity with 'is'")


def _names_device(x):
    """Whether an argument of Tensor.to names a device, not a dtype."""
    if isinstance(x, str):
        return x.partition(":")[0] in ("cuda", "cpu")
    return isinstance(x, _device.Device) or (isinstance(x, int) and not isinstance(x, bool))


# ---- the makers

manual_seed = _makers.manual_seed


def randn(*shape, dtype=None, device=None, cls=Tensor, where="rill.randn"):
    """A tensor of standard normal samples (float32, or float16 rounded from
    them), filled on the current stream by rill_op_randn_f32 (device's, when
    given: as rill.device takes it)."""
    return _makers.randn(shape, dtype, device, cls, where)


def full(shape, value, dtype=None, device=None):
    """A tensor of shape filled with value, on the current stream (device's,
    when given)."""
    with on_device(device, "rill.full"):
        return _makers.filled(shape, value, dtype, "rill.full", Tensor)


def ones(*shape, dtype=None, device=None):
    """A tensor of ones: rill.ones(2, 3) or rill.ones((2, 3)), on the
    current stream (device's, when given)."""
    if device is not None:
        with on_device(device, "rill.ones"):
            return ones(*shape, dtype=dtype)
    if fast is not None and (dtype is None or dtype is float32):
        t = fast.new(Tensor, shape[0] if len(shape) == 1 and shape[0].__class__ is tuple
                     else shape, 1.0)  # None: the general path below
        if t is not None:
            return t
    return _makers.filled(shape_arg(shape, "rill.ones"), 1.0, dtype, "rill.ones", Tensor)


def zeros(*shape, dtype=None, device=None):
    """A tensor of zeros: rill.zeros(2, 3) or rill.zeros((2, 3)), on the
    current stream (device's, when given)."""
    if device is not None:
        with on_device(device, "rill.zeros"):
            return zeros(*shape, dtype=dtype)
    if fast is not None and (dtype is None or dtype is float32):
        t = fast.new(Tensor, shape[0] if len(shape) == 1 and shape[0].__class__ is tuple
                     else shape, 0.0)  # None: the general path below
        if t is not None:
            return t
    return _makers.filled(shape_arg(shape, "rill.zeros"), 0.0, dtype, "rill.zeros", Tensor)


def empty(*shape, dtype=None, device=None):
    """A tensor whose values are whatever the memory held, on the current
    stream (device's, when given)."""
    where = "rill.empty"
    if device is not None:
        with on_device(device, where):
            return empty(*shape, dtype=dtype)
    if fast is not None and (dtype is None or dtype is float32):
        t = fast.new(Tensor, shape[0] if len(shape) == 1 and shape[0].__class__ is tuple
                     else shape, None)  # None: the general path below
        if t is not None:
            return t
    dt = dtype_arg(dtype, where) or float32
    return Tensor._empty(shape_arg(shape, where), dt, _stream.current(), where)


def from_numpy(array):
    """A tensor copied from a numpy array of float32 or float16."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"rill.from_numpy: array must be a numpy.ndarray, "
                        f"not {type(array).__name__}")
    return Tensor(array)
