// SPDX-License-Identifier: MIT
// Reductions and softmax as rill kernels queued on the current stream: sum
// and mean over one dimension, several adjacent ones or all of them
// (keepdim either way), vector norms over the same, all, any and the sum
// (count) of bool tensors over the same, _softmax and _log_softmax along
// any dimension.
// rill's ops read a contiguous [outer, dim, inner]; a strided input is made
// contiguous first by rill's strided copy on the same stream. Other cases
// (other dtypes, dimensions that are not adjacent, empty tensors,
// half_to_float) go to the fallback.
#include <algorithm>
#include <cmath>

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sum_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "host_view.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// A contiguous tensor of sizes read as [outer, dim, inner] around dimension d.
struct Split {
    size_t outer = 1, dim = 1, inner = 1;
};

Split split(c10::IntArrayRef sizes, int64_t d) {
    Split s;
    for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); i++) {
        size_t size = static_cast<size_t>(sizes[i]);
        if (i < d)
            s.outer *= size;
        else if (i == d)
            s.dim = size;
        else
            s.inner *= size;
    }
    return s;
}

// d as a dimension of a tensor of ndim dimensions (negative counts from the
// end; a 0-dim tensor takes 0 and -1), or -1 when PyTorch refuses it.
int64_t wrap_dim(int64_t d, int64_t ndim) {
    int64_t n = std::max<int64_t>(ndim, 1);
    if (d < -n || d >= n)
        return -1;
    return d < 0 ? d + n : d;
}

// A reduction of a (numel > 0) over dims (none or empty: all of them) read
// as a contiguous [outer, dim, inner], and the result's shape; ok false
// when the kernels do not take the dims. Several dimensions are taken when
// they are adjacent (the last two of an image: adaptive_avg_pool2d to
// 1x1), read as one.
struct Plan {
    bool ok = false;
    Split split;
    std::vector<int64_t> shape;
};

Plan plan(const at::Tensor &a, at::OptionalIntArrayRef dims, bool keepdim) {
    Plan p;
    bool all = !dims.has_value() || dims->empty();
    int64_t first = 0, last = a.dim() - 1;
    if (!all) { // dims PyTorch refuses (out of range, repeated) go to the fallback, which says so
        std::vector<int64_t> ds;
        for (int64_t d : *dims) {
            ds.push_back(wrap_dim(d, a.dim()));
            if (ds.back() < 0)
                return p;
        }
        std::sort(ds.begin(), ds.end());
        if (std::adjacent_find(ds.begin(), ds.end()) != ds.end() ||
            ds.back() - ds.front() + 1 != static_cast<int64_t>(ds.size()))
            return p; // repeated (PyTorch's error) or not adjacent
        first = ds.front();
        last = ds.back();
        all = a.dim() == 0; // dim 0 or -1 of a 0-dim tensor
    }
    Split &s = p.split;
    if (all)
        s.dim = static_cast<size_t>(a.numel());
    else
        for (int64_t i = 0; i < a.dim(); i++)
            (i < first ? s.outer : i <= last ? s.dim : s.inner) *= static_cast<size_t>(a.size(i));
    for (int64_t i = 0; i < a.dim(); i++)
        if (!(all || (i >= first && i <= last)))
            p.shape.push_back(a.size(i));
        else if (keepdim)
            p.shape.push_back(1);
    p.ok = true;
    return p;
}

// sum or mean of a over dims (none or empty: all of them) into a new
// tensor; undefined when the kernel does not take the case.
at::Tensor reduce(rill_reduce_dim_op op, const at::Tensor &a, at::OptionalIntArrayRef dims,
                  bool keepdim, std::optional<c10::ScalarType> dtype) {
    if (!is_f32(a) || (dtype && *dtype != at::kFloat) || a.numel() == 0)
        return {};
    Plan p = plan(a, dims, keepdim);
    if (!p.ok)
        return {};
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(p.shape, a.options());
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_reduce_dim_f32(stream_of(out), op, out.data_ptr<float>(), nullptr,
                                            ac.const_data_ptr<float>(), p.split.outer, p.split.dim,
                                            p.split.inner));
    return out;
}

// any, all, or the count (a sum, int64) of a bool tensor a over dims, as
// reduce takes them, into a new tensor; undefined when the kernel does not
// take the case.
at::Tensor reduce_bool(rill_reduce_bool_op op, const at::Tensor &a, at::OptionalIntArrayRef dims,
                       bool keepdim) {
    if (!is_rill(a) || a.scalar_type() != at::kBool || a.numel() == 0)
        return {};
    Plan p = plan(a, dims, keepdim);
    if (!p.ok)
        return {};
    at::Tensor ac = a.contiguous();
    at::Tensor out =
        at::empty(p.shape, a.options().dtype(op == RILL_REDUCE_BOOL_COUNT ? at::kLong : at::kBool));
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_reduce_dim_bool(stream_of(out), op, out.data_ptr(),
                                             static_cast<const uint8_t *>(ac.const_data_ptr()),
                                             p.split.outer, p.split.dim, p.split.inner));
    return out;
}

// sum of a bool tensor: its count, int64 unless dtype asks for another.
at::Tensor count(const at::Tensor &a, at::OptionalIntArrayRef dims, bool keepdim,
                 std::optional<c10::ScalarType> dtype) {
    if (dtype && *dtype != at::kLong)
        return {};
    return reduce_bool(RILL_REDUCE_BOOL_COUNT, a, dims, keepdim);
}

// all or any over dims: dims given and empty reduces nothing, which the
// fallback does.
at::Tensor all_any(rill_reduce_bool_op op, const at::Tensor &a, at::OptionalIntArrayRef dims,
                   bool keepdim) {
    if (dims.has_value() && dims->empty())
        return {};
    return reduce_bool(op, a, dims, keepdim);
}

// all or any (op) of a: over everything, one dim, or dims; Op is the
// overload, which the fallback runs where the kernel does not.
template <rill_reduce_bool_op op, typename Op> at::Tensor all_any_whole(const at::Tensor &a) {
    at::Tensor out = all_any(op, a, std::nullopt, false);
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, Op>::call(a);
}

template <rill_reduce_bool_op op, typename Op>
at::Tensor all_any_dim(const at::Tensor &a, int64_t dim, bool keepdim) {
    at::Tensor out = all_any(op, a, at::IntArrayRef(dim), keepdim);
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, Op>::call(a, dim, keepdim);
}

template <rill_reduce_bool_op op, typename Op>
at::Tensor all_any_dims(const at::Tensor &a, at::OptionalIntArrayRef dims, bool keepdim) {
    at::Tensor out = all_any(op, a, dims, keepdim);
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, Op>::call(a, dims, keepdim);
}

at::Tensor sum_dim(const at::Tensor &a, at::OptionalIntArrayRef dims, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
    at::Tensor out = a.scalar_type() == at::kBool
                         ? count(a, dims, keepdim, dtype)
                         : reduce(RILL_REDUCE_DIM_SUM, a, dims, keepdim, dtype);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::sum_dim_IntList>::call(a, dims, keepdim,
                                                                              dtype);
}

at::Tensor sum(const at::Tensor &a, std::optional<c10::ScalarType> dtype) {
    at::Tensor out = a.scalar_type() == at::kBool
                         ? count(a, std::nullopt, false, dtype)
                         : reduce(RILL_REDUCE_DIM_SUM, a, std::nullopt, false, dtype);
    return out.defined() ? out : call_fallback_fn<&boxed_fallback, at::_ops::sum>::call(a, dtype);
}

at::Tensor mean_dim(const at::Tensor &a, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
    at::Tensor out = reduce(RILL_REDUCE_DIM_MEAN, a, dims, keepdim, dtype);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::mean_dim>::call(a, dims, keepdim, dtype);
}

// linalg_vector_norm of order 2, 1, inf or -inf (gradient clipping's
// _foreach_norm) over dims as sum and mean take them: the sum of squares,
// or of magnitudes, or their largest or smallest, of float32 values (a
// square past float's range is inf, as on PyTorch's CPU device), then a
// square root; undefined when the kernels do not take the case.
at::Tensor norm_new(const at::Tensor &a, const at::Scalar &ord, at::OptionalIntArrayRef dims,
                    bool keepdim, std::optional<c10::ScalarType> dtype) {
    if (!is_f32(a) || (dtype && *dtype != at::kFloat) || a.numel() == 0 || ord.isComplex() ||
        ord.isBoolean())
        return {};
    double p = ord.toDouble();
    if (p == 2.0) {
        at::Tensor sum = reduce(RILL_REDUCE_DIM_SUM, at::mul(a, a), dims, keepdim, std::nullopt);
        return sum.defined() ? at::sqrt(sum) : sum;
    }
    if (p == 1.0)
        return reduce(RILL_REDUCE_DIM_SUM, at::abs(a), dims, keepdim, std::nullopt);
    if (std::isinf(p))
        return reduce(p > 0 ? RILL_REDUCE_DIM_MAX : RILL_REDUCE_DIM_MIN, at::abs(a), dims, keepdim,
                      std::nullopt);
    return {};
}

at::Tensor vector_norm(const at::Tensor &a, const at::Scalar &ord, at::OptionalIntArrayRef dims,
                       bool keepdim, std::optional<c10::ScalarType> dtype) {
    at::Tensor out = norm_new(a, ord, dims, keepdim, dtype);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::linalg_vector_norm>::call(a, ord, dims,
                                                                                 keepdim, dtype);
}

// softmax or log_softmax of a along dim into a new tensor; undefined when
// the kernel does not take the case.
at::Tensor softmax_new(bool log, const at::Tensor &a, int64_t dim, bool half_to_float) {
    int64_t d = wrap_dim(dim, a.dim());
    if (!is_f32(a) || half_to_float || a.numel() == 0 || d < 0)
        return {};
    Split s = split(a.sizes(), a.dim() == 0 ? 0 : d);
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(a.sizes(), a.options());
    const c10::DeviceGuard guard(a.device());
    rill_stream *stream = stream_of(out);
    const float *in = ac.const_data_ptr<float>();
    if (log)
        TORCH_RILL_CHECK(
            rill_op_log_softmax_f32(stream, out.data_ptr<float>(), in, s.outer, s.dim, s.inner));
    else
        TORCH_RILL_CHECK(
            rill_op_softmax_f32(stream, out.data_ptr<float>(), in, s.outer, s.dim, s.inner));
    return out;
}

at::Tensor softmax(const at::Tensor &a, int64_t dim, bool half_to_float) {
    at::Tensor out = softmax_new(false, a, dim, half_to_float);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::_softmax>::call(a, dim, half_to_float);
}

at::Tensor log_softmax(const at::Tensor &a, int64_t dim, bool half_to_float) {
    at::Tensor out = softmax_new(true, a, dim, half_to_float);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::_log_softmax>::call(a, dim, half_to_float);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("sum.dim_IntList", sum_dim);
    m.impl("sum", sum);
    m.impl("all", all_any_whole<RILL_REDUCE_BOOL_ALL, at::_ops::all>);
    m.impl("all.dim", all_any_dim<RILL_REDUCE_BOOL_ALL, at::_ops::all_dim>);
    m.impl("all.dims", all_any_dims<RILL_REDUCE_BOOL_ALL, at::_ops::all_dims>);
    m.impl("any", all_any_whole<RILL_REDUCE_BOOL_ANY, at::_ops::any>);
    m.impl("any.dim", all_any_dim<RILL_REDUCE_BOOL_ANY, at::_ops::any_dim>);
    m.impl("any.dims", all_any_dims<RILL_REDUCE_BOOL_ANY, at::_ops::any_dims>);
    m.impl("mean.dim", mean_dim);
    m.impl("linalg_vector_norm", vector_norm);
    m.impl("_softmax", softmax);
    m.impl("_log_softmax", log_softmax);
}

} // namespace torch_rill
