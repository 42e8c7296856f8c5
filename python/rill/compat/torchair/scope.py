# SPDX-License-Identifier: MIT
"""torchair.scope.npu_stream_switch on rill's tagged streams (on PyTorch's
where rill.compat.torch is PyTorch: _pytorch.py)."""

from ... import StreamContext as _StreamContext, tagged_stream as _tagged_stream
from ..torch._pytorch import wanted as _pytorch_wanted


def npu_stream_switch(stream_tag, stream_priority=0):
    """`with npu_stream_switch(tag, priority=0):` runs the block's ops on the
    stream that tag names (the same stream for the same tag, created at
    first use with priority); outside the block, on the stream before."""
    if not isinstance(stream_tag, str):
        raise TypeError("torchair.scope.npu_stream_switch: stream_tag must be a str, "
                        f"not {type(stream_tag).__name__}")
    return _StreamContext(_tagged_stream(stream_tag, stream_priority))


if _pytorch_wanted():
    from ._pytorch import npu_stream_switch  # noqa: F811


__all__ = ["npu_stream_switch"]
