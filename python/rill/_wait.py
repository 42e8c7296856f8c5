# SPDX-License-Identifier: MIT
"""Waits that Ctrl-C interrupts: the main thread waits in slices of SLICE_NS
with rill's timed synchronize calls, so Python runs its signal handlers
between them and KeyboardInterrupt leaves the wait while the work runs
on. Other threads wait in one call, which may run the awaited work.
room() is the wait of a launch that finds its stream's queue full (rill.h,
"Queue bounds"), made before a host function's launch; other launches wait
in C, as long as the device takes to run half a queue of kernels, or
200 ms behind a host function."""

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


def room(handle):
    """rill_stream_make_room_for until the stream's queue has room,
    interruptible on the main thread (a no-op on other threads, whose
    launch waits itself)."""
    if threading.get_ident() != _main:
        return lib.RILL_OK
    return _sliced(lib.rill_stream_make_room_for, None, handle)


def device(handle):
    """rill_device_synchronize(handle), interruptible on the main thread."""
    return _sliced(lib.rill_device_synchronize_for, lib.rill_device_synchronize, handle)
