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


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.float16])
def test_all_reduce_of_another_dtype_names_it(dtype):
    x = torch.ones(4, dtype=dtype, device=DEV)
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(TypeError, match=f"float32.*{name}"):
        dist.all_reduce(x)


def test_unsupported_reduce_op_names_it():
    x = torch.ones(4, device=DEV)
    with pytest.raises(NotImplementedError, match="PRODUCT"):
        dist.all_reduce(x, op=ReduceOp.PRODUCT)


def test_unsupported_collective_names_it():
    x = torch.ones(4, device=DEV)
    with pytest.raises(RuntimeError, match="does not support reduce"):
        dist.reduce(x, dst=0)


def test_collectives_still_match_after_the_errors():
    rank, size = rank_size()
    x = torch.full((3,), float(rank), device=DEV)
    dist.all_reduce(x, op=ReduceOp.MAX)
    assert torch.equal(x.cpu(), torch.full((3,), float(size - 1)))


def test_ranks_other_than_mpis_are_refused():
    import torch_rill.distributed as rd
    rank, size = rank_size()
    with pytest.raises(RuntimeError, match=f"rank {rank} of {size + 1} where MPI says rank "
                                           f"{rank} of {size}.*mpirun"):
        rd._create(None, rank, size + 1, None)
