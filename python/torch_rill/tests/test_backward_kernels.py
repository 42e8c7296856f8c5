# SPDX-License-Identifier: MIT
"""The backward of pooling, layer norm and batch norm as rill kernels queued
on the current stream (float32): max_pool2d_with_indices_backward and
avg_pool2d_backward where the forward was a rill kernel,
native_layer_norm_backward and native_batch_norm_backward (training and
evaluation, as the _legit variants reach it too) composed of rill's
reductions and element-wise ops. Gradients equal the CPU's within 1e-5, a
training step of a small residual network equals the CPU's, the trace
names rill's kernels, and the cases they do not take go to the fallback
with the CPU's results."""

import copy
import itertools
import textwrap

import pytest
import torch
import torch.nn.functional as F

from conftest import delay, traced_names

TOL = 1e-5


def same(got, want, tol=TOL):
    assert got.device.type == "rill"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol, equal_nan=True)


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def queued(op, *args):
    """op(*args) on a stream held back by a host function: returns op's
    result, computed once the stream runs it."""
    s = torch.rill.Stream()
    s.wait_stream(torch.rill.current_stream())
    with torch.rill.stream(s):
        delay(s, 0.2)
        out = op(*args)
    torch.rill.current_stream().wait_stream(s)
    return out


def to_rill(args):
    return [a.to("rill") if isinstance(a, torch.Tensor) else a for a in args]


def module_grads(module, x, device):
    """The module's output and the gradients of the output's weighted sum
    with respect to x and the module's parameters, on device."""
    m = copy.deepcopy(module).to(device)
    leaf = x.detach().to(device).requires_grad_()
    out = m(leaf)
    (out * randn(*out.shape, seed=9).to(device)).sum().backward()
    return [out.detach(), leaf.grad] + [p.grad for p in m.parameters()]


def same_module_grads(module, x, tol=TOL):
    got, want = module_grads(module, x, "rill"), module_grads(module, x, "cpu")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w, tol)


# ---- pooling

POOLS = {
    "2x2": dict(kernel_size=2),
    "3x3 stride 2 pad 1": dict(kernel_size=3, stride=2, padding=1),
    "3x3 stride 1 pad 1": dict(kernel_size=3, stride=1, padding=1),
    "rectangular": dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0)),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_max_pool_backward_equals_the_cpus(name):
    kw = POOLS[name]
    x = randn(2, 3, 9, 8, seed=1)
    x[0, 0, :3, :3] = 1.0  # ties: the first largest
    k, st, pad = kw["kernel_size"], kw.get("stride", kw["kernel_size"]), kw.get("padding", 0)
    out, idx = F.max_pool2d(x, return_indices=True, **kw)
    g = randn(*out.shape, seed=2)
    op = torch.ops.aten.max_pool2d_with_indices_backward
    args = (g, x, k, st, pad, 1, False, idx)
    same(queued(op, *to_rill(args)), op(*args))
    same_module_grads(torch.nn.MaxPool2d(**kw), x)
    same_module_grads(torch.nn.MaxPool2d(**kw), x[0])  # unbatched


@pytest.mark.parametrize("name", sorted(POOLS))
def test_avg_pool_backward_equals_the_cpus(name):
    kw = POOLS[name]
    x = randn(2, 3, 9, 8, seed=1)
    k, st, pad = kw["kernel_size"], kw.get("stride", kw["kernel_size"]), kw.get("padding", 0)
    out = F.avg_pool2d(x, **kw)
    g = randn(*out.shape, seed=2)
    op = torch.ops.aten.avg_pool2d_backward
    args = (g, x, k, st, pad, False, True, None)
    same(queued(op, *to_rill(args)), op(*args))
    # A strided gradient, made contiguous on the stream.
    gt = randn(*reversed(out.shape), seed=3).permute(3, 2, 1, 0)
    args = (gt, x, k, st, pad, False, True, None)
    same(op(*to_rill(args)), op(*args))
    same_module_grads(torch.nn.AvgPool2d(**kw), x)


POOL_BACKWARD_OPTIONS = {
    "max ceil_mode": torch.nn.MaxPool2d(2, ceil_mode=True),
    "max dilation": torch.nn.MaxPool2d(2, dilation=2),
    "avg ceil_mode": torch.nn.AvgPool2d(2, ceil_mode=True),
    "count_include_pad": torch.nn.AvgPool2d(3, padding=1, count_include_pad=False),
    "divisor_override": torch.nn.AvgPool2d(2, divisor_override=3),
}


@pytest.mark.parametrize("name", sorted(POOL_BACKWARD_OPTIONS))
def test_pool_backward_options_equal_the_cpus(name):
    same_module_grads(POOL_BACKWARD_OPTIONS[name], randn(2, 3, 7, 7, seed=1))


def test_pool_backward_of_float64_is_the_cpus():
    x = randn(2, 3, 6, 6, seed=1).double()
    for module in (torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(3, 1, 1)):
        same_module_grads(module.double(), x)


# ---- layer norm


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,normalized", [((4, 7, 16), (16,)), ((3, 5, 6), (5, 6)),
                                              ((10, 1), (1,))])
def test_layer_norm_backward_equals_the_cpus(shape, normalized, affine):
    x = randn(*shape, seed=1) * 2 + 0.5
    # One normalized element: dx is 0, where the CPU's formula leaves
    # rounding noise of about 1e-5.
    tol = 1e-4 if normalized == (1,) else TOL
    ln = torch.nn.LayerNorm(normalized, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            ln.weight.copy_(randn(*normalized, seed=2))
            ln.bias.copy_(randn(*normalized, seed=3))
    same_module_grads(ln, x, tol)
    # The op, queued, for every output_mask.
    w, b = (ln.weight.detach(), ln.bias.detach()) if affine else (None, None)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, normalized, w, b, 1e-5)
    g = randn(*shape, seed=4)
    op = torch.ops.aten.native_layer_norm_backward
    for mask in itertools.product([True, False], repeat=3):
        if not affine and (mask[1] or mask[2]):
            continue
        args = (g, x, normalized, mean, rstd, w, b, list(mask))
        got, want = queued(op, *to_rill(args)), op(*args)
        for gt, wt, asked in zip(got, want, mask):
            if asked:
                same(gt, wt, tol)
            else:
                assert gt is None or not gt.numel()


def test_layer_norm_backward_of_a_strided_gradient_and_float64_are_the_cpus():
    x = randn(5, 8, seed=1)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, (8,), None, None, 1e-5)
    g = randn(8, 5, seed=2).T
    op = torch.ops.aten.native_layer_norm_backward
    args = (g, x, (8,), mean, rstd, None, None, [True, False, False])
    same(op(*to_rill(args))[0], op(*args)[0])
    same_module_grads(torch.nn.LayerNorm(8).double(), x.double())  # the fallback


# ---- batch norm


def batch_norm(c, affine, train):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(c, affine=affine)
    with torch.no_grad():
        if affine:
            bn.weight.copy_(randn(c, seed=4))
            bn.bias.copy_(randn(c, seed=5))
        bn.running_mean.copy_(randn(c, seed=6))
        bn.running_var.copy_(randn(c, seed=7).abs() + 0.5)
    return bn.train(train)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_backward_equals_the_cpus(affine, train):
    x = randn(4, 3, 5, 6, seed=1) * 3 + 1
    same_module_grads(batch_norm(3, affine, train), x)
    same_module_grads(torch.nn.BatchNorm1d(3, affine=affine).train(train), x[:, :, 0])
    # The op, queued, for every output_mask.
    bn = batch_norm(3, affine, train)
    w = bn.weight.detach() if affine else None
    rm, rv = bn.running_mean.clone(), bn.running_var.clone()
    _, save_mean, save_invstd = torch.ops.aten.native_batch_norm(x, w, None, rm.clone(),
                                                                 rv.clone(), train, 0.1, 1e-5)
    g = randn(*x.shape, seed=8)
    op = torch.ops.aten.native_batch_norm_backward
    for mask in itertools.product([True, False], repeat=3):
        args = (g, x, w, rm, rv, save_mean, save_invstd, train, 1e-5, list(mask))
        got, want = queued(op, *to_rill(args)), op(*args)
        for gt, wt, asked in zip(got, want, mask):
            if asked:
                same(gt, wt)
            else:
                assert gt is None or not gt.numel()


def test_batch_norm_backward_cases_the_kernels_do_not_take_are_the_cpus():
    x = randn(4, 3, 5, seed=1)
    same_module_grads(torch.nn.BatchNorm1d(3).double(), x.double())
    # A strided weight: the fallback.
    g, w = randn(*x.shape, seed=2), randn(6, seed=3)
    op = torch.ops.aten.native_batch_norm_backward
    args = (g, x, w, torch.zeros(3), torch.ones(3), None, None, False, 1e-5, [True, True, True])
    rill_args = to_rill(args)
    rill_args[2] = rill_args[2][::2]
    args = args[:2] + (w[::2],) + args[3:]
    for got, want in zip(op(*rill_args), op(*args)):
        same(got, want)


# ---- a training step


class Block(torch.nn.Module):
    """A residual block as ResNet's, with max pooling before and average
    pooling and a layer norm after."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn0 = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.conv1 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.avg = torch.nn.AvgPool2d(2)
        self.norm = torch.nn.LayerNorm(8 * 4 * 4)
        self.head = torch.nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn0(self.stem(x))))
        y = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(x + self.bn2(self.conv2(y)))
        return self.head(self.norm(self.avg(x).flatten(1)))


def test_resnet_like_training_steps_equal_the_cpus():
    torch.manual_seed(0)
    cpu = Block()
    dev = copy.deepcopy(cpu).to("rill")
    x, target = randn(4, 3, 16, 16, seed=1), torch.tensor([0, 3, 1, 4])
    for model, device in ((cpu, "cpu"), (dev, "rill")):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(model(x.to(device)), target.to(device)).backward()
            opt.step()
    for got, want in zip(dev.state_dict().values(), cpu.state_dict().values()):
        if got.dtype == torch.float32:
            same(got, want)
    model = dev.eval()
    same(model(x.to("rill")).detach(), cpu.eval()(x).detach())


def test_trace_names_the_backward_kernels(tmp_path):
    """The backward ran as rill's kernels, not as the fallback's host
    functions: rill's trace names each command after the aten op and the
    kernel."""
    code = textwrap.dedent("""
        import torch, torch_rill
        import torch.nn.functional as F
        x = torch.randn(2, 3, 8, 8, device="rill", requires_grad=True)
        bn = torch.nn.BatchNorm2d(3).to("rill")
        ln = torch.nn.LayerNorm(4).to("rill")
        y = F.max_pool2d(bn(x), 2) + F.avg_pool2d(x, 3, 2, 1)
        ln(y).sum().backward()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    backward = sorted(n for n in names if "backward" in n)
    # The trace keeps a name's first 63 bytes.
    for want in ("aten::max_pool2d_with_indices_backward (max_pool2d_backward_f",
                 "aten::avg_pool2d_backward (avg_pool2d_backward_ex_f32)",
                 "aten::native_layer_norm_backward (layer_norm_backward_f32)",
                 "aten::native_batch_norm_backward (reduce_dim_f32)",
                 "aten::native_batch_norm_backward (binary_f32)"):
        assert any(n.startswith(want) for n in backward), backward
    assert not [n for n in backward if n.endswith("(host function)")], backward
    # The layer norm's backward is one launch.
    assert not [n for n in backward
                if n.startswith("aten::native_layer_norm_backward (")
                and "layer_norm_backward_f32" not in n], backward
