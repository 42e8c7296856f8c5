# SPDX-License-Identifier: MIT
"""The ops an optimizer step and autograd's gradient buffers reach, as rill
kernels queued on the current stream (float32): add, add_, sub and sub_
with an alpha (SGD's p.add_(g, alpha=-lr)), and zero_. Results equal the
CPU's within 1e-5, the cases the kernels do not take (broadcasting with an
alpha, other dtypes, overlapping operands) give the CPU's results through
the fallback, and a traced SGD step runs no host function."""

import textwrap

import pytest
import torch

from conftest import traced_names

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
