# SPDX-License-Identifier: MIT
"""torch.cuda (and torch.npu) on rill: streams, events, the current stream,
synchronize, graphs and the memory calls, on rill's device."""

import threading
import time

import rill as _rill

from ... import (Graph as CUDAGraph, StreamContext, _internal, empty_cache, graph,
                 max_memory_allocated, max_memory_reserved, memory_allocated,
                 memory_reserved, memory_stats, memory_summary, reset_peak_memory_stats)
from ... import float16 as _float16, float32 as _float32
from ._tensor import Tensor, _device_arg, _legacy, _on, _torch_index


class Stream(_rill.Stream):
    """torch.cuda.Stream(device=None, priority=0): a rill.Stream on device
    (None: the current device; lower priority numbers run first).
    `with torch.cuda.Stream() as s:` makes it current for the block. The
    default and tagged streams that the calls below return are of this
    class too."""

    __slots__ = ()

    def __init__(self, device=None, priority=0, **kwargs):
        super().__init__(priority=priority, device=_device_arg(device, "torch.cuda.Stream"))

    @property
    def cuda_stream(self):
        """The stream's CUstream as an int on a CUDA device (rill.Stream's
        native); on a CPU device, which has none, rill's handle (never 0:
        rill's default stream is a stream like the others)."""
        native = self.native
        if native:
            return native
        return int(_internal.ffi.cast("uintptr_t", self._handle("torch.cuda.Stream.cuda_stream")))

    @property
    def device_index(self):
        return _torch_index(self.device)

    def record_event(self, event=None):
        """Records event (a new torch.cuda.Event when None) and returns it."""
        return super().record_event(Event() if event is None else event)

    def __enter__(self):
        ctx = StreamContext(self)
        ctx.__enter__()
        _contexts.__dict__.setdefault("open", {}).setdefault(self, []).append(ctx)
        return self

    def __exit__(self, *exc):
        open_ = _contexts.open
        ctx = open_[self].pop()
        if not open_[self]:
            del open_[self]
        return ctx.__exit__(*exc)

    def __repr__(self):
        return (f"<torch.cuda.Stream device=cuda:{_torch_index(self.device)} "
                f"cuda_stream={self.cuda_stream:#x}>")


_contexts = threading.local()  # .open: {Stream: [StreamContext]}, the thread's `with` blocks


def _torch_stream(s):
    """s as a torch.cuda.Stream: a stream that rill made (the default and
    tagged ones) becomes one; the class adds only methods."""
    if type(s) is _rill.Stream:
        s.__class__ = Stream
    return s


class Event(_rill.Event):
    """torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False):
    a rill.Event; record() and wait() take the current stream by default."""

    __slots__ = ()

    @property
    def cuda_event(self):
        """The event's handle as an int once it is bound to a device (by a
        record or ipc_handle()), 0 before, as torch creates its CUDA event
        at the first record."""
        if self.device is None:
            return 0
        return int(_internal.ffi.cast("uintptr_t", self._handle("torch.cuda.Event.cuda_event")))

    event_id = cuda_event

    def __repr__(self):
        return f"<torch.cuda.Event {self.cuda_event:#x}>"

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
        _rill.set_device(index)


def stream(s):
    """`with torch.cuda.stream(s):` makes s the current stream, and its
    device the current device; None does nothing."""
    return StreamContext(s)


def current_stream(device=None):
    """The calling thread's current stream of device (None: the current one)."""
    return _torch_stream(_rill.current_stream(
        _device_arg(device, "torch.cuda.current_stream")))


def default_stream(device=None):
    """The default stream of device (None: the current one)."""
    return _torch_stream(_rill.default_stream(
        _device_arg(device, "torch.cuda.default_stream")))


# torch.cuda._sleep(cycles) spins the current stream for that many GPU
# cycles; here a host function on the current stream sleeps, at
# CYCLES_PER_MS cycles a millisecond (a 1 GHz clock).
CYCLES_PER_MS = 1_000_000


def _sleep(cycles):
    """Holds the current stream for cycles / CYCLES_PER_MS milliseconds."""
    _internal.current().launch_host_func(time.sleep, cycles / CYCLES_PER_MS / 1000.0)


FloatTensor = _legacy(Tensor, _float32, "torch.cuda.FloatTensor")
HalfTensor = _legacy(Tensor, _float16, "torch.cuda.HalfTensor")


def set_stream(s):
    """Makes s the calling thread's current stream, and its device the
    current device, as torch does."""
    if s is not None:
        _rill.set_device(s.device)
    _rill.set_stream(s)


def synchronize(device=None):
    """Waits for the work of every stream of device (None: the current one)."""
    _rill.synchronize(_device_arg(device, "torch.cuda.synchronize"))


def is_available():
    """True: rill always has a device (its CPU devices stand in for GPUs
    where it has no CUDA device)."""
    return _rill.device_count() > 0


def device_count():
    """rill's CUDA devices, or where it has none, all its devices."""
    n = _internal.count_of_kind("cuda")[0]
    return n if n > 0 else _rill.device_count()


def current_device():
    """torch's index of the current device."""
    return _torch_index(_rill.current_device())


__all__ = ["CUDAGraph", "Event", "FloatTensor", "HalfTensor", "Stream", "StreamContext",
           "current_device", "current_stream", "default_stream", "device", "device_count",
           "set_device", "empty_cache", "graph", "is_available",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "memory_summary", "reset_peak_memory_stats", "set_stream", "stream",
           "synchronize"]
