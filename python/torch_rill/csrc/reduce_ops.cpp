// SPDX-License-Identifier: MIT
// Reductions and softmax as rill kernels queued on the current stream: sum
// and mean over one dimension, several adjacent ones or all of them
// (keepdim either way), vector norms over the same, _softmax and
// _log_softmax along any dimension.
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
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sum_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
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

// sum or mean of a over dims (none or empty: all of them) into a new
// tensor; undefined when the kernel does not take the case. Several
// dimensions are taken when they are adjacent (the last two of an image:
// adaptive_avg_pool2d to 1x1), read as one.
at::Tensor reduce(rill_reduce_dim_op op, const at::Tensor &a, at::OptionalIntArrayRef dims,
                  bool keepdim, std::optional<c10::ScalarType> dtype) {
    if (!is_f32(a) || (dtype && *dtype != at::kFloat) || a.numel() == 0)
        return {};
    bool all = !dims.has_value() || dims->empty() || a.dim() == 0;
    int64_t first = 0, last = a.dim() - 1;
    if (!all) {
        std::vector<int64_t> ds;
        for (int64_t d : *dims) {
            ds.push_back(wrap_dim(d, a.dim()));
            if (ds.back() < 0)
                return {};
        }
        std::sort(ds.begin(), ds.end());
        if (std::adjacent_find(ds.begin(), ds.end()) != ds.end() ||
            ds.back() - ds.front() + 1 != static_cast<int64_t>(ds.size()))
            return {}; // repeated (PyTorch's error) or not adjacent
        first = ds.front();
        last = ds.back();
    }
    Split s;
    if (all)
        s.dim = static_cast<size_t>(a.numel());
    else
        for (int64_t i = 0; i < a.dim(); i++)
            (i < first ? s.outer : i <= last ? s.dim : s.inner) *= static_cast<size_t>(a.size(i));
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < a.dim(); i++)
        if (!(all || (i >= first && i <= last)))
            shape.push_back(a.size(i));
        else if (keepdim)
            shape.push_back(1);
    at::Tensor ac = a.contiguous();
    at::Tensor out = at::empty(shape, a.options());
    const c10::DeviceGuard guard(a.device());
    TORCH_RILL_CHECK(rill_op_reduce_dim_f32(stream_of(out), op, out.data_ptr<float>(), nullptr,
                                            ac.const_data_ptr<float>(), s.outer, s.dim, s.inner));
    return out;
}

at::Tensor sum_dim(const at::Tensor &a, at::OptionalIntArrayRef dims, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
    at::Tensor out = reduce(RILL_REDUCE_DIM_SUM, a, dims, keepdim, dtype);
    if (out.defined())
        return out;
    return call_fallback_fn<&boxed_fallback, at::_ops::sum_dim_IntList>::call(a, dims, keepdim,
                                                                              dtype);
}

at::Tensor sum(const at::Tensor &a, std::optional<c10::ScalarType> dtype) {
    at::Tensor out = reduce(RILL_REDUCE_DIM_SUM, a, std::nullopt, false, dtype);
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
    m.impl("mean.dim", mean_dim);
    m.impl("linalg_vector_norm", vector_norm);
    m.impl("_softmax", softmax);
    m.impl("_log_softmax", log_softmax);
}

} // namespace torch_rill
