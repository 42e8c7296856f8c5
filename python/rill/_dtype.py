# SPDX-License-Identifier: MIT
"""The tensor element types (rill.float32, rill.float16, and int64 for the
positions of max and min along a dimension) and the checks of the dtype
and shape arguments of the tensor makers."""

import numbers
import operator

import numpy as np


class dtype:
    """A tensor element type: rill.float32, or rill.float16 (storage; the ops
    compute in float32)."""

    __slots__ = ("name", "itemsize", "numpy")

    def __init__(self, name, itemsize, numpy_type):
        self.name = name
        self.itemsize = itemsize
        self.numpy = np.dtype(numpy_type)

    def __repr__(self):
        return f"rill.{self.name}"

    def __reduce__(self):
        return self.name  # pickled as the module's rill.float32 or rill.float16


float32 = dtype("float32", 4, np.float32)
float16 = dtype("float16", 2, np.float16)
# The positions that max and min along a dimension give: storage only (no
# op computes on them; numpy(), item() and tolist() read them).
int64 = dtype("int64", 8, np.int64)
DTYPES = {"float32": float32, np.dtype(np.float32): float32,
          "float16": float16, np.dtype(np.float16): float16}


def dtype_arg(value, where):
    """A dtype argument as rill.float32 or rill.float16 (None stays None);
    TypeError naming where for anything else."""
    if value is None or value is float32 or value is float16:
        return value
    if isinstance(value, dtype) and value.name == "float64":
        return float32  # torch.float64 of rill.compat.torch: float64 data becomes float32
    try:
        found = DTYPES.get(value if isinstance(value, str) else np.dtype(value))
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"{where}: dtype must be rill.float32 or rill.float16, not {value!r}")
    return found


def shape_arg(shape, where):
    """A shape given as ints or one sequence of ints, as a tuple of ints 0
    or more."""
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = shape[0]
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{where}: shape must be ints or a sequence of ints, "
                        f"not {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{where}: shape {shape} has a negative dimension")
    return shape


def numel(shape):
    """The number of elements of shape."""
    n = 1
    for d in shape:
        n *= d
    return n
