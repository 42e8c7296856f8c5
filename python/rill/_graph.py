# SPDX-License-Identifier: MIT
"""Graphs from Python: rill.Graph with `with rill.graph(g):` capture and
g.replay() (torch.cuda.CUDAGraph and torch.cuda.graph), and
rill.compile(fn), which captures fn at its first call for a set of input
shapes and replays it at the later ones (torchair's reduce-overhead mode).

Work that the capturing thread submits to the capture's streams (the
origin, and the streams that an event recorded there pulls in) is recorded
into the graph instead of run. Tensors allocated in the capture get graph
memory: the same address at every replay. Each such tensor keeps that
memory (the capture's _Memory) alive, past reset() and the Graph itself,
and is never freed outside the capture. Every tensor an op wrote in
the capture has its event recorded again after each replay, so numpy()
waits for the replay that wrote it."""

import threading
import weakref

from . import _host, _stream
from ._errors import check
from ._ffi import ffi, lib
from ._runtime import life, on_shutdown, stale_error

_tls = threading.local()  # .graph: the Graph this thread is capturing, or absent
# The captures Python has begun and not ended, in every thread: while there
# are any, the ops take their general path, which tracks what a capture writes.
active = [0]

_active_lock = threading.Lock()

_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}


def stream_captures(handle):
    """Whether the stream is capturing now."""
    status = ffi.new("rill_capture_status *")
    return lib.rill_stream_get_capture_status(handle, status) == 0 and \
        status[0] == lib.RILL_CAPTURE_ACTIVE


def stream_in_capture(handle):
    """Whether the stream belongs to a capture, active or invalidated: what
    rill_malloc_async allocated there just before is graph memory either
    way (another thread may invalidate the capture right after), released
    with the graph."""
    status = ffi.new("rill_capture_status *")
    return lib.rill_stream_get_capture_status(handle, status) == 0 and \
        status[0] != lib.RILL_CAPTURE_NONE


# Python host functions of graphs that are gone, kept until the last replay
# that may run them has ended: [(tokens, rill_event * after that replay)].
_retired = []
_retired_lock = threading.Lock()


def _retire(tokens, last_replay):
    if not tokens:
        return
    with _retired_lock:
        _retired.append((list(tokens), last_replay))
    _reap()


def _reap():
    """Forgets the retired host functions whose last replay has ended."""
    with _retired_lock:
        keep = []
        for tokens, ev in _retired:
            if ev is not None and lib.rill_event_query(ev) == lib.RILL_NOT_READY:
                keep.append((tokens, ev))
                continue
            for token in tokens:
                _host.persistent.pop(token, None)
            if ev is not None:
                lib.rill_event_destroy(ev)
        _retired[:] = keep


def _capture_of(handle):
    """The Graph the calling thread captures, when stream handle is in that
    capture (for _host: a Python host function launched there is kept)."""
    g = getattr(_tls, "graph", None)
    return g if g is not None and stream_captures(handle) else None


_host.capture_of = _capture_of


def capturing():
    """The Graph the calling thread is capturing, or None."""
    return getattr(_tls, "graph", None)


class _Memory:
    """The memory of one capture, which rill releases with the capture's
    exec (rill.h: when the graph and its last exec are destroyed): the
    Graph until reset() and each tensor allocated in the capture hold it,
    and the last to let go destroys the exec. A later capture that uses
    tensors of this memory holds it too (use), so that its replays never
    touch memory released under them."""

    __slots__ = ("exec", "gen", "uses")

    def __init__(self):
        self.exec = None  # rill_graph_exec *, once the capture has ended well
        self.gen = life.generation
        self.uses = set()  # the _Memory of other captures that this one's nodes use

    def __del__(self, _life=life, _destroy=lib.rill_graph_exec_destroy):
        if self.exec is not None and self.gen == _life.generation:
            _destroy(self.exec)  # waits for nothing: launches already made keep their graph


def note_use(t):
    """Called by an op on each tensor it uses while a capture is active in
    some thread: when the calling thread captures and t's memory is another
    capture's, the calling thread's capture holds that memory."""
    g = _tls.__dict__.get("graph")
    if g is None:
        return
    owner = t._owner if t._base is None else t._base._owner
    mine = g._mem
    if type(owner) is _Memory and owner is not mine and mine is not None:
        mine.uses.add(owner)


class Graph:
    """A graph of captured work, replayed as one command (torch.cuda.CUDAGraph).

    g = rill.Graph()
    with rill.graph(g):      # or g.capture_begin() ... g.capture_end()
        c = a @ b + 1        # recorded, not run
    g.replay()               # runs it; c holds the result once it is done
    """

    __slots__ = ("_mem", "_gen", "_stream", "_written", "_streams", "_host_tokens",
                 "_last_replay", "__weakref__")

    def __init__(self):
        self._mem = None  # the _Memory of the capture under way or ended, until reset()
        self._gen = life.generation
        self._stream = None
        self._written = weakref.WeakValueDictionary()  # id -> Tensor written in the capture
        self._streams = {}  # rill_stream * -> Stream that ops of the capture ran on
        self._host_tokens = []  # Python host functions captured (_host.persistent)
        self._last_replay = None  # rill_event * recorded after the last replay, with them

    def capture_begin(self, stream=None, capture_error_mode="global"):
        """Starts capturing the calling thread's work on stream (None: the
        current stream). capture_error_mode ("global", "thread_local",
        "relaxed") says which calls that a graph cannot replay fail during
        the capture (rill.h, rill_stream_begin_capture)."""
        where = "rill.Graph.capture_begin"
        _reap()
        if self._gen != life.generation:
            raise stale_error(where, "graph")
        if self._mem is not None:
            raise RuntimeError(f"{where}: this graph was captured already; call reset() "
                               "first or use a new rill.Graph")
        if capturing() is not None:
            raise RuntimeError(f"{where}: this thread is capturing another graph; end that "
                               "capture first")
        mode = _MODES.get(capture_error_mode)
        if mode is None:
            raise ValueError(f"{where}: capture_error_mode must be one of {sorted(_MODES)}, "
                             f"not {capture_error_mode!r}")
        s = _stream._stream_obj(stream, where)
        with _active_lock:
            active[0] += 1
        try:
            check(lib.rill_stream_begin_capture(s._handle(where), mode))
        except BaseException:
            with _active_lock:
                active[0] -= 1
            raise
        self._stream = s
        self._mem = _Memory()
        _tls.graph = self

    def capture_end(self):
        """Ends the capture and makes the graph ready to replay. Raises the
        capture's error (CaptureInvalidatedError, CaptureUnjoinedError, ...)
        when it failed; the graph is then empty."""
        where = "rill.Graph.capture_end"
        if self._stream is None or capturing() is not self:
            raise RuntimeError(f"{where}: this thread is not capturing this graph; call "
                               "capture_begin() first")
        self._join()
        out = ffi.new("rill_graph **")
        st = lib.rill_stream_end_capture(self._stream._h, out)
        if st == lib.RILL_ERROR_CAPTURE_UNMATCHED or st == lib.RILL_ERROR_CAPTURE_WRONG_THREAD:
            check(st)  # the capture goes on; the caller may still end it properly
        _tls.graph = None
        with _active_lock:
            active[0] -= 1
        self._streams = {}
        if st != 0:
            self._stream = None
            self._mem = None
            self._written = weakref.WeakValueDictionary()
            self._drop_host_functions()
            check(st)
        ex = ffi.new("rill_graph_exec **")
        st = lib.rill_graph_instantiate(out[0], ex)
        lib.rill_graph_destroy(out[0])
        check(st)
        self._mem.exec = ex[0]

    def _join(self):
        """Joins every other stream that the capture's ops pulled in back to
        the origin (an event recorded there, waited for by the origin), as
        torchair does at the end of a graph with tagged streams."""
        status = ffi.new("rill_capture_status *")
        origin = self._stream._h
        for h, s in self._streams.items():
            if h == origin or s._closed or lib.rill_stream_get_capture_status(h, status) != 0:
                continue
            if status[0] != lib.RILL_CAPTURE_ACTIVE:
                continue
            ev = _stream.Event()
            ev.record(s)
            check(lib.rill_stream_wait_event(origin, ev._h))

    def replay(self, stream=None):
        """Runs the captured work as one command on stream (None: the current
        stream); returns at once."""
        where = "rill.Graph.replay"
        if self._gen != life.generation:
            raise stale_error(where, "graph")
        ex = self._mem.exec if self._mem is not None else None
        if ex is None:
            raise RuntimeError(f"{where}: nothing was captured; capture the graph first")
        s = _stream._stream_obj(stream, where)
        h = s._handle(where)
        check(lib.rill_graph_launch(ex, h))
        for t in self._written.values():
            t._written(s)
        if self._host_tokens:  # the launches of one exec run in order: the last one ends last
            if self._last_replay is None:
                out = ffi.new("rill_event **")
                check(lib.rill_event_create(lib.RILL_EVENT_DEFAULT, out))
                self._last_replay = out[0]
            check(lib.rill_event_record(self._last_replay, h))
        _reap()

    def _drop_host_functions(self):
        _retire(self._host_tokens, self._last_replay)
        self._host_tokens = []
        self._last_replay = None

    def reset(self):
        """Releases the captured work; the graph may capture again. Tensors
        of its memory keep it until they are gone."""
        if capturing() is self:
            raise RuntimeError("rill.Graph.reset: this thread is capturing this graph; call "
                               "capture_end() first")
        self._drop_host_functions()
        self._mem = None  # destroys the exec unless tensors of its memory hold it
        self._stream = None
        self._written = weakref.WeakValueDictionary()
        self._streams = {}

    def __del__(self, _life=life):
        # The exec goes with the _Memory, once no tensor holds it either.
        tokens = getattr(self, "_host_tokens", None)
        if tokens and self._gen == _life.generation:
            _retire(tokens, self._last_replay)

    def __repr__(self):
        state = "captured" if self._mem is not None and self._mem.exec is not None else (
            "capturing" if self._stream is not None else "empty")
        return f"rill.Graph({state})"


class graph:
    """`with rill.graph(g, stream=None, capture_error_mode="global"):`
    captures the block into g (torch.cuda.graph). The block runs with the
    capture stream current: stream, or a new stream that first waits for
    the current one (as torch captures on a side stream)."""

    def __init__(self, g, stream=None, capture_error_mode="global"):
        if not isinstance(g, Graph):
            raise TypeError(f"rill.graph: g must be a rill.Graph, not {type(g).__name__}")
        self.graph = g
        self.stream = stream
        self.mode = capture_error_mode
        self._ctx = None

    def __enter__(self):
        s = self.stream
        if s is None:
            s = _stream.Stream()
            s.wait_stream(_stream.current())
        self._ctx = _stream.StreamContext(s)
        self._ctx.__enter__()
        try:
            self.graph.capture_begin(s, self.mode)
        except BaseException:
            self._ctx.__exit__(None, None, None)
            raise
        return self.graph

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.graph.capture_end()
            elif capturing() is self.graph:
                try:
                    self.graph.capture_end()
                except Exception:  # the block's own exception is the one to see
                    pass
        finally:
            s = self._ctx.stream
            self._ctx.__exit__(exc_type, exc, tb)
            if self.stream is None and exc_type is None:
                _stream.current().wait_stream(s)  # the replay side: work after it sees it
        return False


@on_shutdown
def _forget():
    _tls.__dict__.clear()
    _retired.clear()
    active[0] = 0
