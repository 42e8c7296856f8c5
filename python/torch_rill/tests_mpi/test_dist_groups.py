# SPDX-License-Identifier: MIT
"""Subgroups of the "rill" backend (dist.new_group), run under mpirun -np 3:
a group of ranks 0 and 2 reduces without rank 1, and the world's
collectives still match afterwards."""

import pytest
import torch
import torch.distributed as dist

DEV = "rill"


@pytest.fixture(scope="module")
def outer():
    if dist.get_world_size() != 3:
        pytest.skip("these tests need mpirun -np 3")
    return dist.new_group([0, 2])


def test_a_group_of_0_and_2_all_reduces_without_rank_1(outer):
    rank = dist.get_rank()
    x = torch.full((6,), float(rank + 1), device=DEV)
    if rank in (0, 2):
        assert dist.get_rank(outer) == (0 if rank == 0 else 1)
        assert dist.get_world_size(outer) == 2
        dist.all_reduce(x, group=outer)
        assert torch.equal(x.cpu(), torch.full((6,), 4.0))  # 1 + 3
    else:
        assert dist.get_rank(outer) == -1
        assert torch.equal(x.cpu(), torch.full((6,), 2.0))


def test_group_collectives_use_group_ranks(outer):
    rank = dist.get_rank()
    if rank == 1:
        return
    b = torch.full((3,), float(rank), device=DEV)
    dist.broadcast(b, group_src=1, group=outer)  # global rank 2
    assert torch.equal(b.cpu(), torch.full((3,), 2.0))
    out = torch.empty(4, dtype=torch.int64, device=DEV)
    dist.all_gather_into_tensor(out, torch.full((2,), rank, dtype=torch.int64, device=DEV),
                                group=outer)
    assert torch.equal(out.cpu(), torch.tensor([0, 0, 2, 2]))


def test_world_collectives_still_work_after_the_group(outer):
    rank = dist.get_rank()
    x = torch.full((5,), float(rank + 1), device=DEV)
    dist.all_reduce(x)
    assert torch.equal(x.cpu(), torch.full((5,), 6.0))
    out = torch.empty(3, device=DEV)
    dist.all_gather_into_tensor(out, torch.full((1,), float(rank), device=DEV))
    assert torch.equal(out.cpu(), torch.tensor([0.0, 1.0, 2.0]))


def test_a_second_group_of_1_and_2(outer):
    rank = dist.get_rank()
    other = dist.new_group([1, 2])
    x = torch.full((2,), float(10 * rank), device=DEV)
    if rank != 0:
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=other)
        assert torch.equal(x.cpu(), torch.full((2,), 20.0))
    else:
        assert torch.equal(x.cpu(), torch.zeros(2))
    dist.barrier()
