/* SPDX-License-Identifier: MIT */
/* The pool's segments: address space that the backend reserves (mem_alloc),
 * tiled by blocks in address order, of which the pool commits only what its
 * blocks need; segments grow in place, and a chunk index finds the block
 * that holds an interior pointer (docs/design.md, "Memory"). pool->lock held
 * throughout. A block is allocated, free and mapped (in a bin), or free and
 * unmapped (on the pool's unmapped list, with no points, not reserved).
 * Invariants: for each segment g, the blocks from g->first tile
 * [g->base, g->base + g->size) exactly; g->mapped = the sizes of its blocks
 * that are not unmapped; reserved_bytes = the sum of g->mapped; no two
 * unmapped blocks are neighbours after a decommit pass. */
#include "mem/segment.h"

#include "mem/block.h"
#include "mem/registry.h"
#include "util/alloc.h"
#include "util/assert.h"

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* The address space of a new segment that must hold size bytes: a span
 * far larger than most programs use, so that a kind of block seldom needs
 * a second segment, but no more than the device's memory. */
static size_t segment_span(const rill__device *dev, size_t size) {
    size_t span = SEGMENT_SPAN;
    size_t memory = dev->base.info.memory_bytes & ~(dev->ops->mem_granule - 1);
    if (memory != 0 && span > memory)
        span = memory;
    size_t need = round_up(size, dev->ops->mem_granule);
    return span > need ? span : need;
}

static size_t chunk_of(const segment *g, uintptr_t a) {
    return (size_t)((a - g->base) >> INDEX_CHUNK_SHIFT);
}

static size_t group_of(const segment *g, uintptr_t a) {
    return (size_t)((a - g->base) >> INDEX_GROUP_SHIFT);
}

void rill__segment_index_add(block *k) {
    segment *g = k->seg;
    size_t c = chunk_of(g, k->ptr), q = group_of(g, k->ptr);
    if (g->chunk_first[c] == NULL || g->chunk_first[c]->ptr > k->ptr)
        g->chunk_first[c] = k;
    if (g->group_first[q] == NULL || g->group_first[q]->ptr > k->ptr)
        g->group_first[q] = k;
}

/* Drops k, about to be merged into the block before it, from the index
 * (k->next still its neighbour). */
static void index_remove(block *k) {
    segment *g = k->seg;
    const block *n = k->next;
    size_t c = chunk_of(g, k->ptr), q = group_of(g, k->ptr);
    if (g->chunk_first[c] == k)
        g->chunk_first[c] = n != NULL && chunk_of(g, n->ptr) == c ? (block *)n : NULL;
    if (g->group_first[q] == k)
        g->group_first[q] = n != NULL && group_of(g, n->ptr) == q ? (block *)n : NULL;
}

/* Marks free block k unmapped and puts it on the pool's list. */
static void unmapped_link(rill__pool *p, block *k) {
    k->unmapped = 1;
    k->bin_prev = NULL;
    k->bin_next = p->unmapped;
    if (p->unmapped != NULL)
        p->unmapped->bin_prev = k;
    p->unmapped = k;
}

static void unmapped_unlink(rill__pool *p, block *k) {
    if (k->bin_prev != NULL)
        k->bin_prev->bin_next = k->bin_next;
    else
        p->unmapped = k->bin_next;
    if (k->bin_next != NULL)
        k->bin_next->bin_prev = k->bin_prev;
}

/* Reserves a segment of the kind small able to hold size bytes, all of it
 * one unmapped block; NULL when the device says no. */
static segment *segment_new(rill__device *dev, rill__pool *p, int small, size_t size) {
    size_t span = segment_span(dev, size);
    segment *g = rill__calloc(1, sizeof *g);
    block *u = rill__block_new(p);
    void *base = NULL, *handle = NULL;
    if (g == NULL || u == NULL)
        goto fail;
    if (dev->ops->mem_alloc(dev, span, &base, &handle) != RILL_OK) {
        /* Address space is short (a process limit): the least that serves. */
        span = round_up(size, dev->ops->mem_granule);
        if (dev->ops->mem_alloc(dev, span, &base, &handle) != RILL_OK)
            goto fail;
    }
    size_t chunks = ((span - 1) >> INDEX_CHUNK_SHIFT) + 1;
    size_t groups = ((span - 1) >> INDEX_GROUP_SHIFT) + 1;
    g->chunk_first = rill__calloc(chunks, sizeof *g->chunk_first);
    g->group_first = rill__calloc(groups, sizeof *g->group_first);
    rill__mem_block rb = {(uintptr_t)base, span, dev, RILL__MEM_DEVICE, g};
    if (g->chunk_first == NULL || g->group_first == NULL || rill__registry_insert(&rb) != RILL_OK) {
        dev->ops->mem_free(dev, base, span, handle);
        goto fail;
    }
    g->base = (uintptr_t)base;
    g->size = span;
    g->handle = handle;
    g->small = small;
    g->next = p->segments;
    if (p->segments != NULL)
        p->segments->prev = g;
    p->segments = g;
    g->first = u;
    u->ptr = g->base;
    u->size = span;
    u->seg = g;
    unmapped_link(p, u);
    rill__segment_index_add(u);
    return g;

fail:
    if (g != NULL) {
        rill__free(g->chunk_first);
        rill__free(g->group_first);
    }
    rill__free(g);
    if (u != NULL)
        rill__block_recycle(p, u);
    return NULL;
}

/* Commits the first bytes of unmapped block u, splitting off the rest,
 * and returns u, now mapped and free but in no bin; NULL when no block
 * structure is left for the rest. */
static block *commit_front(rill__device *dev, rill__pool *p, block *u, size_t bytes) {
    RILL_ASSERT(u->unmapped && bytes <= u->size);
    /* The device backs the range now, or at first touch (no mem_commit). */
    if (dev->ops->mem_commit != NULL &&
        dev->ops->mem_commit(dev, u->seg->handle, u->ptr - u->seg->base, bytes) != RILL_OK)
        return NULL;
    if (bytes < u->size) {
        block *r = rill__block_new(p);
        if (r == NULL)
            return NULL;
        r->ptr = u->ptr + bytes;
        r->size = u->size - bytes;
        r->seg = u->seg;
        unmapped_link(p, r);
        r->prev = u;
        r->next = u->next;
        if (u->next != NULL)
            u->next->prev = r;
        u->next = r;
        u->size = bytes;
        rill__segment_index_add(r);
    }
    unmapped_unlink(p, u);
    u->unmapped = 0;
    u->seg->mapped += bytes;
    p->stats.reserved_bytes += bytes;
    if (p->stats.reserved_bytes > p->stats.peak_reserved_bytes)
        p->stats.peak_reserved_bytes = p->stats.reserved_bytes;
    return u;
}

/* Is k a free, mapped block that s may take after waits costing at most
 * max_cost? */
static bool takes(const block *k, rill__stream *s, uint64_t max_cost) {
    return k != NULL && !k->allocated && !k->unmapped && rill__block_wait_cost(k, s) <= max_cost;
}

/* Merges free block src into dst, the block just before it, points and
 * all. */
static void absorb(rill__pool *p, block *dst, block *src) {
    RILL_ASSERT(dst->next == src && dst->ptr + dst->size == src->ptr);
    for (size_t i = 0; i < src->num_points; i++)
        rill__points_add(p, dst, src->points[i].stream, src->points[i].seq);
    dst->conservative |= src->conservative;
    if (src->unmapped)
        unmapped_unlink(p, src);
    index_remove(src);
    dst->size += src->size;
    dst->next = src->next;
    if (src->next != NULL)
        src->next->prev = dst;
    rill__block_recycle(p, src);
}

/* Would committing bytes more stay within the limit? */
static bool within_limit(const rill__pool *p, size_t bytes) {
    return p->limit == 0 || (bytes <= p->limit && p->stats.reserved_bytes <= p->limit - bytes);
}

block *rill__segment_grow(rill__device *dev, rill__pool *p, int small, rill__stream *s, size_t size,
                          uint64_t max_cost) {
    /* The unmapped block that needs the fewest new bytes: the free block
     * before it counts when s may take it. Whether it counts is decided
     * once, here: asked again after the commit, the answer can change
     * (another thread may submit a host function to a stream that the
     * block's points name, and rill__block_wait_cost refuses to wait
     * behind one), and a block committed for "before plus this" without
     * before would be short of size: take() would then stretch it over its
     * neighbour, an allocated block. */
    block *best = NULL;
    size_t best_commit = SIZE_MAX;
    bool best_joins = false; /* the free block before best is part of the result */
    for (block *u = p->unmapped; u != NULL; u = u->bin_next) {
        if (u->seg->small != small)
            continue;
        bool joins = takes(u->prev, s, max_cost);
        size_t have = joins ? u->prev->size : 0;
        if (have >= size)
            return u->prev; /* beyond find_free's scan: nothing to commit */
        size_t missing = size - have;
        if (missing > u->size)
            continue;
        size_t commit = round_up(missing, dev->ops->mem_granule);
        if (commit > u->size)
            commit = u->size;
        if (commit < best_commit && within_limit(p, commit)) {
            best = u;
            best_commit = commit;
            best_joins = joins;
        }
    }
    if (best == NULL) {
        best_commit = round_up(size, dev->ops->mem_granule);
        segment *g;
        if (!within_limit(p, best_commit) || (g = segment_new(dev, p, small, size)) == NULL)
            return NULL;
        best = g->first;
        best_joins = false;
    }
    block *before = best->prev;
    block *k = commit_front(dev, p, best, best_commit);
    if (k == NULL)
        return NULL;
    bins *b = rill__bins_for(p, small);
    if (best_joins) {
        rill__bin_remove(b, before);
        absorb(p, before, k);
        k = before;
    }
    RILL_ASSERT(k->size >= size);
    rill__bin_insert(b, k);
    return k;
}

void rill__segment_release(rill__device *dev, rill__pool *p, segment *g) {
    RILL_ASSERT(g->first->unmapped && g->first->next == NULL && g->mapped == 0);
    rill__mem_block rb;
    unmapped_unlink(p, g->first);
    rill__block_recycle(p, g->first);
    rill__registry_remove((void *)g->base, RILL__MEM_DEVICE, &rb);
    dev->ops->mem_free(dev, (void *)g->base, g->size, g->handle);
    if (g->prev != NULL)
        g->prev->next = g->next;
    else
        p->segments = g->next;
    if (g->next != NULL)
        g->next->prev = g->prev;
    rill__free(g->chunk_first);
    rill__free(g->group_first);
    rill__free(g);
}

void rill__segment_coalesce_all(rill__pool *p) {
    if (p->unmerged == 0)
        return;
    for (segment *g = p->segments; g != NULL; g = g->next) {
        bins *b = rill__bins_for(p, g->small);
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated || k->unmapped)
                continue;
            int merged = 0;
            while (k->next != NULL && !k->next->allocated && !k->next->unmapped) {
                if (!merged)
                    rill__bin_remove(b, k);
                merged = 1;
                rill__bin_remove(b, k->next);
                absorb(p, k, k->next);
            }
            if (merged)
                rill__bin_insert(b, k);
        }
    }
    p->unmerged = 0;
}

/* Gives free block k's memory back to the device and merges it with its
 * unmapped neighbours; returns the unmapped block that holds k now. */
static block *decommit(rill__device *dev, rill__pool *p, block *k) {
    segment *g = k->seg;
    rill__bin_remove(rill__bins_for(p, g->small), k);
    if (dev->ops->mem_decommit != NULL)
        dev->ops->mem_decommit(dev, g->handle, k->ptr - g->base, k->size);
    unmapped_link(p, k);
    g->mapped -= k->size;
    p->stats.reserved_bytes -= k->size;
    if (k->next != NULL && k->next->unmapped)
        absorb(p, k, k->next);
    if (k->prev != NULL && k->prev->unmapped) {
        block *before = k->prev;
        absorb(p, before, k);
        k = before;
    }
    return k;
}

void rill__segment_empty_cache_locked(rill__device *dev, rill__pool *p) {
    rill__segment_coalesce_all(p);
    segment *next;
    for (segment *g = p->segments; g != NULL; g = next) {
        next = g->next;
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated || k->unmapped)
                continue;
            rill__points_prune(p, k);
            if (k->num_points == 0 && !k->conservative)
                k = decommit(dev, p, k);
        }
        if (g->mapped == 0)
            rill__segment_release(dev, p, g);
    }
}

block *rill__segment_block_at(const segment *g, uintptr_t a) {
    if (a < g->base || a - g->base >= g->size)
        return NULL;
    /* The nearest block that starts at or before a: in a's chunk, in an
     * earlier chunk of its group, or in the last chunk holding a start of
     * an earlier group. g->first starts at base, so one exists. */
    size_t c = chunk_of(g, a);
    block *k = g->chunk_first[c];
    if (k == NULL || k->ptr > a) {
        k = NULL;
        size_t first_chunk = group_of(g, a) << (INDEX_GROUP_SHIFT - INDEX_CHUNK_SHIFT);
        for (size_t i = c; i-- > first_chunk && k == NULL;)
            k = g->chunk_first[i];
        for (size_t q = group_of(g, a); k == NULL && q-- > 0;) {
            if (g->group_first[q] == NULL)
                continue;
            size_t i = (q + 1) << (INDEX_GROUP_SHIFT - INDEX_CHUNK_SHIFT);
            while (k == NULL)
                k = g->chunk_first[--i];
        }
    }
    RILL_ASSERT(k != NULL && k->ptr <= a);
    while (k->next != NULL && k->next->ptr <= a)
        k = k->next;
    return a < k->ptr + k->size ? k : NULL;
}
