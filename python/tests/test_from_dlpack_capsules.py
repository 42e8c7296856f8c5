# SPDX-License-Identifier: MIT
"""rill.from_dlpack of capsules whose fields cannot describe memory: each
is refused with BufferError naming the field, before anything reads past
what the capsule holds. The capsules are forged here with ctypes: a
DLManagedTensor struct and PyCapsule_New, without a producer library."""

import ctypes
import gc
import mmap
import sys

import numpy as np
import pytest

import rill

pytestmark = pytest.mark.usefixtures("cpu_device")


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


_forged = []  # every Forged: a tensor made on one reads its structures until collected


class Forged:
    """A "dltensor" capsule of float32 on the host over a 32-byte buffer,
    with the fields given; the object keeps every structure it points to
    (the capsule has no destructor and its DLManagedTensor no deleter), and
    lives as long as the module, since tensors read them."""

    def __init__(self, shape, strides=None, ndim=None, data=True, shape_null=False,
                 byte_offset=0):
        self.buffer = (ctypes.c_float * 8)(*range(8))
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.managed = m = DLManagedTensor()
        dl = m.dl_tensor
        dl.data = ctypes.addressof(self.buffer) if data is True else data
        dl.device = DLDevice(1, 0)  # kDLCPU
        dl.ndim = len(shape) if ndim is None else ndim
        dl.dtype = DLDataType(2, 32, 1)  # float32
        dl.shape = None if shape_null else ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            dl.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        dl.byte_offset = byte_offset
        self.capsule = _new_capsule(ctypes.addressof(m), b"dltensor", None)
        _forged.append(self)


def refused(forged, field):
    with pytest.raises(BufferError, match=f"rill.from_dlpack: the capsule's {field}"):
        rill.from_dlpack(forged.capsule)


def test_a_forged_capsule_that_is_right_is_taken():
    # The forgery itself is sound: its fields taken as they are.
    f = Forged([2, 2], strides=[1, 2])
    t = rill.from_dlpack(f.capsule)
    assert t.shape == (2, 2) and t.stride() == (1, 2)
    assert t.numpy().tolist() == [[0, 2], [1, 3]]
    f = Forged([3], byte_offset=8)
    assert rill.from_dlpack(f.capsule).numpy().tolist() == [2, 3, 4]


def test_ndim_out_of_range_is_refused():
    refused(Forged([8], ndim=-3), "ndim is -3")
    refused(Forged([8], ndim=1 << 20), "ndim is 1048576")
    refused(Forged([8], ndim=65), "ndim is 65")


def test_a_null_shape_is_refused_unless_no_dimensions():
    refused(Forged([8], shape_null=True), "shape is NULL")
    f = Forged([], shape_null=True)
    t = rill.from_dlpack(f.capsule)
    assert t.shape == () and t.item() == 0.0


def test_shapes_that_no_memory_holds_are_refused():
    refused(Forged([-1]), "shape")
    refused(Forged([1 << 36, 1 << 36]), "shape")  # 2**72 elements: past size_t
    refused(Forged([1 << 61]), "shape")  # 2**63 bytes: past Py_ssize_t
    refused(Forged([3, 1 << 62]), "shape")


def test_strides_that_reach_past_the_address_space_are_refused():
    refused(Forged([1 << 30, 2], strides=[1 << 40, 1]), "strides")  # 2**72 bytes
    refused(Forged([2, 2], strides=[1 << 61, 1]), "strides")  # 2**63 bytes
    # Within Py_ssize_t, but past the end of the address space from data.
    refused(Forged([2, 2], strides=[1 << 60, 1], data=(1 << 64) - (1 << 62)), "data")
    refused(Forged([4], byte_offset=(1 << 64) - 8), "data")


def test_host_memory_whose_first_or_last_byte_is_not_mapped_is_refused():
    # Host memory is checked at its ends (mincore): a shape or strides that
    # fit in the address space but run past the buffer's mapping.
    if not sys.platform.startswith("linux"):
        pytest.skip("the mapping is checked on Linux")
    refused(Forged([8], data=0x100), "data 0x100")  # the page at 0 is never mapped
    refused(Forged([4, 2], strides=[1 << 40, 1]), "data")  # 12 TiB past 32 bytes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = mmap.PAGESIZE
    base = libc.mmap(None, 2 * page, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    assert libc.munmap(base + page, page) == 0  # the page after the buffer: a hole
    try:
        end = base + page - 32  # 8 floats at the end of the mapped page
        f = Forged([8], data=end)
        assert rill.from_dlpack(f.capsule).shape == (8,)
        refused(Forged([9], data=end), "data")  # one element past the mapping
        refused(Forged([2, 2], strides=[8, 1], data=end), "data")
    finally:
        rill.synchronize()
        gc.collect()
        libc.munmap(base, page)


def test_null_data_is_refused_unless_there_are_no_elements():
    refused(Forged([8], data=None), "data is NULL")
    refused(Forged([], data=None), "data is NULL")  # 0-d: one element
    f = Forged([0, 4], data=None)
    t = rill.from_dlpack(f.capsule)
    assert t.shape == (0, 4) and t.numpy().shape == (0, 4)
    assert (t + 1).shape == (0, 4)


def test_a_refused_capsule_stays_unconsumed():
    f = Forged([8], ndim=-3)
    refused(f, "ndim")
    f.managed.dl_tensor.ndim = 1  # mended, the same capsule is taken
    assert rill.from_dlpack(f.capsule).numpy().tolist() == list(np.arange(8, dtype=np.float32))
