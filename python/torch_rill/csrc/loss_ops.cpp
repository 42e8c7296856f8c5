// SPDX-License-Identifier: MIT
// The negative log likelihood loss as rill kernels queued on the current
// stream: nll_loss_forward (a float32 input [N, C] or [C], int64 targets,
// an optional float32 weight [C]) as rill_op_nll_loss_f32 and
// nll_loss_backward as rill_op_nll_loss_backward_f32, which cross_entropy
// reaches through log_softmax and nll_loss; nll_loss2d_forward and
// nll_loss2d_backward (an input [N, C, H, W], targets [N, H, W]: PyTorch
// reshapes [N, C, d1, ..., dk] to it) as rill_op_nll_loss_nd_f32 and its
// backward with H*W positions. A reduced loss is added in the
// order of PyTorch's CPU kernel, so its bits are the CPU's; the mean's
// divisor (total_weight) stays on the device. A target out of range cannot
// be seen without waiting for the stream: the kernel fails its launch, and
// the error surfaces at the stream's next synchronize naming the op (as
// CUDA's device-side assert does). Other cases (other dtypes, uint8
// targets, empty batches) go to the fallback, with the CPU's behaviour and
// errors.
#include <ATen/core/Reduction.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/nll_loss2d_backward_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn_symint;

// The rill reduction for PyTorch's on an input of `dims` dimensions: the
// loss of a [C] input without reduction is one row's, which PyTorch
// computes as a sum (its total weight too).
bool loss_reduction(int64_t reduction, int64_t dims, rill_loss_reduction *out) {
    switch (reduction) {
    case at::Reduction::None:
        *out = dims == 1 ? RILL_LOSS_SUM : RILL_LOSS_NONE;
        return true;
    case at::Reduction::Sum:
        *out = RILL_LOSS_SUM;
        return true;
    case at::Reduction::Mean:
        *out = RILL_LOSS_MEAN;
        return true;
    default:
        return false;
    }
}

// The arguments the kernels take, as PyTorch's meta function checks them:
// a float32 input [N, C] (N >= 1) with int64 targets [N], or [C] with a
// 0-dim target, an undefined or float32 [C] weight, all on one device.
bool loss_ok(const at::Tensor &self, const at::Tensor &target,
             const std::optional<at::Tensor> &weight, const c10::SymInt &ignore_index) {
    if (!is_f32(self) || self.numel() == 0 || (self.dim() != 1 && self.dim() != 2) ||
        target.scalar_type() != at::kLong || target.device() != self.device() ||
        target.dim() != self.dim() - 1 || ignore_index.is_symbolic())
        return false;
    if (self.dim() == 2 && target.size(0) != self.size(0))
        return false;
    return !weight || !weight->defined() ||
           (is_f32(*weight) && weight->device() == self.device() && weight->dim() == 1 &&
            weight->numel() == self.size(-1));
}

// The arguments of nll_loss2d that the kernels take, as PyTorch's CPU
// kernel checks them: a float32 input [N, C, H, W] with elements, int64
// targets [N, H, W], an undefined or float32 [C] weight, on one device.
bool loss2d_ok(const at::Tensor &self, const at::Tensor &target,
               const std::optional<at::Tensor> &weight, const c10::SymInt &ignore_index) {
    if (!is_f32(self) || self.numel() == 0 || self.dim() != 4 ||
        target.scalar_type() != at::kLong || target.device() != self.device() ||
        target.dim() != 3 || ignore_index.is_symbolic())
        return false;
    if (target.size(0) != self.size(0) || target.size(1) != self.size(2) ||
        target.size(2) != self.size(3))
        return false;
    return !weight || !weight->defined() ||
           (is_f32(*weight) && weight->device() == self.device() && weight->dim() == 1 &&
            weight->numel() == self.size(1));
}

// The backward's float32 gradient and one-element total weight on self's
// device (their shapes are the caller's to check).
bool backward_ok(const at::Tensor &grad_output, const at::Tensor &total_weight,
                 const at::Tensor &self) {
    return is_f32(grad_output) && grad_output.device() == self.device() && is_f32(total_weight) &&
           total_weight.device() == self.device() && total_weight.numel() == 1;
}

// The weight's data the kernels read, or NULL.
const float *weight_data(const std::optional<at::Tensor> &weight, at::Tensor *keep) {
    if (!weight || !weight->defined())
        return nullptr;
    *keep = weight->contiguous();
    return keep->const_data_ptr<float>();
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor &self,
                                                    const at::Tensor &target,
                                                    const std::optional<at::Tensor> &weight,
                                                    int64_t reduction, c10::SymInt ignore_index) {
    rill_loss_reduction r;
    if (!loss_ok(self, target, weight, ignore_index) || !loss_reduction(reduction, self.dim(), &r))
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::nll_loss_forward>::call(
            self, target, weight, reduction, ignore_index);
    const c10::DeviceGuard guard(self.device());
    at::Tensor in = self.contiguous(), t = target.contiguous(), w;
    const float *wp = weight_data(weight, &w);
    int64_t rows = self.dim() == 2 ? self.size(0) : 1;
    at::Tensor out =
        r == RILL_LOSS_NONE ? at::empty({rows}, self.options()) : at::empty({}, self.options());
    at::Tensor total = at::empty({}, self.options());
    TORCH_RILL_CHECK(rill_op_nll_loss_f32(
        stream_of(out), r, out.data_ptr<float>(), total.data_ptr<float>(),
        in.const_data_ptr<float>(), t.const_data_ptr(), 8, wp, static_cast<size_t>(rows),
        static_cast<size_t>(self.size(-1)), ignore_index.as_int_unchecked()));
    return {out, total};
}

at::Tensor nll_loss_backward(const at::Tensor &grad_output, const at::Tensor &self,
                             const at::Tensor &target, const std::optional<at::Tensor> &weight,
                             int64_t reduction, c10::SymInt ignore_index,
                             const at::Tensor &total_weight) {
    rill_loss_reduction r;
    int64_t rows = self.dim() == 2 ? self.size(0) : 1;
    if (!loss_ok(self, target, weight, ignore_index) ||
        !loss_reduction(reduction, self.dim(), &r) ||
        !backward_ok(grad_output, total_weight, self) ||
        grad_output.numel() != (r == RILL_LOSS_NONE ? rows : 1) ||
        (r == RILL_LOSS_NONE && grad_output.dim() != 1))
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::nll_loss_backward>::call(
            grad_output, self, target, weight, reduction, ignore_index, total_weight);
    const c10::DeviceGuard guard(self.device());
    at::Tensor g = grad_output.contiguous(), t = target.contiguous(), w;
    const float *wp = weight_data(weight, &w);
    at::Tensor grad_input = at::empty(self.sizes(), self.options());
    TORCH_RILL_CHECK(rill_op_nll_loss_backward_f32(
        stream_of(grad_input), r, grad_input.data_ptr<float>(), g.const_data_ptr<float>(),
        total_weight.const_data_ptr<float>(), t.const_data_ptr(), 8, wp, static_cast<size_t>(rows),
        static_cast<size_t>(self.size(-1)), ignore_index.as_int_unchecked()));
    return grad_input;
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor &self,
                                                      const at::Tensor &target,
                                                      const std::optional<at::Tensor> &weight,
                                                      int64_t reduction, c10::SymInt ignore_index) {
    rill_loss_reduction r;
    if (!loss2d_ok(self, target, weight, ignore_index) || !loss_reduction(reduction, 4, &r))
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::nll_loss2d_forward>::call(
            self, target, weight, reduction, ignore_index);
    const c10::DeviceGuard guard(self.device());
    at::Tensor in = self.contiguous(), t = target.contiguous(), w;
    const float *wp = weight_data(weight, &w);
    at::Tensor out = r == RILL_LOSS_NONE ? at::empty(target.sizes(), self.options())
                                         : at::empty({}, self.options());
    at::Tensor total = at::empty({}, self.options());
    TORCH_RILL_CHECK(rill_op_nll_loss_nd_f32(
        stream_of(out), r, out.data_ptr<float>(), total.data_ptr<float>(),
        in.const_data_ptr<float>(), t.const_data_ptr(), 8, wp, static_cast<size_t>(self.size(0)),
        static_cast<size_t>(self.size(1)), static_cast<size_t>(self.size(2) * self.size(3)),
        ignore_index.as_int_unchecked()));
    return {out, total};
}

// PyTorch's CPU kernel writes the gradient into zeros_like(self) and
// refuses it when that is not contiguous (a channels-last input): the same
// error here, at the call. The kernel reads none of self, so any other
// layout of it takes the kernel.
at::Tensor nll_loss2d_backward(const at::Tensor &grad_output, const at::Tensor &self,
                               const at::Tensor &target, const std::optional<at::Tensor> &weight,
                               int64_t reduction, c10::SymInt ignore_index,
                               const at::Tensor &total_weight) {
    rill_loss_reduction r;
    if (!loss2d_ok(self, target, weight, ignore_index) || !loss_reduction(reduction, 4, &r) ||
        !backward_ok(grad_output, total_weight, self) ||
        (r == RILL_LOSS_NONE ? grad_output.sizes() != target.sizes()
                             : grad_output.dim() > 1 || grad_output.numel() != 1))
        return call_fallback_fn_symint<&boxed_fallback, at::_ops::nll_loss2d_backward>::call(
            grad_output, self, target, weight, reduction, ignore_index, total_weight);
    const c10::DeviceGuard guard(self.device());
    at::Tensor grad_input = at::empty_like(self);
    TORCH_CHECK(grad_input.is_contiguous(), "grad_input must be contiguous");
    at::Tensor g = grad_output.contiguous(), t = target.contiguous(), w;
    const float *wp = weight_data(weight, &w);
    TORCH_RILL_CHECK(rill_op_nll_loss_backward_nd_f32(
        stream_of(grad_input), r, grad_input.data_ptr<float>(), g.const_data_ptr<float>(),
        total_weight.const_data_ptr<float>(), t.const_data_ptr(), 8, wp,
        static_cast<size_t>(self.size(0)), static_cast<size_t>(self.size(1)),
        static_cast<size_t>(self.size(2) * self.size(3)), ignore_index.as_int_unchecked()));
    return grad_input;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("nll_loss_forward", nll_loss_forward);
    m.impl("nll_loss_backward", nll_loss_backward);
    m.impl("nll_loss2d_forward", nll_loss2d_forward);
    m.impl("nll_loss2d_backward", nll_loss2d_backward);
}

} // namespace torch_rill
