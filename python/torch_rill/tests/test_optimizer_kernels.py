# SPDX-License-Identifier: MIT
"""The ops an optimizer step and autograd's gradient buffers reach, as rill
kernels queued on the current stream (float32): add, add_, sub and sub_
with an alpha (SGD's p.add_(g, alpha=-lr)), the out= forms of add, sub, mul
and div (which PyTorch's _foreach_ ops call for each tensor), and zero_.
Results equal the CPU's within 1e-5, the cases the kernels do not take
(broadcasting with an alpha, other dtypes, overlapping operands, an out= to
resize) give the CPU's results through the fallback, and a traced SGD step,
with momentum and weight decay, runs no host function."""

import textwrap
from pathlib import Path

import pytest
import torch

from conftest import traced_names
from test_nn_kernels import queued

TOL = 1e-5


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def same(got, want):
    assert got.device.type == "rill" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("alpha", [-0.01, 2, 0.5, -3.25, 1e-30])
@pytest.mark.parametrize("op", ["add", "sub"])
def test_an_alpha_equals_the_cpus(op, alpha):
    a, b = randn(5, 7), randn(5, 7, seed=1)
    fn = getattr(torch, op)
    same(fn(a.to("rill"), b.to("rill"), alpha=alpha), fn(a, b, alpha=alpha))
    got, want = a.to("rill"), a.clone()
    getattr(got, op + "_")(b.to("rill"), alpha=alpha)
    getattr(want, op + "_")(b, alpha=alpha)
    same(got, want)


def test_an_alpha_with_the_tensor_itself_in_place():
    a = randn(64)
    got = a.to("rill")
    got.add_(got, alpha=-0.5)
    same(got, a + (-0.5) * a)


@pytest.mark.parametrize("case", ["broadcast", "double", "overlap", "int alpha on ints"])
def test_cases_the_kernel_does_not_take_are_the_cpus(case):
    if case == "broadcast":
        a, b = randn(4, 3), randn(3, seed=1)
    elif case == "double":
        a, b = randn(4, 3).double(), randn(4, 3, seed=1).double()
    elif case == "int alpha on ints":
        a, b = torch.arange(12).reshape(4, 3), torch.arange(12).reshape(4, 3)
    else:
        # b overlaps a, shifted: PyTorch's own error, as on the CPU
        for t in (randn(8), randn(8).to("rill")):
            with pytest.raises(RuntimeError, match="refer to a single memory location"):
                t[1:].add_(t[:-1], alpha=2.0)
        return
    got = torch.add(a.to("rill"), b.to("rill"), alpha=3)
    torch.testing.assert_close(got.cpu(), torch.add(a, b, alpha=3), rtol=TOL, atol=TOL)


OUT_OPS = {
    "add": lambda a, b, out: torch.add(a, b, out=out),
    "sub alpha": lambda a, b, out: torch.sub(a, b, alpha=0.25, out=out),
    "mul": lambda a, b, out: torch.mul(a, b, out=out),
    "div": lambda a, b, out: torch.div(a, b, out=out),
    "mul number": lambda a, _, out: torch.mul(a, 0.9, out=out),
    "add itself": lambda a, _, out: torch.add(out, out, alpha=-0.5, out=out),
}


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("name", sorted(OUT_OPS))
def test_out_variants_are_queued_and_equal_the_cpus(name, channels_last):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    a, b, o = (randn(2, 3, 4, 5, seed=i).contiguous(memory_format=fmt) for i in range(3))
    ro = o.to("rill")
    got = queued(OUT_OPS[name], a.to("rill"), b.to("rill"), ro)
    want = OUT_OPS[name](a, b, o)
    assert got.data_ptr() == ro.data_ptr() and got.stride() == want.stride()
    same(ro, want)


@pytest.mark.parametrize("case", ["double out", "out to resize", "out overlapping an input"])
def test_out_variants_the_kernel_does_not_take_are_the_cpus(case):
    a, b = randn(4, 3), randn(4, 3, seed=1)
    results = []
    for dev in ("cpu", "rill"):
        x, y = a.to(dev), b.to(dev)
        if case == "double out":
            out = torch.zeros(4, 3, dtype=torch.float64, device=dev)
            torch.mul(x, y, out=out)
        elif case == "out to resize":
            out = torch.zeros(0, device=dev)
            torch.add(x, y, alpha=2.0, out=out)
        else:
            with pytest.raises(RuntimeError, match="memory location"):
                torch.mul(x[1:], y[1:], out=x[:-1])
            out = x
        results.append(out)
    assert results[1].dtype == results[0].dtype and results[1].shape == results[0].shape
    torch.testing.assert_close(results[1].cpu(), results[0], rtol=TOL, atol=TOL)


def test_foreach_updates_are_queued():
    ps, gs = [randn(3, 4, seed=i) for i in range(3)], [randn(3, 4, seed=9 + i) for i in range(3)]
    rps, rgs = [p.to("rill") for p in ps], [g.to("rill") for g in gs]
    queued(torch._foreach_mul_, rps, 0.9)
    queued(torch._foreach_add_, rps, rgs, alpha=-0.1)
    torch._foreach_mul_(ps, 0.9)
    torch._foreach_add_(ps, gs, alpha=-0.1)
    for got, want in zip(rps, ps):
        same(got, want)


def test_zero_fills_float_tensors_and_others():
    got = randn(3, 4).to("rill")
    got.zero_()
    assert got.cpu().eq(0).all()
    ints = torch.arange(6).to("rill")
    ints.zero_()
    assert ints.cpu().eq(0).all()
    strided = randn(4, 4).to("rill")
    strided[:, ::2].zero_()  # a strided view: the fallback's
    want = randn(4, 4)
    want[:, ::2] = 0
    torch.testing.assert_close(strided.cpu(), want)


def test_sgd_steps_equal_the_cpus():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    dev.load_state_dict(cpu.state_dict())
    dev.to("rill")
    x, y = randn(10, 6), torch.arange(10) % 3
    for model, opt, dx, dy in ((cpu, torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9), x, y),
                               (dev, torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9),
                                x.to("rill"), y.to("rill"))):
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            torch.nn.functional.cross_entropy(model(dx), dy).backward()
            opt.step()
    for p, q in zip(dev.parameters(), cpu.parameters()):
        same(p.detach(), q.detach())


def test_trace_shows_an_sgd_update_and_zero_grad_as_kernels(tmp_path):
    """Before these kernels, each parameter's update and each zero_grad
    ran PyTorch's CPU kernel as a host function."""
    code = textwrap.dedent("""
        import torch, torch_rill
        model = torch.nn.Linear(4, 3).to("rill")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(5, 4, device="rill")
        for _ in range(2):
            opt.zero_grad(set_to_none=False)
            model(x).sum().backward()
            opt.step()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert any(n.startswith("aten::add_ (add_f32)") for n in names), sorted(names)
    assert any(n.startswith("aten::zero_ (fill_f32)") for n in names), sorted(names)
    hosted = sorted(n for n in names if n.startswith(("aten::add_", "aten::zero_"))
                    and n.endswith("(host function)"))
    assert not hosted, hosted


def test_trace_shows_the_out_variants_and_foreach_updates_as_kernels_only(tmp_path):
    """Every case of OUT_OPS and the _foreach_ updates, run in one traced
    process: none runs as a host function."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import torch, torch_rill
        from test_optimizer_kernels import OUT_OPS
        for fmt in (torch.contiguous_format, torch.channels_last):
            for op in OUT_OPS.values():
                a, b, o = (torch.randn(2, 3, 4, 5, device="rill").contiguous(memory_format=fmt)
                           for _ in range(3))
                op(a, b, o)
        ps = [torch.randn(3, 4, device="rill") for _ in range(3)]
        torch._foreach_mul_(ps, 0.9)
        torch._foreach_add_(ps, [p.clone() for p in ps], alpha=-0.1)
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert not [n for n in names if n.endswith("(host function)")], sorted(names)


def test_trace_shows_an_sgd_step_with_momentum_as_kernels_only(tmp_path):
    """SGD with momentum and weight decay (PyTorch's _foreach_ path, as for
    CUDA) on a channels-last convolution and a linear layer: no op of the
    step runs as a host function, as _foreach_mul_'s mul.out did."""
    code = textwrap.dedent("""
        import torch, torch_rill
        cl = torch.channels_last
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                    torch.nn.Linear(64, 3)).to("rill", memory_format=cl)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        x = torch.randn(2, 3, 6, 6, device="rill").contiguous(memory_format=cl)
        for _ in range(3):
            opt.zero_grad()
            y = model(x)
            (y * y).mean().backward()
            opt.step()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert not [n for n in names if n.endswith("(host function)")], sorted(names)
