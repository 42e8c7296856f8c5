/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool (see pool.h for the rules). Free blocks
 * live in size-segregated bins (four sub-bins per power of two, TLSF
 * style, with a bitmap of non-empty bins), allocated blocks in a hash table
 * by address, or in the thread cache that leased them. A block carries "points", (stream, seq) pairs: while it is
 * allocated, the uses other streams made of it; once free, everything that
 * must be complete, or ordered before, a stream that takes it.
 *
 * Locking: pool->lock guards everything here; it is taken after the
 * registry lock is released, and stream locks taken under it are leaves
 * (clock_lock; done_seq and sub_seq are atomics). Commands are submitted
 * (internal waits) only after it is released. A thread cache is its
 * owner's outside the lock, and a lock holder's only by stealing it. Streams
 * named by blocks and points are held through pool->owners, one reference
 * per stream, so that recording a use takes no atomic on the stream. */
#include "mem/pool.h"

#include <inttypes.h>
#include <stdalign.h>
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
#define SMALL_GRANULE ((size_t)256 << 10) /* the sizes of new segments, see segment_size */
#define LARGE_GRANULE ((size_t)1 << 20)
#define NUM_BINS 192
#define SCAN_LIMIT 64                 /* blocks examined per allocation */
#define UNTIL_FREE UINT64_MAX        /* a use that lasts until the free */
#define INLINE_POINTS 3
#define MAX_WAITS 4                   /* internal waits one allocation may add */
#define WAIT_SLACK 8                  /* see wait_budget */

typedef struct segment segment;
typedef struct block block;

typedef struct point {
    rill_stream *stream; /* held through pool->owners, or a ref of its own (own_ref) */
    uint64_t seq;
    int own_ref;
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
    /* TC_NONE, or which part of a thread cache holds the block (see
     * tcache); relaxed: written by the cache's owner outside pool->lock,
     * read under it by lookups that only report errors */
    _Atomic unsigned char tc_state;
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
    /* the streams that allocated blocks or are named by points, each with
     * one reference held by the pool (not one per block or point: no
     * atomic on the hot paths); entries whose count fell to zero are
     * released lazily */
    struct {
        rill_stream *stream;
        size_t live; /* allocated blocks of this stream plus points naming it */
    } owners[32];
    unsigned num_owners;
    size_t unmerged; /* frees since the last coalesce pass */
    size_t kind_reserved[2]; /* [small]: reserved bytes of each kind of segment */
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

/* Holds s for a point: through the owners table, or with a reference of
 * its own when the table is full. */
static void point_hold(rill__pool *p, point *pt, rill_stream *s, uint64_t seq) {
    pt->stream = s;
    pt->seq = seq;
    pt->own_ref = !owner_hold(p, s);
    if (pt->own_ref)
        rill__stream_ref(s);
}

static void point_drop(rill__pool *p, point *pt) {
    if (pt->own_ref)
        rill__stream_unref(pt->stream);
    else
        owner_release(p, pt->stream);
}

static void points_clear(rill__pool *p, block *k) {
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
static void points_add(rill__pool *p, block *k, rill_stream *s, uint64_t seq) {
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
static void points_prune(rill__pool *p, block *k) {
    size_t kept = 0;
    for (size_t i = 0; i < k->num_points; i++) {
        if (done_of(k->points[i].stream) >= k->points[i].seq)
            point_drop(p, &k->points[i]);
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
    points_clear(p, k);
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

/* --------------------------------------------------------- thread caches */

/* A thread cache serves a malloc_async/free_async pair on one stream
 * without pool->lock (whose atomic exchange was most of the pair's cost).
 * It holds blocks "leased" from the pool: free ones (TC_CACHED, by bin,
 * each freed on its own allocation stream with no point of another
 * stream, so that stream may take it again at once: stream order) and
 * allocated ones handed out from there (TC_LIVE, in a small table by
 * address instead of pool->hash). The pool sees both as allocated blocks
 * of their stream (owners counts held, never merged); stats.allocated_bytes
 * counts them, and the true allocated bytes are that minus every cache's
 * cached_bytes.
 *
 * Only the owning thread touches a cache, except that a thread holding
 * pool->lock may take everything back ("steal": empty_cache, summaries,
 * out-of-memory recovery, a lookup of another thread's leased block). The
 * two meet in a Dekker pair: the owner stores busy, runs a light barrier
 * and loads steal; the stealer stores steal, runs a heavy barrier and
 * waits for busy to clear. A cache another thread had to steal from stops
 * caching for TC_COOLDOWN frees (a producer-consumer pattern). */
#define TC_BINS 64                      /* blocks up to bin_of(TC_MAX_BLOCK) */
#define TC_LIVE 64                      /* leased allocated blocks, by address */
#define TC_PROBE 4                      /* slots the owner probes; others scan all */
#define TC_MAX_BLOCK ((size_t)4 << 20)  /* larger blocks go back to the pool */
#define TC_MAX_BYTES ((size_t)8 << 20)  /* bound on a cache's free bytes */
#define TC_MAX_CACHES 64                /* threads beyond these use the lock */
#define TC_COOLDOWN 1024
#define TC_NONE 0
#define TC_LIVE_BLOCK 1
#define TC_CACHED 2

typedef struct tcache {
    /* atomic: the Dekker pair with a stealer */
    alignas(64) _Atomic int busy;
    _Atomic int steal;
    /* owner only (a stealer while the owner is out, see above) */
    block *free_head[TC_BINS]; /* linked by bin_next */
    block *live[TC_LIVE];
    _Atomic unsigned num_live; /* relaxed: others read it as a hint */
    unsigned cooldown;
    /* written by the owner (or a stealer), read by stats: relaxed */
    _Atomic size_t cached_bytes;
    _Atomic uint64_t allocations, frees; /* served here; every allocation is a cache hit */
    /* immutable after registration */
    struct tcache *next;
    /* guarded by pool->lock: &tls_token of the owning thread (a thread
     * that starts after its owner exited may adopt the cache) */
    const void *owner;
} tcache;

static _Atomic uint64_t next_pool_id = 1;
static _Thread_local uint64_t tls_pool_id; /* the pool tls_cache belongs to */
static _Thread_local tcache *tls_cache;   /* NULL: none for that pool */
static _Thread_local char tls_token;      /* its address names the thread */

/* The calling thread's cache for p, or NULL. */
static tcache *tc_mine(const rill__pool *p) {
    return tls_pool_id == p->id ? tls_cache : NULL;
}

static size_t tc_slot(uintptr_t ptr) {
    return (size_t)(((uint64_t)ptr >> 9) * UINT64_C(0x9e3779b97f4a7c15) >> 58) & (TC_LIVE - 1);
}

static void set_allocated(rill__pool *p, size_t bytes) {
    p->stats.allocated_bytes = bytes;
    /* relaxed: a hint for tc_check_peak, which rechecks under the lock. */
    atomic_store_explicit(&p->allocated_mirror, bytes, memory_order_relaxed);
}

/* The bytes that the thread caches hold free. */
static size_t tc_cached_total(const rill__pool *p) {
    size_t n = 0;
    /* acquire: pairs with the release store in tc_register. */
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_acquire); c != NULL;
         c = c->next)
        n += atomic_load_explicit(&c->cached_bytes, memory_order_relaxed);
    return n;
}

/* Raises the peak of allocated bytes to the current true figure. */
static void note_peak_locked(rill__pool *p) {
    size_t a = p->stats.allocated_bytes - tc_cached_total(p);
    if (a > p->stats.peak_allocated_bytes) {
        p->stats.peak_allocated_bytes = a;
        atomic_store_explicit(&p->peak_mirror, a, memory_order_relaxed);
    }
}

/* Registers a cache for the calling thread (pool->lock held). */
static tcache *tc_register(rill__pool *p) {
    tls_pool_id = p->id;
    tls_cache = NULL;
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed); c != NULL;
         c = c->next) {
        if (c->owner == &tls_token)
            return tls_cache = c; /* the thread used another pool meanwhile */
    }
    if (p->num_tcaches == TC_MAX_CACHES)
        return NULL;
    tcache *c = rill__calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->owner = &tls_token;
    c->next = atomic_load_explicit(&p->tcaches, memory_order_relaxed);
    /* release: publishes c to tc_cached_total. */
    atomic_store_explicit(&p->tcaches, c, memory_order_release);
    p->num_tcaches++;
    tls_cache = c;
    return c;
}

/* Starts the owner's lock-free section; false when a stealer is at work. */
static bool tc_enter(tcache *c) {
    atomic_store_explicit(&c->busy, 1, memory_order_relaxed);
    rill__barrier_light(); /* pairs with the heavy barrier in tc_steal */
    /* acquire: pairs with the release store of steal in tc_steal. */
    if (!atomic_load_explicit(&c->steal, memory_order_acquire))
        return true;
    atomic_store_explicit(&c->busy, 0, memory_order_release);
    return false;
}

static void tc_leave(tcache *c) {
    /* release: pairs with the acquire load of busy in tc_steal. */
    atomic_store_explicit(&c->busy, 0, memory_order_release);
}

static unsigned live_count(tcache *c) {
    return atomic_load_explicit(&c->num_live, memory_order_relaxed);
}

static void live_add(tcache *c, int d) {
    atomic_store_explicit(&c->num_live, live_count(c) + (unsigned)d, memory_order_relaxed);
}

static void tc_count(_Atomic uint64_t *n) {
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void tc_add_cached(tcache *c, size_t bytes, int sign) {
    size_t v = atomic_load_explicit(&c->cached_bytes, memory_order_relaxed);
    atomic_store_explicit(&c->cached_bytes, sign > 0 ? v + bytes : v - bytes,
                          memory_order_relaxed);
}

/* Where k sits in c->live (owner, or pool->lock held and c stolen or
 * the caller's); full scans when probe is false. */
static block **tc_live_find(tcache *c, uintptr_t ptr, bool probe) {
    size_t h = tc_slot(ptr);
    for (size_t i = 0; i < (probe ? TC_PROBE : TC_LIVE); i++) {
        block **q = &c->live[(h + i) & (TC_LIVE - 1)];
        if (*q != NULL && (*q)->ptr == ptr)
            return q;
    }
    return NULL;
}

/* May k, being freed on by (NULL: its own stream), stay in cache c? */
static bool tc_keepable(const tcache *c, const block *k, const rill_stream *by) {
    return c->cooldown == 0 && (by == NULL || by == k->stream) && k->num_points == 0 &&
           !k->conservative && !k->own_ref && k->size <= TC_MAX_BLOCK &&
           atomic_load_explicit(&c->cached_bytes, memory_order_relaxed) + k->size <= TC_MAX_BYTES;
}

static void tc_push_cached(tcache *c, block *k) {
    unsigned i = bin_of(k->size);
    k->bin_next = c->free_head[i];
    c->free_head[i] = k;
    atomic_store_explicit(&k->tc_state, TC_CACHED, memory_order_relaxed);
    tc_add_cached(c, k->size, 1);
}

/* Returns a cached block to the pool as a free block (pool->lock held). */
static void release_cached(rill__pool *p, block *k) {
    atomic_store_explicit(&k->tc_state, TC_NONE, memory_order_relaxed);
    /* The cache relied on stream order; other streams need the point. */
    rill_stream *a = k->stream;
    uint64_t seq = submitted_of(a);
    if (done_of(a) < seq)
        points_add(p, k, a, seq);
    owner_release(p, a);
    k->allocated = 0;
    k->stream = NULL;
    set_allocated(p, p->stats.allocated_bytes - k->size);
    p->unmerged++;
    bin_insert(bins_for(p, k->seg->small), k);
}

/* Moves everything of c back to the pool: live blocks into the hash, free
 * ones into the bins (pool->lock held; c is the caller's or stolen). */
static void tc_drain_locked(rill__pool *p, tcache *c) {
    for (unsigned i = 0; i < TC_BINS; i++) {
        while (c->free_head[i] != NULL) {
            block *k = c->free_head[i];
            c->free_head[i] = k->bin_next;
            tc_add_cached(c, k->size, -1);
            release_cached(p, k);
        }
    }
    for (unsigned i = 0; i < TC_LIVE && live_count(c) != 0; i++) {
        block *k = c->live[i];
        if (k == NULL)
            continue;
        c->live[i] = NULL;
        live_add(c, -1);
        atomic_store_explicit(&k->tc_state, TC_NONE, memory_order_relaxed);
        hash_insert(p, k);
    }
}

/* Takes everything of another thread's cache back (pool->lock held). */
static void tc_steal(rill__pool *p, tcache *c) {
    atomic_store(&c->steal, 1);
    rill__barrier_heavy(); /* pairs with the light barrier in tc_enter */
    /* acquire: pairs with the release store in tc_leave. */
    for (int spins = 0; atomic_load_explicit(&c->busy, memory_order_acquire); spins++) {
        if (spins < 64)
            rill__cpu_relax();
        else
            rill__thread_yield();
    }
    tc_drain_locked(p, c);
    c->cooldown = TC_COOLDOWN;
    /* release: pairs with the acquire load of steal in tc_enter. */
    atomic_store_explicit(&c->steal, 0, memory_order_release);
}

/* Takes every cache's blocks back to the pool (pool->lock held). */
static void tc_steal_all(rill__pool *p) {
    tcache *mine = tc_mine(p);
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed); c != NULL;
         c = c->next) {
        if (c == mine)
            tc_drain_locked(p, c);
        else if (live_count(c) != 0 || atomic_load_explicit(&c->cached_bytes, memory_order_relaxed))
            tc_steal(p, c);
    }
}

/* The allocated block that starts at ptr, wherever it is (pool->lock
 * held): the hash, the caller's cache, or (with steal) another thread's,
 * which is then stolen. */
static block *lookup_locked(rill__pool *p, const void *ptr, bool steal) {
    block *k = hash_find(p, (uintptr_t)ptr);
    if (k != NULL || atomic_load_explicit(&p->tcaches, memory_order_relaxed) == NULL)
        return k;
    tcache *mine = tc_mine(p);
    block **q = mine != NULL ? tc_live_find(mine, (uintptr_t)ptr, false) : NULL;
    if (q != NULL) {
        k = *q;
        *q = NULL;
        live_add(mine, -1);
        atomic_store_explicit(&k->tc_state, TC_NONE, memory_order_relaxed);
        hash_insert(p, k);
        return k;
    }
    if (!steal)
        return NULL;
    /* relaxed reads of num_live: a stale zero only means a missed steal of
     * a block whose owner has not yet published it to another thread. */
    bool stole = false;
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed); c != NULL;
         c = c->next) {
        if (c != mine && live_count(c) != 0) {
            tc_steal(p, c);
            stole = true;
        }
    }
    return stole ? hash_find(p, (uintptr_t)ptr) : NULL;
}

/* Rechecks the peak after a lock-free allocation raised allocated bytes. */
static void tc_check_peak(rill__pool *p) {
    size_t a = atomic_load_explicit(&p->allocated_mirror, memory_order_relaxed) -
               tc_cached_total(p);
    if (a <= atomic_load_explicit(&p->peak_mirror, memory_order_relaxed))
        return;
    rill__spinlock_lock(&p->lock);
    note_peak_locked(p);
    rill__spinlock_unlock(&p->lock);
}

/* Would take() hand out k whole for size bytes (no remainder to split)? */
static bool whole_fit(const block *k, size_t size) {
    if (k->size < size)
        return false;
    size_t rest = k->size - size;
    return k->seg->small ? rest < MIN_BLOCK : rest <= SMALL_REQUEST;
}

/* The lock-free allocation: a cached block freed on s that the locked
 * path would hand out whole for size bytes. NULL when there is none (or no room to lease it). */
static void *tc_alloc(rill__pool *p, rill_stream *s, size_t size, size_t bytes) {
    tcache *c = tc_mine(p);
    unsigned i = bin_of(size);
    if (c == NULL || i >= TC_BINS || !tc_enter(c))
        return NULL;
    block **prev = &c->free_head[i];
    block *k = *prev;
    while (k != NULL && (k->stream != s || !whole_fit(k, size))) {
        prev = &k->bin_next;
        k = *prev;
    }
    block **slot = NULL;
    if (k != NULL) {
        size_t h = tc_slot(k->ptr);
        for (size_t j = 0; j < TC_PROBE && slot == NULL; j++)
            if (c->live[(h + j) & (TC_LIVE - 1)] == NULL)
                slot = &c->live[(h + j) & (TC_LIVE - 1)];
    }
    if (slot == NULL) {
        tc_leave(c);
        return NULL;
    }
    *prev = k->bin_next;
    *slot = k;
    live_add(c, 1);
    k->requested = bytes;
    atomic_store_explicit(&k->tc_state, TC_LIVE_BLOCK, memory_order_relaxed);
    tc_add_cached(c, k->size, -1);
    tc_count(&c->allocations);
    tc_leave(c);
    tc_check_peak(p);
    return (void *)k->ptr;
}

/* The lock-free free of a block this thread leased, freed on by (NULL: its
 * own stream). False when the pool must see it (the locked path). */
static bool tc_free(rill__pool *p, const void *ptr, rill_stream *by) {
    tcache *c = tc_mine(p);
    if (c == NULL || live_count(c) == 0 || !tc_enter(c))
        return false;
    block **q = tc_live_find(c, (uintptr_t)ptr, true);
    if (q == NULL || !tc_keepable(c, *q, by)) {
        tc_leave(c);
        return false;
    }
    block *k = *q;
    *q = NULL;
    live_add(c, -1);
    tc_push_cached(c, k);
    tc_count(&c->frees);
    tc_leave(c);
    return true;
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
static block *grow(rill_device *dev, rill__pool *p, int small, size_t size) {
    size_t seg_size = segment_size(p, small, size);
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
    p->kind_reserved[small] += seg_size;
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
    p->kind_reserved[g->small] -= g->size;
    rill__free(g);
}

/* Merges free block src into dst, the block just before it, points and
 * all. */
static void absorb(rill__pool *p, block *dst, block *src) {
    RILL_ASSERT(dst->next == src && dst->ptr + dst->size == src->ptr);
    for (size_t i = 0; i < src->num_points; i++)
        points_add(p, dst, src->points[i].stream, src->points[i].seq);
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
        points_prune(p, k);
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
static void points_copy(rill__pool *p, block *r, const block *k) {
    r->conservative = k->conservative;
    for (size_t i = 0; i < k->num_points; i++)
        points_add(p, r, k->points[i].stream, k->points[i].seq);
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
            points_copy(p, r, k);
            bin_insert(b, r);
        }
    }
    points_clear(p, k);
    k->conservative = 0;
    k->allocated = 1;
    k->requested = requested;
    k->stream = s; /* held through pool->owners (see rill__pool_alloc) */
    hash_insert(p, k);
    set_allocated(p, p->stats.allocated_bytes + k->size);
    note_peak_locked(p);
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
            points_prune(p, k);
            if (conservative)
                k->conservative = 0;
        }
    }
}

/* The statistics with the thread caches' share (pool->lock held). */
static void stats_locked(rill__pool *p, rill_mem_stats *out) {
    *out = p->stats;
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed); c != NULL;
         c = c->next) {
        uint64_t n = atomic_load_explicit(&c->allocations, memory_order_relaxed);
        out->allocations += n;
        out->cache_hits += n;
        out->frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
        out->allocated_bytes -= atomic_load_explicit(&c->cached_bytes, memory_order_relaxed);
    }
}

static rill_status out_of_memory(rill_device *dev, rill__pool *p, size_t bytes, const char *fn) {
    rill_mem_stats st;
    stats_locked(p, &st);
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

/* The points of k that s is not yet ordered after (at most max), each
 * with a reference, into waits; false (nothing held) when there are more. */
static bool collect_waits(const block *k, rill_stream *s, point *waits, size_t max,
                          size_t *num_waits) {
    size_t n = 0;
    for (size_t i = 0; i < k->num_points; i++) {
        point pt = k->points[i];
        if (pt.stream == s || done_of(pt.stream) >= pt.seq ||
            rill__stream_ordered_after(s, pt.stream->id, pt.seq))
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

/* A free block of at least size bytes that s may take after internal
 * waits on at most MAX_WAITS points, each no more than max_backlog
 * commands ahead of its stream's completed work; of those examined, the
 * one whose slowest point is nearest completion. */
static block *find_pending(rill__pool *p, int small, size_t size, rill_stream *s,
                           uint64_t max_backlog) {
    bins *b = bins_for(p, small);
    block *best = NULL;
    uint64_t best_backlog = UINT64_MAX;
    int scanned = 0;
    for (unsigned i = next_bin(b, bin_of(size)); i < NUM_BINS; i = next_bin(b, i + 1)) {
        for (block *k = b->head[i]; k != NULL; k = k->bin_next) {
            if (k->size < size)
                continue;
            if (++scanned > SCAN_LIMIT)
                return best;
            if (k->conservative || k->num_points > MAX_WAITS)
                continue;
            uint64_t backlog = 0;
            for (size_t j = 0; j < k->num_points; j++) {
                const point *pt = &k->points[j];
                uint64_t done = done_of(pt->stream);
                if (pt->stream != s && done < pt->seq && pt->seq - done > backlog)
                    backlog = pt->seq - done;
            }
            if (backlog <= max_backlog && backlog < best_backlog) {
                best = k;
                best_backlog = backlog;
            }
        }
    }
    return best;
}

/* How far a pending block's points may be ahead of their streams for s to
 * wait on them rather than grow: s's own unfinished commands plus
 * WAIT_SLACK. When s itself is that far behind, the wait costs it little;
 * when s is idle and the other stream has long work queued, a wait would
 * serialise the streams, and growing is better. */
static uint64_t wait_budget(rill_stream *s) {
    uint64_t sub = submitted_of(s), done = done_of(s);
    return (sub > done ? sub - done : 0) + WAIT_SLACK;
}

/* Allocates on s; with may_wait, a block that other streams' pending work
 * holds may be reused through internal waits before the pool grows. */
static rill_status pool_alloc(rill_stream *s, size_t bytes, bool may_wait, const char *fn,
                              void **out) {
    rill_device *dev = s->dev;
    rill__pool *p = pool_of(dev);
    if (bytes > SIZE_MAX / 2)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: %zu bytes is more than any device can hold; check the size", fn,
                          bytes);
    size_t size = round_request(bytes);
    void *cached = tc_alloc(p, s, size, bytes);
    if (cached != NULL) {
        *out = cached;
        return RILL_OK;
    }
    int small = size <= SMALL_REQUEST;
    point waits[MAX_WAITS];
    size_t num_waits = 0;
    rill__spinlock_lock(&p->lock);
    block *k = find_free(p, small, size, s, 1);
    tcache *mine = tc_mine(p);
    if (k == NULL && mine != NULL &&
        atomic_load_explicit(&mine->cached_bytes, memory_order_relaxed) >= size) {
        tc_drain_locked(p, mine); /* its blocks may merge into what is needed */
        k = find_free(p, small, size, s, 1);
    }
    if (k == NULL && p->unmerged != 0) {
        coalesce_all(p);
        k = find_free(p, small, size, s, 1);
    }
    if (k == NULL && may_wait) {
        /* Reuse a pending block through internal waits rather than grow,
         * as CUDA's pools do, when its points are few and near. */
        k = find_pending(p, small, size, s, wait_budget(s));
        if (k != NULL && !collect_waits(k, s, waits, MAX_WAITS, &num_waits))
            k = NULL;
        if (k != NULL)
            p->pending_reuses++;
    }
    if (k != NULL) {
        p->stats.cache_hits++;
    } else if ((k = grow(dev, p, small, size)) == NULL) {
        /* Cannot grow: reuse a block that s must first wait for (an
         * internal stream wait), if one has few enough points. */
        k = find_pending(p, small, size, s, UINT64_MAX);
        if (k != NULL && !collect_waits(k, s, waits, MAX_WAITS, &num_waits))
            k = NULL;
        if (k != NULL) {
            p->stats.cache_hits++;
        } else if (!rill__thread_is_worker()) {
            /* Last resort: take back the thread caches, wait on the host
             * for pending frees, return the cache to the system, and grow. */
            tc_steal_all(p);
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
        if (rill__stream_wait_point(s, waits[i].stream, waits[i].seq, fn) != RILL_OK)
            rill__stream_host_wait(waits[i].stream, waits[i].seq, 1);
        rill__stream_unref(waits[i].stream);
    }
    *out = ptr;
    return RILL_OK;
}

rill_status rill__pool_alloc(rill_stream *s, size_t bytes, const char *fn, void **out) {
    return pool_alloc(s, bytes, false, fn, out);
}

rill_status rill__pool_alloc_async(rill_stream *s, size_t bytes, const char *fn, void **out) {
    return pool_alloc(s, bytes, true, fn, out);
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
        block *k = lookup_locked(p, ptr, true);
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
        tc_steal_all(p); /* its cached blocks are free, not allocated */
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

/* The lock-free free, in the pool of f's device or (f NULL) the one the
 * calling thread's cache belongs to. */
static bool try_tc_free(const void *ptr, rill_stream *f) {
    if (f != NULL)
        return tc_free(pool_of(f->dev), ptr, f);
    if (tls_cache == NULL)
        return false;
    rill__runtime *rt;
    rill__runtime_get(&rt);
    for (int i = 0; i < rt->num_devices; i++)
        if (tc_free(pool_of(rt->devices[i]), ptr, NULL))
            return true;
    return false;
}

rill_status rill__pool_free(void *ptr, rill_stream *f, const char *fn) {
    if (try_tc_free(ptr, f))
        return RILL_OK;
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
    points_prune(p, k);
    /* A block freed on its own stream, with no other stream's point, goes
     * to the calling thread's cache: that stream may take it again at
     * once, without the lock. */
    tcache *c = tc_mine(p);
    if (c == NULL && tls_pool_id != p->id)
        c = tc_register(p);
    if (c != NULL && c->cooldown != 0) {
        c->cooldown--;
    } else if (c != NULL && tc_keepable(c, k, f)) {
        p->stats.frees++;
        tc_push_cached(c, k);
        rill__spinlock_unlock(&p->lock);
        return RILL_OK;
    }
    /* The frees' own points, unless already complete (the common case of
     * a stream that has caught up: no reference taken). */
    uint64_t a_seq = submitted_of(a);
    if (done_of(a) < a_seq)
        points_add(p, k, a, a_seq);
    if (by != a) {
        uint64_t by_seq = submitted_of(by);
        if (done_of(by) < by_seq)
            points_add(p, k, by, by_seq);
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
    set_allocated(p, p->stats.allocated_bytes - k->size);
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
    /* Most uses name the start of a block of the stream's own device: the
     * hash answers without the registry's lock. */
    rill__pool *p = pool_of(s->dev);
    rill__spinlock_lock(&p->lock);
    block *k = lookup_locked(p, ptr, false);
    if (k == NULL) {
        rill__spinlock_unlock(&p->lock);
        rill_device *dev = NULL;
        segment *g = segment_of(ptr, &dev);
        if (g == NULL)
            return;
        p = pool_of(dev);
        rill__spinlock_lock(&p->lock);
        k = block_at(g, (uintptr_t)ptr);
    }
    if (k != NULL && k->allocated && k->stream != s &&
        atomic_load_explicit(&k->tc_state, memory_order_relaxed) != TC_CACHED)
        points_add(p, k, s, seq);
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
        k = lookup_locked(p, ptr, true);
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
        points_add(p, k, s, UNTIL_FREE);
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
    bool found = k != NULL && k->allocated &&
                 atomic_load_explicit(&k->tc_state, memory_order_relaxed) != TC_CACHED &&
                 (uintptr_t)ptr < k->ptr + k->requested;
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
    block *k = lookup_locked(p, ptr, true);
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
    stats_locked(p, out);
    rill__spinlock_unlock(&p->lock);
}

void rill__pool_empty_cache(rill_device *dev) {
    rill__pool *p = pool_of(dev);
    rill__spinlock_lock(&p->lock);
    tc_steal_all(p);
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
    p->id = atomic_fetch_add(&next_pool_id, 1);
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
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed), *next; c != NULL;
         c = next) {
        next = c->next;
        rill__free(c);
    }
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
    tc_steal_all(p); /* cached blocks show as free */
    rill_mem_stats st;
    stats_locked(p, &st);
    size_t limit = p->limit;
    uint64_t pending_reuses = p->pending_reuses;
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
            points_prune(p, k);
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
    fprintf(out, "  reuses of pending blocks through internal stream waits (instead of growing) "
                 "%" PRIu64 "\n",
            pending_reuses);
    fprintf(out, "  (small: requests up to 1 MiB in 2 MiB segments; large: the rest; pending: "
                 "free blocks another stream's work still holds)\n");
}
