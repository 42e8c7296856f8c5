"""rill.compile: a function captured into a graph at its first call for a
set of input shapes and replayed at later calls (torchair's
reduce-overhead mode, torch.compile's mode of that name), on rill._graph's
capture and rill._tensor's tensors."""
import collections
import numbers

from . import _stream
from ._errors import check
from ._ffi import lib
from ._graph import Graph, capturing
from ._tensor import Tensor


def _signature(args, kwargs):
    """The key of a call's graph, and the values of its numbers: tensors by
    class, shape and dtype, numbers by type only (a graph captured for one
    value is captured again for another, in the same place of the cache),
    other arguments by value."""
    parts = []
    values = []
    for a in list(args) + [kwargs[k] for k in sorted(kwargs)]:
        if isinstance(a, Tensor):
            parts.append(("T", type(a), a._shape, a._dtype))
        elif isinstance(a, numbers.Number):
            parts.append(("N", type(a)))
            values.append(a)
        else:
            parts.append(("V", type(a), repr(a)))
    return tuple(parts) + tuple(sorted(kwargs)), tuple(values)


def _copied(result, s):
    """result with each tensor in it replaced by a copy made on s: what the
    next replay overwrites is the graph's, not the caller's."""
    if isinstance(result, Tensor):
        return result._copy(s)
    if isinstance(result, tuple) and hasattr(result, "_fields"):  # a namedtuple
        return type(result)(*(_copied(r, s) for r in result))
    if isinstance(result, (tuple, list)):
        return type(result)(_copied(r, s) for r in result)
    if isinstance(result, dict):
        return type(result)((k, _copied(v, s)) for k, v in result.items())
    return result


class _Entry:
    __slots__ = ("graph", "inputs", "outputs", "values")


CACHE_SIZE_LIMIT = 8


class compiled:
    """fn captured into a graph at its first call for given input shapes,
    dtypes and other arguments, and replayed at later calls with the same:
    the tensor arguments are copied into the graph's own inputs (in stream
    order on the current stream) and the graph is launched there. Each
    call returns copies of the graph's outputs, made after its replay on
    the current stream, so that results kept from earlier calls hold their
    own values.

    The cache holds at most cache_size_limit graphs (rill.compile's
    argument; rill._compile.CACHE_SIZE_LIMIT, 8, by default), one per set of
    tensor shapes, dtypes and classes and of other arguments that are not
    numbers: a call with a new set captures a graph and, when the cache is
    full, drops the least recently used one. Numbers are baked into the
    ops of a capture, so a call whose numbers differ from its graph's
    captures that graph again, in place: they never add graphs."""

    def __init__(self, fn, cache_size_limit=None):
        if not callable(fn):
            raise TypeError(f"rill.compile: fn must be callable, not {type(fn).__name__}")
        if cache_size_limit is None:
            cache_size_limit = CACHE_SIZE_LIMIT
        if isinstance(cache_size_limit, bool) or not isinstance(cache_size_limit, int) or \
                cache_size_limit < 1:
            raise ValueError(f"rill.compile: cache_size_limit must be an int 1 or more, not "
                             f"{cache_size_limit!r}")
        self.fn = fn
        self.cache_size_limit = cache_size_limit
        self._entries = collections.OrderedDict()  # key -> _Entry, least recently used first

    def _capture(self, args, kwargs, s):
        entry = _Entry()
        # The graph's inputs: copies that live as long as the graph.
        entry.inputs = [a._copy(s) if isinstance(a, Tensor) else a for a in args]
        kw = {k: (v._copy(s) if isinstance(v, Tensor) else v) for k, v in kwargs.items()}
        entry.inputs.extend(kw[k] for k in sorted(kw))
        g = Graph()
        g.capture_begin(s)
        try:
            result = self.fn(*entry.inputs[:len(args)], **kw)
        except BaseException:
            if capturing() is g:
                try:
                    g.capture_end()
                except Exception:
                    pass
            raise
        g.capture_end()
        entry.graph = g
        entry.outputs = result
        return entry

    def __call__(self, *args, **kwargs):
        key, values = _signature(args, kwargs)
        entries = self._entries
        entry = entries.get(key)
        s = _stream.current()
        if entry is None or entry.values != values:
            if entry is not None:
                del entries[key]
            entry = self._capture(args, kwargs, s)
            entry.values = values
            entries[key] = entry
            while len(entries) > self.cache_size_limit:
                entries.popitem(last=False)
        else:
            entries.move_to_end(key)
            flat = list(args) + [kwargs[k] for k in sorted(kwargs)]
            for mine, given in zip(entry.inputs, flat):
                if isinstance(mine, Tensor) and mine is not given and mine._numel:
                    check(lib.rill_memcpy_async(mine._ptr, given._valid("rill.compile"),
                                                mine.nbytes, s._h))
        entry.graph.replay(s)
        return _copied(entry.outputs, s)


def compile(fn=None, *, mode="reduce-overhead", cache_size_limit=None):  # noqa: A001
    """rill.compile(fn) or @rill.compile: fn captured at its first call and
    replayed after (see compiled). mode must be "reduce-overhead";
    cache_size_limit bounds the graphs kept (None: CACHE_SIZE_LIMIT, 8)."""
    if mode != "reduce-overhead":
        raise ValueError(f"rill.compile: mode must be 'reduce-overhead', not {mode!r}")
    if fn is None:
        return lambda f: compiled(f, cache_size_limit)
    return compiled(fn, cache_size_limit)
