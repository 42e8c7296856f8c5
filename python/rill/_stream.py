# SPDX-License-Identifier: MIT
"""Streams and events (rill.h's streams and events, in the manner of
torch.cuda.Stream/Event and mindspore.hal.Stream/Event)."""

import collections
import threading
import weakref

from . import _device, _host, _wait
from ._errors import check, error
from ._ffi import fast, ffi, lib
from ._runtime import closed_error, life, on_shutdown, stale_error, waited

_owned = weakref.WeakValueDictionary()  # rill_stream * -> Stream made by Python
_borrowed = {}  # rill_stream * -> Stream owned by the library (default, tagged, others')
_tls = threading.local()  # .held: {rill_device *: Stream}, what keeps current streams alive
# rill_device * -> deque of rill_event *: the events of freed tensors, for
# the tensors made next on the device's streams (each Stream holds its
# device's; a deque, since a list that empties and refills reallocates).
_event_pools = {}
# A pool: a stack of events (deque's pop and append), in C when the
# element-wise fast path is (_rill_fast), which takes and returns events in C.
_new_pool = fast.EventPool if fast is not None else collections.deque


def _device_of(handle):
    out = ffi.new("rill_device **")
    check(lib.rill_stream_get_device(handle, out))
    return out[0]


# The last (handle, Stream) that current() found: handles are never reused
# within a runtime, so a match is that Stream (a tuple, replaced whole, so
# threads read it safely).
_last = (None, None)


def current(_current_stream=lib.rill_current_stream, _null=ffi.NULL):
    """The current Stream of the current device (the ops' stream)."""
    global _last
    h = _current_stream(_null)
    last = _last
    if last[0] == h:
        return last[1]
    if h == ffi.NULL:
        _current_failed()
    s = _owned.get(h)
    if s is None:
        s = Stream._wrap(h)
    _last = (h, s)
    return s


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _c_str(text, where, what):
    """text as a C string: a str without NUL characters."""
    if not isinstance(text, str):
        raise TypeError(f"{where}: {what} must be a str, not {type(text).__name__}")
    if "\0" in text:
        raise ValueError(f"{where}: {what} must not contain NUL characters")
    return text.encode()


def _clamp_int(value):
    """A priority as a C int: rill clamps it into the device's range anyway."""
    return max(-(1 << 31), min(value, (1 << 31) - 1))


class Stream:
    """An in-order queue of work on a device. Work on one stream runs in the
    order submitted; work on different streams runs concurrently unless
    ordered by events, wait_stream() or synchronize().

    Stream(priority=0, device=None, *, name=None): priority is clamped into
    the device's range, and a lower number is a higher priority; device is a
    rill.Device, an ordinal, or None for the current device; name appears in
    error sentences. close() destroys the stream (its submitted work still
    runs); streams made here are also destroyed when garbage-collected."""

    __slots__ = ("_h", "_addr", "_dev", "_gen", "_owned", "_closed", "_name", "_events",
                 "__weakref__")

    def __init__(self, priority=0, device=None, *, name=None):
        if not _is_int(priority):
            raise TypeError(f"rill.Stream: priority must be an int, not {type(priority).__name__}")
        if name is not None:
            _c_str(name, "rill.Stream", "name")
        dev = _device.handle_of(device, "rill.Stream")
        out = ffi.new("rill_stream **")
        check(lib.rill_stream_create(dev, _clamp_int(priority), out))
        self._h = out[0]
        self._addr = int(ffi.cast("uintptr_t", self._h))  # for _rill_fast
        self._dev = _device_of(self._h)
        self._events = _event_pools.setdefault(self._dev, _new_pool())
        self._gen = life.generation
        self._owned = True
        self._closed = False
        self._name = None
        _owned[self._h] = self
        if name is not None:
            self.name = name

    @classmethod
    def _wrap(cls, handle):
        """The Stream object for a handle: the one made here, or a wrapper
        that does not own it (the default and tagged streams)."""
        s = _owned.get(handle)
        if s is None:
            s = _borrowed.get(handle)
        if s is None:
            s = object.__new__(cls)
            s._h = handle
            s._addr = int(ffi.cast("uintptr_t", handle))
            s._dev = _device_of(handle)
            s._events = _event_pools.setdefault(s._dev, _new_pool())
            s._gen = life.generation
            s._owned = False
            s._closed = False
            s._name = None
            _borrowed[handle] = s
        return s

    def _handle(self, where):
        if self._gen != life.generation:
            raise stale_error(where, "stream")
        if self._closed:
            raise closed_error(where, "stream")
        return self._h

    def query(self):
        """True when all work submitted so far has completed, else False.
        Raises KernelFailedError when the stream has a sticky error."""
        h = self._handle("rill.Stream.query")
        mark = _host.mark()
        st = lib.rill_stream_query(h)
        if st == lib.RILL_NOT_READY:
            return False
        check(st)
        _host.done_before(h, mark)
        return True

    def synchronize(self):
        """Waits until all work submitted so far has completed; raises
        KernelFailedError when the stream has a sticky error. Ctrl-C raises
        KeyboardInterrupt out of the wait (on the main thread), and the work
        runs on: wait for it again, or not."""
        h = self._handle("rill.Stream.synchronize")
        mark = _host.mark()
        st = _wait.stream(h)
        if st == 0 or st == lib.RILL_ERROR_KERNEL_FAILED:  # either way, its work has ended
            _host.done_before(h, mark)
            waited()
        check(st)

    def wait_event(self, event):
        """Makes all future work submitted to this stream wait for event, as
        recorded at the time of this call (a later record does not matter;
        an event never recorded does nothing). Does not block the host."""
        if not isinstance(event, Event):
            raise TypeError("rill.Stream.wait_event: event must be a rill.Event, "
                            f"not {type(event).__name__}")
        check(lib.rill_stream_wait_event(self._handle("rill.Stream.wait_event"),
                                         event._handle("rill.Stream.wait_event")))

    def wait_stream(self, stream):
        """Makes all future work submitted to this stream wait for all work
        submitted to stream before this call. Does not block the host."""
        if not isinstance(stream, Stream):
            raise TypeError("rill.Stream.wait_stream: stream must be a rill.Stream, "
                            f"not {type(stream).__name__}")
        check(lib.rill_stream_wait_stream(self._handle("rill.Stream.wait_stream"),
                                          stream._handle("rill.Stream.wait_stream")))

    def record_event(self, event=None):
        """Records event (a new Event when None) at the current end of this
        stream's work and returns it."""
        if event is None:
            event = Event()
        elif not isinstance(event, Event):
            raise TypeError("rill.Stream.record_event: event must be a rill.Event or None, "
                            f"not {type(event).__name__}")
        event.record(self)
        return event

    def launch_host_func(self, fn, *args):
        """Runs fn(*args) on a worker thread, in this stream's order, holding
        the GIL while it runs. If it raises, the exception becomes this
        stream's sticky error: later work is skipped, and query(),
        synchronize() and streams that wait on it raise KernelFailedError
        carrying the exception and its traceback, until clear_error(). fn
        must not block on rill (synchronize from it raises NotPermittedError).
        At interpreter exit Python waits for the host functions already
        launched, as it does for non-daemon threads."""
        _host.launch(self._handle("rill.Stream.launch_host_func"), self._dev, fn, args,
                     "rill.Stream.launch_host_func")

    def clear_error(self):
        """Clears the sticky error, so that work submitted after this call
        runs again (stream-ordered; waits made while failing still hold)."""
        check(lib.rill_stream_clear_error(self._handle("rill.Stream.clear_error")))

    @property
    def priority(self):
        """The stream's priority, as clamped into the device's range."""
        out = ffi.new("int *")
        check(lib.rill_stream_get_priority(self._handle("rill.Stream.priority"), out))
        return out[0]

    @property
    def native(self):
        """The device's own handle of the stream as an int: its CUstream on
        a CUDA device, for libraries that take one (cuBLAS, NCCL); 0 on a
        CPU device, whose streams are rill's own queues. A library's work on
        it follows rill's work that is on the GPU already (docs/cuda.md,
        item 8 of the plan)."""
        out = ffi.new("void **")
        check(lib.rill_stream_native(self._handle("rill.Stream.native"), out))
        return int(ffi.cast("uintptr_t", out[0]))

    @property
    def device(self):
        """The rill.Device the stream belongs to."""
        self._handle("rill.Stream.device")
        return _device.Device._wrap(self._dev)

    @property
    def name(self):
        """The name rill's error sentences give the stream (None: unnamed)."""
        return self._name

    @name.setter
    def name(self, value):
        name = _c_str(value, "rill.Stream.name", "the name")
        check(lib.rill_stream_set_name(self._handle("rill.Stream.name"), name))
        self._name = value

    def close(self):
        """Destroys the stream: work already submitted still runs, then rill
        releases it. Later calls on it raise InvalidArgumentError. Streams
        owned by rill (default, tagged) cannot be closed."""
        if self._gen != life.generation or self._closed:
            return
        if not self._owned:
            raise error(lib.RILL_ERROR_INVALID_ARGUMENT,
                        "rill.Stream.close: this stream is owned by rill (a default or tagged "
                        "stream) and lives until rill.shutdown()")
        self._closed = True
        _owned.pop(self._h, None)
        check(lib.rill_stream_destroy(self._h))

    def __del__(self, _life=life, _destroy=lib.rill_stream_destroy):
        if getattr(self, "_owned", False) and not self._closed and \
                self._gen == _life.generation:
            self._closed = True
            _destroy(self._h)

    def __eq__(self, other):
        return isinstance(other, Stream) and other._h == self._h and other._gen == self._gen

    def __hash__(self):
        return hash(self._h)

    def __repr__(self):
        state = " closed" if self._closed or self._gen != life.generation else ""
        kind = "" if self._owned else " borrowed"
        return f"<rill.Stream{kind}{state} {int(ffi.cast('uintptr_t', self._h)):#x}>"


class Event:
    """A point in a stream's work, for ordering streams and timing.

    Event(enable_timing=False, blocking=False, interprocess=False): timing
    events measure elapsed_time(); blocking events make synchronize() sleep
    instead of spinning; interprocess events export ipc_handle() for another
    process (not together with timing)."""

    __slots__ = ("_h", "_gen", "_owned", "_closed", "__weakref__")

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        flags = 0
        for value, flag, arg in ((enable_timing, lib.RILL_EVENT_TIMING, "enable_timing"),
                                 (blocking, lib.RILL_EVENT_BLOCKING_SYNC, "blocking"),
                                 (interprocess, lib.RILL_EVENT_INTERPROCESS, "interprocess")):
            if not isinstance(value, (bool, int)):
                raise TypeError(f"rill.Event: {arg} must be a bool, not {type(value).__name__}")
            if value:
                flags |= flag
        out = ffi.new("rill_event **")
        check(lib.rill_event_create(flags, out))
        self._init(out[0], True)

    def _init(self, handle, owned):
        self._h = handle
        self._gen = life.generation
        self._owned = owned
        self._closed = False

    def _handle(self, where):
        if self._gen != life.generation:
            raise stale_error(where, "event")
        if self._closed:
            raise closed_error(where, "event")
        return self._h

    def record(self, stream=None):
        """Records the event at the current end of stream's work (None: the
        current stream); re-recording moves it."""
        where = "rill.Event.record"
        check(lib.rill_event_record(self._handle(where), _stream_arg(stream, where)))

    def wait(self, stream=None):
        """Makes stream (None: the current stream) wait for this event as
        recorded now. Does not block the host."""
        where = "rill.Event.wait"
        check(lib.rill_stream_wait_event(_stream_arg(stream, where), self._handle(where)))

    def query(self):
        """True when the recorded work has completed or the event was never
        recorded, else False; KernelFailedError when that work failed."""
        st = lib.rill_event_query(self._handle("rill.Event.query"))
        if st == lib.RILL_NOT_READY:
            return False
        check(st)
        return True

    def synchronize(self):
        """Waits until the recorded work has completed (Ctrl-C: as
        Stream.synchronize)."""
        check(_wait.event(self._handle("rill.Event.synchronize")))
        waited()

    def elapsed_time(self, end_event):
        """Milliseconds from this event's record to end_event's, both
        completed and made with enable_timing=True (microsecond resolution).
        NotReadyError (a RuntimeError, as torch raises) while the work of
        either is pending."""
        where = "rill.Event.elapsed_time"
        if not isinstance(end_event, Event):
            raise TypeError(f"{where}: end_event must be a rill.Event, "
                            f"not {type(end_event).__name__}")
        ms = ffi.new("float *")
        st = lib.rill_event_elapsed_ms(self._handle(where), end_event._handle(where), ms)
        if st == lib.RILL_NOT_READY:
            raise error(st, f"{where}: both events must be completed before calculating "
                        "elapsed time; wait for the end event (end_event.synchronize()) first")
        check(st)
        return ms[0]

    @property
    def device(self):
        """The rill.Device the event is bound to (by its first record, by
        ipc_handle(), or, opened, by its handle), or None before that."""
        out = ffi.new("rill_device **")
        check(lib.rill_event_get_device(self._handle("rill.Event.device"), out))
        return None if out[0] == ffi.NULL else _device.Device._wrap(out[0])

    def ipc_handle(self):
        """64 bytes that another process on this machine passes to
        Event.from_ipc_handle to wait on this event's records (interprocess
        events only). A never-recorded event is bound to the current device
        first: the handle names the event's device."""
        out = ffi.new("rill_ipc_event_handle *")
        check(lib.rill_event_ipc_handle(self._handle("rill.Event.ipc_handle"), out))
        return bytes(ffi.buffer(out.bytes))

    @classmethod
    def from_ipc_handle(cls, device, handle):
        """Opens an event exported by ipc_handle() (in this or another
        process), bound to the device the handle names; device (a Device,
        an ordinal or None) must be that device (DeviceMismatchError
        otherwise). Raises IpcError for bytes that are not a handle or whose
        exporter has exited."""
        where = "rill.Event.from_ipc_handle"
        want = None if device is None else _device.handle_of(device, where)
        if not isinstance(handle, (bytes, bytearray, memoryview)):
            raise TypeError(f"{where}: handle must be bytes from Event.ipc_handle(), "
                            f"not {type(handle).__name__}")
        data = bytes(handle)
        if len(data) != 64:
            raise ValueError(f"{where}: handle must be the 64 bytes of Event.ipc_handle(), "
                             f"not {len(data)} bytes")
        h = ffi.new("rill_ipc_event_handle *")
        ffi.memmove(h.bytes, data, 64)
        out = ffi.new("rill_event **")
        check(lib.rill_event_open_ipc_handle(h, out))
        ev = object.__new__(cls)
        ev._init(out[0], True)
        bound = ev.device
        if want is not None and bound._h != want:
            ev.close()
            raise error(lib.RILL_ERROR_DEVICE_MISMATCH,
                        f"{where}: the handle is of an event of device {bound.index}, not of "
                        f"device {_device.Device._wrap(want).index}; pass the exporter's device")
        return ev

    def close(self):
        """Destroys the event; later calls on it raise InvalidArgumentError.
        Waits already made on it still hold. Tagged events cannot be closed."""
        if self._gen != life.generation or self._closed:
            return
        if not self._owned:
            raise error(lib.RILL_ERROR_INVALID_ARGUMENT,
                        "rill.Event.close: this event is a tagged event owned by rill and "
                        "lives until rill.shutdown()")
        self._closed = True
        check(lib.rill_event_destroy(self._h))

    def __del__(self, _life=life, _destroy=lib.rill_event_destroy):
        if getattr(self, "_owned", False) and not self._closed and \
                self._gen == _life.generation:
            self._closed = True
            _destroy(self._h)

    def __eq__(self, other):
        return isinstance(other, Event) and other._h == self._h and other._gen == self._gen

    def __hash__(self):
        return hash(self._h)

    def __repr__(self):
        return f"<rill.Event {int(ffi.cast('uintptr_t', self._h)):#x}>"


def _stream_arg(stream, where):
    if stream is None:
        return lib.rill_current_stream(ffi.NULL) or _current_failed()
    if not isinstance(stream, Stream):
        raise TypeError(f"{where}: stream must be a rill.Stream or None, "
                        f"not {type(stream).__name__}")
    return stream._handle(where)


def _stream_obj(stream, where):
    """The Stream for a stream argument: the current stream for None."""
    if stream is None:
        return current()
    if not isinstance(stream, Stream):
        raise TypeError(f"{where}: stream must be a rill.Stream or None, "
                        f"not {type(stream).__name__}")
    stream._handle(where)
    return stream


def _current_failed():
    raise error(lib.RILL_ERROR_INVALID_ARGUMENT)


def current_stream(device=None):
    """The calling thread's current stream of device (None: the current
    device): the default stream until set_stream() or `with stream(s):`."""
    h = lib.rill_current_stream(_device.handle_of(device, "rill.current_stream"))
    if h == ffi.NULL:
        _current_failed()
    return Stream._wrap(h)


def default_stream(device=None):
    """The default stream of device (None: the current device): an ordinary
    stream, with no implicit synchronisation with other streams."""
    h = lib.rill_default_stream(_device.handle_of(device, "rill.default_stream"))
    if h == ffi.NULL:
        _current_failed()
    return Stream._wrap(h)


def _held():
    held = getattr(_tls, "held", None)
    if held is None or held[0] != life.generation:
        held = _tls.held = (life.generation, {})
    return held[1]


def set_stream(stream):
    """Makes stream the calling thread's current stream of its device and
    returns the one current before. None selects the default stream."""
    where = "rill.set_stream"
    if stream is None:
        stream = default_stream()
    elif not isinstance(stream, Stream):
        raise TypeError(f"{where}: stream must be a rill.Stream or None, "
                        f"not {type(stream).__name__}")
    h = stream._handle(where)
    prev = lib.rill_set_current_stream(h)
    if prev == ffi.NULL:
        _current_failed()
    held = _held()
    prev_obj = held.get(stream._dev)
    held[stream._dev] = stream  # keeps it (and so its handle) alive while current
    if prev_obj is not None and prev_obj._h == prev:
        return prev_obj
    return Stream._wrap(prev)


class StreamContext:
    """`with StreamContext(s):` makes s the current stream of its device,
    and that device the current device, for the block, and restores the
    previous stream and device after it (as torch.cuda.StreamContext
    does); None does nothing. rill.stream(s) returns one."""

    __slots__ = ("stream", "_prev")

    def __init__(self, stream):
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError("rill.StreamContext: stream must be a rill.Stream or None, "
                            f"not {type(stream).__name__}")
        self.stream = stream
        self._prev = []  # (the stream current before on s's device, the device before or None)

    def __enter__(self):
        s = self.stream
        if s is not None:
            s._handle("rill.StreamContext")
            out = ffi.new("rill_device **")
            check(lib.rill_get_device(out))
            prev_dev = out[0] if out[0] != s._dev else None
            prev = set_stream(s)
            if prev_dev is not None:
                check(lib.rill_set_device(s._dev))
            self._prev.append((prev, prev_dev))
        return s

    def __exit__(self, *exc):
        if self.stream is not None:
            prev, prev_dev = self._prev.pop()
            if prev._gen == life.generation and not prev._closed:
                set_stream(prev)
            else:
                set_stream(None)
            if prev_dev is not None and self.stream._gen == life.generation:
                check(lib.rill_set_device(prev_dev))
        return False


def stream(s):
    """`with rill.stream(s):` runs the block with s as the current stream."""
    return StreamContext(s)


def synchronize(device=None):
    """Waits for the work of every stream of device (None: the current
    device); raises KernelFailedError when one of them failed and was not
    cleared since. Ctrl-C: as Stream.synchronize."""
    dev = _device.handle_of(device, "rill.synchronize")
    if dev == ffi.NULL:
        dev = _device.current_device()._h
    _device.synchronize_handle(dev)


def tagged_stream(tag, priority=0, device=None):
    """The stream that tag names on device: created at first use with
    priority, owned by rill (torchair's npu_stream_switch)."""
    name = _c_str(tag, "rill.tagged_stream", "tag")
    if not _is_int(priority):
        raise TypeError("rill.tagged_stream: priority must be an int, "
                        f"not {type(priority).__name__}")
    out = ffi.new("rill_stream **")
    check(lib.rill_stream_get_tagged(_device.handle_of(device, "rill.tagged_stream"),
                                     name, _clamp_int(priority), out))
    return Stream._wrap(out[0])


_tagged_events = {}  # rill_event * -> Event


def tagged_event(tag):
    """The event that tag names, owned by rill (torchair's tagged events)."""
    name = _c_str(tag, "rill.tagged_event", "tag")
    out = ffi.new("rill_event **")
    check(lib.rill_event_get_tagged(name, out))
    ev = _tagged_events.get(out[0])
    if ev is None:
        ev = object.__new__(Event)
        ev._init(out[0], False)
        _tagged_events[out[0]] = ev
    return ev


@on_shutdown
def _forget():
    global _last
    _last = (None, None)
    _owned.clear()
    _borrowed.clear()
    _event_pools.clear()
    _tagged_events.clear()
