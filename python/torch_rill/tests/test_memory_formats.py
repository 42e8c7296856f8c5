# SPDX-License-Identifier: MIT
"""Results and gradients keep the layout PyTorch's `cpu` device gives them:
a channels-last input or weight gives channels-last results and gradients
through convolutions (rill's kernels and the fallback), batch norm, pools,
element-wise ops and activations' backward, and a transposed operand a
transposed result, with the CPU's values."""

import pytest
import torch
import torch.nn.functional as F

from test_nn_kernels import randn, same

CL = torch.channels_last


def layout(t):
    """What a layout decides: the strides of the dimensions longer than one."""
    return tuple(st for n, st in zip(t.shape, t.stride()) if n > 1)


def run(fn, shapes, formats, device):
    """fn on tensors of shapes (formats: channels-last or not) on device: its
    result and the gradients of its sum with respect to them."""
    leaves = []
    for i, (shape, cl) in enumerate(zip(shapes, formats)):
        t = randn(*shape, seed=i)
        t = t.contiguous(memory_format=CL) if cl else t
        leaves.append(t.to(device).requires_grad_())
    out = fn(*leaves)
    weight = randn(*out.shape, seed=9).to(device).contiguous(memory_format=CL) \
        if out.dim() == 4 else randn(*out.shape, seed=9).to(device)
    grads = torch.autograd.grad(out, leaves, weight)
    return [out.detach(), *grads]


def bn_train(x, w, b):
    return F.batch_norm(x, None, None, w, b, training=True)


def bn_eval(x, w, b):
    stats = torch.zeros(3, device=x.device), torch.ones(3, device=x.device)
    return F.batch_norm(x, *stats, w, b)


OPS = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(2, 3, 6, 5), (4, 3, 3, 3), (4,)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2),
                         [(2, 3, 5, 5), (3, 4, 3, 3)]),
    # output_padding not below the stride: PyTorch's CPU kernel, queued
    "conv_transpose2d fallback": (
        lambda x, w: F.conv_transpose2d(x, w, stride=(3, 2), output_padding=(2, 3), groups=2,
                                        dilation=4),
        [(2, 2, 4, 4), (2, 2, 4, 5)]),
    "batch_norm training": (bn_train, [(2, 3, 5, 4), (3,), (3,)]),
    "batch_norm evaluation": (bn_eval, [(2, 3, 5, 4), (3,), (3,)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [(2, 3, 7, 7)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [(2, 3, 6, 6)]),
    "add": (torch.add, [(2, 3, 5, 5), (2, 3, 5, 5)]),
    "mul broadcast": (torch.mul, [(2, 3, 5, 5), (3, 1, 1)]),
    "relu": (F.relu, [(2, 3, 5, 5)]),
    "gelu": (F.gelu, [(2, 3, 5, 5)]),
    "sigmoid": (torch.sigmoid, [(2, 3, 5, 5)]),
    "tanh": (torch.tanh, [(2, 3, 5, 5)]),
}


@pytest.mark.parametrize("cl_first", [True, False])
@pytest.mark.parametrize("name", sorted(OPS))
def test_results_and_gradients_keep_the_cpus_layout(name, cl_first):
    fn, shapes = OPS[name]
    formats = [len(s) == 4 and (i == 0) == cl_first for i, s in enumerate(shapes)]
    if not any(formats):
        formats = [len(s) == 4 for s in shapes]
    got, want = run(fn, shapes, formats, "rill"), run(fn, shapes, formats, "cpu")
    for g, w in zip(got, want):
        assert layout(g) == layout(w)
        same(g, w, 1e-4)
    if cl_first:  # a channels-last first operand makes a channels-last result
        assert got[0].is_contiguous(memory_format=CL)


def test_channels_last_3d_convolution_keeps_its_layout():
    x = randn(2, 3, 4, 4, 4).contiguous(memory_format=torch.channels_last_3d)
    w = randn(4, 3, 2, 2, 2, seed=1)
    got, want = F.conv3d(x.to("rill"), w.to("rill")), F.conv3d(x, w)
    assert got.is_contiguous(memory_format=torch.channels_last_3d)
    assert layout(got) == layout(want)
    same(got, want, 1e-4)


def test_transposed_operands_give_a_transposed_result():
    a, b = randn(3, 4), randn(4)
    got, want = a.to("rill").t() * b[:3].to("rill"), a.t() * b[:3]
    assert got.stride() == want.stride() == (1, 4)
    same(got, want)
    assert (a.to("rill").t() + 1).stride() == (a.t() + 1).stride()
