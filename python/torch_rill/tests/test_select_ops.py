# SPDX-License-Identifier: MIT
"""Comparisons, where, masked_fill_, tril/triu and argmax/argmin as rill
kernels queued on the current stream: results equal the CPU's bit for bit,
laid out as the CPU lays them out, they queue without blocking the host,
and what the kernels do not take (dtypes that promote, a sliced tensor, a
mask that is self) goes to the fallback with the CPU's results and errors."""

import math
import textwrap
import time

import pytest
import torch

from conftest import (as_on_the_cpu, assert_same, assert_stream_works, first_line, gate,
                      stream_error, traced_names)

DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float32, torch.float64]
COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}


def pool(dtype):
    """Values that are easy to get wrong: NaN, signed zeros, infinities, the
    extremes, a subnormal, and integers a float cannot tell apart."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_floating_point:
        f = torch.finfo(dtype)
        values = [math.nan, -0.0, 0.0, math.inf, -math.inf, 1.0, -1.0, 0.5, f.max, -f.max,
                  f.tiny, f.tiny * f.eps]
    else:
        i = torch.iinfo(dtype)
        values = [v for v in (i.min, i.min + 1, -1, 0, 1, 2 ** 24, 2 ** 24 + 1, 2 ** 53,
                              2 ** 53 + 1, i.max - 1, i.max) if i.min <= v <= i.max]
    return torch.tensor(values, dtype=dtype)


def sample(dtype, shape, seed):
    values = pool(dtype)
    g = torch.Generator().manual_seed(seed)
    return values[torch.randint(len(values), shape, generator=g)]


def random_bits(dtype, shape, seed):
    """Any bit pattern of dtype (NaNs with payloads among them); 0 or 1 for bool."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(2, shape, generator=g).bool()
    size = torch.empty(0, dtype=dtype).element_size()
    raw = torch.randint(256, (math.prod(shape) * size,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


@pytest.fixture(autouse=True)
def _no_failed_stream_left():
    """A test that fails the stream fails, and leaves it cleared for the next."""
    yield
    error = stream_error()
    assert error is None, f"the stream failed: {error}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", COMPARE)
def test_comparisons_equal_the_cpus(name, dtype):
    op = COMPARE[name]
    a, b = sample(dtype, (6, 37), 1), sample(dtype, (6, 37), 2)
    b[:, ::3] = a[:, ::3]  # equal pairs, NaN with NaN among them
    c, d, e = sample(dtype, (3, 1, 5), 3), sample(dtype, (4, 1), 4), sample(dtype, (37, 6), 5)
    cases = {
        "contiguous": lambda a, b, c, d, e: op(a, b),
        "broadcast": lambda a, b, c, d, e: op(c, d),
        "transposed": lambda a, b, c, d, e: op(a.T, b.T),
        "one transposed": lambda a, b, c, d, e: op(a.T, e),
        "sliced": lambda a, b, c, d, e: op(a[:, ::2], b[:, 1::2]),
        "sliced row": lambda a, b, c, d, e: op(a[:, ::2], b[0, ::2]),
        "expanded": lambda a, b, c, d, e: op(a[0].expand(6, 37), b),
        "0-dim": lambda a, b, c, d, e: op(a[1, 2], b[1, 2]),
        "0-dim and a matrix": lambda a, b, c, d, e: op(a[1, 2], b),
        "empty": lambda a, b, c, d, e: op(a[:0], b[:0]),
        "empty broadcast": lambda a, b, c, d, e: op(a[:, :0], b[0, :0]),
    }
    for what, case in cases.items():
        as_on_the_cpu(case, a, b, c, d, e, what=what)
    as_on_the_cpu(op, sample(dtype, (4099,), 6), sample(dtype, (4099,), 7), what="long")
    for v in pool(dtype).tolist():  # each value as a number and as a 0-dim CPU tensor
        as_on_the_cpu(lambda a: op(a, v), a, what=f"number {v}")
        as_on_the_cpu(lambda a: op(a.T, torch.tensor(v, dtype=dtype)), a, what=f"0-dim {v}")
        as_on_the_cpu(lambda a: op(torch.tensor(v, dtype=dtype), a), a, what=f"{v} first")


NUMBER_CASES = {
    "float32 == 1e300 (inf)": (torch.tensor([math.inf, 3e38, math.nan]), lambda x: x == 1e300),
    "float32 < 1e300": (torch.tensor([math.inf, 3e38, math.nan]), lambda x: x < 1e300),
    "float32 == 0-dim float64": (torch.tensor([math.inf, 1.0]),
                                 lambda x: x == torch.tensor(1e300, dtype=torch.float64)),
    "float64 == 1e300": (torch.tensor([math.inf, 1e300], dtype=torch.float64),
                         lambda x: x == 1e300),
    "uint8 == -1": (torch.tensor([0, 1, 255], dtype=torch.uint8), lambda x: x == -1),
    "uint8 == 256": (torch.tensor([0, 1, 255], dtype=torch.uint8), lambda x: x == 256),
    "uint8 == 0-dim int64": (torch.tensor([0, 255], dtype=torch.uint8),
                             lambda x: x == torch.tensor(-1)),
    "int32 == 2**32": (torch.tensor([0, 1], dtype=torch.int32), lambda x: x == 2 ** 32),
    "int64 == 2**53+1": (torch.tensor([2 ** 53, 2 ** 53 + 1]), lambda x: x == 2 ** 53 + 1),
    "int64 >= 2**53+1": (torch.tensor([2 ** 53, 2 ** 53 + 1]), lambda x: x >= 2 ** 53 + 1),
    "bool == True": (torch.tensor([True, False]), lambda x: x == True),
    "bool < True": (torch.tensor([True, False]), lambda x: x < True),
    # These promote: the fallback's, with the CPU's results.
    "int64 == 0.5": (torch.tensor([0, 1]), lambda x: x == 0.5),
    "int64 < 0.5": (torch.tensor([0, 1]), lambda x: x < 0.5),
    "bool == 2": (torch.tensor([True, False]), lambda x: x == 2),
    "int32 == 0-dim 0.5": (torch.tensor([0, 1], dtype=torch.int32),
                           lambda x: x == torch.tensor(0.5)),
    "float32 vs float64": (torch.tensor([0.1, math.nan]), lambda x: x == x.double()),
    "int32 vs int64": (torch.tensor([1, 2], dtype=torch.int32), lambda x: x <= x.long() - 1),
    "uint8 vs bool": (torch.tensor([0, 2], dtype=torch.uint8), lambda x: x > x.bool()),
    "float32 vs complex": (torch.tensor([1.0, 2.0]), lambda x: x == 1 + 0j),
}


@pytest.mark.parametrize("case", NUMBER_CASES)
def test_numbers_convert_as_on_the_cpu(case):
    x, fn = NUMBER_CASES[case]
    as_on_the_cpu(fn, x)


def test_an_integer_past_int64_compares_as_on_the_cpu():
    """The CPU converts 2**63 (a uint64 number) to the tensor's dtype and
    compares; it does not raise."""
    x = torch.tensor([0, -2 ** 63])
    want = x == 2 ** 63
    try:
        got = x.to("rill") == 2 ** 63
    except RuntimeError as e:
        pytest.fail(f"rill raises {first_line(e)!r}; the CPU gives {want.tolist()}")
    assert_same(got, want)
    as_on_the_cpu(lambda t: t == 2 ** 63, torch.tensor([0, 1], dtype=torch.uint8))


NEGATIONS = [(name, dtype) for name in ("isneginf", "isposinf", "logical_not", "bitwise_not")
             for dtype in (torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool,
                           torch.float16) if name != "bitwise_not" or not dtype.is_floating_point]


@pytest.mark.parametrize("name,dtype", NEGATIONS, ids=str)
def test_infinity_tests_and_negations_equal_the_cpus(name, dtype):
    """isneginf and isposinf of integers (all false), bitwise_not of
    integers and float16 are the fallback's."""
    x = sample(torch.float32 if dtype == torch.float16 else dtype, (5, 9), 8).to(dtype)
    op = getattr(torch, name)
    for fn in (op, lambda t: op(t.T), lambda t: op(t[:, ::2]), lambda t: op(t[0, 0])):
        as_on_the_cpu(fn, x)


@pytest.mark.parametrize("case", ["bitwise_not of float32", "masked_fill_ by a uint8 mask"])
def test_a_dtype_the_cpu_refuses_raises_at_the_call(case):
    """The CPU refuses these at the call; the stream goes on."""
    x, m = torch.zeros(3), torch.tensor([1, 0, 1], dtype=torch.uint8)
    fn = {"bitwise_not of float32": lambda x, m: torch.bitwise_not(x),
          "masked_fill_ by a uint8 mask": lambda x, m: x.masked_fill_(m, 1.0)}[case]
    as_on_the_cpu(fn, x, m)
    assert_stream_works()


WHERE_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool,
                torch.float16, torch.int8, torch.complex64]


@pytest.mark.parametrize("dtype", WHERE_DTYPES, ids=str)
def test_where_keeps_every_bit_as_on_the_cpu(dtype):
    a, b = random_bits(dtype, (6, 37), 9), random_bits(dtype, (6, 37), 10)
    cond = random_bits(torch.bool, (6, 37), 11)
    cases = {
        "contiguous": torch.where,
        "broadcast": lambda c, a, b: torch.where(c[:, :1], a, b[0]),
        "transposed": lambda c, a, b: torch.where(c.T, a.T, b.T),
        "one transposed": lambda c, a, b: torch.where(c, a.T.contiguous().T, b),
        "sliced": lambda c, a, b: torch.where(c[:, ::2], a[:, ::2], b[:, 1::2]),
        "0-dim": lambda c, a, b: torch.where(c[1, 1], a[0, 0], b[0, 0]),
        "0-dim a and b": lambda c, a, b: torch.where(c, a[0, 0], b[1, 1]),
        "empty": lambda c, a, b: torch.where(c[:0], a[:0], b[:0]),
    }
    for what, fn in cases.items():
        as_on_the_cpu(fn, cond, a, b, what=what)


def test_where_patterns_mixed_dtypes_and_errors():
    g = torch.Generator().manual_seed(12)
    mask = torch.rand(16, 16, generator=g) > 0.5
    x = torch.randn(16, 16, generator=g)
    # PyTorch's where(mask, 0.0, -inf): 0-dim tensors on mask's device.
    as_on_the_cpu(lambda m: torch.where(m, 0.0, -math.inf), mask)
    as_on_the_cpu(lambda m, x: torch.where(m, x, -math.inf), mask, x)
    # Mixed dtypes and devices: the fallback's, promoted as on the CPU.
    as_on_the_cpu(lambda m, x: torch.where(m, x, x.double()), mask, x)
    as_on_the_cpu(lambda m, x: torch.where(m, x.long(), x), mask, x)
    as_on_the_cpu(lambda m, x: torch.where(m, torch.tensor(2.0), x), mask, x)
    as_on_the_cpu(lambda m, x: torch.where(m.float(), x, x), mask, x)
    as_on_the_cpu(lambda m, x: torch.where(m, x, x[:3]), mask, x)


def test_where_into_an_out_tensor():
    g = torch.Generator().manual_seed(13)
    c, a, b = torch.rand(5, 7, generator=g) > 0.5, torch.randn(5, 7), torch.randn(7)
    outs = {
        "preallocated": lambda a: torch.empty_like(a),
        "empty": lambda a: a.new_empty(0),
        "a itself": lambda a: a,
        "transposed": lambda a: a.T.contiguous().T,
        "sliced": lambda a: a.new_empty(5, 14)[:, ::2],
        "another dtype": lambda a: a.new_empty(5, 7).long(),
    }
    for what, out in outs.items():
        as_on_the_cpu(lambda c, a, b: torch.where(c, a, b, out=out(a)), c, a, b, what=what)


def test_safe_softmax_of_a_row_of_minus_inf_only():
    """_safe_softmax (where into an out tensor inside) gives 0 where softmax
    gives NaN; the other values within softmax's rounding."""
    x = torch.tensor([[0.5, -math.inf, 1.0], [-math.inf] * 3, [2.0, 1.0, -math.inf]])
    for dim in (-1, 0):
        got, want = torch._safe_softmax(x.to("rill"), dim), torch._safe_softmax(x, dim)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=0)
        assert torch.equal(got.cpu() == 0, want == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16,
                                   torch.int8], ids=str)
def test_masked_fill_equals_the_cpus(dtype):
    x = random_bits(dtype, (6, 37), 14)
    mask = random_bits(torch.bool, (6, 37), 15)
    v = True if dtype == torch.bool else 3
    cases = {
        "number": lambda x, m: x.masked_fill_(m, v),
        "broadcast mask": lambda x, m: x.masked_fill_(m[:1], v),
        "transposed": lambda x, m: x.T.masked_fill_(m.T, v),
        "transposed, broadcast": lambda x, m: x.T.masked_fill_(m[0, :6], v),
        "sliced": lambda x, m: x[:, ::2].masked_fill_(m[:, ::2], v),
        "0-dim CPU value": lambda x, m: x.masked_fill_(m, torch.tensor(v, dtype=dtype)),
        "0-dim rill value": lambda x, m: x.masked_fill_(
            m, torch.tensor(v, dtype=dtype, device=x.device)),
        "0-dim float32 value": lambda x, m: x.masked_fill_(
            m, torch.tensor(1.5, device=x.device)),
        "not in place": lambda x, m: x.masked_fill(m, v),
        "not in place, transposed": lambda x, m: x.T.masked_fill(m.T, torch.tensor(v)),
        "empty": lambda x, m: x[:0].masked_fill_(m[:0], v),
        "mask is self": lambda x, m: m.masked_fill_(m, False),  # the fallback's
        "mask is part of self": lambda x, m: m.masked_fill_(m[0], False),
    }
    if dtype.is_floating_point:
        cases["-inf"] = lambda x, m: x.masked_fill_(m, -math.inf)
        cases["NaN"] = lambda x, m: x.masked_fill_(m, math.nan)
    for what, fill in cases.items():
        as_on_the_cpu(fill, x, mask, what=what)


def test_masked_fill_by_a_0_dim_view_of_self():
    """The CPU reads the value before it writes: no overlap to refuse."""
    x, m = torch.randn(6, 37), torch.rand(6, 37) > 0.5
    as_on_the_cpu(lambda x, m: x.masked_fill_(m, x[2, 3]), x, m, what="dense")
    as_on_the_cpu(lambda x, m: x.T.masked_fill_(m.T[:, :1], x[2, 3]), x, m, what="transposed")
    as_on_the_cpu(lambda x, m: x.masked_fill_(m, x.double()[2, 3]), x, m, what="float64")


@pytest.mark.parametrize("cut", [slice(None), slice(None, None, 2)], ids=["dense", "sliced"])
@pytest.mark.parametrize("value", [300, torch.tensor(300)], ids=["number", "0-dim tensor"])
def test_a_fill_value_out_of_range_raises_at_the_call(value, cut):
    """As the CPU raises, with its message; the stream goes on (a sliced
    tensor is the fallback's)."""
    x = torch.arange(6, dtype=torch.int8)
    m = torch.tensor([True, False] * 3)
    as_on_the_cpu(lambda x, m: x[cut].masked_fill_(m[cut], value), x, m, what="in place")
    as_on_the_cpu(lambda x, m: x[cut].masked_fill(m[cut], value), x, m, what="new")
    assert_stream_works()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int64, torch.float16,
                                   torch.complex64, torch.complex128], ids=str)
def test_tril_and_triu_equal_the_cpus(dtype):
    """Every diagonal, past the edges both ways, new and in place, batched;
    a transposed input and complex128 (16 bytes) take the fallback."""
    x = random_bits(dtype, (3, 5, 7), 11) if dtype != torch.complex128 else \
        torch.randn(3, 5, 7, dtype=dtype)
    for d in (-9, -5, -2, 0, 1, 3, 6, 9):
        for name in ("tril", "triu"):
            op = getattr(torch, name)
            as_on_the_cpu(lambda t: op(t, d), x, what=f"{name} {d}")
            as_on_the_cpu(lambda t: op(t.transpose(1, 2), d), x, what=f"{name} {d} transposed")
            as_on_the_cpu(lambda t: getattr(t, name + "_")(d), x, what=f"{name}_ {d}")
            as_on_the_cpu(lambda t: op(t[0], d), x, what=f"{name} {d} of a matrix")
    as_on_the_cpu(lambda t: torch.tril(t[:, :0]), x, what="empty")
    as_on_the_cpu(lambda t: torch.tril(t[0, 0]), x, what="1-dim: the CPU's error")


def test_more_dimensions_than_the_kernels_take():
    """Seven dimensions (rill's strided ops take six): the fallback's, as on
    the CPU."""
    x = torch.randn(2, 1, 2, 1, 2, 1, 3)
    m = x > 0
    as_on_the_cpu(lambda t: t == 0.5, x)
    as_on_the_cpu(lambda t, u: torch.where(u, t, -t), x, m)
    as_on_the_cpu(lambda t, u: t.masked_fill_(u, 1.0), x, m)
    as_on_the_cpu(lambda t: torch.tril(t), x)


def test_the_causal_mask_equals_the_cpus():
    got = torch.nn.Transformer.generate_square_subsequent_mask(16, device="rill")
    assert_same(got, torch.nn.Transformer.generate_square_subsequent_mask(16))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_and_argmin_equal_the_cpus(name):
    """Ties give the first position, a NaN the first NaN's; -0.0 ties with 0.0."""
    g = torch.Generator().manual_seed(17)
    x = torch.randint(-3, 4, (5, 7, 9), generator=g).float()
    x[1, 2, ::3] = math.nan
    x[2, :, 4] = math.nan
    x[3] = -math.inf
    x[4, 0] = torch.tensor([-0.0, 0.0] * 4 + [-0.0])
    op = getattr(torch, name)
    for dim in (0, 1, -1, None):
        for keepdim in (False, True):
            what = f"dim {dim}, keepdim {keepdim}"
            as_on_the_cpu(lambda t: op(t, dim, keepdim), x, what=what)
            as_on_the_cpu(lambda t: op(t.transpose(0, 2), dim, keepdim), x, what=what + " T")
            as_on_the_cpu(lambda t: op(t[:, ::2], dim, keepdim), x, what=what + " sliced")
            as_on_the_cpu(lambda t: op(t[2, 3, 4], dim, keepdim), x, what=what + " 0-dim")
    long = torch.randn(4099, generator=g)
    as_on_the_cpu(op, long)
    long[[3000, 70]] = math.nan
    as_on_the_cpu(op, long)
    as_on_the_cpu(lambda t: op(t.view(1, -1), 1), long)
    for dim in (None, 0, 1, 2):  # empty: errors, or an empty result
        as_on_the_cpu(lambda t: op(t, dim), torch.empty(3, 0), what=f"empty, dim {dim}")
    as_on_the_cpu(lambda t: op(t, 3), x, what="dim out of range")
    as_on_the_cpu(lambda t: op(t.double(), 1), x, what="float64")  # the fallback's
    assert_stream_works()


def test_ops_queue_on_the_current_stream_without_blocking():
    g = torch.Generator().manual_seed(18)
    x, y = torch.randn(64, 33, generator=g), torch.randn(64, 33, generator=g)
    m = x > y
    dx, dy, dm, filled = x.to("rill"), y.to("rill"), m.to("rill"), x.to("rill")
    stream = torch.rill.current_stream()
    torch.rill.synchronize()
    opened = gate(stream, timeout=10.0)
    start = time.monotonic()
    lt, eq = dx < dy, dx == 0.5
    where = torch.where(dm, dx, -math.inf)
    filled.masked_fill_(dm, 2.0)
    am = dx.argmax(-1)
    returned = time.monotonic() - start
    queued = not stream.query()
    opened.set()
    assert queued and returned < 5.0, returned
    for got, want in ((lt, x < y), (eq, x == 0.5), (where, torch.where(m, x, -math.inf)),
                      (filled, x.masked_fill(m, 2.0)), (am, x.argmax(-1))):
        assert_same(got, want)


def test_trace_shows_the_ops_as_kernels(tmp_path):
    """A causal mask made and canonicalized as nn.MultiheadAttention does,
    attention with it, and the ops above: none runs PyTorch's CPU kernel
    in a host function."""
    code = textwrap.dedent("""
        import math
        import torch, torch_rill
        import torch.nn.functional as F
        L = 16
        i = torch.arange(L).to("rill")
        causal = i[None, :] > i[:, None]
        mask = F._canonical_mask(mask=causal, mask_name="attn_mask", other_type=None,
                                 other_name="", target_type=torch.float32)
        q = torch.randn(1, 2, L, 8).to("rill")
        F.scaled_dot_product_attention(q, q, q, attn_mask=~causal)
        x = torch.randn(L, L).to("rill")
        for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
            op(x, x.T), op(x, 0.5), op(i, 3)
        x.isneginf(), x.isposinf(), causal.logical_not()  # bool's only: the name tells
        s = torch.where(causal, -math.inf, x)
        torch.where(causal, x, s, out=torch.empty(L, L, device="rill"))
        torch._safe_softmax(s, -1)
        mask.masked_fill_(causal, torch.tensor(1.0, device="rill"))
        x.argmax(-1), x.argmin(), x.argmax()
        torch.nn.Transformer.generate_square_subsequent_mask(L, device="rill")
        torch.ones(L, L, dtype=torch.bool, device="rill").tril()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    ops = ["eq", "ne", "lt", "le", "gt", "ge", "isneginf", "isposinf", "logical_not",
           "bitwise_not", "where", "masked_fill_", "argmax", "argmin", "tril", "triu"]
    for op in ops:
        assert any(n.startswith(f"aten::{op} (") for n in names), (op, sorted(names))
    hosts = sorted(n for n in names if n.endswith("(host function)")
                   and n.split(" ")[0].split(".")[0] in {f"aten::{op}" for op in ops})
    assert not hosts, hosts
