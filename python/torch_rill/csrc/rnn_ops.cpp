// SPDX-License-Identifier: MIT
// The fused LSTM and GRU cells that PyTorch's recurrent layers and cells
// call on an accelerator (PyTorch takes them for CUDA, XPU and PrivateUse1
// inputs; PyTorch has no CPU kernel for them), and their backward. Each is
// composed of rill's element-wise kernels, queued on the current stream.
// The gates are [batch, k * hidden] in PyTorch's order: input, forget,
// cell, output for an LSTM; reset, update, new for a GRU. The workspace
// that the forward returns and the backward reads is this file's own:
// an LSTM's activated gates [i, f, g, o]; a GRU's [r, z, n, hx, hn], hn
// the hidden new-gate term with its bias.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_rill {
namespace {

using at::Tensor;
using OptionalTensor = std::optional<Tensor>;

Tensor with_bias(const Tensor &gates, const OptionalTensor &bias) {
    return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor &input_gates, const Tensor &hidden_gates,
                                             const Tensor &cx, const OptionalTensor &input_bias,
                                             const OptionalTensor &hidden_bias) {
    Tensor gates = with_bias(with_bias(input_gates + hidden_gates, input_bias), hidden_bias);
    std::vector<Tensor> chunks = gates.chunk(4, 1);
    Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid();
    Tensor g = chunks[2].tanh(), o = chunks[3].sigmoid();
    Tensor cy = f * cx + i * g;
    Tensor hy = o * cy.tanh();
    return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(const OptionalTensor &grad_hy,
                                                      const OptionalTensor &grad_cy,
                                                      const Tensor &cx, const Tensor &cy,
                                                      const Tensor &workspace, bool has_bias) {
    bool gh = grad_hy.has_value() && grad_hy->defined();
    bool gc = grad_cy.has_value() && grad_cy->defined();
    if (!gh && !gc)
        return {};
    std::vector<Tensor> w = workspace.chunk(4, 1);
    const Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
    Tensor tanh_cy = cy.tanh();
    Tensor d_cy = gc ? *grad_cy : at::zeros_like(cy);
    Tensor d_o;
    if (gh) {
        d_cy = d_cy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
        d_o = *grad_hy * tanh_cy * o * (1 - o);
    } else {
        d_o = at::zeros_like(o);
    }
    Tensor d_i = d_cy * g * i * (1 - i);
    Tensor d_f = d_cy * cx * f * (1 - f);
    Tensor d_g = d_cy * i * (1 - g * g);
    Tensor grad_gates = at::cat({d_i, d_f, d_g, d_o}, 1);
    return {grad_gates, d_cy * f, has_bias ? grad_gates.sum(0) : Tensor()};
}

std::tuple<Tensor, Tensor> gru_cell(const Tensor &input_gates, const Tensor &hidden_gates,
                                    const Tensor &hx, const OptionalTensor &input_bias,
                                    const OptionalTensor &hidden_bias) {
    std::vector<Tensor> in = with_bias(input_gates, input_bias).chunk(3, 1);
    std::vector<Tensor> hid = with_bias(hidden_gates, hidden_bias).chunk(3, 1);
    Tensor r = (in[0] + hid[0]).sigmoid();
    Tensor z = (in[1] + hid[1]).sigmoid();
    Tensor n = (in[2] + r * hid[2]).tanh();
    Tensor hy = n + z * (hx - n);
    return {hy, at::cat({r, z, n, hx, hid[2]}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>
gru_cell_backward(const Tensor &grad_hy, const Tensor &workspace, bool has_bias) {
    std::vector<Tensor> w = workspace.chunk(5, 1);
    const Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
    Tensor d_z = grad_hy * (hx - n) * z * (1 - z);
    Tensor d_n = grad_hy * (1 - z) * (1 - n * n);
    Tensor d_r = d_n * hn * r * (1 - r);
    Tensor grad_input = at::cat({d_r, d_z, d_n}, 1);
    Tensor grad_hidden = at::cat({d_r, d_z, d_n * r}, 1);
    if (!has_bias)
        return {grad_input, grad_hidden, grad_hy * z, Tensor(), Tensor()};
    return {grad_input, grad_hidden, grad_hy * z, grad_input.sum(0), grad_hidden.sum(0)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("_thnn_fused_lstm_cell", lstm_cell);
    m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
    m.impl("_thnn_fused_gru_cell", gru_cell);
    m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

} // namespace torch_rill
