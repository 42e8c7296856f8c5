# SPDX-License-Identifier: MIT
"""The internal API of the compatibility modules (rill.compat): what they
need of the package beyond its public names (which they take from rill
itself), in one place, so that they reach into no other private module
(scripts/layers.py --check --python refuses it). Nothing here is for
users: names and signatures change with the package.

  tensors     Tensor subclasses keep their class through the ops (the ops
              make results of their first tensor operand's class); the
              makers below take cls.
  where=      the name an error sentence gives the call (torch.add, ...)."""

from ._core import is_scalar
from ._device import count_of_kind
from ._dtype import dtype_arg, shape_arg
from ._errors import check
from ._ffi import ffi, lib
from ._from_dlpack import from_dlpack
from ._guard import on_device, on_operands_device
from ._layout import to_device
from ._makers import filled, randn, seed
from ._math import argextreme, conv2d, extreme, pool2d, reduce, softmax
from ._math import matmul as matmul_nd
from ._ops import add, binary, map_op, matmul, mul, rdiv, sub, sum, to_dtype
from ._stream import current
from ._views import cat, flatten, permute, reshape, squeeze, stack, transpose, unsqueeze

__all__ = ["add", "argextreme", "binary", "cat", "check", "conv2d", "count_of_kind",
           "current", "dtype_arg", "extreme", "ffi", "filled", "flatten", "from_dlpack",
           "is_scalar", "lib", "map_op", "matmul", "matmul_nd", "mul", "on_device",
           "on_operands_device", "permute", "pool2d", "randn", "rdiv", "reduce", "reshape",
           "seed", "shape_arg", "softmax", "squeeze", "stack", "sub", "sum", "to_device",
           "to_dtype", "transpose", "unsqueeze"]
