# SPDX-License-Identifier: MIT
"""rill's stream-ordered pool as PyTorch's device allocator."""

import ctypes

import pytest
import torch

import rill

from conftest import delay, gate, rill_stream


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


ROUNDS = 1000


@pytest.mark.parametrize("reader", ["copy", "kernel"])
def test_memory_used_by_a_side_stream_is_not_handed_out_before_it_ran(reader):
    """PyTorch's test_record_stream with the record_stream call removed: a
    tensor that a copy (or an add kernel) queued on a side stream, behind a
    delay, still reads is dropped, and a tensor made at once on the current
    stream is filled; rill's pool knows the access and keeps the memory
    from it, so no result is corrupted in ROUNDS rounds (the control below
    shows the same rounds corrupted when the pool cannot see the access)."""
    side = torch.rill.Stream()
    n = 1 << 14
    corrupted = 0
    for round in range(ROUNDS):
        tmp = torch.full((n,), float(round), device="rill")
        result = torch.zeros(n, device="rill")
        side.wait_stream(torch.rill.current_stream())
        delay(side, 0.001)
        with torch.rill.stream(side):  # queued behind the delay
            if reader == "copy":
                result.copy_(tmp)  # a rill copy
            else:
                result.add_(tmp)  # a rill kernel (rill_op_binary_f32)
        del tmp  # no record_stream
        fresh = torch.full((n,), -1.0, device="rill")  # may not take tmp's memory early
        torch.rill.current_stream().wait_stream(side)
        corrupted += int(not torch.equal(result.cpu(), torch.full((n,), float(round))))
        del fresh
    assert corrupted == 0, f"{corrupted} of {ROUNDS} rounds corrupted"


def test_control_memory_read_by_work_rill_cannot_see_is_handed_out_early():
    """The control of the test above: the side stream reads the dropped
    tensor in a host function through its address, which rill's pool cannot
    see, so (without record_stream) the pool hands the memory to the fresh
    tensor, whose fill lands before the read. The host function waits for a
    gate that opens only after the fill ran, so the early reuse is certain
    and the read never races the fill."""
    side = torch.rill.Stream()
    n = 1 << 14
    rounds = 100
    corrupted = 0
    for round in range(rounds):
        tmp = torch.full((n,), float(round), device="rill")
        side.wait_stream(torch.rill.current_stream())
        opened = gate(side)
        seen = bytearray(4 * n)
        address = tmp.data_ptr()
        rill_stream(side).launch_host_func(ctypes.memmove, (ctypes.c_char * len(seen)).from_buffer(seen),
                                           address, len(seen))
        del tmp  # no record_stream: nothing tells the pool of the read
        fresh = torch.full((n,), -1.0, device="rill")
        torch.rill.current_stream().synchronize()  # the fill ran
        opened.set()
        side.synchronize()
        got = torch.frombuffer(seen, dtype=torch.float32)
        corrupted += int(not torch.equal(got, torch.full((n,), float(round))))
        del fresh
    assert corrupted >= 1, "the control never saw the memory handed out early"


def test_torch_cudas_memory_and_property_calls():
    """torch.cuda's calls that rill has the concept for: the device's
    properties, the memory table, nested figures, a cap on the pool as a
    fraction of the device's memory, device_of."""
    props = torch.rill.get_device_properties(0)
    dev = rill.device(0)
    assert (props.name, props.total_memory, props.multi_processor_count) == (
        dev.name, dev.memory_bytes, dev.compute_units)
    assert props.type == dev.kind
    assert torch.rill.is_bf16_supported()
    x = torch.ones(1000, device="rill")
    assert "rill memory summary: device 0" in torch.rill.memory_summary()
    nested = torch.rill.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.rill.memory_allocated()
    with pytest.warns(FutureWarning):
        torch.rill.reset_max_memory_allocated()
    try:
        torch.rill.set_per_process_memory_fraction(0.0001)
        assert 0.00009 < torch.rill.get_per_process_memory_fraction() <= 0.0001
        with pytest.raises(torch.rill.OutOfMemoryError, match="limit"):
            torch.empty(props.total_memory // 4000, device="rill")
        with pytest.raises(ValueError):
            torch.rill.set_per_process_memory_fraction(1.5)
    finally:
        torch.rill.set_per_process_memory_fraction(1.0)
    assert torch.rill.get_per_process_memory_fraction() == 1.0
    with torch.rill.device_of(x):
        assert torch.rill.current_device() == 0
    with torch.rill.device_of(torch.ones(1)):  # another device's: nothing changes
        assert torch.rill.current_device() == 0
