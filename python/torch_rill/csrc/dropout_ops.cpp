// SPDX-License-Identifier: MIT
// Dropout as rill kernels queued on the current stream. native_dropout (a
// float32 input, 0 < p < 1, training) draws its mask at submit, in submit
// order from the device's generator, as PyTorch's CPU kernel draws it (the
// same mask for the same seed), into page-locked host memory, which a copy
// queued on the stream takes to the device: nothing waits for the stream.
// The output is input * mask * scale (rill_op_masked_scale_f32, rounded as
// the CPU's), and native_dropout_backward is grad * mask * scale by the
// same kernel. Other cases (other dtypes, evaluation, p 0 or 1, a capture,
// whose replays would reuse the mask) go to the fallback, which
// synchronizes for the draw or refuses the capture.
#include <tuple>

#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "capture.h"
#include "fallback.h"
#include "generator.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// out = a * mask * scale over n elements of one dense layout.
void masked_scale(const at::Tensor &out, const at::Tensor &a, const at::Tensor &mask,
                  double scale) {
    TORCH_RILL_CHECK(
        rill_op_masked_scale_f32(stream_of(a), out.data_ptr<float>(), a.const_data_ptr<float>(),
                                 static_cast<const uint8_t *>(mask.const_data_ptr()),
                                 static_cast<float>(scale), static_cast<size_t>(a.numel())));
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor &input, double p,
                                                  std::optional<bool> train) {
    if (!is_f32(input) || !input.is_non_overlapping_and_dense() || input.numel() == 0 ||
        !(p > 0.0 && p < 1.0) || (train.has_value() && !*train) || is_capturing(stream_of(input)))
        return call_fallback_fn<&boxed_fallback, at::_ops::native_dropout>::call(input, p, train);
    const c10::DeviceGuard guard(input.device());
    at::Tensor drawn = at::empty_strided(
        input.sizes(), input.strides(),
        at::TensorOptions().dtype(at::kBool).device(at::kCPU).pinned_memory(true));
    drawn.bernoulli_(1.0 - p, cpu_engine(std::nullopt, input.device().index()));
    at::Tensor mask =
        at::empty_strided(input.sizes(), input.strides(), input.options().dtype(at::kBool));
    // Both dense in one layout: the copy takes their spans as bytes (a copy
    // of a strided tensor would wait for the stream).
    const int64_t n = input.numel();
    mask.as_strided({n}, {1}).copy_(drawn.as_strided({n}, {1}), /*non_blocking=*/true);
    at::Tensor out = at::empty_strided(input.sizes(), input.strides(), input.options());
    masked_scale(out, input, mask, 1.0 / (1.0 - p));
    return {out, mask};
}

// The kernel reads grad and mask and writes its result in mask's layout:
// grad is read in place when it has that layout, else first copied into
// the result (a sum's expanded gradient), which is scaled in place; a
// result laid out otherwise by the CPU (TensorIterator's choice from both:
// a mask transposed against grad in attention) is then copied into that
// layout.
at::Tensor native_dropout_backward(const at::Tensor &grad, const at::Tensor &mask, double scale) {
    at::Tensor out;
    if (is_f32(grad) && mask.scalar_type() == at::kBool && grad.device() == mask.device() &&
        grad.sizes().equals(mask.sizes()) && grad.numel() > 0 &&
        mask.is_non_overlapping_and_dense()) {
        // Operands of one layout give the result that layout; others ask
        // TensorIterator, as the CPU's kernel does.
        out = grad.strides().equals(mask.strides())
                  ? at::empty_strided(grad.sizes(), grad.strides(), grad.options())
                  : at::TensorIteratorConfig()
                        .add_owned_output(at::Tensor())
                        .add_const_input(grad)
                        .add_const_input(mask)
                        .check_all_same_dtype(false)
                        .declare_static_dtype_and_device(at::kFloat, grad.device())
                        .build()
                        .output();
    }
    if (!out.defined() || !out.is_non_overlapping_and_dense())
        return call_fallback_fn<&boxed_fallback, at::_ops::native_dropout_backward>::call(
            grad, mask, scale);
    const c10::DeviceGuard guard(grad.device());
    at::Tensor work = mask.strides().equals(out.strides())
                          ? out
                          : at::empty_strided(mask.sizes(), mask.strides(), out.options());
    const at::Tensor *from = &grad;
    if (!grad.strides().equals(work.strides())) {
        work.copy_(grad);
        from = &work;
    }
    masked_scale(work, *from, mask, scale);
    if (!work.is_same(out))
        out.copy_(work);
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("native_dropout", native_dropout);
    m.impl("native_dropout_backward", native_dropout_backward);
}

} // namespace torch_rill
