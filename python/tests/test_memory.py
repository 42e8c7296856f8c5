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


N = MIB  # floats: 4 MiB tensors


class _PendingFree:
    """A pool at its limit, with one tensor's memory (N floats) freed on a
    side stream behind a host function that holds it until open(): rill's
    pool can serve N floats more only once that free has run."""

    def __init__(self):
        import threading
        settle()
        self.opened = threading.Event()
        rill.set_memory_limit(rill.memory_reserved() + 16 * MIB)
        self.side = rill.Stream()
        with rill.stream(self.side):
            x = rill.empty(N)
        self.kept = []
        try:
            while len(self.kept) < 64:
                self.kept.append(rill.ones(N))
        except rill.OutOfMemoryError:
            pass
        self.side.launch_host_func(self.opened.wait, 10)  # a broken test fails, not hangs
        del x  # freed on the side stream, behind the host function

    def open_later(self, seconds=0.2):
        import threading
        threading.Timer(seconds, self.opened.set).start()

    def close(self):
        self.opened.set()
        self.kept = []
        rill.set_memory_limit(None)
        settle()


def test_a_tensor_at_the_limit_waits_for_frees_pending_behind_a_host_function():
    # Seed 000: if the allocation fails, synchronize, then release; PyTorch's
    # allocator waits for the events of freed blocks before it raises. The
    # makers' fast path, the element-wise fast path and the general path.
    makers = {"rill.ones": lambda kept: rill.ones(N),
              "a + b": lambda kept: kept[0] + kept[1],
              "rill.full float16": lambda kept: rill.full((2 * N,), 2.0, dtype=rill.float16)}
    for name, make in makers.items():
        p = _PendingFree()
        try:
            assert len(p.kept) >= 2
            p.open_later()
            out = make(p.kept)
            want = 1.0 if name == "rill.ones" else 2.0
            assert set(out.numpy().tolist()) == {want}, name
            del out
        finally:
            p.close()


def test_at_the_limit_a_capture_and_a_host_function_raise_at_once():
    # The wait would invalidate the capture, and a host function may not
    # wait (rill_malloc refuses there): both raise without waiting for the
    # host function that holds the pending free (which a wait would meet
    # only when it gives up, after 10 s, and then succeed).
    p = _PendingFree()
    try:
        g = rill.Graph()
        with pytest.raises(rill.OutOfMemoryError):
            with rill.graph(g):
                rill.ones(N)
        seen = []

        def host():
            try:
                rill.ones(N)
                seen.append("allocated")
            except rill.OutOfMemoryError:
                seen.append("OutOfMemoryError")

        other = rill.Stream()
        other.launch_host_func(host)
        other.synchronize()
        assert seen == ["OutOfMemoryError"]
        assert not p.opened.is_set()
    finally:
        p.close()


def test_a_wait_at_the_limit_leaves_another_threads_capture_valid():
    # rill_malloc is an unsafe call, which in GLOBAL mode invalidates every
    # GLOBAL capture: the wait runs in RELAXED mode, uncaptured.
    import threading
    a = rill.zeros(4)
    p = _PendingFree()
    began, allocated, result = threading.Event(), threading.Event(), []

    def capturer():
        try:
            g = rill.Graph()
            with rill.graph(g):
                began.set()
                allocated.wait(10)
                a.add_(1)
            g.replay()
            result.append(a.numpy().tolist())
        except Exception as exc:  # noqa: BLE001 - checked below
            result.append(repr(exc))
        finally:
            began.set()

    t = threading.Thread(target=capturer)
    try:
        t.start()
        assert began.wait(10)
        p.open_later()
        out = rill.ones(N)
        allocated.set()
        t.join()
        assert result == [[1.0] * 4]
        assert set(out.numpy().tolist()) == {1.0}
    finally:
        allocated.set()
        t.join()
        p.close()
