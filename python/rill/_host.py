# SPDX-License-Identifier: MIT
"""Python callables run as rill host functions: one cffi callback serves
every launch, takes the GIL, runs the callable, and turns an exception
into the stream's sticky error (rill_host_func_fail), whose traceback
_errors keeps. A launch keeps its callable in `pending` until it runs or
its stream skips it. See _runtime for what happens at exit."""

import collections
import itertools
import threading
import traceback

from . import _errors, _wait
from ._ffi import ffi, lib
from ._runtime import exit_waits_for, launch_lock, life, on_shutdown, pending

_tokens = itertools.count(1)
_next_token = [1]  # the token the next launch takes
_exceptions = itertools.count(1)
_by_stream = {}  # rill_stream * -> deque of its pending tokens, in launch order
_device_of = {}  # rill_stream * -> its rill_device *, while in _by_stream
_lock = threading.Lock()  # guards _by_stream and its deques; never held across a C call

# Host functions captured into graphs: token -> (callable, args), run at
# every replay, kept until their graph is reset or collected (_graph says
# which tokens are its own). capture_of(stream handle) is set by _graph: the
# Graph the calling thread captures on that stream, or None.
persistent = {}
capture_of = None


@exit_waits_for
def _graphs_keep_host_functions():
    return bool(persistent)


def _fail_message(number, exc):
    frames = traceback.extract_tb(exc.__traceback__.tb_next)
    where = ""
    if frames:
        f = frames[-1]
        where = f' (File "{f.filename}", line {f.lineno}, in {f.name})'
    text = str(exc)
    kind = type(exc).__qualname__
    if text:
        return f"Python exception #{number}: {kind}: {text}{where}"
    return f"Python exception #{number}: {kind}{where}"


def _drop_before(tokens, token):
    """Drops the stream's tokens below token: they ran or were skipped."""
    while tokens and tokens[0] < token:
        pending.pop(tokens.popleft(), None)


@ffi.callback("void(void *)")
def _trampoline(user_data):
    token = int(ffi.cast("uintptr_t", user_data))
    entry = pending.get(token)
    if entry is None:
        kept = persistent.get(token)
        if kept is not None:
            _call(*kept)
        return
    try:
        _run(token, entry)
    finally:
        # Pending until it has run: the drain at exit waits for it.
        pending.pop(token, None)


def _run(token, entry):
    fn, args, stream = entry
    with _lock:
        tokens = _by_stream.get(stream)
        if tokens is not None:
            _drop_before(tokens, token)
            if tokens and tokens[0] == token:
                tokens.popleft()
    _call(fn, args)


def _call(fn, args):
    try:
        fn(*args)
    except BaseException as exc:  # every exception fails the stream, none escapes to C
        number = next(_exceptions)
        tb = exc.__traceback__.tb_next  # from fn's frame: this one is rill's
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        _errors.remember_traceback(number, text, exc)
        lib.rill_host_func_fail(_fail_message(number, exc).encode("utf-8", "replace"))


def launch(stream_handle, device_handle, fn, args, where):
    """Runs fn(*args) in the order of the stream; see Stream.launch_host_func."""
    if not callable(fn):
        raise TypeError(f"{where}: fn must be callable, not {type(fn).__name__}")
    # A full queue is waited for here, where Ctrl-C can end the wait, and not
    # under launch_lock, which a host function that launches one needs.
    status = _wait.room(stream_handle)
    if status != 0:
        raise _errors.error(status)
    with launch_lock:
        if life.exiting:
            raise _errors.NotPermittedError(
                f"{where}: the interpreter is exiting; no Python host function may be "
                "launched any more")
        token = next(_tokens)
        _next_token[0] = token + 1
        graph = capture_of(stream_handle) if capture_of is not None else None
        if graph is not None:  # captured: runs at every replay of the graph
            persistent[token] = (fn, args)
            graph._host_tokens.append(token)
            status = lib.rill_launch_host_func(stream_handle, _trampoline,
                                               ffi.cast("void *", token))
            if status != 0:
                persistent.pop(token, None)
                graph._host_tokens.pop()
                raise _errors.error(status)
            return
        pending[token] = (fn, args, stream_handle)
        with _lock:
            tokens = _by_stream.get(stream_handle)
            if tokens is None:
                tokens = _by_stream[stream_handle] = collections.deque()
                _device_of[stream_handle] = device_handle
            tokens.append(token)
        status = lib.rill_launch_host_func(stream_handle, _trampoline, ffi.cast("void *", token))
        if status != 0:
            exc = _errors.error(status)
            pending.pop(token, None)
            with _lock:
                if tokens and tokens[-1] == token:
                    tokens.pop()
            raise exc


def mark():
    """The first token not yet taken: a wait begun after this call covers
    every launch with a smaller token, since launches take their token and
    submit under launch_lock."""
    with launch_lock:
        return _next_token[0]


def done_before(stream_handle, token):
    """The stream's work submitted before token was taken has ended."""
    with _lock:
        tokens = _by_stream.get(stream_handle)
        if tokens is not None:
            _drop_before(tokens, token)
            if not tokens:
                del _by_stream[stream_handle], _device_of[stream_handle]


def device_done_before(device_handle, token):
    """The work of every stream of the device submitted before token was
    taken has ended."""
    with _lock:
        for stream_handle, tokens in list(_by_stream.items()):
            if _device_of[stream_handle] == device_handle:
                _drop_before(tokens, token)
                if not tokens:
                    del _by_stream[stream_handle], _device_of[stream_handle]


@on_shutdown
def _forget():
    pending.clear()
    persistent.clear()
    _by_stream.clear()
    _device_of.clear()
