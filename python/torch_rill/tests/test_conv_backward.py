# SPDX-License-Identifier: MIT
"""The backward of a float32 2-D convolution runs as rill kernels queued on
the current stream (rill_op_conv2d_backward_ex2_f32 for the input and
weight gradients, rill_op_reduce_dim_f32 for the bias's), with the
gradients of PyTorch's `cpu` device within 1e-5 (grouped, dilated and
transposed ones: test_conv_pool_kernels.py); a float64 one's backward still
runs the CPU's kernel in a host function, with the same results."""

import copy
import textwrap

import pytest
import torch

from conftest import traced_names
import torch.nn.functional as F

from test_nn_kernels import queued, randn, same, same_grads

OP = torch.ops.aten.convolution_backward

CASES = {
    "3x3 pad 1": dict(x=(2, 3, 11, 13), w=(4, 3, 3, 3), stride=(1, 1), padding=(1, 1)),
    "stride 2 pad 2": dict(x=(2, 3, 11, 13), w=(5, 3, 3, 3), stride=(2, 2), padding=(2, 2)),
    "7x7 stride 2 pad 3": dict(x=(1, 2, 16, 15), w=(3, 2, 7, 7), stride=(2, 2), padding=(3, 3)),
    "1x1": dict(x=(3, 6, 5, 4), w=(2, 6, 1, 1), stride=(1, 1), padding=(0, 0)),
    "rectangular": dict(x=(2, 4, 9, 12), w=(6, 4, 3, 5), stride=(1, 2), padding=(2, 0)),
}


def backward(case, mask, device):
    """convolution_backward of CASES[case] on device, queued (and proven
    not to wait for the stream) on rill."""
    c = CASES[case]
    x, w = randn(*c["x"], seed=1), randn(*c["w"], seed=2)
    out = F.conv2d(x, w, stride=c["stride"], padding=c["padding"])
    g = randn(*out.shape, seed=3)
    args = [t.to(device) for t in (g, x, w)]
    rest = ([c["w"][0]], list(c["stride"]), list(c["padding"]), [1, 1], False, [0, 0], 1, mask)
    if device == "rill":
        return queued(OP, *args, *rest)
    return OP(*args, *rest)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mask", [[True, True, True], [True, False, False],
                                  [False, True, True], [False, False, True]])
def test_convolution_backward_is_queued_and_equals_the_cpus(case, mask):
    got, want = backward(case, mask, "rill"), backward(case, mask, "cpu")
    for i in range(3):
        if mask[i]:
            same(got[i], want[i])
        else:
            assert got[i] is None  # (the CPU may compute one it was not asked for)


def test_strided_grad_output_is_made_contiguous_first():
    x, w = randn(2, 3, 8, 8, seed=1), randn(4, 3, 3, 3, seed=2)
    g = randn(2, 8, 8, 4, seed=3).permute(0, 3, 1, 2)  # [2, 4, 8, 8], channels last
    rest = ([4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
    got = OP(g.to("rill"), x.to("rill"), w.to("rill"), *rest)
    want = OP(g, x, w, *rest)
    for a, b in zip(got, want):
        same(a, b)


def test_conv2d_training_steps_equal_the_cpus():
    """Conv2d (padding 1) -> relu -> Conv2d (stride 2, a 3x2 filter) ->
    Linear: three SGD steps on rill leave the parameters the CPU's leave."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 6, (3, 2), stride=2, padding=(0, 1)),
                              torch.nn.Flatten(), torch.nn.Linear(6 * 4 * 6, 5))
    dev = copy.deepcopy(cpu).to("rill")
    x, target = randn(4, 3, 10, 10, seed=1), randn(4, 5, seed=2)
    for model, device in ((cpu, "cpu"), (dev, "rill")):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            F.mse_loss(model(x.to(device)), target.to(device)).backward()
            opt.step()
    for got, want in zip(dev.parameters(), cpu.parameters()):
        same(got.detach(), want.detach())


def test_backward_of_float64_is_the_cpus():
    """A float64 convolution: the CPU's convolution_backward in a host
    function, with its results."""
    x = randn(2, 4, 9, 9, seed=1)
    same_grads(lambda x, w: F.conv2d(x, w, padding=1), x.double(), randn(5, 4, 3, 3).double())


def test_trace_shows_the_backward_kernels_and_no_host_function(tmp_path):
    """rill's trace names each command after the aten op and its kernel:
    conv2d's backward ran as the data and filter kernels and the bias's
    reductions, and no host function ran PyTorch's CPU backward (as one
    did before: "aten::convolution_backward_overrideable (host
    function)")."""
    code = textwrap.dedent("""
        import torch, torch_rill
        conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1).to("rill")
        x = torch.randn(2, 3, 9, 9, device="rill", requires_grad=True)
        conv(x).sum().backward()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    op = "aten::convolution_backward_overrideable"
    ours = sorted(n for n in names if n.startswith(op))
    # Trace names are cut at 63 characters: the kernels' names by their starts.
    for want in ("conv2d_backward_data", "conv2d_backward_filt", "reduce_dim_f32"):
        assert any(n.startswith(f"{op} ({want}") for n in ours), ours
    assert f"{op} (host function)" not in ours, ours
