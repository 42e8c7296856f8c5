/* SPDX-License-Identifier: MIT */
/* rill__pool_check: walks a pool and checks the invariants that pool.h,
 * segment.c and block.c state, so that a stress test can find a broken
 * structure where it broke rather than as a wrong pointer much later (in
 * the manner of mimalloc's heap checks). It takes the thread caches'
 * blocks back first, so that every block is where the pool's own lists
 * say; that costs the caches their contents, never correctness. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "mem/block.h"
#include "mem/pool.h"
#include "mem/pool_internal.h"
#include "mem/registry.h"
#include "mem/segment.h"
#include "mem/tcache.h"

typedef struct check {
    char *why;
    size_t cap;
    bool ok;
} check;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
broken(check *c, const char *fmt, ...) {
    if (!c->ok)
        return; /* the first broken invariant is the one to read */
    c->ok = false;
    if (c->why == NULL || c->cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->cap, fmt, ap);
    va_end(ap);
}

typedef struct tally {
    size_t mapped, allocated_bytes, allocated, free_mapped, unmapped;
} tally;

static void check_points(check *c, const block *k) {
    if (k->num_points > k->cap_points)
        broken(c, "block %#" PRIxPTR ": %zu points in room for %zu", k->ptr, k->num_points,
               k->cap_points);
    for (size_t i = 0; i < k->num_points && c->ok; i++) {
        const point *pt = &k->points[i];
        if (pt->stream == NULL)
            broken(c, "block %#" PRIxPTR ": point %zu names no stream", k->ptr, i);
        else if (pt->seq != UNTIL_FREE && pt->seq > rill__submitted_of(pt->stream))
            broken(c,
                   "block %#" PRIxPTR ": point %zu waits for command %" PRIu64
                   " of a stream that submitted %" PRIu64,
                   k->ptr, i, pt->seq, rill__submitted_of(pt->stream));
    }
}

/* The chunk index of g: the first block that starts in each chunk. */
static void check_index(check *c, const segment *g) {
    size_t chunks = ((g->size - 1) >> INDEX_CHUNK_SHIFT) + 1;
    const block *k = g->first;
    for (size_t ch = 0; ch < chunks && c->ok; ch++) {
        uintptr_t end = g->base + ((uintptr_t)(ch + 1) << INDEX_CHUNK_SHIFT);
        while (k != NULL && k->ptr < g->base + ((uintptr_t)ch << INDEX_CHUNK_SHIFT))
            k = k->next;
        const block *first = k != NULL && k->ptr < end ? k : NULL;
        if (g->chunk_first[ch] != first)
            broken(c,
                   "segment %#" PRIxPTR ": the index of chunk %zu names %#" PRIxPTR
                   ", the first block there is %#" PRIxPTR,
                   g->base, ch, g->chunk_first[ch] != NULL ? g->chunk_first[ch]->ptr : 0,
                   first != NULL ? first->ptr : 0);
    }
}

static void check_segment(check *c, const rill__pool *p, const segment *g, tally *t) {
    uintptr_t at = g->base;
    size_t mapped = 0;
    const block *prev = NULL;
    for (const block *k = g->first; k != NULL && c->ok; prev = k, k = k->next) {
        if (k->seg != g || k->prev != prev)
            broken(c, "block %#" PRIxPTR ": wrong segment or neighbour links", k->ptr);
        else if (k->ptr != at || k->size == 0)
            broken(c,
                   "segment %#" PRIxPTR ": a block at %#" PRIxPTR " of %zu bytes where %#" PRIxPTR
                   " was next",
                   g->base, k->ptr, k->size, at);
        else if (atomic_load_explicit(&k->tc_state, memory_order_relaxed) != TC_NONE)
            broken(c, "block %#" PRIxPTR ": still in a thread cache after they were taken back",
                   k->ptr);
        else if (k->allocated && k->unmapped)
            broken(c, "block %#" PRIxPTR ": allocated and not committed", k->ptr);
        else if (k->allocated && rill__hash_find(p, k->ptr) != k)
            broken(c, "block %#" PRIxPTR ": allocated but not in the hash", k->ptr);
        else if (k->allocated && (k->requested > k->size || k->stream == NULL))
            broken(c, "block %#" PRIxPTR ": %zu bytes requested of %zu, stream %p", k->ptr,
                   k->requested, k->size, (void *)k->stream);
        else if (!k->allocated && !k->unmapped && k->bin != rill__bin_of(k->size))
            broken(c, "free block %#" PRIxPTR " of %zu bytes in bin %u, not %u", k->ptr, k->size,
                   k->bin, rill__bin_of(k->size));
        if (!c->ok)
            return;
        check_points(c, k);
        at += k->size;
        if (!k->unmapped)
            mapped += k->size;
        if (k->allocated) {
            t->allocated++;
            t->allocated_bytes += k->size;
        } else if (k->unmapped) {
            t->unmapped++;
        } else {
            t->free_mapped++;
        }
    }
    if (!c->ok)
        return;
    if (at != g->base + g->size)
        broken(c, "segment %#" PRIxPTR ": its blocks end at %#" PRIxPTR ", it at %#" PRIxPTR,
               g->base, at, g->base + g->size);
    else if (mapped != g->mapped)
        broken(c, "segment %#" PRIxPTR ": %zu bytes committed by its blocks, %zu counted", g->base,
               mapped, g->mapped);
    else
        check_index(c, g);
    t->mapped += mapped;
}

/* Every free committed block is in the bins of its segment's kind, once;
 * a bin's bit is set when the bin has a block. */
static size_t check_bins(check *c, const bins *b, int small) {
    size_t n = 0;
    for (unsigned i = 0; i < NUM_BINS && c->ok; i++) {
        bool bit = (b->map[i / 64] >> (i % 64)) & 1u;
        if (bit != (b->head[i] != NULL))
            broken(c, "%s bin %u: its bit says %s", small ? "small" : "large", i,
                   bit ? "full, it is empty" : "empty, it has blocks");
        const block *prev = NULL;
        for (const block *k = b->head[i]; k != NULL && c->ok; prev = k, k = k->bin_next) {
            if (k->allocated || k->unmapped || k->bin != i || k->bin_prev != prev ||
                k->seg->small != small)
                broken(c,
                       "%s bin %u: block %#" PRIxPTR " does not belong there (allocated %d, "
                       "uncommitted %d, bin %u)",
                       small ? "small" : "large", i, k->ptr, k->allocated, k->unmapped, k->bin);
            n++;
        }
    }
    return n;
}

/* g's address range is its own: no other segment of the pool overlaps it,
 * and the registry names g for its first and last byte (the lock order
 * is pool->lock, then the registry's). */
static void check_range(check *c, const rill__pool *p, const segment *g) {
    for (const segment *o = p->segments; o != NULL && c->ok; o = o->next)
        if (o != g && o->base < g->base + g->size && g->base < o->base + o->size)
            broken(c, "segments %#" PRIxPTR " (%zu bytes) and %#" PRIxPTR " (%zu bytes) overlap",
                   g->base, g->size, o->base, o->size);
    rill__mem_block lo, hi;
    if (c->ok && (!rill__registry_find((void *)g->base, &lo) ||
                  !rill__registry_find((void *)(g->base + g->size - 1), &hi) || lo.owner != g ||
                  hi.owner != g))
        broken(c, "segment %#" PRIxPTR " (%zu bytes): the registry does not name it for its range",
               g->base, g->size);
}

bool rill__pool_check(rill__device *dev, char *why, size_t cap) {
    rill__pool *p = rill__pool_of(dev);
    check c = {why, cap, true};
    if (why != NULL && cap > 0)
        why[0] = '\0';
    rill__spinlock_lock(&p->lock);
    rill__tcache_steal_all(p);
    tally t = {0};
    const segment *prev = NULL;
    for (const segment *g = p->segments; g != NULL && c.ok; prev = g, g = g->next) {
        if (g->prev != prev)
            broken(&c, "segment %#" PRIxPTR ": wrong list links", g->base);
        else
            check_segment(&c, p, g, &t);
        if (c.ok)
            check_range(&c, p, g);
    }
    size_t unmapped = 0;
    for (const block *k = p->unmapped; k != NULL && c.ok; k = k->bin_next, unmapped++)
        if (!k->unmapped || k->allocated)
            broken(&c, "block %#" PRIxPTR ": on the list of uncommitted blocks, but it is %s",
                   k->ptr, k->allocated ? "allocated" : "committed");
    size_t binned = c.ok ? check_bins(&c, &p->small, 1) + check_bins(&c, &p->large, 0) : 0;
    if (!c.ok) {
        /* the first broken invariant is already in why */
    } else if (t.mapped != p->stats.reserved_bytes)
        broken(&c, "%zu bytes committed by blocks, %zu reserved in the statistics", t.mapped,
               (size_t)p->stats.reserved_bytes);
    else if (t.allocated_bytes != p->stats.allocated_bytes)
        broken(&c, "%zu bytes in allocated blocks, %zu in the statistics", t.allocated_bytes,
               (size_t)p->stats.allocated_bytes);
    else if (t.allocated != p->hash_count)
        broken(&c, "%zu allocated blocks, %zu in the hash", t.allocated, p->hash_count);
    else if (unmapped != t.unmapped)
        broken(&c, "%zu uncommitted blocks, %zu on their list", t.unmapped, unmapped);
    else if (binned != t.free_mapped)
        broken(&c, "%zu free committed blocks, %zu in the bins", t.free_mapped, binned);
    rill__spinlock_unlock(&p->lock);
    return c.ok;
}

void rill__pool_describe(rill__device *dev, const void *ptr, char *out, size_t cap) {
    rill__pool *p = rill__pool_of(dev);
    uintptr_t a = (uintptr_t)ptr;
    rill__spinlock_lock(&p->lock);
    const segment *g = p->segments;
    while (g != NULL && (a < g->base || a - g->base >= g->size))
        g = g->next;
    const block *k = g != NULL ? rill__segment_block_at(g, a) : NULL;
    if (g == NULL) {
        snprintf(out, cap, "%#" PRIxPTR ": in no segment of the pool", a);
    } else if (k == NULL) {
        snprintf(out, cap, "%#" PRIxPTR ": in segment [%#" PRIxPTR ", %#" PRIxPTR ") but no block",
                 a, g->base, g->base + g->size);
    } else {
        unsigned tc = atomic_load_explicit(&k->tc_state, memory_order_relaxed);
        snprintf(out, cap,
                 "%#" PRIxPTR ": in block [%#" PRIxPTR ", %#" PRIxPTR ") %s%s, stream %p, %zu "
                 "points; segment [%#" PRIxPTR ", %#" PRIxPTR ")%s",
                 a, k->ptr, k->ptr + k->size,
                 k->allocated  ? "allocated"
                 : k->unmapped ? "uncommitted"
                               : "free",
                 tc == TC_NONE     ? ""
                 : tc == TC_CACHED ? " (a thread cache holds it free)"
                                   : " (leased by a thread cache)",
                 (void *)k->stream, k->num_points, g->base, g->base + g->size,
                 k->allocated && tc == TC_NONE && rill__hash_find(p, k->ptr) != k
                     ? "; not in the hash"
                     : "");
    }
    rill__spinlock_unlock(&p->lock);
}
