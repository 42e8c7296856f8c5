# SPDX-License-Identifier: MIT
"""torch's tensor and stream API on rill: `import rill.compat.torch as torch`
stands for `import torch` in the seeds' examples.

What it has: the dtypes float32/float (and float16/half, stored as halves
and computed in float32), torch.device, Tensor (with .cuda(), .npu(),
.cpu(), .to(), add_, mm, record_stream, size() as a torch.Size,
get_device(), and what PyTorch's stream and allocator tests use: data_ptr,
copy_, zero_, fill_, clone, tolist, sub_, mul_, += -= *= in place), the
legacy FloatTensor/HalfTensor (host tensors, which .cuda() copies) and
torch.cuda's (device tensors), the makers
randn/ones/zeros/empty/full/tensor/from_numpy with dtype= and device=
("cuda", "npu", "cpu" with an index: rill's device of that index; without
one: the current device), add/sub/mul/mm/matmul/sum, manual_seed, cuda
(and npu, as torch_npu adds it): Stream (a context manager too), Event
(with cuda_event), _sleep (a host function), device, set_device,
stream, StreamContext, current_stream, default_stream, set_stream,
synchronize and the memory calls, nn.Module, and compile(), which maps
mode="reduce-overhead" (or a torchair backend configured so) to
rill.compile. Ops run on the current stream, as rill's do, whatever
device their tensors are on."""

from ..._tensor import dtype, float16, float32, manual_seed
from . import cuda, nn
from ._tensor import (FloatTensor, HalfTensor, Size, Tensor, add, device, empty, from_numpy,
                      full, matmul, mm, mul, ones, randn, sub, sum, tensor, zeros)
from ._compile import compile

npu = cuda  # torch_npu adds torch.npu: the same calls under another name
half = float16
float = float32  # noqa: A001 - torch's name

__all__ = ["FloatTensor", "HalfTensor", "Size", "Tensor", "add", "compile", "cuda", "device", "dtype", "empty", "float", "float16",
           "float32", "from_numpy", "full", "half", "manual_seed", "matmul", "mm", "mul", "nn",
           "npu", "ones", "randn", "sub", "sum", "tensor", "zeros"]
