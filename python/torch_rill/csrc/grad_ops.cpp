// SPDX-License-Identifier: MIT
// Backward kernels of activations and softmax as rill kernels queued on the
// current stream, composed of rill's element-wise ops and reductions after
// the formulas of PyTorch's CPU kernels: threshold_backward at 0 (relu's:
// RILL_BINARY_RELU_BACKWARD), sigmoid_backward (grad * (1 - y) * y),
// tanh_backward (grad * (1 - y * y)), _softmax_backward_data (y * (grad -
// sum(grad * y))) and _log_softmax_backward_data (grad - exp(y) *
// sum(grad)) along any dimension, and gelu_backward at gelu's input
// (RILL_BINARY_GELU_BACKWARD; RILL_BINARY_GELU_TANH_BACKWARD for approximate
// 'tanh'). Operands of one shape are read with their strides or made
// contiguous by rill's strided copy on the same stream. Other cases (other
// dtypes, broadcasting operands, empty tensors, another threshold) go to the
// fallback.
#include <array>

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// grad and y are float32 tensors of one rill device and shape, not empty.
bool takes(const at::Tensor &grad, const at::Tensor &y) {
    return is_f32(grad) && is_f32(y) && grad.device() == y.device() &&
           grad.sizes().equals(y.sizes()) && grad.numel() > 0;
}

// out = a (op) b over a contiguous [outer, dim, inner] (three dimensions
// with the strides given; 0 repeats an operand).
void binary3(rill_stream *s, rill_binary_op op, float *out, const float *a,
             std::array<size_t, 3> as, const float *b, std::array<size_t, 3> bs,
             std::array<size_t, 3> shape) {
    TORCH_RILL_CHECK(rill_op_binary_f32(s, op, out, a, as.data(), b, bs.data(), shape.data(), 3));
}

// a (op) b element by element, both of out's shape, out contiguous and new;
// a and b may be strided.
void binary_same(rill_stream *s, rill_binary_op op, const at::Tensor &out, const at::Tensor &a,
                 const at::Tensor &b) {
    std::vector<size_t> shape(out.sizes().begin(), out.sizes().end());
    std::vector<size_t> as = broadcast_strides(a, out.sizes()),
                        bs = broadcast_strides(b, out.sizes());
    if (shape.empty()) {
        shape.push_back(1);
        as.push_back(0);
        bs.push_back(0);
    }
    TORCH_RILL_CHECK(rill_op_binary_f32(s, op, out.data_ptr<float>(), a.const_data_ptr<float>(),
                                        as.data(), b.const_data_ptr<float>(), bs.data(),
                                        shape.data(), shape.size()));
}

bool strided_ok(const at::Tensor &t) {
    if (t.dim() > RILL_OP_MAX_DIMS)
        return false;
    for (int64_t st : t.strides())
        if (st < 0)
            return false;
    return true;
}

// out, computed contiguous, laid out as PyTorch's CPU kernel lays out the
// result of an element-wise op of a and b.
at::Tensor in_cpu_layout(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b) {
    if (a.is_contiguous() && b.is_contiguous())
        return out;
    at::Tensor like = binary_output(a, b);
    return like.is_contiguous() ? out : like.copy_(out);
}

// relu's backward: grad where y > 0 (or NaN), else 0.
at::Tensor threshold_backward(const at::Tensor &grad, const at::Tensor &y,
                              const at::Scalar &threshold) {
    if (!takes(grad, y) || !strided_ok(grad) || !strided_ok(y) || threshold.toDouble() != 0.0)
        return call_fallback_fn<&boxed_fallback, at::_ops::threshold_backward>::call(grad, y,
                                                                                     threshold);
    const c10::DeviceGuard guard(y.device());
    return binary_into_new(RILL_BINARY_RELU_BACKWARD, grad, y);
}

// gelu's backward at its input x: both approximations.
at::Tensor gelu_backward(const at::Tensor &grad, const at::Tensor &x,
                         c10::string_view approximate) {
    bool tanh = approximate == "tanh";
    if (!takes(grad, x) || !strided_ok(grad) || !strided_ok(x) || (!tanh && approximate != "none"))
        return call_fallback_fn<&boxed_fallback, at::_ops::gelu_backward>::call(grad, x,
                                                                                approximate);
    const c10::DeviceGuard guard(x.device());
    return binary_into_new(tanh ? RILL_BINARY_GELU_TANH_BACKWARD : RILL_BINARY_GELU_BACKWARD, grad,
                           x);
}

at::Tensor sigmoid_backward(const at::Tensor &grad, const at::Tensor &y) {
    if (!takes(grad, y) || !strided_ok(grad))
        return call_fallback_fn<&boxed_fallback, at::_ops::sigmoid_backward>::call(grad, y);
    const c10::DeviceGuard guard(y.device());
    at::Tensor yc = y.contiguous();
    at::Tensor out = at::empty(y.sizes(), y.options());
    rill_stream *s = stream_of(out);
    size_t n = static_cast<size_t>(y.numel());
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_RSUB, out.data_ptr<float>(),
                                     yc.const_data_ptr<float>(), 1.0f, n)); // 1 - y
    binary_same(s, RILL_BINARY_MUL, out, grad, out);                        // grad * (1 - y)
    binary_same(s, RILL_BINARY_MUL, out, out, yc);                          // ... * y
    return in_cpu_layout(out, grad, y);
}

at::Tensor tanh_backward(const at::Tensor &grad, const at::Tensor &y) {
    if (!takes(grad, y) || !strided_ok(grad) || !strided_ok(y))
        return call_fallback_fn<&boxed_fallback, at::_ops::tanh_backward>::call(grad, y);
    const c10::DeviceGuard guard(y.device());
    at::Tensor out = at::empty(y.sizes(), y.options());
    rill_stream *s = stream_of(out);
    binary_same(s, RILL_BINARY_MUL, out, y, y); // y * y
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_RSUB, out.data_ptr<float>(),
                                     out.const_data_ptr<float>(), 1.0f,
                                     static_cast<size_t>(y.numel()))); // 1 - y * y
    binary_same(s, RILL_BINARY_MUL, out, grad, out);                   // grad * (1 - y * y)
    return in_cpu_layout(out, grad, y);
}

// dim of a tensor of ndim dimensions wrapped as PyTorch does, or -1 when it
// refuses it.
int64_t wrap_dim(int64_t d, int64_t ndim) {
    int64_t n = std::max<int64_t>(ndim, 1);
    if (d < -n || d >= n)
        return -1;
    return d < 0 ? d + n : d;
}

// The backward of softmax (log false) or log_softmax along dim into a new
// tensor; undefined when the kernels do not take the case.
at::Tensor softmax_backward(bool log, const at::Tensor &grad, const at::Tensor &y, int64_t dim,
                            c10::ScalarType input_dtype) {
    int64_t d = wrap_dim(dim, y.dim());
    if (!takes(grad, y) || input_dtype != at::kFloat || d < 0)
        return {};
    size_t outer = 1, size = 1, inner = 1;
    for (int64_t i = 0; i < y.dim(); i++)
        (i < d ? outer : i == d ? size : inner) *= static_cast<size_t>(y.size(i));
    const c10::DeviceGuard guard(y.device());
    at::Tensor gc = grad.contiguous(), yc = y.contiguous();
    at::Tensor out = at::empty(y.sizes(), y.options());
    at::Tensor sum = at::empty({static_cast<int64_t>(outer * inner)}, y.options());
    rill_stream *s = stream_of(out);
    std::array<size_t, 3> shape = {outer, size, inner}, all = {size * inner, inner, 1},
                          row = {inner, 0, 1};
    float *o = out.data_ptr<float>(), *sm = sum.data_ptr<float>();
    const float *g = gc.const_data_ptr<float>(), *yp = yc.const_data_ptr<float>();
    if (log) {
        // grad - exp(y) * sum(grad)
        TORCH_RILL_CHECK(
            rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, sm, nullptr, g, outer, size, inner));
        TORCH_RILL_CHECK(
            rill_op_map_f32(s, RILL_MAP_EXP, o, yp, 1.0f, static_cast<size_t>(y.numel())));
        binary3(s, RILL_BINARY_MUL, o, o, all, sm, row, shape);
        binary3(s, RILL_BINARY_SUB, o, g, all, o, all, shape);
    } else {
        // y * (grad - sum(grad * y))
        binary3(s, RILL_BINARY_MUL, o, g, all, yp, all, shape);
        TORCH_RILL_CHECK(
            rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, sm, nullptr, o, outer, size, inner));
        binary3(s, RILL_BINARY_SUB, o, g, all, sm, row, shape);
        binary3(s, RILL_BINARY_MUL, o, o, all, yp, all, shape);
    }
    return out;
}

at::Tensor softmax_backward_data(const at::Tensor &grad, const at::Tensor &y, int64_t dim,
                                 c10::ScalarType input_dtype) {
    at::Tensor out = softmax_backward(false, grad, y, dim, input_dtype);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::_softmax_backward_data>::call(grad, y, dim,
                                                                                     input_dtype);
}

at::Tensor log_softmax_backward_data(const at::Tensor &grad, const at::Tensor &y, int64_t dim,
                                     c10::ScalarType input_dtype) {
    at::Tensor out = softmax_backward(true, grad, y, dim, input_dtype);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::_log_softmax_backward_data>::call(
        grad, y, dim, input_dtype);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("threshold_backward", threshold_backward);
    m.impl("sigmoid_backward", sigmoid_backward);
    m.impl("tanh_backward", tanh_backward);
    m.impl("gelu_backward", gelu_backward);
    m.impl("_softmax_backward_data", softmax_backward_data);
    m.impl("_log_softmax_backward_data", log_softmax_backward_data);
}

} // namespace torch_rill
