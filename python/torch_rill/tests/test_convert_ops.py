# SPDX-License-Identifier: MIT
"""Conversions between bool, uint8, int32, int64, float32 and float64 on one
rill device (copy_, .to() and the dtype methods), float32 ops meeting
integer and bool tensors, sum, all and any of bool tensors, and arange as
rill kernels queued on the current stream: results equal the CPU's bit for
bit, laid out as the CPU lays them out, they queue without blocking the
host and replay from a graph, and what the kernels do not take goes to the
fallback with the CPU's results and errors."""

import math
import textwrap
import time
import warnings

import pytest
import torch

from conftest import (as_on_the_cpu, assert_same, assert_stream_works, first_line, gate,
                      stream_error, traced_names)

DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float32, torch.float64]
METHODS = {torch.bool: "bool", torch.uint8: "byte", torch.int32: "int", torch.int64: "long",
           torch.float32: "float", torch.float64: "double"}


def pool(dtype):
    """Values that are easy to convert wrongly: NaN, signed zeros,
    infinities, the extremes, fractions about a byte's range, and integers
    past int32's range and past what a float holds exactly."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_floating_point:
        f = torch.finfo(dtype)
        values = [math.nan, -0.0, 0.0, math.inf, -math.inf, f.max, -f.max, 1e20, -1e20, -1.5,
                  1.5, -0.5, 0.5, 1.0, 255.7, 256.5, -255.7, -256.5, 3e9, -3e9, 2 ** 31,
                  -2 ** 31, 2 ** 32 + 1, 2 ** 53 + 1, 2 ** 62 + 2 ** 38 + 1, 2 ** 63, -2 ** 63,
                  2 ** 64, f.tiny]
        return torch.tensor(values, dtype=dtype)
    i = torch.iinfo(dtype)
    values = [i.min, i.min + 1, -2 ** 62 - 2 ** 38 - 1, -2 ** 53 - 1, -3 * 10 ** 9,
              -2 ** 31 - 1, -2 ** 31, -257, -256, -255, -2, -1, 0, 1, 2, 127, 128, 254, 255,
              256, 257, 2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31, 3 * 10 ** 9, 2 ** 53 + 1,
              2 ** 62 + 2 ** 38 + 1, i.max - 1, i.max]
    return torch.tensor([v for v in values if i.min <= v <= i.max], dtype=dtype)


def sample(dtype, shape, seed):
    """A tensor of shape holding pool(dtype)'s values, each of them where
    there is room for all, in an order the seed shuffles."""
    values = pool(dtype)
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    index = torch.arange(n) % len(values)
    return values[index[torch.randperm(n, generator=g)]].reshape(shape)


@pytest.fixture(autouse=True)
def _no_failed_stream_left():
    """A test that fails the stream fails, and leaves it cleared for the next."""
    yield
    error = stream_error()
    assert error is None, f"the stream failed: {error}"


# Conversions.

VIEWS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 2),
    "permuted": lambda t: t.permute(1, 2, 0),
    "sliced with steps": lambda t: t[1::2, ::3, 2:11:2],
    "expanded": lambda t: t[:, :1].expand(6, 10, 13),
    "a 0-dim tensor expanded": lambda t: t[1, 2, 3].expand(4, 5),
    "channels_last": lambda t: t[:, :, :12].reshape(6, 10, 3, 4).contiguous(
        memory_format=torch.channels_last),
    "0-dim": lambda t: t[1, 2, 3],
    "empty": lambda t: t[:, :0],
}


@pytest.mark.parametrize("to", DTYPES, ids=str)
@pytest.mark.parametrize("source", DTYPES, ids=str)
def test_conversions_equal_the_cpus(source, to):
    """.to(dtype), the dtype's method (.float(), .long(), ...) and copy_
    into a new tensor, from every layout, and copy_ broadcasting into a
    transposed destination."""
    x = sample(source, (6, 10, 13), 1)
    method = METHODS[to]
    for what, view in VIEWS.items():
        as_on_the_cpu(lambda t: view(t).to(to), x, what=f"{what}: to")
        as_on_the_cpu(lambda t: getattr(view(t), method)(), x, what=f"{what}: .{method}()")
        as_on_the_cpu(lambda t: torch.empty(view(t).shape, dtype=to, device=t.device)
                      .copy_(view(t)), x, what=f"{what}: copy_")
    long = sample(source, (5003,), 2)  # several blocks of the kernel, and a tail
    as_on_the_cpu(lambda t: t.to(to), long, what="long")
    as_on_the_cpu(lambda t: t[::3].to(to), long, what="long, sliced")
    d, y = sample(to, (13, 10), 3), sample(source, (20, 26), 4)
    sources = {"a column": lambda t, y: t[0, :, :1], "a row": lambda t, y: t[0, 0],
               "a 0-dim tensor": lambda t, y: t[0, 1, 2], "a matrix": lambda t, y: t[0],
               "a transposed matrix": lambda t, y: y[:13, :10].T,
               "a sliced matrix": lambda t, y: y[::2, ::2],
               "an expanded column": lambda t, y: y[:10, :1].expand(10, 13)}
    for what, src in sources.items():  # into d.T: dense, transposed
        as_on_the_cpu(lambda t, y, d: d.T.copy_(src(t, y)), x, y, d, what=f"{what} into d.T")
    as_on_the_cpu(lambda t: torch.empty(2, 3, 4, 5, dtype=to, device=t.device, memory_format=
                                        torch.channels_last).copy_(t[0, 0, :5]), x,
                  what="a row into a channels_last tensor")


def test_copies_the_conversion_does_not_take_are_as_on_the_cpu():
    """A destination that is not dense, one that shares the source's memory,
    dtypes other than the six and a source that does not broadcast: the
    old path's, with the CPU's results and errors."""
    f, i = sample(torch.float32, (6, 10), 4), sample(torch.int64, (6, 10), 5)
    b, u = sample(torch.bool, (6, 10), 6), sample(torch.uint8, (6, 10), 7)
    cases = {
        "into a sliced destination": lambda f, i, b, u: i[:, ::2].copy_(f[:, 1::2]),
        "into a broadcast row of a sliced destination": lambda f, i, b, u: f[::2].copy_(u[0]),
        "float32 over its own memory as int32": lambda f, i, b, u: f.view(torch.int32).copy_(f),
        "bool over its own memory as uint8": lambda f, i, b, u: b.view(torch.uint8).copy_(b),
        "int64 into float64 in place": lambda f, i, b, u: i.view(torch.float64).copy_(i),
        "to float16": lambda f, i, b, u: f.half(),
        "to bfloat16": lambda f, i, b, u: i.bfloat16(),
        "to int8": lambda f, i, b, u: f.to(torch.int8),
        "to int16": lambda f, i, b, u: u.short(),
        "to complex64": lambda f, i, b, u: i.to(torch.complex64),
        "from float16": lambda f, i, b, u: f.half().to(torch.int32),
        "from int8 into a transposed destination": lambda f, i, b, u: torch.empty(
            10, 6, device=f.device).T.copy_(u.to(torch.int8)),
        "a source that does not broadcast": lambda f, i, b, u: i.copy_(f[:, :3]),
        "a source of more dimensions": lambda f, i, b, u: i[0].copy_(f),
    }
    for what, fn in cases.items():
        as_on_the_cpu(fn, f, i, b, u, what=what)
    assert_stream_works()


@pytest.mark.skipif(torch.rill.device_count() < 2, reason="needs two rill devices")
def test_a_conversion_between_two_rill_devices():
    x = sample(torch.float32, (6, 10), 8)
    for to in DTYPES:
        dst = torch.empty(10, 6, dtype=to, device="rill:1").T
        assert_same(dst.copy_(x.to("rill:0")), torch.empty(10, 6, dtype=to).T.copy_(x), str(to))
        got = x.T.to("rill:0").to("rill:1", to)
        assert got.device == torch.device("rill:1")
        assert_same(got, x.T.to(to), str(to))


# Float32 ops meeting integer and bool tensors.

MIXED = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
         "maximum": torch.maximum, "minimum": torch.minimum, "clamp_min": torch.clamp_min}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("name", MIXED)
def test_float32_meets_integer_and_bool_tensors_as_on_the_cpu(name, dtype):
    """Either order, broadcast, strided and 0-dim: the integer operand is
    converted to float32 first, as PyTorch's type promotion does. add, sub,
    mul and div bit for bit; maximum, minimum and clamp_min by value (the
    CPU's own NaN bits and the sign of a zero it picks from a tie vary with
    the length). sub of a bool tensor raises PyTorch's error."""
    op = MIXED[name]
    f, i = sample(torch.float32, (7, 9), 9), sample(dtype, (7, 9), 10)
    cases = {
        "float first": lambda f, i: op(f, i),
        "integer first": lambda f, i: op(i, f),
        "broadcast": lambda f, i: op(f[:, :1], i[0]),
        "broadcast, integer first": lambda f, i: op(i[:, :1], f[0]),
        "transposed": lambda f, i: op(f.T, i.T),
        "one transposed": lambda f, i: op(f, i.T.contiguous().T),
        "sliced": lambda f, i: op(f[:, ::2], i[:, 1::2]),
        "a 0-dim integer": lambda f, i: op(f, i[1, 2]),
        "a 0-dim integer first": lambda f, i: op(i[1, 2], f),
        "a 0-dim float": lambda f, i: op(f[1, 2], i),
        "a 0-dim float second": lambda f, i: op(i, f[1, 2]),
        "both 0-dim": lambda f, i: op(f[3, 4], i[1, 2]),
        "empty": lambda f, i: op(f[:0], i[:0]),
    }
    exact = name in ("add", "sub", "mul", "div")
    for what, fn in cases.items():
        as_on_the_cpu(fn, f, i, what=what, exact=exact)
    as_on_the_cpu(op, sample(torch.float32, (4099,), 11), sample(dtype, (4099,), 12),
                  what="long", exact=exact)


def test_in_place_and_out_with_integer_and_bool_operands():
    f = sample(torch.float32, (7, 9), 13)
    i, i32 = sample(torch.int64, (7, 9), 14), sample(torch.int32, (7, 9), 15)
    u, b = sample(torch.uint8, (7, 9), 16), sample(torch.bool, (7, 9), 17)
    cases = {
        "f.mul_(b)": lambda f, i, i32, u, b: f.mul_(b),
        "f.mul_(a row of b)": lambda f, i, i32, u, b: f.mul_(b[0]),
        "f.T.mul_(b.T)": lambda f, i, i32, u, b: f.T.mul_(b.T),
        "f.mul_(a 0-dim b)": lambda f, i, i32, u, b: f.mul_(b[1, 1]),
        "f.div_(i)": lambda f, i, i32, u, b: f.div_(i),
        "f.div_(i32)": lambda f, i, i32, u, b: f.div_(i32),
        "f.div_(a 0-dim i)": lambda f, i, i32, u, b: f.div_(i[2, 3]),
        "f.add_(u)": lambda f, i, i32, u, b: f.add_(u),
        "f.sub_(i32)": lambda f, i, i32, u, b: f.sub_(i32),
        "f.add_(i, alpha=2)": lambda f, i, i32, u, b: f.add_(i, alpha=2),
        "f.clamp_min_(i)": lambda f, i, i32, u, b: f.clamp_min_(i),
        "f[:, ::2].mul_(b[:, ::2])": lambda f, i, i32, u, b: f[:, ::2].mul_(b[:, ::2]),
        "div out=": lambda f, i, i32, u, b: torch.div(f, i, out=torch.empty_like(f)),
        "mul out= float64": lambda f, i, i32, u, b: torch.mul(
            f, b, out=torch.empty(7, 9, dtype=torch.float64, device=f.device)),
        "f[0].mul_(b): b does not broadcast to f[0]": lambda f, i, i32, u, b: f[0].mul_(b),
        "f.sub_(b)": lambda f, i, i32, u, b: f.sub_(b),
        "mul out= int64": lambda f, i, i32, u, b: torch.mul(f, b, out=torch.empty_like(i)),
    }
    for what, fn in cases.items():
        exact = "clamp_min" not in what
        as_on_the_cpu(fn, f, i, i32, u, b, what=what, exact=exact)
    assert_stream_works()


def test_a_sum_divided_by_a_count():
    """loss_sum / count, count a 0-dim int64 rill tensor (a masked mean), and
    a count of 0."""
    g = torch.Generator().manual_seed(18)
    x = torch.randint(-40, 40, (64, 33), generator=g) * 0.25  # sums exact in float32
    m = torch.rand(64, 33, generator=g) > 0.3
    as_on_the_cpu(lambda x, m: (x * m).sum() / m.sum(), x, m, what="masked mean")
    as_on_the_cpu(lambda x, m: x.sum(1) / m.sum(1), x, m, what="by rows")
    as_on_the_cpu(lambda x, m: x / m.sum(1, keepdim=True), x, m, what="by rows, broadcast")
    as_on_the_cpu(lambda x, m: m.sum() / x.sum(), x, m, what="count first")
    as_on_the_cpu(lambda x, m: x.sum() / (m & False).sum(), x, m, what="a count of 0")
    as_on_the_cpu(lambda x, m: x[0, 0] * 0 / (m & False).sum(), x, m, what="0 / 0")


def test_errors_equal_the_cpus():
    f, i = sample(torch.float32, (7, 9), 19), sample(torch.int64, (7, 9), 20)
    i32, u, b = i.int(), i.byte(), i > 0
    cases = {
        "bool - float": lambda f, i, i32, u, b: b - f,
        "float - bool": lambda f, i, i32, u, b: f - b,
        "float - 0-dim bool": lambda f, i, i32, u, b: f - b[0, 0],
        "0-dim bool - float": lambda f, i, i32, u, b: b[0, 0] - f,
        "torch.sub(float, bool)": lambda f, i, i32, u, b: torch.sub(f, b, alpha=2),
        "torch.sub(float, bool, out=)": lambda f, i, i32, u, b: torch.sub(
            f, b, out=torch.empty_like(f)),
        "int64.add_(float)": lambda f, i, i32, u, b: i.add_(f),
        "int32.add_(float)": lambda f, i, i32, u, b: i32.add_(f),
        "uint8.sub_(float)": lambda f, i, i32, u, b: u.sub_(f),
        "int64.div_(float)": lambda f, i, i32, u, b: i.div_(f),
        "int64.div_(int64)": lambda f, i, i32, u, b: i.div_(i),
        "bool.clamp_min_(float)": lambda f, i, i32, u, b: b.clamp_min_(f),
    }
    for what, fn in cases.items():
        as_on_the_cpu(fn, f, i, i32, u, b, what=what)
    assert_stream_works()


def test_a_cpu_tensor_of_dimensions_is_a_device_mismatch():
    """PyTorch's error, as on CUDA; a 0-dim CPU tensor is a number, with the
    CPU's result."""
    f, i = sample(torch.float32, (7, 9), 21), sample(torch.int64, (7, 9), 22)
    df, di, db = f.to("rill"), i.to("rill"), (i > 0).to("rill")
    calls = {
        "rill float + CPU int64": lambda: df + i,
        "CPU int64 - rill float": lambda: i - df,
        "rill float * CPU bool": lambda: df * (i > 0),
        "rill int64 / CPU float": lambda: di / f,
        "rill bool * CPU float row": lambda: db * f[0],
        "maximum(rill float, CPU int64)": lambda: torch.maximum(df, i),
        "rill float.mul_(CPU bool)": lambda: df.mul_(i > 0),
    }
    for what, call in calls.items():
        try:
            call()
        except RuntimeError as e:
            assert first_line(e).startswith("Expected all tensors to be on the same device, but "
                                            "found at least two devices, rill:0 and cpu!"), what
        else:
            pytest.fail(f"{what}: no error")
    assert_stream_works()
    as_on_the_cpu(lambda f: f * torch.tensor(3), f, what="a 0-dim CPU int64")
    as_on_the_cpu(lambda f: f / torch.tensor(True), f, what="a 0-dim CPU bool")
    as_on_the_cpu(lambda i: i / torch.tensor(2.5), i, what="a 0-dim CPU float")
    assert_same(f.to("rill") + i[0, 0], f + i[0, 0], "a 0-dim CPU int64 element")


# sum, all and any of bool tensors.

def bool_reduction_cases(shape):
    """(dims, keepdim) pairs for a tensor of shape: all dims, each dim
    (negative too), adjacent and non-adjacent tuples, keepdim either way."""
    nd = len(shape)
    dims = [None] + list(range(-nd, nd))
    if nd == 3:
        dims += [(0, 1), (1, 2), (-1, -2), (0, 1, 2), (2, 1, 0), (0, 2), (2, 0), (-3, -1)]
    return [(d, k) for d in dims for k in (False, True)]


def reducer(name, dims, keepdim, view=lambda t: t, **kwargs):
    op = getattr(torch, name)
    if dims is None:
        return lambda t: op(view(t), **kwargs) if not keepdim else \
            op(view(t), dim=None, keepdim=True, **kwargs)
    return lambda t: op(view(t), dims, keepdim=keepdim, **kwargs)


BOOL_VIEWS = {"plain": lambda t: t,
              "transposed": lambda t: t.mT if t.dim() >= 2 else t,
              "sliced": lambda t: t[..., ::2] if t.dim() else t}


@pytest.mark.parametrize("name", ["sum", "all", "any"])
def test_bool_reductions_equal_the_cpus(name):
    """Every dim, tuple of dims and keepdim, of plain, transposed and sliced
    tensors, with inner and reduced dimensions past 256, mostly false,
    mostly true, all false and all true."""
    g = torch.Generator().manual_seed(23)
    for shape in [(5, 7, 9), (3, 300, 2), (2, 3, 513), (1,), (4, 1, 3), (700,)]:
        for p in (0.0, 0.03, 0.5, 0.97, 1.0):
            x = torch.rand(shape, generator=g) < p
            for dims, keepdim in bool_reduction_cases(shape):
                if name == "sum" and dims is None and keepdim:
                    continue  # sum takes no keepdim without dims
                for view_name, view in BOOL_VIEWS.items():
                    as_on_the_cpu(reducer(name, dims, keepdim, view), x,
                                  what=f"{shape} p={p} dims={dims} keepdim={keepdim} {view_name}")
    x = torch.rand(2, 3, 4, generator=g) < 0.5
    for what, fn in {"0-dim": lambda t: getattr(torch, name)(t[1, 2, 3]),
                     "0-dim, dim 0": lambda t: getattr(torch, name)(t[1, 2, 0], 0),
                     "0-dim, dim -1, keepdim": lambda t: getattr(torch, name)(t[0, 0, 1], -1, True),
                     "expanded": lambda t: getattr(torch, name)(t[:1].expand(300, 3, 4), 0),
                     "dim out of range": lambda t: getattr(torch, name)(t, 3),
                     "a repeated dim": lambda t: getattr(torch, name)(t, (1, -2)),
                     }.items():
        as_on_the_cpu(fn, x, what=what)


@pytest.mark.parametrize("name", ["sum", "all", "any"])
def test_bool_reductions_of_many_blocks(name):
    """2**20 + 3 elements with the one that decides last, and the first 2**20
    as 1024 x 1024 reduced along dim 0 and 4 x 512 x 512 along dim 1."""
    n = (1 << 20) + 3
    op = getattr(torch, name)
    ones, zeros = torch.ones(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    ones[-1], zeros[-1] = False, True
    g = torch.Generator().manual_seed(24)
    mixed = torch.rand(n, generator=g) < 0.5
    for what, x in {"ones, the last false": ones, "zeros, the last true": zeros,
                    "mixed": mixed}.items():
        as_on_the_cpu(op, x, what=what)
        as_on_the_cpu(lambda t: op(t[:-1]), x, what=what + ", the last left out")
        as_on_the_cpu(lambda t: op(t[:1 << 20].view(1024, 1024), 0), x, what=what + ", dim 0")
        as_on_the_cpu(lambda t: op(t[:1 << 20].view(4, 512, 512), 1, True), x,
                      what=what + ", the middle of three")


def test_sum_of_a_bool_tensor_with_a_dtype():
    """int64 is the count's own dtype; float32 and the others are the
    fallback's."""
    g = torch.Generator().manual_seed(25)
    x = torch.rand(5, 300, generator=g) < 0.5
    for dtype in (torch.int64, torch.float32, torch.int32, torch.float64, torch.uint8, torch.bool):
        as_on_the_cpu(lambda t: t.sum(dtype=dtype), x, what=f"{dtype}")
        as_on_the_cpu(lambda t: t.sum(1, dtype=dtype), x, what=f"{dtype}, dim 1")
        as_on_the_cpu(lambda t: torch.sum(t.T, (0,), True, dtype=dtype), x,
                      what=f"{dtype}, transposed, keepdim")


def test_bool_reductions_the_kernel_does_not_take():
    """Empty tensors, dim=[] (all and any reduce nothing; sum reduces all),
    and all and any of uint8, int64 and float tensors: the fallback's, as on
    the CPU."""
    g = torch.Generator().manual_seed(26)
    for shape in [(0,), (3, 0), (0, 4), (2, 0, 3)]:
        x = torch.zeros(shape, dtype=torch.bool)
        for name in ("sum", "all", "any"):
            op = getattr(torch, name)
            as_on_the_cpu(op, x, what=f"{name} of {shape}")
            for d in range(len(shape)):
                as_on_the_cpu(lambda t: op(t, d), x, what=f"{name} of {shape}, dim {d}")
                as_on_the_cpu(lambda t: op(t, d, True), x, what=f"{name} of {shape}, dim {d}, "
                                                                "keepdim")
    x = torch.rand(3, 4, generator=g) < 0.5
    for name in ("sum", "all", "any"):
        op = getattr(torch, name)
        as_on_the_cpu(lambda t: op(t, []), x, what=f"{name}, dim []")
        as_on_the_cpu(lambda t: op(t, (), keepdim=True), x, what=f"{name}, dim (), keepdim")
        # PyTorch's meta kernel lays this result out as the input, its CPU
        # kernel contiguously: compared contiguous.
        as_on_the_cpu(lambda t: op(t.T, []).contiguous(), x, what=f"{name}, dim [], transposed")
    for dtype in (torch.uint8, torch.int64, torch.float32, torch.float64):
        y = (torch.rand(6, 5, generator=g) * 3).floor().to(dtype)
        y[0] = 1
        y[2, 1] = math.nan if dtype.is_floating_point else 0
        for name in ("all", "any"):
            op = getattr(torch, name)
            as_on_the_cpu(op, y, what=f"{name} of {dtype}")
            as_on_the_cpu(lambda t: op(t, 1), y, what=f"{name} of {dtype}, dim 1")
            as_on_the_cpu(lambda t: op(t, (0, 1), keepdim=True), y,
                          what=f"{name} of {dtype}, dims")
            as_on_the_cpu(lambda t: op(t[0]), y, what=f"{name} of {dtype}, all ones")
    assert_stream_works()


def test_attention_with_a_boolean_causal_mask():
    """PyTorch's math path, whose _safe_softmax calls all(); a row fully
    masked comes out 0, as on the CPU."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.Generator().manual_seed(27)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g) for _ in range(3))
    causal = torch.ones(16, 16, dtype=torch.bool).tril()
    holed = causal.clone()
    holed[5] = False
    for what, mask in {"causal": causal, "a row fully masked": holed}.items():
        with sdpa_kernel(SDPBackend.MATH):
            want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            got = torch.nn.functional.scaled_dot_product_attention(
                q.to("rill"), k.to("rill"), v.to("rill"), attn_mask=mask.to("rill"))
        assert got.device.type == "rill" and got.stride() == want.stride(), what
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6, msg=what)
    assert torch.equal(got.cpu()[:, :, 5], torch.zeros(2, 3, 8))


# arange.

ARANGES = [(10,), (0,), (1,), (5, 10), (10, 5, -1), (10, 5), (-3, 7, 2), (7, -3, -2), (0, 10, 3),
           (100, 0, -7), (0.5, 10), (-2.5, 3), (1.5, 9.5, 2), (0, 5, 1.5), (-5, 5, 2.5),
           (10, 0, -0.5), (0.0, 10.0, 1.0), (-0.0, 3), (3, -0.0, -1), (0, 1, 0.1), (0.1, 0.9, 0.2),
           (0, 300), (-300, 300, 7), (2 ** 24 - 5, 2 ** 24 + 5), (2 ** 24, 2 ** 24 + 8, 2),
           (2 ** 53 - 3, 2 ** 53), (0, 2 ** 20 + 3), (0, 1e6, 1000), (-2 ** 31 - 2, -2 ** 31 + 2),
           (2 ** 31 - 2, 2 ** 31 + 2), (0, 2 ** 32 + 2 ** 20, 2 ** 28)]
ARANGE_DTYPES = [None, torch.int64, torch.int32, torch.uint8, torch.float32, torch.float64,
                 torch.int8, torch.int16, torch.float16, torch.bfloat16]


def arange_on_the_cpu(args, **kwargs):
    """torch.arange on rill equals it on the CPU, or raises its error at the
    call with the stream left working."""
    what = f"arange{args} {kwargs}"
    try:
        want = torch.arange(*args, **kwargs)
    except Exception as e:  # the CPU's error, whatever it is
        with pytest.raises(type(e)) as got:
            torch.arange(*args, **kwargs, device="rill")
        assert first_line(got.value) == first_line(e), what
        assert stream_error() is None, what
        return
    assert_same(torch.arange(*args, **kwargs, device="rill"), want, what)


@pytest.mark.parametrize("dtype", ARANGE_DTYPES, ids=str)
def test_arange_equals_the_cpus(dtype):
    """uint8, int32 and int64 from the kernel (float starts and steps
    truncated as PyTorch truncates them, uint8 and int32 wrapping), float32
    and float64 from it where every value is an integer the dtype holds,
    the fallback otherwise (steps like 0.1, values past 2**24 in float32)
    and for the other dtypes."""
    kwargs = {} if dtype is None else {"dtype": dtype}
    for args in ARANGES:
        arange_on_the_cpu(args, **kwargs)
    if dtype in (None, torch.int64):
        for args in [(2 ** 62, 2 ** 62 + 5), (-2 ** 63, -2 ** 63 + 3), (2 ** 63 - 4, 2 ** 63 - 1),
                     (2 ** 62 + 2 ** 38 + 1, 2 ** 62 - 2 ** 38, -2 ** 37)]:
            arange_on_the_cpu(args, **kwargs)


def test_arange_errors_are_the_cpus():
    for args in [(0, 10, 0), (10, 0, 1), (0, 10, -1), (0, 10, 0.0), (0, math.inf),
                 (-math.inf, 0), (0, 10, math.inf), (math.inf,)]:
        for dtype in (None, torch.int64, torch.int32, torch.float32, torch.float64):
            arange_on_the_cpu(args, **({} if dtype is None else {"dtype": dtype}))
    assert_stream_works()


def arange_out(device, make_out, args):
    """arange(*args, out=make_out(device)): the out tensor, what arange
    returned and the warnings it gave."""
    out = make_out(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = torch.arange(*args, out=out)
    return out, result, caught


def test_arange_into_an_out_tensor():
    """A right-sized out takes the values in place, with no warning; a
    wrong-sized one is resized, with a warning as often as on the CPU; a
    sliced out is the fallback's."""
    outs = {
        "right size": lambda d: torch.full((5,), 7, dtype=torch.int64, device=d),
        "wrong size": lambda d: torch.full((3,), 7, dtype=torch.int64, device=d),
        "empty": lambda d: torch.empty(0, dtype=torch.int64, device=d),
        "float32, right size": lambda d: torch.full((5,), 7.0, device=d),
        "float32, wrong size": lambda d: torch.full((8,), 7.0, device=d),
        "float64": lambda d: torch.full((5,), 7.0, dtype=torch.float64, device=d),
        "uint8": lambda d: torch.full((5,), 7, dtype=torch.uint8, device=d),
        "int32, wrong size": lambda d: torch.full((9,), 7, dtype=torch.int32, device=d),
        "a slice of a bigger one": lambda d: torch.full((10,), 7, dtype=torch.int64,
                                                         device=d)[2:7],
        "sliced with a step": lambda d: torch.full((10,), 7, dtype=torch.int64,
                                                    device=d)[::2],
        "sliced, wrong size": lambda d: torch.full((10,), 7, dtype=torch.int64,
                                                   device=d)[::3],
    }
    for what, make_out in outs.items():
        for args in [(0, 5), (2, 12, 2), (0.0, 2.5, 0.5)]:
            want, want_result, want_warnings = arange_out("cpu", make_out, args)
            got, got_result, got_warnings = arange_out("rill", make_out, args)
            assert_same(got, want, f"{what} {args}")
            assert got_result is got, what
            assert len(got_warnings) == len(want_warnings), (what, args, [
                str(w.message) for w in got_warnings], [str(w.message) for w in want_warnings])
            assert all(w.category is UserWarning for w in got_warnings), what
    assert_stream_works()


# Queued, traced and captured.

def test_ops_queue_on_the_current_stream_without_blocking():
    g = torch.Generator().manual_seed(28)
    x = torch.randint(-1000, 1000, (64, 33), generator=g)
    f = torch.randn(64, 33, generator=g)
    dx, df = x.to("rill"), f.to("rill")
    side = torch.rill.Stream()
    torch.rill.synchronize()
    with torch.rill.stream(side):
        opened = gate(side, timeout=10.0)
        start = time.monotonic()
        as_float, as_byte, as_bool = dx.float(), dx.T.to(torch.uint8), dx.bool()
        into = torch.empty(33, 64, dtype=torch.float64, device="rill").T.copy_(dx[0])
        mask = dx > 0
        count, every, some = mask.sum(), mask.all(1), mask.any(0, keepdim=True)
        mean = (df * mask).sum() / count
        scaled = df.div_(dx)
        top = torch.maximum(df, dx.int())
        r = torch.arange(100, device="rill")
        returned = time.monotonic() - start
        queued = not side.query()
        idle = torch.rill.default_stream().query()
        opened.set()
    assert queued and idle and returned < 5.0, (queued, idle, returned)
    side.synchronize()  # the results are the side stream's
    m = x > 0
    f_div = f / x
    for got, want in ((as_float, x.float()), (as_byte, x.T.to(torch.uint8)), (as_bool, x.bool()),
                      (into, torch.empty(33, 64, dtype=torch.float64).T.copy_(x[0])),
                      (count, m.sum()), (every, m.all(1)), (some, m.any(0, keepdim=True)),
                      (scaled, f_div), (r, torch.arange(100))):
        assert_same(got, want)
    assert_same(top, torch.maximum(f_div, x.int()), exact=False)
    torch.testing.assert_close(mean.cpu(), (f * m).sum() / m.sum(), rtol=1e-5, atol=1e-6)


def test_trace_shows_kernels_and_no_host_function_or_synchronize(tmp_path):
    """Conversions between every pair of the six dtypes, float32 ops with
    integer and bool operands, bool reductions, arange and attention with a
    boolean mask on the math path: all queued as rill's kernels (an arange
    the kernel does not take, as a copy from page-locked memory), none a
    host function, nothing synchronizing."""
    code = textwrap.dedent("""
        import torch, torch_rill
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        L = 16
        i = torch.arange(L * 24, device="rill").view(L, 4, 6)
        dtypes = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float32,
                  torch.float64]
        xs = [i.to(d) for d in dtypes]
        for x in xs:
            for d in dtypes:
                x.to(d), x.transpose(0, 2).to(d), x[::2, :, 1::2].to(d)
                x[:, :1].expand(L, 4, 6).to(d), x[1, 2, 3].to(d)
                torch.empty(6, 4, L, dtype=d, device="rill").permute(2, 1, 0).copy_(x[0, 0])
        f, m, u = xs[4] * 0.5, i > 40, xs[1]
        for other in (i, xs[2], u, m, m.sum()):
            f + other, other * f, f / other, torch.maximum(f, other), torch.minimum(other, f)
            f.clamp_min(other), f - other if other.dtype != torch.bool else None
        f.mul_(m), f.div_(i), f.sum() / m.sum()
        m.sum(), m.sum(1), m.T.sum((0, 1)), m.all(), m.any(-1, keepdim=True), m[:, ::2].all(0)
        torch.arange(L, device="rill"), torch.arange(2.0, 9.0, device="rill")
        torch.arange(0, 300, dtype=torch.uint8, device="rill")
        torch.arange(0, 1, 0.1, device="rill"), torch.arange(9, dtype=torch.float16, device="rill")
        causal = torch.ones(L, L, dtype=torch.bool, device="rill").tril()
        q = xs[4].view(1, 4, L, 6) * 0.01
        with sdpa_kernel(SDPBackend.MATH):
            F.scaled_dot_product_attention(q, q, q, attn_mask=causal)
    """)
    names = traced_names(tmp_path, code)
    for kernel in ("aten::_copy_from (convert)", "aten::sum (reduce_dim_bool)",
                   "aten::all (reduce_dim_bool)", "aten::any (reduce_dim_bool)",
                   "aten::arange (arange)", "aten::div (binary_f32)", "aten::mul_ (binary_f32)"):
        assert kernel in names, (kernel, sorted(names))
    hosts = sorted(n for n in names if n.endswith("(host function)"))
    assert not hosts, hosts
    synchronizing = sorted(n for n in names if "synchronize" in n)
    assert not synchronizing, synchronizing


def test_captured_conversions_replay_with_new_values():
    x = torch.zeros(6, 5, dtype=torch.int64, device="rill")
    f = torch.zeros(6, 5, device="rill")
    g = torch.rill.RillGraph()
    torch.rill.synchronize()
    with torch.rill.graph(g):
        as_float = x.float()
        as_byte = x.T.to(torch.uint8)
        mask = x > 0
        count, every = mask.sum(), mask.all(0)
        mean = f / count
        r = torch.arange(30, device="rill").view(6, 5) + f
    rng = torch.Generator().manual_seed(29)
    for _ in range(3):
        new_x = torch.randint(-300, 300, (6, 5), generator=rng)
        new_x[0, 0] = 2 ** 40 + 1
        new_f = torch.randn(6, 5, generator=rng)
        x.copy_(new_x)
        f.copy_(new_f)
        g.replay()
        m = new_x > 0
        for got, want in ((as_float, new_x.float()), (as_byte, new_x.T.to(torch.uint8)),
                          (count, m.sum()), (every, m.all(0)), (mean, new_f / m.sum()),
                          (r, torch.arange(30).view(6, 5) + new_f)):
            assert_same(got, want)


# What PyTorch's meta kernels let through, refused or sized as the CPU does.

@pytest.mark.parametrize("name", ["sum", "all", "any", "mean"])
def test_a_0_dim_tensor_refuses_a_dim_out_of_range(name):
    x = torch.tensor(1.5) if name == "mean" else torch.tensor(True)
    op = getattr(torch, name)
    for dims in (0, -1, 1, 5, (0, -1), (0, 0)):
        as_on_the_cpu(lambda t: op(t, dims), x, what=f"dims {dims}")
        as_on_the_cpu(lambda t: op(t, dims, keepdim=True), x, what=f"dims {dims}, keepdim")


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.int64, torch.float64],
                         ids=str)
def test_arange_past_2_to_the_53_is_sized_as_on_the_cpu(dtype):
    """The CPU sizes every dtype but int64 in double precision."""
    for args in [(2 ** 53 - 3, 2 ** 53 + 3), (2 ** 62, 2 ** 62 + 5), (0.5, 5.2, 0.7)]:
        arange_on_the_cpu(args, dtype=dtype)


def test_errors_the_meta_kernels_let_through_are_raised_at_the_call():
    f, i = sample(torch.float32, (7, 9), 23), sample(torch.int64, (7, 9), 24)
    b = i > 0
    cases = {
        "int64.mul_(float)": lambda f, i, b: i.mul_(f),
        "bool.mul_(float)": lambda f, i, b: b.mul_(f),
        "int64.add_(0.5)": lambda f, i, b: i.add_(0.5),
        "mul(float, int64, out=int64)": lambda f, i, b: torch.mul(f, i, out=torch.empty_like(i)),
    }
    for what, fn in cases.items():
        as_on_the_cpu(fn, f, i, b, what=what)
    for args, kwargs in [((5,), {"dtype": torch.bool}), ((0, math.nan), {}),
                         ((0, 1e30, 1e-30), {}), ((0, 1e30, 1e-30), {"dtype": torch.int32})]:
        arange_on_the_cpu(args, **kwargs)
    assert_stream_works()


def test_arange_keeps_an_out_tensor_of_the_right_number_of_elements():
    """The CPU resizes out only when its element count differs, so a (5, 1)
    out keeps its shape, with no warning; a wrong count warns in the CPU's
    words."""
    for make in (lambda d: torch.full((5, 1), 7, dtype=torch.int64, device=d),
                 lambda d: torch.full((3,), 7, dtype=torch.int64, device=d)):
        want, _, want_warnings = arange_out("cpu", make, (5,))
        got, _, got_warnings = arange_out("rill", make, (5,))
        assert_same(got, want)
        said = [str(w.message).split(" (Triggered internally")[0] for w in got_warnings]
        assert said == [str(w.message).split(" (Triggered internally")[0] for w in want_warnings]


def test_an_arange_the_kernel_does_not_take_replays_in_a_graph():
    """On a capturing stream such an arange is the fallback's host
    function, which a replay runs again. (On a device the host cannot read,
    the fallback copies, which a capture refuses.)"""
    if torch.rill.get_device_properties().type != "cpu":
        pytest.skip("the fallback of a device the host cannot read copies, which a capture refuses")
    f = torch.zeros(10, device="rill")
    g = torch.rill.RillGraph()
    torch.rill.synchronize()
    with torch.rill.graph(g):
        r = torch.arange(0, 1, 0.1, device="rill") + f
        h = torch.arange(10, dtype=torch.float16, device="rill")
    for k in range(3):
        f.fill_(k)
        g.replay()
        assert_same(r, torch.arange(0, 1, 0.1) + k)
        assert_same(h, torch.arange(10, dtype=torch.float16))
