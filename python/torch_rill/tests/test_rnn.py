# SPDX-License-Identifier: MIT
"""Recurrent layers and cells on rill, as OpenReg's test_rnn: PyTorch runs
them on an accelerator through fused LSTM and GRU cells, which rill
composes of its element-wise kernels. Outputs, final states and every
gradient equal the CPU's (fp32 within 1e-5)."""

import pytest
import torch


def pair(make):
    torch.manual_seed(0)
    cpu = make()
    dev = make().to("rill")
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev


def close(a, b):
    assert torch.allclose(a.cpu(), b, atol=1e-5, rtol=1e-5), (a.cpu() - b).abs().max()


def check_grads(cpu, dev, x_cpu, x_dev):
    close(x_dev.grad, x_cpu.grad)
    for (name, a), (_, b) in zip(dev.named_parameters(), cpu.named_parameters()):
        assert a.grad is not None, name
        close(a.grad, b.grad)


@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("bias", [True, False])
def test_recurrent_layers_match_the_cpu(kind, bias):
    cpu, dev = pair(lambda: kind(6, 8, num_layers=2, bidirectional=True, batch_first=True,
                                 bias=bias))
    x_cpu = torch.randn(3, 5, 6, requires_grad=True)
    x_dev = x_cpu.detach().to("rill").requires_grad_()
    out_cpu, state_cpu = cpu(x_cpu)
    out_dev, state_dev = dev(x_dev)
    close(out_dev, out_cpu)
    states = zip(state_dev, state_cpu) if kind is torch.nn.LSTM else [(state_dev, state_cpu)]
    loss_cpu, loss_dev = out_cpu.square().sum(), out_dev.square().sum()
    for d, c in states:
        close(d, c)
        loss_cpu, loss_dev = loss_cpu + c.sum(), loss_dev + d.sum()
    loss_cpu.backward()
    loss_dev.backward()
    check_grads(cpu, dev, x_cpu, x_dev)


@pytest.mark.parametrize("kind", [torch.nn.LSTMCell, torch.nn.GRUCell])
def test_recurrent_cells_match_the_cpu_over_steps(kind):
    cpu, dev = pair(lambda: kind(6, 8))
    x_cpu = torch.randn(4, 3, 6, requires_grad=True)
    x_dev = x_cpu.detach().to("rill").requires_grad_()
    h_cpu = h_dev = None
    for t in range(4):
        h_cpu = cpu(x_cpu[t], h_cpu)
        h_dev = dev(x_dev[t], h_dev)
    out_cpu = h_cpu[0] if kind is torch.nn.LSTMCell else h_cpu
    out_dev = h_dev[0] if kind is torch.nn.LSTMCell else h_dev
    close(out_dev, out_cpu)
    out_cpu.tanh().sum().backward()
    out_dev.tanh().sum().backward()
    check_grads(cpu, dev, x_cpu, x_dev)


def test_a_packed_sequence_runs_through_an_lstm():
    cpu, dev = pair(lambda: torch.nn.LSTM(4, 5))
    lengths = torch.tensor([5, 3, 2])
    x = torch.randn(5, 3, 4)
    pack = torch.nn.utils.rnn.pack_padded_sequence
    out_cpu, _ = torch.nn.utils.rnn.pad_packed_sequence(cpu(pack(x, lengths))[0])
    out_dev, _ = torch.nn.utils.rnn.pad_packed_sequence(dev(pack(x.to("rill"), lengths))[0])
    close(out_dev, out_cpu)


def test_the_cells_double_backward_matches_the_cpus():
    """With the graph kept for a second derivative, PyTorch differentiates
    the cell's composite form, not the fused backward."""
    cpu, dev = pair(lambda: torch.nn.LSTMCell(3, 4))
    x_cpu = torch.randn(2, 3, requires_grad=True)
    x_dev = x_cpu.detach().to("rill").requires_grad_()
    (g_cpu,) = torch.autograd.grad(cpu(x_cpu)[0].sum(), x_cpu, create_graph=True)
    (g_dev,) = torch.autograd.grad(dev(x_dev)[0].sum(), x_dev, create_graph=True)
    close(g_dev, g_cpu)
    g_cpu.square().sum().backward()
    g_dev.square().sum().backward()
    close(dev.weight_ih.grad, cpu.weight_ih.grad)
