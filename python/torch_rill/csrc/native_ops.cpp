// SPDX-License-Identifier: MIT
// Ops that run as rill's own kernels, queued on the current stream: the
// float32 element-wise ops (with broadcasting; new results, in place and
// out=, which PyTorch's _foreach_ ops call per tensor), the same ops
// between a tensor and a CPU number, add and sub with an alpha between
// tensors of one shape, activations and other maps, fills (of every dtype
// of 1 to 8 bytes), arange, and Adam's addcmul, addcdiv, lerp and clamp_min
// composed of these. The pool
// sees the accesses each kernel declares, so memory another stream's kernel
// still reads is not handed out again early. Dense tensors in any order of
// dimensions (channels-last, transposed) are read and written in place, and
// results keep that order; a new result of a map from a sliced or expanded
// tensor is computed on a dense copy. Cases these do not take (other
// dtypes, an alpha between tensors of other shapes or strides, outputs that
// overlap their inputs, writes into a tensor with gaps) go to the fallback.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/zero_ops.h>
#include <torch/library.h>

#include "capture.h"
#include "fallback.h"
#include "host_view.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {

rill_stream *stream_of(const at::Tensor &t) {
    return rill_current_stream(device(t.device().index()));
}

bool is_f32(const at::Tensor &t) {
    return is_rill(t) && t.scalar_type() == at::kFloat;
}

std::optional<rill_element_type> element_type(at::ScalarType t) {
    switch (t) {
    case at::kBool:
        return RILL_ELEMENT_BOOL;
    case at::kByte:
        return RILL_ELEMENT_U8;
    case at::kInt:
        return RILL_ELEMENT_I32;
    case at::kLong:
        return RILL_ELEMENT_I64;
    case at::kFloat:
        return RILL_ELEMENT_F32;
    case at::kDouble:
        return RILL_ELEMENT_F64;
    default:
        return std::nullopt;
    }
}

bool is_same_view(const at::Tensor &t, const at::Tensor &out) {
    return t.data_ptr() == out.data_ptr() && t.sizes().equals(out.sizes()) &&
           t.strides().equals(out.strides());
}

bool has_negative_stride(const at::Tensor &t) {
    return std::any_of(t.strides().begin(), t.strides().end(), [](int64_t s) { return s < 0; });
}

namespace {

// broadcast_strides into out, which has shape.size() zeros.
void fill_broadcast_strides(const at::Tensor &t, c10::IntArrayRef shape, size_t *out) {
    int64_t offset = static_cast<int64_t>(shape.size()) - t.dim();
    for (int64_t d = 0; d < t.dim(); d++)
        if (t.size(d) != 1)
            out[offset + d] = static_cast<size_t>(t.stride(d));
}

} // namespace

std::vector<size_t> broadcast_strides(const at::Tensor &t, c10::IntArrayRef shape) {
    std::vector<size_t> out(shape.size(), 0);
    fill_broadcast_strides(t, shape, out.data());
    return out;
}

bool is_one(const at::Scalar &s) {
    if (s.isComplex())
        return s.toComplexDouble() == c10::complex<double>(1.0, 0.0);
    return s.isIntegral(false) ? s.toLong() == 1 : s.toDouble() == 1.0;
}

at::Tensor binary_output(const at::Tensor &a, const at::Tensor &b) {
    if (a.is_contiguous() && b.is_contiguous())
        return at::empty(at::infer_size(a.sizes(), b.sizes()), a.options());
    return at::TensorIteratorConfig()
        .add_owned_output(at::Tensor())
        .add_const_input(a)
        .add_const_input(b)
        .build()
        .output();
}

namespace {

using at::native::call_fallback_fn;

// A new tensor of a's shape and strides, for the result of a kernel that
// reads a dense a as one span: contiguous, or channels-last after a.
at::Tensor new_like(const at::Tensor &a) {
    return a.is_contiguous() ? at::empty(a.sizes(), a.options()) : at::empty_like(a);
}

// A new tensor for the result of a one-operand element-wise kernel on a,
// laid out as PyTorch's CPU kernels lay it out, and the dense tensor the
// kernel reads as one span: a itself, or, when a has gaps or repeats (a
// slice, a sum's gradient), the result holding a's values (rill's strided
// copy), which the kernel then computes in place.
struct MapTarget {
    at::Tensor out, from;
};

MapTarget map_target(const at::Tensor &a) {
    if (a.is_non_overlapping_and_dense())
        return {new_like(a), a};
    at::Tensor out = binary_output(a, a);
    out.copy_(a);
    return {out, out};
}

// Drops dimensions of 1 and joins a dimension into the next where a and b
// (and out, contiguous) step through both as through one; at least one
// dimension stays.
void merge_dims(c10::SmallVector<size_t, 6> &dims, c10::SmallVector<size_t, 6> &as,
                c10::SmallVector<size_t, 6> &bs) {
    size_t m = 0;
    for (size_t d = 0; d < dims.size(); d++) {
        if (dims[d] == 1)
            continue;
        if (m > 0 && as[m - 1] == as[d] * dims[d] && bs[m - 1] == bs[d] * dims[d]) {
            dims[m - 1] *= dims[d];
            as[m - 1] = as[d];
            bs[m - 1] = bs[d];
            continue;
        }
        dims[m] = dims[d];
        as[m] = as[d];
        bs[m] = bs[d];
        m++;
    }
    if (m == 0) {
        dims[0] = 1;
        as[0] = bs[0] = 0;
        m = 1;
    }
    dims.resize(m);
    as.resize(m);
    bs.resize(m);
}

// rill_op_binary_f32 over out contiguous in dims; with more dimensions
// than it takes, one launch per index of the first.
void launch_dims(rill_stream *s, rill_binary_op op, float *out, const float *a, const size_t *as,
                 const float *b, const size_t *bs, const size_t *dims, size_t nd) {
    if (nd <= RILL_OP_MAX_DIMS) {
        TORCH_RILL_CHECK(rill_op_binary_f32(s, op, out, a, as, b, bs, dims, nd));
        return;
    }
    size_t inner = std::accumulate(dims + 1, dims + nd, size_t{1}, std::multiplies<size_t>());
    for (size_t i = 0; i < dims[0]; i++)
        launch_dims(s, op, out + i * inner, a + i * as[0], as + 1, b + i * bs[0], bs + 1, dims + 1,
                    nd - 1);
}

// Queues out = a (op) b, out contiguous of the broadcast shape of a and b,
// which the caller checked.
void launch_contiguous(rill_binary_op op, const at::Tensor &out, const at::Tensor &a,
                       const at::Tensor &b) {
    c10::IntArrayRef shape = out.sizes();
    if (out.numel() == 0)
        return;
    // On the stack for the dimensions most tensors have (no heap per op).
    c10::SmallVector<size_t, 6> dims(shape.begin(), shape.end()), as(shape.size(), 0),
        bs(shape.size(), 0);
    fill_broadcast_strides(a, shape, as.data());
    fill_broadcast_strides(b, shape, bs.data());
    if (dims.empty()) {
        dims.push_back(1);
        as.push_back(0);
        bs.push_back(0);
    }
    if (dims.size() > RILL_OP_MAX_DIMS)
        merge_dims(dims, as, bs);
    launch_dims(stream_of(out), op, out.data_ptr<float>(), a.const_data_ptr<float>(), as.data(),
                b.const_data_ptr<float>(), bs.data(), dims.data(), dims.size());
}

// out = a (op) b for a dense out of the broadcast shape of a and b. The
// kernel writes out through the order of dimensions in which it is
// contiguous, and reads a and b in that order.
void launch_binary(rill_binary_op op, const at::Tensor &out, const at::Tensor &a,
                   const at::Tensor &b) {
    if (out.is_contiguous()) {
        launch_contiguous(op, out, a, b);
        return;
    }
    c10::IntArrayRef shape = out.sizes();
    c10::SmallVector<int64_t, 6> order(shape.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return out.stride(x) > out.stride(y); });
    launch_contiguous(op, out.permute(order), a.expand(shape).permute(order),
                      b.expand(shape).permute(order));
}

} // namespace

at::Tensor binary_into_new(rill_binary_op op, const at::Tensor &a, const at::Tensor &b) {
    at::Tensor out = binary_output(a, b);
    launch_binary(op, out, a, b);
    return out;
}

namespace {

// out = a (op) b into a dense out (in place: out is a): false when
// the kernel does not take it.
bool binary(rill_binary_op op, const at::Tensor &out, const at::Tensor &a, const at::Tensor &b) {
    if (!is_f32(a) || !is_f32(b) || !is_f32(out) || a.device() != b.device() ||
        out.device() != a.device() || !out.is_non_overlapping_and_dense() ||
        has_negative_stride(a) || has_negative_stride(b))
        return false;
    c10::IntArrayRef shape = out.sizes();
    if (a.dim() > out.dim() || b.dim() > out.dim() ||
        !c10::IntArrayRef(at::infer_size(a.sizes(), b.sizes())).equals(shape))
        return false; // the fallback says what is wrong, in PyTorch's words
    // rill writes out in place of an input only where that input is out.
    for (const at::Tensor *t : {&a, &b})
        if (t->storage().is_alias_of(out.storage()) && !is_same_view(*t, out))
            return false;
    launch_binary(op, out, a, b);
    return true;
}

// The value of t when it is a CPU number (a Python number PyTorch wrapped,
// or a 0-dim CPU tensor) that meets the float32 rill tensor other
// in an op whose result is float32, as PyTorch's type promotion decides.
// The value is the float PyTorch's CPU kernel computes with: t's value
// rounded once to float32 (integers beyond 2^53 and finite values beyond
// float's range go to the fallback).
std::optional<float> cpu_number(const at::Tensor &t, const at::Tensor &other) {
    if (!t.defined() || !t.is_cpu() || t.dim() != 0 || !is_f32(other) ||
        at::isComplexType(t.scalar_type()) || at::result_type(other, t) != at::kFloat)
        return std::nullopt;
    double v = t.item().toDouble();
    if (std::isfinite(v) && (std::abs(v) > std::numeric_limits<float>::max() ||
                             (at::isIntegralType(t.scalar_type(), true) && std::abs(v) > 0x1p53)))
        return std::nullopt;
    return static_cast<float>(v);
}

// The ops number() computes as one map kernel.
bool number_covers(rill_binary_op op) {
    return op == RILL_BINARY_ADD || op == RILL_BINARY_SUB || op == RILL_BINARY_MUL ||
           op == RILL_BINARY_DIV;
}

// out = a (op) value, or value (op) a when value_first, as one map kernel
// over a's span (out is new_like(a), or a itself); false for the ops it
// does not cover. a - value is a + (-value), which IEEE arithmetic makes
// the same number.
bool number(rill_binary_op op, const at::Tensor &out, const at::Tensor &a, float value,
            bool value_first) {
    if (!number_covers(op))
        return false;
    size_t n = static_cast<size_t>(a.numel());
    if (n == 0)
        return true;
    rill_stream *s = stream_of(a);
    float *o = out.data_ptr<float>();
    const float *x = a.const_data_ptr<float>();
    if (op == RILL_BINARY_ADD || (op == RILL_BINARY_SUB && !value_first)) {
        float v = op == RILL_BINARY_ADD ? value : -value;
        check(rill_op_add_scalar_f32(s, o, x, v, n), "rill_op_add_scalar_f32");
        return true;
    }
    rill_map_op map = op == RILL_BINARY_SUB   ? RILL_MAP_RSUB
                      : op == RILL_BINARY_MUL ? RILL_MAP_SCALE
                      : value_first           ? RILL_MAP_RDIV
                                              : RILL_MAP_DIV;
    check(rill_op_map_f32(s, map, o, x, value, n), "rill_op_map_f32");
    return true;
}

// t (op) value, or value (op) t when value_first, into a new tensor:
// undefined for the ops number() does not cover.
at::Tensor number_new(rill_binary_op op, const at::Tensor &t, float value, bool value_first) {
    if (!number_covers(op))
        return {};
    MapTarget m = map_target(t);
    number(op, m.out, m.from, value, value_first);
    return m.out;
}

// t converted to float32 when it is a rill tensor of an integer or bool
// dtype meeting the float32 rill tensor other in an op whose result is
// float32: what PyTorch's CPU kernel computes with (each value rounded once
// to float). t itself otherwise.
at::Tensor promoted(const at::Tensor &t, const at::Tensor &other) {
    if (!is_rill(t) || !is_f32(other) || t.device() != other.device() ||
        !at::isIntegralType(t.scalar_type(), true) || !element_type(t.scalar_type()) ||
        at::result_type(t, other) != at::kFloat)
        return t;
    return t.to(at::kFloat);
}

at::Tensor binary_new(rill_binary_op op, const at::Tensor &x, const at::Tensor &y, bool *done) {
    *done = false;
    at::Tensor a = promoted(x, y), b = promoted(y, x);
    std::optional<float> v = cpu_number(b, a);
    bool value_first = !v;
    if (value_first)
        v = cpu_number(a, b);
    if (v) {
        at::Tensor out = number_new(op, value_first ? b : a, *v, value_first);
        *done = out.defined();
        return out;
    }
    // A new output: its shape is the broadcast shape, and it aliases nothing.
    if (!is_f32(a) || !is_f32(b) || a.device() != b.device() || has_negative_stride(a) ||
        has_negative_stride(b))
        return {};
    *done = true;
    return binary_into_new(op, a, b);
}

// out can take a result written over a's span: a float32 tensor of a's
// device, shape and strides that is a or shares no memory with it.
bool writes_like(const at::Tensor &out, const at::Tensor &a) {
    return is_f32(out) && out.device() == a.device() && out.sizes().equals(a.sizes()) &&
           out.strides().equals(a.strides()) &&
           (is_same_view(a, out) || !out.storage().is_alias_of(a.storage()));
}

// PyTorch's refusal of an out= or in-place result of a dtype the result
// of a and b cannot be cast to (an int64 tensor's mul_ by a float32 one),
// at the call, where the fallback's meta kernel would let it through to
// fail the stream.
void check_cast(const at::Tensor &a, const at::Tensor &b, const at::Tensor &out) {
    if (a.scalar_type() == out.scalar_type() && b.scalar_type() == out.scalar_type())
        return; // the common case, without type promotion's cost
    at::ScalarType common = at::result_type(a, b);
    TORCH_CHECK(at::canCast(common, out.scalar_type()), "result type ", common,
                " can't be cast to the desired output type ", out.scalar_type());
}

// out = a (op) b into an existing out (out= and in place): rill tensors a
// and b, or one of them a CPU number (PyTorch's mul_ of a number is
// mul.out(number, t, out=t)).
bool binary_out(rill_binary_op op, const at::Tensor &x, const at::Tensor &y,
                const at::Tensor &out) {
    check_cast(x, y, out);
    if (!is_f32(out))
        return false;
    at::Tensor a = promoted(x, y), b = promoted(y, x);
    if (std::optional<float> v = cpu_number(b, a))
        return a.is_non_overlapping_and_dense() && writes_like(out, a) &&
               number(op, out, a, *v, false);
    if (std::optional<float> v = cpu_number(a, b))
        return b.is_non_overlapping_and_dense() && writes_like(out, b) &&
               number(op, out, b, *v, true);
    return binary(op, out, a, b);
}

// The float a kernel on float32 tensors scales by for alpha, as PyTorch's
// CPU kernel converts it: nullopt for a complex or boolean alpha (the
// fallback says what is wrong); a finite alpha past float's range raises
// PyTorch's own error here, before anything is queued, as on the CPU.
std::optional<float> float_alpha(const at::Scalar &alpha) {
    if (alpha.isComplex() || alpha.isBoolean())
        return std::nullopt;
    return alpha.to<float>();
}

// out = a + alpha b (the optimizers' p.add_(g, alpha=-lr)) for dense
// float32 tensors of one shape and strides, read as one span each, out
// new_like(a) or a itself: false when the kernel does not take the case.
bool scaled_add(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b, float alpha) {
    if (!is_f32(a) || !is_f32(b) || a.device() != b.device() || !a.is_non_overlapping_and_dense() ||
        !a.sizes().equals(b.sizes()) || !a.strides().equals(b.strides()) || !writes_like(out, a) ||
        !writes_like(out, b))
        return false;
    if (a.numel() > 0) {
        TORCH_RILL_CHECK(rill_op_add_f32(stream_of(a), out.data_ptr<float>(),
                                         a.const_data_ptr<float>(), b.const_data_ptr<float>(),
                                         alpha, static_cast<size_t>(a.numel())));
    }
    return true;
}

// An integer number's two's complement bits: a Python int past int64's
// range is a uint64 number, which PyTorch's integer add wraps.
uint64_t integer_bits(const at::Scalar &v) {
    return v.type() == at::kUInt64 ? v.to<uint64_t>() : static_cast<uint64_t>(v.toLong());
}

// out = a + sign alpha b for a dense int64 rill tensor a and a CPU integer
// number b (batch norm's num_batches_tracked += 1), out a itself, another
// tensor laid out as a, or undefined for a new one (new_like(a)): one
// rill_op_add_scalar_i64, wrapping as PyTorch's integer add does. Returns
// the result, undefined when the case is another.
at::Tensor add_long_number(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b,
                           const at::Scalar &alpha, int64_t sign) {
    if (!is_rill(a) || a.scalar_type() != at::kLong || !b.defined() || !b.is_cpu() ||
        b.dim() != 0 || !at::isIntegralType(b.scalar_type(), false))
        return {};
    if (!alpha.isIntegral(false) || !a.is_non_overlapping_and_dense())
        return {};
    if (out.defined() &&
        (!is_rill(out) || out.scalar_type() != at::kLong || out.device() != a.device() ||
         !out.sizes().equals(a.sizes()) || !out.strides().equals(a.strides()) ||
         (!is_same_view(a, out) && out.storage().is_alias_of(a.storage()))))
        return {};
    at::Tensor result = out.defined() ? out : new_like(a);
    uint64_t value = integer_bits(b.item()) * integer_bits(alpha) * static_cast<uint64_t>(sign);
    if (a.numel() > 0) {
        TORCH_RILL_CHECK(rill_op_add_scalar_i64(
            stream_of(a), result.data_ptr<int64_t>(), a.const_data_ptr<int64_t>(),
            static_cast<int64_t>(value), static_cast<size_t>(a.numel())));
    }
    return result;
}

// PyTorch's checks of alpha against the result's dtype, at the call as on
// the CPU: the kernels here would take alpha 1.0 for integers, or True and
// 1+0j for floats, and the fallback's meta kernel lets them through to
// fail the stream later.
void check_alpha(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    if (alpha.isIntegral(false) ||
        (alpha.isFloatingPoint() && a.is_floating_point() && b.is_floating_point()))
        return;
    at::native::alpha_check(at::result_type(a, b), alpha);
}

// a + alpha b, a - alpha b (sign -1) into a new tensor: undefined when the
// kernels do not take it.
at::Tensor add_new(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha, float sign) {
    check_alpha(a, b, alpha);
    if (sign < 0) // PyTorch's refusal of a bool operand, which promotion would hide
        at::native::sub_check(a, b);
    if (is_rill(a) && a.scalar_type() == at::kLong) {
        at::Tensor out = add_long_number(at::Tensor(), a, b, alpha, sign > 0 ? 1 : -1);
        if (out.defined())
            return out;
    }
    if (is_one(alpha)) {
        bool done = false;
        at::Tensor out = binary_new(sign > 0 ? RILL_BINARY_ADD : RILL_BINARY_SUB, a, b, &done);
        return done ? out : at::Tensor();
    }
    if (!is_f32(a) || !is_f32(b))
        return {};
    std::optional<float> f = float_alpha(alpha);
    if (!f || !a.sizes().equals(b.sizes()) || !a.strides().equals(b.strides()) ||
        !a.is_non_overlapping_and_dense())
        return {};
    at::Tensor out = new_like(a);
    return scaled_add(out, a, b, sign * *f) ? out : at::Tensor();
}

// out = a + sign alpha b into an existing out (out=, or a in place).
bool add_into(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b,
              const at::Scalar &alpha, float sign) {
    check_alpha(a, b, alpha);
    check_cast(a, b, out);
    if (sign < 0)
        at::native::sub_check(a, b);
    if (a.scalar_type() == at::kLong)
        return add_long_number(out, a, b, alpha, sign > 0 ? 1 : -1).defined();
    if (is_one(alpha))
        return binary_out(sign > 0 ? RILL_BINARY_ADD : RILL_BINARY_SUB, a, b, out);
    if (!is_f32(a) || !is_f32(b) || !is_f32(out))
        return false;
    std::optional<float> f = float_alpha(alpha);
    return f && scaled_add(out, a, b, sign * *f);
}

at::Tensor add(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    at::Tensor out = add_new(a, b, alpha, 1.0f);
    return out.defined()
               ? out
               : call_fallback_fn<&boxed_fallback, at::_ops::add_Tensor>::call(a, b, alpha);
}

at::Tensor &add_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    if (add_into(a, a, b, alpha, 1.0f))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::add__Tensor>::call(a, b, alpha);
}

at::Tensor &add_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha,
                    at::Tensor &out) {
    if (add_into(out, a, b, alpha, 1.0f))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::add_out>::call(a, b, alpha, out);
}

at::Tensor sub(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    at::Tensor out = add_new(a, b, alpha, -1.0f);
    return out.defined()
               ? out
               : call_fallback_fn<&boxed_fallback, at::_ops::sub_Tensor>::call(a, b, alpha);
}

at::Tensor &sub_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha) {
    if (add_into(a, a, b, alpha, -1.0f))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::sub__Tensor>::call(a, b, alpha);
}

at::Tensor &sub_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha,
                    at::Tensor &out) {
    if (add_into(out, a, b, alpha, -1.0f))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::sub_out>::call(a, b, alpha, out);
}

at::Tensor mul(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MUL, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::mul_Tensor>::call(a, b);
}

at::Tensor &mul_(at::Tensor &a, const at::Tensor &b) {
    if (binary_out(RILL_BINARY_MUL, a, b, a))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::mul__Tensor>::call(a, b);
}

at::Tensor &mul_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {
    if (binary_out(RILL_BINARY_MUL, a, b, out))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::mul_out>::call(a, b, out);
}

at::Tensor div(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_DIV, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::div_Tensor>::call(a, b);
}

at::Tensor &div_(at::Tensor &a, const at::Tensor &b) {
    if (binary_out(RILL_BINARY_DIV, a, b, a))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::div__Tensor>::call(a, b);
}

at::Tensor &div_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {
    if (binary_out(RILL_BINARY_DIV, a, b, out))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::div_out>::call(a, b, out);
}

// The optimizers' pointwise ops with no kernel of their own (Adam's
// moments and update: addcmul, addcdiv, lerp with a number weight) between
// float32 tensors of one device, shape and strides, dense: true when ins
// are such and out (new_like(ins[0]), one of them, or a tensor apart from
// them all) can take the result.
bool same_dense(std::initializer_list<const at::Tensor *> ins, const at::Tensor &out) {
    const at::Tensor &first = **ins.begin();
    if (!is_f32(first) || !first.is_non_overlapping_and_dense())
        return false;
    for (const at::Tensor *t : ins)
        if (!is_f32(*t) || t->device() != first.device() || !t->sizes().equals(first.sizes()) ||
            !t->strides().equals(first.strides()) || !writes_like(out, *t))
            return false;
    return true;
}

// out = self + value * t1 (op) t2, op MUL (addcmul) or DIV (addcdiv), in
// the order of PyTorch's CPU kernel: (value * t1) (op) t2, then + self, each
// rounded to float. false when the kernels do not take the case.
bool addc(rill_binary_op op, const at::Tensor &out, const at::Tensor &self, const at::Tensor &t1,
          const at::Tensor &t2, const at::Scalar &value) {
    if (!is_f32(self) || !is_f32(t1) || !is_f32(t2))
        return false;
    std::optional<float> v = float_alpha(value);
    if (!v || !same_dense({&self, &t1, &t2}, out))
        return false;
    at::Tensor scaled = new_like(t1);
    number(RILL_BINARY_MUL, scaled, t1, *v, false);
    launch_binary(op, scaled, scaled, t2);
    launch_binary(RILL_BINARY_ADD, out, self, scaled);
    return true;
}

// out = self + weight (end - self) for a number weight, as PyTorch's CPU
// kernel computes it: from self when |weight| < 0.5, else end + (weight -
// 1) (end - self), which is exact at weight 1. false when the kernels do not
// take the case.
bool lerp_into(const at::Tensor &out, const at::Tensor &self, const at::Tensor &end,
               const at::Scalar &weight) {
    if (!is_f32(self) || !is_f32(end))
        return false;
    std::optional<float> w = float_alpha(weight);
    if (!w || !same_dense({&self, &end}, out))
        return false;
    at::Tensor diff = new_like(self);
    launch_binary(RILL_BINARY_SUB, diff, end, self);
    bool small = std::abs(*w) < 0.5f;
    return scaled_add(out, small ? self : end, diff, small ? *w : *w - 1.0f);
}

template <rill_binary_op Op>
at::Tensor addc_new(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
                    const at::Scalar &value) {
    at::Tensor out = is_f32(self) ? new_like(self) : at::Tensor();
    if (out.defined() && addc(Op, out, self, t1, t2, value))
        return out;
    if (Op == RILL_BINARY_MUL)
        return call_fallback_fn<&boxed_fallback, at::_ops::addcmul>::call(self, t1, t2, value);
    return call_fallback_fn<&boxed_fallback, at::_ops::addcdiv>::call(self, t1, t2, value);
}

template <rill_binary_op Op>
at::Tensor &addc_(at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
                  const at::Scalar &value) {
    if (addc(Op, self, self, t1, t2, value))
        return self;
    if (Op == RILL_BINARY_MUL)
        return call_fallback_fn<&boxed_fallback, at::_ops::addcmul_>::call(self, t1, t2, value);
    return call_fallback_fn<&boxed_fallback, at::_ops::addcdiv_>::call(self, t1, t2, value);
}

template <rill_binary_op Op>
at::Tensor &addc_out(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
                     const at::Scalar &value, at::Tensor &out) {
    if (addc(Op, out, self, t1, t2, value))
        return out;
    if (Op == RILL_BINARY_MUL)
        return call_fallback_fn<&boxed_fallback, at::_ops::addcmul_out>::call(self, t1, t2, value,
                                                                              out);
    return call_fallback_fn<&boxed_fallback, at::_ops::addcdiv_out>::call(self, t1, t2, value, out);
}

at::Tensor lerp(const at::Tensor &self, const at::Tensor &end, const at::Scalar &weight) {
    at::Tensor out = is_f32(self) ? new_like(self) : at::Tensor();
    if (out.defined() && lerp_into(out, self, end, weight))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::lerp_Scalar>::call(self, end, weight);
}

at::Tensor &lerp_(at::Tensor &self, const at::Tensor &end, const at::Scalar &weight) {
    if (lerp_into(self, self, end, weight))
        return self;
    return call_fallback_fn<&boxed_fallback, at::_ops::lerp__Scalar>::call(self, end, weight);
}

at::Tensor &lerp_out(const at::Tensor &self, const at::Tensor &end, const at::Scalar &weight,
                     at::Tensor &out) {
    if (lerp_into(out, self, end, weight))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::lerp_Scalar_out>::call(self, end, weight,
                                                                              out);
}

at::Tensor maximum(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MAX, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::maximum>::call(a, b);
}

// clamp_min with a tensor bound is maximum on PyTorch's CPU device (NaN
// from either side); _foreach_maximum_ (Adam's amsgrad) calls clamp_min_.
at::Tensor clamp_min(const at::Tensor &a, const at::Tensor &min) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MAX, a, min, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::clamp_min_Tensor>::call(a, min);
}

at::Tensor &clamp_min_(at::Tensor &a, const at::Tensor &min) {
    if (binary_out(RILL_BINARY_MAX, a, min, a))
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::clamp_min__Tensor>::call(a, min);
}

at::Tensor &clamp_min_out(const at::Tensor &a, const at::Tensor &min, at::Tensor &out) {
    if (binary_out(RILL_BINARY_MAX, a, min, out))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::clamp_min_Tensor_out>::call(a, min, out);
}

at::Tensor minimum(const at::Tensor &a, const at::Tensor &b) {
    bool done = false;
    at::Tensor out = binary_new(RILL_BINARY_MIN, a, b, &done);
    return done ? out : call_fallback_fn<&boxed_fallback, at::_ops::minimum>::call(a, b);
}

} // namespace

// v's bits, as an unsigned integer of its width.
template <typename T> uint64_t bits_of(T v) {
    using U = std::conditional_t<
        sizeof(T) == 1, uint8_t,
        std::conditional_t<sizeof(T) == 2, uint16_t,
                           std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
    static_assert(sizeof(U) == sizeof(T), "an element of 1, 2, 4 or 8 bytes");
    U u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}

std::optional<uint64_t> fill_bits(const at::Tensor &t, const at::Scalar &value) {
    switch (t.scalar_type()) {
#define TORCH_RILL_FILL_CASE(ctype, name)                                                          \
    case at::ScalarType::name:                                                                     \
        if constexpr (sizeof(ctype) <= 8)                                                          \
            return bits_of(value.to<ctype>());                                                     \
        return std::nullopt;
        AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(TORCH_RILL_FILL_CASE)
        TORCH_RILL_FILL_CASE(uint16_t, UInt16)
        TORCH_RILL_FILL_CASE(uint32_t, UInt32)
        TORCH_RILL_FILL_CASE(uint64_t, UInt64)
#undef TORCH_RILL_FILL_CASE
    default:
        return std::nullopt;
    }
}

namespace {

// Fills a dense tensor of any dtype of 1 to 8 bytes: float32 by
// rill_op_fill_f32, the others by rill_op_fill_bits with value's bits in
// their dtype; false when the kernels do not take self. A value out of the
// dtype's range raises here, at the call, for the fallback's cases too
// (whose host function would fail the stream instead).
bool fill_dense(const at::Tensor &self, const at::Scalar &value) {
    if (!is_rill(self) || self.layout() != at::kStrided)
        return false;
    if (is_f32(self)) {
        float v = value.to<float>();
        if (!self.is_non_overlapping_and_dense())
            return false;
        if (self.numel() > 0) {
            TORCH_RILL_CHECK(rill_op_fill_f32(stream_of(self), self.data_ptr<float>(), v,
                                              static_cast<size_t>(self.numel())));
        }
        return true;
    }
    std::optional<uint64_t> bits = fill_bits(self, value);
    if (!bits || !self.is_non_overlapping_and_dense())
        return false;
    if (self.numel() > 0) {
        TORCH_RILL_CHECK(rill_op_fill_bits(stream_of(self), self.data_ptr(), *bits,
                                           static_cast<size_t>(self.element_size()),
                                           static_cast<size_t>(self.numel())));
    }
    return true;
}

at::Tensor &fill_(at::Tensor &self, const at::Scalar &value) {
    if (fill_dense(self, value))
        return self;
    return call_fallback_fn<&boxed_fallback, at::_ops::fill__Scalar>::call(self, value);
}

at::Tensor &zero_(at::Tensor &self) {
    if (fill_dense(self, 0))
        return self;
    return call_fallback_fn<&boxed_fallback, at::_ops::zero_>::call(self);
}

// A number that is an integer of magnitude at most limit, as an int64.
std::optional<int64_t> exact_integer(const at::Scalar &v, double limit) {
    if (v.isComplex() || v.isBoolean())
        return std::nullopt;
    if (v.isIntegral(false))
        return v.type() == at::kUInt64 || std::abs(static_cast<double>(v.toLong())) > limit
                   ? std::nullopt
                   : std::optional<int64_t>(v.toLong());
    double d = v.toDouble();
    if (!(std::abs(d) <= limit) || d != std::trunc(d))
        return std::nullopt;
    return static_cast<int64_t>(d);
}

// arange into out. Its values come from rill_op_arange where they are
// PyTorch's CPU values: integer dtypes (start and step as PyTorch converts
// them, the values wrapping in int64 and kept to the dtype's low bits),
// and float32 and float64 when start, step and every value are integers
// the dtype holds exactly. Others (steps like 0.1, which PyTorch's
// vectorized CPU kernel adds in float, so its values depend on its vector
// width; half and the small integers) are the CPU kernel's, computed at
// the call into page-locked memory that a copy queued on the stream takes
// to the device; on a capturing stream, whose replays would read that
// memory again, they go to the fallback. The CPU's checks, length and
// resize of out (with its warning) come first.
bool arange_into(const at::Scalar &start, const at::Scalar &end, const at::Scalar &step,
                 at::Tensor &out) {
    if (!is_rill(out))
        return false;
    int64_t n = 0;
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange_cpu", [&] {
        n = at::native::compute_arange_size<scalar_t>(start, end, step);
    });
    if (out.numel() != n) {
        if (out.numel() > 0)
            TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                       out.numel(), " which does not match the computed number of elements ", n,
                       ". Note that this may occur as a result of rounding error. The out "
                       "tensor will be resized to a tensor of shape (",
                       n, ",).");
        out.resize_({n});
    }
    if (n == 0)
        return true;
    if (!out.is_contiguous())
        return false;
    std::optional<rill_element_type> type = element_type(out.scalar_type());
    bool floating = type == RILL_ELEMENT_F32 || type == RILL_ELEMENT_F64;
    double limit = type == RILL_ELEMENT_F32 ? 0x1p24 : 0x1p53;
    std::optional<int64_t> first, by;
    if (floating) {
        first = exact_integer(start, limit);
        by = exact_integer(step, limit);
        if (first && by &&
            std::abs(static_cast<double>(*first) +
                     static_cast<double>(*by) * static_cast<double>(n - 1)) > limit)
            first.reset();
    } else if (type) {
        first = start.to<int64_t>();
        by = step.to<int64_t>();
    }
    if (first && by) {
        TORCH_RILL_CHECK(rill_op_arange(stream_of(out), *type, out.data_ptr(), *first, *by,
                                        static_cast<size_t>(n)));
        return true;
    }
    if (is_capturing(stream_of(out)))
        return false;
    at::Tensor host = at::empty(
        {n}, at::TensorOptions().dtype(out.scalar_type()).device(at::kCPU).pinned_memory(true));
    at::arange_out(host, start, end, step);
    out.copy_(host, /*non_blocking=*/true);
    return true;
}

at::Tensor &arange_out(const at::Scalar &start, const at::Scalar &end, const at::Scalar &step,
                       at::Tensor &out) {
    if (arange_into(start, end, step, out))
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::arange_start_out>::call(start, end, step,
                                                                               out);
}

// out = op(a, alpha) for a dense float32 a read as one span, into out
// (new_like(a), or a itself); false when the kernel does not take a.
bool map(rill_map_op op, const at::Tensor &out, const at::Tensor &a, float alpha) {
    if (!is_f32(a) || !a.is_non_overlapping_and_dense())
        return false;
    if (a.numel() > 0) {
        TORCH_RILL_CHECK(rill_op_map_f32(stream_of(a), op, out.data_ptr<float>(),
                                         a.const_data_ptr<float>(), alpha,
                                         static_cast<size_t>(a.numel())));
    }
    return true;
}

// An activation or other one-argument op as a map kernel into a new tensor
// (after a copy when a is not dense), with Aten's fallback for other dtypes.
template <rill_map_op Op, typename Aten> at::Tensor unary(const at::Tensor &a) {
    if (!is_f32(a))
        return call_fallback_fn<&boxed_fallback, Aten>::call(a);
    MapTarget m = map_target(a);
    map(Op, m.out, m.from, 1.0f);
    return m.out;
}

template <rill_map_op Op, typename Aten> at::Tensor &unary_(at::Tensor &a) {
    if (map(Op, a, a, 1.0f))
        return a;
    return call_fallback_fn<&boxed_fallback, Aten>::call(a);
}

// A clamp bound as the float the CPU kernel compares with, absent when
// there is none (-inf for a lower bound, inf for an upper one: no bound);
// nullopt (no kernel) for a complex, boolean or NaN bound.
std::optional<float> clamp_bound(const std::optional<at::Scalar> &bound, float absent) {
    if (!bound)
        return absent;
    std::optional<float> f = float_alpha(*bound);
    return f && !std::isnan(*f) ? f : std::nullopt;
}

// out = min(max(a, lo), hi) for number bounds (either may be absent, not
// both), as PyTorch's CPU kernel computes it: NaN stays NaN, a lo above hi
// gives hi. out is a (in place), a tensor apart from it (out=) or
// undefined (a new result, returned); undefined when the kernels do not
// take the case.
at::Tensor clamp_into(const at::Tensor &out, const at::Tensor &a,
                      const std::optional<at::Scalar> &lo, const std::optional<at::Scalar> &hi) {
    const float inf = std::numeric_limits<float>::infinity();
    if (!is_f32(a) || (!lo && !hi))
        return {};
    std::optional<float> l = clamp_bound(lo, -inf), h = clamp_bound(hi, inf);
    if (!l || !h)
        return {};
    MapTarget m{out, a};
    if (!out.defined())
        m = map_target(a);
    else if (!a.is_non_overlapping_and_dense() || !writes_like(out, a))
        return {};
    at::Tensor result = m.out, from = m.from;
    if (*l != -inf || *h == inf) { // one map at least
        map(RILL_MAP_MAX, result, from, *l);
        from = result;
    }
    if (*h != inf)
        map(RILL_MAP_MIN, result, from, *h);
    return result;
}

at::Tensor clamp(const at::Tensor &a, const std::optional<at::Scalar> &lo,
                 const std::optional<at::Scalar> &hi) {
    at::Tensor out = clamp_into(at::Tensor(), a, lo, hi);
    return out.defined() ? out
                         : call_fallback_fn<&boxed_fallback, at::_ops::clamp>::call(a, lo, hi);
}

at::Tensor &clamp_(at::Tensor &a, const std::optional<at::Scalar> &lo,
                   const std::optional<at::Scalar> &hi) {
    if (clamp_into(a, a, lo, hi).defined())
        return a;
    return call_fallback_fn<&boxed_fallback, at::_ops::clamp_>::call(a, lo, hi);
}

at::Tensor &clamp_out(const at::Tensor &a, const std::optional<at::Scalar> &lo,
                      const std::optional<at::Scalar> &hi, at::Tensor &out) {
    if (clamp_into(out, a, lo, hi).defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::clamp_out>::call(a, lo, hi, out);
}

at::Tensor gelu(const at::Tensor &a, c10::string_view approximate) {
    bool tanh = approximate == "tanh";
    if (!is_f32(a) || !(tanh || approximate == "none"))
        return call_fallback_fn<&boxed_fallback, at::_ops::gelu>::call(a, approximate);
    MapTarget m = map_target(a);
    map(tanh ? RILL_MAP_GELU_TANH : RILL_MAP_GELU, m.out, m.from, 1.0f);
    return m.out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("add.Tensor", add);
    m.impl("add_.Tensor", add_);
    m.impl("add.out", add_out);
    m.impl("sub.Tensor", sub);
    m.impl("sub_.Tensor", sub_);
    m.impl("sub.out", sub_out);
    m.impl("mul.Tensor", mul);
    m.impl("mul_.Tensor", mul_);
    m.impl("mul.out", mul_out);
    m.impl("div.Tensor", div);
    m.impl("div_.Tensor", div_);
    m.impl("div.out", div_out);
    m.impl("addcmul", addc_new<RILL_BINARY_MUL>);
    m.impl("addcmul_", addc_<RILL_BINARY_MUL>);
    m.impl("addcmul.out", addc_out<RILL_BINARY_MUL>);
    m.impl("addcdiv", addc_new<RILL_BINARY_DIV>);
    m.impl("addcdiv_", addc_<RILL_BINARY_DIV>);
    m.impl("addcdiv.out", addc_out<RILL_BINARY_DIV>);
    m.impl("lerp.Scalar", lerp);
    m.impl("lerp_.Scalar", lerp_);
    m.impl("lerp.Scalar_out", lerp_out);
    m.impl("maximum", maximum);
    m.impl("clamp", clamp);
    m.impl("clamp_", clamp_);
    m.impl("clamp.out", clamp_out);
    m.impl("clamp_min.Tensor", clamp_min);
    m.impl("clamp_min_.Tensor", clamp_min_);
    m.impl("clamp_min.Tensor_out", clamp_min_out);
    m.impl("minimum", minimum);
    m.impl("fill_.Scalar", fill_);
    m.impl("zero_", zero_);
    m.impl("arange.start_out", arange_out);
    m.impl("relu", unary<RILL_MAP_RELU, at::_ops::relu>);
    m.impl("relu_", unary_<RILL_MAP_RELU, at::_ops::relu_>);
    m.impl("gelu", gelu);
    m.impl("sigmoid", unary<RILL_MAP_SIGMOID, at::_ops::sigmoid>);
    m.impl("tanh", unary<RILL_MAP_TANH, at::_ops::tanh>);
    m.impl("silu", unary<RILL_MAP_SILU, at::_ops::silu>);
    m.impl("neg", unary<RILL_MAP_NEG, at::_ops::neg>);
    m.impl("exp", unary<RILL_MAP_EXP, at::_ops::exp>);
    m.impl("log", unary<RILL_MAP_LOG, at::_ops::log>);
    m.impl("sqrt", unary<RILL_MAP_SQRT, at::_ops::sqrt>);
    m.impl("abs", unary<RILL_MAP_ABS, at::_ops::abs>);
    m.impl("reciprocal", unary<RILL_MAP_RDIV, at::_ops::reciprocal>); // 1 / x
}

} // namespace torch_rill
