/* SPDX-License-Identifier: MIT */
/* The pool's shared types (see pool.h for the rules): segments tiled by
 * blocks, the points a block carries, the bins of free blocks and the
 * pool itself, with the small helpers every file of the pool inlines.
 * Internal to src/mem: pool_alloc.c (allocation), pool.c (freeing, uses,
 * lookups, statistics), block.c (block structures, points, bins, hash),
 * segment.c (segments) and tcache.c (the per-thread caches).
 *
 * The rule for splitting a free block: the rest of a block handed out for
 * a request stays free when it is at least MIN_BLOCK (small segments) or
 * more than SMALL_REQUEST (large ones); otherwise the block goes whole. */
#ifndef RILL_MEM_POOL_INTERNAL_H
#define RILL_MEM_POOL_INTERNAL_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/runtime.h"
#include "core/stream.h"

#define MIN_BLOCK         512u              /* allocation granularity */
#define ROUND_DIVISIONS   64u               /* see round_request in pool_alloc.c */
#define SMALL_REQUEST     ((size_t)1 << 20) /* up to this: the small kind of segment */
#define SEGMENT_SPAN      ((size_t)4 << 30) /* address space of a segment, see segment.c */
#define INDEX_CHUNK_SHIFT 16                /* 64 KiB chunks, see segment.c */
#define INDEX_GROUP_SHIFT 22                /* 4 MiB groups of chunks */
#define NUM_BINS          192
#define SCAN_LIMIT        64         /* blocks examined per allocation */
#define UNTIL_FREE        UINT64_MAX /* a use that lasts until the free */
#define INLINE_POINTS     3
#define MAX_WAITS         4 /* internal waits one allocation may add */
#define WAIT_SLACK        8 /* see wait_budget */

typedef struct segment segment;
typedef struct block block;

typedef struct point {
    rill__stream *stream; /* held through pool->owners, or a ref of its own (own_ref) */
    uint64_t seq;
    int own_ref;
} point;

struct segment {
    uintptr_t base;
    size_t size;   /* address space: what the backend's mem_alloc reserved */
    size_t mapped; /* of which committed: the bytes of its mapped blocks */
    void *handle;  /* the backend's, from mem_alloc */
    int small;
    segment *prev, *next; /* the pool's segments */
    block *first;         /* address-ordered blocks tiling the segment */
    /* owned: the index of the blocks by address (see segment.c): for each
     * chunk of 2^INDEX_CHUNK_SHIFT bytes and each group of 2^INDEX_GROUP_SHIFT bytes, the
     * first block that starts in it, or NULL */
    block **chunk_first, **group_first;
};

struct block {
    uintptr_t ptr;
    size_t size;      /* rounded; what the block occupies */
    size_t requested; /* allocated: the bytes asked for (bounds checks) */
    segment *seg;
    block *prev, *next;         /* address neighbours in seg */
    block *bin_prev, *bin_next; /* free: the bin's list */
    block *hash_next;           /* allocated: the hash chain */
    rill__stream *stream;       /* allocated: the allocation stream (see pool->owners) */
    int allocated;
    int unmapped;     /* free and not committed: in pool->unmapped, not reserved */
    int own_ref;      /* allocated: holds its own reference on stream */
    int conservative; /* a point could not be stored: safe only after a device sync */
    /* TC_NONE, or which part of a thread cache holds the block (see
     * tcache); relaxed: written by the cache's owner outside pool->lock,
     * read under it by lookups that only report errors */
    _Atomic unsigned char tc_state;
    unsigned bin;
    /* tc_state != TC_NONE: one use of the block by another stream, noted
     * by the cache's owner without pool->lock (rill__tcache_note_use); a
     * point that the cache checks before it hands the block out again and
     * folds into points when the block leaves it. Guarded like the cache
     * (its owner, or a lock holder that took the cache back). */
    rill__stream *use_stream; /* NULL: none; held through the cache (tcache.held) */
    uint64_t use_seq;
    /* tc_state == TC_CACHED: the submitted number of the block's stream
     * when the cache took the free, the point its own stream's uses end
     * at; guarded like use_seq */
    uint64_t free_seq;
    point *points; /* inline_points or owned */
    size_t num_points, cap_points;
    point inline_points[INLINE_POINTS];
};

typedef struct bins {
    block *head[NUM_BINS];
    uint64_t map[NUM_BINS / 64];
} bins;

typedef struct rill__pool rill__pool;

struct rill__pool {
    rill__spinlock lock; /* short critical sections; see drain_points for the long wait */
    /* guarded by lock */
    bins small, large;
    segment *segments;
    block **hash; /* owned: buckets of allocated blocks */
    size_t hash_cap, hash_count;
    block *spare; /* unused block structures, linked by next */
    rill_mem_stats stats;
    size_t limit;
    unsigned reuse_flags; /* enum rill_mem_reuse_flags (rill_mem_set_reuse_policy) */
    /* the streams that allocated blocks or are named by points, each with
     * one reference held by the pool (not one per block or point: no
     * atomic on the hot paths); entries whose count fell to zero are
     * released lazily */
    struct {
        rill__stream *stream;
        size_t live; /* allocated blocks of this stream plus points naming it */
    } owners[32];
    unsigned num_owners;
    size_t unmerged;         /* frees since the last coalesce pass */
    block *unmapped;         /* the unmapped blocks of all segments, by bin_prev/bin_next */
    uint64_t pending_reuses; /* allocations served by internal waits instead of growing */
    /* immutable after create */
    uint64_t id; /* unique for the process: thread caches name their pool by it */
    /* the thread caches: pushed under lock, never removed before destroy,
     * so that a thread may walk them without the lock */
    _Atomic(struct tcache *) tcaches;
    unsigned num_tcaches; /* guarded by lock */
    /* relaxed mirrors of stats.allocated_bytes and peak_allocated_bytes,
     * written under lock, for the thread caches' peak check */
    _Atomic size_t allocated_mirror, peak_mirror;
};

static inline rill__pool *rill__pool_of(rill__device *dev) {
    return dev->pool;
}

static inline uint64_t rill__done_of(rill__stream *s) {
    /* acquire: pairs with the release store in rill__stream_complete. */
    return atomic_load_explicit(&s->q.done_seq, memory_order_acquire);
}

static inline uint64_t rill__submitted_of(rill__stream *s) {
    /* acquire: pairs with the submit that assigned the number. */
    return atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
}

/* The bin of a free block of size bytes: four sub-bins per power of two. */
static inline unsigned rill__bin_of(size_t size) {
    unsigned fl = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    unsigned sl = (unsigned)(size >> (fl - 2)) & 3u;
    unsigned i = (fl - 9u) * 4u + sl; /* MIN_BLOCK = 2^9 is bin 0 */
    return i < NUM_BINS ? i : NUM_BINS - 1;
}

static inline bins *rill__bins_for(rill__pool *p, int small) {
    return small ? &p->small : &p->large;
}

/* Does k lie in its segment and meet its address neighbours exactly (the
 * tiling of segment.c)? For RILL_ASSERT where blocks change hands: a
 * broken tiling is caught where it appears, not as an overlap later. */
static inline bool rill__block_tiles(const block *k) {
    return k->seg != NULL && k->ptr >= k->seg->base && k->size <= k->seg->size &&
           k->ptr - k->seg->base <= k->seg->size - k->size &&
           (k->prev == NULL ? k->ptr == k->seg->base : k->prev->ptr + k->prev->size == k->ptr) &&
           (k->next == NULL ? k->ptr + k->size == k->seg->base + k->seg->size
                            : k->next->ptr == k->ptr + k->size);
}

/* Does a free block of a segment of this kind split off a rest of rest
 * bytes when handed out (see above), rather than go whole? */
static inline bool rill__splits(int small, size_t rest) {
    return small ? rest >= MIN_BLOCK : rest > SMALL_REQUEST;
}

static inline void rill__set_allocated(rill__pool *p, size_t bytes) {
    p->stats.allocated_bytes = bytes;
    /* relaxed: a hint for the thread caches' peak check, which rechecks
     * under the lock (see tcache.c). */
    atomic_store_explicit(&p->allocated_mirror, bytes, memory_order_relaxed);
}

/* pool.c: the statistics with the thread caches' share (pool->lock held). */
void rill__pool_stats_locked(rill__pool *p, rill_mem_stats *out);

#endif
