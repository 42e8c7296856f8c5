// SPDX-License-Identifier: MIT
// Embeddings as rill kernels queued on the current stream: embedding (the
// rows of a float32 weight [V, D] at int64 or int32 indices of any shape)
// as rill_op_embedding_f32, and embedding_dense_backward (the gradient's
// rows summed per index into [V, D], row padding_idx zero) as
// rill_op_embedding_backward_f32, which autograd's embedding_backward
// reaches when sparse is false; with scale_grad_by_freq each row of that
// sum is then divided by how often its index occurs, the counts being the
// same backward of a column of ones (rill_op_fill_f32, then
// rill_op_embedding_backward_f32 with dim 1), clamped to at least 1 by
// rill_op_map_f32 and broadcast over the row by rill_op_binary_f32: every
// sum in one order, so the same bits on every run. An index out of range cannot be seen
// without waiting for the stream: the kernel fails its launch, and the
// error surfaces at the stream's next synchronize naming the op (as CUDA's
// device-side assert does). Other cases (other dtypes, a weight not 2-D,
// empty tensors) go to the fallback, with the CPU's behaviour and errors.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/embedding_ops.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn_symint;

// Indices the kernels read: int64 or int32 on the device of `on`.
bool index_ok(const at::Tensor &indices, const at::Tensor &on) {
    return (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt) &&
           indices.device() == on.device() && indices.numel() > 0;
}

size_t index_bytes(const at::Tensor &indices) {
    return indices.scalar_type() == at::kLong ? 8 : 4;
}

at::Tensor embedding(const at::Tensor &weight, const at::Tensor &indices, c10::SymInt padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
    if (!is_f32(weight) || weight.dim() != 2 || weight.numel() == 0 || !index_ok(indices, weight))
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::embedding>::call(
            weight, indices, padding_idx, scale_grad_by_freq, sparse);
    const c10::DeviceGuard guard(weight.device());
    at::Tensor wc = weight.contiguous(), ic = indices.contiguous();
    std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end());
    shape.push_back(weight.size(1));
    at::Tensor out = at::empty(shape, weight.options());
    TORCH_RILL_CHECK(rill_op_embedding_f32(
        stream_of(out), out.data_ptr<float>(), wc.const_data_ptr<float>(), ic.const_data_ptr(),
        index_bytes(ic), static_cast<size_t>(ic.numel()), static_cast<size_t>(weight.size(0)),
        static_cast<size_t>(weight.size(1))));
    return out;
}

at::Tensor embedding_dense_backward(const at::Tensor &grad, const at::Tensor &indices,
                                    c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
    int64_t rows = num_weights.is_symbolic() ? 0 : num_weights.as_int_unchecked();
    int64_t dim = grad.dim() > 0 ? grad.size(-1) : 0;
    if (padding_idx.is_symbolic() || !is_f32(grad) || rows <= 0 || dim <= 0 ||
        !index_ok(indices, grad) || grad.numel() != indices.numel() * dim)
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::embedding_dense_backward>::call(
            grad, indices, num_weights, padding_idx, scale_grad_by_freq);
    const c10::DeviceGuard guard(grad.device());
    at::Tensor gc = grad.contiguous(), ic = indices.contiguous();
    at::Tensor out = at::empty({rows, dim}, grad.options());
    rill_stream *s = stream_of(out);
    size_t n = static_cast<size_t>(ic.numel()), v = static_cast<size_t>(rows);
    size_t d = static_cast<size_t>(dim);
    int64_t pad = padding_idx.as_int_unchecked();
    TORCH_RILL_CHECK(rill_op_embedding_backward_f32(s, out.data_ptr<float>(),
                                                    gc.const_data_ptr<float>(), ic.const_data_ptr(),
                                                    index_bytes(ic), n, v, d, pad));
    if (scale_grad_by_freq) {
        // counts[r] = how many indices are r (0 for padding_idx, whose row
        // is 0 anyway), at least 1; out[r, :] /= counts[r].
        at::Tensor ones = at::empty({ic.numel()}, grad.options());
        at::Tensor counts = at::empty({rows}, grad.options());
        TORCH_RILL_CHECK(rill_op_fill_f32(s, ones.data_ptr<float>(), 1.0f, n));
        TORCH_RILL_CHECK(rill_op_embedding_backward_f32(
            s, counts.data_ptr<float>(), ones.const_data_ptr<float>(), ic.const_data_ptr(),
            index_bytes(ic), n, v, 1, pad));
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_MAX, counts.data_ptr<float>(),
                                         counts.const_data_ptr<float>(), 1.0f, v));
        size_t shape[2] = {v, d}, out_strides[2] = {d, 1}, count_strides[2] = {1, 0};
        TORCH_RILL_CHECK(rill_op_binary_f32(
            s, RILL_BINARY_DIV, out.data_ptr<float>(), out.const_data_ptr<float>(), out_strides,
            counts.const_data_ptr<float>(), count_strides, shape, 2));
    }
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("embedding", embedding);
    m.impl("embedding_dense_backward", embedding_dense_backward);
}

} // namespace torch_rill
