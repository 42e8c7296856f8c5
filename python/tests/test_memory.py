# SPDX-License-Identifier: MIT
"""The memory calls: statistics, peaks and their reset, the cache, the
limit, the summary."""

import gc
import os
import subprocess
import sys
import textwrap

import pytest

import rill

MIB = 1 << 20


def settle():
    gc.collect()
    rill.synchronize()


def test_memory_allocated_follows_live_tensors():
    settle()
    before = rill.memory_allocated()
    t = rill.empty(MIB // 4)  # 1 MiB
    assert rill.memory_allocated() >= before + MIB
    assert rill.memory_reserved() >= rill.memory_allocated()
    del t
    settle()
    assert rill.memory_allocated() == before


def test_peaks_and_their_reset():
    settle()
    t = rill.empty(4 * MIB // 4)
    del t
    settle()
    assert rill.max_memory_allocated() >= rill.memory_allocated() + 4 * MIB
    assert rill.max_memory_reserved() >= rill.memory_reserved()
    counts = rill.memory_stats()["allocation.all.allocated"]
    rill.reset_peak_memory_stats()
    assert rill.max_memory_allocated() == rill.memory_allocated()
    assert rill.max_memory_reserved() == rill.memory_reserved()
    assert rill.memory_stats()["allocation.all.allocated"] == counts
    u = rill.empty(MIB // 4)
    assert rill.max_memory_allocated() >= rill.memory_allocated()
    del u


def test_empty_cache_returns_freed_memory():
    settle()
    t = rill.empty(16 * MIB // 4)
    reserved_with = rill.memory_reserved()
    del t
    settle()
    rill.empty_cache()
    assert rill.memory_reserved() <= reserved_with - 16 * MIB


def test_memory_limit_makes_large_allocations_fail_cleanly():
    settle()
    assert rill.memory_limit() is None
    rill.set_memory_limit(rill.memory_reserved() + MIB)
    try:
        assert rill.memory_limit() == rill.memory_reserved() + MIB
        with pytest.raises(rill.OutOfMemoryError, match="limit"):
            rill.empty(64 * MIB // 4)
    finally:
        rill.set_memory_limit(None)
    assert rill.memory_limit() is None
    assert rill.empty(64 * MIB // 4).shape == (16 * MIB,)


def test_memory_stats_has_torch_names():
    stats = rill.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak",
                "allocation.all.allocated", "allocation.all.freed", "num_alloc_retries",
                "num_cache_hits", "num_deferred_frees", "limit_bytes"):
        assert isinstance(stats[key], int), key
    assert stats["allocated_bytes.all.current"] == rill.memory_allocated()


def test_memory_stats_per_pool_figures_follow_allocations():
    """The per-pool keys come from rill_mem_get_pool_stats: a small tensor
    (up to 1 MiB) is a live block of the small pool, a large one of the
    large pool, and the pools' bytes add up to the device's."""
    settle()
    before = rill.memory_stats()
    small = rill.empty(1000)            # 4000 bytes
    large = rill.empty(2 * MIB // 4)    # 2 MiB
    settle()
    stats = rill.memory_stats()
    for pool, nbytes in (("small_pool", small.nbytes), ("large_pool", large.nbytes)):
        assert stats[f"active.{pool}.current"] == before[f"active.{pool}.current"] + 1
        assert (stats[f"allocated_bytes.{pool}.current"]
                >= before[f"allocated_bytes.{pool}.current"] + nbytes)
        assert stats[f"segment.{pool}.current"] >= 1
        assert stats[f"reserved_bytes.{pool}.current"] >= stats[f"allocated_bytes.{pool}.current"]
        for key in (f"free_blocks.{pool}.current", f"largest_free_bytes.{pool}",
                    f"pending_free_blocks.{pool}"):
            assert isinstance(stats[key], int), key
    for kind in ("allocated_bytes", "reserved_bytes"):
        assert (stats[f"{kind}.small_pool.current"] + stats[f"{kind}.large_pool.current"]
                == stats[f"{kind}.all.current"])
    del large
    settle()
    after = rill.memory_stats()
    assert after["active.large_pool.current"] == before["active.large_pool.current"]
    assert after["largest_free_bytes.large_pool"] >= 2 * MIB
    del small


def test_memory_stats_limit_is_the_set_limit():
    rill.set_memory_limit(1 << 40)
    try:
        assert rill.memory_stats()["limit_bytes"] == 1 << 40
    finally:
        rill.set_memory_limit(None)
    assert rill.memory_stats()["limit_bytes"] == 0


def test_memory_summary_is_rill_mem_summary_as_text():
    text = rill.memory_summary()
    assert text.startswith("rill memory summary: device")
    assert "allocated" in text and "reserved" in text and "limit" in text


def test_memory_calls_take_a_device():
    dev = rill.current_device()
    assert rill.memory_allocated(dev) == rill.memory_allocated(dev.index) == \
        rill.memory_allocated()
    assert "device" in rill.memory_summary(dev)
    with pytest.raises(rill.NoDeviceError):
        rill.memory_allocated(rill.device_count() + 3)
    assert rill.memory_allocated(str(dev)) == rill.memory_allocated()  # "cpu:0" or "cuda:0"
    with pytest.raises(TypeError):
        rill.memory_reserved(0.5)
    with pytest.raises(ValueError):
        rill.memory_reserved("tpu")


def test_set_memory_limit_refuses_what_is_not_a_byte_count():
    for bad in ("1GB", 1.5, True):
        with pytest.raises(TypeError):
            rill.set_memory_limit(bad)
    for bad in (-1, 1 << 64):
        with pytest.raises(ValueError):
            rill.set_memory_limit(bad)
    assert rill.memory_limit() is None


def test_out_of_memory_error_is_a_memory_error():
    assert issubclass(rill.OutOfMemoryError, MemoryError)
    assert issubclass(rill.OutOfMemoryError, rill.RillError)
    assert issubclass(rill.OutOfMemoryError, RuntimeError)


def test_allocating_until_failure_raises_out_of_memory_error():
    """The PyTorch user's loop that allocates until it fails ends in
    rill.OutOfMemoryError, a MemoryError, at the CPU devices' memory, not in
    the kernel's out-of-memory killer. In a child whose RILL_CPU_MEMORY is
    256M, so that the test touches little memory; the message gives the
    pool's figures and what sets the amount."""
    child = textwrap.dedent("""
        import rill
        rill.set_device(rill.device("cpu"))
        kept = []
        try:
            while len(kept) < 64:
                kept.append(rill.zeros(16 << 20))  # 64 MiB, every page touched
        except MemoryError as e:
            print(type(e).__name__, len(kept), rill.current_device().memory_bytes)
            print(e)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(rill.__file__)),
               RILL_CPU_MEMORY="256M")
    run = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    first, message = run.stdout.split("\n", 1)
    name, kept, memory = first.split()
    assert name == "OutOfMemoryError"
    assert int(memory) == 256 * MIB
    assert 1 <= int(kept) <= 4  # at most what fits in 256 MiB
    assert "cannot allocate 67108864 bytes" in message
    assert "bytes in use" in message and "RILL_CPU_MEMORY=256M" in message
