# SPDX-License-Identifier: MIT
"""The runtime's lifetime as Python sees it: objects remember the generation
they were made in, and after rill.shutdown() the old ones refuse every
call. At interpreter exit the package refuses new Python host functions
and waits for the devices' work, so no worker calls into a finalising
interpreter; Ctrl-C during that wait ends the process by SIGINT at once."""

import atexit
import os
import signal
import sys
import threading

from ._errors import InvalidArgumentError
from ._ffi import ffi, lib


class _Life:
    generation = 0  # bumped by shutdown()
    exiting = False  # set at interpreter exit: no new Python host functions


life = _Life()

# Held while a Python host function is being launched and while exit or
# shutdown decide that no more may be: no launch slips past the drain.
launch_lock = threading.Lock()

# Python host functions launched and not yet run: token -> (callable, args,
# rill_event * recorded after it, or None). See _host.
pending = {}

# Callables run by shutdown() after the C runtime is gone (the caches of
# the other modules forget their handles).
_on_shutdown = []


def on_shutdown(fn):
    _on_shutdown.append(fn)
    return fn


# Functions run after a wait for a stream, an event or a device has ended
# (the deleters of rill.from_dlpack's tensors whose work is done): the
# modules that keep such things add theirs.
_after_wait = []


def after_wait(fn):
    _after_wait.append(fn)
    return fn


def waited():
    for fn in _after_wait:
        fn()


def stale_error(fn, what):
    return InvalidArgumentError(
        f"{fn}: this {what} belongs to a rill runtime that rill.shutdown() released; "
        f"create a new {what}")


def closed_error(fn, what):
    return InvalidArgumentError(f"{fn}: this {what} was closed; create a new {what}")


def _devices():
    count = ffi.new("int *")
    if lib.rill_device_count(count) != 0:
        return []
    dev = ffi.new("rill_device **")
    out = []
    for i in range(count[0]):
        if lib.rill_device_get(i, dev) == 0:
            out.append(dev[0])
    return out


def shutdown():
    """Waits for all work, then releases everything rill holds (every
    stream, event and tensor becomes invalid) and starts afresh at the next
    call: rill_shutdown. Calls that other threads are making meanwhile are
    waited for or refused, as in C, but their tensors die with it: do not
    shut down while another thread still uses its tensors. Raises NotPermittedError from inside a host
    function. Ctrl-C while it waits for the work raises KeyboardInterrupt
    and releases nothing. Raises NotPermittedError, releasing nothing, while
    a DLPack export of a tensor is alive (a numpy.from_dlpack or
    torch.from_dlpack view, or a capsule not consumed yet): DLPack's
    consumer may use the memory until it calls the deleter."""
    from . import _dlpack, _wait
    from ._errors import check
    _dlpack.refuse_shutdown("rill.shutdown")
    for dev in _devices():
        st = _wait.device(dev)  # interruptible; rill_shutdown's own wait is then short
        if st not in (0, lib.RILL_ERROR_KERNEL_FAILED):
            check(st)
    with launch_lock:
        check(lib.rill_shutdown())
        life.generation += 1
        for fn in _on_shutdown:
            fn()


# Functions that say whether work the interpreter's exit must wait for
# may still be queued beside `pending` (host functions that graphs keep,
# which replays may run): the modules that keep such work add theirs.
_exit_waits_for = []


def exit_waits_for(fn):
    _exit_waits_for.append(fn)
    return fn


def _drain_at_exit():
    with launch_lock:
        life.exiting = True
    if not pending and not any(fn() for fn in _exit_waits_for):
        return
    from . import _wait
    try:
        for dev in _devices():
            _wait.device(dev)  # a sticky error does not matter now
    except KeyboardInterrupt:
        _die_of_sigint()
    pending.clear()


def _die_of_sigint():
    """Ends the process as SIGINT's default action does (see the module)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: nothing more to do for it
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(128 + signal.SIGINT)  # where SIGINT is blocked


atexit.register(_drain_at_exit)
