// SPDX-License-Identifier: MIT
// Embeddings as rill kernels queued on the current stream: embedding (the
// rows of a float32 weight [V, D] at int64 or int32 indices of any shape)
// as rill_op_embedding_f32, and embedding_dense_backward (the gradient's
// rows summed per index into [V, D], row padding_idx zero) as
// rill_op_embedding_backward_f32, which autograd's embedding_backward
// reaches when sparse is false. An index out of range cannot be seen
// without waiting for the stream: the kernel fails its launch, and the
// error surfaces at the stream's next synchronize naming the op (as CUDA's
// device-side assert does). Other cases (other dtypes, a weight not 2-D,
// empty tensors, scale_grad_by_freq) go to the fallback, with the CPU's
// behaviour and errors.
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
    if (scale_grad_by_freq || padding_idx.is_symbolic() || !is_f32(grad) || rows <= 0 || dim <= 0 ||
        !index_ok(indices, grad) || grad.numel() != indices.numel() * dim)
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::embedding_dense_backward>::call(
            grad, indices, num_weights, padding_idx, scale_grad_by_freq);
    const c10::DeviceGuard guard(grad.device());
    at::Tensor gc = grad.contiguous(), ic = indices.contiguous();
    at::Tensor out = at::empty({rows, dim}, grad.options());
    TORCH_RILL_CHECK(rill_op_embedding_backward_f32(
        stream_of(out), out.data_ptr<float>(), gc.const_data_ptr<float>(), ic.const_data_ptr(),
        index_bytes(ic), static_cast<size_t>(ic.numel()), static_cast<size_t>(rows),
        static_cast<size_t>(dim), padding_idx.as_int_unchecked()));
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("embedding", embedding);
    m.impl("embedding_dense_backward", embedding_dense_backward);
}

} // namespace torch_rill
