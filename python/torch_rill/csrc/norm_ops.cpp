// SPDX-License-Identifier: MIT
// Layer norm's and batch norm's forward as rill kernels queued on the
// current stream, composed of rill's reductions and element-wise ops.
// Layer norm, over the input read as [m, n] (n the normalized elements):
// mean = the row means, var = the means of (x - mean)^2, rstd = 1 /
// sqrt(var + eps), out = (x - mean) * rstd, times weight and plus bias
// where given. Batch norm, over the input read as [n, c, hw]: the
// channels' mean and biased var over n and hw in training (the running
// statistics, when given, updated in place with momentum and the unbiased
// var), the running statistics in evaluation; out = x * a + b with a =
// weight / sqrt(var + eps) and b = bias - mean * a per channel, as
// PyTorch's CPU kernel computes it. The statistics they return have the
// shapes PyTorch's CPU kernels give them, for the backward (the
// fallback's) to read. Other cases (other dtypes, empty tensors, one value
// per channel in training, shapes PyTorch refuses) go to the fallback.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_native_batch_norm_legit_no_training_ops.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

using at::native::call_fallback_fn;

// An optional weight or bias the kernels take: absent, or float32 on dev
// with the normalized shape.
bool affine_ok(const std::optional<at::Tensor> &t, c10::Device dev, c10::IntArrayRef shape) {
    return !t.has_value() || !t->defined() ||
           (is_f32(*t) && t->device() == dev && t->sizes().equals(shape));
}

const float *data_or_null(const std::optional<at::Tensor> &t, at::Tensor &keep) {
    if (!t.has_value() || !t->defined())
        return nullptr;
    keep = t->contiguous();
    return keep.const_data_ptr<float>();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor &input,
                                                          c10::SymIntArrayRef sym_shape,
                                                          const std::optional<at::Tensor> &weight,
                                                          const std::optional<at::Tensor> &bias,
                                                          double eps) {
    c10::IntArrayRef shape = C10_AS_INTARRAYREF_SLOW(sym_shape);
    int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
    bool takes = is_f32(input) && !shape.empty() && axis >= 0 && input.numel() > 0 &&
                 input.sizes().slice(axis).equals(shape) &&
                 affine_ok(weight, input.device(), shape) && affine_ok(bias, input.device(), shape);
    if (!takes)
        return at::native::call_fallback_fn_symint<&boxed_fallback,
                                                   at::_ops::native_layer_norm>::call(input,
                                                                                      sym_shape,
                                                                                      weight, bias,
                                                                                      eps);
    size_t n = static_cast<size_t>(c10::multiply_integers(shape));
    size_t m = static_cast<size_t>(input.numel()) / n;
    std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
    stat_shape.resize(input.dim(), 1);
    const c10::DeviceGuard guard(input.device());
    at::Tensor x = input.contiguous();
    at::Tensor out = at::empty(input.sizes(), input.options());
    at::Tensor mean = at::empty(stat_shape, input.options());
    at::Tensor rstd = at::empty(stat_shape, input.options());
    at::Tensor sq = at::empty(input.sizes(), input.options());
    at::Tensor w_keep, b_keep;
    const float *w = data_or_null(weight, w_keep), *b = data_or_null(bias, b_keep);
    rill_stream *s = stream_of(out);
    float *o = out.data_ptr<float>(), *mu = mean.data_ptr<float>(), *r = rstd.data_ptr<float>();
    float *q = sq.data_ptr<float>();
    size_t dims[2] = {m, n}, all[2] = {n, 1}, row[2] = {1, 0}, col[2] = {0, 1};
    TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_MEAN, mu, nullptr,
                                            x.const_data_ptr<float>(), m, n, 1));
    TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_SUB, o, x.const_data_ptr<float>(), all, mu,
                                        row, dims, 2)); // x - mean
    TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, q, o, all, o, all, dims, 2));
    TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_MEAN, r, nullptr, q, m, n, 1));
    TORCH_RILL_CHECK(rill_op_add_scalar_f32(s, r, r, static_cast<float>(eps), m));
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SQRT, r, r, 1.0f, m));
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_RDIV, r, r, 1.0f, m)); // 1 / sqrt(var + eps)
    TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, o, o, all, r, row, dims, 2));
    if (w)
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, o, o, all, w, col, dims, 2));
    if (b)
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_ADD, o, o, all, b, col, dims, 2));
    return {out, mean, rstd};
}

using Norm = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// A per-channel tensor the kernels take: float32 on dev, contiguous, of c
// elements.
bool channels_ok(const std::optional<at::Tensor> &t, c10::Device dev, int64_t c) {
    return t.has_value() && t->defined() && is_f32(*t) && t->device() == dev &&
           t->is_contiguous() && t->dim() == 1 && t->size(0) == c;
}

bool absent(const std::optional<at::Tensor> &t) {
    return !t.has_value() || !t->defined();
}

// out[i] = a[i] (op) b[i] for i < n, all contiguous.
void vec(rill_stream *s, rill_binary_op op, float *out, const float *a, const float *b, size_t n) {
    size_t stride = 1;
    TORCH_RILL_CHECK(rill_op_binary_f32(s, op, out, a, &stride, b, &stride, &n, 1));
}

// Batch norm as rill kernels, or false when they do not take the case.
// training: the statistics of the batch (running_mean and running_var
// updated when given); else those of running_mean and running_var.
bool batch_norm_native(const at::Tensor &input, const std::optional<at::Tensor> &weight,
                       const std::optional<at::Tensor> &bias,
                       const std::optional<at::Tensor> &running_mean,
                       const std::optional<at::Tensor> &running_var, bool training, double momentum,
                       double eps, Norm *result) {
    if (!is_f32(input) || input.dim() < 2 || input.numel() == 0)
        return false;
    c10::Device dev = input.device();
    int64_t c = input.size(1);
    bool stats = !absent(running_mean) || !absent(running_var);
    if ((!absent(weight) && !channels_ok(weight, dev, c)) ||
        (!absent(bias) && !channels_ok(bias, dev, c)) ||
        (stats && (!channels_ok(running_mean, dev, c) || !channels_ok(running_var, dev, c))) ||
        (!training && !stats))
        return false;
    size_t n = static_cast<size_t>(input.size(0)), cs = static_cast<size_t>(c);
    size_t hw = static_cast<size_t>(input.numel()) / (n * cs), count = n * hw;
    if (training && count < 2)
        return false; // PyTorch's CPU kernel decides
    const c10::DeviceGuard guard(dev);
    at::Tensor x = input.contiguous();
    at::Tensor out = at::empty(input.sizes(), input.options());
    rill_stream *s = stream_of(out);
    at::TensorOptions f32 = input.options();
    at::Tensor mean, invstd, var;
    size_t dims[3] = {n, cs, hw}, all[3] = {cs * hw, hw, 1}, chan[3] = {0, 1, 0};
    const float *xp = x.const_data_ptr<float>();
    float *o = out.data_ptr<float>();
    if (training) {
        // The channels' sums over hw, then over n, divided by n * hw.
        at::Tensor part = at::empty({static_cast<int64_t>(n * cs)}, f32);
        mean = at::empty({c}, f32);
        var = at::empty({c}, f32);
        float *pp = part.data_ptr<float>();
        TORCH_RILL_CHECK(
            rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, pp, nullptr, xp, n * cs, hw, 1));
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, mean.data_ptr<float>(),
                                                nullptr, pp, 1, n, cs));
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_DIV, mean.data_ptr<float>(),
                                         mean.const_data_ptr<float>(), static_cast<float>(count),
                                         cs));
        // (x - mean)^2 in out, summed likewise.
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_SUB, o, xp, all,
                                            mean.const_data_ptr<float>(), chan, dims, 3));
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, o, o, all, o, all, dims, 3));
        TORCH_RILL_CHECK(
            rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, pp, nullptr, o, n * cs, hw, 1));
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, var.data_ptr<float>(),
                                                nullptr, pp, 1, n, cs));
        if (stats) {
            // running = (1 - momentum) * running + momentum * batch, the
            // var unbiased: sum / (count - 1).
            float keep = static_cast<float>(1.0 - momentum), mom = static_cast<float>(momentum);
            float *rm = running_mean->data_ptr<float>(), *rv = running_var->data_ptr<float>();
            at::Tensor t = at::empty({c}, f32);
            float *tp = t.data_ptr<float>();
            TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SCALE, rm, rm, keep, cs));
            TORCH_RILL_CHECK(
                rill_op_map_f32(s, RILL_MAP_SCALE, tp, mean.const_data_ptr<float>(), mom, cs));
            vec(s, RILL_BINARY_ADD, rm, rm, tp, cs);
            TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SCALE, rv, rv, keep, cs));
            TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_DIV, tp, var.const_data_ptr<float>(),
                                             static_cast<float>(count - 1), cs));
            TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SCALE, tp, tp, mom, cs));
            vec(s, RILL_BINARY_ADD, rv, rv, tp, cs);
        }
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_DIV, var.data_ptr<float>(),
                                         var.const_data_ptr<float>(), static_cast<float>(count),
                                         cs));
    } else {
        mean = *running_mean;
        var = *running_var;
    }
    // invstd = 1 / sqrt(var + eps); a = invstd * weight; b = bias - mean * a.
    invstd = at::empty({c}, f32);
    float *inv = invstd.data_ptr<float>();
    TORCH_RILL_CHECK(
        rill_op_add_scalar_f32(s, inv, var.const_data_ptr<float>(), static_cast<float>(eps), cs));
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SQRT, inv, inv, 1.0f, cs));
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_RDIV, inv, inv, 1.0f, cs));
    at::Tensor a = at::empty({c}, f32), b = at::empty({c}, f32);
    float *ap = a.data_ptr<float>(), *bp = b.data_ptr<float>();
    if (absent(weight))
        TORCH_RILL_CHECK(rill_memcpy_async(ap, inv, cs * sizeof(float), s));
    else
        vec(s, RILL_BINARY_MUL, ap, inv, weight->const_data_ptr<float>(), cs);
    vec(s, RILL_BINARY_MUL, bp, mean.const_data_ptr<float>(), ap, cs);
    if (absent(bias))
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_NEG, bp, bp, 1.0f, cs));
    else
        vec(s, RILL_BINARY_SUB, bp, bias->const_data_ptr<float>(), bp, cs);
    TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, o, xp, all, ap, chan, dims, 3));
    TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_ADD, o, o, all, bp, chan, dims, 3));
    if (training)
        *result = {out, mean, invstd};
    else // PyTorch's CPU kernel saves no statistics in evaluation
        *result = {out, at::empty({0}, f32), at::empty({0}, f32)};
    return true;
}

Norm native_batch_norm(const at::Tensor &input, const std::optional<at::Tensor> &weight,
                       const std::optional<at::Tensor> &bias,
                       const std::optional<at::Tensor> &running_mean,
                       const std::optional<at::Tensor> &running_var, bool training, double momentum,
                       double eps) {
    Norm r;
    if (batch_norm_native(input, weight, bias, running_mean, running_var, training, momentum, eps,
                          &r))
        return r;
    return call_fallback_fn<&boxed_fallback, at::_ops::native_batch_norm>::call(
        input, weight, bias, running_mean, running_var, training, momentum, eps);
}

Norm batch_norm_legit(const at::Tensor &input, const std::optional<at::Tensor> &weight,
                      const std::optional<at::Tensor> &bias, at::Tensor &running_mean,
                      at::Tensor &running_var, bool training, double momentum, double eps) {
    Norm r;
    if (batch_norm_native(input, weight, bias, running_mean, running_var, training, momentum, eps,
                          &r))
        return r;
    return call_fallback_fn<&boxed_fallback, at::_ops::_native_batch_norm_legit>::call(
        input, weight, bias, running_mean, running_var, training, momentum, eps);
}

Norm batch_norm_legit_no_stats(const at::Tensor &input, const std::optional<at::Tensor> &weight,
                               const std::optional<at::Tensor> &bias, bool training,
                               double momentum, double eps) {
    Norm r;
    if (batch_norm_native(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps,
                          &r))
        return r;
    return call_fallback_fn<&boxed_fallback, at::_ops::_native_batch_norm_legit_no_stats>::call(
        input, weight, bias, training, momentum, eps);
}

Norm batch_norm_legit_no_training(const at::Tensor &input, const std::optional<at::Tensor> &weight,
                                  const std::optional<at::Tensor> &bias,
                                  const at::Tensor &running_mean, const at::Tensor &running_var,
                                  double momentum, double eps) {
    Norm r;
    if (batch_norm_native(input, weight, bias, running_mean, running_var, false, momentum, eps, &r))
        return r;
    return call_fallback_fn<&boxed_fallback, at::_ops::_native_batch_norm_legit_no_training>::call(
        input, weight, bias, running_mean, running_var, momentum, eps);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("native_layer_norm", layer_norm);
    m.impl("native_batch_norm", native_batch_norm);
    m.impl("_native_batch_norm_legit", batch_norm_legit);
    m.impl("_native_batch_norm_legit.no_stats", batch_norm_legit_no_stats);
    m.impl("_native_batch_norm_legit_no_training", batch_norm_legit_no_training);
}

} // namespace torch_rill
