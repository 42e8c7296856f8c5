# SPDX-License-Identifier: MIT
"""Tensors: device memory with a shape and a dtype, and the element-wise
ops, matmul, sum and conv2d on the current stream of their tensors'
device (which the op makes current meanwhile). Memory is
rill_malloc_async'd on the tensor's stream and freed in stream order when
it is garbage-collected; each op that writes a tensor records the tensor's
event, which numpy() waits for. float16 tensors store halves and compute
in float32, each result rounded once (docs/python.md). _views and then
_math build on this module and add their methods to Tensor."""

import functools
import numbers
import operator
import threading
import types

import numpy as np

from . import _device, _graph, _stream, _wait
from ._errors import DeviceMismatchError, check
from ._ffi import fast, ffi, lib
from ._runtime import life, on_shutdown, stale_error


class dtype:
    """A tensor element type: rill.float32, or rill.float16 (storage; the ops
    compute in float32)."""

    __slots__ = ("name", "itemsize", "numpy")

    def __init__(self, name, itemsize, numpy_type):
        self.name = name
        self.itemsize = itemsize
        self.numpy = np.dtype(numpy_type)

    def __repr__(self):
        return f"rill.{self.name}"

    def __reduce__(self):
        return self.name  # pickled as the module's rill.float32 or rill.float16


float32 = dtype("float32", 4, np.float32)
float16 = dtype("float16", 2, np.float16)
# The positions that max and min along a dimension give: storage only (no
# op computes on them; numpy(), item() and tolist() read them).
int64 = dtype("int64", 8, np.int64)
_DTYPES = {"float32": float32, np.dtype(np.float32): float32,
           "float16": float16, np.dtype(np.float16): float16}


def _dtype_arg(value, where):
    if value is None or value is float32 or value is float16:
        return value
    if isinstance(value, dtype) and value.name == "float64":
        return float32  # torch.float64 of rill.compat.torch: float64 data becomes float32
    try:
        found = _DTYPES.get(value if isinstance(value, str) else np.dtype(value))
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"{where}: dtype must be rill.float32 or rill.float16, not {value!r}")
    return found


def _shape_arg(shape, where):
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = shape[0]
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{where}: shape must be ints or a sequence of ints, "
                        f"not {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{where}: shape {shape} has a negative dimension")
    return shape


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ---- the device guard
#
# An op runs on its tensor operands' device, on that device's current
# stream, whatever the calling thread's current device, as PyTorch's device
# guard runs it: so it comes after the work of that stream that wrote them,
# and its output is on their device. Operands on two devices are refused.

def _operands_device(args):
    """The device (rill_device *) of the tensors among args (and in the
    lists and tuples among them: cat's), or None; and a second device when
    there are tensors on two (else None)."""
    dev = None
    for a in args:
        if isinstance(a, Tensor):
            d = a._stream._dev
        elif a.__class__ is list or a.__class__ is tuple:
            d, other = _operands_device(a)
            if other is not None:
                return d, other
        else:
            continue
        if d is None or d == dev:
            continue
        if dev is not None:
            return dev, d
        dev = d
    return dev, None


def _has_stale(args):
    """Whether a tensor among args (or in a list or tuple among them) is of
    a runtime that rill.shutdown() released."""
    for a in args:
        if isinstance(a, Tensor):
            if a._gen != life.generation:
                return True
        elif (a.__class__ is list or a.__class__ is tuple) and _has_stale(a):
            return True
    return False


def on_operands_device(where):
    """Decorator: the op runs with its tensor operands' device current (see
    above); DeviceMismatchError for operands on two devices, naming the op:
    where, a str or a function of the op's arguments that makes one (a
    where= argument of the call instead, when given)."""
    def wrap(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            operands = (*args, *kwargs.values()) if kwargs else args
            dev, other = _operands_device(operands)
            if dev is None or (other is None and dev == _stream.current()._dev):
                return fn(*args, **kwargs)
            if _has_stale(operands):
                return fn(*args, **kwargs)  # it raises the error of an old runtime's tensor
            if other is not None:
                name = kwargs.get("where") or (where if isinstance(where, str)
                                               else where(*args, **kwargs))
                raise DeviceMismatchError(
                    f"{name}: Expected all tensors to be on the same device, but found at "
                    f"least two devices, {_device.Device._wrap(dev)} and "
                    f"{_device.Device._wrap(other)}! Copy them to one device first "
                    "(t.to(device))")
            with _on_device(_device.Device._wrap(dev), fn.__name__):
                return fn(*args, **kwargs)
        return op
    return wrap


class _Fields:
    """rill.Tensor's fields, in Python: the package's form where the build
    did not compile _rill_fast, whose TensorBase holds them in C (with the
    element-wise fast path and the release of the memory)."""

    __slots__ = ("_ptr", "_shape", "_numel", "_dtype", "_stream", "_event", "_gen", "_owner",
                 "_base", "_strides", "__weakref__")

    # __del__ is _release, set after it.


class Tensor(fast.TensorBase if fast is not None else _Fields):
    """A tensor in device memory.

    Tensor(data, dtype=None, device=None): a copy of data (a numpy array, a
    sequence or a number) on the current stream of device (None: the
    current device; else as rill.device takes it, "cuda:0" say); dtype
    rill.float32 or rill.float16 converts, None keeps float32 and float16
    data as they are. rill.ones/zeros/empty/full/randn make others; + - * @
    and rill.ops run on the current stream of their tensors' device (tensors
    on two devices: DeviceMismatchError); t.to(device) copies to another
    device.
    """

    __slots__ = ()

    def __init__(self, data, dtype=None, device=None):
        self._ptr = None
        if device is not None:
            with _on_device(device, "rill.Tensor"):
                self.__init__(data, dtype)
            return
        where = "rill.Tensor"
        dt = _dtype_arg(dtype, where)
        if isinstance(data, Tensor):
            arr = data.numpy()
        else:
            arr = np.asarray(data)
        if dt is None:
            dt = _DTYPES.get(arr.dtype)
            if dt is None:
                raise TypeError(f"{where}: data of dtype {arr.dtype} is not supported; pass "
                                "dtype=rill.float32 or rill.float16 to convert it")
        arr = np.asarray(arr, dtype=dt.numpy, order="C")  # keeps 0-d arrays 0-d
        s = _stream.current()
        self._alloc(arr.shape, dt, s, where)
        if self._numel:
            # rill_memcpy comes after the current stream's work: waited for
            # here first, so that Ctrl-C can interrupt the wait.
            check(_wait.stream(s._h))
            check(lib.rill_memcpy(self._ptr, ffi.from_buffer(arr), arr.nbytes))

    def _describe(self, shape, dt, stream, strides=None):
        """Sets the fields of a tensor with no memory yet (the caller sets
        _ptr, and _owner when another owns the memory)."""
        self._ptr = None
        self._shape = shape
        self._numel = _numel(shape)
        self._dtype = dt
        self._stream = stream
        self._event = None
        self._gen = life.generation
        self._owner = None
        self._base = None
        self._strides = strides

    def _alloc(self, shape, dt, stream, where):
        self._describe(shape, dt, stream)
        nbytes = self._numel * dt.itemsize
        if nbytes >= 1 << 63:
            raise ValueError(f"{where}: shape {shape} needs {nbytes} bytes, more than any "
                             "device has")
        out = ffi.new("void **")
        h = stream._handle(where)
        st = lib.rill_malloc_async(max(nbytes, 1), h, out)
        if st == lib.RILL_ERROR_OUT_OF_MEMORY:
            st = _waited_alloc(max(nbytes, 1), stream, out, st)
        check(st)
        self._ptr = out[0]
        g = _graph._tls.__dict__.get("graph")
        if g is not None and _graph.stream_in_capture(h):
            self._owner = g._mem  # graph memory: it lives as long as the tensor

    def _copy(self, stream):
        """A copy made in stream order on stream, of this tensor's class."""
        t = type(self)._empty(self._shape, self._dtype, stream, "rill.Tensor copy")
        if self._numel:
            check(lib.rill_memcpy_async(t._ptr, self._valid("rill.Tensor copy"), self.nbytes,
                                        stream._h))
            t._written(stream)
        return t

    @classmethod
    def _empty(cls, shape, dt, stream, where):
        t = cls.__new__(cls)
        t._alloc(shape, dt, stream, where)
        return t

    def _valid(self, where, _active=_graph.active):
        """The memory, for an op that uses the tensor (stale_error after
        rill.shutdown()). In a capture, that capture holds the memory of
        another capture the tensor has (_graph.note_use)."""
        if self._gen != life.generation:
            raise stale_error(where, "tensor")
        if _active[0]:
            _graph.note_use(self)
        return self._ptr

    def _written(self, stream):
        """Records the tensor's event after the op that wrote it on stream."""
        g = _graph._tls.__dict__.get("graph")
        if g is not None:  # captured: recorded again after each replay
            g._written[id(self)] = self
            g._streams[stream._h] = stream
        if self._base is not None:  # a view: its base was written too
            self._base._written(stream)
        ev = self._event
        if ev is None:
            ev = self._event = _pooled_event(stream._events)
        check(lib.rill_event_record(ev, stream._h))

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

    # + - * and their reflections, and -a: set after the class, on
    # TensorBase's C slots or on _Fields (their general path is add, sub,
    # mul and neg below).

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
        return rdiv(float(other), self) if _is_scalar(other) else NotImplemented

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
            t = _to_device(t, target, where)
        with _on_device(target, where):
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

    # The methods that make views (indexing, reshape, transpose...) are
    # rill._views', those along dimensions (sum, max, softmax...)
    # rill._math's: those modules, above this one, add them (add_methods).


def _release(self, _life=life, _free_async=lib.rill_free_async, _free=lib.rill_free):
    """Frees a garbage-collected tensor's memory in stream order and gives
    its event back to the pool (TensorBase does this in C, except for the
    tensors of a graph, which it leaves to this function)."""
    try:
        ptr = self._ptr
    except AttributeError:  # __init__ failed before it allocated
        return
    if ptr is None or self._gen != _life.generation:
        return
    self._ptr = None
    if self._base is not None:  # a view: the memory is its base's
        ev = self._event
        if ev is not None:
            self._stream._events.append(ev)
        return
    owner = self._owner
    if owner is not None and not isinstance(owner, _graph._Memory):
        owner.release(self)  # another library's memory, shared through DLPack (rill._dlpack)
        return
    if owner is not None and getattr(_graph.capturing(), "_mem", None) is not owner:
        return  # a capture's memory, released with its exec once nothing holds it
    s = self._stream
    if s._closed:
        _free(ptr)  # at the end of its (destroyed) stream's work
    else:
        _free_async(ptr, s._h)
    ev = self._event
    if ev is not None:
        s._events.append(ev)


_Fields.__del__ = _release


def add_methods(source):
    """Adds the functions and properties that the class source defines to
    Tensor, under their names: how _views and _math, which build on this
    module, give the tensor the methods of their ops."""
    for name, value in vars(source).items():
        fn = value.fget if isinstance(value, property) else value
        if isinstance(fn, types.FunctionType):
            fn.__qualname__ = f"Tensor.{name}"  # as if defined in the class
            setattr(Tensor, name, value)


# ---- layout
#
# A view (rill._views) shows its base's memory with a shape and strides in
# elements (None when it is contiguous, the form every op takes directly).
# An op that needs contiguous memory gathers a view with strides first
# (contiguous(): rill_op_copy_strided_f32 on the current stream); the
# broadcasting ops read strides directly (rill_op_binary_f32).

def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def strides_of(t):
    """t's strides in elements (its contiguous ones when it has none)."""
    return t._strides if t._strides is not None else contiguous_strides(t._shape)


def _f32_only(t, where):
    if t._dtype is not float32:
        raise NotImplementedError(f"{where}: rill gathers strided views of float32 tensors only; "
                                  f"convert first (t.float()), then take the view")


def copy_strided(dst, dst_strides, src, src_strides, shape, where):
    """dst at i = src at i for every index of shape, on the current stream."""
    if _numel(shape) == 0:
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
    _f32_only(t, where)
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


# ---- the fast path of the element-wise ops
#
# a + b, a - b, a * b and a + number on float32 tensors of one shape and
# class with elements on the current device, while no capture is active
# anywhere: one call of rill_op_*_f32_new (rill_malloc_async, the op and
# rill_event_record of the output's event, the calls the general path
# makes one by one), with the checks that cannot fail there left out and
# the lookups bound once. Anything else takes the general path, which
# raises the errors.

_bufs = threading.local()  # .out: a float ** per thread for rill_op_*_f32_new


def _out_buf():
    buf = _bufs.out = ffi.new("float **")
    return buf


def _new_event():
    """A new event for a tensor's writes (the pools of rill.Stream's
    devices hand back those of freed tensors)."""
    out = ffi.new("rill_event **")
    check(lib.rill_event_create(lib.RILL_EVENT_DEFAULT, out))
    return out[0]


def _waited_alloc(nbytes, stream, out, status):
    """The allocation that rill_malloc_async refused (status) at the limit:
    rill_malloc waits on the host for the pending frees (seed 000: when the
    allocation fails, synchronize, then release; PyTorch's allocator waits
    for the events of freed blocks before it raises) and takes the memory,
    which any stream may use at once. Not during a capture of this thread
    or of the stream, which a wait would invalidate (status stays), nor
    from a host function, where rill_malloc refuses to wait; other threads'
    captures are left alone (this thread's capture mode is RELAXED for the
    call). The status of the last try."""
    if _graph.capturing() is not None or _graph.stream_in_capture(stream._h):
        return status
    mode = ffi.new("rill_capture_mode *", lib.RILL_CAPTURE_RELAXED)
    check(lib.rill_thread_exchange_capture_mode(mode))
    try:
        return lib.rill_malloc(stream._dev, nbytes, out)  # cffi lets go of the GIL meanwhile
    finally:
        check(lib.rill_thread_exchange_capture_mode(mode))


def _pooled_event(pool):
    """An event from a device's pool, or a new one when the pool is empty
    (another thread may empty it between a test of it and the pop)."""
    try:
        return pool.pop()
    except IndexError:
        return _new_event()


def _elementwise(op, alpha, general):
    """The operator method a (op) b: op(h, a, b, alpha, n, event, out) on
    two tensors (alpha None: op(h, a, b, n, event, out)), or with a number
    b a + alpha*b (rill_op_add_scalar_f32_new; alpha None: a * b, the map
    RILL_MAP_SCALE by rill_op_map_f32_new), into a new tensor like a on the
    current stream; general(a, b) in every other case, which raises the
    errors. One function per operator, its frame the only Python one of
    the fast path."""

    def method(self, other, _life=life, _active=_graph.active, _current=lib.rill_current_stream,
               _null=ffi.NULL, _streams=_stream, _f32=float32, _new_object=object.__new__,
               _add_scalar=lib.rill_op_add_scalar_f32_new, _map=lib.rill_op_map_f32_new,
               _scale=lib.RILL_MAP_SCALE):
        cls = self.__class__
        tensors = other.__class__ is cls
        if tensors:
            if not (self._dtype is _f32 and other._dtype is _f32 and self._shape == other._shape
                    and self._strides is None and other._strides is None
                    and self._numel and self._gen == _life.generation
                    and other._gen == self._gen and not _active[0]):
                return general(self, other)
        elif ((other.__class__ is float or other.__class__ is int)
              and self._dtype is _f32 and self._strides is None and self._numel
              and self._gen == _life.generation
              and not _active[0]):
            # before anything is taken: OverflowError for a huge int
            value = other * alpha if alpha is not None else float(other)
        else:
            return general(self, other) if _operand(other) else NotImplemented
        h = _current(_null)
        last = _streams._last
        s = last[1] if last[0] == h else _streams.current()
        if not ((self._stream is s or self._stream._dev == s._dev)
                and (not tensors or other._stream is s or other._stream._dev == s._dev)):
            return general(self, other)  # on the operands' device (the device guard)
        n = self._numel
        pool = s._events
        ev = _pooled_event(pool)
        try:
            buf = _bufs.out
        except AttributeError:
            buf = _out_buf()
        if not tensors:
            st = (_add_scalar(h, self._ptr, value, n, ev, buf) if alpha is not None
                  else _map(h, _scale, self._ptr, value, n, ev, buf))
        elif alpha is None:
            st = op(h, self._ptr, other._ptr, n, ev, buf)
        else:
            st = op(h, self._ptr, other._ptr, alpha, n, ev, buf)
        if st:
            pool.append(ev)
            if st == lib.RILL_ERROR_OUT_OF_MEMORY:
                return general(self, other)  # which waits for pending frees first
            check(st)
        out = _new_object(cls)
        out._ptr = buf[0]
        out._shape = self._shape
        out._numel = n
        out._dtype = _f32
        out._stream = s
        out._event = ev
        out._gen = self._gen
        out._owner = None
        out._base = None
        out._strides = None
        return out

    return method


def _negation(general):
    """The method -a: RILL_MAP_NEG by rill_op_map_f32_new on a float32
    tensor into a new tensor like it, as the other operators' fast path
    does (its conditions); general(a) in every other case."""

    def method(self, _life=life, _active=_graph.active, _current=lib.rill_current_stream,
               _null=ffi.NULL, _streams=_stream, _f32=float32, _new_object=object.__new__,
               _map=lib.rill_op_map_f32_new, _neg=lib.RILL_MAP_NEG):
        if not (self._dtype is _f32 and self._strides is None and self._numel
                and self._gen == _life.generation and not _active[0]):
            return general(self)
        h = _current(_null)
        last = _streams._last
        s = last[1] if last[0] == h else _streams.current()
        if self._stream is not s and self._stream._dev != s._dev:
            return general(self)  # on the tensor's device (the device guard)
        n = self._numel
        pool = s._events
        ev = _pooled_event(pool)
        try:
            buf = _bufs.out
        except AttributeError:
            buf = _out_buf()
        st = _map(h, _neg, self._ptr, 0.0, n, ev, buf)
        if st:
            pool.append(ev)
            if st == lib.RILL_ERROR_OUT_OF_MEMORY:
                return general(self)  # which waits for pending frees first
            check(st)
        out = _new_object(self.__class__)
        out._ptr = buf[0]
        out._shape = self._shape
        out._numel = n
        out._dtype = _f32
        out._stream = s
        out._event = ev
        out._gen = self._gen
        out._owner = None
        out._base = None
        out._strides = None
        return out

    return method


def neg(a):
    """-a element-wise on the current stream (RILL_MAP_NEG)."""
    return map_op(lib.RILL_MAP_NEG, a, 0.0, "rill.ops.neg")


def _operand(x):
    if isinstance(x, np.ndarray):
        _no_array(x)
    return isinstance(x, Tensor) or _is_scalar(x)


def _no_array(x):
    raise TypeError(f"rill.Tensor: an op between a tensor and a numpy.ndarray {x.shape} is not "
                    "run on the host; make the array a tensor first (rill.from_numpy(a), "
                    "torch.from_numpy(a).cuda()), or the tensor an array (t.numpy())")


def _no_comparison(a, b, op):
    """a == b and a != b: torch compares element-wise into a bool tensor,
    which rill has no dtype and op for; rather than compare identities in
    silence, say so. Other objects are never equal to a tensor."""
    if not (isinstance(b, (Tensor, np.ndarray)) or _is_scalar(b)):
        return NotImplemented
    raise TypeError(f"rill.Tensor {op}: rill has no element-wise comparison on the device "
                    "(torch's gives a bool tensor); compare on the host (a.numpy() "
                    f"{op} b.numpy()), or test identity with 'is'")


def _is_scalar(x):
    return isinstance(x, numbers.Real) and not isinstance(x, Tensor)


def _tensor_arg(x, where, name):
    if not isinstance(x, Tensor):
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


def _new(shape, where, like=None, dt=float32):
    """A new tensor of dtype dt on the current stream, of the class of like
    (a Tensor subclass of a compatibility module stays itself through the
    ops)."""
    s = _stream.current()
    cls = Tensor if like is None else type(like)
    return s, cls._empty(shape, dt, s, where)


def _zeros(out, s):
    """Fills out (float32 or float16) with zeros on s: the result of a sum
    or product over nothing."""
    fill = lib.rill_op_fill_f16 if out._dtype is float16 else lib.rill_op_fill_f32
    return _finish(out, s, fill(s._h, out._ptr, 0.0, max(out._numel, 1)))


def _finish(out, s, status):
    """Checks an op's status; the output is written once its event is."""
    check(status)
    out._written(s)
    return out


def _add32(a, b, alpha=1):
    """a + alpha*b on the current stream; a or b may be a number."""
    where = "rill.ops.add"
    if not _is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    if _is_scalar(a) and isinstance(b, Tensor):
        if alpha == 1:
            a, b = b, a
        else:
            return _sub32(a, b, alpha=-alpha)
    pa = _tensor_arg(a, where, "a")
    if _is_scalar(b):
        s, out = _new(a._shape, where, a)
        if out._numel:
            return _finish(out, s, lib.rill_op_add_scalar_f32(s._h, out._ptr, pa,
                                                              float(b) * alpha, out._numel))
        return out
    pb = _tensor_arg(b, where, "b")
    _same_shape(a, b, where)
    s, out = _new(a._shape, where, a)
    if out._numel:
        return _finish(out, s, lib.rill_op_add_f32(s._h, out._ptr, pa, pb, alpha, out._numel))
    return out


def _sub32(a, b, alpha=1):
    """a - alpha*b on the current stream; a or b may be a number."""
    where = "rill.ops.sub"
    if not _is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    if isinstance(a, Tensor):
        if _is_scalar(b):
            return _add32(a, -float(b) * alpha)
        _tensor_arg(b, where, "b")
        return _add32(a, b, alpha=-alpha)
    if not _is_scalar(a):
        raise TypeError(f"{where}: a must be a rill.Tensor or a number, not {type(a).__name__}")
    pb = _tensor_arg(b, where, "b")
    s, out = _new(b._shape, where, b)  # out = a, then out = out - alpha*b
    if out._numel:
        check(lib.rill_op_fill_f32(s._h, out._ptr, float(a), out._numel))
        return _finish(out, s, lib.rill_op_add_f32(s._h, out._ptr, out._ptr, pb, -alpha,
                                                   out._numel))
    return out


def _mul32(a, b):
    """a * b elementwise on the current stream; a or b may be a number."""
    where = "rill.ops.mul"
    if _is_scalar(a) and isinstance(b, Tensor):
        a, b = b, a
    pa = _tensor_arg(a, where, "a")
    if _is_scalar(b):
        s, out = _new(a._shape, where, a)
        if out._numel:
            return _finish(out, s, lib.rill_op_map_f32(s._h, lib.RILL_MAP_SCALE, out._ptr, pa,
                                                       float(b), out._numel))
        return out
    pb = _tensor_arg(b, where, "b")
    _same_shape(a, b, where)
    s, out = _new(a._shape, where, a)
    if out._numel:
        return _finish(out, s, lib.rill_op_mul_f32(s._h, out._ptr, pa, pb, out._numel))
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
    return _finish(out, s, op(s._h, out._ptr, pa, pb, m, k, n))


def _sum_same(a):
    """The sum of all elements, a 0-d tensor of a's dtype (float16 with
    rill_op_sum_f16), on the current stream."""
    where = "rill.ops.sum"
    pa = _tensor_arg(a, where, "a")
    s, out = _new((), where, a, a._dtype)
    if a._numel == 0:
        return _zeros(out, s)
    op = lib.rill_op_sum_f16 if a._dtype is float16 else lib.rill_op_sum_f32
    return _finish(out, s, op(s._h, out._ptr, pa, a._numel))


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
    return _finish(out, s, op(s._h, out._ptr, pi, pw, n, c, h, w, k, r, sz))


def _converted(x, dt, s, where, cls=None):
    """A copy of tensor x as dtype dt, of class cls (x's by default), on s."""
    out = (cls or type(x))._empty(x._shape, dt, s, where)
    if out._numel:
        cast = lib.rill_op_cast_f16_f32 if dt is float32 else lib.rill_op_cast_f32_f16
        return _finish(out, s, cast(s._h, out._ptr, x._valid(where), out._numel))
    return out


def _via_float32(op32, where, *args, **kwargs):
    """op32 on args whose float16 tensors are converted to float32 first;
    the result is rounded back to float16 when every tensor was float16."""
    s = _stream.current()
    conv = []
    all_half = True
    for x in args:
        if isinstance(x, Tensor):
            if x._dtype is float16:
                x = _converted(x, float32, s, where)
            else:
                all_half = False
        conv.append(x)
    out = op32(*conv, **kwargs)
    return _converted(out, float16, s, where) if all_half else out


def _has_half(a, b=None):
    return ((isinstance(a, Tensor) and a._dtype is float16)
            or (isinstance(b, Tensor) and b._dtype is float16))


def _mixed(*xs):
    """Whether the tensors among xs have both dtypes: then the float16 ones
    go through float32 (torch's promotion), else one dtype's op runs."""
    return len({x._dtype for x in xs if isinstance(x, Tensor)}) > 1


def _half_op(kind, a, b, alpha, where):
    """kind ("add" or "mul") on float16 operands with rill's f16 ops, or None
    when they do not fit them (a float32 tensor among them, shapes that
    differ, a number first in a subtraction): the caller goes through float32."""
    if isinstance(a, Tensor):
        t, other = a, b
    elif kind == "add" and alpha == 1 or kind == "mul":
        t, other = b, a
    else:
        return None
    if not (isinstance(t, Tensor) and t._dtype is float16):
        return None
    if isinstance(other, Tensor):
        if other._dtype is not float16 or other._shape != t._shape:
            return None
    elif not _is_scalar(other):
        return None
    if not _is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    pt = t._valid(where)
    s = _stream.current()
    out = type(t)._empty(t._shape, float16, s, where)
    if not out._numel:
        return out
    if isinstance(other, Tensor):
        po = other._valid(where)
        if kind == "add":
            return _finish(out, s, lib.rill_op_add_f16(s._h, out._ptr, pt, po, alpha, out._numel))
        return _finish(out, s, lib.rill_op_mul_f16(s._h, out._ptr, pt, po, out._numel))
    if kind == "add":
        return _finish(out, s, lib.rill_op_add_scalar_f16(s._h, out._ptr, pt,
                                                          float(other) * alpha, out._numel))
    return None  # tensor * number: through float32 (fill, then multiply)


def _needs_layout(a, b):
    """Whether a (op) b broadcasts or reads a view with strides: then
    rill_op_binary_f32 (or a gather first) computes it."""
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    return ((ta and a._strides is not None) or (tb and b._strides is not None)
            or (ta and tb and a._shape != b._shape))


def _layout_binary(kind, a, b, alpha=1):
    if not _is_scalar(alpha):
        raise TypeError(f"rill.ops.{kind}: alpha must be a number, not {type(alpha).__name__}")
    if alpha != 1:
        b = b * alpha if _is_scalar(b) else binary("mul", b, alpha)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return binary(kind, a, b)
    if isinstance(a, Tensor):
        a = contiguous(a, f"rill.ops.{kind}")
    if isinstance(b, Tensor):
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
        if isinstance(a, Tensor) and _is_scalar(alpha):
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
        return _converted(x, float32, _stream.current(), where), True
    _tensor_arg(x, where, "input")  # raises for int64
    return x, False


def _result(out, half):
    return _converted(out, float16, _stream.current(), "rill") if half else out


@on_operands_device(lambda kind, *args, **kwargs: f"rill.ops.{kind}")
def binary(kind, a, b, where=None):
    """a (kind) b for two tensors, broadcast to one shape, or a tensor and a
    number, on the current stream."""
    where = where or f"rill.ops.{kind}"
    if not isinstance(a, Tensor):
        if not _is_scalar(a):
            raise TypeError(f"{where}: a must be a rill.Tensor or a number, "
                            f"not {type(a).__name__}")
        a = _scalar_like(a, b)
    if not isinstance(b, Tensor):
        if not _is_scalar(b):
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
        _finish(out, s, lib.rill_op_binary_f32(s._handle(where), _BINARY[kind], out._ptr,
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
    if not isinstance(a, Tensor):
        raise TypeError(f"{where}: input must be a rill.Tensor, not {type(a).__name__}")
    x, half = _as_f32(a, where)
    x = contiguous(x, where)
    s = _stream.current()
    out = type(a)._empty(x._shape, float32, s, where)
    if out._numel:
        _finish(out, s, lib.rill_op_map_f32(s._handle(where), op, out._ptr, x._valid(where),
                                            float(alpha), out._numel))
    return _result(out, half)


def rdiv(value, a, where="rill.ops.div"):
    return map_op(lib.RILL_MAP_RDIV, a, value, where)


def rsub(value, a, where="rill.ops.sub"):
    return map_op(lib.RILL_MAP_RSUB, a, value, where)


def _general(general):
    """The operator method a (op) b off the fast path: general(a, b)."""
    def method(self, other):
        return general(self, other) if _operand(other) else NotImplemented
    return method


def _radd(self, other):
    return add(self, other) if _operand(other) else NotImplemented


def _rsub(self, other):
    return sub(other, self) if _operand(other) else NotImplemented


def _rmul(self, other):
    return mul(self, other) if _operand(other) else NotImplemented


if fast is None:
    _Fields.__add__ = _elementwise(lib.rill_op_add_f32_new, 1.0, add)
    _Fields.__sub__ = _elementwise(lib.rill_op_add_f32_new, -1.0, sub)
    _Fields.__mul__ = _elementwise(lib.rill_op_mul_f32_new, None, mul)
    _Fields.__radd__, _Fields.__rsub__, _Fields.__rmul__ = _radd, _rsub, _rmul
    _Fields.__neg__ = _negation(neg)
else:
    # TensorBase's number slots run the fast path in C and call these
    # otherwise; the Tensor classes define none of these methods, so that
    # Python calls the slots directly.
    def _address_of(p):
        if not isinstance(p, ffi.CData):
            raise TypeError(f"rill.Tensor: a pointer field takes a cdata pointer or None, "
                            f"not {type(p).__name__}")
        return int(ffi.cast("uintptr_t", p))

    fast.configure(float32=float32, cast_ptr=lambda a: ffi.cast("void *", a),
                   cast_event=lambda a: ffi.cast("rill_event *", a), address_of=_address_of,
                   check=check,
                   current=_stream.current, active=_graph.active, add=_general(add), radd=_radd,
                   sub=_general(sub), rsub=_rsub, mul=_general(mul), rmul=_rmul,
                   finalize_other=_release, neg=neg)
    fast.set_generation(life.generation)
    on_shutdown(lambda: fast.set_generation(life.generation))


@on_operands_device("rill.ops.matmul")
def matmul(a, b):
    """The matrix product of 2-D tensors a [m, k] and b [k, n], on the
    current stream (views are gathered first)."""
    if (isinstance(a, Tensor) and a._strides is not None) or \
            (isinstance(b, Tensor) and b._strides is not None):
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
    if not _is_scalar(alpha):
        raise TypeError(f"{where}: alpha must be a number, not {type(alpha).__name__}")
    if not _operand(other):
        raise TypeError(f"{where}: other must be a rill.Tensor or a number, "
                        f"not {type(other).__name__}")
    if isinstance(other, Tensor):
        _tensor_arg(other, where, "other")
        _same_shape(t, other, where)
    if t._dtype is float16:
        s = _stream.current()
        if not t._numel:
            return t
        if not isinstance(other, Tensor):
            return _finish(t, s, lib.rill_op_add_scalar_f16(s._h, pt, pt, float(other) * alpha,
                                                             t._numel))
        if other._dtype is float16:
            return _finish(t, s, lib.rill_op_add_f16(s._h, pt, pt, other._ptr, alpha, t._numel))
        result = _via_float32(_add32, where, _converted(t, float32, s, where), other,
                              alpha=alpha)
        return _finish(t, s, lib.rill_op_cast_f32_f16(s._h, pt, result._ptr, t._numel))
    if not t._numel:
        return t
    s = _stream.current()
    if isinstance(other, Tensor):
        if other._dtype is float16:
            other = _converted(other, float32, s, where)
        return _finish(t, s, lib.rill_op_add_f32(s._h, pt, pt, other._ptr, alpha, t._numel))
    return _finish(t, s, lib.rill_op_add_scalar_f32(s._h, pt, pt, float(other) * alpha,
                                                     t._numel))


def _names_device(x):
    """Whether an argument of Tensor.to names a device, not a dtype."""
    if isinstance(x, str):
        return x.partition(":")[0] in ("cuda", "cpu")
    return isinstance(x, _device.Device) or (isinstance(x, int) and not isinstance(x, bool))


class _on_device:
    """`with _on_device(device, where):` makes device (anything rill.device
    takes; None: nothing changes) the calling thread's current device for
    the block, so that the work and memory of a maker go to its current
    stream."""

    __slots__ = ("dev", "prev")

    def __init__(self, device, where):
        self.dev = None if device is None else \
            _device.Device._wrap(_device.handle_of(device, where))
        self.prev = None

    def __enter__(self):
        if self.dev is not None:
            cur = _device.current_device()
            if cur is not self.dev:
                self.prev = cur
                _device.set_device(self.dev)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            _device.set_device(self.prev)
            self.prev = None
        return False


def _to_device(t, dev, where):
    """A copy of t on dev's current stream, after the work that writes t."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: self must be a rill.Tensor, not {type(t).__name__}")
    t._valid(where)
    if t._strides is not None:
        t = contiguous(t, where)  # gathered on t's own device first
    with _on_device(dev, where):
        s = _stream.current()
        if t._event is not None:
            check(lib.rill_stream_wait_event(s._handle(where), t._event))
        return t._copy(s)


@on_operands_device("rill.Tensor.to")
def to_dtype(t, dt, where="rill.Tensor.to"):
    """t as dtype dt: t itself when it has that dtype, else a converted copy
    on the current stream (of an int64 tensor, through the host)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: self must be a rill.Tensor, not {type(t).__name__}")
    dt = _dtype_arg(dt, where)
    if dt is None or dt is t._dtype:
        return t
    if t._dtype is int64:
        return type(t)(t.numpy().astype(dt.numpy), dt)
    if t._strides is not None:
        t = contiguous(t, where)
    _tensor_arg(t, where, "self")
    return _converted(t, dt, _stream.current(), where)


# The seed of randn and the number of calls since it was set: each call
# fills from its own 64-bit seed, so the values depend only on the seed and
# the order of the calls.
_rng = {"seed": 67280421310721, "calls": 0}


def manual_seed(seed):
    """Sets the seed of rill.randn (an int); the values that follow depend
    only on it and the order of the calls."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"rill.manual_seed: seed must be an int, not {type(seed).__name__}")
    _rng["seed"] = int(seed) & 0xFFFFFFFFFFFFFFFF
    _rng["calls"] = 0


def randn(*shape, dtype=None, device=None, cls=Tensor, where="rill.randn"):
    """A tensor of standard normal samples (float32, or float16 rounded from
    them), filled on the current stream by rill_op_randn_f32 (device's, when
    given: as rill.device takes it)."""
    if device is not None:
        with _on_device(device, where):
            return randn(*shape, dtype=dtype, cls=cls, where=where)
    shape = _shape_arg(shape, where)
    dt = _dtype_arg(dtype, where) or float32
    s = _stream.current()
    out = cls._empty(shape, float32, s, where)
    seed = (_rng["seed"] * 0x9E3779B97F4A7C15 + _rng["calls"]) & 0xFFFFFFFFFFFFFFFF
    _rng["calls"] += 1
    if out._numel:
        _finish(out, s, lib.rill_op_randn_f32(s._h, out._ptr, out._numel, 0.0, 1.0, seed))
    return out if dt is float32 else _converted(out, dt, s, where)


def filled(shape, value, dtype, where, cls=Tensor):
    """A new tensor of class cls filled with value on the current stream."""
    if fast is not None and (dtype is None or dtype is float32) and shape.__class__ is tuple:
        t = fast.new(cls, shape, value)  # None: the general path below
        if t is not None:
            return t
    dt = _dtype_arg(dtype, where) or float32
    if not _is_scalar(value):
        raise TypeError(f"{where}: value must be a number, not {type(value).__name__}")
    s = _stream.current()
    out = cls._empty(_shape_arg((shape,), where), dt, s, where)
    if out._numel:
        fill = lib.rill_op_fill_f32 if dt is float32 else lib.rill_op_fill_f16
        _finish(out, s, fill(s._h, out._ptr, float(value), out._numel))
    return out


def full(shape, value, dtype=None, device=None):
    """A tensor of shape filled with value, on the current stream (device's,
    when given)."""
    with _on_device(device, "rill.full"):
        return filled(shape, value, dtype, "rill.full")


def ones(*shape, dtype=None, device=None):
    """A tensor of ones: rill.ones(2, 3) or rill.ones((2, 3)), on the
    current stream (device's, when given)."""
    if device is not None:
        with _on_device(device, "rill.ones"):
            return ones(*shape, dtype=dtype)
    if fast is not None and (dtype is None or dtype is float32):
        t = fast.new(Tensor, shape[0] if len(shape) == 1 and shape[0].__class__ is tuple
                     else shape, 1.0)  # None: the general path below
        if t is not None:
            return t
    return filled(_shape_arg(shape, "rill.ones"), 1.0, dtype, "rill.ones")


def zeros(*shape, dtype=None, device=None):
    """A tensor of zeros: rill.zeros(2, 3) or rill.zeros((2, 3)), on the
    current stream (device's, when given)."""
    if device is not None:
        with _on_device(device, "rill.zeros"):
            return zeros(*shape, dtype=dtype)
    if fast is not None and (dtype is None or dtype is float32):
        t = fast.new(Tensor, shape[0] if len(shape) == 1 and shape[0].__class__ is tuple
                     else shape, 0.0)  # None: the general path below
        if t is not None:
            return t
    return filled(_shape_arg(shape, "rill.zeros"), 0.0, dtype, "rill.zeros")


def empty(*shape, dtype=None, device=None):
    """A tensor whose values are whatever the memory held, on the current
    stream (device's, when given)."""
    where = "rill.empty"
    if device is not None:
        with _on_device(device, where):
            return empty(*shape, dtype=dtype)
    if fast is not None and (dtype is None or dtype is float32):
        t = fast.new(Tensor, shape[0] if len(shape) == 1 and shape[0].__class__ is tuple
                     else shape, None)  # None: the general path below
        if t is not None:
            return t
    dt = _dtype_arg(dtype, where) or float32
    return Tensor._empty(_shape_arg(shape, where), dt, _stream.current(), where)


def from_numpy(array):
    """A tensor copied from a numpy array of float32 or float16."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"rill.from_numpy: array must be a numpy.ndarray, "
                        f"not {type(array).__name__}")
    return Tensor(array)
