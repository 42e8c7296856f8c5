# SPDX-License-Identifier: MIT
"""The ops that run as rill kernels queued on the current stream (float32
element-wise ops and fills): results equal the CPU's, they run in stream
order without blocking the host, and what they do not take goes to the
fallback with the CPU's behaviour."""

import textwrap
import time

import pytest
import torch

from conftest import as_on_the_cpu, delay, traced_names

OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum,
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((3, 1, 5), (4, 1)), ((), (6,)), ((2, 3), ())])
def test_broadcasting_results_equal_the_cpus(name, shapes):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(shapes[0], generator=g)
    b = torch.randn(shapes[1], generator=g) + 3.0
    op = OPS[name]
    torch.testing.assert_close(op(a.to("rill"), b.to("rill")).cpu(), op(a, b), rtol=0, atol=0)


def test_more_dimensions_than_one_kernel_takes():
    """Eight dimensions, transposed and broadcast: rill_op_binary_f32 takes
    six, so the op merges what it can and splits the rest."""
    x = torch.randn(2, 3, 2, 3, 2, 3, 2, 3, generator=torch.Generator().manual_seed(5))
    r = x.to("rill")
    cases = [lambda t: t + t, lambda t: t * t[:, :1, :, :1],
             lambda t: t.transpose(0, 6) - t.transpose(0, 6).contiguous(),
             lambda t: torch.randn(1).to(t.device) + t.transpose(1, 5)]
    for case in cases:
        torch.manual_seed(1)
        got = case(r).cpu()
        torch.manual_seed(1)
        torch.testing.assert_close(got, case(x), rtol=0, atol=0)


def test_strided_inputs_in_place_ops_and_aliases():
    x = torch.randn(6, 4)
    r = x.to("rill")
    torch.testing.assert_close((r.T + r.T).cpu(), x.T + x.T, rtol=0, atol=0)
    torch.testing.assert_close((r[:, ::2] * r[:, 1::2]).cpu(), x[:, ::2] * x[:, 1::2])
    r.add_(r[0].clone())
    x.add_(x[0].clone())
    torch.testing.assert_close(r.cpu(), x)
    r.mul_(r)
    x.mul_(x)
    torch.testing.assert_close(r.cpu(), x)
    r.sub_(torch.ones(4, device="rill"), alpha=2.0)
    x.sub_(torch.ones(4), alpha=2.0)
    torch.testing.assert_close(r.cpu(), x)
    with pytest.raises(RuntimeError):
        torch.ones(4, device="rill").add_(torch.ones(3, 4, device="rill"))
    # Partly overlapping input and output: the CPU's own refusal.
    with pytest.raises(RuntimeError) as cpu_error:
        y = torch.arange(8.0)
        y[1:].add_(y[:-1])
    with pytest.raises(RuntimeError, match=str(cpu_error.value)[:30]):
        y = torch.arange(8.0, device="rill")
        y[1:].add_(y[:-1])


def test_fills_and_other_dtypes():
    assert torch.equal(torch.zeros(5, device="rill").cpu(), torch.zeros(5))
    assert torch.equal(torch.full((2, 3), 2.5, device="rill").cpu(), torch.full((2, 3), 2.5))
    i = torch.arange(5, device="rill")
    assert torch.equal((i + i).cpu(), torch.arange(5) * 2)
    h = torch.ones(3, dtype=torch.float16, device="rill")
    assert torch.equal((h * h).cpu(), torch.ones(3, dtype=torch.float16))


FILL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
               torch.float8_e4m3fn, torch.float8_e5m2, torch.float32, torch.float64,
               torch.complex64, torch.complex128]


def same_bits(got, want):
    """got (on rill) and want hold the same bits in the same shape: float8
    has no torch.equal on the CPU."""
    got = got.cpu()
    if want.element_size() > 8:
        return torch.equal(got, want)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
    return torch.equal(got.view(bits), want.view(bits))


def layouts(t):
    """t as PyTorch's ops meet it: contiguous, channels-last, transposed,
    and sliced (which the fill kernels do not take: the fallback's)."""
    return {"contiguous": t, "channels-last": t.contiguous(memory_format=torch.channels_last),
            "transposed": t.transpose(1, 3), "sliced": t[:, :, ::2]}


@pytest.mark.parametrize("dtype", FILL_DTYPES, ids=str)
def test_fill_and_zero_of_each_dtype_equal_the_cpus(dtype):
    """fill_ and zero_ of every dtype of 1 to 8 bytes run rill_op_fill_bits
    (complex128 and gapped tensors the fallback): every element and every
    gap between them equal the CPU's, for values that round or wrap."""
    values = [0, 1, True, 3, 100.75] if dtype != torch.bool else [0, 1, True, False, 2.5]
    base = torch.arange(2 * 3 * 4 * 6).reshape(2, 3, 4, 6).to(dtype)
    for fill in [lambda t, v=v: t.fill_(v) for v in values] + [lambda t: t.zero_()]:
        for name in layouts(base):
            want_base, got_base = base.clone(), base.to("rill")
            want, got = layouts(want_base)[name], layouts(got_base)[name]
            fill(want)
            fill(got)
            assert got.dtype == want.dtype and got.stride() == want.stride(), name
            assert same_bits(got, want) and same_bits(got_base, want_base), name
    assert same_bits(torch.zeros(3, 5, dtype=dtype, device="rill"), torch.zeros(3, 5, dtype=dtype))
    assert same_bits(torch.ones(7, dtype=dtype, device="rill"), torch.ones(7, dtype=dtype))


def test_a_sliced_fill_leaves_the_gaps_as_they_were():
    """The fallback writes only the slice's elements of the rill memory."""
    for dtype in (torch.int64, torch.bool, torch.float64):
        base = torch.arange(24).reshape(4, 6).to(dtype)
        got, want = base.to("rill"), base.clone()
        got[:, 1::2].fill_(1)
        want[:, 1::2].fill_(1)
        assert torch.equal(got.cpu(), want), dtype


@pytest.mark.parametrize("dtype,value", [(torch.int8, 300), (torch.uint8, -1),
                                         (torch.float16, 1e6), (torch.int32, 1.5e10),
                                         (torch.int64, 2.0 ** 64), (torch.bool, 1e300)])
def test_a_fill_value_out_of_the_dtypes_range_does_as_on_the_cpu(dtype, value):
    """PyTorch's conversion decides: the same error at the call, the
    tensor unchanged and the stream not failed (a dense tensor and a
    sliced one, the fallback's), or the same wrapped value."""
    for cut in (slice(None), slice(None, None, 2)):
        want = torch.zeros(6, dtype=dtype)
        got = torch.zeros(6, dtype=dtype, device="rill")
        try:
            want[cut].fill_(value)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=str(e)[:40]):
                got[cut].fill_(value)
        else:
            got[cut].fill_(value)
        assert torch.equal(got.cpu(), want)


def test_trace_shows_fills_of_other_dtypes_as_kernels(tmp_path):
    """Before rill_op_fill_bits, fill_ and zero_ of an integer, bool or
    double tensor (zeros, ones, full: labels, masks, counters) ran
    PyTorch's CPU kernel as a host function."""
    code = textwrap.dedent("""
        import torch, torch_rill
        labels = torch.zeros(64, dtype=torch.int64, device="rill")
        mask = torch.full((8, 8), True, device="rill")
        x = torch.ones(16, dtype=torch.float64, device="rill")
        x.fill_(2.5)
        h = torch.empty(9, dtype=torch.bfloat16, device="rill").zero_()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    for op in ("aten::zero_", "aten::fill_"):
        assert op + " (fill_bits)" in names, sorted(names)
    hosts = sorted(n for n in names if n.endswith("(host function)"))
    assert not hosts, hosts


def test_kernels_queue_on_the_current_stream_without_blocking_the_host():
    s = torch.rill.Stream()
    a = torch.ones(1 << 16, device="rill")
    torch.rill.synchronize()
    with torch.rill.stream(s):
        delay(s, 0.3)
        start = time.monotonic()
        b = a + a  # queued behind the delay
        b.mul_(a + a + a)
        queued = time.monotonic() - start
        assert not s.query()
    assert queued < 0.2
    torch.rill.current_stream().wait_stream(s)
    assert torch.equal(b.cpu(), torch.full((1 << 16,), 6.0))
    # A CPU number: a map kernel, after the stream's work.
    with torch.rill.stream(s):
        delay(s, 0.05)
        assert torch.equal((b * 0.5).cpu(), torch.full((1 << 16,), 3.0))


def test_memory_a_side_streams_kernel_reads_is_kept_without_record_stream():
    side = torch.rill.Stream()
    n = 1 << 14
    bad = 0
    for round in range(50):
        tmp = torch.full((n,), float(round), device="rill")
        side.wait_stream(torch.rill.current_stream())
        delay(side, 0.002)
        with torch.rill.stream(side):
            result = tmp * 1.0 + 0.0 * tmp  # rill kernels behind the delay
        del tmp
        fresh = torch.full((n,), -1.0, device="rill")
        torch.rill.current_stream().wait_stream(side)
        bad += int(not torch.equal(result.cpu(), torch.full((n,), float(round))))
        del fresh
    assert bad == 0


ALPHA_CASES = [  # (dtype of a, dtype of b, alpha)
    (torch.int64, torch.int64, 1.0), (torch.int64, torch.int64, 1.5), (torch.int32, torch.int32, 1),
    (torch.float32, torch.float32, 1 + 0j), (torch.float32, torch.float32, True),
    (torch.float32, torch.float32, 2.5), (torch.float32, torch.int64, 1 + 0j),
    (torch.int64, torch.float32, 2.0), (torch.bool, torch.bool, True), (torch.bool, torch.bool, 1),
    (torch.complex64, torch.complex64, 1j), (torch.complex64, torch.complex64, 1 + 0j),
    (torch.float64, torch.float64, 1 + 0j),
]
ALPHA_OPS = {
    "add": lambda a, b, alpha: torch.add(a, b, alpha=alpha),
    "sub": lambda a, b, alpha: torch.sub(a, b, alpha=alpha),
    "add_": lambda a, b, alpha: a.clone().add_(b, alpha=alpha),
    "sub_": lambda a, b, alpha: a.clone().sub_(b, alpha=alpha),
    "add out=": lambda a, b, alpha: torch.add(a, b, alpha=alpha, out=torch.empty_like(a)),
    "add a number": lambda a, b, alpha: torch.add(a, 2, alpha=alpha),
    "addmm": lambda a, b, alpha: torch.addmm(a.view(2, 2), a.view(2, 2), b.view(2, 2),
                                             beta=alpha, alpha=alpha),
}


@pytest.mark.parametrize("op", ALPHA_OPS, ids=list(ALPHA_OPS))
@pytest.mark.parametrize("a_dtype,b_dtype,alpha", ALPHA_CASES, ids=str)
def test_alpha_and_beta_are_checked_and_used_as_on_the_cpu(op, a_dtype, b_dtype, alpha):
    """alpha 1.0 for integers, True or 1+0j for floats raise PyTorch's
    error at the call (the kernels took them as 1, or the stream failed
    later), and a complex alpha or beta works on complex tensors (reading
    it as a double raised)."""
    a = torch.tensor([1, -2, 3, 0]).to(a_dtype)
    b = torch.tensor([2, 5, -1, 1]).to(b_dtype)
    as_on_the_cpu(lambda x, y: ALPHA_OPS[op](x, y, alpha), a, b, what=f"{op} alpha={alpha}")
