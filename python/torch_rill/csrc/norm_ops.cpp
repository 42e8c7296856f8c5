// SPDX-License-Identifier: MIT
// Layer norm's and batch norm's forward and backward as rill kernels
// queued on the current stream, for the outputs output_mask asks for.
// Layer norm, over the input read as [m, n] (n the normalized elements),
// is one launch each way: rill_op_layer_norm_f32, which returns the rows'
// mean and rstd, and rill_op_layer_norm_backward_f32 from them. Batch
// norm, over the input read as [n, c, hw] ([n, hw, c] when it is
// channels-last, as its results then are), is composed of rill's
// reductions and element-wise ops: the channels' mean and biased var over
// n and hw in training (the running statistics, when given, updated in
// place with momentum and the unbiased var), the running statistics in
// evaluation; out = x * a + b with a = weight / sqrt(var + eps) and b =
// bias - mean * a per channel, as PyTorch's CPU kernel computes it; the
// statistics it returns have the shapes PyTorch's CPU kernel gives them.
// Its backward, per channel over n and hw (N values), with sum = sum(dy)
// and dot = sum(dy * (x - mean)): in training, from the saved mean and
// invstd, dx = (dy - sum/N - (x - mean) * dot/N * invstd^2) * invstd *
// weight; in evaluation, from the running statistics, dx = dy * invstd *
// weight; dweight = dot * invstd, dbias = sum. Other cases (other dtypes,
// empty tensors, a negative eps, one value per channel in training,
// shapes PyTorch refuses, a gradient asked for a missing weight or bias
// of layer norm) go to the fallback.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_native_batch_norm_legit_no_training_ops.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
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
                 input.sizes().slice(axis).equals(shape) && eps >= 0.0 &&
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
    at::Tensor w_keep, b_keep;
    const float *w = data_or_null(weight, w_keep), *b = data_or_null(bias, b_keep);
    TORCH_RILL_CHECK(rill_op_layer_norm_f32(
        stream_of(out), out.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
        x.const_data_ptr<float>(), w, b, m, n, static_cast<float>(eps)));
    return {out, mean, rstd};
}

using Norm = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Norm layer_norm_backward(const at::Tensor &grad, const at::Tensor &input,
                         c10::SymIntArrayRef sym_shape, const at::Tensor &mean,
                         const at::Tensor &rstd, const std::optional<at::Tensor> &weight,
                         const std::optional<at::Tensor> &bias, std::array<bool, 3> mask) {
    c10::IntArrayRef shape = C10_AS_INTARRAYREF_SLOW(sym_shape);
    int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
    bool has_w = weight.has_value() && weight->defined();
    bool has_b = bias.has_value() && bias->defined();
    c10::Device dev = input.device();
    bool takes = is_f32(input) && is_f32(grad) && is_f32(mean) && is_f32(rstd) &&
                 grad.device() == dev && mean.device() == dev && rstd.device() == dev &&
                 !shape.empty() && axis >= 0 && input.numel() > 0 &&
                 input.sizes().slice(axis).equals(shape) && grad.sizes().equals(input.sizes()) &&
                 affine_ok(weight, dev, shape) && affine_ok(bias, dev, shape) &&
                 (!mask[1] || has_w) && (!mask[2] || has_b);
    size_t n = takes ? static_cast<size_t>(c10::multiply_integers(shape)) : 1;
    size_t m = static_cast<size_t>(input.numel()) / n;
    if (!takes || static_cast<size_t>(mean.numel()) != m || static_cast<size_t>(rstd.numel()) != m)
        return at::native::call_fallback_fn_symint<
            &boxed_fallback, at::_ops::native_layer_norm_backward>::call(grad, input, sym_shape,
                                                                         mean, rstd, weight, bias,
                                                                         mask);
    const c10::DeviceGuard guard(dev);
    at::Tensor x = input.contiguous(), dy = grad.contiguous();
    at::Tensor mu = mean.contiguous(), rs = rstd.contiguous();
    at::TensorOptions f32 = input.options();
    at::Tensor dx, dw, db, w_keep;
    if (mask[0])
        dx = at::empty(input.sizes(), f32);
    if (mask[1])
        dw = at::empty(shape, f32);
    if (mask[2])
        db = at::empty(shape, f32);
    if (!mask[0] && !mask[1] && !mask[2])
        return {dx, dw, db};
    TORCH_RILL_CHECK(rill_op_layer_norm_backward_f32(
        stream_of(dy), mask[0] ? dx.data_ptr<float>() : nullptr,
        mask[1] ? dw.data_ptr<float>() : nullptr, mask[2] ? db.data_ptr<float>() : nullptr,
        dy.const_data_ptr<float>(), x.const_data_ptr<float>(), mu.const_data_ptr<float>(),
        rs.const_data_ptr<float>(), data_or_null(weight, w_keep), m, n));
    return {dx, dw, db};
}

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

// A batch norm operand, [n, c, hw] in memory (contiguous) or [n, hw, c]
// (channels-last, which PyTorch's CPU kernel keeps): the element-wise
// kernels' shape, the strides in it of a whole tensor and of a vector of
// channels, and the layout of new tensors of the operand's shape.
struct Layout {
    at::MemoryFormat format;
    size_t n, c, hw;
    size_t dims[3], all[3], chan[3];
};

Layout layout_of(const at::Tensor &input, size_t n, size_t c, size_t hw) {
    at::MemoryFormat f = input.suggest_memory_format();
    if (f == at::MemoryFormat::Contiguous)
        return {f, n, c, hw, {n, c, hw}, {c * hw, hw, 1}, {0, 1, 0}};
    return {f, n, c, hw, {n, hw, c}, {hw * c, c, 1}, {0, 0, 1}};
}

// The channels' sums of a, laid out as l says, into out [c], through part
// [n * c].
void channel_sums(rill_stream *s, float *out, float *part, const float *a, const Layout &l) {
    if (l.format == at::MemoryFormat::Contiguous)
        TORCH_RILL_CHECK(
            rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, part, nullptr, a, l.n * l.c, l.hw, 1));
    else
        TORCH_RILL_CHECK(
            rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, part, nullptr, a, l.n, l.hw, l.c));
    TORCH_RILL_CHECK(
        rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, out, nullptr, part, 1, l.n, l.c));
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
    Layout l = layout_of(input, n, cs, hw);
    at::Tensor x = input.contiguous(l.format);
    at::Tensor out = at::empty(input.sizes(), input.options().memory_format(l.format));
    rill_stream *s = stream_of(out);
    at::TensorOptions f32 = input.options();
    at::Tensor mean, invstd, var;
    const size_t *dims = l.dims, *all = l.all, *chan = l.chan;
    const float *xp = x.const_data_ptr<float>();
    float *o = out.data_ptr<float>();
    if (training) {
        // The channels' sums over hw, then over n, divided by n * hw.
        at::Tensor part = at::empty({static_cast<int64_t>(n * cs)}, f32);
        mean = at::empty({c}, f32);
        var = at::empty({c}, f32);
        float *pp = part.data_ptr<float>();
        channel_sums(s, mean.data_ptr<float>(), pp, xp, l);
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_DIV, mean.data_ptr<float>(),
                                         mean.const_data_ptr<float>(), static_cast<float>(count),
                                         cs));
        // (x - mean)^2 in out, summed likewise.
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_SUB, o, xp, all,
                                            mean.const_data_ptr<float>(), chan, dims, 3));
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, o, o, all, o, all, dims, 3));
        channel_sums(s, var.data_ptr<float>(), pp, o, l);
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

// Batch norm's backward as rill kernels, or false when they do not take the
// case: train, from save_mean and save_invstd; else from running_mean and
// running_var.
bool batch_norm_backward_native(const at::Tensor &grad, const at::Tensor &input,
                                const std::optional<at::Tensor> &weight,
                                const std::optional<at::Tensor> &running_mean,
                                const std::optional<at::Tensor> &running_var,
                                const std::optional<at::Tensor> &save_mean,
                                const std::optional<at::Tensor> &save_invstd, bool train,
                                double eps, std::array<bool, 3> mask, Norm *result) {
    if (!is_f32(input) || !is_f32(grad) || input.dim() < 2 || input.numel() == 0 ||
        grad.device() != input.device() || !grad.sizes().equals(input.sizes()))
        return false;
    c10::Device dev = input.device();
    int64_t c = input.size(1);
    const std::optional<at::Tensor> &mean_t = train ? save_mean : running_mean;
    const std::optional<at::Tensor> &stat_t = train ? save_invstd : running_var;
    if ((!absent(weight) && !channels_ok(weight, dev, c)) || !channels_ok(mean_t, dev, c) ||
        !channels_ok(stat_t, dev, c))
        return false;
    size_t n = static_cast<size_t>(input.size(0)), cs = static_cast<size_t>(c);
    size_t hw = static_cast<size_t>(input.numel()) / (n * cs), count = n * hw;
    if (train && count < 2)
        return false; // as the forward
    const c10::DeviceGuard guard(dev);
    Layout l = layout_of(input, n, cs, hw);
    at::Tensor x = input.contiguous(l.format), dy = grad.contiguous(l.format);
    rill_stream *s = stream_of(dy);
    at::TensorOptions f32 = input.options();
    at::TensorOptions like_input = f32.memory_format(l.format);
    const size_t *dims = l.dims, *all = l.all, *chan = l.chan;
    const float *xp = x.const_data_ptr<float>(), *dyp = dy.const_data_ptr<float>();
    const float *mp = mean_t->const_data_ptr<float>();
    // invstd: saved in training; 1 / sqrt(running_var + eps) in evaluation.
    at::Tensor invstd = *stat_t;
    if (!train) {
        invstd = at::empty({c}, f32);
        float *inv = invstd.data_ptr<float>();
        TORCH_RILL_CHECK(rill_op_add_scalar_f32(s, inv, stat_t->const_data_ptr<float>(),
                                                static_cast<float>(eps), cs));
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SQRT, inv, inv, 1.0f, cs));
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_RDIV, inv, inv, 1.0f, cs));
    }
    const float *inv = invstd.const_data_ptr<float>();
    bool need_sum = mask[2] || (mask[0] && train), need_dot = mask[1] || (mask[0] && train);
    at::Tensor part = at::empty({static_cast<int64_t>(n * cs)}, f32);
    at::Tensor sum = at::empty({c}, f32), dot = at::empty({c}, f32), xc;
    float *pp = part.data_ptr<float>(), *sp = sum.data_ptr<float>(), *dp = dot.data_ptr<float>();
    if (need_sum)
        channel_sums(s, sp, pp, dyp, l);
    if (need_dot) { // xc = x - mean; dot = the sums of dy * xc
        xc = at::empty(input.sizes(), like_input);
        at::Tensor t = at::empty(input.sizes(), like_input);
        float *xcp = xc.data_ptr<float>(), *tp = t.data_ptr<float>();
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_SUB, xcp, xp, all, mp, chan, dims, 3));
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_MUL, tp, dyp, all, xcp, all, dims, 3));
        channel_sums(s, dp, pp, tp, l);
    }
    at::Tensor dx, dw, db;
    if (mask[0]) {
        // scale = invstd * weight per channel.
        at::Tensor scale = at::empty({c}, f32);
        float *scp = scale.data_ptr<float>();
        if (absent(weight))
            TORCH_RILL_CHECK(rill_memcpy_async(scp, inv, cs * sizeof(float), s));
        else
            vec(s, RILL_BINARY_MUL, scp, inv, weight->const_data_ptr<float>(), cs);
        dx = at::empty(input.sizes(), like_input);
        float *dxp = dx.data_ptr<float>();
        if (train) {
            // proj = dot / N * invstd^2 and gmean = sum / N per channel;
            // dx = (dy - gmean - xc * proj) * scale.
            at::Tensor proj = at::empty({c}, f32), gmean = at::empty({c}, f32);
            float *pj = proj.data_ptr<float>(), *gm = gmean.data_ptr<float>();
            float fcount = static_cast<float>(count);
            TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_DIV, pj, dp, fcount, cs));
            vec(s, RILL_BINARY_MUL, pj, pj, inv, cs);
            vec(s, RILL_BINARY_MUL, pj, pj, inv, cs);
            TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_DIV, gm, sp, fcount, cs));
            float *xcp = xc.data_ptr<float>();
            TORCH_RILL_CHECK(
                rill_op_binary_f32(s, RILL_BINARY_MUL, dxp, xcp, all, pj, chan, dims, 3));
            TORCH_RILL_CHECK(
                rill_op_binary_f32(s, RILL_BINARY_SUB, dxp, dyp, all, dxp, all, dims, 3));
            TORCH_RILL_CHECK(
                rill_op_binary_f32(s, RILL_BINARY_SUB, dxp, dxp, all, gm, chan, dims, 3));
            TORCH_RILL_CHECK(
                rill_op_binary_f32(s, RILL_BINARY_MUL, dxp, dxp, all, scp, chan, dims, 3));
        } else {
            TORCH_RILL_CHECK(
                rill_op_binary_f32(s, RILL_BINARY_MUL, dxp, dyp, all, scp, chan, dims, 3));
        }
    }
    if (mask[1]) {
        dw = at::empty({c}, f32);
        vec(s, RILL_BINARY_MUL, dw.data_ptr<float>(), dp, inv, cs);
    }
    if (mask[2])
        db = sum;
    *result = {dx, dw, db};
    return true;
}

Norm native_batch_norm_backward(const at::Tensor &grad, const at::Tensor &input,
                                const std::optional<at::Tensor> &weight,
                                const std::optional<at::Tensor> &running_mean,
                                const std::optional<at::Tensor> &running_var,
                                const std::optional<at::Tensor> &save_mean,
                                const std::optional<at::Tensor> &save_invstd, bool train,
                                double eps, std::array<bool, 3> mask) {
    Norm r;
    if (batch_norm_backward_native(grad, input, weight, running_mean, running_var, save_mean,
                                   save_invstd, train, eps, mask, &r))
        return r;
    return call_fallback_fn<&boxed_fallback, at::_ops::native_batch_norm_backward>::call(
        grad, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask);
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
    m.impl("native_layer_norm_backward", layer_norm_backward);
    m.impl("native_batch_norm_backward", native_batch_norm_backward);
}

} // namespace torch_rill
