# SPDX-License-Identifier: MIT
"""torch's tensor and stream API on rill: `import rill.compat.torch as torch`
stands for `import torch` in the seeds' examples, and in a small model's
code (with `import rill.compat.torch.nn as nn` and
`rill.compat.torch.nn.functional as F`).

What it has: the dtypes float32/float (and float16/half, stored as halves
and computed in float32; float64/double name float32: rill converts float64
data to float32 and computes in float32, so a float64 model's results agree
with torch's to float32's precision), torch.device, Tensor (with .cuda(),
.npu(), .cpu(), .to(), add_, mm, record_stream, size() as a torch.Size,
get_device(), and what PyTorch's stream and allocator tests use: data_ptr,
copy_, zero_, fill_, clone, tolist, sub_, mul_, += -= *= in place), the
legacy FloatTensor/HalfTensor (host tensors, which .cuda() copies) and
torch.cuda's (device tensors), the makers
randn/ones/zeros/empty/full/tensor/from_numpy/as_tensor/arange and the
*_like ones with dtype= and device= ("cuda", "npu", "cpu" with an index:
rill's device of that index; without one: the current device), the ops of a
small model (rill._views, rill._math): indexing and slicing, views
(reshape, view, transpose, permute, t, unsqueeze, squeeze, flatten, expand),
broadcasting + - * / **, activations, softmax and log_softmax, cat and
stack, sum/mean/max/min/argmax along a dimension with keepdim, conv2d with
stride and padding, pooling, matmul; add/sub/mul/mm/sum, manual_seed,
no_grad, cuda (and npu, as torch_npu adds it): Stream (a context manager
too), Event (with cuda_event), _sleep (a host function), device,
set_device, stream, StreamContext, current_stream, default_stream,
set_stream, synchronize and the memory calls, nn (Module and the layers of
an MLP and a CNN, forward only) and nn.functional, and compile(), which
maps mode="reduce-overhead" (or a torchair backend configured so) to
rill.compile. Ops run on the current stream, as rill's do, whatever device
their tensors are on. A torch name it lacks raises NotImplementedError
naming the call and the way to PyTorch (DLPack), never AttributeError."""

from ..._tensor import dtype, float16, float32, manual_seed
from . import cuda, nn
from ._tensor import (FloatTensor, HalfTensor, Size, Tensor, abs, add, arange, argmax, argmin,
                      as_tensor, cat, clamp, concat, device, div, empty, exp, flatten, float64,
                      from_numpy, full, inference_mode, is_tensor, log, log_softmax, matmul,
                      max, maximum, mean, min, minimum, mm, mul, no_grad, ones, ones_like,
                      permute, randn, randn_like, relu, reshape, sigmoid, softmax, sqrt,
                      squeeze, stack, sub, sum, tanh, tensor, transpose, unsqueeze, zeros,
                      zeros_like)
from ._compile import compile
from ._missing import module_getattr

npu = cuda  # torch_npu adds torch.npu: the same calls under another name
half = float16
float = float32  # noqa: A001 - torch's name
double = float64
__getattr__ = module_getattr("torch")

__all__ = ["FloatTensor", "HalfTensor", "Size", "Tensor", "abs", "add", "arange", "argmax",
           "argmin", "as_tensor", "cat", "clamp", "compile", "concat", "cuda", "device", "div",
           "double", "dtype", "empty", "exp", "flatten", "float", "float16", "float32",
           "float64", "from_numpy", "full", "half", "inference_mode", "is_tensor", "log",
           "log_softmax", "manual_seed", "matmul", "max", "maximum", "mean", "min", "minimum",
           "mm", "mul", "nn", "no_grad", "npu", "ones", "ones_like", "permute", "randn",
           "randn_like", "relu", "reshape", "sigmoid", "softmax", "sqrt", "squeeze", "stack",
           "sub", "sum", "tanh", "tensor", "transpose", "unsqueeze", "zeros", "zeros_like"]
