# SPDX-License-Identifier: MIT
"""rill.from_dlpack: a rill tensor on another library's memory, without a
copy (DLPack's consumer side; rill._dlpack is the producer's). The tensor
keeps the producer's memory through the capsule's DLManagedTensor; when it
is collected, an event is recorded on its stream, and the producer's
deleter runs once that event has completed: at the next wait that ends
(synchronize), from_dlpack or release of such a tensor that finds it
complete, or at rill.shutdown()."""

import collections
import ctypes
import errno
import mmap
import sys

from . import _device, _stream
from ._core import build, new, new_event
from ._dtype import float16, float32, numel as numel_of
from ._errors import check, error
from ._ffi import ffi, lib
from ._layout import contiguous_strides
from ._runtime import after_wait, on_shutdown
from ._tensor import Tensor

_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST = 1, 2, 3
_KDL_FLOAT = 2
_DTYPES = {(_KDL_FLOAT, 32): float32, (_KDL_FLOAT, 16): float16}
_KIND_NAMES = {_KDL_CPU: "CPU", _KDL_CUDA: "CUDA", _KDL_CUDA_HOST: "CUDA host"}

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# mincore(2), which fails with ENOMEM for an address that no mapping holds:
# how host memory is checked, on Linux.
_mincore = None
if sys.platform.startswith("linux"):
    try:
        _mincore = ctypes.CDLL(None, use_errno=True).mincore
        _mincore.restype = ctypes.c_int
        _mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    except (AttributeError, OSError):
        _mincore = None
_PAGE = mmap.PAGESIZE
_PAGES_AT_ONCE = 64  # a range of at most this many pages is checked whole, in one call
_page_state = ctypes.create_string_buffer(_PAGES_AT_ONCE)

_live = {}  # id(_Import) -> _Import, of tensors not yet collected
_pending = collections.deque()  # (event, device, _Import): deleters awaiting their work


class _Import:
    """The owner of a tensor made by from_dlpack: the producer's
    DLManagedTensor, whose deleter runs once (release, then reap)."""

    __slots__ = ("managed", "__weakref__")

    def __init__(self, managed):
        self.managed = managed
        _live[id(self)] = self

    def release(self, t):
        """t was collected: its stream's work so far is the last that may
        use the memory. Runs in a finalizer: C calls and deque appends only."""
        _live.pop(id(self), None)
        s = t._stream
        ev = t._event
        t._event = None
        if s._closed:
            ev = None  # the device's synchronize stands in (reap)
        else:
            if ev is None:
                ev = s._events.pop() if s._events else new_event()
            if lib.rill_event_record(ev, s._h) != 0:
                ev = None
        _pending.append((ev, s.device._h, self))
        _reap()

    def delete(self):
        managed, self.managed = self.managed, None
        if managed is not None and managed.deleter != ffi.NULL:
            managed.deleter(managed)


@after_wait
def _reap(ended=False):
    """Runs the deleters whose stream work has completed; all of them when
    ended (rill.shutdown() ended all work and released the events)."""
    for _ in range(len(_pending)):
        try:
            ev, dev, owner = _pending.popleft()
        except IndexError:  # another thread reaped the rest
            return
        if ended:
            pass
        elif ev is None:  # the tensor's stream was closed: its device's work stands in
            if lib.rill_device_synchronize(dev) not in (0, lib.RILL_ERROR_KERNEL_FAILED):
                _pending.append((ev, dev, owner))
                continue
        elif lib.rill_event_query(ev) == lib.RILL_NOT_READY:
            _pending.append((ev, dev, owner))
            continue
        else:
            lib.rill_event_destroy(ev)
        owner.delete()


@on_shutdown
def _release_all():
    """rill.shutdown() waited for all work and released the events: every
    deleter runs, the live tensors' too (their memory is theirs no more)."""
    _reap(ended=True)
    for owner in list(_live.values()):
        owner.delete()
    _live.clear()


def _device_for(kind, index, where):
    if kind == _KDL_CUDA:
        return _device.device(f"cuda:{index}")
    if kind in (_KDL_CPU, _KDL_CUDA_HOST):
        cur = _device.current_device()
        return cur if cur.kind == "cpu" else _device.device("cpu")
    raise BufferError(f"{where}: the tensor is in memory of DLPack device type {kind}; rill "
                      "takes CPU (1), CUDA (2) and CUDA host (3) memory: copy it to one of "
                      "those first")


def from_dlpack(x, cls=Tensor):
    """A rill tensor on x's memory without a copy (numpy arrays, PyTorch
    tensors, anything with __dlpack__, or a "dltensor" capsule): float32 or
    float16, its shape and non-negative strides. Host memory goes to rill's
    CPU device (the current one when it is a CPU device), CUDA memory of
    device N to rill's cuda:N, and the tensor to that device's current
    stream: there, a CUDA producer orders the stream after its pending
    writes (DLPack's stream argument), without blocking the host.

    Writes through either side show on the other. x's memory stays
    allocated while the tensor lives and until the work on its stream
    submitted before it was collected has completed; work on other streams
    that uses it must be ordered before that (or synchronized), as
    PyTorch's record_stream asks of its own memory."""
    where = "rill.from_dlpack"
    _reap()
    if hasattr(x, "__dlpack__"):
        kind, index = x.__dlpack_device__()
        dev = _device_for(kind, index, where)
        s = _stream.current_stream(dev)
        arg = None
        if kind == _KDL_CUDA:
            native = ffi.new("void **")
            check(lib.rill_stream_native(s._handle(where), native))
            arg = int(ffi.cast("uintptr_t", native[0]))
        capsule = x.__dlpack__(stream=arg)
    else:
        capsule, s = x, None
    if type(capsule).__name__ == "PyCapsule" and _api.PyCapsule_IsValid(capsule,
                                                                        b"used_dltensor"):
        raise BufferError(f"{where}: this DLPack capsule was consumed already, and a capsule "
                          "is used once; pass the tensor itself (its __dlpack__ makes a new one)")
    if not _api.PyCapsule_IsValid(capsule, b"dltensor"):
        raise TypeError(f"{where}: takes an object with __dlpack__ or an unused 'dltensor' "
                        f"capsule, not {type(x).__name__}")
    managed = ffi.cast("DLManagedTensor *", _api.PyCapsule_GetPointer(capsule, b"dltensor"))
    dl = managed.dl_tensor
    if s is None:
        s = _stream.current_stream(_device_for(dl.device.device_type, dl.device.device_id, where))
    # Refused (raised above or below): the capsule stays unconsumed, and its
    # destructor calls the deleter.
    ptr, shape, n, dt, strides = _described(dl, where)
    t = new(cls)
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return build(t, ptr, shape, n, dt, s, owner=_Import(managed), strides=strides)


# The most dimensions a capsule may have (numpy's NPY_MAXDIMS and PyTorch's
# limit), and the most bytes a tensor may span (Py_ssize_t, below size_t).
_MAX_NDIM = 64
_MAX_BYTES = (1 << 63) - 1
_ADDRESS_END = 1 << (8 * ffi.sizeof("void *"))


def _broken(where, field, what):
    return BufferError(f"{where}: the capsule's {field} {what}; its producer made a DLTensor "
                       "that describes no memory (DLPack: ndim 0 or more, a shape of as many "
                       "dimensions 0 or more, data that holds them): pass a tensor of another "
                       "producer, or a copy")


def _unmapped(first, last):
    """The first of the host addresses first and last that no mapping of
    this process holds, or None (also where that cannot be told). A range
    of a few pages is checked whole, in one call."""
    if _mincore is None:
        return None
    start = first - first % _PAGE
    if last - start < _PAGES_AT_ONCE * _PAGE:
        if _mincore(start, last + 1 - start, _page_state) == 0 or \
                ctypes.get_errno() != errno.ENOMEM:
            return None
        return first if _mincore(start, 1, _page_state) != 0 else last
    for address in (first, last):
        if _mincore(address - address % _PAGE, 1, _page_state) != 0 and \
                ctypes.get_errno() == errno.ENOMEM:
            return address
    return None


def _described(dl, where):
    """The fields of a tensor on the memory that DLTensor dl describes
    (ptr, shape, numel, dtype, strides), once its fields are found to
    describe memory: ndim 0 to 64, a shape
    (and strides) whose elements and bytes fit in Py_ssize_t and, from data
    plus byte_offset, in the address space, and data other than NULL
    unless there are no elements; for host memory, mapped at its first and
    last byte, and between them when they are a few pages apart (on
    Linux). The shape and strides are read only after ndim
    passed."""
    dt = _DTYPES.get((dl.dtype.code, dl.dtype.bits))
    if dt is None or dl.dtype.lanes != 1:
        raise TypeError(f"{where}: the tensor's DLPack dtype (code {dl.dtype.code}, "
                        f"{dl.dtype.bits} bits, {dl.dtype.lanes} lanes) is not float32 or "
                        "float16; convert it first (x.float())")
    ndim = int(dl.ndim)
    if not 0 <= ndim <= _MAX_NDIM:
        raise _broken(where, "ndim", f"is {ndim}, not 0 to {_MAX_NDIM}")
    if ndim and dl.shape == ffi.NULL:
        raise _broken(where, "shape", f"is NULL for ndim {ndim}")
    shape = tuple(int(dl.shape[i]) for i in range(ndim))
    if any(d < 0 for d in shape):
        raise _broken(where, "shape", f"{shape} has a negative dimension")
    numel = numel_of(shape)
    item = dt.itemsize
    if numel * item > _MAX_BYTES:
        raise _broken(where, "shape", f"{shape} holds {numel} elements of {item} bytes, more "
                      f"than any memory holds ({_MAX_BYTES} bytes at most)")
    strides = None
    span = numel * item  # bytes from the first element to past the last
    if dl.strides != ffi.NULL and ndim > 0:
        given = tuple(int(dl.strides[i]) for i in range(ndim))
        if any(st < 0 for st in given):
            raise BufferError(f"{where}: the tensor has negative strides {given}; rill's views "
                              "take strides of 0 or more: pass a copy (x.contiguous())")
        if numel:
            span = (sum((d - 1) * st for d, st in zip(shape, given)) + 1) * item
            if span > _MAX_BYTES:
                raise _broken(where, "strides", f"{given} over shape {shape} span {span} bytes, "
                              f"more than any memory holds ({_MAX_BYTES} bytes at most)")
        if given != tuple(contiguous_strides(shape)):
            strides = given
    data = int(ffi.cast("uintptr_t", dl.data))
    if numel and data == 0:
        raise _broken(where, "data", f"is NULL for {numel} element(s)")
    if numel and data + dl.byte_offset + span > _ADDRESS_END:
        raise _broken(where, "data", f"{data:#x} plus byte_offset {dl.byte_offset} and the "
                      f"{span} bytes of the tensor pass the end of the address space")
    if numel and dl.device.device_type in (_KDL_CPU, _KDL_CUDA_HOST):
        first = data + dl.byte_offset
        address = _unmapped(first, first + span - 1)
        if address is not None:
            raise _broken(where, "data", f"{data:#x} plus byte_offset {dl.byte_offset} "
                          f"and the tensor's {span} bytes reach {address:#x}, host memory "
                          "that no mapping of this process holds")
    return (ffi.cast("void *", ffi.cast("char *", dl.data) + dl.byte_offset), shape, numel, dt,
            strides)
