# SPDX-License-Identifier: MIT
"""mindspore.hal on rill: streams, events and the memory calls."""

from ... import _memory, _stream
from ..._stream import Event, Stream, StreamContext as StreamCtx  # noqa: F401

current_stream = _stream.current_stream
default_stream = _stream.default_stream
synchronize = _stream.synchronize
memory_allocated = _memory.memory_allocated
max_memory_allocated = _memory.max_memory_allocated
memory_reserved = _memory.memory_reserved
max_memory_reserved = _memory.max_memory_reserved
empty_cache = _memory.empty_cache
reset_peak_memory_stats = _memory.reset_peak_memory_stats
memory_summary = _memory.memory_summary


def set_cur_stream(stream):
    """Makes stream the current stream (mindspore.hal.set_cur_stream)."""
    _stream.set_stream(stream)


def reset_max_memory_allocated(device_target=None):
    """Resets the peak of allocated memory; rill resets the reserved peak with it."""
    _memory.reset_peak_memory_stats()


def reset_max_memory_reserved(device_target=None):
    """Resets the peak of reserved memory; rill resets the allocated peak with it."""
    _memory.reset_peak_memory_stats()


def memory_stats(device_target=None):
    """The pool's statistics under mindspore.hal.memory_stats' names."""
    st = _memory.memory_stats()
    return {
        "total_reserved_memory": st["reserved_bytes.all.current"],
        "total_allocated_memory": st["allocated_bytes.all.current"],
        "total_idle_memory": st["reserved_bytes.all.current"] - st["allocated_bytes.all.current"],
        "max_reserved_memory": st["reserved_bytes.all.peak"],
        "max_allocated_memory": st["allocated_bytes.all.peak"],
    }


__all__ = ["Event", "Stream", "StreamCtx", "current_stream", "default_stream", "empty_cache",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "memory_summary", "reset_max_memory_allocated",
           "reset_max_memory_reserved", "reset_peak_memory_stats", "set_cur_stream",
           "synchronize"]
