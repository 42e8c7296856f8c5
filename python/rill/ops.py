# SPDX-License-Identifier: MIT
"""The built-in ops on rill.Tensor, each run on the current stream of its
tensors' device:
add(a, b, alpha=1), sub(a, b, alpha=1), mul(a, b), matmul(a, b), sum(a),
conv2d(input, weight). Numbers may stand for a or b where they make sense."""

from ._ops import add, conv2d, matmul, mul, sub, sum  # noqa: A004 - as numpy and torch name it

__all__ = ["add", "conv2d", "matmul", "mul", "sub", "sum"]
