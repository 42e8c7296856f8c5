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
