/* SPDX-License-Identifier: MIT */
/* The per-thread caches in front of the pool (tcache.c): a same-stream
 * allocate/free pair without pool->lock. */
#ifndef RILL_MEM_TCACHE_H
#define RILL_MEM_TCACHE_H

#include "mem/pool_internal.h"

/* block.tc_state: which part of a thread cache holds a block. */
#define TC_NONE       0
#define TC_LIVE_BLOCK 1 /* allocated, handed out by the cache */
#define TC_CACHED     2 /* free, kept by the cache for its stream */

/* Is k free in a thread cache (allocated as far as the pool knows)? A
 * relaxed read: lookups that only report errors call it under pool->lock. */
static inline bool rill__tcache_holds_free(const block *k) {
    return atomic_load_explicit(&k->tc_state, memory_order_relaxed) == TC_CACHED;
}

/* Raises the peak of allocated bytes to the current true figure
 * (pool->lock held). */
void rill__tcache_note_peak_locked(rill__pool *p);

/* Takes every cache's blocks back to the pool (pool->lock held). */
void rill__tcache_steal_all(rill__pool *p);

/* The allocated block that starts at ptr, wherever it is (pool->lock
 * held): the hash, the caller's cache, or (with steal) another thread's,
 * which is then stolen. */
block *rill__tcache_lookup_locked(rill__pool *p, const void *ptr, bool steal);

/* The lock-free allocation: a cached block freed on s, whose use (if any)
 * is over for s, that the locked path would hand out whole for size bytes.
 * NULL when there is none (or no room to lease it). */
void *rill__tcache_alloc(rill__pool *p, rill__stream *s, size_t size, size_t bytes);

/* The lock-free free, in the pool of f's device or (f NULL) the one the
 * calling thread's cache belongs to. */
bool rill__tcache_free(const void *ptr, rill__stream *f);

/* The lock-free lookup of an allocated block that starts at ptr and that
 * the calling thread's cache of p leased: true, with *bytes_to_end the
 * block's requested bytes, when it is there; false otherwise (it may be
 * elsewhere in the pool). */
bool rill__tcache_find_live(rill__pool *p, const void *ptr, size_t *bytes_to_end);

/* The lock-free note of a use: the command seq of s uses the block that
 * starts at ptr, leased by the calling thread's cache of p. False when the
 * pool must note it (the locked path). */
bool rill__tcache_note_use(rill__pool *p, rill__stream *s, uint64_t seq, const void *ptr);

/* Offers block k, just freed on f (NULL: its own stream) with its points
 * pruned, to the calling thread's cache: true when the cache keeps it
 * (pool->lock held; the caller counts the free). */
bool rill__tcache_keep_locked(rill__pool *p, block *k, rill__stream *f);

/* Does the calling thread's cache hold freed blocks of size's bin that
 * wait for another stream's use (pool->lock held)? */
bool rill__tcache_rotating_locked(const rill__pool *p, size_t size);

/* Moves the calling thread's cached blocks back to the pool when they
 * hold at least size bytes, so that they may merge into a block of that
 * size; true when it did (pool->lock held). */
bool rill__tcache_drain_mine_locked(rill__pool *p, size_t size);

/* Adds the thread caches' share to statistics copied from p->stats:
 * their allocations (all cache hits) and frees, less the bytes they hold
 * free (pool->lock held). */
void rill__tcache_stats_locked(const rill__pool *p, rill_mem_stats *out);

/* Frees the cache structures of p (pool destroy: their blocks went with
 * the segments). */
void rill__tcache_destroy_all(rill__pool *p);

#endif
