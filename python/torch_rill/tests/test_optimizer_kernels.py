# SPDX-License-Identifier: MIT
"""The ops an optimizer step and autograd's gradient buffers reach, as rill
kernels queued on the current stream (float32): add, add_, sub and sub_
with an alpha (SGD's p.add_(g, alpha=-lr)), the out= forms of add, sub, mul
and div (which PyTorch's _foreach_ ops call for each tensor), Adam's
addcmul, addcdiv and lerp, amsgrad's clamp_min, gradient clipping's vector
norms, cat (stack) and clamp, and zero_. Results equal the CPU's within
1e-5, the cases the kernels do not take (broadcasting with an alpha, other
dtypes, overlapping operands, an out= to resize) give the CPU's results
through the fallback, and traced SGD (with momentum and weight decay) and
Adam steps, with gradient clipping, run no host function."""

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


def test_foreach_updates_are_queued():
    ps, gs = [randn(3, 4, seed=i) for i in range(3)], [randn(3, 4, seed=9 + i) for i in range(3)]
    rps, rgs = [p.to("rill") for p in ps], [g.to("rill") for g in gs]
    queued(torch._foreach_mul_, rps, 0.9)
    queued(torch._foreach_add_, rps, rgs, alpha=-0.1)
    torch._foreach_mul_(ps, 0.9)
    torch._foreach_add_(ps, gs, alpha=-0.1)
    for got, want in zip(rps, ps):
        same(got, want)


ADAM_OPS = {
    "addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=0.001),
    "addcmul_ value 1": lambda a, b, c: a.addcmul_(b, c),
    "addcmul out": lambda a, b, c: torch.addcmul(a, b, b, value=-0.3, out=c),
    "addcdiv": lambda a, b, c: torch.addcdiv(a, b, c.abs() + 0.5, value=-0.01),
    "addcdiv_": lambda a, b, c: a.addcdiv_(b, c.abs() + 0.5, value=2.5),
    "addcdiv out": lambda a, b, c: torch.addcdiv(a, b, a.abs() + 0.5, out=c),
    "lerp small weight": lambda a, b, c: torch.lerp(a, b, 0.1),
    "lerp_ large weight": lambda a, b, c: a.lerp_(b, 0.75),
    "lerp_ weight 1": lambda a, b, c: a.lerp_(b, 1.0),
    "lerp negative weight out": lambda a, b, c: torch.lerp(a, b, -0.4, out=c),
    "lerp weight past 1 out": lambda a, b, c: torch.lerp(a, b, 1.5, out=c),
    # amsgrad's _foreach_maximum_
    "clamp_min_": lambda a, b, c: a.clamp_min_(b),
    "clamp_min broadcast": lambda a, b, c: torch.clamp_min(a, b[0, :1]),
    "clamp_min out": lambda a, b, c: torch.clamp_min(a, b, out=c),
}


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("name", sorted(ADAM_OPS))
def test_adams_pointwise_ops_equal_the_cpus(name, channels_last):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    a, b, c = (randn(2, 3, 4, 5, seed=i).contiguous(memory_format=fmt) for i in range(3))
    got = queued(ADAM_OPS[name], a.to("rill"), b.to("rill"), c.to("rill"))
    want = ADAM_OPS[name](a, b, c)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)


def test_clamp_min_by_a_tensor_propagates_nan_from_either_side_as_the_cpu():
    # (Which zero of 0.0 and -0.0 comes out differs on the CPU between its
    # vectorized loop and the scalar one, so it is not compared.)
    nan = float("nan")
    a = torch.tensor([nan, 1.0, 2.0, -1.0, -3.0])
    b = torch.tensor([1.0, nan, 1.0, nan, -2.0])
    got, want = torch.clamp_min(a.to("rill"), b.to("rill")), torch.clamp_min(a, b)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)


def overlapping(op, x, y):
    """op writing x[:-1] from x[1:]: PyTorch's own error, on either device."""
    with pytest.raises(RuntimeError, match="memory location"):
        op(x, y)
    return x


# Cases the kernels do not take: fn(x, y) on each device gives the CPU's.
NOT_TAKEN = {
    "mul into a double out": lambda x, y: torch.mul(x, y, out=x.new_zeros(4, 3).double()),
    "add into an out to resize": lambda x, y: torch.add(x, y, alpha=2.0, out=x.new_zeros(0)),
    "mul into an out overlapping an input": lambda x, y: overlapping(
        lambda x, y: torch.mul(x[1:], y[1:], out=x[:-1]), x, y),
    "addcmul broadcast": lambda x, y: torch.addcmul(x, y[0], y, value=2.0),
    "lerp broadcast": lambda x, y: torch.lerp(x, y[:1], 0.3),
    "addcdiv double": lambda x, y: torch.addcdiv(x.double(), y.double(), y.double() + 3.0),
    "lerp tensor weight": lambda x, y: torch.lerp(x, y, torch.full_like(x, 0.3)),
    "addcmul_ overlapping": lambda x, y: overlapping(
        lambda x, y: x[1:].addcmul_(x[:-1], y[1:]), x, y),
}


@pytest.mark.parametrize("case", sorted(NOT_TAKEN))
def test_cases_the_kernels_do_not_take_are_the_cpus(case):
    a, b = randn(4, 3), randn(4, 3, seed=1)
    want = NOT_TAKEN[case](a, b)
    got = NOT_TAKEN[case](a.to("rill"), b.to("rill"))
    assert got.device.type == "rill" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=TOL, atol=TOL)


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


@pytest.mark.parametrize("op", [
    lambda x: torch.add(x, x, alpha=1e300),
    lambda x: x.sub_(x.clone().t(), alpha=-3.5e38),
    lambda x: torch.addcmul(x, x, x, value=1e300),
    lambda x: x.lerp_(x[0].clone(), 1e39),
], ids=["add", "sub_ transposed", "addcmul", "lerp_ broadcast"])
def test_a_number_past_floats_range_raises_at_the_call_as_on_the_cpu(op):
    """PyTorch's own error, at the call: not a failed stream later."""
    for x in (randn(3, 3), randn(3, 3).to("rill")):
        with pytest.raises(RuntimeError, match="cannot be converted to type float"):
            op(x)
    torch.rill.synchronize()


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1, (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 3])
def test_vector_norms_equal_the_cpus(ord, dim, keepdim):
    x = randn(4, 5, 6)
    x[0, 0, 0] = -7.5
    for t in (x, x.transpose(0, 2)):
        got = torch.linalg.vector_norm(t.to("rill"), ord, dim, keepdim)
        want = torch.linalg.vector_norm(t, ord, dim, keepdim)
        assert got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bounds", [(None, 1.0), (-0.5, None), (-1, 1), (0.3, -0.2), (2, 2),
                                    (-float("inf"), None), (None, float("nan"))])
def test_clamp_by_numbers_equals_the_cpus(bounds):
    x = torch.tensor([float("nan"), -3.0, -0.1, 0.0, 0.5, 4.0, float("inf")])
    lo, hi = bounds
    want = torch.clamp(x, lo, hi)
    for got in (torch.clamp(x.to("rill"), lo, hi), x.to("rill").clamp_(lo, hi),
                torch.clamp(x.to("rill"), lo, hi, out=torch.empty(7, device="rill")),
                torch.clamp(x.to("rill").expand(3, 7), lo, hi)[1]):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        torch.clamp(x.to("rill"))


@pytest.mark.parametrize("case", ["rows", "columns", "empty among them", "channels-last",
                                  "transposed", "stack of numbers", "ints"])
def test_cat_equals_the_cpus_values_and_layout(case):
    cl = torch.channels_last
    ts, dim = {
        "rows": ([randn(2, 3), randn(4, 3, seed=1)], 0),
        "columns": ([randn(2, 3), randn(2, 5, seed=1)], -1),
        "empty among them": ([randn(3), randn(0), randn(2, seed=1)], 0),
        "channels-last": ([randn(2, 3, 4, 5).contiguous(memory_format=cl),
                           randn(2, 2, 4, 5, seed=1).contiguous(memory_format=cl)], 1),
        "transposed": ([randn(3, 4).t(), randn(5, 4, seed=1).t()], 1),
        "stack of numbers": ([torch.tensor(1.5), torch.tensor(-2.0)], None),
        "ints": ([torch.arange(6).reshape(2, 3), torch.arange(3).reshape(1, 3)], 0),
    }[case]
    if dim is None:
        want, got = torch.stack(ts), torch.stack([t.to("rill") for t in ts])
    else:
        want, got = torch.cat(ts, dim), torch.cat([t.to("rill") for t in ts], dim)
    assert got.stride() == want.stride() and got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("case", ["mixed dtypes", "sizes differ", "legacy empty", "0-dim"])
def test_cat_the_copies_do_not_take_is_the_cpus(case):
    ts = {
        "mixed dtypes": [randn(2), torch.arange(2)],
        "sizes differ": [randn(2, 3), randn(3, 3)],
        "legacy empty": [randn(2, 3), torch.empty(0)],
        "0-dim": [torch.tensor(1.0), torch.tensor(2.0)],
    }[case]
    outcomes = []
    for dev in ("cpu", "rill"):
        try:
            outcomes.append(torch.cat([t.to(dev) for t in ts], 1 if case == "sizes differ" else 0))
        except RuntimeError as e:
            outcomes.append(str(e).split("\n")[0])
    if isinstance(outcomes[0], str):
        assert outcomes[1] == outcomes[0]
    else:
        assert outcomes[1].dtype == outcomes[0].dtype
        assert torch.equal(outcomes[1].cpu(), outcomes[0])


STEPPERS = {
    "SGD momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "Adam": lambda params: torch.optim.Adam(params, lr=0.01, weight_decay=0.01),
    "AdamW": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.01),
}


@pytest.mark.parametrize("name", sorted(STEPPERS))
def test_optimizer_steps_equal_the_cpus(name):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    dev.load_state_dict(cpu.state_dict())
    dev.to("rill")
    x, y = randn(10, 6), torch.arange(10) % 3
    for model, dx, dy in ((cpu, x, y), (dev, x.to("rill"), y.to("rill"))):
        opt = STEPPERS[name](model.parameters())
        for _ in range(4):
            opt.zero_grad(set_to_none=False)
            torch.nn.functional.cross_entropy(model(dx), dy).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
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
    """Every case of OUT_OPS, the _foreach_ updates and ADAM_OPS, run in one
    traced process: none runs as a host function."""
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
        from test_optimizer_kernels import ADAM_OPS
        for op in ADAM_OPS.values():
            op(*(torch.randn(2, 3, 4, 5, device="rill") for _ in range(3)))
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert not [n for n in names if n.endswith("(host function)")], sorted(names)


OPTIMIZERS = {
    "SGD momentum": "torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)",
    "Adam": "torch.optim.Adam(params, lr=1e-3)",
    "AdamW amsgrad": "torch.optim.AdamW(params, lr=1e-3, amsgrad=True)",
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_trace_shows_optimizer_steps_as_kernels_only(tmp_path, name):
    """Steps of SGD with momentum and weight decay, Adam and AdamW (their
    _foreach_ path, as for CUDA) with gradient clipping, on a channels-last
    convolution and a linear layer: no op of the step runs as a host
    function, as _foreach_mul_'s mul.out, lerp_, addcmul_, addcdiv_,
    clamp_min_, linalg_vector_norm, cat and clamp did."""
    code = textwrap.dedent(f"""
        import torch, torch_rill
        cl = torch.channels_last
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                    torch.nn.Linear(64, 3)).to("rill", memory_format=cl)
        params = model.parameters()
        opt = {OPTIMIZERS[name]}
        x = torch.randn(2, 3, 6, 6, device="rill").contiguous(memory_format=cl)
        for _ in range(3):
            opt.zero_grad()
            y = model(x)
            (y * y).mean().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    assert not [n for n in names if n.endswith("(host function)")], sorted(names)
