/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool's allocation (see pool.h for the rules):
 * rounding a request, finding a free block or a pending one to reuse
 * behind internal waits, growing, recovering when the pool cannot grow,
 * and the out-of-memory sentence. Free blocks live in size-segregated bins
 * (TLSF style, with a bitmap); a block handed out goes into the hash table
 * by address. Locking as in pool.c: pool->lock guards the pool, and the
 * internal waits are submitted only after it is released. */
#include "mem/pool.h"

#include <inttypes.h>
#include <string.h>

#include "core/runtime.h"
#include "core/stream.h"
#include "mem/block.h"
#include "mem/pool_internal.h"
#include "mem/segment.h"
#include "mem/tcache.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/status.h"

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
    rill__pool_stats_locked(p, &st);
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

/* A pending block of at least size bytes that s may take behind internal
 * waits costing at most max_cost, with those waits in waits[*num_waits..]
 * (each a reference for the caller to drop); NULL when none qualifies or
 * its points do not fit in MAX_WAITS. pool->lock held. */
static block *find_pending_waits(rill__pool *p, int small, size_t size, rill__stream *s,
                                 uint64_t max_cost, point *waits, size_t *num_waits) {
    block *k = find_pending(p, small, size, s, max_cost);
    if (k != NULL && !rill__points_collect_waits(k, s, waits, MAX_WAITS, num_waits))
        return NULL;
    return k;
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
        k = find_pending_waits(p, small, size, s, UINT64_MAX - 1, waits, num_waits);
        if (k != NULL)
            p->pending_reuses++;
    }
    return k;
}

/* The last resort of rill_malloc on a thread that may wait (not inside a
 * kernel or host function): takes back the thread caches, waits on the
 * host for pending frees, returns the cache to the system, and grows.
 * NULL when even that finds no block. pool->lock held on entry and exit. */
static block *recover_on_host(rill__device *dev, rill__pool *p, int small, size_t size) {
    if (rill__thread_is_worker())
        return NULL;
    rill__tcache_steal_all(p);
    drain_points(dev, p);
    rill__segment_empty_cache_locked(dev, p);
    block *k = find_free(p, small, size, NULL, 1);
    if (k == NULL)
        k = rill__segment_grow(dev, p, small, NULL, size, 0);
    if (k != NULL)
        p->stats.oom_recoveries++;
    return k;
}

/* A block of size bytes from what the pool holds, without growing: a free
 * block safe for user (NULL: for any stream), after this thread's cache
 * and the unmerged neighbours are given back; else, with a budget, a
 * pending block that s reuses behind internal waits (added to waits), as
 * CUDA's pools do when its points are few and near. pool->lock held. */
static block *reuse_locked(rill__pool *p, int small, size_t size, rill__stream *s,
                           rill__stream *user, uint64_t budget, point *waits, size_t *num_waits) {
    block *k = find_free(p, small, size, user, 1);
    if (k == NULL && rill__tcache_drain_mine_locked(p, size))
        k = find_free(p, small, size, user, 1); /* its blocks may merge into what is needed */
    if (k == NULL && p->unmerged != 0) {
        rill__segment_coalesce_all(p);
        k = find_free(p, small, size, user, 1);
    }
    if (k == NULL && budget != 0) {
        k = find_pending_waits(p, small, size, s, budget, waits, num_waits);
        if (k != NULL)
            p->pending_reuses++;
    }
    return k;
}

/* Hands free block k out to s for a request of bytes (size rounded),
 * with the reference on s that the block holds. pool->lock held. */
static void hand_out_locked(rill__pool *p, block *k, size_t size, size_t bytes, rill__stream *s) {
    if (!rill__owners_hold(p, s)) {
        /* The owners table is full: hold this one directly. */
        rill__stream_ref(s);
        take(p, k, size, bytes, s);
        k->own_ref = 1;
    } else {
        take(p, k, size, bytes, s);
    }
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

/* Queues on s the internal waits that block ptr needs, dropping their
 * references. They order memory only: a failure of the other stream's
 * work is not s's. Without memory for a command, the block goes back with
 * the uses s could not wait for, and the allocation fails. */
static rill_status wait_in_order(rill__stream *s, void *ptr, size_t size, point *waits,
                                 size_t num_waits, const char *fn) {
    for (size_t i = 0; i < num_waits; i++) {
        rill_status st = rill__stream_wait_order(s, waits[i].stream, waits[i].seq, fn);
        if (st != RILL_OK) {
            give_back(s, ptr, size, waits, i, num_waits, fn);
            return st;
        }
        rill__stream_unref(waits[i].stream);
    }
    return RILL_OK;
}

/* Refuses at once a request of bytes (size rounded) larger than dev has in
 * all: no waiting for frees, emptying of the cache or committing of the
 * device's memory on the way to failing. */
static rill_status more_than_device(rill__device *dev, size_t bytes, const char *fn) {
    char memory[384] = "";
    if (dev->ops->mem_describe != NULL)
        dev->ops->mem_describe(dev, memory, sizeof memory);
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                      "%s: %zu bytes is more than device %d (%s) has in all (%zu bytes%s%s); "
                      "allocate less",
                      fn, bytes, dev->base.info.ordinal, dev->base.info.name,
                      dev->base.info.memory_bytes, memory[0] != '\0' ? ": " : "", memory);
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
 * grow. The order of tries: the thread cache, what the pool holds
 * (reuse_locked), growth, then recovery (recover_ordered or
 * recover_on_host). */
static rill_status pool_alloc(rill__stream *s, size_t bytes, bool may_wait, const char *fn,
                              void **out) {
    rill__device *dev = s->q.dev;
    rill__pool *p = rill__pool_of(dev);
    if (bytes > SIZE_MAX / 2)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: %zu bytes is more than any device can hold; check the size", fn,
                          bytes);
    size_t size = round_request(bytes);
    if (size > dev->base.info.memory_bytes)
        return more_than_device(dev, bytes, fn);
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
    block *k = reuse_locked(p, small, size, s, user, budget, waits, &num_waits);
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
        k = internal_waits
                ? find_pending_waits(p, small, size, s, UINT64_MAX - 1, waits, &num_waits)
                : NULL;
        if (k != NULL) {
            p->stats.cache_hits++;
        } else if ((k = recover_ordered(dev, p, small, size, s, internal_waits, waits,
                                        &num_waits)) != NULL) {
            p->stats.oom_recoveries++;
        } else {
            return out_of_memory(dev, p, bytes, may_wait, fn);
        }
    } else if ((k = recover_on_host(dev, p, small, size)) == NULL) {
        return out_of_memory(dev, p, bytes, may_wait, fn);
    }
    hand_out_locked(p, k, size, bytes, s);
    void *ptr = (void *)k->ptr;
    rill__spinlock_unlock(&p->lock);
    rill_status st = wait_in_order(s, ptr, size, waits, num_waits, fn);
    if (st != RILL_OK)
        return st;
    *out = ptr;
    return RILL_OK;
}

rill_status rill__pool_alloc(rill__stream *s, size_t bytes, const char *fn, void **out) {
    return pool_alloc(s, bytes, false, fn, out);
}

rill_status rill__pool_alloc_async(rill__stream *s, size_t bytes, const char *fn, void **out) {
    return pool_alloc(s, bytes, true, fn, out);
}
