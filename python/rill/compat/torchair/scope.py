# SPDX-License-Identifier: MIT
"""torchair.scope.npu_stream_switch on rill's tagged streams."""

from ... import StreamContext as _StreamContext, tagged_stream as _tagged_stream


def npu_stream_switch(stream_tag, stream_priority=0):
    """`with npu_stream_switch(tag, priority=0):` runs the block's ops on the
    stream that tag names (the same stream for the same tag, created at
    first use with priority); outside the block, on the stream before."""
    if not isinstance(stream_tag, str):
        raise TypeError("torchair.scope.npu_stream_switch: stream_tag must be a str, "
                        f"not {type(stream_tag).__name__}")
    return _StreamContext(_tagged_stream(stream_tag, stream_priority))


__all__ = ["npu_stream_switch"]
