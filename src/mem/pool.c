/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool (see pool.h for the rules): allocation,
 * freeing, uses, lookups, statistics, the pool's life and its summary.
 * Free blocks live in size-segregated bins (TLSF style, with a bitmap),
 * allocated blocks in a hash table by address or in the thread cache that
 * leased them (tcache.c). */

/* Locking: pool->lock guards everything here; it is taken after the
 * registry lock is released, and takes no stream lock (done_seq, sub_seq
 * and the clock are read without one). Commands are submitted
 * (internal waits) only after it is released. A thread cache is its
 * owner's outside the lock, and a lock holder's only by stealing it. Streams
 * named by blocks and points are held through pool->owners, one reference
 * per stream, so that recording a use takes no atomic on the stream. */
#include "mem/pool.h"

#include <inttypes.h>
#include <string.h>

#include "core/runtime.h"
#include "core/stream.h"
#include "mem/block.h"
#include "mem/pool_internal.h"
#include "mem/registry.h"
#include "mem/segment.h"
#include "mem/tcache.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/status.h"

static _Atomic uint64_t next_pool_id = 1; /* see rill__pool.id */

/* ---------------------------------------------------------- allocation */

/* The size of a block for a request of bytes: a multiple of MIN_BLOCK, and
 * of a 64th of the request's power of two above 32 KiB. Requests a little
 * apart (a few hundred bytes of a length that varies) thus get blocks of
 * one size, and a block freed by one serves the next; this costs at most
 * 1/64 of the request (PyTorch's roundup_power2_divisions does the same
 * with 4 to 16 divisions, by choice of the user). */
static size_t round_request(size_t bytes) {
    size_t step = MIN_BLOCK;
    if (bytes > ((size_t)32 << 10)) {
        size_t pow2 = (size_t)1 << (63 - __builtin_clzll((unsigned long long)bytes));
        step = pow2 / ROUND_DIVISIONS;
    }
    size_t r = (bytes + step - 1) & ~(step - 1);
    return r < MIN_BLOCK ? MIN_BLOCK : r;
}

/* A free block of at least size bytes; with need_safe, one that s may take
 * without waiting (s NULL: that any stream may use at once). Bounded scan,
 * best bins first. */
static block *find_free(rill__pool *p, int small, size_t size, rill__stream *s, int need_safe) {
    bins *b = rill__bins_for(p, small);
    int scanned = 0;
    for (unsigned i = rill__bin_next(b, rill__bin_of(size)); i < NUM_BINS;
         i = rill__bin_next(b, i + 1)) {
        for (block *k = b->head[i]; k != NULL; k = k->bin_next) {
            if (k->size < size)
                continue;
            if (!need_safe || rill__block_safe_for(k, s))
                return k;
            if (++scanned >= SCAN_LIMIT)
                return NULL;
        }
    }
    return NULL;
}

/* Takes free block k for an allocation of size bytes (rounded from
 * requested) on s. */
static void take(rill__pool *p, block *k, size_t size, size_t requested, rill__stream *s) {
    RILL_ASSERT(!k->allocated && !k->unmapped && k->size >= size && rill__block_tiles(k));
    int small = k->seg->small;
    bins *b = rill__bins_for(p, small);
    rill__bin_remove(b, k);
    size_t rest = k->size - size;
    if (rill__splits(small, rest)) {
        block *r = rill__block_new(p);
        if (r != NULL) {
            r->ptr = k->ptr + size;
            r->size = rest;
            r->seg = k->seg;
            r->prev = k;
            r->next = k->next;
            if (k->next != NULL)
                k->next->prev = r;
            k->next = r;
            k->size = size;
            rill__segment_index_add(r);
            rill__points_copy(p, r, k);
            rill__bin_insert(b, r);
        }
    }
    rill__points_clear(p, k);
    k->conservative = 0;
    k->allocated = 1;
    k->requested = requested;
    k->stream = s; /* held through pool->owners (see rill__pool_alloc) */
    rill__hash_insert(p, k);
    rill__set_allocated(p, p->stats.allocated_bytes + k->size);
    rill__tcache_note_peak_locked(p);
    p->stats.allocations++;
}

/* Waits on the host for every point of every free block, then prunes
 * them (the last resort before out of memory). pool->lock held on entry
 * and exit; dropped while waiting. */
static void drain_points(rill__device *dev, rill__pool *p) {
    size_t n = 0, cap = 0;
    point *all = NULL;
    int conservative = 0;
    for (segment *g = p->segments; g != NULL; g = g->next) {
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated)
                continue;
            conservative |= k->conservative;
            for (size_t i = 0; i < k->num_points; i++) {
                if (n == cap) {
                    size_t c = cap != 0 ? 2 * cap : 64;
                    point *q = rill__malloc(c * sizeof *q);
                    if (q == NULL) {
                        conservative = 1;
                        break;
                    }
                    if (n > 0)
                        memcpy(q, all, n * sizeof *q);
                    rill__free(all);
                    all = q;
                    cap = c;
                }
                rill__stream_ref(k->points[i].stream);
                all[n++] = k->points[i];
            }
        }
    }
    rill__spinlock_unlock(&p->lock);
    for (size_t i = 0; i < n; i++) {
        rill__stream_host_wait(all[i].stream, all[i].seq, RILL__WAIT_BLOCKING);
        rill__stream_unref(all[i].stream);
    }
    rill__free(all);
    if (conservative)
        rill__device_drain(dev, "the memory pool"); /* its failures are the streams' */
    rill__spinlock_lock(&p->lock);
    for (segment *g = p->segments; g != NULL; g = g->next) {
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated)
                continue;
            rill__points_prune(p, k);
            if (conservative)
                k->conservative = 0;
        }
    }
}

/* The statistics with the thread caches' share (pool->lock held). */
static void stats_locked(rill__pool *p, rill_mem_stats *out) {
    *out = p->stats;
    rill__tcache_stats_locked(p, out);
    out->pending_reuses = p->pending_reuses;
    out->limit_bytes = p->limit;
}

/* What an allocation that failed could not use: the free blocks that
 * pending work still holds, and one stream that holds them, preferably
 * one with a host function or other opaque work pending (a reference for
 * the caller to drop; NULL when nothing is pending). pool->lock held. */
static size_t pending_locked(rill__pool *p, rill__stream **holder, bool *opaque) {
    size_t bytes = 0;
    *holder = NULL;
    *opaque = false;
    for (segment *g = p->segments; g != NULL; g = g->next) {
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated || k->unmapped)
                continue;
            rill__points_prune(p, k);
            if (k->num_points == 0 && !k->conservative)
                continue;
            bytes += k->size;
            for (size_t i = 0; i < k->num_points && !*opaque; i++) {
                rill__stream *t = k->points[i].stream;
                bool o = rill__stream_opaque_pending(t);
                if (*holder == NULL || o) {
                    if (*holder != NULL)
                        rill__stream_unref(*holder);
                    rill__stream_ref(t);
                    *holder = t;
                    *opaque = o;
                }
            }
        }
    }
    return bytes;
}

/* Fails an allocation of bytes with a sentence that names what stood in
 * the way (the pool's limit, or the device's memory with the backend's
 * phrase about it), what is in use, what is pending and where, and what
 * to do. may_wait: the stream-ordered call, which never waits on the host
 * for pending frees. Drops pool->lock. */
static rill_status out_of_memory(rill__device *dev, rill__pool *p, size_t bytes, bool may_wait,
                                 const char *fn) {
    rill__tcache_steal_all(p); /* their free blocks count as cached or pending */
    rill_mem_stats st;
    stats_locked(p, &st);
    rill__stream *holder;
    bool opaque;
    size_t pending = pending_locked(p, &holder, &opaque);
    size_t limit = p->limit, need = round_request(bytes);
    bool at_limit = limit != 0 && (st.reserved_bytes >= limit || limit - st.reserved_bytes < need);
    bool internal_waits = (p->reuse_flags & RILL_MEM_REUSE_INTERNAL_WAITS) != 0;
    rill__spinlock_unlock(&p->lock);
    char memory[384] = "";
    if (!at_limit && dev->ops->mem_describe != NULL)
        dev->ops->mem_describe(dev, memory, sizeof memory);
    size_t in_use = st.allocated_bytes;
    size_t unused = st.reserved_bytes - in_use;
    size_t cached = unused > pending ? unused - pending : 0;
    char lim[448];
    if (at_limit)
        snprintf(lim, sizeof lim, "within the pool's limit of %zu bytes", limit);
    else if (memory[0] != '\0')
        snprintf(lim, sizeof lim, "within the device's memory (%s)", memory);
    else
        snprintf(lim, sizeof lim, "(the device is full)");
    /* Raising the limit helps only where the limit stood in the way. */
    const char *raise = memory[0] == '\0' ? "raise the limit with rill_mem_set_limit, " : "";
    char held[256] = "";
    char todo[512];
    if (holder != NULL) {
        char name[80];
        rill__stream_name(holder, name, sizeof name);
        rill__stream_unref(holder);
        snprintf(held, sizeof held, " on stream %s%s", name,
                 opaque ? ", behind a host function or other work that may wait for anything" : "");
        if (may_wait)
            snprintf(todo, sizeof todo,
                     "a stream-ordered allocation never waits on the host: allocate once stream "
                     "%s has passed that work (rill_stream_synchronize), or with rill_malloc, "
                     "which waits for it%s; else free memory, %sor allocate less",
                     name,
                     !opaque && !internal_waits
                         ? ", or let the pool wait in stream order with rill_mem_set_reuse_policy"
                         : "",
                     raise);
        else
            snprintf(todo, sizeof todo,
                     "rill_malloc waits for pending frees except inside a kernel or host "
                     "function: synchronize stream %s first, free memory, %sor allocate less",
                     name, raise);
    } else {
        snprintf(todo, sizeof todo, "free memory, %sor allocate less", raise);
    }
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                      "%s: cannot allocate %zu bytes on device %d %s: %zu bytes in use, %zu bytes "
                      "freed but still held by pending work%s, %zu bytes cached; %s",
                      fn, bytes, dev->base.info.ordinal, lim, in_use, pending, held, cached, todo);
}

/* A free block of at least size bytes that s may take after internal
 * waits costing at most max_cost (see rill__block_wait_cost): of the
 * smallest that qualify (the first bin holding one, so that a small
 * request never splits a large block that a wait would free), the one
 * that costs the least. */
static block *find_pending(rill__pool *p, int small, size_t size, rill__stream *s,
                           uint64_t max_cost) {
    bins *b = rill__bins_for(p, small);
    block *best = NULL;
    uint64_t best_cost = UINT64_MAX; /* UINT64_MAX: cannot be waited for */
    int scanned = 0;
    for (unsigned i = rill__bin_next(b, rill__bin_of(size)); i < NUM_BINS && best == NULL;
         i = rill__bin_next(b, i + 1)) {
        for (block *k = b->head[i]; k != NULL; k = k->bin_next) {
            if (k->size < size)
                continue;
            if (++scanned > SCAN_LIMIT)
                return best;
            uint64_t cost = rill__block_wait_cost(k, s);
            if (cost <= max_cost && cost < best_cost) {
                best = k;
                best_cost = cost;
            }
        }
    }
    return best;
}

/* How much of another stream's work s may come to wait for to reuse a
 * pending block rather than grow: s's own unfinished commands plus
 * WAIT_SLACK. Counted from what s already waits for, so a stream that
 * exchanges events with the other in every step (their work already
 * serialised) waits for a few commands more, while an idle stream does
 * not start waiting behind another's long queue of independent work,
 * which would serialise the two: then growing is better. */
static uint64_t wait_budget(rill__stream *s) {
    uint64_t sub = rill__submitted_of(s), done = rill__done_of(s);
    return (sub > done ? sub - done : 0) + WAIT_SLACK;
}

/* Takes what a stream-ordered allocation may take when the pool cannot
 * grow, without waiting on the host: the thread caches' blocks, the cache
 * returned to the system, then a free block s may take, growth, or (with
 * internal waits) a pending block s waits for in stream order. NULL when
 * none: the caller fails at once. pool->lock held throughout. */
static block *recover_ordered(rill__device *dev, rill__pool *p, int small, size_t size,
                              rill__stream *s, bool internal_waits, point *waits,
                              size_t *num_waits) {
    rill__tcache_steal_all(p);
    rill__segment_empty_cache_locked(dev, p);
    block *k = find_free(p, small, size, s, 1);
    if (k == NULL)
        k = rill__segment_grow(dev, p, small, s, size, 0);
    if (k == NULL && internal_waits) {
        k = find_pending(p, small, size, s, UINT64_MAX - 1);
        if (k != NULL && !rill__points_collect_waits(k, s, waits, MAX_WAITS, num_waits))
            k = NULL;
        if (k != NULL)
            p->pending_reuses++;
    }
    return k;
}

/* Gives back block ptr (size bytes) that s took but cannot be made to wait
 * for: waits[from..n) become uses of the block again, and the block is
 * freed on s, behind the waits already queued there. Drops every wait's
 * reference. */
static void give_back(rill__stream *s, void *ptr, size_t size, point *waits, size_t from, size_t n,
                      const char *fn) {
    for (size_t i = from; i < n; i++)
        rill__pool_note_use(waits[i].stream, waits[i].seq, ptr, size);
    rill_status st = rill__pool_free(ptr, s, fn);
    RILL_ASSERT(st == RILL_OK); /* a live block of s's own device */
    (void)st;
    for (size_t i = from; i < n; i++)
        rill__stream_unref(waits[i].stream);
}

/* Allocates bytes for s's device, owned by s (work there is ordered with
 * the free). With may_wait (rill_malloc_async), the block is for use in
 * s's order: one that s's own work or work s waits for still holds may be
 * handed out, and, when the reuse policy allows, one that other streams'
 * pending work holds, through internal waits of s before the pool grows.
 * It never waits on the host: a pending free may sit behind a host
 * function that the calling thread itself releases only after this call
 * returns. What stream order cannot provide fails at once. Without it
 * (rill_malloc), the block is for any stream at once: only blocks whose
 * work is complete, and the host waits for that work when the pool cannot
 * grow. */
static rill_status pool_alloc(rill__stream *s, size_t bytes, bool may_wait, const char *fn,
                              void **out) {
    rill__device *dev = s->q.dev;
    rill__pool *p = rill__pool_of(dev);
    if (bytes > SIZE_MAX / 2)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: %zu bytes is more than any device can hold; check the size", fn,
                          bytes);
    size_t size = round_request(bytes);
    if (size > dev->base.info.memory_bytes) {
        /* Refused at once: no waiting for frees, emptying of the cache or
         * committing of the device's memory on the way to failing. */
        char memory[384] = "";
        if (dev->ops->mem_describe != NULL)
            dev->ops->mem_describe(dev, memory, sizeof memory);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: %zu bytes is more than device %d (%s) has in all (%zu bytes%s%s); "
                          "allocate less",
                          fn, bytes, dev->base.info.ordinal, dev->base.info.name,
                          dev->base.info.memory_bytes, memory[0] != '\0' ? ": " : "", memory);
    }
    /* The thread cache relies on s's order: only for may_wait. */
    void *cached = may_wait ? rill__tcache_alloc(p, s, size, bytes) : NULL;
    if (cached != NULL) {
        *out = cached;
        return RILL_OK;
    }
    rill__stream *user = may_wait ? s : NULL; /* the stream the block must be safe for */
    int small = size <= SMALL_REQUEST;
    point waits[MAX_WAITS];
    size_t num_waits = 0;
    rill__spinlock_lock(&p->lock);
    /* A stream that frees its own blocks after other streams used them
     * keeps them in rotation in this thread's cache (tcache.c). When none
     * of this size is past its use yet, a wait would come back each time
     * the rotation runs short: the pool grows the rotation instead. Blocks
     * that other streams freed are reused through internal waits. */
    bool internal_waits = may_wait && (p->reuse_flags & RILL_MEM_REUSE_INTERNAL_WAITS);
    uint64_t budget = internal_waits && !rill__tcache_rotating_locked(p, size) ? wait_budget(s) : 0;
    block *k = find_free(p, small, size, user, 1);
    if (k == NULL && rill__tcache_drain_mine_locked(p, size))
        k = find_free(p, small, size, user, 1); /* its blocks may merge into what is needed */
    if (k == NULL && p->unmerged != 0) {
        rill__segment_coalesce_all(p);
        k = find_free(p, small, size, user, 1);
    }
    if (k == NULL && budget != 0) {
        /* Reuse a pending block through internal waits rather than grow,
         * as CUDA's pools do, when its points are few and near. */
        k = find_pending(p, small, size, s, budget);
        if (k != NULL && !rill__points_collect_waits(k, s, waits, MAX_WAITS, &num_waits))
            k = NULL;
        if (k != NULL)
            p->pending_reuses++;
    }
    if (k != NULL) {
        p->stats.cache_hits++;
    } else if ((k = rill__segment_grow(dev, p, small, user, size, budget)) != NULL) {
        /* Grown onto a free block that s may wait for within its budget:
         * its points have no more than MAX_WAITS, so they all fit. */
        if (!rill__block_safe_for(k, user)) {
            bool fit = rill__points_collect_waits(k, s, waits, MAX_WAITS, &num_waits);
            RILL_ASSERT(fit);
            (void)fit;
            p->pending_reuses++;
        }
    } else if (may_wait) {
        /* Cannot grow: reuse a block that s must first wait for (an
         * internal stream wait), if one has few enough points, after
         * taking back what needs no wait; never a wait on the host. */
        k = internal_waits ? find_pending(p, small, size, s, UINT64_MAX - 1) : NULL;
        if (k != NULL && !rill__points_collect_waits(k, s, waits, MAX_WAITS, &num_waits))
            k = NULL;
        if (k != NULL) {
            p->stats.cache_hits++;
        } else if ((k = recover_ordered(dev, p, small, size, s, internal_waits, waits,
                                        &num_waits)) != NULL) {
            p->stats.oom_recoveries++;
        } else {
            return out_of_memory(dev, p, bytes, may_wait, fn);
        }
    } else {
        if (!rill__thread_is_worker()) {
            /* Last resort: take back the thread caches, wait on the host
             * for pending frees, return the cache to the system, and grow. */
            rill__tcache_steal_all(p);
            drain_points(dev, p);
            rill__segment_empty_cache_locked(dev, p);
            k = find_free(p, small, size, user, 1);
            if (k == NULL)
                k = rill__segment_grow(dev, p, small, user, size, 0);
            if (k != NULL)
                p->stats.oom_recoveries++;
        }
        if (k == NULL)
            return out_of_memory(dev, p, bytes, may_wait, fn);
    }
    if (!rill__owners_hold(p, s)) {
        /* The owners table is full: hold this one directly. */
        rill__stream_ref(s);
        take(p, k, size, bytes, s);
        k->own_ref = 1;
    } else {
        take(p, k, size, bytes, s);
    }
    void *ptr = (void *)k->ptr;
    rill__spinlock_unlock(&p->lock);
    for (size_t i = 0; i < num_waits; i++) {
        /* Orders memory only: a failure of the other stream's work is not
         * this stream's. Without memory for the command, the block goes
         * back with the uses s could not wait for, and the call fails. */
        rill_status st = rill__stream_wait_order(s, waits[i].stream, waits[i].seq, fn);
        if (st != RILL_OK) {
            give_back(s, ptr, size, waits, i, num_waits, fn);
            return st;
        }
        rill__stream_unref(waits[i].stream);
    }
    *out = ptr;
    return RILL_OK;
}

rill_status rill__pool_alloc(rill__stream *s, size_t bytes, const char *fn, void **out) {
    return pool_alloc(s, bytes, false, fn, out);
}

rill_status rill__pool_alloc_async(rill__stream *s, size_t bytes, const char *fn, void **out) {
    return pool_alloc(s, bytes, true, fn, out);
}

/* ------------------------------------------------------------- freeing */

/* The device whose pool's segments hold ptr; false when ptr is no device
 * memory. Only the device: without pool->lock, the segment itself may be
 * released (rill__segment_release, under the lock) before the caller takes
 * the lock, so a caller that reads the segment looks it up again with
 * segment_of_locked. */
static bool device_of(const void *ptr, rill__device **dev) {
    rill__mem_block rb;
    if (!rill__registry_find(ptr, &rb) || rb.kind != RILL__MEM_DEVICE)
        return false;
    *dev = rb.dev;
    return true;
}

/* The segment of p that holds ptr, with pool->lock held (the lock order is
 * pool->lock, then the registry's, as in rill__segment_grow); NULL when
 * there is none now. */
static segment *segment_of_locked(rill__pool *p, const void *ptr) {
    rill__mem_block rb;
    if (!rill__registry_find(ptr, &rb) || rb.kind != RILL__MEM_DEVICE || rill__pool_of(rb.dev) != p)
        return NULL;
    return rb.owner;
}

/* Finds the allocated block that starts at ptr in some device's pool and
 * returns with that pool locked; NULL (nothing locked) when there is none.
 * The hash lookup avoids the registry on the hot free path. */
static block *find_allocated_locked(const void *ptr, rill__pool **pool, rill__device **dev) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    for (int i = 0; i < rt->num_devices; i++) {
        rill__pool *p = rill__pool_of(rt->devices[i]);
        rill__spinlock_lock(&p->lock);
        block *k = rill__tcache_lookup_locked(p, ptr, true);
        if (k != NULL) {
            *pool = p;
            *dev = rt->devices[i];
            return k;
        }
        rill__spinlock_unlock(&p->lock);
    }
    return NULL;
}

/* The sentence for a free of a pointer that is no allocated block. */
static rill_status bad_free(void *ptr, const char *fn) {
    rill__device *dev = NULL;
    if (device_of(ptr, &dev)) {
        rill__pool *p = rill__pool_of(dev);
        rill__spinlock_lock(&p->lock);
        rill__tcache_steal_all(p); /* its cached blocks are free, not allocated */
        segment *g = segment_of_locked(p, ptr);
        block *in = g != NULL ? rill__segment_block_at(g, (uintptr_t)ptr) : NULL;
        int inside = in != NULL && in->allocated;
        uintptr_t base = inside ? in->ptr : 0;
        rill__spinlock_unlock(&p->lock);
        if (inside)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: %p is %zu bytes into an allocation that starts at %p; pass the "
                              "pointer that the allocation returned",
                              fn, ptr, (size_t)((uintptr_t)ptr - base), (void *)base);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p is not an allocated block (already freed?)", fn, ptr);
    }
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: %p is not device memory from rill_malloc or rill_malloc_async (or was "
                      "already freed)",
                      fn, ptr);
}

rill_status rill__pool_free(void *ptr, rill__stream *f, const char *fn) {
    if (rill__tcache_free(ptr, f))
        return RILL_OK;
    rill__pool *p = NULL;
    rill__device *dev = NULL;
    block *k = find_allocated_locked(ptr, &p, &dev);
    if (k == NULL)
        return bad_free(ptr, fn);
    if (f != NULL && f->q.dev != dev) {
        rill__spinlock_unlock(&p->lock);
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "%s: %p belongs to device %d but the stream to device %d; free it on a "
                          "stream of its own device",
                          fn, ptr, dev->base.info.ordinal, f->q.dev->base.info.ordinal);
    }
    segment *g = k->seg;
    rill__hash_remove(p, k);
    rill__stream *a = k->stream;
    rill__stream *by = f != NULL ? f : a;
    for (size_t i = 0; i < k->num_points; i++)
        if (k->points[i].seq == UNTIL_FREE)
            k->points[i].seq = rill__submitted_of(k->points[i].stream);
    rill__points_prune(p, k);
    /* A block freed on its own stream, with no other stream's point, goes
     * to the calling thread's cache: that stream may take it again at
     * once, without the lock. */
    if (rill__tcache_keep_locked(p, k, f)) {
        p->stats.frees++;
        rill__spinlock_unlock(&p->lock);
        return RILL_OK;
    }
    /* The frees' own points, unless already complete (the common case of
     * a stream that has caught up: no reference taken). */
    uint64_t a_seq = rill__submitted_of(a);
    if (rill__done_of(a) < a_seq)
        rill__points_add(p, k, a, a_seq);
    if (by != a) {
        uint64_t by_seq = rill__submitted_of(by);
        if (rill__done_of(by) < by_seq)
            rill__points_add(p, k, by, by_seq);
    }
    for (size_t i = 0; i < k->num_points; i++) {
        if (k->points[i].stream != by) {
            p->stats.deferred_frees++;
            break;
        }
    }
    int own_ref = k->own_ref;
    if (!own_ref)
        rill__owners_release(p, a);
    k->allocated = 0;
    k->own_ref = 0;
    k->stream = NULL;
    rill__set_allocated(p, p->stats.allocated_bytes - k->size);
    p->stats.frees++;
    p->unmerged++; /* neighbours merge lazily: see coalesce_all */
    rill__bin_insert(rill__bins_for(p, g->small), k);
    rill__spinlock_unlock(&p->lock);
    if (own_ref)
        rill__stream_unref(a);
    return RILL_OK;
}

/* -------------------------------------------------------------- uses */

void rill__pool_note_use(rill__stream *s, uint64_t seq, const void *ptr, size_t bytes) {
    (void)bytes;
    if (seq == 0)
        return; /* captured into a graph: the graph's launches use it */
    /* Most uses name the start of a block of the stream's own device, often
     * one the calling thread's cache leased: noted there without the lock;
     * otherwise the hash answers without the registry's lock. */
    rill__pool *p = rill__pool_of(s->q.dev);
    if (rill__tcache_note_use(p, s, seq, ptr))
        return;
    rill__spinlock_lock(&p->lock);
    block *k = rill__tcache_lookup_locked(p, ptr, false);
    if (k == NULL) {
        rill__spinlock_unlock(&p->lock);
        rill__device *dev = NULL;
        if (!device_of(ptr, &dev))
            return;
        p = rill__pool_of(dev);
        rill__spinlock_lock(&p->lock);
        segment *g = segment_of_locked(p, ptr);
        k = g != NULL ? rill__segment_block_at(g, (uintptr_t)ptr) : NULL;
    }
    if (k != NULL && k->allocated && k->stream != s && !rill__tcache_holds_free(k))
        rill__points_add(p, k, s, seq);
    rill__spinlock_unlock(&p->lock);
}

rill_status rill__pool_record_stream(void *ptr, rill__stream *s, const char *fn) {
    rill__device *dev = NULL;
    block *k = NULL;
    rill__pool *p = NULL;
    if (device_of(ptr, &dev)) {
        p = rill__pool_of(dev);
        rill__spinlock_lock(&p->lock);
        k = rill__tcache_lookup_locked(p, ptr, true);
    }
    if (k == NULL) {
        if (p != NULL)
            rill__spinlock_unlock(&p->lock);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p is not the start of device memory from rill_malloc or "
                          "rill_malloc_async",
                          fn, ptr);
    }
    if (k->stream != s)
        rill__points_add(p, k, s, UNTIL_FREE);
    rill__spinlock_unlock(&p->lock);
    return RILL_OK;
}

/* ----------------------------------------------------------- lookups */

bool rill__pool_find(const void *ptr, rill__device **dev, size_t *bytes_to_end) {
    if (!device_of(ptr, dev))
        return false;
    rill__pool *p = rill__pool_of(*dev);
    rill__spinlock_lock(&p->lock);
    block *k = rill__hash_find(p, (uintptr_t)ptr);
    if (k == NULL) {
        segment *g = segment_of_locked(p, ptr);
        k = g != NULL ? rill__segment_block_at(g, (uintptr_t)ptr) : NULL;
    }
    bool found = k != NULL && k->allocated && !rill__tcache_holds_free(k) &&
                 (uintptr_t)ptr < k->ptr + k->requested;
    if (found)
        *bytes_to_end = k->ptr + k->requested - (uintptr_t)ptr;
    rill__spinlock_unlock(&p->lock);
    return found;
}

bool rill__pool_locate(const void *ptr, rill__pool_location *out) {
    rill__device *dev = NULL;
    if (!device_of(ptr, &dev))
        return false;
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    block *k = rill__tcache_lookup_locked(p, ptr, true);
    if (k != NULL) {
        const segment *g = k->seg;
        out->segment_base = (void *)g->base;
        out->segment_bytes = g->size;
        out->offset = k->ptr - g->base;
        out->block_bytes = k->requested;
        out->backend_handle = g->handle;
    }
    rill__spinlock_unlock(&p->lock);
    return k != NULL;
}

bool rill__pool_owner(const void *ptr, rill__stream **stream, size_t *bytes) {
    rill__device *dev = NULL;
    if (!device_of(ptr, &dev))
        return false;
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    block *k = rill__tcache_lookup_locked(p, ptr, true);
    bool found = k != NULL && k->ptr == (uintptr_t)ptr && k->stream != NULL;
    if (found) {
        rill__stream_ref(k->stream);
        *stream = k->stream;
        *bytes = k->requested;
    }
    rill__spinlock_unlock(&p->lock);
    return found;
}

/* -------------------------------------------------------- stats, limits */

void rill__pool_get_stats(rill__device *dev, rill_mem_stats *out) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    stats_locked(p, out);
    rill__spinlock_unlock(&p->lock);
}

/* Both pools' figures (pool->lock held, the thread caches' blocks taken
 * back, so that cached blocks count as free): one walk over every block. */
static void pool_stats_locked(rill__pool *p, rill_mem_pool_stats out[2]) {
    memset(out, 0, 2 * sizeof *out);
    for (segment *g = p->segments; g != NULL; g = g->next) {
        rill_mem_pool_stats *row = &out[g->small ? RILL_MEM_POOL_SMALL : RILL_MEM_POOL_LARGE];
        row->segments++;
        row->reserved_bytes += g->mapped;
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->unmapped)
                continue;
            if (k->allocated) {
                row->allocated_bytes += k->size;
                row->live_blocks++;
                continue;
            }
            row->free_blocks++;
            if (k->size > row->largest_free_bytes)
                row->largest_free_bytes = k->size;
            rill__points_prune(p, k);
            if (k->num_points != 0 || k->conservative)
                row->pending_free_blocks++;
        }
    }
}

void rill__pool_get_pool_stats(rill__device *dev, rill_mem_pool_stats out[2]) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    rill__tcache_steal_all(p);
    pool_stats_locked(p, out);
    rill__spinlock_unlock(&p->lock);
}

void rill__pool_empty_cache(rill__device *dev) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    rill__tcache_steal_all(p);
    rill__segment_empty_cache_locked(dev, p);
    rill__owners_trim(p);
    rill__spinlock_unlock(&p->lock);
}

void rill__pool_reset_peak_stats(rill__device *dev) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    rill_mem_stats now;
    stats_locked(p, &now); /* allocated less what the thread caches hold free */
    p->stats.peak_allocated_bytes = now.allocated_bytes;
    /* relaxed: read under the lock or as a hint, see peak_mirror */
    atomic_store_explicit(&p->peak_mirror, now.allocated_bytes, memory_order_relaxed);
    p->stats.peak_reserved_bytes = p->stats.reserved_bytes;
    rill__spinlock_unlock(&p->lock);
}

void rill__pool_set_limit(rill__device *dev, size_t max_reserved_bytes) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    p->limit = max_reserved_bytes;
    rill__spinlock_unlock(&p->lock);
}

size_t rill__pool_limit(rill__device *dev) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    size_t limit = p->limit;
    rill__spinlock_unlock(&p->lock);
    return limit;
}

void rill__pool_set_reuse_flags(rill__device *dev, unsigned flags) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    p->reuse_flags = flags;
    rill__spinlock_unlock(&p->lock);
}

unsigned rill__pool_reuse_flags(rill__device *dev) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    unsigned flags = p->reuse_flags;
    rill__spinlock_unlock(&p->lock);
    return flags;
}

/* ----------------------------------------------------- create, destroy */

rill_status rill__pool_create(rill__device *dev) {
    rill__pool *p = rill__calloc(1, sizeof *p);
    if (p == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a memory pool");
    if (!rill__hash_grow(p)) {
        rill__free(p);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a memory pool");
    }
    rill__spinlock_init(&p->lock, RILL__RANK_POOL);
    p->id = atomic_fetch_add(&next_pool_id, 1);
    p->reuse_flags = RILL_MEM_REUSE_INTERNAL_WAITS;
    dev->pool = p;
    return RILL_OK;
}

void rill__pool_destroy(rill__device *dev) {
    rill__pool *p = rill__pool_of(dev);
    if (p == NULL)
        return;
    while (p->segments != NULL) {
        segment *g = p->segments;
        block *next;
        for (block *k = g->first; k != NULL; k = next) {
            next = k->next;
            if (k->allocated && k->own_ref)
                rill__stream_unref(k->stream);
            else if (!k->allocated && !k->unmapped)
                rill__bin_remove(rill__bins_for(p, g->small), k);
            if (k != g->first)
                rill__block_recycle(p, k);
        }
        /* The segment as one unmapped block, alone on the list. */
        block *u = g->first;
        u->next = NULL;
        u->allocated = 0;
        u->unmapped = 1;
        u->size = g->size;
        u->bin_prev = u->bin_next = NULL;
        p->unmapped = u;
        g->mapped = 0;
        rill__segment_release(dev, p, g);
    }
    for (unsigned i = 0; i < p->num_owners; i++)
        rill__stream_unref(p->owners[i].stream);
    p->num_owners = 0;
    rill__tcache_destroy_all(p);
    while (p->spare != NULL) {
        block *k = p->spare;
        p->spare = k->next;
        rill__free(k);
    }
    rill__free(p->hash);
    rill__free(p);
    dev->pool = NULL;
}

/* -------------------------------------------------------------- summary */

void rill__pool_summary(rill__device *dev, FILE *out) {
    rill__pool *p = rill__pool_of(dev);
    rill_mem_pool_stats row[2];
    rill__spinlock_lock(&p->lock);
    rill__tcache_steal_all(p); /* cached blocks show as free */
    rill_mem_stats st;
    stats_locked(p, &st);
    size_t limit = st.limit_bytes;
    uint64_t pending_reuses = st.pending_reuses;
    pool_stats_locked(p, row);
    rill__spinlock_unlock(&p->lock);
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(out, "rill memory summary: device %d (%s)\n", dev->base.info.ordinal,
            dev->base.info.name);
    rill__format_bytes(a, sizeof a, st.allocated_bytes);
    rill__format_bytes(b, sizeof b, st.peak_allocated_bytes);
    rill__format_bytes(c, sizeof c, st.reserved_bytes);
    rill__format_bytes(d, sizeof d, st.peak_reserved_bytes);
    rill__format_bytes(e, sizeof e, limit);
    fprintf(out, "  %-28s %14s %14s\n", "", "current", "peak");
    fprintf(out, "  %-28s %14s %14s\n", "allocated", a, b);
    fprintf(out, "  %-28s %14s %14s\n", "reserved", c, d);
    fprintf(out, "  %-28s %14s\n", "limit", limit != 0 ? e : "none");
    if (dev->ops->mem_describe != NULL) {
        char memory[384];
        dev->ops->mem_describe(dev, memory, sizeof memory);
        fprintf(out, "  device memory: %s\n", memory);
    }
    fprintf(out, "\n  %-8s %9s %12s %12s %8s %8s %13s %8s\n", "pool", "segments", "reserved",
            "allocated", "blocks", "free", "largest free", "pending");
    static const char *const names[2] = {"small", "large"};
    for (int r = 0; r < 2; r++) {
        rill__format_bytes(a, sizeof a, row[r].reserved_bytes);
        rill__format_bytes(b, sizeof b, row[r].allocated_bytes);
        rill__format_bytes(c, sizeof c, row[r].largest_free_bytes);
        fprintf(out, "  %-8s %9zu %12s %12s %8zu %8zu %13s %8zu\n", names[r], row[r].segments, a, b,
                row[r].live_blocks, row[r].free_blocks, c, row[r].pending_free_blocks);
    }
    double hit = st.allocations != 0 ? 100.0 * (double)st.cache_hits / (double)st.allocations : 0;
    fprintf(out,
            "\n  allocations %" PRIu64 ", frees %" PRIu64 ", cache hits %" PRIu64
            " (%.1f%%), deferred frees %" PRIu64 ", out-of-memory recoveries %" PRIu64 "\n",
            st.allocations, st.frees, st.cache_hits, hit, st.deferred_frees, st.oom_recoveries);
    fprintf(out,
            "  reuses of pending blocks through internal stream waits (instead of growing) "
            "%" PRIu64 "\n",
            pending_reuses);
    fprintf(out, "  (small: requests up to 1 MiB; large: the rest; reserved: what the segments\n"
                 "   commit of their address space; pending: free blocks another stream's work "
                 "still holds)\n");
}
