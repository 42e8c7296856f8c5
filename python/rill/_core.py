# SPDX-License-Identifier: MIT
"""What every rill.Tensor is, under its methods: the fields (in C,
_rill_fast.TensorBase, where the build compiled it; else the Python form
here), build(), the one helper that sets them, the allocation of device
memory (rill_malloc_async on the tensor's stream), the uses and writes
that ops declare (_valid, _written: a write records the tensor's event,
which numpy() waits for), and the release of the memory in stream order
when the tensor is garbage-collected.

A tensor's fields: _ptr (the memory, void *), _shape, _numel, _dtype,
_stream (where the memory is freed), _event (recorded after the last op
that wrote it, or None), _gen (its runtime generation), _owner (None, or
whoever releases the memory: a capture's graph memory, or another
library's through DLPack), _base and _strides (a view's: the tensor whose
memory it shows, and its strides in elements unless contiguous)."""

import numbers

from . import _graph
from ._dtype import numel
from ._errors import check
from ._ffi import fast, ffi, lib
from ._runtime import life, stale_error


def release(self, _life=life, _free_async=lib.rill_free_async, _free=lib.rill_free):
    """Frees a garbage-collected tensor's memory in stream order and gives
    its event back to the pool (TensorBase does this in C, except for the
    tensors with an owner, which it leaves to this function)."""
    try:
        ptr = self._ptr
    except AttributeError:  # __init__ failed before it allocated
        return
    if ptr is None or self._gen != _life.generation:
        return
    self._ptr = None
    if self._base is not None:  # a view: the memory is its base's
        ev = self._event
        if ev is not None:
            self._stream._events.append(ev)
        return
    owner = self._owner
    if owner is not None and not isinstance(owner, _graph._Memory):
        owner.release(self)  # another library's memory, shared through DLPack (rill._dlpack)
        return
    if owner is not None and getattr(_graph.capturing(), "_mem", None) is not owner:
        return  # a capture's memory, released with its exec once nothing holds it
    s = self._stream
    if s._closed:
        _free(ptr)  # at the end of its (destroyed) stream's work
    else:
        _free_async(ptr, s._h)
    ev = self._event
    if ev is not None:
        s._events.append(ev)


class _Fields:
    """rill.Tensor's fields in Python: the package's form where the build
    did not compile _rill_fast, whose TensorBase holds them in C (with the
    element-wise fast path and the release of the memory)."""

    __slots__ = ("_ptr", "_shape", "_numel", "_dtype", "_stream", "_event", "_gen", "_owner",
                 "_base", "_strides", "__weakref__")

    __del__ = release


Fields = fast.TensorBase if fast is not None else _Fields
new = fast.TensorBase.__new__ if fast is not None else object.__new__


def build(t, ptr, shape, n, dt, stream, event=None, gen=None, owner=None, base=None,
          strides=None):
    """Sets every field of t, a tensor just made by new(cls) (or being
    initialised), and returns it: ptr its memory, shape its dimensions and
    n their product, dtype dt, on stream, with event (None: not written
    yet), of runtime generation gen (None: the current one). Every tensor
    of the package is built here (or in C by _rill_fast, likewise)."""
    t._ptr = ptr
    t._shape = shape
    t._numel = n
    t._dtype = dt
    t._stream = stream
    t._event = event
    t._gen = life.generation if gen is None else gen
    t._owner = owner
    t._base = base
    t._strides = strides
    return t


def allocate(shape, dt, stream, where):
    """Memory for shape elements of dt on stream: (ptr, numel, owner), the
    owner being the capture's graph memory when stream captures."""
    n = numel(shape)
    nbytes = n * dt.itemsize
    if nbytes >= 1 << 63:
        raise ValueError(f"{where}: shape {shape} needs {nbytes} bytes, more than any "
                         "device has")
    out = ffi.new("void **")
    h = stream._handle(where)
    st = lib.rill_malloc_async(max(nbytes, 1), h, out)
    if st == lib.RILL_ERROR_OUT_OF_MEMORY:
        st = waited_alloc(max(nbytes, 1), stream, out, st)
    check(st)
    g = _graph._tls.__dict__.get("graph")
    owner = g._mem if g is not None and _graph.stream_in_capture(h) else None
    return out[0], n, owner  # graph memory: it lives as long as the tensor


def waited_alloc(nbytes, stream, out, status):
    """The allocation that rill_malloc_async refused (status) at the limit:
    rill_malloc waits on the host for the pending frees (seed 000: when the
    allocation fails, synchronize, then release; PyTorch's allocator waits
    for the events of freed blocks before it raises) and takes the memory,
    which any stream may use at once. Not during a capture of this thread
    or of the stream, which a wait would invalidate (status stays), nor
    from a host function, where rill_malloc refuses to wait; other threads'
    captures are left alone (this thread's capture mode is RELAXED for the
    call). The status of the last try."""
    if _graph.capturing() is not None or _graph.stream_in_capture(stream._h):
        return status
    mode = ffi.new("rill_capture_mode *", lib.RILL_CAPTURE_RELAXED)
    check(lib.rill_thread_exchange_capture_mode(mode))
    try:
        return lib.rill_malloc(stream._dev, nbytes, out)  # cffi lets go of the GIL meanwhile
    finally:
        check(lib.rill_thread_exchange_capture_mode(mode))


def new_event():
    """A new event for a tensor's writes (the pools of rill.Stream's
    devices hand back those of freed tensors)."""
    out = ffi.new("rill_event **")
    check(lib.rill_event_create(lib.RILL_EVENT_DEFAULT, out))
    return out[0]


def pooled_event(pool):
    """An event from a device's pool, or a new one when the pool is empty
    (another thread may empty it between a test of it and the pop)."""
    try:
        return pool.pop()
    except IndexError:
        return new_event()


class TensorCore(Fields):
    """The fields of rill.Tensor and the life of its memory; the class
    that every op checks its tensor operands against."""

    __slots__ = ()

    @classmethod
    def _empty(cls, shape, dt, stream, where):
        """A new tensor of cls with memory for shape on stream (not written)."""
        t = new(cls)  # first: a class that cannot make one takes no memory
        ptr, n, owner = allocate(shape, dt, stream, where)
        return build(t, ptr, shape, n, dt, stream, None, None, owner, None, None)

    def _copy(self, stream):
        """A copy made in stream order on stream, of this tensor's class."""
        t = type(self)._empty(self._shape, self._dtype, stream, "rill.Tensor copy")
        if self._numel:
            check(lib.rill_memcpy_async(t._ptr, self._valid("rill.Tensor copy"), self.nbytes,
                                        stream._h))
            t._written(stream)
        return t

    def _valid(self, where, _active=_graph.active):
        """The memory, for an op that uses the tensor (stale_error after
        rill.shutdown()). In a capture, that capture holds the memory of
        another capture the tensor has (_graph.note_use)."""
        if self._gen != life.generation:
            raise stale_error(where, "tensor")
        if _active[0]:
            _graph.note_use(self)
        return self._ptr

    def _written(self, stream):
        """Records the tensor's event after the op that wrote it on stream."""
        g = _graph._tls.__dict__.get("graph")
        if g is not None:  # captured: recorded again after each replay
            g._written[id(self)] = self
            g._streams[stream._h] = stream
        if self._base is not None:  # a view: its base was written too
            self._base._written(stream)
        ev = self._event
        if ev is None:
            ev = self._event = pooled_event(stream._events)
        check(lib.rill_event_record(ev, stream._h))


def finish(out, s, status):
    """Checks an op's status; the output is written once its event is."""
    check(status)
    out._written(s)
    return out


def is_scalar(x):
    """Whether x is a number an op takes (a real number, not a tensor)."""
    return isinstance(x, numbers.Real) and not isinstance(x, TensorCore)
