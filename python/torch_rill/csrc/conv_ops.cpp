// SPDX-License-Identifier: MIT
// Convolution reaches devices other than CPU and CUDA through its
// *_overrideable entry points, not the fallback: on a device the host reads,
// they run PyTorch's CPU convolution on host views as the fallback runs its
// ops, in stream order (queue_on_host).
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "runtime.h"

namespace torch_rill {
namespace {

void check_host_reads(const at::Tensor &input, const char *op) {
    TORCH_CHECK_NOT_IMPLEMENTED(is_cpu_device(input.device().index()), op, " on ", input.device(),
                                ", a device the host cannot read, is not built");
}

std::optional<at::Tensor> optional(const at::Tensor &t) {
    return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

at::Tensor convolution(const at::Tensor &input, const at::Tensor &weight,
                       const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
    const c10::DeviceGuard guard(input.device());
    check_host_reads(input, "convolution");
    // The kernel runs later: it holds copies of the arrays.
    auto run = [stride = stride.vec(), padding = padding.vec(), dilation = dilation.vec(),
                transposed, output_padding = output_padding.vec(),
                groups](const std::vector<at::Tensor> &t) {
        return std::vector<at::Tensor>{at::convolution(t[0], t[1], optional(t[2]), stride, padding,
                                                       dilation, transposed, output_padding,
                                                       groups)};
    };
    return queue_on_host("aten::convolution_overrideable", input.device(),
                         {input, weight, bias.value_or(at::Tensor())}, run)[0];
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolution_backward(const at::Tensor &grad_output, const at::Tensor &input,
                     const at::Tensor &weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                     int64_t groups, std::array<bool, 3> output_mask) {
    const c10::DeviceGuard guard(input.device());
    check_host_reads(input, "convolution_backward");
    std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
    auto run = [bias_sizes, stride = stride.vec(), padding = padding.vec(),
                dilation = dilation.vec(), transposed, output_padding = output_padding.vec(),
                groups, output_mask](const std::vector<at::Tensor> &t) {
        auto [gi, gw, gb] =
            at::convolution_backward(t[0], t[1], t[2], bias_sizes, stride, padding, dilation,
                                     transposed, output_padding, groups, output_mask);
        return std::vector<at::Tensor>{gi, gw, gb};
    };
    std::vector<at::Tensor> out = queue_on_host("aten::convolution_backward_overrideable",
                                                input.device(), {grad_output, input, weight}, run);
    return {out[0], out[1], out[2]};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("convolution_overrideable", convolution);
    m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace torch_rill
