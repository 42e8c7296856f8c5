/* SPDX-License-Identifier: MIT */
/* The pool's segments: what the backend hands out, each tiled by blocks
 * in address order. Sizing (geometric growth per kind), reserving and
 * releasing segments, and merging adjacent free blocks. pool->lock held
 * throughout.
 *
 * Invariants: for each segment g, the blocks from g->first tile
 * [g->base, g->base + g->size) exactly; reserved_bytes = sum of g->size;
 * kind_reserved[small] = the same sum over the segments of that kind. */
#include "mem/segment.h"

#include "core/alloc.h"
#include "core/assert.h"
#include "mem/block.h"
#include "mem/registry.h"

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* The size of a new segment for a request of size bytes. Each kind of
 * segment grows geometrically: a new one is half the size of what that
 * kind already reserves, at least what the request needs (rounded to the
 * kind's granularity) and at most the kind's full segment. A small pool
 * thus reserves little more than it hands out, and a large one gets the
 * full segments that keep the number of segments low. */
static size_t segment_size(const rill__pool *p, int small, size_t size) {
    if (!small && size > MID_REQUEST)
        return round_up(size, LARGE_ROUND); /* a segment of its own */
    size_t gran = small ? SMALL_GRANULE : LARGE_GRANULE;
    size_t full = small ? SMALL_SEGMENT : LARGE_SEGMENT;
    size_t want = round_up(p->kind_reserved[small] / 2, gran);
    if (want > full)
        want = full;
    size_t need = round_up(size, gran);
    return need > want ? need : want;
}

/* Reserves a new segment able to hold size bytes and returns its single
 * free block, or NULL when the limit or the device says no. */
block *rill__segment_grow(rill_device *dev, rill__pool *p, int small, size_t size) {
    size_t seg_size = segment_size(p, small, size);
    if (p->limit != 0 && !small && p->stats.reserved_bytes + seg_size > p->limit)
        seg_size = (size + LARGE_ROUND - 1) & ~(LARGE_ROUND - 1); /* the least that serves */
    if (p->limit != 0 && (seg_size > p->limit || p->stats.reserved_bytes > p->limit - seg_size))
        return NULL;
    segment *g = rill__calloc(1, sizeof *g);
    block *k = rill__block_new(p);
    void *base = NULL, *handle = NULL;
    if (g == NULL || k == NULL || dev->ops->mem_alloc(dev, seg_size, &base, &handle) != RILL_OK)
        goto fail;
    rill__mem_block rb = {(uintptr_t)base, seg_size, dev, RILL__MEM_DEVICE, g};
    if (rill__registry_insert(&rb) != RILL_OK) {
        dev->ops->mem_free(dev, base, seg_size, handle);
        goto fail;
    }
    g->base = (uintptr_t)base;
    g->size = seg_size;
    g->handle = handle;
    g->small = small;
    g->next = p->segments;
    if (p->segments != NULL)
        p->segments->prev = g;
    p->segments = g;
    g->first = k;
    k->ptr = g->base;
    k->size = seg_size;
    k->seg = g;
    rill__bin_insert(rill__bins_for(p, small), k);
    p->stats.reserved_bytes += seg_size;
    p->kind_reserved[small] += seg_size;
    if (p->stats.reserved_bytes > p->stats.peak_reserved_bytes)
        p->stats.peak_reserved_bytes = p->stats.reserved_bytes;
    return k;

fail:
    rill__free(g);
    if (k != NULL)
        rill__block_recycle(p, k);
    return NULL;
}

/* Returns segment g, one free block, to the backend. */
void rill__segment_release(rill_device *dev, rill__pool *p, segment *g) {
    rill__mem_block rb;
    rill__bin_remove(rill__bins_for(p, g->small), g->first);
    rill__block_recycle(p, g->first);
    rill__registry_remove((void *)g->base, RILL__MEM_DEVICE, &rb);
    dev->ops->mem_free(dev, (void *)g->base, g->size, g->handle);
    if (g->prev != NULL)
        g->prev->next = g->next;
    else
        p->segments = g->next;
    if (g->next != NULL)
        g->next->prev = g->prev;
    p->stats.reserved_bytes -= g->size;
    p->kind_reserved[g->small] -= g->size;
    rill__free(g);
}

/* Merges free block src into dst, the block just before it, points and
 * all. */
static void absorb(rill__pool *p, block *dst, block *src) {
    RILL_ASSERT(dst->next == src && dst->ptr + dst->size == src->ptr);
    for (size_t i = 0; i < src->num_points; i++)
        rill__points_add(p, dst, src->points[i].stream, src->points[i].seq);
    dst->conservative |= src->conservative;
    dst->size += src->size;
    dst->next = src->next;
    if (src->next != NULL)
        src->next->prev = dst;
    rill__block_recycle(p, src);
}

/* Merges adjacent free blocks (frees do not, so that a hot allocate/free
 * pair neither splits nor merges). Run when an allocation misses and
 * before the cache is emptied. */
void rill__segment_coalesce_all(rill__pool *p) {
    if (p->unmerged == 0)
        return;
    for (segment *g = p->segments; g != NULL; g = g->next) {
        bins *b = rill__bins_for(p, g->small);
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated)
                continue;
            int merged = 0;
            while (k->next != NULL && !k->next->allocated) {
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

/* Returns every segment that is one free block with nothing pending. */
void rill__segment_empty_cache_locked(rill_device *dev, rill__pool *p) {
    rill__segment_coalesce_all(p);
    segment *next;
    for (segment *g = p->segments; g != NULL; g = next) {
        next = g->next;
        block *k = g->first;
        if (k->allocated || k->next != NULL)
            continue;
        rill__points_prune(p, k);
        if (k->num_points == 0 && !k->conservative)
            rill__segment_release(dev, p, g);
    }
}

/* The block of seg that contains address a. */
block *rill__segment_block_at(const segment *g, uintptr_t a) {
    for (block *k = g->first; k != NULL; k = k->next)
        if (a < k->ptr + k->size)
            return k;
    return NULL;
}
