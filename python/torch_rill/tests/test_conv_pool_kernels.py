# SPDX-License-Identifier: MIT
"""Grouped, dilated and transposed 2-D convolutions, pooling with ceil_mode,
dilation, count_include_pad=False and divisor_override, and embedding's
backward with scale_grad_by_freq run as rill kernels queued on the current
stream (rill_op_conv2d_ex2_f32, rill_op_conv2d_backward_ex2_f32,
rill_op_pool2d_ex_f32, rill_op_avg_pool2d_backward_ex_f32, the embedding
backward with a division by the counts), with the forward and gradients of
PyTorch's `cpu` device within 1e-5; the trace shows no host function
running PyTorch's CPU kernels for them."""

import textwrap

import pytest
import torch

from conftest import traced_names
import torch.nn.functional as F

from test_nn_kernels import queued, randn, same, same_grads

CONVS = {
    "groups 2": dict(x=(2, 4, 9, 9), w=(6, 2, 3, 3), kw=dict(groups=2, padding=1)),
    "depthwise": dict(x=(2, 6, 10, 9), w=(6, 1, 3, 3), kw=dict(groups=6, padding=1)),
    "depthwise x2 stride 2": dict(x=(1, 4, 12, 11), w=(8, 1, 5, 5),
                                  kw=dict(groups=4, stride=2, padding=2)),
    "dilation 2": dict(x=(2, 4, 11, 12), w=(5, 4, 3, 3), kw=dict(dilation=2, padding=1)),
    "dilated, grouped, strided": dict(x=(2, 8, 13, 12), w=(4, 2, 3, 2),
                                      kw=dict(groups=4, dilation=(2, 3), stride=(2, 1),
                                              padding=(2, 1))),
}


@pytest.mark.parametrize("case", sorted(CONVS))
@pytest.mark.parametrize("bias", [False, True])
def test_grouped_dilated_conv2d_and_its_gradients_equal_the_cpus(case, bias):
    c = CONVS[case]
    x, w = randn(*c["x"], seed=1), randn(*c["w"], seed=2)
    if bias:
        b = randn(c["w"][0], seed=3)
        same_grads(lambda x, w, b: F.conv2d(x, w, b, **c["kw"]), x, w, b)
    else:
        same_grads(lambda x, w: F.conv2d(x, w, **c["kw"]), x, w)


def test_grouped_conv2d_is_queued():
    x, w = randn(2, 6, 10, 9, seed=1).to("rill"), randn(6, 1, 3, 3, seed=2).to("rill")
    got = queued(F.conv2d, x, w, padding=1, groups=6)
    same(got, F.conv2d(x.cpu(), w.cpu(), padding=1, groups=6))


TRANSPOSED = {
    "plain": dict(x=(2, 4, 5, 6), w=(4, 3, 3, 3), kw=dict()),
    "stride 2, output_padding 1": dict(x=(2, 4, 5, 6), w=(4, 3, 3, 3),
                                       kw=dict(stride=2, padding=1, output_padding=1)),
    "stride (3, 2), output_padding (2, 1)": dict(x=(1, 3, 4, 5), w=(3, 2, 4, 3),
                                                 kw=dict(stride=(3, 2), padding=(1, 1),
                                                         output_padding=(2, 1))),
    "groups 2, dilation 2": dict(x=(2, 4, 6, 5), w=(4, 3, 3, 3),
                                 kw=dict(groups=2, dilation=2, stride=2, padding=2)),
}


@pytest.mark.parametrize("case", sorted(TRANSPOSED))
def test_conv_transpose2d_and_its_gradients_equal_the_cpus(case):
    c = TRANSPOSED[case]
    x, w = randn(*c["x"], seed=1), randn(*c["w"], seed=2)
    b = randn(c["w"][1] * c["kw"].get("groups", 1), seed=3)
    same_grads(lambda x, w, b: F.conv_transpose2d(x, w, b, **c["kw"]), x, w, b)


def test_conv_transpose2d_is_queued():
    x, w = randn(2, 4, 5, 6, seed=1).to("rill"), randn(4, 3, 3, 3, seed=2).to("rill")
    got = queued(F.conv_transpose2d, x, w, stride=2, output_padding=1)
    same(got, F.conv_transpose2d(x.cpu(), w.cpu(), stride=2, output_padding=1))


POOLS = {
    "max ceil_mode": lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True),
    "max 3x3 stride 2 pad 1 ceil_mode": lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "max dilation 2": lambda x: F.max_pool2d(x, 3, 1, 1, dilation=2),
    "max dilation (2, 3) ceil_mode": lambda x: F.max_pool2d(x, (3, 2), 2, 1, dilation=(2, 3),
                                                            ceil_mode=True),
    "avg ceil_mode": lambda x: F.avg_pool2d(x, 2, 2, ceil_mode=True),
    "avg exclude pad": lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "avg exclude pad ceil_mode": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                        count_include_pad=False),
    "avg ceil_mode pad": lambda x: F.avg_pool2d(x, (3, 2), (2, 3), 1, ceil_mode=True),
    "avg divisor_override": lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
}


@pytest.mark.parametrize("case", sorted(POOLS))
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 10, 11)])
def test_pools_and_their_gradients_equal_the_cpus(case, shape):
    same_grads(POOLS[case], randn(*shape, seed=4))


def test_max_pool_indices_equal_the_cpus():
    x = randn(2, 3, 9, 8, seed=4)
    got = F.max_pool2d(x.to("rill"), 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True)
    want = F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True)
    same(got[0], want[0])
    assert torch.equal(got[1].cpu(), want[1])


def test_ceil_mode_pool_is_queued():
    x = randn(2, 3, 9, 8, seed=4).to("rill")
    got = queued(F.avg_pool2d, x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    same(got, F.avg_pool2d(x.cpu(), 3, 2, 1, ceil_mode=True, count_include_pad=False))


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_scale_grad_by_freq_equals_the_cpus(padding_idx):
    w = randn(10, 6, seed=1)
    idx = torch.tensor([[1, 2, 3, 1], [4, 1, 2, 9], [2, 2, 0, 1]])
    fn = lambda w: F.embedding(idx.to(w.device), w, padding_idx=padding_idx,
                               scale_grad_by_freq=True)
    same_grads(fn, w)
    # The same bits on a second run: every sum in one order.
    leaf = w.to("rill").requires_grad_()
    fn(leaf).sum().backward()
    again = leaf.grad.cpu()
    leaf.grad = None
    fn(leaf).sum().backward()
    assert torch.equal(leaf.grad.cpu(), again)


def test_trace_shows_no_host_function_for_these_ops(tmp_path):
    """rill's trace names each command after the aten op and its kernel: the
    grouped, dilated and transposed convolutions, the pools and the
    embedding's backward ran as rill's kernels, and none as a host function
    running PyTorch's CPU kernel (as each did before, e.g.
    "aten::convolution_overrideable (host function)")."""
    code = textwrap.dedent("""
        import torch, torch_rill
        import torch.nn.functional as F
        x = torch.randn(2, 4, 9, 9, device="rill", requires_grad=True)
        wg = torch.randn(4, 1, 3, 3, device="rill", requires_grad=True)
        wd = torch.randn(4, 4, 3, 3, device="rill", requires_grad=True)
        wt = torch.randn(4, 3, 3, 3, device="rill", requires_grad=True)
        emb = torch.randn(10, 4, device="rill", requires_grad=True)
        idx = torch.tensor([1, 2, 1, 5], device="rill")
        y = F.conv2d(x, wg, groups=4, padding=1) + F.conv2d(x, wd, dilation=2, padding=2)
        t = F.conv_transpose2d(y, wt, stride=2, output_padding=1)
        p = F.max_pool2d(t, 3, 2, ceil_mode=True).sum() + F.max_pool2d(t, 3, 1, dilation=2).sum()
        p = p + F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False).sum()
        p = p + F.avg_pool2d(t, 2, divisor_override=3).sum()
        p = p + F.embedding(idx, emb, scale_grad_by_freq=True).sum()
        p.backward()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    ops = ("aten::convolution_overrideable", "aten::convolution_backward_overrideable",
           "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
           "aten::avg_pool2d", "aten::avg_pool2d_backward", "aten::embedding_dense_backward")
    hosts = sorted(n for n in names if n.endswith("(host function)") and n.startswith(ops))
    assert not hosts, hosts
    # Trace names are cut at 63 characters: the kernels' names by their starts.
    for want in ("aten::convolution_overrideable (conv2d_ex_f32)",
                 "aten::convolution_overrideable (conv2d_backward_data_f32)",
                 "aten::convolution_backward_overrideable (conv2d_ex_f32)",
                 "aten::convolution_backward_overrideable (conv2d_backward_data",
                 "aten::convolution_backward_overrideable (conv2d_backward_filt",
                 "aten::max_pool2d_with_indices (pool2d_ex_f32)",
                 "aten::max_pool2d_with_indices_backward (max_pool2d_backward_f",
                 "aten::avg_pool2d (pool2d_ex_f32)",
                 "aten::avg_pool2d_backward (avg_pool2d_backward_ex_f32)",
                 "aten::embedding_dense_backward (embedding_backward_f32)",
                 "aten::embedding_dense_backward (binary_f32)"):
        assert any(n.startswith(want) for n in names), (want, sorted(names))
