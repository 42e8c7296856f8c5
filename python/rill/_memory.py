# SPDX-License-Identifier: MIT
"""The memory calls, in the manner of torch.cuda's: statistics of a
device's caching pool, its cache and its limit. device is a rill.Device,
an ordinal, or None for the current device."""

import numbers

from . import _device
from ._errors import check, error
from ._ffi import ffi, lib, libc


def _stats(device, where):
    out = ffi.new("rill_mem_stats *")
    check(lib.rill_mem_get_stats(_device.handle_of(device, where), out))
    return out


def memory_allocated(device=None):
    """Bytes of device memory handed out and not yet freed."""
    return _stats(device, "rill.memory_allocated").allocated_bytes


def max_memory_allocated(device=None):
    """The peak of memory_allocated since the start or the last
    reset_peak_memory_stats."""
    return _stats(device, "rill.max_memory_allocated").peak_allocated_bytes


def memory_reserved(device=None):
    """Bytes held from the system by the caching pool, cached ones included."""
    return _stats(device, "rill.memory_reserved").reserved_bytes


def max_memory_reserved(device=None):
    """The peak of memory_reserved since the start or the last
    reset_peak_memory_stats."""
    return _stats(device, "rill.max_memory_reserved").peak_reserved_bytes


def reset_peak_memory_stats(device=None):
    """Lowers both peaks (allocated and reserved) to the current figures;
    the counts of memory_stats() are kept."""
    check(lib.rill_mem_reset_peak_stats(_device.handle_of(device, "rill.reset_peak_memory_stats")))


def empty_cache(device=None):
    """Returns cached memory that no pending work holds to the system."""
    check(lib.rill_mem_empty_cache(_device.handle_of(device, "rill.empty_cache")))


def set_memory_limit(limit_bytes, device=None):
    """Caps the bytes the device's pool may reserve (None or 0: no cap); an
    allocation beyond it raises OutOfMemoryError once the cache was emptied.
    A tensor's allocation then waits on the host for the pending frees
    (rill_malloc) and raises only if that is not enough; not in a capture
    or a host function, where it raises at once. The scratch memory of ops
    is stream-ordered and never waits. The message names the limit, the
    bytes in use and those pending. The
    device's memory (Device.memory_bytes) caps the pool in any case: a cap
    above it does not raise it (for the CPU devices, RILL_CPU_MEMORY set
    before the first call does)."""
    where = "rill.set_memory_limit"
    if limit_bytes is None:
        limit_bytes = 0
    if not isinstance(limit_bytes, numbers.Integral) or isinstance(limit_bytes, bool):
        raise TypeError(f"{where}: limit_bytes must be an int or None, "
                        f"not {type(limit_bytes).__name__}")
    if limit_bytes < 0 or limit_bytes >= 1 << 64:
        raise ValueError(f"{where}: limit_bytes {limit_bytes} is not a byte count")
    check(lib.rill_mem_set_limit(_device.handle_of(device, where), limit_bytes))


def memory_limit(device=None):
    """The cap set by set_memory_limit, in bytes; None when there is none."""
    out = ffi.new("size_t *")
    check(lib.rill_mem_get_limit(_device.handle_of(device, "rill.memory_limit"), out))
    return out[0] or None


_POOLS = (("small_pool", "RILL_MEM_POOL_SMALL"), ("large_pool", "RILL_MEM_POOL_LARGE"))


def memory_stats(device=None):
    """The pool's statistics as a dict, from rill_mem_get_stats and
    rill_mem_get_pool_stats (the figures memory_summary() prints), with
    torch.cuda.memory_stats' names where it has one:
    allocated_bytes.all.{current,peak}, reserved_bytes.all.{current,peak},
    allocation.all.{allocated,freed}, num_alloc_retries (allocations that
    succeeded after emptying the cache); num_cache_hits, num_deferred_frees
    (frees that waited for another stream), num_pending_reuses (allocations
    served by an internal stream wait instead of growing) and limit_bytes
    (0: none); and for each pool P, small_pool (requests up to 1 MiB) and
    large_pool: segment.P.current, reserved_bytes.P.current,
    allocated_bytes.P.current, active.P.current (live blocks),
    free_blocks.P.current, largest_free_bytes.P and
    pending_free_blocks.P (free blocks that pending work of other streams
    still holds). Reading the pools takes the free blocks that threads
    cache back into them."""
    where = "rill.memory_stats"
    dev = _device.handle_of(device, where)
    st = ffi.new("rill_mem_stats *")
    check(lib.rill_mem_get_stats(dev, st))
    stats = {
        "allocated_bytes.all.current": st.allocated_bytes,
        "allocated_bytes.all.peak": st.peak_allocated_bytes,
        "reserved_bytes.all.current": st.reserved_bytes,
        "reserved_bytes.all.peak": st.peak_reserved_bytes,
        "allocation.all.allocated": st.allocations,
        "allocation.all.freed": st.frees,
        "num_alloc_retries": st.oom_recoveries,
        "num_cache_hits": st.cache_hits,
        "num_deferred_frees": st.deferred_frees,
        "num_pending_reuses": st.pending_reuses,
        "limit_bytes": st.limit_bytes,
    }
    ps = ffi.new("rill_mem_pool_stats *")
    for name, pool in _POOLS:
        check(lib.rill_mem_get_pool_stats(dev, getattr(lib, pool), ps))
        stats.update({
            f"segment.{name}.current": ps.segments,
            f"reserved_bytes.{name}.current": ps.reserved_bytes,
            f"allocated_bytes.{name}.current": ps.allocated_bytes,
            f"active.{name}.current": ps.live_blocks,
            f"free_blocks.{name}.current": ps.free_blocks,
            f"largest_free_bytes.{name}": ps.largest_free_bytes,
            f"pending_free_blocks.{name}": ps.pending_free_blocks,
        })
    return stats


def memory_summary(device=None):
    """The table rill_mem_summary writes, as a str: allocated and reserved
    bytes now and at peak, the limit, and per pool its segments and blocks."""
    dev = _device.handle_of(device, "rill.memory_summary")
    buf = ffi.new("char **")
    size = ffi.new("size_t *")
    f = libc.open_memstream(buf, size)
    if f == ffi.NULL:
        raise MemoryError("rill.memory_summary: open_memstream failed")
    status = lib.rill_mem_summary(dev, f)
    exc = error(status) if status != 0 else None
    libc.fclose(f)  # sets *buf and *size
    try:
        text = ffi.string(buf[0], size[0]).decode("utf-8", "replace")
    finally:
        libc.free(buf[0])
    if exc is not None:
        raise exc
    return text
