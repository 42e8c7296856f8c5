# SPDX-License-Identifier: MIT
"""torchair.ops: tagged events and npu_record_tagged_stream on rill (on
PyTorch's tensors where rill.compat.torch is PyTorch: _pytorch.py)."""

from ... import Event as _Event, Tensor as _Tensor, tagged_event as _tagged_event
from ... import tagged_stream as _tagged_stream
from ..torch._pytorch import wanted as _pytorch_wanted


def npu_create_tagged_event(tag):
    """The event that tag names (the same event for the same tag)."""
    if not isinstance(tag, str):
        raise TypeError("torchair.ops.npu_create_tagged_event: tag must be a str, "
                        f"not {type(tag).__name__}")
    return _tagged_event(tag)


def _event_arg(event, where):
    if not isinstance(event, _Event):
        raise TypeError(f"{where}: event must come from npu_create_tagged_event, "
                        f"not {type(event).__name__}")
    return event


def npu_tagged_event_record(event):
    """Records event on the current stream."""
    _event_arg(event, "torchair.ops.npu_tagged_event_record").record()


def npu_tagged_event_wait(event):
    """Makes the current stream wait for event's last record."""
    _event_arg(event, "torchair.ops.npu_tagged_event_wait").wait()


def npu_record_tagged_stream(input, tagged_stream):
    """Marks input's memory as used by the stream that tagged_stream names,
    until input is freed (tensor.record_stream in a graph)."""
    where = "torchair.ops.npu_record_tagged_stream"
    if not isinstance(input, _Tensor):
        raise TypeError(f"{where}: input must be a tensor, not {type(input).__name__}")
    if not isinstance(tagged_stream, str):
        raise TypeError(f"{where}: tagged_stream must be a str tag, "
                        f"not {type(tagged_stream).__name__}")
    input.record_stream(_tagged_stream(tagged_stream))


if _pytorch_wanted():
    from ._pytorch import (npu_create_tagged_event, npu_record_tagged_stream,  # noqa: F811
                           npu_tagged_event_record, npu_tagged_event_wait)


__all__ = ["npu_create_tagged_event", "npu_record_tagged_stream", "npu_tagged_event_record",
           "npu_tagged_event_wait"]
