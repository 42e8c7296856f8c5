# SPDX-License-Identifier: MIT
"""Tagged streams and events of rill (rill_stream_get_tagged,
rill_event_get_tagged) as PyTorch custom ops, torch.ops.rill.*, which
torch.compile keeps in its graphs: Dynamo records them as calls (none is
dead code: each is registered with torch.fx.node.has_side_effect) and a
backend runs or captures them in order. rill.compat.torchair builds
torchair's npu_stream_switch, tagged events and npu_record_tagged_stream
on them.

  rill::stream_switch_enter(tag, priority)  the current stream becomes the
      tagged stream of tag on the current stream's device (created at first
      use with priority; later priorities are ignored, as rill's are)
  rill::stream_switch_exit(tag)             the stream current before the
      matching enter is current again
  rill::tagged_event_record(tag)            records tag's event on the
      current stream
  rill::tagged_event_wait(tag)              the current stream waits for
      tag's event as last recorded
  rill::record_tagged_stream(t, tag)        t.record_stream(tag's stream)

The streams entered are kept per thread, innermost last."""

import threading

import torch
import torch.fx
from torch.library import custom_op

from rill._internal import check, ffi, lib

from . import _C
from . import device_module as _rill

_state = threading.local()


def _entered():
    stack = getattr(_state, "entered", None)
    if stack is None:
        stack = _state.entered = []
    return stack


def depth():
    """How many stream switches the calling thread is inside."""
    return len(_entered())


def unwind(to_depth):
    """Leaves the calling thread's stream switches down to to_depth,
    making the stream current before them current again (after a failure
    inside one)."""
    stack = _entered()
    if len(stack) > to_depth:
        _rill.set_stream(stack[to_depth][1])
        del stack[to_depth:]


def tagged_stream(tag, priority=0):
    """The torch.rill.Stream that tag names on the current stream's device:
    the same stream for the same tag, created at first use with priority."""
    if not isinstance(tag, str):
        raise TypeError(f"torch_rill.tagged.tagged_stream: tag must be a str, not "
                        f"{type(tag).__name__}")
    dev = ffi.new("rill_device **")
    check(lib.rill_stream_get_device(_current_handle(), dev))
    out = ffi.new("rill_stream **")
    check(lib.rill_stream_get_tagged(dev[0], tag.encode(), int(priority), out))
    return _rill._stream(_C._wrap_stream_handle(int(ffi.cast("uintptr_t", out[0]))))


def _tagged_event(tag):
    out = ffi.new("rill_event **")
    check(lib.rill_event_get_tagged(tag.encode(), out))
    return out[0]


def _current_handle():
    return ffi.cast("rill_stream *", _rill.current_stream().rill_handle)


@custom_op("rill::stream_switch_enter", mutates_args=())
def stream_switch_enter(tag: str, priority: int) -> None:
    stream = tagged_stream(tag, priority)
    previous = _rill.current_stream()
    _rill.set_stream(stream)
    _entered().append((tag, previous))


@custom_op("rill::stream_switch_exit", mutates_args=())
def stream_switch_exit(tag: str) -> None:
    stack = _entered()
    if not stack or stack[-1][0] != tag:
        inner = repr(stack[-1][0]) if stack else "none"
        raise RuntimeError(f"torch.ops.rill.stream_switch_exit('{tag}'): the innermost stream "
                           f"switch is {inner}; leave switches in the reverse order of entering")
    _, previous = stack.pop()
    _rill.set_stream(previous)


@custom_op("rill::tagged_event_record", mutates_args=())
def tagged_event_record(tag: str) -> None:
    check(lib.rill_event_record(_tagged_event(tag), _current_handle()))


@custom_op("rill::tagged_event_wait", mutates_args=())
def tagged_event_wait(tag: str) -> None:
    check(lib.rill_stream_wait_event(_current_handle(), _tagged_event(tag)))


@custom_op("rill::record_tagged_stream", mutates_args=())
def record_tagged_stream(tensor: torch.Tensor, tag: str) -> None:
    if tensor.device.type != "rill":
        raise ValueError(f"torch.ops.rill.record_tagged_stream: the tensor is on "
                         f"{tensor.device}; it must be on rill")
    tensor.record_stream(tagged_stream(tag))


for _op in (stream_switch_enter, stream_switch_exit, tagged_event_record, tagged_event_wait,
            record_tagged_stream):
    _op.register_fake(lambda *args: None)
for _name in ("stream_switch_enter", "stream_switch_exit", "tagged_event_record",
              "tagged_event_wait", "record_tagged_stream"):
    # Dynamo's graphs name the packet, later passes the overload: neither is
    # dead code although it returns nothing.
    torch.fx.node.has_side_effect(getattr(torch.ops.rill, _name))
    torch.fx.node.has_side_effect(getattr(torch.ops.rill, _name).default)


__all__ = ["depth", "tagged_stream", "unwind"]
