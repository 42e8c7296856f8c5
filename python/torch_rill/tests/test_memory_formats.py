# SPDX-License-Identifier: MIT
"""Results and gradients keep the layout PyTorch's `cpu` device gives them:
a channels-last input or weight gives channels-last results and gradients
through convolutions (rill's kernels and the fallback), batch norm, pools,
element-wise ops and activations' backward, and a transposed operand a
transposed result, with the CPU's values. Element-wise ops on channels-last
and transposed tensors, in place or not, run as rill's kernels."""

import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import traced_names
from test_nn_kernels import queued, randn, same

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


def channels_last(*shape, seed=0):
    return randn(*shape, seed=seed).contiguous(memory_format=CL)


# In-place and new-result element-wise ops on a dense tensor that is not
# contiguous: op(x, other) for x channels-last; other as given.
IN_PLACE = {
    "add_ channels-last": (lambda x, y: x.add_(y), lambda: channels_last(2, 3, 4, 5, seed=1)),
    "add_ contiguous": (lambda x, y: x.add_(y), lambda: randn(2, 3, 4, 5, seed=1)),
    "mul_ broadcast": (lambda x, y: x.mul_(y), lambda: randn(3, 1, 1, seed=1)),
    "div_ itself": (lambda x, _: x.div_(x), lambda: None),
    "sub_ alpha": (lambda x, y: x.sub_(y, alpha=0.5), lambda: channels_last(2, 3, 4, 5, seed=1)),
    "mul_ number": (lambda x, _: x.mul_(2.5), lambda: None),
    "relu_": (lambda x, _: x.relu_(), lambda: None),
    "fill_": (lambda x, _: x.fill_(3.0), lambda: None),
    "zero_": (lambda x, _: x.zero_(), lambda: None),
    "add alpha": (lambda x, y: torch.add(x, y, alpha=2.0),
                  lambda: channels_last(2, 3, 4, 5, seed=1)),
    "rsub number": (lambda x, _: 2.0 - x, lambda: None),
    "exp": (lambda x, _: torch.exp(x), lambda: None),
    "gelu": (lambda x, _: F.gelu(x), lambda: None),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_element_wise_ops_on_channels_last_are_queued_with_the_cpus_layout(name):
    op, other = IN_PLACE[name]
    x, y = channels_last(2, 3, 4, 5), other()
    want = op(x.clone(), y)
    r = x.to("rill")
    got = queued(op, r, None if y is None else y.to("rill"))
    assert layout(got) == layout(want)
    assert got.is_contiguous(memory_format=CL)
    same(got, want, 1e-6)
    if name.endswith("_"):  # in place: the result is x
        assert got.data_ptr() == r.data_ptr()
        same(r, want, 1e-6)


def test_in_place_ops_on_a_transposed_tensor_write_through_its_strides():
    a, b = randn(3, 4), randn(4, 3, seed=1)
    r = a.to("rill")
    r.t().add_(b.to("rill")).mul_(3.0).relu_()
    want = a.clone()
    want.t().add_(b).mul_(3.0).relu_()
    same(r, want, 1e-6)


# Views with gaps or repeats, taken of the same tensor on each device.
SPARSE = {
    "slice": (lambda: randn(2, 4, 5, 6), lambda t: t[:, :2]),
    "every other column": (lambda: randn(2, 4, 5, 6), lambda t: t[..., ::2]),
    "expanded": (lambda: randn(1, 4, 1, 6), lambda t: t.expand(2, 4, 5, 6)),
    "channels-last slice": (lambda: channels_last(2, 4, 5, 6), lambda t: t[:, 1:3]),
}
MAPS = {
    "times number": lambda t: t * 0.5,
    "number minus": lambda t: 2.0 - t,
    "relu": torch.relu,
    "gelu tanh": lambda t: F.gelu(t, approximate="tanh"),
    "exp": torch.exp,
}


@pytest.mark.parametrize("kind", sorted(SPARSE))
@pytest.mark.parametrize("name", sorted(MAPS))
def test_maps_of_sliced_or_expanded_tensors_are_queued_with_the_cpus_layout(name, kind):
    """A map of a tensor with gaps or repeats (a gradient of a sum is
    expanded) runs as rill's copy and map kernels, laid out as on the CPU."""
    (base, view), op = SPARSE[kind], MAPS[name]
    x = base()
    r = view(x.to("rill"))
    assert not r.is_contiguous() and not r.is_contiguous(memory_format=CL)
    got, want = queued(op, r), op(view(x))
    assert layout(got) == layout(want)
    same(got, want, 1e-6)


def test_in_place_ops_on_a_slice_keep_the_memory_around_it():
    x = randn(2, 4, 5, 6)
    r = x.to("rill")
    r[:, 1:3].mul_(2.0).relu_().add_(1.0)
    x[:, 1:3].mul_(2.0).relu_().add_(1.0)
    same(r, x, 1e-6)


def test_an_input_overlapping_the_output_in_another_view_goes_to_pytorchs_kernel():
    """x.add_(v) where v is a view of x's memory other than x: PyTorch's
    CPU kernel decides (here: an error for the partial overlap)."""
    x = channels_last(2, 3, 4, 4)
    r = x.to("rill")
    with pytest.raises(RuntimeError, match="memory location"):
        x.add_(x.transpose(2, 3))
    with pytest.raises(RuntimeError, match="memory location"):
        r.add_(r.transpose(2, 3))
    same(r, x)


def test_trace_shows_the_element_wise_cases_above_as_kernels_only(tmp_path):
    """Every case of IN_PLACE, MAPS of SPARSE, and the transposed in-place
    chain, run in one traced process: none runs as a host function."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import torch, torch_rill
        from test_memory_formats import IN_PLACE, MAPS, SPARSE, channels_last
        for op, other in IN_PLACE.values():
            y = other()
            op(channels_last(2, 3, 4, 5).to("rill"), None if y is None else y.to("rill"))
        for base, view in SPARSE.values():
            for op in MAPS.values():
                op(view(base().to("rill")))
        t = torch.randn(3, 4, device="rill")
        t.t().add_(torch.randn(4, 3, device="rill")).mul_(3.0).relu_()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert not [n for n in names if "host function" in n], sorted(names)


def test_trace_shows_a_channels_last_residual_block_with_no_host_function(tmp_path):
    """A ResNet basic block in channels-last, forward and backward, with
    in-place ReLUs and residual add: each op runs as a rill kernel, none as a
    host function running PyTorch's CPU kernel ("aten::add_ (host
    function)", as the in-place ops did on channels-last tensors)."""
    code = textwrap.dedent("""
        import torch, torch_rill
        import torch.nn.functional as F
        cl = torch.channels_last
        x = torch.randn(2, 4, 8, 8, device="rill").contiguous(memory_format=cl)
        w1 = torch.randn(4, 4, 3, 3, device="rill", requires_grad=True)
        w2 = torch.randn(4, 4, 3, 3, device="rill", requires_grad=True)
        g, b = torch.ones(4, device="rill"), torch.zeros(4, device="rill")
        y = F.relu(F.batch_norm(F.conv2d(x, w1, padding=1), None, None, g, b, True), inplace=True)
        y = F.batch_norm(F.conv2d(y, w2, padding=1), None, None, g, b, True)
        y += x
        y = F.relu(y, inplace=True)
        y = y * 0.5
        y.sum().backward()
        with torch.no_grad():
            w1.add_(w1.grad, alpha=-0.1)
            w1.grad.zero_()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert not [n for n in names if "host function" in n], sorted(names)
