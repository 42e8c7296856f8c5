# SPDX-License-Identifier: MIT
"""The neural-network ops that run as rill kernels queued on the current
stream (float32): convolution, pooling, the backward of activations and
softmax, layer norm and embeddings. Results equal the CPU's within 1e-5 (forward, and
backward through autograd), they run in stream order without blocking the
host, and the cases they do not take go to PyTorch's CPU kernels with the
CPU's behaviour and errors."""

import copy
import re
import textwrap
import time

import pytest
import torch
import torch.nn.functional as F

from conftest import captured, delay, rill_stream, traced_names

TOL = 1e-5
# The CPU's vectorized loops may contract a multiply and an add into one
# rounding where rill rounds twice: a last bit.
ULPS = 1e-6


def same(got, want, tol=TOL):
    assert got.device.type == "rill"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol, equal_nan=True)


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def queued(op, *args, **kwargs):
    """Runs op(*args) on a stream held back by a host function: the call
    returns at once (a rill kernel was queued) rather than after the delay
    (the fallback waits for the stream). Returns op's result."""
    s = torch.rill.Stream()
    s.wait_stream(torch.rill.current_stream())
    with torch.rill.stream(s):
        delay(s, 0.3)
        start = time.monotonic()
        out = op(*args, **kwargs)
        spent = time.monotonic() - start
        assert not s.query()
    assert spent < 0.2, f"{spent:.3f} s: the op waited for the stream (the fallback)"
    torch.rill.current_stream().wait_stream(s)
    return out


def grads(fn, *tensors, device):
    """fn's result and the gradients of its sum (weighted by a fixed random
    tensor) with respect to tensors, computed on device."""
    leaves = [t.detach().to(device).requires_grad_() for t in tensors]
    out = fn(*leaves)
    weight = randn(*out.shape, seed=9).to(device)
    (out * weight).sum().backward()
    return [out.detach()] + [t.grad for t in leaves]


def same_grads(fn, *tensors, tol=TOL):
    for got, want in zip(grads(fn, *tensors, device="rill"), grads(fn, *tensors, device="cpu")):
        same(got, want, tol)


# ---- convolution


CONVS = {
    "3x3 pad 1": dict(padding=1),
    "stride 2": dict(stride=2, padding=1),
    "7x7 stride 2 pad 3": dict(stride=2, padding=3),
    "1x1": dict(),
    "rectangular": dict(stride=(1, 2), padding=(2, 0)),
    "no bias": dict(padding=1, bias=False),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv2d_equals_the_cpus(name):
    kw = dict(CONVS[name])
    bias = kw.pop("bias", True)
    kernel = 7 if name.startswith("7x7") else 1 if name == "1x1" else (3, 5)[
        name == "rectangular"]
    x, w, b = randn(2, 3, 11, 13, seed=1), randn(4, 3, kernel, kernel, seed=2), randn(4, seed=3)
    bb = b if bias else None
    want = F.conv2d(x, w, bb, **kw)
    got = queued(F.conv2d, x.to("rill"), w.to("rill"), bb.to("rill") if bias else None, **kw)
    same(got, want)
    # Backward through autograd (the CPU's convolution_backward).
    if bias:
        same_grads(lambda x, w, b: F.conv2d(x, w, b, **kw), x, w, b)


def test_conv2d_of_strided_operands_equals_the_cpus():
    x, w, b = randn(2, 6, 9, 9, seed=1), randn(3, 4, 3, 3, seed=2), randn(8, seed=3)
    xs, ws, bs = x[:, ::2], w.transpose(0, 1), b[::2]  # a slice, a transpose, a stride-2 bias
    want = F.conv2d(xs, ws, bs, padding=1)
    r = x.to("rill")[:, ::2], w.to("rill").transpose(0, 1), b.to("rill")[::2]
    same(queued(F.conv2d, *r, padding=1), want)
    cl = x.contiguous(memory_format=torch.channels_last)
    same(F.conv2d(cl.to("rill"), randn(5, 6, 3, 3).to("rill")),
         F.conv2d(cl, randn(5, 6, 3, 3)))


def test_other_conv_cases_equal_the_cpus():
    """Grouped, dilated and transposed convolutions (rill's kernels), conv1d
    and float64 (the CPU's)."""
    x = randn(2, 4, 8, 8, seed=1)
    r = x.to("rill")
    for kw, shape in ((dict(groups=2), (6, 2, 3, 3)), (dict(dilation=2), (6, 4, 3, 3))):
        w = randn(*shape, seed=2)
        same(F.conv2d(r, w.to("rill"), **kw), F.conv2d(x, w, **kw))
    w1 = randn(3, 8, 3, seed=2)
    same(F.conv1d(r[0], w1.to("rill")), F.conv1d(x[0], w1))
    wt = randn(4, 3, 3, 3, seed=2)
    same(F.conv_transpose2d(r, wt.to("rill")), F.conv_transpose2d(x, wt))
    w4 = randn(3, 4, 3, 3, seed=3)
    d = x.double()
    same(F.conv2d(d.to("rill"), w4.double().to("rill")), F.conv2d(d, w4.double()))
    # An unbatched input (PyTorch adds the batch dimension: the kernel), an
    # empty batch.
    same(queued(F.conv2d, r[0], w4.to("rill")), F.conv2d(x[0], w4))
    same(F.conv2d(r[:0], w4.to("rill")), F.conv2d(x[:0], w4))


def test_bad_convolutions_raise_pytorchs_errors():
    x = torch.ones(1, 4, 5, 5)
    for w in (torch.ones(2, 3, 3, 3), torch.ones(2, 4, 7, 7)):
        with pytest.raises(RuntimeError) as cpu_error:
            F.conv2d(x, w)
        with pytest.raises(RuntimeError, match=re.escape(str(cpu_error.value)[:40])):
            F.conv2d(x.to("rill"), w.to("rill"))
    with pytest.raises(RuntimeError):
        F.conv2d(x.to("rill"), torch.ones(2, 4, 3, 3).to("rill"), torch.ones(3).to("rill"))


# ---- pooling


POOLS = {
    "2x2": dict(kernel_size=2),
    "3x3 stride 2 pad 1": dict(kernel_size=3, stride=2, padding=1),
    "rectangular": dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0)),
}


@pytest.mark.parametrize("name", sorted(POOLS))
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_equals_the_cpus(kind, name):
    kw = POOLS[name]
    x = randn(2, 3, 9, 8, seed=1)
    if kind == "max":
        got, got_idx = queued(lambda t: F.max_pool2d(t, return_indices=True, **kw), x.to("rill"))
        want, want_idx = F.max_pool2d(x, return_indices=True, **kw)
        assert got_idx.device.type == "rill" and got_idx.dtype == torch.int64
        assert torch.equal(got_idx.cpu(), want_idx)
        op = lambda t: F.max_pool2d(t, **kw)  # noqa: E731
    else:
        op = lambda t: F.avg_pool2d(t, **kw)  # noqa: E731
        got, want = queued(op, x.to("rill")), op(x)
    same(got, want)
    same_grads(op, x)
    # Unbatched (3 dimensions) and strided inputs.
    same(op(x[0].to("rill")), op(x[0]))
    same(op(x.to("rill").transpose(2, 3)), op(x.transpose(2, 3)))


def test_max_pool_positions_of_ties_and_nans_are_the_cpus():
    x = torch.zeros(1, 2, 6, 6)
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = 1.0  # a tie in one window
    x[0, 1, 0, 1] = x[0, 1, 1, 0] = float("nan")  # two NaNs in one window
    got, got_idx = F.max_pool2d(x.to("rill"), 3, 2, 1, return_indices=True)
    want, want_idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    same(got, want, 0.0)
    assert torch.equal(got_idx.cpu(), want_idx)


def test_adaptive_avg_pool_to_one_is_a_queued_mean():
    x = randn(2, 5, 7, 6, seed=1)
    op = lambda t: F.adaptive_avg_pool2d(t, 1)  # noqa: E731
    same(queued(op, x.to("rill")), op(x))
    same_grads(op, x)
    same(F.adaptive_avg_pool2d(x.to("rill"), (2, 3)), F.adaptive_avg_pool2d(x, (2, 3)))
    # mean over adjacent dimensions, and not adjacent ones (the fallback).
    r = x.to("rill")
    same(queued(lambda t: t.mean((1, 2)), r), x.mean((1, 2)))
    same(r.sum((-1, -2, -3), keepdim=True), x.sum((-1, -2, -3), keepdim=True))
    same(r.mean((0, 2)), x.mean((0, 2)))
    with pytest.raises(RuntimeError, match="multiple times"):
        r.sum((1, 1))


POOL_OPTIONS = {
    "ceil_mode": lambda t: F.max_pool2d(t, 2, ceil_mode=True),
    "dilation": lambda t: F.max_pool2d(t, 2, dilation=2),
    "avg ceil_mode": lambda t: F.avg_pool2d(t, 2, ceil_mode=True),
    "count_include_pad": lambda t: F.avg_pool2d(t, 3, padding=1, count_include_pad=False),
    "divisor_override": lambda t: F.avg_pool2d(t, 2, divisor_override=3),
    "float64": lambda t: F.max_pool2d(t.double(), 2),
}


@pytest.mark.parametrize("name", sorted(POOL_OPTIONS))
def test_pooling_options_and_float64_equal_the_cpus(name):
    op = POOL_OPTIONS[name]
    x = randn(2, 3, 7, 7, seed=1)
    same(op(x.to("rill")), op(x))


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_bad_pooling_raises_pytorchs_errors(kind):
    op = getattr(F, f"{kind}_pool2d")
    for args in ((torch.ones(1, 1, 4, 4), 2, 2, 2), (torch.ones(1, 1, 2, 2), 5),
                 (torch.ones(2, 2), 2)):
        with pytest.raises((RuntimeError, IndexError)) as cpu_error:
            op(*args)
        with pytest.raises(cpu_error.type, match=re.escape(str(cpu_error.value)[:40])):
            op(args[0].to("rill"), *args[1:])


# ---- backward kernels


def test_relu_backward_is_a_queued_mask():
    x = randn(6, 7, seed=1)
    x[0, :3] = torch.tensor([0.0, -0.0, float("nan")])
    g = randn(6, 7, seed=2)
    g[1, 0] = float("inf")
    y = torch.relu(x)
    op = torch.ops.aten.threshold_backward
    for inp in (y, x):  # at relu's output (autograd's choice) or its input
        same(queued(op, g.to("rill"), inp.to("rill"), 0), op(g, inp, 0), 0.0)
        same(op(g.T.to("rill"), inp.T.to("rill"), 0.0), op(g.T, inp.T, 0.0), 0.0)
    same_grads(torch.relu, x, tol=0.0)
    # Another threshold, broadcasting, other dtypes: the fallback.
    same(op(g.to("rill"), x.to("rill"), 0.5), op(g, x, 0.5), 0.0)
    same(op(g[:1].to("rill"), x.to("rill"), 0), op(g[:1], x, 0), 0.0)
    same(op(g.double().to("rill"), x.double().to("rill"), 0), op(g.double(), x.double(), 0), 0.0)


def test_activation_backward_kernels_equal_the_cpus():
    x = randn(4, 5, seed=1)
    g = randn(4, 5, seed=2)
    for fn, op in ((torch.sigmoid, torch.ops.aten.sigmoid_backward),
                   (torch.tanh, torch.ops.aten.tanh_backward)):
        y = fn(x)
        same(queued(op, g.to("rill"), y.to("rill")), op(g, y), ULPS)
        # Strided operands.
        same(op(g.T.to("rill"), y.T.to("rill")), op(g.T, y.T), ULPS)
        same(op(g.to("rill").T, y.to("rill").T), op(g.T, y.T), ULPS)
        same_grads(fn, x, tol=ULPS)
    # Broadcasting operands and other dtypes: the fallback.
    y = torch.sigmoid(x)
    same(torch.ops.aten.sigmoid_backward(g[:1].to("rill"), y.to("rill")),
         torch.ops.aten.sigmoid_backward(g[:1], y), 0.0)
    d = g.double()
    same(torch.ops.aten.tanh_backward(d.to("rill"), d.to("rill")),
         torch.ops.aten.tanh_backward(d, d), 0.0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_equals_the_cpus(approximate):
    x = randn(6, 7, seed=1) * 3
    x[0, :5] = torch.tensor([0.0, -0.0, 30.0, -30.0, float("nan")])
    g = randn(6, 7, seed=2)
    op = torch.ops.aten.gelu_backward
    kw = dict(approximate=approximate)
    same(queued(op, g.to("rill"), x.to("rill"), **kw), op(g, x, **kw))
    same(op(g.T.to("rill"), x.T.to("rill"), **kw), op(g.T, x.T, **kw))
    same_grads(lambda t: F.gelu(t, **kw), x)
    # Other dtypes: the fallback.
    d = x.double()
    same(op(d.to("rill"), d.to("rill"), **kw), op(d, d, **kw))


def bits(t):
    return t.cpu().view(torch.int32)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_backward_has_the_cpus_bits(p):
    """grad * mask * scale rounded as the CPU rounds it: a dropped NaN or
    infinity gives NaN, a dropped negative -0, a kept one grad * scale
    rounded once (to infinity past float's range); in each dense layout
    (the result laid out as the CPU's), queued on the stream."""
    g = randn(2, 3, 4, 5, seed=1) * 10
    g.view(-1)[:6] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, -3.0, 3.3e38])
    mask = torch.rand(g.shape, generator=torch.Generator().manual_seed(2)) > p
    mask.view(-1)[:6] = torch.tensor([False, False, True, True, False, True])
    op = torch.ops.aten.native_dropout_backward
    scale = 1.0 / (1.0 - p)
    want = op(g, mask, scale)
    got = queued(op, g.to("rill"), mask.to("rill"), scale)
    assert torch.equal(bits(got), want.view(torch.int32))
    for view in (lambda t: t.contiguous(memory_format=torch.channels_last),
                 lambda t: t.transpose(1, 3)):
        want = op(view(g), view(mask), scale)
        got = op(view(g.to("rill")), view(mask.to("rill")), scale)
        assert got.stride() == want.stride()
        assert torch.equal(bits(got), want.view(torch.int32))


def test_dropout_backward_of_operands_in_other_layouts_has_the_cpus_bits():
    """A mask laid out otherwise than grad (attention's, transposed), an
    expanded grad (a sum's) and a sliced one: the kernel in the mask's
    layout, the result in the CPU's."""
    g = randn(4, 6, 8, seed=1)
    mask = randn(4, 6, 8, seed=2) > 0
    op = torch.ops.aten.native_dropout_backward
    cases = [(g, mask.transpose(0, 1).contiguous().transpose(0, 1)),
             (g.transpose(0, 2).contiguous().transpose(0, 2), mask),
             (randn(1, 6, 8, seed=3).expand(4, 6, 8), mask),
             (randn(4, 6, 16, seed=3)[:, :, ::2], mask)]
    for a, m in cases:
        want = op(a, m, 1.25)
        got = queued(op, a.to("rill"), m.to("rill"), 1.25)
        assert got.stride() == want.stride()
        assert torch.equal(bits(got), want.view(torch.int32))


def test_dropout_backward_cases_the_kernel_does_not_take_are_the_cpus():
    """A sliced mask, a float mask and float64: the fallback, with the
    CPU's result."""
    g = randn(4, 6, seed=1)
    mask = randn(4, 12, seed=2) > 0
    op = torch.ops.aten.native_dropout_backward
    cases = [(g, mask[:, ::2]), (g, mask[:, :6].float()), (g.double(), mask[:, :6])]
    for a, m in cases:
        same(op(a.to("rill"), m.to("rill"), 2.0), op(a, m, 2.0), 0.0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_forward_draws_the_cpus_mask_without_waiting(p):
    """native_dropout draws at submit, from the device's generator in the
    order of the other draws, the CPU's mask for the same seed, and returns
    without waiting for the stream's work; its output has the CPU's bits
    and layout."""
    x = randn(2, 3, 4, 5, seed=1) * 10
    x.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -0.0, -3.0])
    for view in (lambda t: t, lambda t: t.contiguous(memory_format=torch.channels_last),
                 lambda t: t.transpose(0, 3)):
        torch.manual_seed(11)
        torch.rand(3)
        want, want_mask = torch.ops.aten.native_dropout(view(x), p, True)
        after = torch.rand(3)
        d = view(x.to("rill"))
        torch.manual_seed(11)
        torch.rand(3, device="rill")
        got, got_mask = queued(torch.ops.aten.native_dropout, d, p, True)
        assert torch.equal(torch.rand(3, device="rill").cpu(), after)
        assert got.stride() == want.stride() and got_mask.stride() == want_mask.stride()
        assert got_mask.dtype == torch.bool and torch.equal(got_mask.cpu(), want_mask)
        assert torch.equal(bits(got), want.view(torch.int32))


def test_dropout_cases_the_kernel_does_not_take_are_the_cpus():
    """p 0 and 1, evaluation, float64 and a sliced input: the fallback
    (which synchronizes for its draw), with the CPU's results."""
    x = randn(4, 6, seed=1)
    for args in ((x, 0.0, True), (x, 1.0, True), (x, 0.5, False), (x.double(), 0.5, True),
                 (x[:, ::2], 0.5, True)):
        torch.manual_seed(5)
        want = torch.ops.aten.native_dropout(*args)
        torch.manual_seed(5)
        got = torch.ops.aten.native_dropout(args[0].to("rill"), *args[1:])
        for g, w in zip(got, want):
            assert g.device.type == "rill" and g.dtype == w.dtype and g.stride() == w.stride()
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


def test_a_capture_refuses_dropout_naming_it():
    """A replay would reuse the mask drawn at capture: the capture refuses
    the op, as before the kernel."""
    x = torch.randn(8, device="rill")
    g = torch.rill.RillGraph()
    with pytest.raises(RuntimeError) as error:
        with torch.rill.graph(g):
            torch.nn.functional.dropout(x, 0.5)
    messages, e = [], error.value
    while e is not None:  # the op's error, then the capture's end
        messages.append(str(e))
        e = e.__context__
    assert any("aten::native_dropout" in m and "cannot be captured" in m for m in messages), \
        messages
    torch.rill.synchronize()


def test_dropout_training_steps_equal_the_cpus():
    """A seeded dropout draws the CPU's mask (the device's generator), so
    two training steps of a transformer encoder layer with dropout (after
    its feed-forward layers and its attention, whose mask is transposed
    against its gradient) give the CPU's parameters."""
    cpu = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.2, batch_first=True)
    dev = copy.deepcopy(cpu).to("rill")
    x = randn(3, 5, 16, seed=4)
    for model, data in ((cpu, x), (dev, x.to("rill"))):
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        torch.manual_seed(7)
        for _ in range(2):
            opt.zero_grad()
            model(data).square().mean().backward()
            opt.step()
    for p, q in zip(dev.parameters(), cpu.parameters()):
        same(p.detach(), q.detach(), 1e-5)


def test_trace_shows_dropout_backward_as_a_kernel(tmp_path):
    """Before rill_op_masked_scale_f32, each dropout's backward ran
    PyTorch's CPU kernel as a host function, and its forward synchronized:
    here a sum's (expanded) gradient and a transformer encoder layer's
    step, which wait for nothing until the last line."""
    code = textwrap.dedent("""
        import torch, torch_rill
        x = torch.randn(8, 16, device="rill", requires_grad=True)
        torch.nn.functional.dropout(x, 0.25).sum().backward()
        layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
        layer.to("rill")(x.detach().view(2, 4, 16)).square().mean().backward()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert "aten::native_dropout (masked_scale_f32)" in names, sorted(names)
    assert "aten::native_dropout_backward (masked_scale_f32)" in names, sorted(names)
    hosts = sorted(n for n in names if n.startswith("aten::native_dropout")
                   and n.endswith("(host function)"))
    assert not hosts, hosts
    assert sum(n.startswith("rill_device_synchronize") for n in names) == 1, sorted(names)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_backward_kernels_equal_the_cpus(log, dim):
    fn = F.log_softmax if log else F.softmax
    op = torch.ops.aten._log_softmax_backward_data if log else torch.ops.aten._softmax_backward_data
    x, g = randn(3, 4, 5, seed=1) * 3, randn(3, 4, 5, seed=2)
    y = fn(x, dim)
    same(queued(op, g.to("rill"), y.to("rill"), dim, torch.float32),
         op(g, y, dim, torch.float32))
    same(op(g.transpose(0, 2).to("rill"), y.transpose(0, 2).to("rill"), dim, torch.float32),
         op(g.transpose(0, 2), y.transpose(0, 2), dim, torch.float32))
    same_grads(lambda t: fn(t, dim), x)
    with pytest.raises(IndexError):
        op(g.to("rill"), y.to("rill"), 3, torch.float32)


# ---- norms


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,normalized", [((4, 7, 16), (16,)), ((3, 5, 6), (5, 6)),
                                              ((10, 1), (1,))])
def test_layer_norm_equals_the_cpus(shape, normalized, affine):
    x = randn(*shape, seed=1) * 2 + 0.5
    w, b = randn(*normalized, seed=2), randn(*normalized, seed=3)
    args = (w, b) if affine else (None, None)
    op = torch.ops.aten.native_layer_norm
    got = queued(op, x.to("rill"), normalized,
                 *[a.to("rill") if a is not None else None for a in args], 1e-5)
    want = op(x, normalized, *args, 1e-5)
    for gt, wt in zip(got, want):
        same(gt, wt)
    # One normalized element: dx is 0, where the CPU's backward leaves
    # rounding noise of about 1e-5 (test_backward_kernels.py).
    tol = 1e-4 if normalized == (1,) else TOL
    if affine:
        same_grads(lambda x, w, b: F.layer_norm(x, normalized, w, b), x, w, b, tol=tol)
    else:
        same_grads(lambda x: F.layer_norm(x, normalized), x, tol=tol)
    t = x.transpose(0, -1)  # strided: made contiguous on the stream
    same(F.layer_norm(t.to("rill"), t.shape[-1:]), F.layer_norm(t, t.shape[-1:]))


def test_a_layer_norm_is_one_kernel(tmp_path):
    """native_layer_norm is one rill_op_layer_norm_f32: a captured
    nn.LayerNorm is a single layer_norm_f32 node, and its replay and its
    saved statistics equal the CPU's."""
    ln = torch.nn.LayerNorm(24).to("rill")
    with torch.no_grad():
        ln.weight.copy_(randn(24, seed=2).to("rill"))
        ln.bias.copy_(randn(24, seed=3).to("rill"))
    x = (randn(6, 5, 24, seed=1) * 3 + 1).to("rill")
    g, y, text = captured(tmp_path, lambda: ln(x))
    assert text.count("layer_norm_f32") == 1, text
    assert not re.search(r"binary_f32|reduce_dim_f32|map_f32", text), text
    g.replay()
    same(y, ln.cpu()(x.cpu()))


def test_layer_norm_cases_the_kernels_do_not_take_are_the_cpus():
    x = randn(3, 4, seed=1)
    same(F.layer_norm(x.double().to("rill"), (4,)), F.layer_norm(x.double(), (4,)))
    same(F.layer_norm(x[:0].to("rill"), (4,)), F.layer_norm(x[:0], (4,)))
    # A negative eps: PyTorch's CPU computes it; rill's kernel refuses it.
    same(F.layer_norm(x.to("rill"), (4,), eps=-1e-3), F.layer_norm(x, (4,), eps=-1e-3))
    for shape, w in (((5,), None), ((4,), torch.ones(5))):
        with pytest.raises(RuntimeError) as cpu_error:
            F.layer_norm(x, shape, w)
        with pytest.raises(RuntimeError, match=re.escape(str(cpu_error.value)[:40])):
            F.layer_norm(x.to("rill"), shape, w.to("rill") if w is not None else None)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (8, 3), (4, 3, 7)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_and_evaluation_equal_the_cpus(shape, affine):
    torch.manual_seed(0)
    bn = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[len(shape)]
    cpu = bn(shape[1], affine=affine)
    if affine:
        with torch.no_grad():
            cpu.weight.copy_(randn(shape[1], seed=4))
            cpu.bias.copy_(randn(shape[1], seed=5))
    dev = bn(shape[1], affine=affine)
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("rill")
    x = randn(*shape, seed=1) * 3 + 1
    for step in range(2):
        same(dev(x.to("rill")), cpu(x))
        same(dev.running_mean, cpu.running_mean)
        same(dev.running_var, cpu.running_var)
    same_grads(lambda t: F.batch_norm(t, None, None, training=True), x)
    # The op itself (the module also counts its batches, an int64 add on the
    # fallback): queued, the statistics updated in place.
    params = [dev.weight, dev.bias] if affine else [None, None]
    rm, rv = dev.running_mean.clone(), dev.running_var.clone()
    out = queued(torch.ops.aten.native_batch_norm, x.to("rill"), *params, rm, rv, True, 0.1, 1e-5)
    crm, crv = cpu.running_mean.clone(), cpu.running_var.clone()
    cparams = [cpu.weight, cpu.bias] if affine else [None, None]
    want = torch.ops.aten.native_batch_norm(x, *cparams, crm, crv, True, 0.1, 1e-5)
    for got, w in zip(out, want):
        same(got.detach(), w.detach())
    same(rm, crm)
    same(rv, crv)
    cpu.eval()
    dev.eval()
    same(queued(dev, x.to("rill")), cpu(x))
    same_grads(lambda t: F.batch_norm(t, cpu.running_mean.to(t.device),
                                      cpu.running_var.to(t.device)), x)


def test_batch_norm_cases_the_kernels_do_not_take_are_the_cpus():
    x = randn(1, 3, seed=1)
    # One value per channel in training: PyTorch's own error.
    with pytest.raises(ValueError) as cpu_error:
        F.batch_norm(x, None, None, training=True)
    with pytest.raises(ValueError, match=re.escape(str(cpu_error.value)[:40])):
        F.batch_norm(x.to("rill"), None, None, training=True)
    op = torch.ops.aten.native_batch_norm
    same(op(x.to("rill"), None, None, None, None, True, 0.1, 1e-5)[0],
         op(x, None, None, None, None, True, 0.1, 1e-5)[0])
    d = randn(4, 3, 5, seed=2).double()
    same(F.batch_norm(d.to("rill"), None, None, training=True),
         F.batch_norm(d, None, None, training=True))
    with pytest.raises(RuntimeError):
        F.batch_norm(randn(4, 3).to("rill"), torch.zeros(4).to("rill"),
                     torch.ones(4).to("rill"))


# ---- embeddings


def indices(*shape, high, seed=3):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def test_embedding_equals_the_cpus():
    w = randn(11, 6, seed=1)
    for idx in (indices(3, 4, high=11), indices(7, high=11).int(), torch.tensor(10),
                indices(2, 3, 4, high=11)):
        same(queued(F.embedding, idx.to("rill"), w.to("rill")), F.embedding(idx, w), 0.0)
        same(F.embedding(idx.to("rill"), w.to("rill"), padding_idx=2),
             F.embedding(idx, w, padding_idx=2), 0.0)
    # A strided weight and strided indices.
    wt = randn(6, 11, seed=2)
    idx = indices(4, 5, high=11)
    same(F.embedding(idx.T.to("rill"), wt.to("rill").T), F.embedding(idx.T, wt.T), 0.0)
    # Empty indices, other dtypes: the fallback, with the CPU's results and errors.
    empty = torch.zeros(0, 3, dtype=torch.long)
    same(F.embedding(empty.to("rill"), w.to("rill")), F.embedding(empty, w), 0.0)
    same(F.embedding(idx.to("rill"), w.double().to("rill")), F.embedding(idx, w.double()), 0.0)
    with pytest.raises(RuntimeError) as cpu_error:
        F.embedding(idx.float(), w)
    with pytest.raises(RuntimeError, match=re.escape(str(cpu_error.value)[:40])):
        F.embedding(idx.float().to("rill"), w.to("rill"))


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_backward_equals_the_cpus(padding_idx):
    idx = indices(5, 7, high=9)
    idx[0, :3] = 2
    w = randn(9, 4, seed=1)
    same_grads(lambda t: F.embedding(idx.to(t.device), t, padding_idx=padding_idx), w)
    op = torch.ops.aten.embedding_dense_backward
    g = randn(5, 7, 4, seed=2)
    pad = -1 if padding_idx is None else padding_idx % 9
    for i in (idx, idx.int()):
        same(queued(op, g.to("rill"), i.to("rill"), 9, pad, False), op(g, i, 9, pad, False))
    # scale_grad_by_freq (divided by the counts) and other dtypes (the fallback).
    same(op(g.to("rill"), idx.to("rill"), 9, pad, True), op(g, idx, 9, pad, True))
    d = g.double()
    same(op(d.to("rill"), idx.to("rill"), 9, pad, False), op(d, idx, 9, pad, False))


def test_embedding_backward_is_deterministic_over_many_repeats():
    """Many indices on few rows, summed across the device's workers: every
    run gives the same bits, and the CPU's sums within rounding."""
    idx = indices(20000, high=3)
    g = randn(20000, 64, seed=2)
    op = torch.ops.aten.embedding_dense_backward
    first = op(g.to("rill"), idx.to("rill"), 5, -1, False)
    for _ in range(3):
        assert torch.equal(op(g.to("rill"), idx.to("rill"), 5, -1, False).cpu(), first.cpu())
    same(first, op(g, idx, 5, -1, False), 1e-4)
    assert first.cpu()[3:].eq(0).all()


def test_embedding_index_out_of_range_fails_the_stream_naming_the_op():
    """The CPU raises at once; the kernel cannot see the indices before they
    are read: the error surfaces at the next synchronize, as CUDA's
    device-side assert does, and the stream runs again once cleared."""
    w = randn(5, 3, seed=1)
    idx = torch.tensor([0, 4, 9, 1])
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(idx, w)
    dw, didx = w.to("rill"), idx.to("rill")
    g = randn(4, 3, seed=2).to("rill")
    s = torch.rill.Stream()
    s.wait_stream(torch.rill.current_stream())
    for name, call in (("embedding_f32", lambda: F.embedding(didx, dw)),
                       ("embedding_backward_f32", lambda: torch.ops.aten.embedding_dense_backward(
                           g, didx, 5, -1, False))):
        with torch.rill.stream(s):
            call()  # no error yet: the index is read later
        try:
            with pytest.raises(RuntimeError, match=name + r".*index 9 at position 2 is out of "
                                                          r"range for 5 rows"):
                s.synchronize()
        finally:
            s.clear_error()
    with torch.rill.stream(s):  # the stream runs again
        out = F.embedding(didx.clamp(max=4), dw)
        same(out, F.embedding(idx.clamp(max=4), w), 0.0)


def test_embedding_training_steps_equal_the_cpus():
    """nn.Embedding (a padding row) through gelu and a linear layer: three
    SGD steps on rill leave the parameters the CPU's steps leave."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Embedding(20, 8, padding_idx=0),
                              torch.nn.GELU(approximate="tanh"), torch.nn.Linear(8, 3))
    dev = copy.deepcopy(cpu).to("rill")
    idx = indices(6, 5, high=20)
    idx[0, 0] = 0
    target = randn(6, 5, 3, seed=4)
    for model, device in ((cpu, "cpu"), (dev, "rill")):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            F.mse_loss(model(idx.to(device)), target.to(device)).backward()
            opt.step()
    for got, want in zip(dev.parameters(), cpu.parameters()):
        same(got.detach(), want.detach())


def test_trace_shows_the_embedding_and_gelu_kernels(tmp_path):
    """The ops ran as rill's kernels, not as the fallback's host functions:
    rill's trace names each command after the aten op and the kernel; and
    autograd's embedding_backward (sparse false) reached
    embedding_dense_backward."""
    code = textwrap.dedent("""
        import torch, torch_rill
        import torch.nn.functional as F
        w = torch.randn(10, 4, device="rill", requires_grad=True)
        x = torch.randn(3, 5, 4, device="rill", requires_grad=True)
        idx = torch.tensor([[1, 2, 3, 4, 5]] * 3, device="rill")
        (F.gelu(F.embedding(idx, w) + x) + F.gelu(x, approximate="tanh")).sum().backward()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    for want in ("aten::embedding (embedding_f32)",
                 "aten::embedding_dense_backward (embedding_backward_f32)",
                 "aten::gelu_backward (binary_f32)"):
        assert want in names, sorted(names)
