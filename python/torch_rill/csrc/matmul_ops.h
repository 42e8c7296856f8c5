// SPDX-License-Identifier: MIT
// The batched product that bmm and attention share (matmul_ops.cpp).
#pragma once

#include <ATen/ATen.h>

namespace torch_rill {

// c [count, m, n], contiguous float32 on a rill device, = a b for a
// [count, m, k] and b [count, k, n] float32 on c's device, in one
// rill_op_matmul_batched_f32 on c's current stream: each operand read in
// place when its matrices are row-major or transposed with one batch
// stride (the heads of an attention, a transposed key), else from its
// contiguous copy.
void batched_product_into(at::Tensor &c, const at::Tensor &a, const at::Tensor &b);

} // namespace torch_rill
