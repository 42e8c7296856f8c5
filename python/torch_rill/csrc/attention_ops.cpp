// SPDX-License-Identifier: MIT
// scaled_dot_product_attention as rill kernels queued on the current
// stream. PyTorch asks a PrivateUse1 device which backend to use
// (_fused_sdp_choice_stub); for float32 query, key and value on one rill
// device, 4-D with equal batch and heads, no dropout and a float or no
// mask, the answer is the overrideable one, and
// _scaled_dot_product_fused_attention_overrideable (+ _backward) below run
// it: the scores q k^T as one batched product reading q and k in place,
// scaled, the mask added (or the causal one), softmax along the keys, rows
// whose scores are all -inf (fully masked) set to 0 as PyTorch's CPU
// attention does, then the probabilities times v. The backward recomputes
// the probabilities rather than keeping them (logsumexp is returned empty).
// Other cases take PyTorch's math path, op by op.
#include <cmath>
#include <limits>
#include <tuple>

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "matmul_ops.h"
#include "native_ops.h"
#include "runtime.h"

namespace torch_rill {
namespace {

// The attention takes q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev] and a float
// mask broadcasting to [B,H,L,S]; scaled_dot_product_attention makes a bool
// one (bool_ok) float before it calls the overrideable op.
bool takes(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
           const std::optional<at::Tensor> &mask, double dropout_p, bool bool_ok) {
    if (!is_f32(q) || !is_f32(k) || !is_f32(v) || q.device() != k.device() ||
        q.device() != v.device() || q.dim() != 4 || k.dim() != 4 || v.dim() != 4 ||
        dropout_p != 0.0 || q.size(3) != k.size(3) || k.size(2) != v.size(2))
        return false;
    for (int64_t d = 0; d < 2; d++)
        if (k.size(d) != q.size(d) || v.size(d) != q.size(d))
            return false;
    if (mask.has_value() && mask->defined()) {
        if ((!is_f32(*mask) && !(bool_ok && mask->scalar_type() == at::kBool)) ||
            mask->device() != q.device() || mask->dim() > 4)
            return false;
        int64_t shape[4] = {q.size(0), q.size(1), q.size(2), k.size(2)};
        for (int64_t d = 0; d < mask->dim(); d++) {
            int64_t size = mask->size(mask->dim() - 1 - d);
            if (size != 1 && size != shape[3 - d])
                return false;
        }
    }
    return true;
}

int64_t choose(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
               const std::optional<at::Tensor> &mask, double dropout_p, bool is_causal,
               std::optional<double> scale, bool enable_gqa) {
    (void)is_causal, (void)scale, (void)enable_gqa;
    bool ours =
        at::globalContext().userEnabledOverrideableSDP() && takes(q, k, v, mask, dropout_p, true);
    return static_cast<int64_t>(ours ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

double scale_of(const at::Tensor &q, std::optional<double> scale) {
    return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

// x [B,H,R,C] as [B*H, R, C]: a view where the heads fold into one batch
// stride (the layout of nn.MultiheadAttention's heads), else a copy.
at::Tensor heads(const at::Tensor &x) {
    return x.reshape({x.size(0) * x.size(1), x.size(2), x.size(3)});
}

// c [count, m, n] = a b in one batched product.
at::Tensor product(const at::Tensor &a, const at::Tensor &b) {
    at::Tensor c = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
    batched_product_into(c, a, b);
    return c;
}

// lse [rows] = the logsumexp of each row of the scores, from the row's
// largest score top and its largest probability in p, p_max = exp(top -
// lse): lse = top + min(-log p_max, FLT_MAX). The clamp makes a row that a
// mask fills with -inf (top -inf, probabilities set to 0) -inf, as
// torch.logsumexp gives it, rather than -inf + inf.
void logsumexp_into(rill_stream *s, float *lse, const float *top, const float *p, size_t rows,
                    size_t cols) {
    TORCH_RILL_CHECK(
        rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_MAX, lse, nullptr, p, rows, cols, 1));
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_LOG, lse, lse, 0.0f, rows));
    TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_NEG, lse, lse, 0.0f, rows));
    TORCH_RILL_CHECK(
        rill_op_map_f32(s, RILL_MAP_MIN, lse, lse, std::numeric_limits<float>::max(), rows));
    TORCH_RILL_CHECK(rill_op_add_f32(s, lse, lse, top, 1.0f, rows));
}

// The attention's probabilities [B*H, L, S]: softmax(scale q k^T + mask)
// along the keys, 0 in rows whose scores are all -inf; and when lse is
// given, each row's logsumexp of the scores into it ([B*H*L] floats).
at::Tensor probabilities(const at::Tensor &q, const at::Tensor &k,
                         const std::optional<at::Tensor> &mask, bool is_causal, double scale,
                         at::Tensor *lse = nullptr) {
    TORCH_CHECK(!(is_causal && mask.has_value() && mask->defined()),
                "scaled_dot_product_attention on rill: pass attn_mask or is_causal=True, not both");
    int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
    at::Tensor p = product(heads(q), heads(k).transpose(1, 2));
    if (p.numel() == 0) {
        if (lse != nullptr) // no keys: the sum of none
            lse->fill_(-std::numeric_limits<float>::infinity());
        return p;
    }
    const c10::DeviceGuard guard(p.device());
    rill_stream *s = stream_of(p);
    size_t n = static_cast<size_t>(p.numel()), rows = n / static_cast<size_t>(S);
    float *x = p.data_ptr<float>();
    if (scale != 1.0)
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SCALE, x, x, static_cast<float>(scale), n));
    at::Tensor bias;
    if (mask.has_value() && mask->defined())
        bias = *mask;
    else if (is_causal) // row i takes keys j <= i: -inf above the diagonal
        bias = at::full({L, S}, -std::numeric_limits<float>::infinity(), at::kFloat)
                   .triu(1)
                   .to(p.device());
    if (bias.defined()) {
        std::vector<int64_t> full = {B, H, L, S};
        std::vector<size_t> shape(full.begin(), full.end()),
            p_strides = {static_cast<size_t>(H * L * S), static_cast<size_t>(L * S),
                         static_cast<size_t>(S), 1},
            bias_strides = broadcast_strides(bias, full);
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_ADD, x, x, p_strides.data(),
                                            bias.const_data_ptr<float>(), bias_strides.data(),
                                            shape.data(), shape.size()));
    }
    // Each row's largest score: for the logsumexp, and with a mask for
    // finding the rows it masks fully.
    at::Tensor top;
    if (bias.defined() || lse != nullptr) {
        top = at::empty({B * H * L}, p.options());
        TORCH_RILL_CHECK(rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_MAX, top.data_ptr<float>(),
                                                nullptr, x, rows, static_cast<size_t>(S), 1));
    }
    TORCH_RILL_CHECK(rill_op_softmax_f32(s, x, x, rows, static_cast<size_t>(S), 1));
    if (bias.defined()) {
        // keep = exp(top * 2^-126): 0 where the row's largest score is
        // -inf, positive for every finite one (at least exp(-4)), NaN for
        // NaN; the relu backward keeps a probability where keep > 0 (or
        // NaN), else 0. In place of top unless the logsumexp needs it.
        at::Tensor keep = lse != nullptr ? at::empty({B * H * L}, p.options()) : top;
        float *e = keep.data_ptr<float>();
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_SCALE, e, top.const_data_ptr<float>(),
                                         std::ldexp(1.0f, -126), rows));
        TORCH_RILL_CHECK(rill_op_map_f32(s, RILL_MAP_EXP, e, e, 0.0f, rows));
        size_t row_shape[2] = {rows, static_cast<size_t>(S)},
               x_strides[2] = {static_cast<size_t>(S), 1}, keep_strides[2] = {1, 0};
        TORCH_RILL_CHECK(rill_op_binary_f32(s, RILL_BINARY_RELU_BACKWARD, x, x, x_strides, e,
                                            keep_strides, row_shape, 2));
    }
    if (lse != nullptr)
        logsumexp_into(s, lse->data_ptr<float>(), top.data_ptr<float>(), x, rows,
                       static_cast<size_t>(S));
    return p;
}

using Forward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt,
                           at::Tensor, at::Tensor, at::Tensor>;

Forward attention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                  const std::optional<at::Tensor> &mask, double dropout_p, bool is_causal,
                  bool return_debug_mask, std::optional<double> scale) {
    TORCH_CHECK(takes(q, k, v, mask, dropout_p, false),
                "_scaled_dot_product_fused_attention_overrideable on rill takes float32 query, "
                "key and value [B,H,L,E], [B,H,S,E], [B,H,S,Ev] on one device, no dropout and a "
                "mask that broadcasts to [B,H,L,S]; call scaled_dot_product_attention, which "
                "chooses PyTorch's math path for other cases");
    TORCH_CHECK(!return_debug_mask, "_scaled_dot_product_fused_attention_overrideable on rill "
                                    "returns no debug mask; pass return_debug_mask=False");
    at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
    at::Tensor p = probabilities(q, k, mask, is_causal, scale_of(q, scale), &lse);
    at::Tensor out = product(p, heads(v)).view({q.size(0), q.size(1), q.size(2), v.size(3)});
    at::Tensor seed = at::empty({}, at::dtype(at::kLong));
    return {out,  lse,  at::Tensor(), at::Tensor(), c10::SymInt(q.size(2)), c10::SymInt(k.size(2)),
            seed, seed, at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
attention_backward(const at::Tensor &grad_out, const at::Tensor &q, const at::Tensor &k,
                   const at::Tensor &v, const at::Tensor &mask, std::array<bool, 4> grad_input_mask,
                   const at::Tensor &out, const at::Tensor &logsumexp, const at::Tensor &cum_seq_q,
                   const at::Tensor &cum_seq_k, c10::SymInt max_q, c10::SymInt max_k,
                   double dropout_p, bool is_causal, const at::Tensor &philox_seed,
                   const at::Tensor &philox_offset, std::optional<double> scale) {
    (void)out, (void)logsumexp, (void)cum_seq_q, (void)cum_seq_k, (void)max_q, (void)max_k;
    (void)philox_seed, (void)philox_offset;
    std::optional<at::Tensor> bias =
        mask.defined() ? std::optional<at::Tensor>(mask) : std::optional<at::Tensor>();
    TORCH_CHECK(takes(q, k, v, bias, dropout_p, false) && is_f32(grad_out),
                "_scaled_dot_product_fused_attention_overrideable_backward on rill takes what its "
                "forward takes, and a float32 gradient on the same device");
    int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
    double factor = scale_of(q, scale);
    at::Tensor p = probabilities(q, k, bias, is_causal, factor);
    at::Tensor g = heads(grad_out);
    at::Tensor grad_q, grad_k, grad_v, grad_bias;
    if (grad_input_mask[2])
        grad_v = product(p.transpose(1, 2), g).view({B, H, S, v.size(3)});
    // The softmax's input gradient (the scores' after the mask), then the
    // scaled one of q k^T.
    at::Tensor ds =
        at::_softmax_backward_data(product(g, heads(v).transpose(1, 2)), p, -1, at::kFloat);
    if (grad_input_mask[3] && mask.defined())
        grad_bias = ds.view({B, H, L, S}).sum_to_size(mask.sizes()).clone();
    if (factor != 1.0) {
        const c10::DeviceGuard guard(ds.device());
        float *x = ds.data_ptr<float>();
        TORCH_RILL_CHECK(rill_op_map_f32(stream_of(ds), RILL_MAP_SCALE, x, x,
                                         static_cast<float>(factor),
                                         static_cast<size_t>(ds.numel())));
    }
    if (grad_input_mask[0])
        grad_q = product(ds, heads(k)).view({B, H, L, q.size(3)});
    if (grad_input_mask[1])
        grad_k = product(ds.transpose(1, 2), heads(q)).view({B, H, S, k.size(3)});
    return {grad_q, grad_k, grad_v, grad_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("_fused_sdp_choice", choose);
    m.impl("_scaled_dot_product_fused_attention_overrideable", attention);
    m.impl("_scaled_dot_product_fused_attention_overrideable_backward", attention_backward);
}

} // namespace torch_rill

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_rill::choose);
} // namespace at::native
