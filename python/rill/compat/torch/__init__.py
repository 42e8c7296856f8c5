# SPDX-License-Identifier: MIT
"""torch's tensor and stream API on rill: `import rill.compat.torch as torch`
stands for `import torch` in the seeds' examples and in a small model's
code (with rill.compat.torch.nn and rill.compat.torch.nn.functional). Ops
run on the current stream, as rill's do. A torch name it lacks raises
NotImplementedError naming the call and the way to PyTorch (DLPack), never
AttributeError. What it covers: docs/python.md. Where PyTorch 2.15 and
torch_rill are installed, it is PyTorch itself, with torch.cuda served by
torch.rill (_pytorch.py)."""

import sys as _sys

from . import _pytorch

if _pytorch.wanted():
    _sys.modules[__name__] = _pytorch.module(__name__)
else:
    from ... import dtype, float16, float32, manual_seed
    from . import cuda, nn
    from ._tensor import (FloatTensor, HalfTensor, Size, Tensor, abs, add, arange, argmax,
                          argmin, as_tensor, cat, clamp, concat, device, div, empty, exp,
                          flatten, float64, from_dlpack, from_numpy, full, inference_mode,
                          is_tensor, log, log_softmax, matmul, max, maximum, mean, min, minimum,
                          mm, mul, no_grad, ones, ones_like, permute, randn, randn_like, relu,
                          reshape, sigmoid, softmax, sqrt, squeeze, stack, sub, sum, tanh,
                          tensor, transpose, unsqueeze, zeros, zeros_like)
    from ._compile import compile
    from ._missing import module_getattr

    npu = cuda  # torch_npu adds torch.npu: the same calls under another name
    half = float16
    float = float32  # noqa: A001 - torch's name
    double = float64
    __getattr__ = module_getattr("torch")

    __all__ = ["FloatTensor", "HalfTensor", "Size", "Tensor", "abs", "add", "arange",
               "argmax", "argmin", "as_tensor", "cat", "clamp", "compile", "concat", "cuda",
               "device", "div", "double", "dtype", "empty", "exp", "flatten", "float", "float16",
               "float32", "float64", "from_dlpack", "from_numpy", "full", "half",
               "inference_mode", "is_tensor", "log", "log_softmax", "manual_seed", "matmul",
               "max", "maximum", "mean", "min", "minimum", "mm", "mul", "nn", "no_grad", "npu",
               "ones", "ones_like", "permute", "randn", "randn_like", "relu", "reshape",
               "sigmoid", "softmax", "sqrt", "squeeze", "stack", "sub", "sum", "tanh", "tensor",
               "transpose", "unsqueeze", "zeros", "zeros_like"]
