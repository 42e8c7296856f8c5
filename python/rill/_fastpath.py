# SPDX-License-Identifier: MIT
"""The fast path of the element-wise operators: a + b, a - b, a * b, a
tensor with a number and -a on float32 tensors of one shape and class
with elements on the current device, while no capture is active
anywhere: one call of rill_op_*_f32_new (rill_malloc_async, the op and
rill_event_record of the output's event, the calls that the general path,
rill._ops, makes one by one), with the checks that cannot fail there left
out. Anything else, and an allocation that needs a wait for pending
frees, takes the general path, which raises the errors: the general path
is the semantics, the fast path gives what it gives.

The fast path is _rill_fast's (python/rill_fast.c: TensorBase's number
slots), which configure() below points at the general path. Where the
build did not compile it, the Python form of the fields takes the methods
of Operators instead: the same path in Python, one function for every
operator (a number on the left of a tensor takes the general path there)."""

import threading

from . import _graph, _stream
from ._core import build, new, new_event, release
from ._dtype import float32
from ._errors import check
from ._ffi import fast, ffi, lib
from ._ops import _operand, add, mul, neg, sub
from ._runtime import life, on_shutdown

_bufs = threading.local()  # .out: a float ** per thread for rill_op_*_f32_new


def _out_buf():
    buf = _bufs.out = ffi.new("float **")
    return buf


def _general(general):
    """The operator method a (op) b off the fast path: general(a, b)."""
    def method(self, other):
        return general(self, other) if _operand(other) else NotImplemented
    return method


def _radd(self, other):
    return add(self, other) if _operand(other) else NotImplemented


def _rsub(self, other):
    return sub(other, self) if _operand(other) else NotImplemented


def _rmul(self, other):
    return mul(self, other) if _operand(other) else NotImplemented


def _neg(self, _other):
    return neg(self)


def _operator(kind, general):
    """The method of operator kind ("add", "sub", "mul": a (op) b; "neg":
    -a) in the package's Python form: on two tensors rill_op_add_f32_new
    (alpha 1 or -1) or rill_op_mul_f32_new; with a number b, a + alpha*b
    by rill_op_add_scalar_f32_new or a * b by rill_op_map_f32_new
    (RILL_MAP_SCALE); -a by rill_op_map_f32_new (RILL_MAP_NEG); into a new
    tensor like a on the current stream. general(a, b) (b None for -a) in
    every other case. Its frame is the only Python one of the fast path."""
    unary = kind == "neg"
    alpha = {"add": 1.0, "sub": -1.0}.get(kind)  # None: a product or -a
    op = lib.rill_op_mul_f32_new if kind == "mul" else lib.rill_op_add_f32_new
    map_kind = {"mul": lib.RILL_MAP_SCALE, "neg": lib.RILL_MAP_NEG}.get(kind)

    def method(self, other=None, _life=life, _active=_graph.active,
               _current=lib.rill_current_stream, _null=ffi.NULL, _streams=_stream, _f32=float32,
               _new=new, _build=build, _new_event=new_event,
               _add_scalar=lib.rill_op_add_scalar_f32_new,
               _map=lib.rill_op_map_f32_new, _oom=lib.RILL_ERROR_OUT_OF_MEMORY):
        cls = self.__class__
        tensors = other.__class__ is cls
        if tensors:
            shape = self._shape
            if not (self._dtype is _f32 and other._dtype is _f32 and shape == other._shape
                    and self._strides is None and other._strides is None
                    and (n := self._numel) and (gen := self._gen) == _life.generation
                    and other._gen == gen and not _active[0]):
                return general(self, other)
        elif unary:
            if not (self._dtype is _f32 and self._strides is None and (n := self._numel)
                    and (gen := self._gen) == _life.generation and not _active[0]):
                return general(self, other)
            shape = self._shape
            value = 0.0
        elif ((other.__class__ is float or other.__class__ is int)
              and self._dtype is _f32 and self._strides is None and (n := self._numel)
              and (gen := self._gen) == _life.generation and not _active[0]):
            # before anything is taken: OverflowError for a huge int
            shape = self._shape
            value = other * alpha if alpha is not None else float(other)
        else:
            return general(self, other) if _operand(other) else NotImplemented
        h = _current(_null)
        last = _streams._last
        s = last[1] if last[0] == h else _streams.current()
        if not ((self._stream is s or self._stream._dev == s._dev)
                and (not tensors or other._stream is s or other._stream._dev == s._dev)):
            return general(self, other)  # on the operands' device (the device guard)
        pool = s._events
        try:
            ev = pool.pop()
        except IndexError:  # empty (another thread may empty it after a test)
            ev = _new_event()
        try:
            buf = _bufs.out
        except AttributeError:
            buf = _out_buf()
        if tensors:
            st = (op(h, self._ptr, other._ptr, n, ev, buf) if alpha is None
                  else op(h, self._ptr, other._ptr, alpha, n, ev, buf))
        elif map_kind is not None:
            st = _map(h, map_kind, self._ptr, value, n, ev, buf)
        else:
            st = _add_scalar(h, self._ptr, value, n, ev, buf)
        if st:
            pool.append(ev)
            if st == _oom:
                return general(self, other)  # which waits for pending frees first
            check(st)
        return _build(_new(cls), buf[0], shape, n, _f32, s, ev, gen, None, None, None)

    return method


class Operators:
    """+ - * (and their reflections) and -a of the package's Python form of
    the fields; _rill_fast.TensorBase has them as C slots."""

    __slots__ = ()

    __add__ = _operator("add", add)
    __sub__ = _operator("sub", sub)
    __mul__ = _operator("mul", mul)
    __neg__ = _operator("neg", _neg)
    __radd__, __rsub__, __rmul__ = _radd, _rsub, _rmul


if fast is not None:
    # TensorBase's number slots run the fast path in C and call these
    # otherwise; the Tensor classes define none of these methods, so that
    # Python calls the slots directly.
    def _address_of(p):
        if not isinstance(p, ffi.CData):
            raise TypeError(f"rill.Tensor: a pointer field takes a cdata pointer or None, "
                            f"not {type(p).__name__}")
        return int(ffi.cast("uintptr_t", p))

    fast.configure(float32=float32, cast_ptr=lambda a: ffi.cast("void *", a),
                   cast_event=lambda a: ffi.cast("rill_event *", a), address_of=_address_of,
                   check=check,
                   current=_stream.current, active=_graph.active, add=_general(add), radd=_radd,
                   sub=_general(sub), rsub=_rsub, mul=_general(mul), rmul=_rmul,
                   finalize_other=release, neg=neg)
    fast.set_generation(life.generation)
    on_shutdown(lambda: fast.set_generation(life.generation))
