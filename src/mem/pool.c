/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool (see pool.h for the rules): freeing,
 * uses, lookups, statistics and limits, the pool's life and its summary;
 * allocation is in pool_alloc.c. Allocated blocks live in a hash table by
 * address or in the thread cache that leased them (tcache.c); a freed
 * block keeps the points (stream, number) of its pending uses. */

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
    /* Most lookups (an op's operands) name a block that the calling
     * thread allocated and its cache leased: found there without the
     * registry's lock or pool->lock. */
    rill__runtime *rt;
    rill__runtime_get(&rt);
    for (int i = 0; i < rt->num_devices; i++)
        if (rill__tcache_find_live(rill__pool_of(rt->devices[i]), ptr, bytes_to_end)) {
            *dev = rt->devices[i];
            return true;
        }
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

void rill__pool_stats_locked(rill__pool *p, rill_mem_stats *out) {
    *out = p->stats;
    rill__tcache_stats_locked(p, out);
    out->pending_reuses = p->pending_reuses;
    out->limit_bytes = p->limit;
}

void rill__pool_get_stats(rill__device *dev, rill_mem_stats *out) {
    rill__pool *p = rill__pool_of(dev);
    rill__spinlock_lock(&p->lock);
    rill__pool_stats_locked(p, out);
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
    rill__pool_stats_locked(p, &now); /* allocated less what the thread caches hold free */
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
    rill__pool_stats_locked(p, &st);
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
