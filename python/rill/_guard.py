# SPDX-License-Identifier: MIT
"""The device guard of the tensor ops.

An op runs on its tensor operands' device, on that device's current
stream, whatever the calling thread's current device, as PyTorch's device
guard runs it: so it comes after the work of that stream that wrote them,
and its output is on their device. Operands on two devices are refused."""

import functools

from . import _device, _stream
from ._core import TensorCore
from ._errors import DeviceMismatchError
from ._runtime import life


def operands_device(args):
    """The device (rill_device *) of the tensors among args (and in the
    lists and tuples among them: cat's), or None; and a second device when
    there are tensors on two (else None)."""
    dev = None
    for a in args:
        if isinstance(a, TensorCore):
            d = a._stream._dev
        elif a.__class__ is list or a.__class__ is tuple:
            d, other = operands_device(a)
            if other is not None:
                return d, other
        else:
            continue
        if d is None or d == dev:
            continue
        if dev is not None:
            return dev, d
        dev = d
    return dev, None


def _has_stale(args):
    """Whether a tensor among args (or in a list or tuple among them) is of
    a runtime that rill.shutdown() released."""
    for a in args:
        if isinstance(a, TensorCore):
            if a._gen != life.generation:
                return True
        elif (a.__class__ is list or a.__class__ is tuple) and _has_stale(a):
            return True
    return False


def on_operands_device(where):
    """Decorator: the op runs with its tensor operands' device current (see
    above); DeviceMismatchError for operands on two devices, naming the op:
    where, a str or a function of the op's arguments that makes one (a
    where= argument of the call instead, when given)."""
    def wrap(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            operands = (*args, *kwargs.values()) if kwargs else args
            dev, other = operands_device(operands)
            if dev is None or (other is None and dev == _stream.current()._dev):
                return fn(*args, **kwargs)
            if _has_stale(operands):
                return fn(*args, **kwargs)  # it raises the error of an old runtime's tensor
            if other is not None:
                name = kwargs.get("where") or (where if isinstance(where, str)
                                               else where(*args, **kwargs))
                raise DeviceMismatchError(
                    f"{name}: Expected all tensors to be on the same device, but found at "
                    f"least two devices, {_device.Device._wrap(dev)} and "
                    f"{_device.Device._wrap(other)}! Copy them to one device first "
                    "(t.to(device))")
            with on_device(_device.Device._wrap(dev), fn.__name__):
                return fn(*args, **kwargs)
        return op
    return wrap


class on_device:
    """`with on_device(device, where):` makes device (anything rill.device
    takes; None: nothing changes) the calling thread's current device for
    the block, so that the work and memory of a maker go to its current
    stream."""

    __slots__ = ("dev", "prev")

    def __init__(self, device, where):
        self.dev = None if device is None else \
            _device.Device._wrap(_device.handle_of(device, where))
        self.prev = None

    def __enter__(self):
        if self.dev is not None:
            cur = _device.current_device()
            if cur is not self.dev:
                self.prev = cur
                _device.set_device(self.dev)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            _device.set_device(self.prev)
            self.prev = None
        return False
