/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool (see pool.h for the rules). Free blocks
 * live in size-segregated bins (four sub-bins per power of two, TLSF
 * style, with a bitmap of non-empty bins), allocated blocks in a hash table
 * by address. A block carries "points", (stream, seq) pairs: while it is
 * allocated, the uses other streams made of it; once free, everything that
 * must be complete, or ordered before, a stream that takes it.
 *
 * Locking: pool->lock guards everything here; it is taken after the
 * registry lock is released, and stream locks taken under it are leaves
 * (clock_lock; done_seq and sub_seq are atomics). Commands are submitted
 * (internal waits) only after it is released. */
#include "mem/pool.h"

#include <inttypes.h>
#include <string.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/runtime.h"
#include "core/status.h"
#include "core/stream.h"
#include "mem/registry.h"

#define MIN_BLOCK 512u                /* allocation granularity */
#define SMALL_REQUEST ((size_t)1 << 20) /* up to this: small pool, 2 MiB segments */
#define SMALL_SEGMENT ((size_t)2 << 20)
#define MID_REQUEST ((size_t)10 << 20) /* up to this: 20 MiB segments */
#define LARGE_SEGMENT ((size_t)20 << 20)
#define LARGE_ROUND ((size_t)2 << 20) /* larger requests: their own segment */
#define NUM_BINS 192
#define SCAN_LIMIT 64                 /* blocks examined per allocation */
#define UNTIL_FREE UINT64_MAX        /* a use that lasts until the free */
#define INLINE_POINTS 3

typedef struct segment segment;
typedef struct block block;

typedef struct point {
    rill_stream *stream; /* ref */
    uint64_t seq;
} point;

struct segment {
    uintptr_t base;
    size_t size;
    void *handle; /* the backend's, from mem_alloc */
    int small;
    segment *prev, *next; /* the pool's segments */
    block *first;         /* address-ordered blocks tiling the segment */
};

struct block {
    uintptr_t ptr;
    size_t size;      /* rounded; what the block occupies */
    size_t requested; /* allocated: the bytes asked for (bounds checks) */
    segment *seg;
    block *prev, *next;         /* address neighbours in seg */
    block *bin_prev, *bin_next; /* free: the bin's list */
    block *hash_next;           /* allocated: the hash chain */
    rill_stream *stream;        /* allocated: the allocation stream (see pool->owners) */
    int allocated;
    int own_ref;                /* allocated: holds its own reference on stream */
    int conservative;           /* a point could not be stored: safe only after a device sync */
    unsigned bin;
    point *points; /* inline_points or owned */
    size_t num_points, cap_points;
    point inline_points[INLINE_POINTS];
};

typedef struct bins {
    block *head[NUM_BINS];
    uint64_t map[NUM_BINS / 64];
} bins;

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
    /* the streams that allocated blocks, each with one reference held by
     * the pool (not one per block: no atomic on the hot path); entries
     * whose count fell to zero are released lazily */
    struct {
        rill_stream *stream;
        size_t live; /* allocated blocks whose allocation stream this is */
    } owners[16];
    unsigned num_owners;
    size_t unmerged; /* frees since the last coalesce pass */
};

static rill__pool *pool_of(rill_device *dev) {
    return dev->mem.pool;
}

static uint64_t done_of(rill_stream *s) {
    /* acquire: pairs with the release store in rill__stream_complete. */
    return atomic_load_explicit(&s->done_seq, memory_order_acquire);
}

static uint64_t submitted_of(rill_stream *s) {
    /* acquire: pairs with the submit that assigned the number. */
    return atomic_load_explicit(&s->sub_seq, memory_order_acquire);
}

/* --------------------------------------------------------------- owners */

/* Drops the references of owners with no live blocks. */
static void owners_trim(rill__pool *p) {
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
static bool owner_hold(rill__pool *p, rill_stream *s) {
    for (unsigned i = 0; i < p->num_owners; i++) {
        if (p->owners[i].stream == s) {
            p->owners[i].live++;
            return true;
        }
    }
    unsigned cap = sizeof p->owners / sizeof p->owners[0];
    if (p->num_owners == cap)
        owners_trim(p);
    if (p->num_owners == cap)
        return false;
    rill__stream_ref(s);
    p->owners[p->num_owners].stream = s;
    p->owners[p->num_owners].live = 1;
    p->num_owners++;
    return true;
}

static void owner_release(rill__pool *p, rill_stream *s) {
    for (unsigned i = 0; i < p->num_owners; i++) {
        if (p->owners[i].stream == s) {
            p->owners[i].live--;
            return;
        }
    }
    RILL_ASSERT(!"a block's allocation stream is among the owners");
}

/* ------------------------------------------------------------- points */

static void points_clear(block *k) {
    for (size_t i = 0; i < k->num_points; i++)
        rill__stream_unref(k->points[i].stream);
    if (k->points != k->inline_points)
        rill__free(k->points);
    k->points = k->inline_points;
    k->num_points = 0;
    k->cap_points = INLINE_POINTS;
}

/* Adds (s, seq), keeping one point per stream with the larger seq. On
 * allocation failure the block becomes conservative instead. */
static void points_add(block *k, rill_stream *s, uint64_t seq) {
    for (size_t i = 0; i < k->num_points; i++) {
        if (k->points[i].stream == s) {
            if (seq > k->points[i].seq)
                k->points[i].seq = seq;
            return;
        }
    }
    if (k->num_points == k->cap_points) {
        size_t cap = 2 * k->cap_points;
        point *p = rill__malloc(cap * sizeof *p);
        if (p == NULL) {
            k->conservative = 1;
            return;
        }
        memcpy(p, k->points, k->num_points * sizeof *p);
        if (k->points != k->inline_points)
            rill__free(k->points);
        k->points = p;
        k->cap_points = cap;
    }
    rill__stream_ref(s);
    k->points[k->num_points].stream = s;
    k->points[k->num_points].seq = seq;
    k->num_points++;
}

/* Drops the points that have completed. */
static void points_prune(block *k) {
    size_t kept = 0;
    for (size_t i = 0; i < k->num_points; i++) {
        if (done_of(k->points[i].stream) >= k->points[i].seq)
            rill__stream_unref(k->points[i].stream);
        else
            k->points[kept++] = k->points[i];
    }
    k->num_points = kept;
}

/* May stream s take free block k without waiting? */
static bool safe_for(const block *k, rill_stream *s) {
    if (k->conservative)
        return false;
    for (size_t i = 0; i < k->num_points; i++) {
        const point *p = &k->points[i];
        if (p->stream == s || done_of(p->stream) >= p->seq ||
            rill__stream_ordered_after(s, p->stream->id, p->seq))
            continue;
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- bins */

static unsigned bin_of(size_t size) {
    unsigned fl = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    unsigned sl = (unsigned)(size >> (fl - 2)) & 3u;
    unsigned i = (fl - 9u) * 4u + sl; /* MIN_BLOCK = 2^9 is bin 0 */
    return i < NUM_BINS ? i : NUM_BINS - 1;
}

static void bin_insert(bins *b, block *k) {
    unsigned i = bin_of(k->size);
    k->bin = i;
    k->bin_prev = NULL;
    k->bin_next = b->head[i];
    if (b->head[i] != NULL)
        b->head[i]->bin_prev = k;
    b->head[i] = k;
    b->map[i / 64] |= (uint64_t)1 << (i % 64);
}

static void bin_remove(bins *b, block *k) {
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
static unsigned next_bin(const bins *b, unsigned i) {
    while (i < NUM_BINS) {
        uint64_t m = b->map[i / 64] & (~(uint64_t)0 << (i % 64));
        if (m != 0)
            return (i / 64) * 64 + (unsigned)__builtin_ctzll(m);
        i = (i / 64 + 1) * 64;
    }
    return NUM_BINS;
}

static bins *bins_for(rill__pool *p, int small) {
    return small ? &p->small : &p->large;
}

/* ------------------------------------------------------ block structures */

static block *block_new(rill__pool *p) {
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

static void block_recycle(rill__pool *p, block *k) {
    points_clear(k);
    k->next = p->spare;
    p->spare = k;
}

/* ---------------------------------------------------------------- hash */

static size_t hash_slot(const rill__pool *p, uintptr_t ptr) {
    return (size_t)(((uint64_t)ptr >> 9) * UINT64_C(0x9e3779b97f4a7c15) >> 20) &
           (p->hash_cap - 1);
}

static bool hash_grow(rill__pool *p) {
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

static block *hash_find(const rill__pool *p, uintptr_t ptr) {
    if (p->hash_cap == 0)
        return NULL;
    for (block *k = p->hash[hash_slot(p, ptr)]; k != NULL; k = k->hash_next)
        if (k->ptr == ptr)
            return k;
    return NULL;
}

static void hash_insert(rill__pool *p, block *k) {
    /* A failed grow keeps the old table: longer chains, still correct. */
    if (p->hash_count >= p->hash_cap && !hash_grow(p) && p->hash_cap == 0)
        RILL_ASSERT(!"the first hash table is allocated with the pool");
    size_t s = hash_slot(p, k->ptr);
    k->hash_next = p->hash[s];
    p->hash[s] = k;
    p->hash_count++;
}

static void hash_remove(rill__pool *p, block *k) {
    for (block **q = &p->hash[hash_slot(p, k->ptr)]; *q != NULL; q = &(*q)->hash_next) {
        if (*q == k) {
            *q = k->hash_next;
            p->hash_count--;
            return;
        }
    }
    RILL_ASSERT(!"an allocated block is in the hash table");
}

/* The block of seg that contains address a. */
static block *block_at(const segment *g, uintptr_t a) {
    for (block *k = g->first; k != NULL; k = k->next)
        if (a < k->ptr + k->size)
            return k;
    return NULL;
}

/* ------------------------------------------------------------ segments */

static size_t round_request(size_t bytes) {
    size_t r = (bytes + MIN_BLOCK - 1) & ~(size_t)(MIN_BLOCK - 1);
    return r < MIN_BLOCK ? MIN_BLOCK : r;
}

/* Reserves a new segment able to hold size bytes and returns its single
 * free block, or NULL when the limit or the device says no. */
static block *grow(rill_device *dev, rill__pool *p, int small, size_t size) {
    size_t seg_size = small                 ? SMALL_SEGMENT
                      : size <= MID_REQUEST ? LARGE_SEGMENT
                                            : (size + LARGE_ROUND - 1) & ~(LARGE_ROUND - 1);
    if (p->limit != 0 && !small && p->stats.reserved_bytes + seg_size > p->limit)
        seg_size = (size + LARGE_ROUND - 1) & ~(LARGE_ROUND - 1); /* the least that serves */
    if (p->limit != 0 && (seg_size > p->limit || p->stats.reserved_bytes > p->limit - seg_size))
        return NULL;
    segment *g = rill__calloc(1, sizeof *g);
    block *k = block_new(p);
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
    bin_insert(bins_for(p, small), k);
    p->stats.reserved_bytes += seg_size;
    if (p->stats.reserved_bytes > p->stats.peak_reserved_bytes)
        p->stats.peak_reserved_bytes = p->stats.reserved_bytes;
    return k;

fail:
    rill__free(g);
    if (k != NULL)
        block_recycle(p, k);
    return NULL;
}

static void segment_release(rill_device *dev, rill__pool *p, segment *g) {
    rill__mem_block rb;
    bin_remove(bins_for(p, g->small), g->first);
    block_recycle(p, g->first);
    rill__registry_remove((void *)g->base, RILL__MEM_DEVICE, &rb);
    dev->ops->mem_free(dev, (void *)g->base, g->size, g->handle);
    if (g->prev != NULL)
        g->prev->next = g->next;
    else
        p->segments = g->next;
    if (g->next != NULL)
        g->next->prev = g->prev;
    p->stats.reserved_bytes -= g->size;
    rill__free(g);
}

/* Merges free block src into dst, the block just before it, points and
 * all. */
static void absorb(rill__pool *p, block *dst, block *src) {
    RILL_ASSERT(dst->next == src && dst->ptr + dst->size == src->ptr);
    for (size_t i = 0; i < src->num_points; i++)
        points_add(dst, src->points[i].stream, src->points[i].seq);
    dst->conservative |= src->conservative;
    dst->size += src->size;
    dst->next = src->next;
    if (src->next != NULL)
        src->next->prev = dst;
    block_recycle(p, src);
}

/* Merges adjacent free blocks (frees do not, so that a hot allocate/free
 * pair neither splits nor merges). Run when an allocation misses and
 * before the cache is emptied. */
static void coalesce_all(rill__pool *p) {
    if (p->unmerged == 0)
        return;
    for (segment *g = p->segments; g != NULL; g = g->next) {
        bins *b = bins_for(p, g->small);
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated)
                continue;
            int merged = 0;
            while (k->next != NULL && !k->next->allocated) {
                if (!merged)
                    bin_remove(b, k);
                merged = 1;
                bin_remove(b, k->next);
                absorb(p, k, k->next);
            }
            if (merged)
                bin_insert(b, k);
        }
    }
    p->unmerged = 0;
}

/* Returns every segment that is one free block with nothing pending. */
static void empty_cache_locked(rill_device *dev, rill__pool *p) {
    coalesce_all(p);
    segment *next;
    for (segment *g = p->segments; g != NULL; g = next) {
        next = g->next;
        block *k = g->first;
        if (k->allocated || k->next != NULL)
            continue;
        points_prune(k);
        if (k->num_points == 0 && !k->conservative)
            segment_release(dev, p, g);
    }
}

/* ---------------------------------------------------------- allocation */

/* A free block of at least size bytes; with need_safe, one that s may take
 * without waiting. Bounded scan, best bins first. */
static block *find_free(rill__pool *p, int small, size_t size, rill_stream *s, int need_safe) {
    bins *b = bins_for(p, small);
    int scanned = 0;
    for (unsigned i = next_bin(b, bin_of(size)); i < NUM_BINS; i = next_bin(b, i + 1)) {
        for (block *k = b->head[i]; k != NULL; k = k->bin_next) {
            if (k->size < size)
                continue;
            if (!need_safe || safe_for(k, s))
                return k;
            if (++scanned >= SCAN_LIMIT)
                return NULL;
        }
    }
    return NULL;
}

/* Copies k's points to r (a split-off remainder). */
static void points_copy(block *r, const block *k) {
    r->conservative = k->conservative;
    for (size_t i = 0; i < k->num_points; i++)
        points_add(r, k->points[i].stream, k->points[i].seq);
}

/* Takes free block k for an allocation of size bytes (rounded from
 * requested) on s. */
static void take(rill__pool *p, block *k, size_t size, size_t requested, rill_stream *s) {
    int small = k->seg->small;
    bins *b = bins_for(p, small);
    bin_remove(b, k);
    size_t rest = k->size - size;
    if (small ? rest >= MIN_BLOCK : rest > SMALL_REQUEST) {
        block *r = block_new(p);
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
            points_copy(r, k);
            bin_insert(b, r);
        }
    }
    points_clear(k);
    k->conservative = 0;
    k->allocated = 1;
    k->requested = requested;
    k->stream = s; /* held through pool->owners (see rill__pool_alloc) */
    hash_insert(p, k);
    p->stats.allocated_bytes += k->size;
    if (p->stats.allocated_bytes > p->stats.peak_allocated_bytes)
        p->stats.peak_allocated_bytes = p->stats.allocated_bytes;
    p->stats.allocations++;
}

/* Waits on the host for every point of every free block, then prunes
 * them (the last resort before out of memory). pool->lock held on entry
 * and exit; dropped while waiting. */
static void drain_points(rill_device *dev, rill__pool *p) {
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
        rill__stream_host_wait(all[i].stream, all[i].seq, 1);
        rill__stream_unref(all[i].stream);
    }
    rill__free(all);
    if (conservative)
        rill_device_synchronize(dev);
    rill__spinlock_lock(&p->lock);
    for (segment *g = p->segments; g != NULL; g = g->next) {
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated)
                continue;
            points_prune(k);
            if (conservative)
                k->conservative = 0;
        }
    }
}

static rill_status out_of_memory(rill_device *dev, rill__pool *p, size_t bytes, const char *fn) {
    rill_mem_stats st = p->stats;
    size_t limit = p->limit;
    rill__spinlock_unlock(&p->lock);
    char lim[48];
    if (limit != 0)
        snprintf(lim, sizeof lim, "%zu bytes", limit);
    else
        snprintf(lim, sizeof lim, "none");
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                      "%s: cannot allocate %zu bytes on device %d (limit %s; %zu bytes allocated, "
                      "%zu bytes reserved of which %zu cached and unusable); free memory, raise "
                      "the limit with rill_mem_set_limit, or allocate less",
                      fn, bytes, dev->info.ordinal, lim, st.allocated_bytes, st.reserved_bytes,
                      st.reserved_bytes - st.allocated_bytes);
}

rill_status rill__pool_alloc(rill_stream *s, size_t bytes, const char *fn, void **out) {
    rill_device *dev = s->dev;
    rill__pool *p = pool_of(dev);
    if (bytes > SIZE_MAX / 2)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: %zu bytes is more than any device can hold; check the size", fn,
                          bytes);
    size_t size = round_request(bytes);
    int small = size <= SMALL_REQUEST;
    point waits[8];
    size_t num_waits = 0;
    rill__spinlock_lock(&p->lock);
    block *k = find_free(p, small, size, s, 1);
    if (k == NULL && p->unmerged != 0) {
        coalesce_all(p);
        k = find_free(p, small, size, s, 1);
    }
    if (k != NULL) {
        p->stats.cache_hits++;
    } else if ((k = grow(dev, p, small, size)) == NULL) {
        /* Cannot grow: reuse a block that s must first wait for (an
         * internal stream wait), if one has few enough points. */
        k = find_free(p, small, size, s, 0);
        if (k != NULL && (k->conservative || k->num_points > sizeof waits / sizeof waits[0]))
            k = NULL;
        if (k != NULL) {
            for (size_t i = 0; i < k->num_points; i++) {
                point pt = k->points[i];
                if (pt.stream == s || done_of(pt.stream) >= pt.seq ||
                    rill__stream_ordered_after(s, pt.stream->id, pt.seq))
                    continue;
                rill__stream_ref(pt.stream);
                waits[num_waits++] = pt;
            }
            p->stats.cache_hits++;
        } else if (!rill__thread_is_worker()) {
            /* Last resort: wait on the host for pending frees, return the
             * cache to the system, and grow. */
            drain_points(dev, p);
            empty_cache_locked(dev, p);
            k = find_free(p, small, size, s, 1);
            if (k == NULL)
                k = grow(dev, p, small, size);
            if (k != NULL)
                p->stats.oom_recoveries++;
        }
        if (k == NULL)
            return out_of_memory(dev, p, bytes, fn);
    }
    if (!owner_hold(p, s)) {
        /* More than 16 streams hold live blocks: hold this one directly. */
        rill__stream_ref(s);
        take(p, k, size, bytes, s);
        k->own_ref = 1;
    } else {
        take(p, k, size, bytes, s);
    }
    void *ptr = (void *)k->ptr;
    rill__spinlock_unlock(&p->lock);
    for (size_t i = 0; i < num_waits; i++) {
        if (rill__stream_wait_point(s, waits[i].stream, waits[i].seq, fn) != RILL_OK)
            rill__stream_host_wait(waits[i].stream, waits[i].seq, 1);
        rill__stream_unref(waits[i].stream);
    }
    *out = ptr;
    return RILL_OK;
}

/* ------------------------------------------------------------- freeing */

/* Looks up the segment that holds ptr; NULL when ptr is no device memory. */
static segment *segment_of(const void *ptr, rill_device **dev) {
    rill__mem_block rb;
    if (!rill__registry_find(ptr, &rb) || rb.kind != RILL__MEM_DEVICE)
        return NULL;
    *dev = rb.dev;
    return rb.owner;
}

/* Finds the allocated block that starts at ptr in some device's pool and
 * returns with that pool locked; NULL (nothing locked) when there is none.
 * The hash lookup avoids the registry on the hot free path. */
static block *find_allocated_locked(const void *ptr, rill__pool **pool, rill_device **dev) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    for (int i = 0; i < rt->num_devices; i++) {
        rill__pool *p = pool_of(rt->devices[i]);
        rill__spinlock_lock(&p->lock);
        block *k = hash_find(p, (uintptr_t)ptr);
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
    rill_device *dev = NULL;
    segment *g = segment_of(ptr, &dev);
    if (g != NULL) {
        rill__pool *p = pool_of(dev);
        rill__spinlock_lock(&p->lock);
        block *in = block_at(g, (uintptr_t)ptr);
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

rill_status rill__pool_free(void *ptr, rill_stream *f, const char *fn) {
    rill__pool *p = NULL;
    rill_device *dev = NULL;
    block *k = find_allocated_locked(ptr, &p, &dev);
    if (k == NULL)
        return bad_free(ptr, fn);
    if (f != NULL && f->dev != dev) {
        rill__spinlock_unlock(&p->lock);
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "%s: %p belongs to device %d but the stream to device %d; free it on a "
                          "stream of its own device",
                          fn, ptr, dev->info.ordinal, f->dev->info.ordinal);
    }
    segment *g = k->seg;
    hash_remove(p, k);
    rill_stream *a = k->stream;
    rill_stream *by = f != NULL ? f : a;
    for (size_t i = 0; i < k->num_points; i++)
        if (k->points[i].seq == UNTIL_FREE)
            k->points[i].seq = submitted_of(k->points[i].stream);
    points_prune(k);
    /* The frees' own points, unless already complete (the common case of
     * a stream that has caught up: no reference taken). */
    uint64_t a_seq = submitted_of(a);
    if (done_of(a) < a_seq)
        points_add(k, a, a_seq);
    if (by != a) {
        uint64_t by_seq = submitted_of(by);
        if (done_of(by) < by_seq)
            points_add(k, by, by_seq);
    }
    for (size_t i = 0; i < k->num_points; i++) {
        if (k->points[i].stream != by) {
            p->stats.deferred_frees++;
            break;
        }
    }
    int own_ref = k->own_ref;
    if (!own_ref)
        owner_release(p, a);
    k->allocated = 0;
    k->own_ref = 0;
    k->stream = NULL;
    p->stats.allocated_bytes -= k->size;
    p->stats.frees++;
    p->unmerged++; /* neighbours merge lazily: see coalesce_all */
    bin_insert(bins_for(p, g->small), k);
    rill__spinlock_unlock(&p->lock);
    if (own_ref)
        rill__stream_unref(a);
    return RILL_OK;
}

/* -------------------------------------------------------------- uses */

void rill__pool_note_use(rill_stream *s, uint64_t seq, const void *ptr, size_t bytes) {
    (void)bytes;
    if (seq == 0)
        return; /* captured into a graph: the graph's launches use it */
    rill_device *dev = NULL;
    segment *g = segment_of(ptr, &dev);
    if (g == NULL)
        return;
    rill__pool *p = pool_of(dev);
    rill__spinlock_lock(&p->lock);
    block *k = hash_find(p, (uintptr_t)ptr);
    if (k == NULL)
        k = block_at(g, (uintptr_t)ptr);
    if (k != NULL && k->allocated && k->stream != s)
        points_add(k, s, seq);
    rill__spinlock_unlock(&p->lock);
}

rill_status rill__pool_record_stream(void *ptr, rill_stream *s, const char *fn) {
    rill_device *dev = NULL;
    segment *g = segment_of(ptr, &dev);
    block *k = NULL;
    rill__pool *p = NULL;
    if (g != NULL) {
        p = pool_of(dev);
        rill__spinlock_lock(&p->lock);
        k = hash_find(p, (uintptr_t)ptr);
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
        points_add(k, s, UNTIL_FREE);
    rill__spinlock_unlock(&p->lock);
    return RILL_OK;
}

/* ----------------------------------------------------------- lookups */

bool rill__pool_find(const void *ptr, rill_device **dev, size_t *bytes_to_end) {
    segment *g = segment_of(ptr, dev);
    if (g == NULL)
        return false;
    rill__pool *p = pool_of(*dev);
    rill__spinlock_lock(&p->lock);
    block *k = hash_find(p, (uintptr_t)ptr);
    if (k == NULL)
        k = block_at(g, (uintptr_t)ptr);
    bool found = k != NULL && k->allocated && (uintptr_t)ptr < k->ptr + k->requested;
    if (found)
        *bytes_to_end = k->ptr + k->requested - (uintptr_t)ptr;
    rill__spinlock_unlock(&p->lock);
    return found;
}

bool rill__pool_locate(const void *ptr, rill__pool_location *out) {
    rill_device *dev = NULL;
    segment *g = segment_of(ptr, &dev);
    if (g == NULL)
        return false;
    rill__pool *p = pool_of(dev);
    rill__spinlock_lock(&p->lock);
    block *k = hash_find(p, (uintptr_t)ptr);
    if (k != NULL) {
        out->segment_base = (void *)g->base;
        out->segment_bytes = g->size;
        out->offset = k->ptr - g->base;
        out->block_bytes = k->requested;
        out->backend_handle = g->handle;
    }
    rill__spinlock_unlock(&p->lock);
    return k != NULL;
}

/* -------------------------------------------------------- stats, limits */

void rill__pool_get_stats(rill_device *dev, rill_mem_stats *out) {
    rill__pool *p = pool_of(dev);
    rill__spinlock_lock(&p->lock);
    *out = p->stats;
    rill__spinlock_unlock(&p->lock);
}

void rill__pool_empty_cache(rill_device *dev) {
    rill__pool *p = pool_of(dev);
    rill__spinlock_lock(&p->lock);
    empty_cache_locked(dev, p);
    owners_trim(p);
    rill__spinlock_unlock(&p->lock);
}

void rill__pool_set_limit(rill_device *dev, size_t max_reserved_bytes) {
    rill__pool *p = pool_of(dev);
    rill__spinlock_lock(&p->lock);
    p->limit = max_reserved_bytes;
    rill__spinlock_unlock(&p->lock);
}

/* ----------------------------------------------------- create, destroy */

rill_status rill__pool_create(rill_device *dev) {
    rill__pool *p = rill__calloc(1, sizeof *p);
    if (p == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a memory pool");
    if (!hash_grow(p)) {
        rill__free(p);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a memory pool");
    }
    dev->mem.pool = p;
    return RILL_OK;
}

void rill__pool_destroy(rill_device *dev) {
    rill__pool *p = pool_of(dev);
    if (p == NULL)
        return;
    while (p->segments != NULL) {
        segment *g = p->segments;
        block *next;
        for (block *k = g->first; k != NULL; k = next) {
            next = k->next;
            if (k->allocated && k->own_ref)
                rill__stream_unref(k->stream);
            else if (!k->allocated)
                bin_remove(bins_for(p, g->small), k);
            if (k != g->first)
                block_recycle(p, k);
        }
        g->first->next = NULL;
        g->first->allocated = 0;
        bin_insert(bins_for(p, g->small), g->first);
        segment_release(dev, p, g);
    }
    for (unsigned i = 0; i < p->num_owners; i++)
        rill__stream_unref(p->owners[i].stream);
    p->num_owners = 0;
    while (p->spare != NULL) {
        block *k = p->spare;
        p->spare = k->next;
        rill__free(k);
    }
    rill__free(p->hash);
    rill__free(p);
    dev->mem.pool = NULL;
}

/* -------------------------------------------------------------- summary */

static void human(char *buf, size_t size, size_t bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

void rill__pool_summary(rill_device *dev, FILE *out) {
    rill__pool *p = pool_of(dev);
    struct {
        size_t segments, reserved, allocated, live, free_blocks, largest_free, pending;
    } row[2] = {{0}};
    rill__spinlock_lock(&p->lock);
    rill_mem_stats st = p->stats;
    size_t limit = p->limit;
    for (segment *g = p->segments; g != NULL; g = g->next) {
        int r = g->small ? 0 : 1;
        row[r].segments++;
        row[r].reserved += g->size;
        for (block *k = g->first; k != NULL; k = k->next) {
            if (k->allocated) {
                row[r].allocated += k->size;
                row[r].live++;
                continue;
            }
            row[r].free_blocks++;
            if (k->size > row[r].largest_free)
                row[r].largest_free = k->size;
            points_prune(k);
            if (k->num_points != 0 || k->conservative)
                row[r].pending++;
        }
    }
    rill__spinlock_unlock(&p->lock);
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(out, "rill memory summary: device %d (%s)\n", dev->info.ordinal, dev->info.name);
    human(a, sizeof a, st.allocated_bytes);
    human(b, sizeof b, st.peak_allocated_bytes);
    human(c, sizeof c, st.reserved_bytes);
    human(d, sizeof d, st.peak_reserved_bytes);
    human(e, sizeof e, limit);
    fprintf(out, "  %-28s %14s %14s\n", "", "current", "peak");
    fprintf(out, "  %-28s %14s %14s\n", "allocated", a, b);
    fprintf(out, "  %-28s %14s %14s\n", "reserved", c, d);
    fprintf(out, "  %-28s %14s\n", "limit", limit != 0 ? e : "none");
    fprintf(out, "\n  %-8s %9s %12s %12s %8s %8s %13s %8s\n", "pool", "segments", "reserved",
            "allocated", "blocks", "free", "largest free", "pending");
    static const char *const names[2] = {"small", "large"};
    for (int r = 0; r < 2; r++) {
        human(a, sizeof a, row[r].reserved);
        human(b, sizeof b, row[r].allocated);
        human(c, sizeof c, row[r].largest_free);
        fprintf(out, "  %-8s %9zu %12s %12s %8zu %8zu %13s %8zu\n", names[r], row[r].segments, a,
                b, row[r].live, row[r].free_blocks, c, row[r].pending);
    }
    double hit = st.allocations != 0 ? 100.0 * (double)st.cache_hits / (double)st.allocations : 0;
    fprintf(out, "\n  allocations %" PRIu64 ", frees %" PRIu64 ", cache hits %" PRIu64
                 " (%.1f%%), deferred frees %" PRIu64 ", out-of-memory recoveries %" PRIu64 "\n",
            st.allocations, st.frees, st.cache_hits, hit, st.deferred_frees, st.oom_recoveries);
    fprintf(out, "  (small: requests up to 1 MiB in 2 MiB segments; large: the rest; pending: "
                 "free blocks another stream's work still holds)\n");
}
