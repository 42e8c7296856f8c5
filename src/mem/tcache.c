/* SPDX-License-Identifier: MIT */
/* The per-thread caches in front of the pool: a same-stream
 * malloc_async/free_async pair without pool->lock, from blocks leased from the
 * pool (TC_CACHED free, TC_LIVE handed out), whose uses by other streams go to
 * the block's use slot, also without the lock (docs/design.md, "Memory").
 * Only the owning thread touches a cache, except a thread holding pool->lock
 * that takes it back ("steal"); the two meet in a Dekker pair with a light
 * barrier on the owner's side and a heavy one on the stealer's.
 * Invariant: the pool counts leased blocks as allocated, so the true
 * allocated bytes = stats.allocated_bytes - the sum of every cache's
 * cached_bytes. */
#include "mem/tcache.h"

#include <stdalign.h>

#include "mem/block.h"
#include "util/alloc.h"
#include "util/assert.h"

#define TC_BINS        64                 /* blocks up to rill__bin_of(TC_MAX_BLOCK) */
#define TC_LIVE        64                 /* leased allocated blocks, by address */
#define TC_PROBE       4                  /* slots the owner probes; others scan all */
#define TC_MAX_BLOCK   ((size_t)4 << 20)  /* larger blocks go back to the pool */
#define TC_MAX_BYTES   ((size_t)64 << 20) /* bound on a cache's free bytes, see below */
#define TC_MAX_CACHES  64                 /* threads beyond these use the lock */
#define TC_COOLDOWN    1024
#define TC_HELD        4 /* streams that use slots may name */
#define TC_WAIT_PROBES 2 /* blocks waiting for a use examined per allocation */

/* A stream that the use slots of a cache's blocks may name. */
typedef struct tc_held {
    rill__stream *stream; /* held through one count in pool->owners while listed */
    uint64_t done_seen;   /* the latest reading of its done_seq (see use_over_for) */
    unsigned uses;        /* use slots of this cache's blocks that name it */
} tc_held;

typedef struct tcache {
    /* atomic: the Dekker pair with a stealer */
    alignas(64) _Atomic int busy;
    _Atomic int steal;
    /* owner only (a stealer while the owner is out, see above) */
    block *free_head[TC_BINS]; /* free blocks with an empty use slot, linked by bin_next */
    block *live[TC_LIVE];
    _Atomic unsigned num_live; /* relaxed: others read it as a hint */
    unsigned cooldown;
    /* written by the owner (or a stealer), read by stats: relaxed */
    _Atomic size_t cached_bytes;
    _Atomic uint64_t allocations, frees; /* served here; every allocation is a cache hit */
    _Atomic uint64_t deferred_frees;     /* frees here of a block whose use was pending */
    /* owner only: the free blocks whose use slot holds a use, in the order
     * of their frees, linked by bin_next (see rill__tcache_alloc) */
    struct {
        block *head, *tail;
    } waiting[TC_BINS];
    /* owner only, or pool->lock held by the owner or a stealer: listed and
     * unlisted under the lock, read by the owner without it */
    tc_held held[TC_HELD];
    unsigned num_held;
    /* immutable after registration */
    struct tcache *next;
    /* guarded by pool->lock: &tls_token of the owning thread (a thread
     * that starts after its owner exited may adopt the cache) */
    const void *owner;
} tcache;

static _Thread_local uint64_t tls_pool_id; /* the pool tls_cache belongs to */
static _Thread_local tcache *tls_cache;    /* NULL: none for that pool */
static _Thread_local char tls_token;       /* its address names the thread */

/* The calling thread's cache for p, or NULL. */
static tcache *tc_mine(const rill__pool *p) {
    return tls_pool_id == p->id ? tls_cache : NULL;
}

static size_t tc_slot(uintptr_t ptr) {
    return (size_t)(((uint64_t)ptr >> 9) * UINT64_C(0x9e3779b97f4a7c15) >> 58) & (TC_LIVE - 1);
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

/* Raises the peak of allocated bytes to the current true figure
 * (pool->lock held). */
void rill__tcache_note_peak_locked(rill__pool *p) {
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
    atomic_store_explicit(&c->cached_bytes, sign > 0 ? v + bytes : v - bytes, memory_order_relaxed);
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
static bool tc_keepable(const tcache *c, const block *k, const rill__stream *by,
                        size_t max_points) {
    return c->cooldown == 0 && (by == NULL || by == k->stream) && k->num_points <= max_points &&
           !k->conservative && !k->own_ref && k->size <= TC_MAX_BLOCK &&
           atomic_load_explicit(&c->cached_bytes, memory_order_relaxed) + k->size <= TC_MAX_BYTES;
}

/* Caches free block k, freed now on its own stream: on the waiting list,
 * last, when its use slot holds a use. The stream's submitted number now
 * is where its uses of k end: work it is given later is no use of k, and
 * must not hold k once the cache gives it back (release_cached). */
static void tc_push_cached(tcache *c, block *k) {
    k->free_seq = rill__submitted_of(k->stream);
    unsigned i = rill__bin_of(k->size);
    if (k->use_stream == NULL) {
        k->bin_next = c->free_head[i];
        c->free_head[i] = k;
    } else {
        k->bin_next = NULL;
        if (c->waiting[i].head == NULL)
            c->waiting[i].head = k;
        else
            c->waiting[i].tail->bin_next = k;
        c->waiting[i].tail = k;
    }
    atomic_store_explicit(&k->tc_state, TC_CACHED, memory_order_relaxed);
    tc_add_cached(c, k->size, 1);
}

static tc_held *held_find(tcache *c, const rill__stream *s) {
    for (unsigned i = 0; i < c->num_held; i++)
        if (c->held[i].stream == s)
            return &c->held[i];
    return NULL;
}

/* Lists s among the streams that c's use slots may name (pool->lock held,
 * c the caller's), unlisting those no slot names when the list is full.
 * NULL when there is no room. */
static tc_held *hold_locked(rill__pool *p, tcache *c, rill__stream *s) {
    tc_held *h = held_find(c, s);
    if (h != NULL)
        return h;
    if (c->num_held == TC_HELD) {
        unsigned kept = 0;
        for (unsigned i = 0; i < c->num_held; i++) {
            if (c->held[i].uses == 0)
                rill__owners_release(p, c->held[i].stream);
            else
                c->held[kept++] = c->held[i];
        }
        c->num_held = kept;
    }
    if (c->num_held == TC_HELD || !rill__owners_hold(p, s))
        return NULL;
    h = &c->held[c->num_held++];
    *h = (tc_held){.stream = s};
    return h;
}

/* Unlists every stream (pool->lock held; c drained, so no slot names
 * one): a cache taken back stops keeping streams alive. */
static void unhold_all_locked(rill__pool *p, tcache *c) {
    for (unsigned i = 0; i < c->num_held; i++) {
        RILL_ASSERT(c->held[i].uses == 0);
        rill__owners_release(p, c->held[i].stream);
    }
    c->num_held = 0;
}

/* Empties k's use slot as k is handed out again or leaves cache c. */
static void clear_use(tcache *c, block *k) {
    tc_held *h = held_find(c, k->use_stream);
    RILL_ASSERT(h != NULL && h->uses > 0);
    h->uses--;
    k->use_stream = NULL;
}

/* Turns k's use slot into a point as k leaves cache c (pool->lock held; c
 * the caller's or stolen). */
static void fold_use_locked(rill__pool *p, tcache *c, block *k) {
    if (k->use_stream == NULL)
        return;
    if (rill__done_of(k->use_stream) < k->use_seq)
        rill__points_add(p, k, k->use_stream, k->use_seq);
    clear_use(c, k);
}

/* Returns a cached block of c to the pool as a free block (pool->lock
 * held). */
static void release_cached(rill__pool *p, tcache *c, block *k) {
    RILL_ASSERT(k->allocated && rill__block_tiles(k));
    atomic_store_explicit(&k->tc_state, TC_NONE, memory_order_relaxed);
    fold_use_locked(p, c, k);
    /* The cache relied on stream order; other streams need the point: the
     * free's, not the stream's work since, which a synchronize after the
     * free did not wait for. */
    rill__stream *a = k->stream;
    if (rill__done_of(a) < k->free_seq)
        rill__points_add(p, k, a, k->free_seq);
    rill__owners_release(p, a);
    k->allocated = 0;
    k->stream = NULL;
    rill__set_allocated(p, p->stats.allocated_bytes - k->size);
    p->unmerged++;
    rill__bin_insert(rill__bins_for(p, k->seg->small), k);
}

/* Moves everything of c back to the pool: live blocks into the hash, free
 * ones into the bins (pool->lock held; c is the caller's or stolen). */
static void tc_drain_locked(rill__pool *p, tcache *c) {
    for (unsigned i = 0; i < TC_BINS; i++) {
        while (c->free_head[i] != NULL) {
            block *k = c->free_head[i];
            c->free_head[i] = k->bin_next;
            tc_add_cached(c, k->size, -1);
            release_cached(p, c, k);
        }
        while (c->waiting[i].head != NULL) {
            block *k = c->waiting[i].head;
            c->waiting[i].head = k->bin_next;
            tc_add_cached(c, k->size, -1);
            release_cached(p, c, k);
        }
        c->waiting[i].tail = NULL;
    }
    for (unsigned i = 0; i < TC_LIVE && live_count(c) != 0; i++) {
        block *k = c->live[i];
        if (k == NULL)
            continue;
        c->live[i] = NULL;
        live_add(c, -1);
        atomic_store_explicit(&k->tc_state, TC_NONE, memory_order_relaxed);
        fold_use_locked(p, c, k);
        rill__hash_insert(p, k);
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
    unhold_all_locked(p, c);
    c->cooldown = TC_COOLDOWN;
    /* release: pairs with the acquire load of steal in tc_enter. */
    atomic_store_explicit(&c->steal, 0, memory_order_release);
}

/* Takes every cache's blocks back to the pool (pool->lock held). */
void rill__tcache_steal_all(rill__pool *p) {
    tcache *mine = tc_mine(p);
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed); c != NULL;
         c = c->next) {
        if (c == mine) {
            tc_drain_locked(p, c);
            unhold_all_locked(p, c);
        } else if (live_count(c) != 0 ||
                   atomic_load_explicit(&c->cached_bytes, memory_order_relaxed))
            tc_steal(p, c);
    }
}

/* The allocated block that starts at ptr, wherever it is (pool->lock
 * held): the hash, the caller's cache, or (with steal) another thread's,
 * which is then stolen. */
block *rill__tcache_lookup_locked(rill__pool *p, const void *ptr, bool steal) {
    block *k = rill__hash_find(p, (uintptr_t)ptr);
    if (k != NULL || atomic_load_explicit(&p->tcaches, memory_order_relaxed) == NULL)
        return k;
    tcache *mine = tc_mine(p);
    block **q = mine != NULL ? tc_live_find(mine, (uintptr_t)ptr, false) : NULL;
    if (q != NULL) {
        k = *q;
        *q = NULL;
        live_add(mine, -1);
        atomic_store_explicit(&k->tc_state, TC_NONE, memory_order_relaxed);
        fold_use_locked(p, mine, k);
        rill__hash_insert(p, k);
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
    return stole ? rill__hash_find(p, (uintptr_t)ptr) : NULL;
}

/* Rechecks the peak after a lock-free allocation raised allocated bytes. */
static void tc_check_peak(rill__pool *p) {
    size_t a =
        atomic_load_explicit(&p->allocated_mirror, memory_order_relaxed) - tc_cached_total(p);
    if (a <= atomic_load_explicit(&p->peak_mirror, memory_order_relaxed))
        return;
    rill__spinlock_lock(&p->lock);
    rill__tcache_note_peak_locked(p);
    rill__spinlock_unlock(&p->lock);
}

/* Would take() hand out k whole for size bytes (no remainder to split)? */
static bool whole_fit(const block *k, size_t size) {
    if (k->size < size)
        return false;
    return !rill__splits(k->seg->small, k->size - size);
}

/* Is the use in k's slot over for s (k's own stream): none, complete, or
 * s ordered after it? The cache's last reading of the using stream's
 * done_seq and s's clock (written by the thread that makes s wait, most
 * often this one) come first: a worker writes done_seq at every
 * completion, and a fresh read of it costs about a cross-core hop. */
static bool use_over_for(tcache *c, const block *k, rill__stream *s) {
    tc_held *h = held_find(c, k->use_stream);
    if (k->use_seq <= h->done_seen ||
        rill__stream_ordered_after(s, k->use_stream->q.id, k->use_seq))
        return true;
    h->done_seen = rill__done_of(k->use_stream);
    return k->use_seq <= h->done_seen;
}

/* Finds in c's waiting list i, among its first TC_WAIT_PROBES blocks for
 * s and size, the oldest whose use is over for s; NULL when none is. The
 * uses of one stream complete in order: when the oldest block still
 * waits, the later ones most often do too. *before: the block linked to
 * it, or NULL. */
static block *find_waiting(tcache *c, unsigned i, rill__stream *s, size_t size, block **before) {
    *before = NULL;
    int probes = 0;
    for (block *k = c->waiting[i].head; k != NULL; *before = k, k = k->bin_next) {
        if (k->stream != s || !whole_fit(k, size))
            continue;
        if (use_over_for(c, k, s))
            return k;
        if (++probes == TC_WAIT_PROBES)
            break;
    }
    return NULL;
}

/* The lock-free allocation: a cached block freed on s, whose use (if any)
 * is over for s, that the locked path would hand out whole for size bytes.
 * NULL when there is none (or no room to lease it). */
void *rill__tcache_alloc(rill__pool *p, rill__stream *s, size_t size, size_t bytes) {
    tcache *c = tc_mine(p);
    unsigned i = rill__bin_of(size);
    if (c == NULL || i >= TC_BINS || !tc_enter(c))
        return NULL;
    block **prev = &c->free_head[i];
    block *k = *prev, *before = NULL;
    while (k != NULL && (k->stream != s || !whole_fit(k, size))) {
        prev = &k->bin_next;
        k = *prev;
    }
    bool waited = k == NULL && (k = find_waiting(c, i, s, size, &before)) != NULL;
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
    if (!waited) {
        *prev = k->bin_next;
    } else {
        if (before != NULL)
            before->bin_next = k->bin_next;
        else
            c->waiting[i].head = k->bin_next;
        if (c->waiting[i].tail == k)
            c->waiting[i].tail = before;
        clear_use(c, k);
    }
    /* Not rill__block_tiles: without the pool's lock, k's neighbours may be
     * merging meanwhile; release_cached checks the tiling under it. */
    RILL_ASSERT(k->allocated);
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

/* Counts a free whose use is not yet known complete (the cache's reading,
 * not a fresh one: see use_over_for) as a deferred one. */
static void count_deferred(tcache *c, const block *k) {
    if (k->use_seq > held_find(c, k->use_stream)->done_seen)
        tc_count(&c->deferred_frees);
}

/* The lock-free free of a block this thread leased, freed on by (NULL: its
 * own stream). False when the pool must see it (the locked path). */
static bool tc_free(rill__pool *p, const void *ptr, rill__stream *by) {
    tcache *c = tc_mine(p);
    if (c == NULL || live_count(c) == 0 || !tc_enter(c))
        return false;
    block **q = tc_live_find(c, (uintptr_t)ptr, true);
    if (q == NULL || !tc_keepable(c, *q, by, 0)) {
        tc_leave(c);
        return false;
    }
    block *k = *q;
    *q = NULL;
    live_add(c, -1);
    if (k->use_stream != NULL)
        count_deferred(c, k);
    tc_push_cached(c, k);
    tc_count(&c->frees);
    tc_leave(c);
    return true;
}

/* Notes in k's use slot that s (not k's stream) uses k, live in cache c
 * whose owner is in its lock-free section; false when the slot names
 * another stream or s is not held. */
static bool note_in_slot(tcache *c, block *k, rill__stream *s, uint64_t seq) {
    tc_held *h = held_find(c, s);
    if (h == NULL)
        return false;
    if (k->use_stream == NULL) {
        k->use_stream = s;
        k->use_seq = seq;
        h->uses++;
    } else if (k->use_stream != s) {
        return false;
    } else if (seq > k->use_seq) {
        k->use_seq = seq;
    }
    return true;
}

bool rill__tcache_find_live(rill__pool *p, const void *ptr, size_t *bytes_to_end) {
    tcache *c = tc_mine(p);
    if (c == NULL || live_count(c) == 0 || !tc_enter(c))
        return false;
    block **q = tc_live_find(c, (uintptr_t)ptr, true);
    /* A live entry is allocated and handed out (TC_LIVE_BLOCK): what
     * rill__pool_find asks of a block. */
    bool found = q != NULL && (*q)->requested > 0;
    if (found)
        *bytes_to_end = (*q)->requested;
    tc_leave(c);
    return found;
}

/* The lock-free note of a use: the command seq of s uses the block that
 * starts at ptr, leased by the calling thread's cache of p. False when the
 * pool must note it (the locked path). */
bool rill__tcache_note_use(rill__pool *p, rill__stream *s, uint64_t seq, const void *ptr) {
    tcache *c = tc_mine(p);
    if (c == NULL || live_count(c) == 0)
        return false;
    for (int tries = 0; tries < 2; tries++) {
        if (!tc_enter(c))
            return false;
        block **q = tc_live_find(c, (uintptr_t)ptr, true);
        bool noted = q != NULL && ((*q)->stream == s || note_in_slot(c, *q, s, seq));
        bool first_use = q != NULL && !noted && held_find(c, s) == NULL;
        tc_leave(c);
        if (noted || !first_use)
            return noted;
        /* The first use by s from this thread: hold s, once, under the
         * lock (meanwhile a stealer may take the block: look again). */
        rill__spinlock_lock(&p->lock);
        bool held = hold_locked(p, c, s) != NULL;
        rill__spinlock_unlock(&p->lock);
        if (!held)
            return false;
    }
    return false;
}

/* The lock-free free, in the pool of f's device or (f NULL) the one the
 * calling thread's cache belongs to. */
bool rill__tcache_free(const void *ptr, rill__stream *f) {
    if (f != NULL)
        return tc_free(rill__pool_of(f->q.dev), ptr, f);
    if (tls_cache == NULL)
        return false;
    rill__runtime *rt;
    rill__runtime_get(&rt);
    for (int i = 0; i < rt->num_devices; i++)
        if (tc_free(rill__pool_of(rt->devices[i]), ptr, NULL))
            return true;
    return false;
}

/* Offers block k, just freed on f (NULL: its own stream) with its points
 * pruned, to the calling thread's cache: true when the cache keeps it
 * (pool->lock held; the caller counts the free). */
bool rill__tcache_keep_locked(rill__pool *p, block *k, rill__stream *f) {
    tcache *c = tc_mine(p);
    if (c == NULL && tls_pool_id != p->id)
        c = tc_register(p);
    if (c == NULL)
        return false;
    if (c->cooldown != 0) {
        c->cooldown--;
        return false;
    }
    RILL_ASSERT(k->use_stream == NULL); /* folded when it left the cache */
    /* One other stream's pending use may move into the use slot: the
     * block then comes back to the cache after a use noted by the locked
     * path (its allocation missed the cache), and later pairs on it take
     * no lock. */
    point *use = k->num_points == 1 ? &k->points[0] : NULL;
    if (use != NULL && use->stream != k->stream && !use->own_ref && tc_keepable(c, k, f, 1)) {
        tc_held *h = hold_locked(p, c, use->stream);
        if (h == NULL)
            return false;
        k->use_stream = use->stream;
        k->use_seq = use->seq;
        h->uses++;
        rill__points_clear(p, k);
        p->stats.deferred_frees++; /* the use is pending: pruned points are */
    }
    if (!tc_keepable(c, k, f, 0))
        return false;
    tc_push_cached(c, k);
    return true;
}

/* Moves the calling thread's cached blocks back to the pool when they
 * hold at least size bytes, so that they may merge into a block of that
 * size; true when it did (pool->lock held). */
bool rill__tcache_rotating_locked(const rill__pool *p, size_t size) {
    const tcache *mine = tc_mine(p);
    unsigned i = rill__bin_of(size);
    return mine != NULL && i < TC_BINS && mine->waiting[i].head != NULL;
}

bool rill__tcache_drain_mine_locked(rill__pool *p, size_t size) {
    tcache *mine = tc_mine(p);
    if (mine == NULL || atomic_load_explicit(&mine->cached_bytes, memory_order_relaxed) < size)
        return false;
    tc_drain_locked(p, mine);
    return true;
}

/* Adds the thread caches' share to statistics copied from p->stats:
 * their allocations (all cache hits) and frees, less the bytes they hold
 * free (pool->lock held). */
void rill__tcache_stats_locked(const rill__pool *p, rill_mem_stats *out) {
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed); c != NULL;
         c = c->next) {
        uint64_t n = atomic_load_explicit(&c->allocations, memory_order_relaxed);
        out->allocations += n;
        out->cache_hits += n;
        out->frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
        out->deferred_frees += atomic_load_explicit(&c->deferred_frees, memory_order_relaxed);
        out->allocated_bytes -= atomic_load_explicit(&c->cached_bytes, memory_order_relaxed);
    }
}

/* Frees the cache structures of p (pool destroy: their blocks went with
 * the segments). */
void rill__tcache_destroy_all(rill__pool *p) {
    for (tcache *c = atomic_load_explicit(&p->tcaches, memory_order_relaxed), *next; c != NULL;
         c = next) {
        next = c->next;
        rill__free(c);
    }
}
