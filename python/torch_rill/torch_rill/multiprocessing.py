# SPDX-License-Identifier: MIT
"""torch.multiprocessing for rill tensors, as for CUDA tensors: a rill
tensor sent to another process (a Queue, a Pipe, a Process's arguments)
arrives as a tensor on the same memory, not a copy.

The sender pickles a storage as rill's interprocess memory handle of its
block, an interprocess event recorded on the pickling thread's current
stream (the receiver's current stream waits for it, so work the sender had
queued on that stream comes first; a Queue pickles on its feeder thread,
whose current stream is the default stream, as with CUDA), and a slot of a
counter in shared CPU memory that it sets to 1. The receiver maps the block
(rill_ipc_open_mem_handle) and, once its storage dies and the work queued on
its device has run, unmaps it and counts the slot down. Until then the
sender holds the storage, so its pool does not hand the memory out again; it
lets go of the ones counted down at torch.rill.ipc_collect() and
empty_cache(), and at a send while fewer than 64 are held (past that, at the
send that finds twice as many held as the last collection left, so that
sending stays cheap with thousands held). A received tensor sent on to a
third process passes the first sender's handle and slot along, the slot
counted up for the new receiver, so the first sender holds the memory until
every receiver let go. As with CUDA, the first sender must stay alive while
receivers use the memory, and nothing orders the processes' later work on
it but what they arrange."""

import threading

import torch
from multiprocessing.reduction import ForkingPickler
from torch.multiprocessing import reductions as _torch_reductions

from . import _C

_SLOTS = 1024  # counter slots per shared block
_EVERY_SEND = 64  # up to this many held, each send collects

_lock = threading.Lock()  # pickling runs on a Queue's feeder thread too
_free = []  # (counter, slot) ready for a send
_sent = []  # (storage, counter, slot) that a receiver may hold
_events = {}  # (device index, stream id): the interprocess event of its sends
_collect_at = _EVERY_SEND  # a send collects when this many are held


def _take_slot():
    if not _free:
        counter = torch.zeros(_SLOTS, dtype=torch.int64).share_memory_()
        _free.extend((counter, slot) for slot in reversed(range(_SLOTS)))
    counter, slot = _free.pop()
    counter[slot] = 1
    return counter, slot


def ipc_collect():
    """Lets go of the storages sent to other processes that every receiver
    has released (torch.cuda.ipc_collect)."""
    global _collect_at
    with _lock:
        held = []
        for entry in _sent:
            _, counter, slot = entry
            if _C._ipc_count(counter, slot) <= 0:
                _free.append((counter, slot))
            else:
                held.append(entry)
        _sent[:] = held
        _collect_at = max(_EVERY_SEND, 2 * len(held))
    _C._ipc_close_deferred()


def _rebuild_empty(index):
    return torch.UntypedStorage(0, device=torch.device("rill", index))


def _rebuild_storage(index, handle, nbytes, event, counter, slot):
    storage = _C._ipc_open_storage(index, handle, nbytes, counter, slot).untyped_storage()
    torch.rill.current_stream(index).wait_event(event)
    return storage


def _reduce_storage(storage):
    if storage.device.type != "rill":
        return _torch_reductions.reduce_storage(storage)
    index = storage.device.index
    if storage.nbytes() == 0:
        return (_rebuild_empty, (index,))
    if len(_sent) >= _collect_at:  # past _EVERY_SEND, when the held ones doubled
        ipc_collect()
    received = _C._ipc_send_on(storage.data_ptr())
    if received is None:
        handle = _C._ipc_mem_handle(storage.data_ptr())
    stream = torch.rill.current_stream(index)
    with _lock:
        # One event per stream, recorded again at each send: a receiver
        # waits for its latest record, which comes after the one made for
        # it (an interprocess event holds a descriptor while it lives).
        event = _events.get((index, stream.stream_id))
        if event is None:
            event = _events[index, stream.stream_id] = torch.rill.Event(interprocess=True,
                                                                          device=index)
        event.record(stream)
        if received is None:
            counter, slot = _take_slot()
            _sent.append((storage, counter, slot))
        else:  # its first sender holds it, until this receiver counts down too
            handle, counter, slot = received
    return (_rebuild_storage, (index, handle, storage.nbytes(), event, counter, slot))


def _register():
    for cls in torch._storage_classes:
        if cls.__name__ == "UntypedStorage":
            ForkingPickler.register(cls, _reduce_storage)
