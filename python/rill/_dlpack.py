# SPDX-License-Identifier: MIT
"""DLPack export: Tensor.__dlpack__ and __dlpack_device__, so numpy and
torch see a tensor's memory without a copy. __dlpack__ waits for the
tensor's event, then returns a capsule whose structures and tensor live in
`_exported` until the consumer calls the deleter; rill.shutdown() refuses
to run while an export is alive (refuse_shutdown)."""

import ctypes
import gc

from . import _wait
from ._errors import check, error
from ._ffi import ffi, lib

_KDL_CPU = 1
_KDL_FLOAT = 2

_exported = {}  # DLManagedTensor address -> (cdata it lives in, shape cdata, Tensor)


@ffi.callback("void(DLManagedTensor *)")
def _deleter(managed):
    _exported.pop(int(ffi.cast("uintptr_t", managed)), None)


_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # Still named "dltensor": no consumer took it, so the producer's deleter runs.
    if _api.PyCapsule_IsValid(capsule, b"dltensor"):
        ptr = _api.PyCapsule_GetPointer(capsule, b"dltensor")
        _exported.pop(ptr, None)


_DESTRUCTOR = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


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
    dl.device.device_type = _KDL_CPU
    dl.device.device_id = 0
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
