// SPDX-License-Identifier: MIT
// 2-D pooling as rill kernels queued on the current stream:
// max_pool2d_with_indices (the maxima and their positions, for the
// backward; no dilation, no ceil_mode) as rill_op_max_pool2d_f32, and
// avg_pool2d (zero padding counted, no ceil_mode, no divisor_override) as
// rill_op_pool2d_f32, on an input made contiguous first by rill's strided
// copy on the same stream. Their backward where the forward took the case:
// max_pool2d_with_indices_backward as rill_op_max_pool2d_backward_f32 (the
// gradients added at the forward's positions, plane by plane, in one
// order) and avg_pool2d_backward as rill_op_avg_pool2d_backward_f32 (each
// input's gradient gathered from the windows that hold it).
// adaptive_avg_pool2d to 1x1 reaches the mean over the last two dimensions
// (reduce_ops.cpp). The other cases go to the fallback.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/avg_pool2d_backward_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// A 2-D window argument: one value for both dimensions or two; false when
// it is neither.
bool pair_of(at::IntArrayRef v, int64_t out[2]) {
    if (v.size() == 1) {
        out[0] = out[1] = v[0];
        return true;
    }
    if (v.size() == 2) {
        out[0] = v[0];
        out[1] = v[1];
        return true;
    }
    return false;
}

// A pooling window over a's last two dimensions that rill's kernels take.
struct Window {
    int64_t k[2], stride[2], pad[2];
    int64_t planes, h, w, oh, ow;
    std::vector<int64_t> out_shape;
};

// The window of kernel_size, stride (empty: the kernel's) and padding over
// a float32 rill tensor of 3 or 4 dimensions, padding at most half the
// window and the window inside the padded image, as rill_op_pool2d_f32
// requires; false otherwise (PyTorch's CPU kernel then decides, and words
// any error).
bool window_of(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
               at::IntArrayRef padding, Window *win) {
    if (!is_f32(a) || (a.dim() != 3 && a.dim() != 4) || a.numel() == 0 ||
        !pair_of(kernel_size, win->k) || !pair_of(padding, win->pad) ||
        !(stride.empty() ? pair_of(kernel_size, win->stride) : pair_of(stride, win->stride)))
        return false;
    win->h = a.size(-2);
    win->w = a.size(-1);
    int64_t size[2] = {win->h, win->w}, out[2];
    for (int i = 0; i < 2; i++) {
        if (win->k[i] < 1 || win->stride[i] < 1 || win->pad[i] < 0 || win->pad[i] > win->k[i] / 2 ||
            win->k[i] > size[i] + 2 * win->pad[i])
            return false;
        out[i] = (size[i] + 2 * win->pad[i] - win->k[i]) / win->stride[i] + 1;
    }
    win->oh = out[0];
    win->ow = out[1];
    win->planes = a.numel() / (win->h * win->w);
    win->out_shape.assign(a.sizes().begin(), a.sizes().end());
    win->out_shape[win->out_shape.size() - 2] = win->oh;
    win->out_shape[win->out_shape.size() - 1] = win->ow;
    return true;
}

size_t z(int64_t v) {
    return static_cast<size_t>(v);
}

// avg_pool2d as rill_op_pool2d_f32 into a new tensor; undefined when the
// kernel does not take the case.
at::Tensor avg_pool2d_native(const at::Tensor &a, at::IntArrayRef kernel_size,
                             at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                             bool count_include_pad, std::optional<int64_t> divisor_override) {
    Window win;
    if (ceil_mode || !count_include_pad || divisor_override.has_value() ||
        !window_of(a, kernel_size, stride, padding, &win))
        return {};
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(win.out_shape, a.options());
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_pool2d_f32(stream_of(out), RILL_POOL_AVG, out.data_ptr<float>(),
                                        ac.const_data_ptr<float>(), z(win.planes), z(win.h),
                                        z(win.w), z(win.k[0]), z(win.k[1]), z(win.stride[0]),
                                        z(win.stride[1]), z(win.pad[0]), z(win.pad[1])));
    return out;
}

std::tuple<at::Tensor, at::Tensor>
max_pool2d_with_indices(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    Window win;
    int64_t dil[2];
    if (ceil_mode || !pair_of(dilation, dil) || dil[0] != 1 || dil[1] != 1 ||
        !window_of(a, kernel_size, stride, padding, &win))
        return call_fallback_fn<&boxed_fallback, at::_ops::max_pool2d_with_indices>::call(
            a, kernel_size, stride, padding, dilation, ceil_mode);
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(win.out_shape, a.options());
    at::Tensor indices = at::empty(win.out_shape, a.options().dtype(at::kLong));
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_max_pool2d_f32(
        stream_of(out), out.data_ptr<float>(), indices.data_ptr<int64_t>(),
        ac.const_data_ptr<float>(), z(win.planes), z(win.h), z(win.w), z(win.k[0]), z(win.k[1]),
        z(win.stride[0]), z(win.stride[1]), z(win.pad[0]), z(win.pad[1])));
    return {out, indices};
}

at::Tensor avg_pool2d(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
    at::Tensor out = avg_pool2d_native(a, kernel_size, stride, padding, ceil_mode,
                                       count_include_pad, divisor_override);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::avg_pool2d>::call(
        a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

// A gradient the backward kernels take: float32 on a's device with the
// forward's output shape.
bool grad_ok(const at::Tensor &grad, const at::Tensor &a, const Window &win) {
    return is_f32(grad) && grad.device() == a.device() && grad.sizes().equals(win.out_shape);
}

at::Tensor max_pool2d_with_indices_backward(const at::Tensor &grad, const at::Tensor &a,
                                            at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation,
                                            bool ceil_mode, const at::Tensor &indices) {
    Window win;
    int64_t dil[2];
    if (ceil_mode || !pair_of(dilation, dil) || dil[0] != 1 || dil[1] != 1 ||
        !window_of(a, kernel_size, stride, padding, &win) || !grad_ok(grad, a, win) ||
        indices.scalar_type() != at::kLong || indices.device() != a.device() ||
        !indices.sizes().equals(win.out_shape))
        return call_fallback_fn<&boxed_fallback, at::_ops::max_pool2d_with_indices_backward>::call(
            grad, a, kernel_size, stride, padding, dilation, ceil_mode, indices);
    const c10::DeviceGuard guard(a.device());
    at::Tensor g = grad.contiguous(), idx = indices.contiguous();
    at::Tensor out = at::empty(a.sizes(), a.options());
    TORCH_RILL_CHECK(rill_op_max_pool2d_backward_f32(
        stream_of(out), out.data_ptr<float>(), g.const_data_ptr<float>(),
        idx.const_data_ptr<int64_t>(), z(win.planes), z(win.h), z(win.w), z(win.oh), z(win.ow)));
    return out;
}

at::Tensor avg_pool2d_backward(const at::Tensor &grad, const at::Tensor &a,
                               at::IntArrayRef kernel_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
    Window win;
    if (ceil_mode || !count_include_pad || divisor_override.has_value() ||
        !window_of(a, kernel_size, stride, padding, &win) || !grad_ok(grad, a, win))
        return call_fallback_fn<&boxed_fallback, at::_ops::avg_pool2d_backward>::call(
            grad, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
    const c10::DeviceGuard guard(a.device());
    at::Tensor g = grad.contiguous();
    at::Tensor out = at::empty(a.sizes(), a.options());
    TORCH_RILL_CHECK(rill_op_avg_pool2d_backward_f32(
        stream_of(out), out.data_ptr<float>(), g.const_data_ptr<float>(), z(win.planes), z(win.h),
        z(win.w), z(win.k[0]), z(win.k[1]), z(win.stride[0]), z(win.stride[1]), z(win.pad[0]),
        z(win.pad[1])));
    return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
    m.impl("avg_pool2d", avg_pool2d);
    m.impl("max_pool2d_with_indices_backward", max_pool2d_with_indices_backward);
    m.impl("avg_pool2d_backward", avg_pool2d_backward);
}

} // namespace torch_rill
