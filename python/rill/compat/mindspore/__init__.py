# SPDX-License-Identifier: MIT
"""mindspore's stream API on rill: `import rill.compat.mindspore as ms`
stands for `import mindspore as ms`, and `from rill.compat.mindspore import
Tensor, ops` for `from mindspore import Tensor, ops`.

What it has: hal (Stream, Event, StreamCtx, current_stream,
default_stream, set_cur_stream, synchronize and the memory calls), Tensor
(float32 or float16, with asnumpy()), ops (add, mul, matmul, sum, ones,
zeros, and conv2d with strides, pad_mode and bias), float32, float16,
context.set_context(mode=PYNATIVE_MODE, max_device_memory=...), and
nn.Cell. Work runs on rill's current device."""

from ... import float16, float32
from . import context, hal, nn, ops
from ._tensor import Tensor
from .context import GRAPH_MODE, PYNATIVE_MODE, get_context, set_context

__all__ = ["GRAPH_MODE", "PYNATIVE_MODE", "Tensor", "context", "float16", "float32", "get_context",
           "hal", "nn", "ops", "set_context"]
