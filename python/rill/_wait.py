# SPDX-License-Identifier: MIT
"""Waits that Ctrl-C interrupts.

Python handles signals on the main thread only, between bytecodes: a wait
there that sleeps in one C call would hold SIGINT back until the work is
done, forever behind a host function that never returns. So the main
thread waits in slices of SLICE_NS with the timed calls of rill.h
(rill_*_synchronize_for, which never run the awaited work on the calling
thread), and Python runs its signal handlers between them: KeyboardInterrupt
is raised out of the wait, and the work already submitted runs on and can be
waited for again. Each slice waits for the work submitted before it, so a
wait that other threads keep feeding may last longer than one call would.
Other threads cannot be interrupted and wait in one call, which may run the
awaited work on the waiting thread (rill_stream_synchronize)."""

import threading

from ._ffi import lib

SLICE_NS = 50_000_000  # 50 ms: Ctrl-C answered within that

_main = threading.main_thread().ident


def _sliced(timed, plain, handle, _ident=threading.get_ident, _not_ready=lib.RILL_NOT_READY):
    if _ident() != _main:
        return plain(handle)
    st = timed(handle, SLICE_NS)
    while st == _not_ready:
        st = timed(handle, SLICE_NS)  # the loop's back edge runs the signal handlers
    return st


def stream(handle):
    """rill_stream_synchronize(handle), interruptible on the main thread."""
    return _sliced(lib.rill_stream_synchronize_for, lib.rill_stream_synchronize, handle)


def event(handle):
    """rill_event_synchronize(handle), interruptible on the main thread."""
    return _sliced(lib.rill_event_synchronize_for, lib.rill_event_synchronize, handle)


def device(handle):
    """rill_device_synchronize(handle), interruptible on the main thread."""
    return _sliced(lib.rill_device_synchronize_for, lib.rill_device_synchronize, handle)
