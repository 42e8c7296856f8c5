# SPDX-License-Identifier: MIT
"""Python callables as host functions: stream order, the GIL, exceptions as
sticky errors with the Python traceback, and interpreter exit with host
functions pending (in child interpreters)."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import rill
from rill import _runtime

# Where the package under test is (the source tree's or an installed one).
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(rill.__file__)))


def test_host_functions_run_in_stream_order_with_their_arguments():
    s = rill.Stream()
    seen = []
    for i in range(50):
        s.launch_host_func(seen.append, i)
    s.synchronize()
    assert seen == list(range(50))


def test_host_functions_run_holding_the_gil_on_a_worker_or_the_waiting_thread():
    # A worker runs it, or the thread that synchronizes when no worker is
    # awake (rill's waiting thread does the work); either holds the GIL.
    s = rill.Stream()
    seen = {}

    def record():
        seen["thread"] = threading.get_ident()
        seen["objects"] = len([x for x in range(1000)])  # Python work needs the GIL
    for _ in range(20):
        seen.clear()
        s.launch_host_func(record)
        s.synchronize()
        assert seen["objects"] == 1000
    ready = threading.Event()
    s.launch_host_func(ready.wait, 10)
    s.launch_host_func(record)
    threading.Timer(0.05, ready.set).start()
    s.synchronize()
    assert seen["objects"] == 1000


def test_host_functions_of_many_streams_and_threads_all_run():
    streams = [rill.Stream() for _ in range(4)]
    counts = [0] * 4
    lock = threading.Lock()

    def bump(i):
        with lock:
            counts[i] += 1

    def submit(i):
        for _ in range(200):
            streams[i].launch_host_func(bump, i)
    threads = [threading.Thread(target=submit, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rill.synchronize()
    assert counts == [200] * 4


def test_host_function_orders_with_ops_on_the_stream():
    s = rill.Stream()
    a = rill.ones(16)
    rill.synchronize()
    seen = []
    with rill.stream(s):
        b = a + 1
        s.launch_host_func(lambda: seen.append(b.stream is s))
        c = b * 3
    assert c.numpy().tolist() == [6.0] * 16
    assert seen == [True]


def raises_value_error(value):
    raise ValueError(f"bad value {value}")


def test_exception_becomes_the_sticky_error_with_the_python_traceback():
    s = rill.Stream(name="py-host-fail")
    after = []
    s.launch_host_func(raises_value_error, 42)
    s.launch_host_func(after.append, "skipped")
    with pytest.raises(rill.KernelFailedError) as info:
        s.synchronize()
    exc = info.value
    text = str(exc)
    assert "host function on stream 'py-host-fail' failed" in text
    assert "ValueError: bad value 42" in text
    assert "raises_value_error" in text
    assert "test_host_functions.py" in text
    assert exc.python_traceback.startswith("Traceback (most recent call last):")
    assert "raise ValueError" in exc.python_traceback
    assert "_trampoline" not in exc.python_traceback  # rill's own frame is left out
    assert isinstance(exc.__cause__, ValueError)
    assert after == []
    with pytest.raises(rill.KernelFailedError):
        s.query()  # still sticky
    s.clear_error()
    s.launch_host_func(after.append, "after clear")
    s.synchronize()
    assert after == ["after clear"]


def test_streams_waiting_on_a_failed_host_function_fail_with_its_traceback():
    s1, s2 = rill.Stream(), rill.Stream()
    ran = []
    s1.launch_host_func(raises_value_error, "root")
    s2.wait_stream(s1)
    s2.launch_host_func(ran.append, 1)
    with pytest.raises(rill.KernelFailedError) as info:
        s2.synchronize()
    assert "bad value root" in str(info.value)
    assert info.value.python_traceback is not None
    assert ran == []
    s1.clear_error()
    s2.clear_error()


def test_ops_and_numpy_after_a_failed_host_function_raise():
    s = rill.Stream()
    a = rill.ones(4)
    rill.synchronize()
    s.launch_host_func(raises_value_error, "op")
    with rill.stream(s):
        try:
            b = a + 1
        except rill.KernelFailedError:
            b = None  # the op's submit may see the error already
    if b is not None:
        with pytest.raises(rill.KernelFailedError):
            b.numpy()
    s.clear_error()


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_base_exceptions_in_host_functions_fail_the_stream_only(exc_type):
    s = rill.Stream()

    def raise_it():
        raise exc_type("from a host function")
    s.launch_host_func(raise_it)
    with pytest.raises(rill.KernelFailedError, match=exc_type.__name__):
        s.synchronize()
    s.clear_error()


def test_long_exception_message_is_cut_in_the_sentence_and_whole_in_the_traceback():
    s = rill.Stream()
    long = "x" * 3000

    def raise_long():
        raise RuntimeError(long)
    s.launch_host_func(raise_long)
    with pytest.raises(rill.KernelFailedError) as info:
        s.synchronize()
    assert long in info.value.python_traceback
    assert len(str(info.value).split("\n")[0]) < 1100
    s.clear_error()


def test_blocking_calls_inside_a_host_function_raise_not_permitted():
    s = rill.Stream()
    t = rill.ones(4)
    seen = []

    def block():
        for call in (s.synchronize, rill.synchronize, t.numpy, rill.shutdown,
                     rill.Event().synchronize):
            try:
                call()
            except rill.NotPermittedError as exc:
                seen.append(type(exc))
    s.launch_host_func(block)
    s.synchronize()
    assert seen == [rill.NotPermittedError] * 5


def test_host_function_may_launch_host_functions():
    s = rill.Stream()
    seen = []
    s.launch_host_func(lambda: s.launch_host_func(seen.append, "inner"))
    s.synchronize()  # the inner one was submitted before the outer returned
    s.synchronize()
    assert seen == ["inner"]


def test_launch_host_func_needs_a_callable():
    s = rill.Stream()
    before = len(_runtime.pending)
    with pytest.raises(TypeError, match="callable"):
        s.launch_host_func(42)
    assert len(_runtime.pending) == before


def test_skipped_host_functions_do_not_accumulate():
    s = rill.Stream()
    for _ in range(10):
        s.launch_host_func(raises_value_error, 0)
        for _ in range(100):
            s.launch_host_func(print, "never printed")
        with pytest.raises(rill.KernelFailedError):
            s.synchronize()
        s.clear_error()
    s.launch_host_func(lambda: None)
    s.synchronize()
    assert len(_runtime.pending) <= 256


def _child(code):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_exit_waits_for_pending_host_functions_which_run_normally():
    run = _child("""
        import threading, rill
        s = rill.Stream()
        gate = threading.Event()
        def wait_then_print():
            gate.wait(10)
            print("host function ran at exit")
        s.launch_host_func(wait_then_print)
        s.launch_host_func(print, "and the next one")
        import atexit
        atexit.register(gate.set)  # runs before rill's handler: both are still pending then
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["host function ran at exit", "and the next one"]


def test_exit_with_a_failing_host_function_and_tensors_alive_does_not_crash():
    run = _child("""
        import rill
        s = rill.Stream()
        t = rill.ones(1000)
        with rill.stream(s):
            u = t + 1
        def fail():
            raise ValueError("at exit")
        s.launch_host_func(fail)
        s.launch_host_func(print, "skipped")
        keep = [rill.ones(10) for _ in range(100)]
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert "Fatal" not in run.stderr and "Traceback" not in run.stderr


def test_exit_right_after_ops_never_crashes():
    # The interpreter closes librill.so at finalisation while the library's
    # workers still run (they sleep, and wake); the library must stay mapped.
    for _ in range(5):
        run = _child("""
            import rill
            a = rill.ones(2, 3)
            print(a + a)
        """)
        assert run.returncode == 0, (run.returncode, run.stderr)


def test_host_function_launched_during_exit_is_refused():
    run = _child("""
        import time, rill
        from rill._runtime import life
        s = rill.Stream()
        def hold():  # until rill's exit handler runs: it waits for the stream
            for _ in range(10000):
                if life.exiting:
                    return
                time.sleep(0.001)
        def relaunch():
            try:
                s.launch_host_func(print, "never")
            except rill.NotPermittedError as exc:
                print("refused:", "exiting" in str(exc))
        def at_exit():  # runs before rill's handler
            s.launch_host_func(hold)
            s.launch_host_func(relaunch)
        import atexit
        atexit.register(at_exit)
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["refused: True"]


def test_daemon_threads_launching_while_the_interpreter_exits_cause_no_crash():
    code = """
        import threading, rill
        s = rill.Stream()
        started = threading.Event()
        count = [0]
        def bump():
            count[0] += 1
        def launcher():
            while True:
                try:
                    s.launch_host_func(bump)
                except rill.NotPermittedError:
                    return
                if count[0] > 20:
                    started.set()
        threading.Thread(target=launcher, daemon=True).start()
        started.wait(10)
    """
    for _ in range(5):
        run = _child(code)
        assert run.returncode == 0, run.stderr
        assert "Fatal" not in run.stderr
