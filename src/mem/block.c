/* SPDX-License-Identifier: MIT */
/* The pool's blocks: the structures (recycled through a spare list), the
 * points (stream, seq) a block carries and the owners table that holds
 * their streams, the bins of free blocks and the hash of allocated ones.
 * Everything here runs with pool->lock held.
 *
 * Invariants: a stream appears in at most one point of a block; for each
 * entry of pool->owners, live = (allocated blocks of that stream not
 * holding their own reference) + (points naming it without own_ref) +
 * (thread caches that list it for their blocks' use slots, see tcache.c); a
 * free block is in the bin rill__bin_of(size) of its segment's kind, and
 * bins.map has bit i set iff head[i] != NULL. */
#include "mem/block.h"

#include <string.h>

#include "util/alloc.h"
#include "util/assert.h"

/* --------------------------------------------------------------- owners */

/* Drops the references of owners with no live blocks. */
void rill__owners_trim(rill__pool *p) {
    unsigned kept = 0;
    for (unsigned i = 0; i < p->num_owners; i++) {
        if (p->owners[i].live == 0)
            rill__stream_unref(p->owners[i].stream);
        else
            p->owners[kept++] = p->owners[i];
    }
    p->num_owners = kept;
}

/* Counts one more block allocated on s. False when s cannot be held. */
bool rill__owners_hold(rill__pool *p, rill__stream *s) {
    for (unsigned i = 0; i < p->num_owners; i++) {
        if (p->owners[i].stream == s) {
            p->owners[i].live++;
            return true;
        }
    }
    unsigned cap = sizeof p->owners / sizeof p->owners[0];
    if (p->num_owners == cap)
        rill__owners_trim(p);
    if (p->num_owners == cap)
        return false;
    rill__stream_ref(s);
    p->owners[p->num_owners].stream = s;
    p->owners[p->num_owners].live = 1;
    p->num_owners++;
    return true;
}

void rill__owners_release(rill__pool *p, rill__stream *s) {
    for (unsigned i = 0; i < p->num_owners; i++) {
        if (p->owners[i].stream == s) {
            p->owners[i].live--;
            return;
        }
    }
    RILL_ASSERT(!"a block's allocation stream is among the owners");
}

/* ------------------------------------------------------------- points */

/* Holds s for a point: through the owners table, or with a reference of
 * its own when the table is full. */
static void point_hold(rill__pool *p, point *pt, rill__stream *s, uint64_t seq) {
    pt->stream = s;
    pt->seq = seq;
    pt->own_ref = !rill__owners_hold(p, s);
    if (pt->own_ref)
        rill__stream_ref(s);
}

static void point_drop(rill__pool *p, point *pt) {
    if (pt->own_ref)
        rill__stream_unref(pt->stream);
    else
        rill__owners_release(p, pt->stream);
}

void rill__points_clear(rill__pool *p, block *k) {
    for (size_t i = 0; i < k->num_points; i++)
        point_drop(p, &k->points[i]);
    if (k->points != k->inline_points)
        rill__free(k->points);
    k->points = k->inline_points;
    k->num_points = 0;
    k->cap_points = INLINE_POINTS;
}

/* Adds (s, seq), keeping one point per stream with the larger seq. On
 * allocation failure the block becomes conservative instead. */
void rill__points_add(rill__pool *p, block *k, rill__stream *s, uint64_t seq) {
    for (size_t i = 0; i < k->num_points; i++) {
        if (k->points[i].stream == s) {
            if (seq > k->points[i].seq)
                k->points[i].seq = seq;
            return;
        }
    }
    if (k->num_points == k->cap_points) {
        size_t cap = 2 * k->cap_points;
        point *q = rill__malloc(cap * sizeof *q);
        if (q == NULL) {
            k->conservative = 1;
            return;
        }
        memcpy(q, k->points, k->num_points * sizeof *q);
        if (k->points != k->inline_points)
            rill__free(k->points);
        k->points = q;
        k->cap_points = cap;
    }
    point_hold(p, &k->points[k->num_points++], s, seq);
}

/* Drops the points that have completed. */
void rill__points_prune(rill__pool *p, block *k) {
    size_t kept = 0;
    for (size_t i = 0; i < k->num_points; i++) {
        if (rill__done_of(k->points[i].stream) >= k->points[i].seq)
            point_drop(p, &k->points[i]);
        else
            k->points[kept++] = k->points[i];
    }
    k->num_points = kept;
}

/* Is point pt over for s: complete, or (s not NULL) s is the same stream
 * or ordered after it? */
static bool point_over_for(const point *pt, rill__stream *s) {
    if (rill__done_of(pt->stream) >= pt->seq)
        return true;
    return s != NULL &&
           (pt->stream == s || rill__stream_ordered_after(s, pt->stream->q.id, pt->seq));
}

/* May stream s (NULL: any stream, at once) take free block k without
 * waiting? */
bool rill__block_safe_for(const block *k, rill__stream *s) {
    if (k->conservative)
        return false;
    for (size_t i = 0; i < k->num_points; i++)
        if (!point_over_for(&k->points[i], s))
            return false;
    return true;
}

uint64_t rill__block_wait_cost(const block *k, rill__stream *s) {
    if (k->conservative || k->num_points > MAX_WAITS)
        return UINT64_MAX;
    uint64_t cost = 0;
    for (size_t i = 0; i < k->num_points; i++) {
        const point *pt = &k->points[i];
        if (point_over_for(pt, s))
            continue;
        /* No stream waits for work that another stream cannot make
         * complete by itself, nor for anything when s is NULL. */
        if (s == NULL || rill__stream_opaque_pending(pt->stream))
            return UINT64_MAX;
        uint64_t from = rill__done_of(pt->stream);
        uint64_t known = rill__stream_known_after(s, pt->stream->q.id);
        if (known > from)
            from = known;
        if (from < pt->seq && pt->seq - from > cost)
            cost = pt->seq - from;
    }
    return cost;
}

/* Copies k's points to r (a split-off remainder). */
void rill__points_copy(rill__pool *p, block *r, const block *k) {
    r->conservative = k->conservative;
    for (size_t i = 0; i < k->num_points; i++)
        rill__points_add(p, r, k->points[i].stream, k->points[i].seq);
}

/* The points of k that s is not yet ordered after (at most max), each
 * with a reference, into waits; false (nothing held) when there are more. */
bool rill__points_collect_waits(const block *k, rill__stream *s, point *waits, size_t max,
                                size_t *num_waits) {
    size_t n = 0;
    for (size_t i = 0; i < k->num_points; i++) {
        point pt = k->points[i];
        if (point_over_for(&pt, s))
            continue;
        if (n == max) {
            for (size_t j = 0; j < n; j++)
                rill__stream_unref(waits[j].stream);
            return false;
        }
        rill__stream_ref(pt.stream);
        pt.own_ref = 1;
        waits[n++] = pt;
    }
    *num_waits = n;
    return true;
}

/* ---------------------------------------------------------------- bins */

void rill__bin_insert(bins *b, block *k) {
    RILL_ASSERT(!k->allocated && !k->unmapped && rill__block_tiles(k));
    unsigned i = rill__bin_of(k->size);
    k->bin = i;
    k->bin_prev = NULL;
    k->bin_next = b->head[i];
    if (b->head[i] != NULL)
        b->head[i]->bin_prev = k;
    b->head[i] = k;
    b->map[i / 64] |= (uint64_t)1 << (i % 64);
}

void rill__bin_remove(bins *b, block *k) {
    if (k->bin_prev != NULL)
        k->bin_prev->bin_next = k->bin_next;
    else
        b->head[k->bin] = k->bin_next;
    if (k->bin_next != NULL)
        k->bin_next->bin_prev = k->bin_prev;
    if (b->head[k->bin] == NULL)
        b->map[k->bin / 64] &= ~((uint64_t)1 << (k->bin % 64));
}

/* The first non-empty bin at or after i, or NUM_BINS. */
unsigned rill__bin_next(const bins *b, unsigned i) {
    while (i < NUM_BINS) {
        uint64_t m = b->map[i / 64] & (~(uint64_t)0 << (i % 64));
        if (m != 0)
            return (i / 64) * 64 + (unsigned)__builtin_ctzll(m);
        i = (i / 64 + 1) * 64;
    }
    return NUM_BINS;
}

/* ------------------------------------------------------ block structures */

block *rill__block_new(rill__pool *p) {
    block *k = p->spare;
    if (k != NULL)
        p->spare = k->next;
    else if ((k = rill__malloc(sizeof *k)) == NULL)
        return NULL;
    memset(k, 0, sizeof *k);
    k->points = k->inline_points;
    k->cap_points = INLINE_POINTS;
    return k;
}

void rill__block_recycle(rill__pool *p, block *k) {
    rill__points_clear(p, k);
    k->next = p->spare;
    p->spare = k;
}

/* ---------------------------------------------------------------- hash */

static size_t hash_slot(const rill__pool *p, uintptr_t ptr) {
    return (size_t)(((uint64_t)ptr >> 9) * UINT64_C(0x9e3779b97f4a7c15) >> 20) & (p->hash_cap - 1);
}

bool rill__hash_grow(rill__pool *p) {
    size_t cap = p->hash_cap != 0 ? 2 * p->hash_cap : 256;
    block **h = rill__calloc(cap, sizeof *h);
    if (h == NULL)
        return false;
    block **old = p->hash;
    size_t old_cap = p->hash_cap;
    p->hash = h;
    p->hash_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        block *k = old[i];
        while (k != NULL) {
            block *next = k->hash_next;
            size_t s = hash_slot(p, k->ptr);
            k->hash_next = h[s];
            h[s] = k;
            k = next;
        }
    }
    rill__free(old);
    return true;
}

block *rill__hash_find(const rill__pool *p, uintptr_t ptr) {
    if (p->hash_cap == 0)
        return NULL;
    for (block *k = p->hash[hash_slot(p, ptr)]; k != NULL; k = k->hash_next)
        if (k->ptr == ptr)
            return k;
    return NULL;
}

void rill__hash_insert(rill__pool *p, block *k) {
    /* A failed grow keeps the old table: longer chains, still correct. */
    if (p->hash_count >= p->hash_cap && !rill__hash_grow(p) && p->hash_cap == 0)
        RILL_ASSERT(!"the first hash table is allocated with the pool");
    size_t s = hash_slot(p, k->ptr);
    k->hash_next = p->hash[s];
    p->hash[s] = k;
    p->hash_count++;
}

void rill__hash_remove(rill__pool *p, block *k) {
    for (block **q = &p->hash[hash_slot(p, k->ptr)]; *q != NULL; q = &(*q)->hash_next) {
        if (*q == k) {
            *q = k->hash_next;
            p->hash_count--;
            return;
        }
    }
    RILL_ASSERT(!"an allocated block is in the hash table");
}
