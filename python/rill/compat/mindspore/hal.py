# SPDX-License-Identifier: MIT
"""mindspore.hal on rill: streams, events and the memory calls."""

from ... import Event, Stream, StreamContext as StreamCtx  # noqa: F401
from ... import (current_stream, default_stream, empty_cache, max_memory_allocated,
                 max_memory_reserved, memory_allocated, memory_reserved, memory_summary,
                 reset_peak_memory_stats, synchronize)
from ... import memory_stats as _memory_stats, set_stream as _set_stream


def set_cur_stream(stream):
    """Makes stream the current stream (mindspore.hal.set_cur_stream)."""
    _set_stream(stream)


def reset_max_memory_allocated(device_target=None):
    """Resets the peak of allocated memory; rill resets the reserved peak with it."""
    reset_peak_memory_stats()


def reset_max_memory_reserved(device_target=None):
    """Resets the peak of reserved memory; rill resets the allocated peak with it."""
    reset_peak_memory_stats()


def memory_stats(device_target=None):
    """The pool's statistics under mindspore.hal.memory_stats' names."""
    st = _memory_stats()
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
