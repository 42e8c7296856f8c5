# SPDX-License-Identifier: MIT
"""The ops that run as rill kernels queued on the current stream (float32
element-wise ops and fills): results equal the CPU's, they run in stream
order without blocking the host, and what they do not take goes to the
fallback with the CPU's behaviour."""

import time

import pytest
import torch

from conftest import delay

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
