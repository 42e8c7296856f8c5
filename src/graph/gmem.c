/* SPDX-License-Identifier: MIT */
/* Memory private to a graph (a gpool): rill_malloc_async on a capturing
 * stream allocates for real, at capture time, from the device's pool on a
 * library-owned stream (rill:graph-memory), so the address holds for every
 * replay; launches wait for that stream's point before they start. A block
 * freed in the capture remembers its stream's tail and every node that used
 * it, and a later allocation of the capture reuses it when all of those are
 * ancestors of the allocating stream's tail. The blocks go back to the
 * device's pool, as frees behind the last launch, when the graph and its
 * last exec are gone. Guarded by rill__caps_lock (capture_internal.h),
 * which also guards rill__gmem_index, the blocks of every live pool by
 * address, so that a free outside the capture finds graph memory in O(1). */
#include <string.h>

#include "graph/capture_internal.h"
#include "mem/pool.h"
#include "util/alloc.h"
#include "util/status.h"

void rill__gpool_ref(rill__gpool *p) {
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void rill__gpool_unref(rill__gpool *p, rill__stream *last_stream, uint64_t last_seq) {
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    rill__spinlock_lock(&rill__caps_lock);
    for (size_t i = 0; i < p->num_blocks; i++)
        rill__ptrmap_remove(&rill__gmem_index, p->blocks[i].ptr);
    if (atomic_fetch_sub(&rill__gpools_live, 1) == 1)
        rill__ptrmap_free(&rill__gmem_index); /* empty: no table kept */
    rill__spinlock_unlock(&rill__caps_lock);
    for (size_t i = 0; i < p->num_blocks; i++) {
        gblock *b = &p->blocks[i];
        /* The last launch used every block: the pool keeps them until it
         * completes. */
        if (last_stream != NULL)
            rill__pool_note_use(last_stream, last_seq, b->ptr, b->bytes);
        rill__pool_free(b->ptr, NULL, "rill_graph_exec_destroy");
        rill__free(b->deps);
    }
    rill__free(p->blocks);
    rill__free(p);
}

/* A graph's hold on its pool (graph.c frees through it). */
static void release_for_graph(rill__gpool *p) {
    rill__gpool_unref(p, NULL, 0);
}

void rill__gpool_ready_point(rill__gpool *p, rill__stream **s, uint64_t *seq) {
    *seq = atomic_load_explicit(&p->ready_seq, memory_order_acquire);
    *s = NULL;
    if (*seq > atomic_load_explicit(&p->stream->q.done_seq, memory_order_acquire)) {
        rill__stream_ref(p->stream);
        *s = p->stream;
    }
}

gblock *rill__gpool_find(rill__gpool *p, const void *ptr) {
    for (size_t i = 0; i < p->num_blocks; i++)
        if (p->blocks[i].ptr == ptr)
            return &p->blocks[i];
    return NULL;
}

/* g's memory pool, made at the graph's first allocation on s (caps lock
 * held); NULL when out of memory. */
static rill__gpool *pool_of_locked(rill__graph *g, rill__stream *s) {
    if (g->pool != NULL)
        return g->pool;
    rill__gpool *p = rill__calloc(1, sizeof *p);
    rill__stream *ps = NULL;
    if (p == NULL || rill__stream_tagged(s->q.dev, "rill:graph-memory", 0, &ps) != RILL_OK) {
        rill__free(p);
        return NULL;
    }
    p->stream = ps;
    atomic_init(&p->refs, 1);
    atomic_fetch_add(&rill__gpools_live, 1);
    g->pool = p;
    g->pool_release = release_for_graph;
    return p;
}

/* The smallest freed block of p, of bytes or more, whose uses all come
 * before the tail of cs (caps lock held); NULL when there is none, or no
 * memory to prove one safe. */
static gblock *reusable_locked(rill__graph *g, cap_stream *cs, rill__gpool *p, size_t bytes) {
    unsigned char *mark = NULL;
    uint32_t *stack = NULL;
    gblock *best = NULL;
    for (size_t i = 0; i < p->num_blocks; i++) {
        gblock *b = &p->blocks[i];
        if (!b->freed || b->bytes < bytes || (best != NULL && best->bytes <= b->bytes))
            continue;
        if (mark == NULL) {
            mark = rill__calloc(g->num_nodes + 1, 1);
            stack = rill__malloc((g->num_nodes + 1) * sizeof *stack);
            if (mark == NULL || stack == NULL)
                break; /* no reuse without memory to prove it safe */
            rill__cap_mark_ancestors(g, cs->tail, cs->num_tail, mark, stack);
        }
        bool after = true;
        for (uint32_t j = 0; j < b->num_deps && after; j++)
            after = mark[b->deps[j]] != 0;
        if (after)
            best = b;
    }
    rill__free(mark);
    rill__free(stack);
    return best;
}

rill_status rill__cap_malloc(rill__stream *s, size_t bytes, void **out) {
    static const char fn[] = "rill_malloc_async";
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL)
        return rill__pool_alloc_async(s, bytes, fn, out); /* the capture ended meanwhile */
    rill_status st = RILL_OK;
    rill__graph *g = c->graph;
    if (c->invalidated) {
        st = rill__cap_fail_invalidated(c, fn);
        goto out;
    }
    rill__gpool *p = pool_of_locked(g, s);
    if (p == NULL) {
        st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    /* Reuse the smallest freed block whose uses all come before this point. */
    gblock *best = reusable_locked(g, rill__cap_stream_of(c, s), p, bytes);
    if (best != NULL) {
        best->freed = 0;
        best->num_deps = 0;
        *out = best->ptr;
        goto out;
    }
    /* Allocate without the lock: the pool may queue internal waits on the
     * pool's stream, which launches wait for (ready_seq, read after them).
     * It never waits on the host, as rill_malloc_async does not. The graph
     * holds the gpool, and the capture may end meanwhile. */
    uint64_t id = c->id;
    rill__gpool_ref(p);
    rill__spinlock_unlock(&rill__caps_lock);
    void *ptr;
    st = rill__pool_alloc_async(p->stream, bytes, fn, &ptr);
    rill__spinlock_lock(&rill__caps_lock);
    bool alive = rill__cap_find(id) == c;
    if (st == RILL_OK && (!alive ||
                          !rill__cap_grow((void **)&p->blocks, &p->cap_blocks, p->num_blocks + 1,
                                          sizeof *p->blocks) ||
                          !rill__ptrmap_put(&rill__gmem_index, ptr, 0))) {
        rill__pool_free(ptr, NULL, fn);
        st = alive ? rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn)
                   : rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                                "%s: the capture ended while the allocation was made", fn);
    }
    if (st != RILL_OK) {
        rill__spinlock_unlock(&rill__caps_lock);
        rill__gpool_unref(p, NULL, 0);
        rill__spinlock_lock(&rill__caps_lock);
        goto out;
    }
    atomic_fetch_sub(&p->refs, 1); /* the graph still holds it */
    gblock *b = &p->blocks[p->num_blocks++];
    memset(b, 0, sizeof *b);
    b->ptr = ptr;
    b->bytes = bytes;
    atomic_store_explicit(&p->ready_seq,
                          atomic_load_explicit(&p->stream->q.sub_seq, memory_order_acquire),
                          memory_order_release);
    *out = ptr;
out:
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

rill_status rill__cap_free(rill__stream *s, void *ptr, bool *handled) {
    static const char fn[] = "rill_free_async";
    *handled = false;
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL)
        return RILL_OK;
    rill_status st = RILL_OK;
    rill__graph *g = c->graph;
    gblock *b = g->pool != NULL ? rill__gpool_find(g->pool, ptr) : NULL;
    if (b == NULL) {
        /* Memory from outside the capture: an unsafe free (checked by the
         * caller); it runs at once when allowed. */
        rill__spinlock_unlock(&rill__caps_lock);
        return RILL_OK;
    }
    *handled = true;
    if (c->invalidated) {
        st = rill__cap_fail_invalidated(c, fn);
        goto out;
    }
    if (b->freed) {
        st = rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %p was already freed in this capture", fn,
                        ptr);
        goto out;
    }
    cap_stream *cs = rill__cap_stream_of(c, s);
    size_t n = cs->num_tail;
    for (size_t i = 0; i < c->num_uses; i++)
        if (c->uses[i].lo < (uintptr_t)ptr + b->bytes && (uintptr_t)ptr < c->uses[i].hi)
            n++;
    uint32_t *deps = rill__malloc((n > 0 ? n : 1) * sizeof *deps);
    if (deps == NULL) {
        st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    n = 0;
    for (uint32_t i = 0; i < cs->num_tail; i++)
        deps[n++] = cs->tail[i];
    for (size_t i = 0; i < c->num_uses; i++)
        if (c->uses[i].lo < (uintptr_t)ptr + b->bytes && (uintptr_t)ptr < c->uses[i].hi)
            deps[n++] = c->uses[i].node;
    rill__free(b->deps);
    b->deps = deps;
    b->num_deps = (uint32_t)n;
    b->freed = 1;
out:
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}
