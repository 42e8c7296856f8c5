// SPDX-License-Identifier: MIT
// Convolution reaches devices other than CPU and CUDA through its
// *_overrideable entry points, not the fallback. A float32 2-D convolution
// (groups 1, dilation 1, not transposed) runs as rill_op_conv2d_ex_f32
// queued on the current stream, its bias added by rill_op_binary_f32 with
// broadcasting; its backward as rill_op_conv2d_backward_f32 (the input and
// weight gradients that output_mask asks for) and rill_op_reduce_dim_f32
// (the bias's: grad_output summed over images and positions). Strided
// operands are made contiguous first by rill's strided copy on the same
// stream. Other cases run PyTorch's CPU convolution and its backward on
// host views on a device the host reads, in stream order as the fallback
// runs its ops (queue_on_host).
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <array>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>
#include <tuple>

#include "fallback.h"
#include "native_ops.h"
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

bool all_equal(at::IntArrayRef values, int64_t want) {
    for (int64_t v : values)
        if (v != want)
            return false;
    return true;
}

// The convolution as rill kernels into a new tensor; undefined when they do
// not take the case (PyTorch's CPU convolution then decides, and words any
// error).
at::Tensor convolution_native(const at::Tensor &input, const at::Tensor &weight,
                              const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                              int64_t groups) {
    bool has_bias = bias.has_value() && bias->defined();
    if (!is_f32(input) || !is_f32(weight) || weight.device() != input.device() || transposed ||
        groups != 1 || input.dim() != 4 || weight.dim() != 4 || stride.size() != 2 ||
        padding.size() != 2 || dilation.size() != 2 || !all_equal(dilation, 1) ||
        input.size(1) != weight.size(1) || input.numel() == 0 || weight.numel() == 0)
        return {};
    if (has_bias && (!is_f32(*bias) || bias->device() != input.device() || bias->dim() != 1 ||
                     bias->size(0) != weight.size(0)))
        return {};
    int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
    int64_t k = weight.size(0), r = weight.size(2), sz = weight.size(3);
    if (stride[0] < 1 || stride[1] < 1 || padding[0] < 0 || padding[1] < 0 ||
        r > h + 2 * padding[0] || sz > w + 2 * padding[1])
        return {};
    int64_t oh = (h + 2 * padding[0] - r) / stride[0] + 1;
    int64_t ow = (w + 2 * padding[1] - sz) / stride[1] + 1;
    at::Tensor in = input.contiguous(), wc = weight.contiguous();
    at::Tensor out = at::empty({n, k, oh, ow}, input.options());
    const c10::DeviceGuard guard(input.device());
    rill_stream *s = stream_of(out);
    auto z = [](int64_t v) { return static_cast<size_t>(v); };
    TORCH_RILL_CHECK(rill_op_conv2d_ex_f32(s, out.data_ptr<float>(), in.const_data_ptr<float>(),
                                           wc.const_data_ptr<float>(), z(n), z(c), z(h), z(w), z(k),
                                           z(r), z(sz), z(stride[0]), z(stride[1]), z(padding[0]),
                                           z(padding[1])));
    if (has_bias) {
        // out [n, k, oh*ow] += bias [k], in place.
        size_t shape[3] = {z(n), z(k), z(oh * ow)};
        size_t out_strides[3] = {z(k * oh * ow), z(oh * ow), 1};
        size_t bias_strides[3] = {0, z(bias->stride(0)), 0};
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_ADD, out.data_ptr<float>(),
                                            out.const_data_ptr<float>(), out_strides,
                                            bias->const_data_ptr<float>(), bias_strides, shape, 3));
    }
    return out;
}

at::Tensor convolution(const at::Tensor &input, const at::Tensor &weight,
                       const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
    at::Tensor native =
        convolution_native(input, weight, bias, stride, padding, dilation, transposed, groups);
    if (native.defined())
        return native;
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

// The backward as rill kernels, under the forward's conditions (and
// grad_output float32 of the forward's output shape); false when they do
// not take the case.
bool convolution_backward_native(const at::Tensor &grad_output, const at::Tensor &input,
                                 const at::Tensor &weight, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                 int64_t groups, std::array<bool, 3> output_mask,
                                 std::tuple<at::Tensor, at::Tensor, at::Tensor> &grads) {
    if (!is_f32(input) || !is_f32(weight) || !is_f32(grad_output) ||
        weight.device() != input.device() || grad_output.device() != input.device() || transposed ||
        groups != 1 || input.dim() != 4 || weight.dim() != 4 || grad_output.dim() != 4 ||
        stride.size() != 2 || padding.size() != 2 || dilation.size() != 2 ||
        !all_equal(dilation, 1) || input.size(1) != weight.size(1) || input.numel() == 0 ||
        weight.numel() == 0)
        return false;
    int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
    int64_t k = weight.size(0), r = weight.size(2), sz = weight.size(3);
    if (stride[0] < 1 || stride[1] < 1 || padding[0] < 0 || padding[1] < 0 ||
        r > h + 2 * padding[0] || sz > w + 2 * padding[1])
        return false;
    int64_t oh = (h + 2 * padding[0] - r) / stride[0] + 1;
    int64_t ow = (w + 2 * padding[1] - sz) / stride[1] + 1;
    if (grad_output.sizes() != at::IntArrayRef({n, k, oh, ow}))
        return false;
    auto z = [](int64_t v) { return static_cast<size_t>(v); };
    const c10::DeviceGuard guard(input.device());
    at::Tensor go = grad_output.contiguous();
    rill_stream *s = stream_of(go);
    at::Tensor grad_in, grad_weight, grad_bias;
    if (output_mask[0] || output_mask[1]) {
        at::Tensor in = input.contiguous(), wc = weight.contiguous();
        if (output_mask[0])
            grad_in = at::empty({n, c, h, w}, input.options());
        if (output_mask[1])
            grad_weight = at::empty({k, c, r, sz}, weight.options());
        TORCH_RILL_CHECK(rill_op_conv2d_backward_f32(
            s, output_mask[0] ? grad_in.data_ptr<float>() : nullptr,
            output_mask[1] ? grad_weight.data_ptr<float>() : nullptr, go.const_data_ptr<float>(),
            in.const_data_ptr<float>(), wc.const_data_ptr<float>(), z(n), z(c), z(h), z(w), z(k),
            z(r), z(sz), z(stride[0]), z(stride[1]), z(padding[0]), z(padding[1])));
    }
    if (output_mask[2]) {
        // grad_output [n, k, oh*ow] summed over oh*ow into [n, k], then over n.
        at::Tensor per_image = at::empty({n, k}, go.options());
        grad_bias = at::empty({k}, go.options());
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, per_image.data_ptr<float>(),
                                                nullptr, go.const_data_ptr<float>(), z(n * k),
                                                z(oh * ow), 1));
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, grad_bias.data_ptr<float>(),
                                                nullptr, per_image.const_data_ptr<float>(), 1, z(n),
                                                z(k)));
    }
    grads = {grad_in, grad_weight, grad_bias};
    return true;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolution_backward(const at::Tensor &grad_output, const at::Tensor &input,
                     const at::Tensor &weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                     int64_t groups, std::array<bool, 3> output_mask) {
    std::tuple<at::Tensor, at::Tensor, at::Tensor> native;
    if (convolution_backward_native(grad_output, input, weight, stride, padding, dilation,
                                    transposed, groups, output_mask, native))
        return native;
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
