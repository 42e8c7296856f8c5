# SPDX-License-Identifier: MIT
"""Ctrl-C during a wait: each wait from Python raises KeyboardInterrupt on
SIGINT, and the work already submitted stays valid, so that once it can
finish the same wait succeeds; at interpreter exit, SIGINT ends a process
that waits for a host function which never returns. Each case runs in a
child process behind a host function that holds its stream until the child
opens it (or 60 s pass), and the parent sends SIGINT once the child waits;
every step has a deadline, so a wait that ignores SIGINT fails the test
instead of hanging the suite."""

import os
import signal
import subprocess
import sys
import time

import pytest

import rill

# Where the package under test is (the source tree's or an installed one).
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(rill.__file__)))

PRELUDE = f"""
import sys, threading
sys.path.insert(0, {PYTHON_DIR!r})
import rill
gate = threading.Event()
s = rill.Stream()
a = rill.ones(4)
s.wait_stream(rill.default_stream())
s.launch_host_func(gate.wait, 60)
with rill.stream(s):
    t = a + 1.0
done = rill.Event()
done.record(s)
"""

# What the child waits for, twice: before SIGINT and after opening the gate.
WAITS = {
    "stream_synchronize": "s.synchronize()",
    "event_synchronize": "done.synchronize()",
    "device_synchronize": "rill.synchronize()",
    "tensor_numpy": "print(t.numpy().tolist())",
    "tensor_numpy_behind_current_stream": "rill.set_stream(s); print(a.numpy().tolist())",
}

CHILD = PRELUDE + """
print("waiting", flush=True)
try:
    {wait}
    print("returned")
except KeyboardInterrupt:
    print("interrupted")
gate.set()
{wait}
print("waited again", s.query(), flush=True)
"""


def _run_and_interrupt(code, deadline_s=30):
    """Runs code in a child, sends it SIGINT 0.5 s after it prints
    "waiting", and returns its (returncode, stdout, stderr)."""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        first = child.stdout.readline()
        assert first == "waiting\n", f"the child did not start: {first!r} {child.stderr.read()}"
        time.sleep(0.5)  # into the wait
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the child ignored SIGINT for {deadline_s} s while it waited; "
                    f"stdout {out!r}, stderr {err!r}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, out, err


@pytest.mark.parametrize("wait", sorted(WAITS))
def test_wait_raises_keyboard_interrupt_and_can_wait_again(wait):
    code, out, err = _run_and_interrupt(CHILD.format(wait=WAITS[wait]))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "interrupted", out
    assert lines[-1] == "waited again True", out
    if wait == "tensor_numpy":
        assert lines[1] == "[2.0, 2.0, 2.0, 2.0]", out


def test_shutdown_raises_keyboard_interrupt_and_releases_nothing():
    code, out, err = _run_and_interrupt(PRELUDE + """
print("waiting", flush=True)
try:
    rill.shutdown()
    print("returned")
except KeyboardInterrupt:
    gate.set()
    print("interrupted", t.numpy().tolist())
rill.shutdown()
print("shut down", flush=True)
""")
    assert code == 0, err
    assert out.splitlines() == ["interrupted [2.0, 2.0, 2.0, 2.0]", "shut down"], out


def test_exit_waiting_for_a_host_function_ends_on_sigint():
    code, out, err = _run_and_interrupt(PRELUDE + """
print("waiting", flush=True)
""")
    assert code == -signal.SIGINT, (code, out, err)


# A kernel that holds its stream until the child opens the gate: rill sees a
# kernel, which ends on its own, so a launch behind it waits for good (as
# CUDA's does) unless Ctrl-C ends the wait.
GATE_KERNEL = f"""
import os, sys, threading
os.environ["RILL_QUEUE_LIMIT"] = "2"
sys.path.insert(0, {PYTHON_DIR!r})
import cffi
import rill
from rill import _ffi
kf = cffi.FFI()
kf.cdef('''
typedef struct rill_dim3 {{ uint32_t x, y, z; }} rill_dim3;
typedef struct rill_block_ctx rill_block_ctx;
typedef struct rill_kernel_desc {{
    const char *name; void (*cpu)(const rill_block_ctx *, const void *);
    const char *cuda_ptx; const char *cuda_entry;
}} rill_kernel_desc;
typedef struct rill_launch {{
    rill_dim3 grid; rill_dim3 block; const void *args; size_t args_size;
    const void *accesses; size_t num_accesses;
}} rill_launch;
int rill_kernel_create(const rill_kernel_desc *desc, void **out);
int rill_launch_kernel(void *stream, void *kernel, const rill_launch *launch);
''')
kl = kf.dlopen(_ffi.library_path)
gate, entered = threading.Event(), threading.Event()

@kf.callback("void(const rill_block_ctx *, const void *)")
def body(ctx, args):
    entered.set()
    gate.wait(60)

name = kf.new("char[]", b"gate")
desc = kf.new("rill_kernel_desc *", {{"name": name, "cpu": body}})
kernel = kf.new("void **")
assert kl.rill_kernel_create(desc, kernel) == 0
s = rill.Stream(device="cpu")  # the gate kernel has a CPU body only
handle = kf.cast("void *", int(_ffi.ffi.cast("uintptr_t", s._handle("test"))))
launch = kf.new("rill_launch *", {{"grid": (1, 1, 1), "block": (1, 1, 1)}})
assert kl.rill_launch_kernel(handle, kernel[0], launch) == 0
entered.wait(60)
assert kl.rill_launch_kernel(handle, kernel[0], launch) == 0  # the queue is full: 2 of 2
ran = []
print("waiting", flush=True)
try:
    s.launch_host_func(ran.append, 1)
    print("returned")
except KeyboardInterrupt:
    print("interrupted", flush=True)
gate.set()
s.launch_host_func(ran.append, 2)
s.synchronize()
print("ran", ran, flush=True)
"""


def test_launch_waiting_for_room_raises_keyboard_interrupt():
    """A host function's launch that finds its stream's queue full behind a
    kernel waits until the device drains it, and Ctrl-C ends that wait
    without launching anything; once the kernel ends, launches go on."""
    code, out, err = _run_and_interrupt(GATE_KERNEL)
    assert code == 0, err
    assert out.splitlines() == ["interrupted", "ran [2]"], out
