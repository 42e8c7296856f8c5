# SPDX-License-Identifier: MIT
"""The tensor makers' work, for any Tensor class (rill._tensor's public
makers pass rill.Tensor, the compatibility modules theirs): tensors filled
with a number, copies converted to another dtype, and normal samples from
rill.manual_seed's seed."""

import numbers

from . import _stream
from ._core import finish, is_scalar
from ._dtype import dtype_arg, float32, shape_arg
from ._ffi import fast, lib
from ._guard import on_device


def filled(shape, value, dtype, where, cls):
    """A new tensor of class cls filled with value on the current stream."""
    if fast is not None and (dtype is None or dtype is float32) and shape.__class__ is tuple:
        t = fast.new(cls, shape, value)  # None: the general path below
        if t is not None:
            return t
    dt = dtype_arg(dtype, where) or float32
    if not is_scalar(value):
        raise TypeError(f"{where}: value must be a number, not {type(value).__name__}")
    s = _stream.current()
    out = cls._empty(shape_arg((shape,), where), dt, s, where)
    if out._numel:
        fill = lib.rill_op_fill_f32 if dt is float32 else lib.rill_op_fill_f16
        finish(out, s, fill(s._h, out._ptr, float(value), out._numel))
    return out


def converted(x, dt, s, where, cls=None):
    """A copy of tensor x as dtype dt, of class cls (x's by default), on s."""
    out = (cls or type(x))._empty(x._shape, dt, s, where)
    if out._numel:
        cast = lib.rill_op_cast_f16_f32 if dt is float32 else lib.rill_op_cast_f32_f16
        return finish(out, s, cast(s._h, out._ptr, x._valid(where), out._numel))
    return out


# The seed of randn and the number of calls since it was set: each call
# fills from its own 64-bit seed, so the values depend only on the seed and
# the order of the calls.
_rng = {"seed": 67280421310721, "calls": 0}


def manual_seed(seed):
    """Sets the seed of rill.randn (an int); the values that follow depend
    only on it and the order of the calls."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"rill.manual_seed: seed must be an int, not {type(seed).__name__}")
    _rng["seed"] = int(seed) & 0xFFFFFFFFFFFFFFFF
    _rng["calls"] = 0


def seed():
    """The seed that manual_seed set last (or the package's default)."""
    return _rng["seed"]


def randn(shape, dtype, device, cls, where):
    """A tensor of class cls of standard normal samples (float32, or float16
    rounded from them), filled on the current stream by rill_op_randn_f32
    (device's, when given: as rill.device takes it); shape as rill.randn's
    arguments give it."""
    if device is not None:
        with on_device(device, where):
            return randn(shape, dtype, None, cls, where)
    shape = shape_arg(shape, where)
    dt = dtype_arg(dtype, where) or float32
    s = _stream.current()
    out = cls._empty(shape, float32, s, where)
    key = (_rng["seed"] * 0x9E3779B97F4A7C15 + _rng["calls"]) & 0xFFFFFFFFFFFFFFFF
    _rng["calls"] += 1
    if out._numel:
        finish(out, s, lib.rill_op_randn_f32(s._h, out._ptr, out._numel, 0.0, 1.0, key))
    return out if dt is float32 else converted(out, dt, s, where)
