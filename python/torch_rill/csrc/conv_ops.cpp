// SPDX-License-Identifier: MIT
// Convolution reaches devices other than CPU and CUDA through its
// *_overrideable entry points, not the fallback: on a device the host reads,
// they run PyTorch's CPU convolution on host views, after the current
// stream's work.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "host_view.h"
#include "runtime.h"

namespace torch_rill {
namespace {

void on_host(const at::Tensor &input, const char *op) {
    TORCH_CHECK_NOT_IMPLEMENTED(is_cpu_device(input.device().index()), op, " on ", input.device(),
                                ", a device the host cannot read, is not built");
    host_ready(input.device().index());
}

at::Tensor convolution(const at::Tensor &input, const at::Tensor &weight,
                       const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
    const c10::DeviceGuard guard(input.device());
    on_host(input, "convolution");
    HostViews views;
    at::Tensor out =
        at::convolution(host_of(views, input), host_of(views, weight), host_of(views, bias), stride,
                        padding, dilation, transposed, output_padding, groups);
    return copy_to_rill(out, input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolution_backward(const at::Tensor &grad_output, const at::Tensor &input,
                     const at::Tensor &weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                     int64_t groups, std::array<bool, 3> output_mask) {
    const c10::DeviceGuard guard(input.device());
    on_host(input, "convolution_backward");
    HostViews views;
    std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
    auto [gi, gw, gb] = at::convolution_backward(
        host_of(views, grad_output), host_of(views, input), host_of(views, weight), bias_sizes,
        stride, padding, dilation, transposed, output_padding, groups, output_mask);
    c10::Device dev = input.device();
    return {copy_to_rill(gi, dev), copy_to_rill(gw, dev), copy_to_rill(gb, dev)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("convolution_overrideable", convolution);
    m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace torch_rill
