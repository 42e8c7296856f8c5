// SPDX-License-Identifier: MIT
// Comparisons, where, masked_fill_, tril/triu and argmax/argmin as rill
// kernels queued on the current stream: eq, ne, lt, le, gt and ge between
// rill tensors of one dtype (bool, uint8, int32, int64, float32, float64)
// or against a number in that dtype (rill_op_compare), with isneginf,
// isposinf, logical_not and a bool tensor's bitwise_not made of them;
// where between tensors of one dtype of 1 to 8 bytes under a bool
// condition (rill_op_where); masked_fill_ of such a tensor with a number
// or a 0-dim tensor under a bool mask (rill_op_masked_fill); tril and triu
// of a contiguous tensor of such a dtype (rill_op_triangle); argmax and
// argmin of a contiguous float32 tensor (rill_op_reduce_dim_f32's
// positions). The element-wise ones broadcast, and results are laid out
// as PyTorch's CPU kernels lay them out. Other cases (mixed dtypes, which
// promote; numbers that promote the dtype) go to the fallback.
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/argmin_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/isneginf_ops.h>
#include <ATen/ops/isposinf_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/tril_ops.h>
#include <ATen/ops/triu_ops.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include "fallback.h"
#include "host_view.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// An element-wise op writing the dense tensor out, as the kernels see it:
// out's dimensions in the order in which out is contiguous (at least one),
// and each input's strides along them, in elements, broadcast (0 where the
// input has size 1 or lacks the dimension).
struct Walk {
    c10::SmallVector<size_t, 6> shape;
    c10::SmallVector<size_t, 6> strides[3];
};

Walk walk_of(const at::Tensor &out, std::initializer_list<const at::Tensor *> inputs) {
    int64_t nd = out.dim();
    c10::SmallVector<int64_t, 6> order(static_cast<size_t>(nd));
    std::iota(order.begin(), order.end(), 0);
    if (!out.is_contiguous())
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t x, int64_t y) { return out.stride(x) > out.stride(y); });
    Walk w;
    for (int64_t d : order)
        w.shape.push_back(static_cast<size_t>(out.size(d)));
    size_t k = 0;
    for (const at::Tensor *t : inputs) {
        int64_t offset = nd - t->dim();
        for (int64_t d : order) {
            int64_t td = d - offset;
            bool real = td >= 0 && t->size(td) != 1;
            w.strides[k].push_back(real ? static_cast<size_t>(t->stride(td)) : 0);
        }
        if (nd == 0)
            w.strides[k].push_back(0);
        k++;
    }
    if (nd == 0)
        w.shape.push_back(1);
    return w;
}

// A rill tensor the kernels read: strided, no negative strides, at most
// RILL_OP_MAX_DIMS dimensions (so a result broadcast from such tensors has
// no more).
bool readable(const at::Tensor &t) {
    return is_rill(t) && t.layout() == at::kStrided && t.dim() <= RILL_OP_MAX_DIMS &&
           !has_negative_stride(t);
}

// A number PyTorch wrapped (or a 0-dim CPU tensor) beside a rill tensor.
bool is_cpu_number(const at::Tensor &t) {
    return t.defined() && t.is_cpu() && t.dim() == 0;
}

// ---- comparisons ----

// The bits of value in type, converted as PyTorch's comparison kernels
// convert a number to the common dtype (a plain cast: 1e300 is inf in
// float32, -1 is 255 in uint8).
uint64_t compare_bits(rill_element_type type, const at::Scalar &value) {
    uint64_t bits = 0;
    auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof v); };
    // An integer as its bits modulo 2^64 (2**63 and above are uint64 Scalars).
    uint64_t integer = value.isFloatingPoint()       ? 0
                       : value.type() == at::kUInt64 ? value.to<uint64_t>()
                                                     : static_cast<uint64_t>(value.toLong());
    switch (type) {
    case RILL_ELEMENT_U8:
        put(static_cast<uint8_t>(integer));
        break;
    case RILL_ELEMENT_BOOL:
        put(static_cast<uint8_t>(value.isFloatingPoint() ? value.toDouble() != 0.0 : integer != 0));
        break;
    case RILL_ELEMENT_I32:
        put(static_cast<int32_t>(integer));
        break;
    case RILL_ELEMENT_I64:
        put(static_cast<int64_t>(integer));
        break;
    case RILL_ELEMENT_F32:
        put(static_cast<float>(value.toDouble()));
        break;
    case RILL_ELEMENT_F64:
        put(value.toDouble());
        break;
    }
    return bits;
}

// A new bool result of an element-wise op on a and b: contiguous when both
// are, else laid out by TensorIterator as PyTorch's CPU comparison does.
at::Tensor bool_output(const at::Tensor &a, const at::Tensor &b) {
    if (a.is_contiguous() && b.is_contiguous())
        return at::empty(at::infer_size(a.sizes(), b.sizes()), a.options().dtype(at::kBool));
    at::TensorIterator iter;
    iter.build_comparison_op(at::Tensor(), a, b);
    return iter.output();
}

// a (op) value into a new bool tensor of a's layout: undefined when the
// kernel does not take a.
at::Tensor compare_number(rill_compare_op op, const at::Tensor &a, const at::Scalar &value) {
    std::optional<rill_element_type> type = element_type(a.scalar_type());
    if (!type || !readable(a) || at::result_type(a, value) != a.scalar_type())
        return {};
    at::Tensor out = bool_output(a, a);
    if (out.numel() == 0)
        return out;
    uint64_t bits = compare_bits(*type, value);
    Walk w = walk_of(out, {&a});
    TORCH_RILL_CHECK(rill_op_compare_scalar(
        stream_of(a), op, *type, static_cast<uint8_t *>(out.data_ptr()), a.const_data_ptr(),
        w.strides[0].data(), &bits, w.shape.data(), w.shape.size()));
    return out;
}

// a (op) b into a new bool tensor: undefined when the kernel does not take
// them (dtypes that promote, two devices).
at::Tensor compare_tensors(rill_compare_op op, const at::Tensor &a, const at::Tensor &b) {
    if (is_cpu_number(b) && is_rill(a))
        return compare_number(op, a, b.item());
    std::optional<rill_element_type> type = element_type(a.scalar_type());
    if (!type || !readable(a) || !readable(b) || a.device() != b.device() ||
        a.scalar_type() != b.scalar_type())
        return {};
    at::Tensor out = bool_output(a, b);
    if (out.numel() == 0)
        return out;
    Walk w = walk_of(out, {&a, &b});
    TORCH_RILL_CHECK(rill_op_compare(stream_of(a), op, *type,
                                     static_cast<uint8_t *>(out.data_ptr()), a.const_data_ptr(),
                                     w.strides[0].data(), b.const_data_ptr(), w.strides[1].data(),
                                     w.shape.data(), w.shape.size()));
    return out;
}

template <rill_compare_op Op, typename TensorOp, typename ScalarOp> struct Compare {
    static at::Tensor tensor(const at::Tensor &a, const at::Tensor &b) {
        at::Tensor out = compare_tensors(Op, a, b);
        return out.defined() ? out : call_fallback_fn<&boxed_fallback, TensorOp>::call(a, b);
    }
    static at::Tensor scalar(const at::Tensor &a, const at::Scalar &b) {
        at::Tensor out = compare_number(Op, a, b);
        return out.defined() ? out : call_fallback_fn<&boxed_fallback, ScalarOp>::call(a, b);
    }
};

using Eq = Compare<RILL_COMPARE_EQ, at::_ops::eq_Tensor, at::_ops::eq_Scalar>;
using Ne = Compare<RILL_COMPARE_NE, at::_ops::ne_Tensor, at::_ops::ne_Scalar>;
using Lt = Compare<RILL_COMPARE_LT, at::_ops::lt_Tensor, at::_ops::lt_Scalar>;
using Le = Compare<RILL_COMPARE_LE, at::_ops::le_Tensor, at::_ops::le_Scalar>;
using Gt = Compare<RILL_COMPARE_GT, at::_ops::gt_Tensor, at::_ops::gt_Scalar>;
using Ge = Compare<RILL_COMPARE_GE, at::_ops::ge_Tensor, at::_ops::ge_Scalar>;

// x == -inf, x == inf for floating x (integers are never infinite: the
// fallback's all-false result).
at::Tensor isneginf(const at::Tensor &a) {
    at::Tensor out;
    if (at::isFloatingType(a.scalar_type()))
        out = compare_number(RILL_COMPARE_EQ, a, -std::numeric_limits<double>::infinity());
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, at::_ops::isneginf>::call(a);
}

at::Tensor isposinf(const at::Tensor &a) {
    at::Tensor out;
    if (at::isFloatingType(a.scalar_type()))
        out = compare_number(RILL_COMPARE_EQ, a, std::numeric_limits<double>::infinity());
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, at::_ops::isposinf>::call(a);
}

// not a: a == 0 in a's dtype (NaN is true, so its not is false).
at::Tensor logical_not(const at::Tensor &a) {
    at::Scalar zero = a.scalar_type() == at::kBool ? at::Scalar(false) : at::Scalar(0);
    at::Tensor out = compare_number(RILL_COMPARE_EQ, a, zero);
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, at::_ops::logical_not>::call(a);
}

// ~a for a bool tensor, whose elements are 0 or 1: a == 0. A floating
// tensor raises here, as on the CPU (the fallback's meta kernel lets it
// through, and its host function would fail the stream).
at::Tensor bitwise_not(const at::Tensor &a) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        !at::isFloatingType(a.scalar_type()) && !at::isComplexType(a.scalar_type()),
        "\"bitwise_not_cpu\" not implemented for '", c10::toString(a.scalar_type()), "'");
    at::Tensor out;
    if (a.scalar_type() == at::kBool)
        out = compare_number(RILL_COMPARE_EQ, a, false);
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, at::_ops::bitwise_not>::call(a);
}

// ---- where and masked_fill_ ----

bool selectable(const at::Tensor &t) {
    size_t size = t.defined() ? t.element_size() : 0;
    return readable(t) && (size == 1 || size == 2 || size == 4 || size == 8);
}

// cond, a and b as the where kernel takes them: a bool condition, a and b
// of one dtype of 1 to 8 bytes, all on one device.
bool where_takes(const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b) {
    return readable(cond) && cond.scalar_type() == at::kBool && selectable(a) && selectable(b) &&
           a.scalar_type() == b.scalar_type() && a.device() == cond.device() &&
           b.device() == cond.device();
}

// out = where(cond, a, b) for a dense out of the broadcast shape.
void launch_where(const at::Tensor &out, const at::Tensor &cond, const at::Tensor &a,
                  const at::Tensor &b) {
    if (out.numel() == 0)
        return;
    Walk w = walk_of(out, {&cond, &a, &b});
    TORCH_RILL_CHECK(rill_op_where(stream_of(out), out.element_size(), out.data_ptr(),
                                   static_cast<const uint8_t *>(cond.const_data_ptr()),
                                   w.strides[0].data(), a.const_data_ptr(), w.strides[1].data(),
                                   b.const_data_ptr(), w.strides[2].data(), w.shape.data(),
                                   w.shape.size()));
}

at::Tensor where(const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b) {
    if (!where_takes(cond, a, b))
        return call_fallback_fn<&boxed_fallback, at::_ops::where_self>::call(cond, a, b);
    at::Tensor out;
    if (cond.is_contiguous() && a.is_contiguous() && b.is_contiguous()) {
        out = at::empty(at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes()),
                        a.options());
    } else {
        out = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_owned_output(at::empty({0}, a.options()))
                  .add_const_input(cond)
                  .add_const_input(a)
                  .add_const_input(b)
                  .build()
                  .output();
    }
    launch_where(out, cond, a, b);
    return out;
}

// where into out (at::where inside composite ops, such as _safe_softmax,
// reaches this): out of a's dtype, resized as PyTorch resizes an out=
// result, dense, and either an input itself or apart from all three.
at::Tensor &where_out(const at::Tensor &cond, const at::Tensor &a, const at::Tensor &b,
                      at::Tensor &out) {
    bool takes = where_takes(cond, a, b) && is_rill(out) && out.device() == a.device() &&
                 out.scalar_type() == a.scalar_type();
    if (takes) {
        std::vector<int64_t> shape =
            at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
        takes = out.sizes().equals(shape) || out.numel() == 0;
        if (takes && !out.sizes().equals(shape))
            out.resize_(shape);
        takes = takes && out.is_non_overlapping_and_dense() &&
                !cond.storage().is_alias_of(out.storage());
        for (const at::Tensor *t : {&a, &b})
            takes = takes && (!t->storage().is_alias_of(out.storage()) || is_same_view(*t, out));
    }
    if (!takes)
        return call_fallback_fn<&boxed_fallback, at::_ops::where_self_out>::call(cond, a, b, out);
    launch_where(out, cond, a, b);
    return out;
}

// self and mask as masked_fill_ takes them: self dense, mask bool on self's
// device, broadcasting to self's shape and sharing no memory with it.
bool fillable(const at::Tensor &self, const at::Tensor &mask) {
    return selectable(self) && self.is_non_overlapping_and_dense() && readable(mask) &&
           mask.scalar_type() == at::kBool && mask.device() == self.device() &&
           mask.dim() <= self.dim() &&
           c10::IntArrayRef(at::infer_size(self.sizes(), mask.sizes())).equals(self.sizes()) &&
           !mask.storage().is_alias_of(self.storage());
}

// PyTorch's own check of masked_fill_'s mask that its meta kernel leaves
// to the CPU kernel: made here, at the call, rather than in a host
// function that would fail the stream.
void check_mask(const at::Tensor &mask) {
    TORCH_CHECK(mask.scalar_type() == at::kBool,
                "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.dtype());
}

at::Tensor &masked_fill_(at::Tensor &self, const at::Tensor &mask, const at::Scalar &value) {
    check_mask(mask);
    // The value converted first: out of the dtype's range, it raises here,
    // as on the CPU, in the fallback's cases too.
    std::optional<uint64_t> bits = is_rill(self) ? fill_bits(self, value) : std::nullopt;
    if (!bits || !fillable(self, mask))
        return call_fallback_fn<&boxed_fallback, at::_ops::masked_fill__Scalar>::call(self, mask,
                                                                                      value);
    if (self.numel() == 0)
        return self;
    Walk w = walk_of(self, {&mask});
    TORCH_RILL_CHECK(rill_op_masked_fill(stream_of(self), self.element_size(), self.data_ptr(),
                                         static_cast<const uint8_t *>(mask.const_data_ptr()),
                                         w.strides[0].data(), *bits, w.shape.data(),
                                         w.shape.size()));
    return self;
}

// A 0-dim value: a CPU one is a number; one on self's device is read there,
// self = where(mask, value, self).
at::Tensor &masked_fill_tensor_(at::Tensor &self, const at::Tensor &mask, const at::Tensor &value) {
    check_mask(mask);
    if (is_cpu_number(value) && is_rill(self))
        return masked_fill_(self, mask, value.item());
    if (!fillable(self, mask) || value.dim() != 0 || !readable(value) ||
        value.device() != self.device() || value.scalar_type() != self.scalar_type())
        return call_fallback_fn<&boxed_fallback, at::_ops::masked_fill__Tensor>::call(self, mask,
                                                                                      value);
    if (self.numel() == 0)
        return self;
    // A value inside self is read before self is written, as on the CPU.
    at::Tensor number = value.storage().is_alias_of(self.storage()) ? value.clone() : value;
    Walk w = walk_of(self, {&mask, &number, &self});
    TORCH_RILL_CHECK(rill_op_where(stream_of(self), self.element_size(), self.data_ptr(),
                                   static_cast<const uint8_t *>(mask.const_data_ptr()),
                                   w.strides[0].data(), number.const_data_ptr(),
                                   w.strides[1].data(), self.const_data_ptr(), w.strides[2].data(),
                                   w.shape.data(), w.shape.size()));
    return self;
}

// ---- tril, triu ----

// out = the triangle of a contiguous a (out a itself, or new and
// contiguous, as the CPU makes it); false when the kernel does not take a.
bool triangle(const at::Tensor &out, const at::Tensor &a, int64_t diagonal, bool upper) {
    if (!selectable(a) || a.dim() < 2 || !a.is_contiguous())
        return false;
    if (a.numel() == 0)
        return true;
    int64_t rows = a.size(-2), cols = a.size(-1);
    TORCH_RILL_CHECK(
        rill_op_triangle(stream_of(a), a.element_size(), out.data_ptr(), a.const_data_ptr(),
                         static_cast<size_t>(a.numel() / (rows * cols)), static_cast<size_t>(rows),
                         static_cast<size_t>(cols), diagonal, upper ? 1 : 0));
    return true;
}

template <bool Upper, typename FallbackOp>
at::Tensor triangle_new(const at::Tensor &a, int64_t diagonal) {
    if (selectable(a) && a.dim() >= 2 && a.is_contiguous()) {
        at::Tensor out = at::empty(a.sizes(), a.options());
        triangle(out, a, diagonal, Upper);
        return out;
    }
    return call_fallback_fn<&boxed_fallback, FallbackOp>::call(a, diagonal);
}

template <bool Upper, typename FallbackOp> at::Tensor &triangle_(at::Tensor &a, int64_t diagonal) {
    if (triangle(a, a, diagonal, Upper))
        return a;
    return call_fallback_fn<&boxed_fallback, FallbackOp>::call(a, diagonal);
}

// ---- argmax, argmin ----

// The position of the largest (smallest) element along dim, or of the
// flattened tensor: the first one, the first NaN's where there is one, as
// PyTorch's CPU kernel gives.
template <rill_reduce_dim_op Op, typename FallbackOp>
at::Tensor arg_extreme(const at::Tensor &a, std::optional<int64_t> dim, bool keepdim) {
    if (!is_f32(a) || !a.is_contiguous() || a.numel() == 0)
        return call_fallback_fn<&boxed_fallback, FallbackOp>::call(a, dim, keepdim);
    int64_t outer = 1, length = a.numel(), inner = 1;
    c10::SmallVector<int64_t, 6> shape;
    if (dim) {
        int64_t d = at::maybe_wrap_dim(*dim, a.dim());
        for (int64_t i = 0; i < a.dim(); i++) {
            if (i < d)
                outer *= a.size(i);
            else if (i > d)
                inner *= a.size(i);
        }
        length = a.dim() == 0 ? 1 : a.size(d);
        for (int64_t i = 0; i < a.dim(); i++)
            if (i != d || keepdim)
                shape.push_back(i == d ? 1 : a.size(i));
    } else if (keepdim) {
        shape.assign(static_cast<size_t>(a.dim()), 1);
    }
    at::Tensor out = at::empty(shape, a.options().dtype(at::kLong));
    at::Tensor values = at::empty({outer * inner}, a.options());
    TORCH_RILL_CHECK(rill_op_reduce_dim_f32(stream_of(a), Op, values.data_ptr<float>(),
                                            out.data_ptr<int64_t>(), a.const_data_ptr<float>(),
                                            static_cast<size_t>(outer), static_cast<size_t>(length),
                                            static_cast<size_t>(inner)));
    return out;
}

at::Tensor argmax(const at::Tensor &a, std::optional<int64_t> dim, bool keepdim) {
    return arg_extreme<RILL_REDUCE_DIM_MAX, at::_ops::argmax>(a, dim, keepdim);
}

at::Tensor argmin(const at::Tensor &a, std::optional<int64_t> dim, bool keepdim) {
    return arg_extreme<RILL_REDUCE_DIM_MIN, at::_ops::argmin>(a, dim, keepdim);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("eq.Tensor", Eq::tensor);
    m.impl("eq.Scalar", Eq::scalar);
    m.impl("ne.Tensor", Ne::tensor);
    m.impl("ne.Scalar", Ne::scalar);
    m.impl("lt.Tensor", Lt::tensor);
    m.impl("lt.Scalar", Lt::scalar);
    m.impl("le.Tensor", Le::tensor);
    m.impl("le.Scalar", Le::scalar);
    m.impl("gt.Tensor", Gt::tensor);
    m.impl("gt.Scalar", Gt::scalar);
    m.impl("ge.Tensor", Ge::tensor);
    m.impl("ge.Scalar", Ge::scalar);
    m.impl("isneginf", isneginf);
    m.impl("isposinf", isposinf);
    m.impl("logical_not", logical_not);
    m.impl("bitwise_not", bitwise_not);
    m.impl("where.self", where);
    m.impl("where.self_out", where_out);
    m.impl("masked_fill_.Scalar", masked_fill_);
    m.impl("masked_fill_.Tensor", masked_fill_tensor_);
    m.impl("tril", triangle_new<false, at::_ops::tril>);
    m.impl("tril_", triangle_<false, at::_ops::tril_>);
    m.impl("triu", triangle_new<true, at::_ops::triu>);
    m.impl("triu_", triangle_<true, at::_ops::triu_>);
    m.impl("argmax", argmax);
    m.impl("argmin", argmin);
}

} // namespace torch_rill
