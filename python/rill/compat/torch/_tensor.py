# SPDX-License-Identifier: MIT
"""torch.Tensor, torch.device and the tensor makers and ops on rill."""

import numbers

import numpy as np

from ... import Device, Tensor as _RillTensor, _internal, current_device
from ... import device as _rill_device, dtype as _dtype, float16, float32
from ._missing import not_provided

_KINDS = ("cuda", "npu", "cpu")


class device:
    """torch.device("cuda:0"), torch.device("npu", 0), torch.device("cpu"):
    every kind names rill's device of that index (the current one when
    there is no index), which is where all tensors live."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002 - torch's names
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise TypeError(f"torch.device: type must be a str such as 'cuda:0', "
                            f"not {builtins_type(type).__name__}")
        kind, _, number = type.partition(":")
        if kind not in _KINDS:
            raise ValueError(f"torch.device: unknown device type {kind!r}; rill takes "
                             "'cuda', 'npu' or 'cpu', with or without ':index'")
        if number:
            if index is not None:
                raise ValueError(f"torch.device: {type!r} has an index already; "
                                 "pass the index once")
            if not number.isdigit():
                raise ValueError(f"torch.device: {type!r} has a bad index; pass 'cuda:0'")
            index = int(number)
        if index is not None and (not isinstance(index, numbers.Integral)
                                  or isinstance(index, bool) or index < 0):
            raise ValueError(f"torch.device: index must be an int 0 or more, not {index!r}")
        self.type = kind
        self.index = None if index is None else int(index)

    def __repr__(self):
        return f"device(type='{self.type}'" + (
            "" if self.index is None else f", index={self.index}") + ")"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


builtins_type = type


def _is_host(dev):
    """Whether a device argument names the host ("cpu")."""
    return (isinstance(dev, str) and dev.partition(":")[0] == "cpu") or \
        (isinstance(dev, device) and dev.type == "cpu")


def _has_cuda():
    """Whether rill has CUDA devices: then torch's "cuda:N" and "npu:N" are
    rill's cuda:N and "cpu" its CPU device; else every kind names rill's
    devices by ordinal, all of them CPU devices."""
    return _internal.count_of_kind("cuda")[0] > 0


def _ordinal(index, kind, where):
    """The rill ordinal of torch's device kind:index (index None: None,
    the current device)."""
    if index is None:
        return None
    if _has_cuda():
        name = f"cpu:{index}" if kind == "cpu" else f"cuda:{index}"
        return _rill_device(name).index
    return _rill_device(index).index


def _torch_index(dev):
    """torch's index of rill device dev: N of cuda:N, or -1 for a CPU
    device beside CUDA devices (the host); without CUDA devices, the
    ordinal."""
    if dev.kind == "cuda":
        return dev.kind_index
    return -1 if _has_cuda() else dev.index


def _device_arg(dev, where):
    """The rill ordinal that a device= argument names (a str, a
    torch.device, an int or a rill.Device), or None for the current device
    (None, or "cuda" without an index). "cpu" names rill's CPU device when
    rill has CUDA devices (the current device otherwise). The index must
    name a device rill has."""
    if dev is None:
        return None
    if isinstance(dev, Device):
        return _rill_device(dev).index
    if isinstance(dev, numbers.Integral) and not isinstance(dev, bool):
        dev = device("cuda", dev)
    elif isinstance(dev, str):
        dev = device(dev)
    elif not isinstance(dev, device):
        raise TypeError(f"{where}: device must be a str, a torch.device or an int, "
                        f"not {type(dev).__name__}")
    if dev.type == "cpu" and dev.index is None and _has_cuda():
        return _rill_device("cpu").index
    return _ordinal(dev.index, dev.type, where)


def _on(index):
    """`with _on(index):` makes device index (None: the current one) the
    current device for the block, so that the makers' work and memory go
    to its current stream, as torch's makers put a tensor on device=."""
    return _internal.on_device(index, "torch")


def _moved(t, index, where):
    """t on device index (None: the current device): t itself when it is
    there, else a copy made on that device's current stream after the work
    that writes t (torch's .to(device) and .cuda(device))."""
    if index is None:
        index = current_device().index
    if t._stream.device.index == index:
        return t
    return _internal.to_device(t, index, where)


class Size(tuple):
    """torch.Size: a tensor's shape, a tuple (which the legacy constructors
    torch.FloatTensor(size) tell from data)."""

    __slots__ = ()

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self):
        return f"torch.Size({list(self)})"


class Tensor(_RillTensor):
    """torch.Tensor on a rill.Tensor; results of ops on it are of this class."""

    __slots__ = ()

    def __init__(self, data, dtype=None):
        super().__init__(data, dtype)

    # ---- what PyTorch's stream and allocator tests use

    def data_ptr(self):
        """The address of the first element (an int)."""
        return int(_internal.ffi.cast("uintptr_t", self._valid("torch.Tensor.data_ptr")))

    def element_size(self):
        return self.dtype.itemsize

    def nelement(self):
        return self.numel()

    def storage_offset(self):
        """0: a rill tensor owns its memory from its start (no views)."""
        return 0

    @property
    def is_cuda(self):
        return _torch_index(self._stream.device) >= 0

    @property
    def device(self):
        """torch.device("cuda", index) of the tensor's device; "cpu" for
        rill's CPU device beside CUDA devices."""
        index = _torch_index(self._stream.device)
        return device("cpu") if index < 0 else device("cuda", index)

    def get_device(self):
        """torch's index of the tensor's device (-1: the host)."""
        return _torch_index(self._stream.device)

    def tolist(self):
        """The values as (nested) Python lists, once the work that writes
        the tensor is done."""
        return self.numpy().tolist()

    def pin_memory(self):
        """The tensor itself: rill's device memory is what the host reads."""
        return self

    def is_pinned(self):
        return False

    @_internal.on_operands_device("torch.Tensor.clone")
    def clone(self):
        """A copy made on the current stream of the tensor's device."""
        return self._copy(_internal.current())

    def copy_(self, src, non_blocking=False):
        """Copies src (a tensor of the same number of elements, converted
        to this dtype) into self on the current stream of self's device (a
        src of another device: copied there first, after its writes);
        returns self."""
        where = "torch.Tensor.copy_"
        if not isinstance(src, _RillTensor):
            raise TypeError(f"{where}: src must be a tensor, not {type(src).__name__}")
        if src.numel() != self.numel():
            raise ValueError(f"{where}: src has {src.numel()} elements and self "
                             f"{self.numel()}; they must agree")
        if src._stream._dev != self._stream._dev:
            src = _moved(src, self._stream.device.index, where)
        return self._copy_from(src, where)

    @_internal.on_operands_device("torch.Tensor.copy_")
    def _copy_from(self, src, where):
        dst = self._valid(where)
        s = _internal.current()
        if src.dtype is not self.dtype:
            src = _internal.to_dtype(src, self.dtype, where)
        if self._numel:
            _internal.check(_internal.lib.rill_memcpy_async(dst, src._valid(where), self.nbytes,
                                                            s._handle(where)))
            self._written(s)
        return self

    @_internal.on_operands_device("torch.Tensor.fill_")
    def fill_(self, value):
        """Fills self with value on the current stream of its device;
        returns self."""
        lib = _internal.lib
        where = "torch.Tensor.fill_"
        if not _internal.is_scalar(value):
            raise TypeError(f"{where}: value must be a number, not {type(value).__name__}")
        ptr = self._valid(where)
        s = _internal.current()
        if self._numel:
            fill = lib.rill_op_fill_f16 if self.dtype is float16 else lib.rill_op_fill_f32
            _internal.check(fill(s._handle(where), ptr, float(value), self._numel))
            self._written(s)
        return self

    def zero_(self):
        """Fills self with zeros on the current stream; returns self."""
        return self.fill_(0.0)

    def sub_(self, other, alpha=1):
        """self -= alpha*other in place on the current stream; returns self."""
        return self.add_(other, alpha=-alpha)

    def mul_(self, other):
        """self *= other in place on the current stream; returns self."""
        return self.copy_(_internal.mul(self, other))

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def cuda(self, device=None, non_blocking=False):
        """The tensor on device (None: the current device): itself when it
        is there already, else a copy."""
        return _moved(self, _device_arg(device, "torch.Tensor.cuda"), "torch.Tensor.cuda")

    def npu(self, device=None, non_blocking=False):
        """cuda() under torch_npu's name."""
        return _moved(self, _device_arg(device, "torch.Tensor.npu"), "torch.Tensor.npu")

    def cpu(self):
        """The tensor itself where rill has no CUDA device (its memory is
        host memory; numpy() copies it); else a copy on rill's CPU device
        when it is on a GPU."""
        if self._stream.device.kind != "cuda":
            return self
        return _moved(self, _rill_device("cpu").index, "torch.Tensor.cpu")

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False):
        """to(dtype), to(device), to(device, dtype): a copy on another device
        or of another dtype, else the tensor itself."""
        for a in args:
            if isinstance(a, _dtype):
                dtype = a
            else:
                device = a
        t = self
        if device is not None:
            index = _device_arg(device, "torch.Tensor.to")
            t = _moved(t, index, "torch.Tensor.to")
        with _on(t._stream.device.index):
            return _internal.to_dtype(t, dtype, "torch.Tensor.to")

    def size(self, dim=None):
        """The shape (a torch.Size), or the length of dimension dim."""
        return Size(self.shape) if dim is None else self.shape[dim]

    def dim(self):
        return self.ndim

    def mm(self, other):
        return mm(self, other)

    # ---- what a small model's code calls (forward only)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"'Tensor' object has no attribute {name!r}")
        raise not_provided(f"torch.Tensor.{name}")

    @property
    def requires_grad(self):
        """False: rill computes no gradients."""
        return False

    def requires_grad_(self, requires_grad=True):
        if requires_grad:
            raise not_provided("torch.Tensor.requires_grad_ (rill computes no gradients)")
        return self

    def detach(self):
        """The tensor itself: rill records no graph of its ops."""
        return self

    def double(self):
        """float32: rill converts float64 to float32 (torch.float64 names it)."""
        return self.float()

    def type_as(self, other):
        return self.to(other.dtype)

    def div(self, other):
        return self / other

    def pow(self, exponent):
        return self ** exponent

    def neg(self):
        return -self

    def relu(self):
        return _internal.map_op(_internal.lib.RILL_MAP_RELU, self, 0.0, "torch.Tensor.relu")

    def sigmoid(self):
        return _internal.map_op(_internal.lib.RILL_MAP_SIGMOID, self, 0.0, "torch.Tensor.sigmoid")

    def tanh(self):
        return _internal.map_op(_internal.lib.RILL_MAP_TANH, self, 0.0, "torch.Tensor.tanh")

    def exp(self):
        return _internal.map_op(_internal.lib.RILL_MAP_EXP, self, 0.0, "torch.Tensor.exp")

    def log(self):
        return _internal.map_op(_internal.lib.RILL_MAP_LOG, self, 0.0, "torch.Tensor.log")

    def sqrt(self):
        return _internal.map_op(_internal.lib.RILL_MAP_SQRT, self, 0.0, "torch.Tensor.sqrt")

    def abs(self):
        return _internal.map_op(_internal.lib.RILL_MAP_ABS, self, 0.0, "torch.Tensor.abs")

    def clamp(self, min=None, max=None):  # noqa: A002 - torch's names
        return clamp(self, min, max)

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = "" if self.dtype is float32 else f", dtype=torch.{self.dtype.name}"
        index = self.get_device()
        where = "" if index < 0 else f", device='cuda:{index}'"
        return f"tensor({body}{where}{extra})"


def _size(size, where):
    return _internal.shape_arg(size, where)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples (rill.randn) on the current stream."""
    where = "torch.randn"
    index = _device_arg(device, where)
    if generator is not None:
        raise NotImplementedError(f"{where}: rill has one generator; pass generator=None and "
                                  "seed it with torch.manual_seed")
    with _on(index):
        return _internal.randn(size, dtype, None, Tensor, where)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of ones on the current stream."""
    with _on(_device_arg(device, "torch.ones")):
        return _internal.filled(_size(size, "torch.ones"), 1.0, dtype, "torch.ones", Tensor)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros on the current stream."""
    with _on(_device_arg(device, "torch.zeros")):
        return _internal.filled(_size(size, "torch.zeros"), 0.0, dtype, "torch.zeros", Tensor)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of fill_value on the current stream."""
    with _on(_device_arg(device, "torch.full")):
        return _internal.filled(_size((size,), "torch.full"), fill_value, dtype, "torch.full",
                                Tensor)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A tensor whose values are whatever its memory held."""
    where = "torch.empty"
    index = _device_arg(device, where)
    dt = _internal.dtype_arg(dtype, where) or float32
    with _on(index):
        return Tensor._empty(_size(size, where), dt, _internal.current(), where)


def _dtype_or_float32(dtype):
    """dtype, with torch.float64 (and torch.double) meaning float32: rill
    converts float64 data to float32."""
    return float32 if dtype is float64 else dtype


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A tensor copied from data (numbers, sequences or a numpy array);
    float64 and integer data become float32, as torch's default dtype."""
    index = _device_arg(device, "torch.tensor")
    arr = np.asarray(data.numpy() if isinstance(data, _RillTensor) else data)
    dtype = _dtype_or_float32(dtype)
    if dtype is None and arr.dtype not in (np.float32, np.float16):
        dtype = float32
    with _on(index):
        return Tensor(arr, dtype)


def from_dlpack(ext_tensor):
    """A tensor on ext_tensor's memory without a copy (a numpy array, a
    real PyTorch tensor, anything with __dlpack__): rill.from_dlpack."""
    return _internal.from_dlpack(ext_tensor, Tensor)


def from_numpy(array):
    """A tensor copied from a numpy array: float32 and float16 as they are,
    float64 (and integers) converted to float32. torch keeps float64: rill
    computes in float32, so results agree to float32's precision."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"torch.from_numpy: array must be a numpy.ndarray, "
                        f"not {type(array).__name__}")
    if array.dtype not in (np.float32, np.float16):
        if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
                or array.dtype == np.bool_):
            raise TypeError(f"torch.from_numpy: arrays of {array.dtype} are not supported; pass "
                            "float or integer data")
        return Tensor(array, float32)
    return Tensor(array)


def as_tensor(data, dtype=None, device=None):
    """tensor(data): a copy (rill's memory is its own)."""
    return tensor(data, dtype=dtype, device=device)


def is_tensor(obj):
    return isinstance(obj, _RillTensor)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """start, start + step, ... below end, as float32 (made on the host)."""
    if end is None:
        start, end = 0, start
    return tensor(np.arange(start, end, step), dtype=dtype, device=device)


def zeros_like(input, dtype=None, device=None):
    return zeros(*input.shape, dtype=dtype or input.dtype, device=device)


def ones_like(input, dtype=None, device=None):
    return ones(*input.shape, dtype=dtype or input.dtype, device=device)


def randn_like(input, dtype=None, device=None):
    return randn(*input.shape, dtype=dtype or input.dtype, device=device)


class float64_dtype(_dtype):
    """torch.float64 (torch.double): tensors made with it hold float32, to
    which rill converts float64 data."""

    __slots__ = ()

    def __repr__(self):
        return "torch.float64"


float64 = float64_dtype("float64", 8, np.float64)


class no_grad:
    """with torch.no_grad(): (or as a decorator) the block as it is: rill
    computes no gradients anywhere."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


inference_mode = no_grad


def cat(tensors, dim=0):
    """The tensors joined along dim."""
    return _internal.cat(tensors, dim, "torch.cat")


concat = cat


def stack(tensors, dim=0):
    """The tensors (of one shape) joined along a new dimension."""
    return _internal.stack(tensors, dim, "torch.stack")


def reshape(input, shape):
    return _internal.reshape(input, shape, where="torch.reshape")


def flatten(input, start_dim=0, end_dim=-1):
    return _internal.flatten(input, start_dim, end_dim, "torch.flatten")


def transpose(input, dim0, dim1):
    return _internal.transpose(input, dim0, dim1, "torch.transpose")


def permute(input, dims):
    return _internal.permute(input, dims, where="torch.permute")


def unsqueeze(input, dim):
    return _internal.unsqueeze(input, dim, "torch.unsqueeze")


def squeeze(input, dim=None):
    return _internal.squeeze(input, dim, "torch.squeeze")


def div(input, other):
    if not isinstance(input, _RillTensor):
        return _internal.rdiv(float(input), other, "torch.div")
    return _internal.binary("div", input, other, "torch.div")


def maximum(input, other):
    return _internal.binary("maximum", input, other, "torch.maximum")


def minimum(input, other):
    return _internal.binary("minimum", input, other, "torch.minimum")


def clamp(input, min=None, max=None):  # noqa: A002 - torch's names
    out = input
    if min is not None:
        out = _internal.binary("maximum", out, min, "torch.clamp")
    if max is not None:
        out = _internal.binary("minimum", out, max, "torch.clamp")
    return out


def mean(input, dim=None, keepdim=False):
    return _internal.reduce("mean", input, dim, keepdim, "torch.mean")


def max(input, dim=None, keepdim=False):  # noqa: A001 - torch's name
    if isinstance(dim, _RillTensor):
        return maximum(input, dim)
    return _internal.extreme("max", input, dim, keepdim, "torch.max")


def min(input, dim=None, keepdim=False):  # noqa: A001 - torch's name
    if isinstance(dim, _RillTensor):
        return minimum(input, dim)
    return _internal.extreme("min", input, dim, keepdim, "torch.min")


def argmax(input, dim=None, keepdim=False):
    return _internal.argextreme("max", input, dim, keepdim, "torch.argmax")


def argmin(input, dim=None, keepdim=False):
    return _internal.argextreme("min", input, dim, keepdim, "torch.argmin")


def softmax(input, dim, dtype=None):
    return _internal.softmax(input, dim, where="torch.softmax")


def log_softmax(input, dim, dtype=None):
    return _internal.softmax(input, dim, log=True, where="torch.log_softmax")


def _unary(name, op):
    def fn(input):
        return _internal.map_op(op, input, 0.0, f"torch.{name}")

    fn.__name__ = name
    fn.__doc__ = f"torch.{name} element-wise on the current stream."
    return fn


relu = _unary("relu", _internal.lib.RILL_MAP_RELU)
sigmoid = _unary("sigmoid", _internal.lib.RILL_MAP_SIGMOID)
tanh = _unary("tanh", _internal.lib.RILL_MAP_TANH)
exp = _unary("exp", _internal.lib.RILL_MAP_EXP)
log = _unary("log", _internal.lib.RILL_MAP_LOG)
sqrt = _unary("sqrt", _internal.lib.RILL_MAP_SQRT)
abs = _unary("abs", _internal.lib.RILL_MAP_ABS)  # noqa: A001 - torch's name


def add(input, other, *, alpha=1, out=None):
    """input + alpha*other on the current stream."""
    if out is not None:
        raise NotImplementedError("torch.add: out= is not supported; use the result")
    return _internal.add(input, other, alpha)


def sub(input, other, *, alpha=1):
    """input - alpha*other on the current stream."""
    return _internal.sub(input, other, alpha)


def mul(input, other):
    """input * other elementwise on the current stream."""
    return _internal.mul(input, other)


def mm(input, mat2):
    """The product of 2-D tensors [m, k] and [k, n] on the current stream."""
    return _internal.matmul(input, mat2)


def matmul(input, other):
    """The product of 2-D tensors on the current stream."""
    return _internal.matmul(input, other)


def sum(input, dim=None, keepdim=False, dtype=None):  # noqa: A001 - torch's name
    """The sum of all elements (a 0-d tensor), or along dim."""
    if dtype is not None:
        raise NotImplementedError("torch.sum: dtype= is not supported")
    if dim is None and not keepdim and input._strides is None:
        return _internal.sum(input)
    return _internal.reduce("sum", input, dim, keepdim, "torch.sum")


class _HostTensor(Tensor):
    """A tensor that torch.FloatTensor(...) and torch.HalfTensor(...) make,
    which torch keeps in host memory: its memory is rill's like any other
    (rill's CPU device memory is host memory), but .cuda() and .to("cuda")
    copy it, as torch copies a host tensor to the device."""

    __slots__ = ()

    def cuda(self, device=None, non_blocking=False):
        """A copy on device (None: the current device), of class Tensor."""
        index = _device_arg(device, "torch.Tensor.cuda")
        with _on(index):
            s = _internal.current()
            t = Tensor._empty(self.shape, self.dtype, s, "torch.Tensor.cuda")
            return t.copy_(self)

    npu = cuda

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False):
        """to(dtype), to(device), to(device, dtype): to a device other than
        "cpu", a copy of class Tensor (cuda())."""
        for a in args:
            if isinstance(a, _dtype):
                dtype = a
            else:
                device = a
        t = self if device is None or _is_host(device) else self.cuda(device)
        return Tensor.to(t, dtype=dtype)

    def get_device(self):
        return -1  # torch's index of the host

    @property
    def device(self):
        return device("cpu")

    @property
    def is_cuda(self):
        return False

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = "" if self.dtype is float32 else f", dtype=torch.{self.dtype.name}"
        return f"tensor({body}{extra})"


def _legacy(cls, dt, where):
    """torch.FloatTensor and its kin: (), sizes, a torch.Size, or data."""

    def make(*args):
        if len(args) == 1 and isinstance(args[0], Size):
            args = tuple(args[0])
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return cls._empty(tuple(int(a) for a in args) if args else (0,), dt,
                              _internal.current(), where)
        if len(args) != 1:
            raise TypeError(f"{where}: pass sizes, a torch.Size or one sequence of data")
        return cls(np.asarray(args[0], dtype=dt.numpy), dt)

    make.__name__ = where.rpartition(".")[2]
    make.__doc__ = (f"{where}(*sizes), {where}(size) or {where}(data): a tensor of "
                    f"{dt.name}, uninitialised or copied from data.")
    return make


FloatTensor = _legacy(_HostTensor, float32, "torch.FloatTensor")
HalfTensor = _legacy(_HostTensor, float16, "torch.HalfTensor")
