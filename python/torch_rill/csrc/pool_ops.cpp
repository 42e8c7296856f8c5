// SPDX-License-Identifier: MIT
// 2-D pooling as rill kernels queued on the current stream, with torch's
// options (ceil_mode, a max's dilation, an average's count_include_pad and
// divisor_override): max_pool2d_with_indices (the maxima and their
// positions, for the backward) and avg_pool2d as rill_op_pool2d_ex_f32, on
// an input made contiguous first by rill's strided copy on the same
// stream (results and gradients of a channels-last input copied back to
// channels-last, as the CPU's are). Their backward: max_pool2d_with_indices_backward as
// rill_op_max_pool2d_backward_f32 (the gradients added at the forward's
// positions, plane by plane, in one order) and avg_pool2d_backward as
// rill_op_avg_pool2d_backward_ex_f32 (each input's gradient gathered from
// the windows that hold it). adaptive_avg_pool2d to 1x1 reaches the mean
// over the last two dimensions (reduce_ops.cpp). Shapes the kernels do not
// take (another dtype or rank, padding over half the window) go to the
// fallback, where PyTorch's CPU kernel words any error.
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

// A pooling window over a's last two dimensions that rill's kernels take,
// as rill_pool2d_params, with the output's size as PyTorch computes it.
struct Window {
    rill_pool2d_params params;
    int64_t planes, h, w, oh, ow;
    std::vector<int64_t> out_shape;
};

size_t z(int64_t v) {
    return static_cast<size_t>(v);
}

// The window of kernel_size, stride (empty: the kernel's), padding and
// dilation over a float32 rill tensor of 3 or 4 dimensions, padding at
// most half the dilated window and that window inside the padded image, as
// rill_op_pool2d_ex_f32 requires; false otherwise.
bool window_of(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
               at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, Window *win) {
    int64_t k[2], st[2], pad[2], dil[2];
    if (!is_f32(a) || (a.dim() != 3 && a.dim() != 4) || a.numel() == 0 ||
        !pair_of(kernel_size, k) || !pair_of(padding, pad) || !pair_of(dilation, dil) ||
        !(stride.empty() ? pair_of(kernel_size, st) : pair_of(stride, st)))
        return false;
    win->h = a.size(-2);
    win->w = a.size(-1);
    int64_t size[2] = {win->h, win->w}, out[2];
    for (int i = 0; i < 2; i++) {
        if (k[i] < 1 || st[i] < 1 || pad[i] < 0 || dil[i] < 1)
            return false;
        int64_t span = dil[i] * (k[i] - 1) + 1;
        if (pad[i] > span / 2 || span > size[i] + 2 * pad[i])
            return false;
        // PyTorch's pooling_output_shape.
        out[i] = (size[i] + 2 * pad[i] - span + (ceil_mode ? st[i] - 1 : 0)) / st[i] + 1;
        if (ceil_mode && (out[i] - 1) * st[i] >= size[i] + pad[i])
            out[i]--;
    }
    win->params = rill_pool2d_params{
        z(k[0]),   z(k[1]),   z(st[0]),  z(st[1]), z(pad[0]),
        z(pad[1]), z(dil[0]), z(dil[1]), 0,        ceil_mode ? RILL_POOL_CEIL_MODE : 0u};
    win->oh = out[0];
    win->ow = out[1];
    win->planes = a.numel() / (win->h * win->w);
    win->out_shape.assign(a.sizes().begin(), a.sizes().end());
    win->out_shape[win->out_shape.size() - 2] = win->oh;
    win->out_shape[win->out_shape.size() - 1] = win->ow;
    return true;
}

// An average pooling's window: count_include_pad=False and a (positive)
// divisor_override set in its params; false where window_of refuses or the
// divisor is not positive.
bool avg_window_of(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                   at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                   std::optional<int64_t> divisor_override, Window *win) {
    const int64_t one[1] = {1};
    if (!window_of(a, kernel_size, stride, padding, one, ceil_mode, win) ||
        (divisor_override.has_value() && *divisor_override <= 0))
        return false;
    if (!count_include_pad)
        win->params.flags |= RILL_POOL_EXCLUDE_PAD;
    if (divisor_override.has_value())
        win->params.divisor = z(*divisor_override);
    return true;
}

std::tuple<at::Tensor, at::Tensor>
max_pool2d_with_indices(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    Window win;
    if (!window_of(a, kernel_size, stride, padding, dilation, ceil_mode, &win))
        return call_fallback_fn<&boxed_fallback, at::_ops::max_pool2d_with_indices>::call(
            a, kernel_size, stride, padding, dilation, ceil_mode);
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(win.out_shape, a.options());
    at::Tensor indices = at::empty(win.out_shape, a.options().dtype(at::kLong));
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_pool2d_ex_f32(stream_of(out), RILL_POOL_MAX, out.data_ptr<float>(),
                                           indices.data_ptr<int64_t>(), ac.const_data_ptr<float>(),
                                           z(win.planes), z(win.h), z(win.w), &win.params));
    at::MemoryFormat f = a.suggest_memory_format();
    return {out.contiguous(f), indices.contiguous(f)};
}

at::Tensor avg_pool2d(const at::Tensor &a, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
    Window win;
    if (!avg_window_of(a, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, &win))
        return call_fallback_fn<&boxed_fallback, at::_ops::avg_pool2d>::call(
            a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(win.out_shape, a.options());
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_pool2d_ex_f32(stream_of(out), RILL_POOL_AVG, out.data_ptr<float>(),
                                           nullptr, ac.const_data_ptr<float>(), z(win.planes),
                                           z(win.h), z(win.w), &win.params));
    return out.contiguous(a.suggest_memory_format());
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
    if (!window_of(a, kernel_size, stride, padding, dilation, ceil_mode, &win) ||
        !grad_ok(grad, a, win) || indices.scalar_type() != at::kLong ||
        indices.device() != a.device() || !indices.sizes().equals(win.out_shape))
        return call_fallback_fn<&boxed_fallback, at::_ops::max_pool2d_with_indices_backward>::call(
            grad, a, kernel_size, stride, padding, dilation, ceil_mode, indices);
    const c10::DeviceGuard guard(a.device());
    at::Tensor g = grad.contiguous(), idx = indices.contiguous();
    at::Tensor out = at::empty(a.sizes(), a.options());
    TORCH_RILL_CHECK(rill_op_max_pool2d_backward_f32(
        stream_of(out), out.data_ptr<float>(), g.const_data_ptr<float>(),
        idx.const_data_ptr<int64_t>(), z(win.planes), z(win.h), z(win.w), z(win.oh), z(win.ow)));
    return out.contiguous(a.suggest_memory_format());
}

at::Tensor avg_pool2d_backward(const at::Tensor &grad, const at::Tensor &a,
                               at::IntArrayRef kernel_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
    Window win;
    if (!avg_window_of(a, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, &win) ||
        !grad_ok(grad, a, win))
        return call_fallback_fn<&boxed_fallback, at::_ops::avg_pool2d_backward>::call(
            grad, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
    const c10::DeviceGuard guard(a.device());
    at::Tensor g = grad.contiguous();
    at::Tensor out = at::empty(a.sizes(), a.options());
    TORCH_RILL_CHECK(rill_op_avg_pool2d_backward_ex_f32(stream_of(out), out.data_ptr<float>(),
                                                        g.const_data_ptr<float>(), z(win.planes),
                                                        z(win.h), z(win.w), &win.params));
    return out.contiguous(a.suggest_memory_format());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
    m.impl("avg_pool2d", avg_pool2d);
    m.impl("max_pool2d_with_indices_backward", max_pool2d_with_indices_backward);
    m.impl("avg_pool2d_backward", avg_pool2d_backward);
}

} // namespace torch_rill
