# SPDX-License-Identifier: MIT
"""Each collective of the "rill" backend against the values every rank can
compute for itself; the order that Work.wait gives; the errors."""

import pytest
import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from conftest import delay

DEV = "rill"


def rank_size():
    return dist.get_rank(), dist.get_world_size()


def rank_values(r, n=5):
    """What rank r contributes: distinct per rank and per element."""
    return torch.arange(n, dtype=torch.float32) * (r + 1) + r - 2.0


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MIN, ReduceOp.MAX])
def test_all_reduce(op):
    rank, size = rank_size()
    x = rank_values(rank).to(DEV)
    dist.all_reduce(x, op=op)
    stacked = torch.stack([rank_values(r) for r in range(size)])
    expected = {ReduceOp.SUM: stacked.sum(0), ReduceOp.AVG: stacked.mean(0),
                ReduceOp.MIN: stacked.min(0).values, ReduceOp.MAX: stacked.max(0).values}[op]
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=1e-6)


def test_all_reduce_async_future():
    rank, size = rank_size()
    x = torch.full((1000,), float(rank + 1), device=DEV)
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    work.wait()
    total = size * (size + 1) / 2
    assert torch.equal(x.cpu(), torch.full((1000,), total))
    assert torch.equal(doubled.wait().cpu(), torch.full((1000,), 2 * total))
    assert fut.value()[0].device.type == DEV


def test_all_reduce_coalesced():
    rank, size = rank_size()
    xs = [rank_values(rank, 3).to(DEV), rank_values(rank, 7).to(DEV)]
    with pytest.warns(FutureWarning):
        dist.all_reduce_coalesced(xs)
    for x, n in zip(xs, (3, 7)):
        expected = sum(rank_values(r, n) for r in range(size))
        torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.uint8])
@pytest.mark.parametrize("root", [0, 1])
def test_broadcast(dtype, root):
    rank, size = rank_size()
    x = (torch.arange(6) * 10 + rank).to(dtype).reshape(2, 3).to(DEV)
    dist.broadcast(x, src=root % size)
    assert torch.equal(x.cpu(), (torch.arange(6) * 10 + root % size).to(dtype).reshape(2, 3))


def test_all_gather():
    rank, size = rank_size()
    out = [torch.empty(2, 3, device=DEV) for _ in range(size)]
    dist.all_gather(out, rank_values(rank, 6).reshape(2, 3).to(DEV))
    for r in range(size):
        assert torch.equal(out[r].cpu(), rank_values(r, 6).reshape(2, 3))


def test_all_gather_into_tensor_int():
    rank, size = rank_size()
    out = torch.empty(size * 4, dtype=torch.int32, device=DEV)
    dist.all_gather_into_tensor(out, torch.arange(4, dtype=torch.int32).to(DEV) + 100 * rank)
    expected = torch.cat([torch.arange(4, dtype=torch.int32) + 100 * r for r in range(size)])
    assert torch.equal(out.cpu(), expected)


def test_reduce_scatter():
    rank, size = rank_size()
    inputs = [rank_values(rank, 4) + 10 * k for k in range(size)]
    out = torch.empty(4, device=DEV)
    dist.reduce_scatter(out, [t.to(DEV) for t in inputs])
    expected = sum(rank_values(r, 4) + 10 * rank for r in range(size))
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=1e-5)


def test_reduce_scatter_tensor_max():
    rank, size = rank_size()
    inp = rank_values(rank, 3 * size)
    out = torch.empty(3, device=DEV)
    dist.reduce_scatter_tensor(out, inp.to(DEV), op=ReduceOp.MAX)
    expected = torch.stack([rank_values(r, 3 * size) for r in range(size)]).max(0).values
    assert torch.equal(out.cpu(), expected[3 * rank:3 * rank + 3])


def test_send_recv():
    rank, size = rank_size()
    peer = 1 - rank if size == 2 else (rank + 1) % size
    if rank == 0:
        dist.send(torch.arange(8.0).to(DEV), dst=1)
        got = torch.empty(8, dtype=torch.int64, device=DEV)
        dist.recv(got, src=1)
        assert torch.equal(got.cpu(), torch.arange(8) * 3)
    elif rank == 1:
        got = torch.empty(8, device=DEV)
        dist.recv(got, src=0)
        assert torch.equal(got.cpu(), torch.arange(8.0))
        dist.send(torch.arange(8).to(DEV) * 3, dst=0)
    assert peer >= 0


def test_barrier():
    dist.barrier()
    dist.barrier(device_ids=[0])


def test_cpu_tensors_take_the_host_path():
    rank, size = rank_size()
    x = rank_values(rank)
    dist.all_reduce(x)
    torch.testing.assert_close(x, sum(rank_values(r) for r in range(size)), rtol=0, atol=1e-6)
    out = torch.empty(size * 3, dtype=torch.int64)
    dist.all_gather_into_tensor(out, torch.full((3,), rank, dtype=torch.int64))
    assert torch.equal(out, torch.arange(size).repeat_interleave(3))
    b = torch.full((2,), rank, dtype=torch.int64)
    dist.broadcast(b, src=size - 1)
    assert torch.equal(b, torch.full((2,), size - 1))


def _slow_then_reduce(wait):
    """A host delay on the current stream in front of the values that the
    allreduce reads (longer on rank 1, so that rank 0's allreduce cannot
    end before rank 0's delay does plus half a second), then a copy of the
    result queued on the current stream: with wait, after the allreduce."""
    rank, size = rank_size()
    x = torch.zeros(256, device=DEV)
    stream = torch.rill.current_stream()
    delay(stream, 0.3 + 0.5 * rank)
    x.fill_(rank + 1.0)
    work = dist.all_reduce(x, async_op=True)
    if wait:
        work.wait()
    copy = x.clone()
    torch.rill.synchronize()
    return copy.cpu(), x.cpu(), work


def test_wait_orders_the_current_stream_after_the_collective():
    rank, size = rank_size()
    copy, x, work = _slow_then_reduce(wait=True)
    total = size * (size + 1) / 2
    assert torch.equal(copy, torch.full((256,), total))
    assert torch.equal(x, torch.full((256,), total))
    assert work.is_completed()


def test_without_wait_the_current_stream_does_not_wait():
    """The control: on rank 0 the copy ran before the allreduce ended."""
    rank, size = rank_size()
    copy, x, _ = _slow_then_reduce(wait=False)
    total = size * (size + 1) / 2
    assert torch.equal(x, torch.full((256,), total))
    if rank == 0:
        assert torch.equal(copy, torch.full((256,), 1.0))


def test_wait_does_not_block_the_host():
    rank, size = rank_size()
    x = torch.ones(16, device=DEV)
    stream = torch.rill.current_stream()
    delay(stream, 1.0)
    x.mul_(2.0)
    work = dist.all_reduce(x, async_op=True)
    import time
    t0 = time.monotonic()
    work.wait()
    returned = time.monotonic() - t0
    assert not work.is_completed()
    torch.rill.synchronize()
    assert work.is_completed()
    assert returned < 0.5
    assert torch.equal(x.cpu(), torch.full((16,), 2.0 * size))


def typed_values(r, dtype, op, n=6):
    """Rank r's input in dtype: beyond float32's range where the dtype has
    it (int64 past 2^60, int32 past 2^24, float64 finer than 2^-30), so
    that a reduction through float32 or float64 gives other values; small
    integers for PRODUCT."""
    i = torch.arange(n, dtype=torch.int64)
    if op == ReduceOp.PRODUCT:
        return ((i + 5 * r) % 3 + 1).to(dtype)
    small = (i * 7 + r * 13) % 61 - 30
    if dtype == torch.int64:
        return small + (1 << 60) + r
    if dtype == torch.int32:
        return (small + (1 << 24) + 1).to(torch.int32)
    if dtype == torch.float64:
        return small.double() + (r + 1) * 2.0 ** -40
    return small.to(dtype)


def reference(values, op):
    """op over the ranks' values, in their dtype."""
    stacked = torch.stack(values)
    if op == ReduceOp.SUM:
        return stacked.sum(0, dtype=stacked.dtype)
    if op == ReduceOp.PRODUCT:
        return stacked.prod(0, dtype=stacked.dtype)
    if op == ReduceOp.MAX:
        return stacked.max(0).values
    if op == ReduceOp.MIN:
        return stacked.min(0).values
    return stacked.sum(0, dtype=stacked.dtype) / len(values)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32])
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN])
def test_all_reduce_of_each_dtype_is_exact(dtype, op):
    rank, size = rank_size()
    x = typed_values(rank, dtype, op).to(DEV)
    dist.all_reduce(x, op=op)
    assert x.dtype == dtype
    assert torch.equal(x.cpu(), reference([typed_values(r, dtype, op) for r in range(size)], op))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_all_reduce_avg_of_floats(dtype):
    rank, size = rank_size()
    x = typed_values(rank, dtype, ReduceOp.AVG).to(DEV)
    dist.all_reduce(x, op=ReduceOp.AVG)
    want = reference([typed_values(r, dtype, ReduceOp.AVG) for r in range(size)], ReduceOp.AVG)
    torch.testing.assert_close(x.cpu(), want, rtol=0, atol=0.02 if dtype == torch.float16 else 0)


def test_reduce_and_reduce_scatter_of_int64():
    rank, size = rank_size()
    x = typed_values(rank, torch.int64, ReduceOp.SUM).to(DEV)
    dist.reduce(x, dst=0)
    want = reference([typed_values(r, torch.int64, ReduceOp.SUM) for r in range(size)],
                     ReduceOp.SUM)
    if rank == 0:
        assert torch.equal(x.cpu(), want)
    inp = typed_values(rank, torch.int64, ReduceOp.SUM, n=3 * size).to(DEV)
    out = torch.empty(3, dtype=torch.int64, device=DEV)
    dist.reduce_scatter_tensor(out, inp, op=ReduceOp.MAX)
    full = reference([typed_values(r, torch.int64, ReduceOp.SUM, n=3 * size)
                      for r in range(size)], ReduceOp.MAX)
    assert torch.equal(out.cpu(), full[3 * rank:3 * rank + 3])


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.bool])
def test_all_reduce_of_another_dtype_names_it(dtype):
    x = torch.ones(4, dtype=dtype, device=DEV)
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(TypeError, match=f"int64 tensors, not torch.{name}"):
        dist.all_reduce(x)


def test_all_reduce_avg_of_integers_names_it():
    x = torch.ones(4, dtype=torch.int64, device=DEV)
    with pytest.raises(RuntimeError, match="no ReduceOp.AVG of torch.int64"):
        dist.all_reduce(x, op=ReduceOp.AVG)


def test_unsupported_reduce_op_names_it():
    x = torch.ones(4, device=DEV)
    with pytest.raises(NotImplementedError, match="BAND"):
        dist.all_reduce(x, op=ReduceOp.BAND)


@pytest.mark.parametrize("dst", [0, 1])
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX])
def test_reduce_keeps_the_result_at_dst_only(dst, op):
    rank, size = rank_size()
    x = rank_values(rank, 7).to(DEV)
    dist.reduce(x, dst=dst % size, op=op)
    stacked = torch.stack([rank_values(r, 7) for r in range(size)])
    if rank == dst % size:
        expected = stacked.sum(0) if op == ReduceOp.SUM else stacked.max(0).values
        torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=1e-6)
    else:
        assert torch.equal(x.cpu(), rank_values(rank, 7))


@pytest.mark.parametrize("dst", [0, 1])
def test_gather(dst):
    rank, size = rank_size()
    dst %= size
    x = (torch.arange(6, dtype=torch.int32) + 100 * rank).reshape(2, 3).to(DEV)
    out = [torch.empty(2, 3, dtype=torch.int32, device=DEV) for _ in range(size)]
    dist.gather(x, out if rank == dst else None, dst=dst)
    if rank == dst:
        for r in range(size):
            assert torch.equal(out[r].cpu(),
                               (torch.arange(6, dtype=torch.int32) + 100 * r).reshape(2, 3))


@pytest.mark.parametrize("src", [0, 1])
def test_scatter(src):
    rank, size = rank_size()
    src %= size
    parts = [torch.arange(5, dtype=torch.float64) + 10 * r + src for r in range(size)]
    out = torch.full((5,), -1.0, dtype=torch.float64, device=DEV)
    dist.scatter(out, [p.to(DEV) for p in parts] if rank == src else None, src=src)
    assert torch.equal(out.cpu(), parts[rank])


def test_gather_and_scatter_of_cpu_tensors():
    rank, size = rank_size()
    out = [torch.empty(3, dtype=torch.int64) for _ in range(size)]
    dist.gather(torch.full((3,), rank, dtype=torch.int64), out if rank == 0 else None, dst=0)
    if rank == 0:
        want = torch.arange(size).repeat_interleave(3).reshape(size, 3)
        assert torch.equal(torch.stack(out), want)
    got = torch.empty(2)
    dist.scatter(got, [torch.full((2,), 7.0 + r) for r in range(size)] if rank == 0 else None,
                 src=0)
    assert torch.equal(got, torch.full((2,), 7.0 + rank))


def a2a_block(src, dst, n):
    """What rank src sends rank dst in all_to_all: distinct per pair."""
    return torch.arange(n, dtype=torch.float32) + 100 * src + 10 * dst


def test_all_to_all_single_even():
    rank, size = rank_size()
    inp = torch.cat([a2a_block(rank, d, 3) for d in range(size)]).reshape(size * 3, 1).to(DEV)
    out = torch.empty(size * 3, 1, device=DEV)
    dist.all_to_all_single(out, inp)
    expected = torch.cat([a2a_block(s, rank, 3) for s in range(size)]).reshape(size * 3, 1)
    assert torch.equal(out.cpu(), expected)


def a2a_rows(s, d):
    """Rows that rank s sends rank d in the uneven all_to_all_single."""
    return s + d + 1


def a2a_uneven(s, d):
    return (torch.arange(2 * a2a_rows(s, d)) + 1000 * s + 100 * d).reshape(-1, 2)


def test_all_to_all_single_uneven_splits():
    """Rank s sends rank d (s + d + 1) rows of two int64."""
    rank, size = rank_size()
    rows, block = a2a_rows, a2a_uneven
    inp = torch.cat([block(rank, d) for d in range(size)]).to(DEV)
    out = torch.empty(sum(rows(s, rank) for s in range(size)), 2, dtype=torch.int64, device=DEV)
    dist.all_to_all_single(out, inp, output_split_sizes=[rows(s, rank) for s in range(size)],
                           input_split_sizes=[rows(rank, d) for d in range(size)])
    assert torch.equal(out.cpu(), torch.cat([block(s, rank) for s in range(size)]))


def test_all_to_all_list_large():
    """Blocks of 1 MiB: sends that cannot complete before their receive."""
    rank, size = rank_size()
    n = 1 << 18
    inputs = [a2a_block(rank, d, n).to(DEV) for d in range(size)]
    outputs = [torch.empty(n, device=DEV) for _ in range(size)]
    work = dist.all_to_all(outputs, inputs, async_op=True)
    work.wait()
    for s in range(size):
        assert torch.equal(outputs[s].cpu(), a2a_block(s, rank, n))


def test_all_to_all_single_uneven_without_splits_names_it():
    rank, size = rank_size()
    inp = torch.zeros(size * 3 + 1, device=DEV)
    with pytest.raises(RuntimeError, match="all_to_all_single.*evenly"):
        dist.all_to_all_single(torch.zeros_like(inp), inp)


def test_collectives_still_match_after_the_errors():
    rank, size = rank_size()
    x = torch.full((3,), float(rank), device=DEV)
    dist.all_reduce(x, op=ReduceOp.MAX)
    assert torch.equal(x.cpu(), torch.full((3,), float(size - 1)))


def test_ranks_other_than_mpis_are_refused():
    from torch_rill import _C
    rank, size = rank_size()
    with pytest.raises(RuntimeError, match=f"rank {rank} of {size + 1} where MPI says rank "
                                           f"{rank} of {size}.*mpirun"):
        _C._dist_create(None, rank, size + 1, None, [])
    with pytest.raises(RuntimeError, match="global rank 7 is not a rank of MPI_COMM_WORLD"):
        _C._dist_create(None, 0, 2, None, [rank, 7])
