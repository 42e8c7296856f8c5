# SPDX-License-Identifier: MIT
"""torch.cuda (and torch.npu) on rill: streams, events, the current stream,
synchronize, graphs and the memory calls, on rill's device."""

from ... import _device, _memory, _stream
from ..._graph import Graph as CUDAGraph, graph
from ..._stream import StreamContext
from ._tensor import _device_arg, _on

memory_allocated = _memory.memory_allocated
max_memory_allocated = _memory.max_memory_allocated
memory_reserved = _memory.memory_reserved
max_memory_reserved = _memory.max_memory_reserved
reset_peak_memory_stats = _memory.reset_peak_memory_stats
empty_cache = _memory.empty_cache
memory_stats = _memory.memory_stats
memory_summary = _memory.memory_summary


class Stream(_stream.Stream):
    """torch.cuda.Stream(device=None, priority=0): a rill.Stream on device
    (None: the current device; lower priority numbers run first)."""

    __slots__ = ()

    def __init__(self, device=None, priority=0, **kwargs):
        super().__init__(priority=priority, device=_device_arg(device, "torch.cuda.Stream"))


class Event(_stream.Event):
    """torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False):
    a rill.Event; record() and wait() take the current stream by default."""

    __slots__ = ()

    @classmethod
    def from_ipc_handle(cls, device, handle):
        """Reconstructs an event from Event.ipc_handle() of this or another
        process; device names the exporter's device ('cuda:0'), which the
        handle names too (DeviceMismatchError when they differ)."""
        return super().from_ipc_handle(
            _device_arg(device, "torch.cuda.Event.from_ipc_handle"), handle)


class device:
    """`with torch.cuda.device(d):` makes d (an index, a str or a
    torch.device; -1 or None does nothing) the current device for the
    block."""

    def __init__(self, device):
        self._index = None if device is None or device == -1 else \
            _device_arg(device, "torch.cuda.device")
        self._on = None

    def __enter__(self):
        self._on = _on(self._index)
        self._on.__enter__()
        return self

    def __exit__(self, *exc):
        return self._on.__exit__(*exc)


def set_device(device):
    """Makes device the calling thread's current device."""
    index = _device_arg(device, "torch.cuda.set_device")
    if index is not None:
        _device.set_device(index)


def stream(s):
    """`with torch.cuda.stream(s):` makes s the current stream, and its
    device the current device; None does nothing."""
    return StreamContext(s)


def current_stream(device=None):
    """The calling thread's current stream of device (None: the current one)."""
    return _stream.current_stream(_device_arg(device, "torch.cuda.current_stream"))


def default_stream(device=None):
    """The default stream of device (None: the current one)."""
    return _stream.default_stream(_device_arg(device, "torch.cuda.default_stream"))


def set_stream(s):
    """Makes s the calling thread's current stream, and its device the
    current device, as torch does."""
    if s is not None:
        _device.set_device(s.device)
    _stream.set_stream(s)


def synchronize(device=None):
    """Waits for the work of every stream of device (None: the current one)."""
    _stream.synchronize(_device_arg(device, "torch.cuda.synchronize"))


def is_available():
    """True: rill always has a device."""
    return _device.device_count() > 0


def device_count():
    return _device.device_count()


def current_device():
    """The index of the current device."""
    return _device.current_device().index


__all__ = ["CUDAGraph", "Event", "Stream", "StreamContext", "current_device", "current_stream",
           "default_stream", "device", "device_count", "set_device", "empty_cache", "graph", "is_available",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "memory_summary", "reset_peak_memory_stats", "set_stream", "stream",
           "synchronize"]
