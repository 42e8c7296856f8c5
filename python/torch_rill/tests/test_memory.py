# SPDX-License-Identifier: MIT
"""rill's stream-ordered pool as PyTorch's device allocator."""

import pytest
import torch

import rill

from conftest import delay


def test_figures_follow_allocations_and_frees():
    torch.rill.synchronize()
    torch.rill.empty_cache()
    base = torch.rill.memory_allocated()
    torch.rill.reset_peak_memory_stats()
    t = torch.empty(1 << 20, device="rill")  # 4 MiB
    assert torch.rill.memory_allocated() >= base + (4 << 20)
    assert torch.rill.memory_reserved() >= torch.rill.memory_allocated()
    assert torch.rill.max_memory_allocated() >= base + (4 << 20)
    stats = torch.rill.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.rill.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.rill.memory_reserved()
    assert stats["allocation.all.current"] >= 1
    del t
    torch.rill.synchronize()
    assert torch.rill.memory_allocated() == base
    assert torch.rill.max_memory_allocated() >= base + (4 << 20)
    torch.rill.reset_peak_memory_stats()
    assert torch.rill.max_memory_allocated() == base
    torch.rill.empty_cache()
    free, total = torch.rill.mem_get_info()
    assert 0 < free <= total
    assert total == rill.device(0).memory_bytes


def test_freed_memory_is_reused_in_stream_order():
    a = torch.empty(1 << 18, device="rill")
    ptr = a.data_ptr()
    del a
    b = torch.empty(1 << 18, device="rill")
    assert b.data_ptr() == ptr


def test_running_out_is_pytorchs_out_of_memory_error_with_rills_sentence():
    with pytest.raises(torch.OutOfMemoryError, match="RILL_ERROR_OUT_OF_MEMORY"):
        torch.empty(1 << 50, dtype=torch.uint8, device="rill")
    assert torch.ones(4, device="rill").sum().item() == 4.0


def test_memory_used_by_a_side_stream_is_not_handed_out_before_it_ran():
    """PyTorch's test_record_stream with the record_stream call removed: rill's
    pool keeps memory that another stream's queued work uses."""
    side = torch.rill.Stream()
    n = 1 << 14
    bad = 0
    for round in range(50):
        tmp = torch.full((n,), float(round), device="rill")
        result = torch.empty(n, device="rill")
        side.wait_stream(torch.rill.current_stream())
        delay(side, 0.002)
        with torch.rill.stream(side):
            result.copy_(tmp)  # a rill copy, queued behind the delay
        del tmp  # no record_stream
        fresh = torch.full((n,), -1.0, device="rill")  # may not take tmp's memory early
        torch.rill.current_stream().wait_stream(side)
        bad += int(not torch.equal(result.cpu(), torch.full((n,), float(round))))
        del fresh
    assert bad == 0
