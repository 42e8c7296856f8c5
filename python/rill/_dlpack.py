# SPDX-License-Identifier: MIT
"""DLPack export: Tensor.__dlpack__ and __dlpack_device__, so numpy and
torch see a tensor's memory without a copy (torch a CUDA device's as a
CUDA tensor). __dlpack__ waits for the
tensor's event, then returns a capsule whose structures and tensor live in
`_exported` until the consumer calls the deleter; rill.shutdown() refuses
to run while an export is alive (refuse_shutdown)."""

import ctypes
import gc

from . import _wait
from ._errors import check, error
from ._ffi import fast, ffi, lib

_KDL_CPU = 1
_KDL_CUDA = 2
_KDL_FLOAT = 2

_exported = {}  # DLManagedTensor address -> (cdata it lives in, shape cdata, Tensor)


@ffi.callback("void(DLManagedTensor *)")
def _deleter(managed):
    _exported.pop(int(ffi.cast("uintptr_t", managed)), None)


_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# The destructor of a capsule no consumer took: _rill_fast's, in C, where
# the package has it. This one is the fallback (cffi's ABI mode): it reads
# the capsule's pointer and name from the object itself (CPython's
# PyCapsule: the object header, then pointer, then name), because it may
# run while a consumer that refused the capsule has an exception set, when
# no call into the C API may be made through ctypes; that exception is
# lost (the consumer raises SystemError instead).
_POINTER_AT = object.__basicsize__
_NAME_AT = _POINTER_AT + ctypes.sizeof(ctypes.c_void_p)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # Still named "dltensor": no consumer took it, so the producer's deleter runs.
    if ctypes.c_char_p.from_address(capsule + _NAME_AT).value == b"dltensor":
        _exported.pop(ctypes.c_void_p.from_address(capsule + _POINTER_AT).value, None)


_DESTRUCTOR = fast.capsule_destructor if fast is not None else \
    ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def device_of(t):
    """(kDLCPU, 0) for a tensor of a CPU device, (kDLCUDA, N) of cuda:N."""
    dev = t._stream.device
    if dev.kind == "cuda":
        return (_KDL_CUDA, dev.kind_index)
    return (_KDL_CPU, 0)


def export(t, stream, where):
    """The "dltensor" capsule of tensor t (see the module)."""
    ptr = t._valid(where)
    if stream is not None and not isinstance(stream, int):
        raise TypeError(f"{where}: stream must be None or an int, not {type(stream).__name__}")
    if t._event is not None:
        check(_wait.event(t._event))
    managed = ffi.new("DLManagedTensor *")
    shape = ffi.new("int64_t[]", list(t._shape) or [1])
    dl = managed.dl_tensor
    dl.data = ptr
    dl.device.device_type, dl.device.device_id = device_of(t)
    dl.ndim = len(t._shape)
    dl.dtype.code = _KDL_FLOAT
    dl.dtype.bits = t._dtype.itemsize * 8
    dl.dtype.lanes = 1
    dl.shape = shape
    dl.strides = ffi.NULL  # compact, row-major
    dl.byte_offset = 0
    managed.manager_ctx = ffi.NULL
    managed.deleter = _deleter
    address = int(ffi.cast("uintptr_t", managed))
    _exported[address] = (managed, shape, t)
    return _api.PyCapsule_New(address, b"dltensor", _DESTRUCTOR)


def refuse_shutdown(where):
    """Raises NotPermittedError while an export is alive (see the module),
    after a garbage collection has freed the views that only cycles held."""
    if not _exported:
        return
    gc.collect()
    if not _exported:
        return
    shapes = ", ".join(str(entry[2]._shape) for entry in list(_exported.values())[:4])
    more = ", ..." if len(_exported) > 4 else ""
    raise error(lib.RILL_ERROR_NOT_PERMITTED,
                f"{where}: {len(_exported)} DLPack export(s) of rill tensors "
                f"(shapes {shapes}{more}) are still held by their consumers (numpy.from_dlpack or torch.from_dlpack "
                "views, or capsules not consumed yet), and their memory must stay valid until "
                "the consumers release it; delete those arrays and tensors (keep copies: "
                "numpy's .copy(), torch's .clone()), then call rill.shutdown() again")
