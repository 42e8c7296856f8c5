// SPDX-License-Identifier: MIT
// Ops that run as rill's own kernels, queued on the current stream: the
// float32 element-wise ops (with broadcasting) and fills. The pool sees the
// accesses each kernel declares, so memory another stream's kernel still
// reads is not handed out again early. Cases these do not take (other
// dtypes, CPU scalars, an alpha, outputs that overlap their inputs) go to
// the fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "host_view.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

rill_stream *stream_of(const at::Tensor &t) {
    return rill_current_stream(device(t.device().index()));
}

bool is_f32(const at::Tensor &t) {
    return is_rill(t) && t.scalar_type() == at::kFloat;
}

// Strides, in elements, of t read as a tensor of shape (broadcasting: 0
// where t's dimension is 1 or missing).
std::vector<size_t> broadcast_strides(const at::Tensor &t, c10::IntArrayRef shape) {
    std::vector<size_t> out(shape.size(), 0);
    int64_t offset = static_cast<int64_t>(shape.size()) - t.dim();
    for (int64_t d = 0; d < t.dim(); d++)
        if (t.size(d) != 1)
            out[offset + d] = static_cast<size_t>(t.stride(d));
    return out;
}

bool contiguous_strides(const at::Tensor &t, c10::IntArrayRef shape) {
    return t.is_contiguous() && t.sizes().equals(shape);
}

// out = a (op) b, out contiguous of the broadcast shape: false when the
// kernel does not take it.
bool binary(rill_binary_op op, const at::Tensor &out, const at::Tensor &a, const at::Tensor &b) {
    if (!is_f32(a) || !is_f32(b) || !is_f32(out) || a.device() != b.device() ||
        out.device() != a.device() || !out.is_contiguous())
        return false;
    for (const at::Tensor *t : {&a, &b})
        for (int64_t s : t->strides())
            if (s < 0)
                return false;
    c10::IntArrayRef shape = out.sizes();
    if (a.dim() > out.dim() || b.dim() > out.dim() ||
        !c10::IntArrayRef(at::infer_size(a.sizes(), b.sizes())).equals(shape))
        return false; // the fallback says what is wrong, in PyTorch's words
    // rill writes out in place of an input only where that input is out.
    for (const at::Tensor *t : {&a, &b})
        if (t->storage().is_alias_of(out.storage()) &&
            !(t->data_ptr() == out.data_ptr() && contiguous_strides(*t, shape)))
            return false;
    if (out.numel() == 0)
        return true;
    const c10::DeviceGuard guard(out.device());
    std::vector<size_t> dims(shape.begin(), shape.end());
    std::vector<size_t> as = broadcast_strides(a, shape), bs = broadcast_strides(b, shape);
    if (dims.empty()) {
        dims.push_back(1);
        as.push_back(0);
        bs.push_back(0);
    }
    TORCH_RILL_CHECK(rill_op_binary_f32(
        stream_of(out), op, out.data_ptr<float>(), a.const_data_ptr<float>(), as.data(),
        b.const_data_ptr<float>(), bs.data(), dims.data(), dims.size()));
    return true;
}

at::Tensor binary_new(rill_binary_op op, const at::Tensor &a, const at::Tensor &b, bool *done) {
    *done = false;
    if (!is_f32(a) || !is_f32(b) || a.device() != b.device())
        return {};
    at::Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options());
    *done = binary(op, out, a, b);
    return out;
}

bool is_one(const at::Scalar &alpha) {
    return alpha.isIntegral(false) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0;
}

at::Tensor add(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    bool done = false;
    at::Tensor out = is_one(alpha) ? binary_new(RILL_BINARY_ADD, a, b, &done) : at::Tensor();
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::add_Tensor>::call(a, b, alpha);
}

at::Tensor &add_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    if (is_one(alpha) && binary(RILL_BINARY_ADD, a, a, b))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::add__Tensor>::call(a, b, alpha);
}

at::Tensor sub(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    bool done = false;
    at::Tensor out = is_one(alpha) ? binary_new(RILL_BINARY_SUB, a, b, &done) : at::Tensor();
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::sub_Tensor>::call(a, b, alpha);
}

at::Tensor &sub_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    if (is_one(alpha) && binary(RILL_BINARY_SUB, a, a, b))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::sub__Tensor>::call(a, b, alpha);
}

at::Tensor mul(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MUL, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::mul_Tensor>::call(a, b);
}

at::Tensor &mul_(at::Tensor &a, const at::Tensor &b) {
    if (binary(RILL_BINARY_MUL, a, a, b))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::mul__Tensor>::call(a, b);
}

at::Tensor div(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_DIV, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::div_Tensor>::call(a, b);
}

at::Tensor maximum(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MAX, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::maximum>::call(a, b);
}

at::Tensor minimum(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MIN, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::minimum>::call(a, b);
}

at::Tensor &fill_(at::Tensor &self, const at::Scalar &value) {
    if (is_f32(self) && self.is_contiguous()) {
        if (self.numel() > 0) {
            const c10::DeviceGuard guard(self.device());
            TORCH_RILL_CHECK(rill_op_fill_f32(stream_of(self), self.data_ptr<float>(),
                                              value.toFloat(), static_cast<size_t>(self.numel())));
        }
        return self;
    }
    return call_fallback_fn<&boxed_fallback, at::_ops::fill__Scalar>::call(self, value);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("add.Tensor", add);
    m.impl("add_.Tensor", add_);
    m.impl("sub.Tensor", sub);
    m.impl("sub_.Tensor", sub_);
    m.impl("mul.Tensor", mul);
    m.impl("mul_.Tensor", mul_);
    m.impl("div.Tensor", div);
    m.impl("maximum", maximum);
    m.impl("minimum", minimum);
    m.impl("fill_.Scalar", fill_);
}

} // namespace torch_rill
