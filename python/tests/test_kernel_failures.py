# SPDX-License-Identifier: MIT
"""Sticky errors from kernels, as Python sees them: a kernel that calls
rill_kernel_fail (made here through cffi, as a C program makes one) fails
its stream; ops and numpy() after it raise KernelFailedError with the
kernel's message, streams that wait on it fail too, and clear_error()
recovers."""

import cffi
import numpy as np
import pytest

import rill
from rill._ffi import ffi as rill_ffi

# The failing kernels are C functions: the CPU device.
pytestmark = pytest.mark.usefixtures("cpu_device")

kffi = cffi.FFI()
kffi.cdef("""
typedef struct rill_stream rill_stream;
typedef struct rill_kernel rill_kernel;
typedef struct rill_dim3 { uint32_t x, y, z; } rill_dim3;
typedef struct rill_block_ctx {
    rill_dim3 block_idx; rill_dim3 grid_dim; int worker; void *state;
} rill_block_ctx;
typedef void (*rill_cpu_kernel_fn)(const rill_block_ctx *ctx, const void *args);
typedef struct rill_kernel_desc {
    const char *name; rill_cpu_kernel_fn cpu; const char *cuda_ptx; const char *cuda_entry;
} rill_kernel_desc;
typedef struct rill_access { const void *ptr; size_t bytes; int mode; } rill_access;
typedef struct rill_launch {
    rill_dim3 grid; rill_dim3 block; const void *args; size_t args_size;
    const rill_access *accesses; size_t num_accesses;
} rill_launch;
void rill_kernel_fail(const rill_block_ctx *ctx, const char *message);
int rill_kernel_create(const rill_kernel_desc *desc, rill_kernel **out);
int rill_kernel_destroy(rill_kernel *kernel);
int rill_launch_kernel(rill_stream *stream, rill_kernel *kernel, const rill_launch *launch);
""")
klib = kffi.dlopen(rill.library_path)


@kffi.callback("void(const rill_block_ctx *, const void *)")
def _failing_body(ctx, args):
    klib.rill_kernel_fail(ctx, b"kernel said no: input out of range")


@pytest.fixture(scope="module")
def failing_kernel():
    name = kffi.new("char[]", b"py_failing_kernel")
    desc = kffi.new("rill_kernel_desc *", {"name": name, "cpu": _failing_body})
    out = kffi.new("rill_kernel **")
    assert klib.rill_kernel_create(desc, out) == 0
    yield out[0]
    klib.rill_kernel_destroy(out[0])


def launch_failing(stream, kernel):
    launch = kffi.new("rill_launch *", {"grid": (1, 1, 1), "block": (1, 1, 1)})
    handle = kffi.cast("rill_stream *", int(rill_ffi.cast("uintptr_t", stream._h)))
    assert klib.rill_launch_kernel(handle, kernel, launch) == 0


def test_ops_after_a_failed_kernel_are_skipped_and_numpy_raises(failing_kernel):
    s = rill.Stream(name="py-kernel-fail")
    a = rill.Tensor(np.arange(4, dtype=np.float32))
    rill.synchronize()
    launch_failing(s, failing_kernel)
    with rill.stream(s):
        try:
            b = a + 1
        except rill.KernelFailedError:
            b = None
    if b is not None:
        with pytest.raises(rill.KernelFailedError, match="kernel said no"):
            b.numpy()
    with pytest.raises(rill.KernelFailedError) as info:
        s.synchronize()
    assert "kernel 'py_failing_kernel' on stream 'py-kernel-fail' failed" in str(info.value)
    assert info.value.python_traceback is None
    with pytest.raises(rill.KernelFailedError):
        rill.synchronize()
    s.clear_error()
    with rill.stream(s):
        c = a + 1
    assert c.numpy().tolist() == [1, 2, 3, 4]


def test_streams_waiting_on_a_failed_kernel_fail_and_recover(failing_kernel):
    s1, s2 = rill.Stream(), rill.Stream()
    ev = rill.Event()
    launch_failing(s1, failing_kernel)
    ev.record(s1)
    s2.wait_event(ev)
    ran = []
    s2.launch_host_func(ran.append, 1)
    with pytest.raises(rill.KernelFailedError, match="kernel said no"):
        s2.synchronize()
    with pytest.raises(rill.KernelFailedError):
        ev.synchronize()
    assert ran == []
    s1.clear_error()
    s2.clear_error()
    s2.launch_host_func(ran.append, 2)
    s2.synchronize()
    assert ran == [2]
