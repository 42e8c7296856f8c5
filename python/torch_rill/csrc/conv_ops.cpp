// SPDX-License-Identifier: MIT
// Convolution reaches devices other than CPU and CUDA through its
// *_overrideable entry points, not the fallback. A float32 2-D convolution
// with any strides, padding, dilation and groups runs as
// rill_op_conv2d_ex2_f32 queued on the current stream, its bias added by
// rill_op_binary_f32 with broadcasting; its backward as
// rill_op_conv2d_backward_ex2_f32 (the input and weight gradients that
// output_mask asks for) and rill_op_reduce_dim_f32 (the bias's: grad_output
// summed over images and positions). A transposed one (conv_transpose2d)
// is that convolution read backwards: its output is the convolution's
// input gradient (rill_op_conv2d_backward_ex2_f32 of its input), the
// output_padding rows and columns being the convolution input's that no
// output reads; its input gradient is the convolution
// (rill_op_conv2d_ex2_f32) of grad_output, and its weight gradient the
// convolution's weight gradient with grad_output as the input and its
// input as the output gradient. Strided operands are made contiguous
// first by rill's strided copy on the same stream, and results laid out
// as the CPU's (channels-last for a channels-last input or weight) by
// another. Other cases (other dtypes or ranks, an output_padding not below
// the stride) run PyTorch's CPU convolution and its backward on host views
// on a device the host reads, in stream order as the fallback runs its ops
// (queue_on_host), and on copies in host memory, at once, on a device it
// cannot read.
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

// run on CPU copies of args, at once, its results copied to dev: the cases
// with no rill kernel on a device the host cannot read, as PyTorch's
// fallback runs other ops there.
std::vector<at::Tensor> run_on_copies(c10::Device dev, const std::vector<at::Tensor> &args,
                                      const HostKernel &run) {
    std::vector<at::Tensor> host;
    for (const at::Tensor &t : args)
        host.push_back(t.defined() ? t.cpu() : t);
    std::vector<at::Tensor> out = run(host);
    for (at::Tensor &t : out)
        if (t.defined())
            t = t.to(dev);
    return out;
}

std::optional<at::Tensor> optional(const at::Tensor &t) {
    return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

size_t z(int64_t v) {
    return static_cast<size_t>(v);
}

// A convolution as rill's ops see it: its input [n, c, h, w], weight [k,
// c/groups, r, sz] and output [n, k, oh, ow]. A transposed convolution's
// input is that convolution's output and its output that one's input.
struct Geometry {
    int64_t n, c, h, w, k, r, sz, oh, ow;
    rill_conv2d_params params;
};

// The geometry of PyTorch's convolution arguments; false when rill's ops
// do not take the case (PyTorch's CPU convolution then decides, and words
// any error).
bool geometry_of(const at::Tensor &input, const at::Tensor &weight, at::IntArrayRef stride,
                 at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                 at::IntArrayRef output_padding, int64_t groups, Geometry *g) {
    if (!is_f32(input) || !is_f32(weight) || weight.device() != input.device() ||
        input.dim() != 4 || weight.dim() != 4 || stride.size() != 2 || padding.size() != 2 ||
        dilation.size() != 2 || input.numel() == 0 || weight.numel() == 0 || groups < 1)
        return false;
    for (int i = 0; i < 2; i++)
        if (stride[i] < 1 || padding[i] < 0 || dilation[i] < 1)
            return false;
    g->n = input.size(0);
    g->r = weight.size(2);
    g->sz = weight.size(3);
    int64_t span[2] = {dilation[0] * (g->r - 1) + 1, dilation[1] * (g->sz - 1) + 1};
    if (!transposed) {
        g->c = input.size(1);
        g->h = input.size(2);
        g->w = input.size(3);
        g->k = weight.size(0);
        if (g->c != weight.size(1) * groups || g->k % groups != 0 ||
            span[0] > g->h + 2 * padding[0] || span[1] > g->w + 2 * padding[1])
            return false;
        g->oh = (g->h + 2 * padding[0] - span[0]) / stride[0] + 1;
        g->ow = (g->w + 2 * padding[1] - span[1]) / stride[1] + 1;
    } else {
        // weight [k, c/groups, r, sz]: the transposed one's in and out channels.
        if (output_padding.size() != 2 || input.size(1) != weight.size(0) ||
            weight.size(0) % groups != 0)
            return false;
        g->k = input.size(1);
        g->oh = input.size(2);
        g->ow = input.size(3);
        g->c = weight.size(1) * groups;
        int64_t out[2], in[2] = {g->oh, g->ow};
        for (int i = 0; i < 2; i++) {
            // Beyond the stride, output_padding adds rows no output of the
            // convolution reads: its output would be larger than the input.
            if (output_padding[i] < 0 || output_padding[i] >= stride[i])
                return false;
            out[i] = (in[i] - 1) * stride[i] - 2 * padding[i] + span[i] + output_padding[i];
            if (out[i] < 1)
                return false;
        }
        g->h = out[0];
        g->w = out[1];
    }
    g->params = rill_conv2d_params{z(stride[0]),   z(stride[1]),   z(padding[0]), z(padding[1]),
                                   z(dilation[0]), z(dilation[1]), z(groups)};
    return true;
}

// out [n, ch, plane] += bias [ch], in place.
void add_bias(rill_stream *s, at::Tensor &out, const at::Tensor &bias) {
    int64_t n = out.size(0), ch = out.size(1), plane = out.size(2) * out.size(3);
    size_t shape[3] = {z(n), z(ch), z(plane)};
    size_t out_strides[3] = {z(ch * plane), z(plane), 1};
    size_t bias_strides[3] = {0, z(bias.stride(0)), 0};
    TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_ADD, out.data_ptr<float>(),
                                        out.const_data_ptr<float>(), out_strides,
                                        bias.const_data_ptr<float>(), bias_strides, shape, 3));
}

// The layout PyTorch's CPU convolutions give their results and their input
// and weight gradients: channels-last when the input or the weight is, for
// a 2-D or 3-D convolution.
at::MemoryFormat conv_format(const at::Tensor &input, const at::Tensor &weight) {
    at::MemoryFormat cl = weight.dim() == 4   ? at::MemoryFormat::ChannelsLast
                          : weight.dim() == 5 ? at::MemoryFormat::ChannelsLast3d
                                              : at::MemoryFormat::Contiguous;
    return input.suggest_memory_format() == cl || weight.suggest_memory_format() == cl
               ? cl
               : at::MemoryFormat::Contiguous;
}

// t (a result or gradient, or undefined) in format.
at::Tensor in_format(const at::Tensor &t, at::MemoryFormat format) {
    return t.defined() ? t.contiguous(format) : t;
}

// The convolution as rill kernels into a new tensor, laid out as
// conv_format says; undefined when they do not take the case.
at::Tensor convolution_native(const at::Tensor &input, const at::Tensor &weight,
                              const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                              at::IntArrayRef output_padding, int64_t groups) {
    Geometry g;
    if (!geometry_of(input, weight, stride, padding, dilation, transposed, output_padding, groups,
                     &g))
        return {};
    bool has_bias = bias.has_value() && bias->defined();
    int64_t out_channels = transposed ? g.c : g.k;
    if (has_bias && (!is_f32(*bias) || bias->device() != input.device() || bias->dim() != 1 ||
                     bias->size(0) != out_channels))
        return {};
    at::Tensor in = input.contiguous(), wc = weight.contiguous();
    at::Tensor out = transposed ? at::empty({g.n, g.c, g.h, g.w}, input.options())
                                : at::empty({g.n, g.k, g.oh, g.ow}, input.options());
    const c10::DeviceGuard guard(input.device());
    rill_stream *s = stream_of(out);
    if (transposed)
        TORCH_RILL_CHECK(rill_op_conv2d_backward_ex2_f32(
            s, out.data_ptr<float>(), nullptr, in.const_data_ptr<float>(), nullptr,
            wc.const_data_ptr<float>(), z(g.n), z(g.c), z(g.h), z(g.w), z(g.k), z(g.r), z(g.sz),
            &g.params));
    else
        TORCH_RILL_CHECK(rill_op_conv2d_ex2_f32(
            s, out.data_ptr<float>(), in.const_data_ptr<float>(), wc.const_data_ptr<float>(),
            z(g.n), z(g.c), z(g.h), z(g.w), z(g.k), z(g.r), z(g.sz), &g.params));
    if (has_bias)
        add_bias(s, out, *bias);
    return in_format(out, conv_format(input, weight));
}

at::Tensor convolution(const at::Tensor &input, const at::Tensor &weight,
                       const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
    at::Tensor native = convolution_native(input, weight, bias, stride, padding, dilation,
                                           transposed, output_padding, groups);
    if (native.defined())
        return native;
    const c10::DeviceGuard guard(input.device());
    // The kernel runs later: it holds copies of the arrays. The meta
    // kernel's results are contiguous; in_format lays them out as the CPU's.
    auto run = [stride = stride.vec(), padding = padding.vec(), dilation = dilation.vec(),
                transposed, output_padding = output_padding.vec(),
                groups](const std::vector<at::Tensor> &t) {
        at::Tensor out = at::convolution(t[0], t[1], optional(t[2]), stride, padding, dilation,
                                         transposed, output_padding, groups);
        return std::vector<at::Tensor>{in_format(out, conv_format(t[0], t[1]))};
    };
    std::vector<at::Tensor> args{input, weight, bias.value_or(at::Tensor())};
    if (!is_cpu_device(input.device().index()))
        return run_on_copies(input.device(), args, run)[0];
    return queue_on_host("aten::convolution_overrideable", input.device(), args, run)[0];
}

// The backward as rill kernels, under the forward's conditions (and
// grad_output float32 of the forward's output shape); false when they do
// not take the case.
bool convolution_backward_native(const at::Tensor &grad_output, const at::Tensor &input,
                                 const at::Tensor &weight, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                 at::IntArrayRef output_padding, int64_t groups,
                                 std::array<bool, 3> output_mask,
                                 std::tuple<at::Tensor, at::Tensor, at::Tensor> &grads) {
    Geometry g;
    if (!is_f32(grad_output) || grad_output.device() != input.device() ||
        !geometry_of(input, weight, stride, padding, dilation, transposed, output_padding, groups,
                     &g))
        return false;
    // The convolution's input and output shapes; grad_output has the
    // forward's output shape.
    std::array<int64_t, 4> conv_in{g.n, g.c, g.h, g.w}, conv_out{g.n, g.k, g.oh, g.ow};
    if (grad_output.sizes() != at::IntArrayRef(transposed ? conv_in : conv_out))
        return false;
    const c10::DeviceGuard guard(input.device());
    at::Tensor go = grad_output.contiguous();
    rill_stream *s = stream_of(go);
    at::Tensor grad_in, grad_weight, grad_bias;
    if (output_mask[0] || output_mask[1]) {
        at::Tensor in = input.contiguous(), wc = weight.contiguous();
        if (output_mask[0])
            grad_in = at::empty(input.sizes(), input.options());
        if (output_mask[1])
            grad_weight = at::empty(weight.sizes(), weight.options());
        float *gi = output_mask[0] ? grad_in.data_ptr<float>() : nullptr;
        float *gw = output_mask[1] ? grad_weight.data_ptr<float>() : nullptr;
        if (!transposed) {
            TORCH_RILL_CHECK(rill_op_conv2d_backward_ex2_f32(
                s, gi, gw, go.const_data_ptr<float>(), in.const_data_ptr<float>(),
                wc.const_data_ptr<float>(), z(g.n), z(g.c), z(g.h), z(g.w), z(g.k), z(g.r), z(g.sz),
                &g.params));
        } else {
            // The transposed one's input gradient is the convolution of
            // grad_output; its weight gradient the convolution's, with
            // grad_output as the input and its input as the output gradient.
            if (gi != nullptr)
                TORCH_RILL_CHECK(rill_op_conv2d_ex2_f32(
                    s, gi, go.const_data_ptr<float>(), wc.const_data_ptr<float>(), z(g.n), z(g.c),
                    z(g.h), z(g.w), z(g.k), z(g.r), z(g.sz), &g.params));
            if (gw != nullptr)
                TORCH_RILL_CHECK(rill_op_conv2d_backward_ex2_f32(
                    s, nullptr, gw, in.const_data_ptr<float>(), go.const_data_ptr<float>(), nullptr,
                    z(g.n), z(g.c), z(g.h), z(g.w), z(g.k), z(g.r), z(g.sz), &g.params));
        }
    }
    if (output_mask[2]) {
        // grad_output [n, ch, plane] summed over plane into [n, ch], then over n.
        int64_t ch = go.size(1), plane = go.size(2) * go.size(3);
        at::Tensor per_image = at::empty({g.n, ch}, go.options());
        grad_bias = at::empty({ch}, go.options());
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, per_image.data_ptr<float>(),
                                                nullptr, go.const_data_ptr<float>(), z(g.n * ch),
                                                z(plane), 1));
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, grad_bias.data_ptr<float>(),
                                                nullptr, per_image.const_data_ptr<float>(), 1,
                                                z(g.n), z(ch)));
    }
    at::MemoryFormat f = conv_format(input, weight);
    grads = {in_format(grad_in, f), in_format(grad_weight, f), grad_bias};
    return true;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolution_backward(const at::Tensor &grad_output, const at::Tensor &input,
                     const at::Tensor &weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                     int64_t groups, std::array<bool, 3> output_mask) {
    std::tuple<at::Tensor, at::Tensor, at::Tensor> native;
    if (convolution_backward_native(grad_output, input, weight, stride, padding, dilation,
                                    transposed, output_padding, groups, output_mask, native))
        return native;
    const c10::DeviceGuard guard(input.device());
    std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
    auto run = [bias_sizes, stride = stride.vec(), padding = padding.vec(),
                dilation = dilation.vec(), transposed, output_padding = output_padding.vec(),
                groups, output_mask](const std::vector<at::Tensor> &t) {
        auto [gi, gw, gb] =
            at::convolution_backward(t[0], t[1], t[2], bias_sizes, stride, padding, dilation,
                                     transposed, output_padding, groups, output_mask);
        at::MemoryFormat f = conv_format(t[1], t[2]);
        return std::vector<at::Tensor>{in_format(gi, f), in_format(gw, f), gb};
    };
    std::vector<at::Tensor> args{grad_output, input, weight};
    std::vector<at::Tensor> out =
        is_cpu_device(input.device().index())
            ? queue_on_host("aten::convolution_backward_overrideable", input.device(), args, run)
            : run_on_copies(input.device(), args, run);
    return {out[0], out[1], out[2]};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("convolution_overrideable", convolution);
    m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace torch_rill
