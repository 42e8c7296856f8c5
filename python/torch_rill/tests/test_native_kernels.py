# SPDX-License-Identifier: MIT
"""The ops beyond element-wise arithmetic that run as rill kernels queued on
the current stream (float32): matrix products, activations, arithmetic with
a CPU number, sums, means, softmax and strided copies. Results equal the
CPU's (element-wise ops exactly, where both compute the same float
expression; products and reductions within 1e-5), they run in stream order
without blocking the host, and the cases they do not take (other dtypes,
strided inputs of a map, several dimensions, empty tensors) go to the
fallback with the CPU's behaviour."""

import time

import pytest
import torch
import torch.nn.functional as F

from conftest import captured, delay

EXACT = 0.0
# The CPU's vectorized exp, log, tanh, erf and sqrt and the C library's
# (rill's) may differ in the last bits: rill's sqrt is correctly rounded,
# PyTorch's vectorized one (SLEEF's, within 0.5001 ulp) is not always.
ULPS = 4e-7


def same(got, want, rtol):
    assert got.device.type == "rill"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=rtol, equal_nan=True)


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


MAPS = {
    "relu": (torch.relu, EXACT),
    "gelu": (F.gelu, ULPS),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), ULPS),
    "sigmoid": (torch.sigmoid, ULPS),
    "tanh": (torch.tanh, ULPS),
    "silu": (F.silu, ULPS),
    "neg": (torch.neg, EXACT),
    "exp": (torch.exp, ULPS),
    "log": (lambda x: torch.log(x.abs()), ULPS),
    "sqrt": (lambda x: torch.sqrt(x.abs()), ULPS),
    "abs": (torch.abs, EXACT),
    "reciprocal": (torch.reciprocal, EXACT),
}


@pytest.mark.parametrize("name", sorted(MAPS))
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4, 5)])
def test_maps_equal_the_cpus(name, shape):
    op, rtol = MAPS[name]
    x = randn(*shape) * 3
    same(op(x.to("rill")), op(x), rtol)


@pytest.mark.parametrize("name", sorted(MAPS))
def test_maps_of_strided_tensors_and_other_dtypes_fall_back(name):
    op, rtol = MAPS[name]
    x = randn(6, 8)
    r = x.to("rill")
    same(op(r.T), op(x.T), rtol)
    same(op(r[:, ::2]), op(x[:, ::2]), rtol)
    d = x.double()
    same(op(d.to("rill")), op(d), EXACT)


def test_in_place_relu_and_nan():
    x = randn(5, 6)
    x[1, 2] = float("nan")
    r = x.to("rill")
    r.relu_()
    x.relu_()
    same(r, x, EXACT)
    t = randn(6, 5).to("rill").T
    want = t.cpu().relu()
    t.relu_()  # strided: the fallback, in place
    same(t, want, EXACT)


def test_gelu_with_an_unknown_approximation_is_pytorchs_error():
    with pytest.raises(RuntimeError, match="approximate"):
        F.gelu(torch.ones(3, device="rill"), approximate="cubic")


NUMBERS = [2.5, 3, -0.0, torch.tensor(0.1), torch.tensor(7.0, dtype=torch.float64),
           torch.tensor(4)]
ARITH = {
    "x+c": lambda x, c: x + c, "c+x": lambda x, c: c + x,
    "x-c": lambda x, c: x - c, "c-x": lambda x, c: c - x,
    "x*c": lambda x, c: x * c, "c*x": lambda x, c: c * x,
    "x/c": lambda x, c: x / c, "c/x": lambda x, c: c / x,
    "div(c,x)": lambda x, c: torch.div(c if torch.is_tensor(c) else torch.tensor(c), x),
}


@pytest.mark.parametrize("name", sorted(ARITH))
@pytest.mark.parametrize("number", range(len(NUMBERS)))
@pytest.mark.parametrize("shape", [(), (0,), (9,), (2, 3, 4)])
def test_arithmetic_with_a_cpu_number_equals_the_cpus(name, number, shape):
    c = NUMBERS[number]
    x = randn(*shape) + 0.5
    same(ARITH[name](x.to("rill"), c), ARITH[name](x, c), EXACT)


def test_in_place_arithmetic_with_a_cpu_number():
    x = randn(4, 5)
    r = x.to("rill")
    for op in ("add_", "sub_", "mul_", "div_"):
        getattr(r, op)(1.75)
        getattr(x, op)(1.75)
        same(r, x, EXACT)
    r.add_(2.0, alpha=3)  # an alpha: the fallback
    x.add_(2.0, alpha=3)
    same(r, x, EXACT)
    r.T.mul_(torch.tensor(3.0))  # strided: the fallback
    x.T.mul_(torch.tensor(3.0))
    same(r, x, EXACT)


def test_a_number_that_promotes_the_result_goes_to_the_fallback():
    # A 0-dim float32 tensor with a 0-dim float64 one: float64 (as on the CPU).
    x = torch.tensor(1.5)
    c = torch.tensor(2.25, dtype=torch.float64)
    same(x.to("rill") * c, x * c, EXACT)
    i = torch.arange(4, device="rill")
    same(i * 2.5, torch.arange(4) * 2.5, EXACT)
    same(x.to("rill") * (1 + 2j), x * (1 + 2j), EXACT)


PRODUCTS = 1e-5


@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (64, 128, 32), (0, 4, 5), (3, 0, 5), (3, 4, 0),
                                   (1, 1, 1)])
def test_mm_equals_the_cpus(m, k, n):
    a, b = randn(m, k, seed=1), randn(k, n, seed=2)
    same(a.to("rill") @ b.to("rill"), a @ b, PRODUCTS)
    # Transposed and sliced operands: made contiguous on the stream first.
    at, bt = randn(k, m, seed=3).T, randn(n, k, seed=4).T
    same(torch.mm(at.to("rill"), bt.to("rill")), at @ bt, PRODUCTS)
    a2 = randn(m, 2 * k, seed=5)[:, ::2]
    same(torch.mm(a2.to("rill")[:, :], b.to("rill")), a2 @ b, PRODUCTS)


def test_mm_of_other_dtypes_and_bad_shapes_is_the_cpus():
    a, b = randn(3, 4).double(), randn(4, 2).double()
    same(a.to("rill") @ b.to("rill"), a @ b, EXACT)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.mm(torch.ones(3, 4), torch.ones(5, 2))
    with pytest.raises(RuntimeError, match=str(cpu_error.value)[:20]):
        torch.mm(torch.ones(3, 4, device="rill"), torch.ones(5, 2, device="rill"))
    with pytest.raises(RuntimeError):
        torch.mm(torch.ones(3, 4, device="rill"), torch.ones(4, device="rill"))


@pytest.mark.parametrize("batch,m,k,n", [(2, 3, 4, 5), (5, 16, 8, 16), (0, 3, 4, 5),
                                         (2, 3, 0, 5)])
def test_bmm_equals_the_cpus(batch, m, k, n):
    a, b = randn(batch, m, k, seed=1), randn(batch, k, n, seed=2)
    same(torch.bmm(a.to("rill"), b.to("rill")), torch.bmm(a, b), PRODUCTS)
    bt = randn(batch, n, k, seed=3).transpose(1, 2)
    same(torch.bmm(a.to("rill"), bt.to("rill")), torch.bmm(a, bt), PRODUCTS)
    with pytest.raises(RuntimeError):
        torch.bmm(a.to("rill"), randn(batch + 1, k, n).to("rill"))


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (3, 1), (3, 5), ()])
def test_addmm_equals_the_cpus(bias_shape):
    bias, a, b = randn(*bias_shape, seed=1), randn(3, 4, seed=2), randn(4, 5, seed=3)
    r = [t.to("rill") for t in (bias, a, b)]
    same(torch.addmm(*r), torch.addmm(bias, a, b), PRODUCTS)
    same(torch.addmm(r[0], r[1], r[2].T.contiguous().T), torch.addmm(bias, a, b), PRODUCTS)
    # beta and alpha other than 1: the fallback.
    same(torch.addmm(*r, beta=0.5, alpha=2.0), torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
         PRODUCTS)
    # An empty product is the bias.
    e = randn(3, 0)
    same(torch.addmm(r[0], e.to("rill"), randn(0, 5).to("rill")),
         torch.addmm(bias, e, randn(0, 5)), EXACT)


def test_linear_layers_use_the_kernels_and_equal_the_cpus():
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 8)
    x = randn(4, 16)
    same(layer.to("rill")(x.to("rill")), layer.cpu()(x), PRODUCTS)
    x3 = randn(2, 3, 16)
    same(layer.to("rill")(x3.to("rill")), layer.cpu()(x3), PRODUCTS)


def test_a_linear_layer_is_one_kernel(tmp_path):
    """addmm adds the bias in the product's own launch: a captured linear
    layer is a single matmul node, with no add after it."""
    layer = torch.nn.Linear(16, 8).to("rill")
    x = randn(4, 16).to("rill")
    g, y, text = captured(tmp_path, lambda: layer(x))
    assert text.count("matmul_f32") == 1 and "binary_f32" not in text, text
    g.replay()
    same(y, layer.cpu()(x.cpu()), PRODUCTS)


REDUCTIONS = 1e-5


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2, -1, None, ()])
def test_sum_and_mean_equal_the_cpus(dim, keepdim):
    x = randn(4, 5, 6)
    r = x.to("rill")
    for op in (torch.sum, torch.mean):
        if dim is None:
            same(op(r), op(x), REDUCTIONS)
        else:
            same(op(r, dim, keepdim=keepdim), op(x, dim, keepdim=keepdim), REDUCTIONS)
        # Strided: made contiguous on the stream first.
        t = r.transpose(0, 2)
        want = op(x.transpose(0, 2)) if dim is None else op(x.transpose(0, 2), dim,
                                                            keepdim=keepdim)
        same(op(t) if dim is None else op(t, dim, keepdim=keepdim), want, REDUCTIONS)


def test_sums_the_kernels_do_not_take_fall_back():
    x = randn(3, 4, 5)
    r = x.to("rill")
    same(r.sum((0, 2)), x.sum((0, 2)), REDUCTIONS)
    same(r.sum(1, dtype=torch.float64), x.sum(1, dtype=torch.float64), REDUCTIONS)
    same(r.mean(-1, keepdim=True), x.mean(-1, keepdim=True), REDUCTIONS)
    e = torch.empty(3, 0)
    same(e.to("rill").sum(), e.sum(), EXACT)
    same(e.to("rill").sum(1), e.sum(1), EXACT)
    same(e.to("rill").mean(1), e.mean(1), EXACT)  # NaN, as on the CPU
    s = torch.tensor(2.5)
    same(s.to("rill").sum(), s.sum(), EXACT)
    same(s.to("rill").mean(0), s.mean(0), EXACT)
    with pytest.raises(IndexError):
        r.sum(3)
    i = torch.arange(6).reshape(2, 3)
    same(i.to("rill").sum(0), i.sum(0), EXACT)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_softmax_equals_the_cpus(log, dim):
    op = F.log_softmax if log else F.softmax
    x = randn(3, 4, 5) * 4
    same(op(x.to("rill"), dim), op(x, dim), REDUCTIONS)
    t = x.transpose(0, 2)
    same(op(t.to("rill").contiguous().transpose(0, 2).transpose(0, 2), dim), op(t, dim),
         REDUCTIONS)
    same(op(x.to("rill").transpose(0, 2), dim), op(t, dim), REDUCTIONS)
    e = torch.empty(0, 3)
    same(op(e.to("rill"), dim % 2), op(e, dim % 2), EXACT)
    s = torch.tensor(1.5)
    same(op(s.to("rill"), 0), op(s, 0), REDUCTIONS)


def test_softmax_of_other_dtypes_and_bad_dims_is_the_cpus():
    x = randn(3, 4).double()
    same(F.softmax(x.to("rill"), 1), F.softmax(x, 1), EXACT)
    with pytest.raises(IndexError):
        F.softmax(torch.ones(3, 4, device="rill"), 2)


@pytest.mark.parametrize("view", ["T", "slice", "permute", "expand", "seven_dims"])
def test_strided_copies_equal_the_cpus(view):
    make = {
        "T": lambda x: x.reshape(8, 16).T,
        "slice": lambda x: x.reshape(8, 16)[1:5, ::3],
        "permute": lambda x: x.permute(2, 0, 3, 1),
        "expand": lambda x: x[:1, :1].expand(3, 4, 4, 2),
        # More dimensions than rill's strided copy takes: the host's copy.
        "seven_dims": lambda x: x.reshape(2, 2, 2, 2, 2, 2, 2).transpose(0, 6),
    }[view]
    x = randn(4, 4, 4, 2)
    v = make(x.to("rill"))
    assert not v.is_contiguous()
    same(v.contiguous(), make(x).contiguous(), EXACT)
    assert v.contiguous().is_contiguous()
    same(v.clone(), make(x).clone(), EXACT)
    # Into a non-contiguous destination.
    dst = torch.zeros(tuple(reversed(v.shape)), device="rill").permute(
        *reversed(range(v.dim())))
    dst.copy_(v)
    same(dst, make(x), EXACT)


def test_a_strided_copy_within_one_storage_is_the_hosts():
    x = torch.arange(12.0)
    r = x.to("rill")
    r[6:].view(2, 3).T.copy_(r[:6].view(3, 2))
    x[6:].view(2, 3).T.copy_(x[:6].view(3, 2))
    same(r, x, EXACT)


QUEUED = {
    "mm": lambda a: a @ a,
    "mm_transposed": lambda a: a.T @ a,
    "addmm": lambda a: torch.addmm(a[0], a, a),
    "bmm": lambda a: torch.bmm(a.expand(2, -1, -1), a.expand(2, -1, -1)),
    "relu": torch.relu,
    "gelu": F.gelu,
    "scalar": lambda a: 2.0 * a - 1.0,
    "sum": lambda a: a.sum(),
    "sum_dim": lambda a: a.sum(1, keepdim=True),
    "mean_dim": lambda a: a.mean(0),
    "softmax": lambda a: a.softmax(-1),
    "log_softmax": lambda a: a.log_softmax(0),
    "contiguous": lambda a: a.T.contiguous(),
}


@pytest.mark.parametrize("name", sorted(QUEUED))
def test_kernels_queue_on_the_current_stream_without_blocking_the_host(name):
    op = QUEUED[name]
    x = randn(32, 32)
    a = x.to("rill")
    s = torch.rill.Stream()
    s.wait_stream(torch.rill.current_stream())
    with torch.rill.stream(s):
        delay(s, 0.3)
        start = time.monotonic()
        out = op(a)
        queued = time.monotonic() - start
        assert not s.query()
    assert queued < 0.2
    torch.rill.current_stream().wait_stream(s)
    want = op(x)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)
