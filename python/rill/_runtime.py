# SPDX-License-Identifier: MIT
"""The runtime's lifetime as Python sees it.

Every object that holds a rill handle or device memory remembers the
generation it was made in; rill.shutdown() releases everything in C and
starts a new generation, after which the old objects refuse every call with
InvalidArgumentError and their finalizers do nothing (their memory and
handles are gone already).

At interpreter exit, before Python begins to finalise, the package refuses
new Python host functions and waits for the devices' work, so that every
Python host function has run (or was skipped) while the interpreter could
still take it: a worker thread never calls into an interpreter that is
finalising. A Python host function that never returns therefore holds the
exit, as a non-daemon thread does."""

import atexit
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


def stale_error(fn, what):
    return InvalidArgumentError(
        f"{fn}: this {what} belongs to a rill runtime that rill.shutdown() released; "
        f"create a new {what}")


def closed_error(fn, what):
    return InvalidArgumentError(f"{fn}: this {what} was closed; create a new {what}")


def shutdown():
    """Waits for all work, then releases everything rill holds (every
    stream, event and tensor becomes invalid) and starts afresh at the next
    call: rill_shutdown. Calls that other threads are making meanwhile are
    waited for or refused, as in C, but their tensors (and NumPy arrays
    that view them) die with it: do not shut down while another thread
    still uses its tensors. Raises NotPermittedError from inside a host
    function."""
    from ._errors import check
    with launch_lock:
        check(lib.rill_shutdown())
        life.generation += 1
        for fn in _on_shutdown:
            fn()


def _drain_at_exit():
    with launch_lock:
        life.exiting = True
    from ._host import persistent  # host functions of graphs, which replays may run
    if not pending and not persistent:
        return
    count = ffi.new("int *")
    if lib.rill_device_count(count) != 0:
        return
    dev = ffi.new("rill_device **")
    for i in range(count[0]):
        if lib.rill_device_get(i, dev) == 0:
            lib.rill_device_synchronize(dev[0])  # a sticky error does not matter now
    pending.clear()


atexit.register(_drain_at_exit)
