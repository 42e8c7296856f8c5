/* SPDX-License-Identifier: MIT */
/* Stream capture: commands submitted to a capturing stream become nodes of
 * the capture's graph. Each stream in the capture keeps its tail, the set
 * of nodes its next command depends on; an event recorded in the capture
 * keeps the tail of its stream at that point, and a wait on it (or a
 * wait_stream) merges that set into the waiting stream's tail, pulling the
 * stream into the capture if it was not in one (a fork). At the end, every
 * node of a forked stream must be an ancestor of the origin's tail (it was
 * joined back).
 *
 * Capture is rare and never on a hot path: one mutex (caps_lock) guards
 * every capture, its streams' membership and the graph memory pools. The
 * hooks the rest of the library calls cost one relaxed load when no
 * capture is active (rill__captures_active).
 *
 * Memory allocated during a capture comes from a pool private to the
 * graph (a gpool): its blocks are allocated for real at capture time, on a
 * library-owned stream, so their addresses hold for every replay; a block
 * freed in the capture is reused by a later allocation of the capture when
 * every node that used it is an ancestor of the allocating point. The
 * blocks return to the device's pool when the graph and its last exec are
 * gone, after the exec's last launch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/event.h"
#include "core/status.h"
#include "graph/graph.h"
#include "mem/pool.h"
#include "util/ptrmap.h"

_Atomic int rill__captures_active;

/* A tail may hold a node more than once: merging appends, and the tail is
 * sorted and rid of duplicates when it has doubled since that was last
 * done (num_unique), so n merges cost O(n log n), not O(n^2). */
typedef struct cap_stream {
    rill__stream *s; /* ref */
    uint32_t *tail; /* owned */
    uint32_t num_tail, cap_tail;
    uint32_t num_unique; /* tail[0, num_unique) is sorted, without duplicates */
} cap_stream;

typedef struct cap_record {
    rill__event *e;  /* ref */
    uint32_t *nodes; /* owned: the recording stream's tail */
    uint32_t num_nodes;
} cap_record;

typedef struct cap_use {
    uintptr_t lo, hi;
    uint32_t node;
} cap_use;

struct rill__capture {
    uint64_t id;
    rill__capture *next, *prev;
    rill_capture_mode mode;
    uint64_t thread; /* rill__thread_id() of the beginning thread */
    rill__stream *origin;
    rill__graph *graph; /* owned until end_capture hands it out */
    int invalidated;
    char why[320];
    cap_stream *streams;
    size_t num_streams, cap_streams;
    rill__ptrmap stream_index; /* stream -> its index in streams */
    cap_record *records;
    size_t num_records, cap_records;
    rill__ptrmap record_index; /* event -> its index in records */
    cap_use *uses;
    size_t num_uses, cap_uses;
};

typedef struct gblock {
    void *ptr;
    size_t bytes;
    int freed;
    uint32_t *deps; /* owned: the nodes a reuse must come after */
    uint32_t num_deps;
} gblock;

struct rill__gpool {
    _Atomic int refs;
    rill__stream *stream;       /* the library-owned allocation stream */
    _Atomic uint64_t ready_seq; /* launches wait for stream to reach it */
    gblock *blocks;             /* guarded by caps_lock */
    size_t num_blocks, cap_blocks;
    rill__gpool *next, *prev; /* live pools, guarded by caps_lock */
};

/* A spin lock: it needs no initialisation, and it is held only for short
 * bookkeeping (never across a wait). */
static rill__spinlock caps_lock;
static rill__capture *caps;
static rill__gpool *gpools;
static uint64_t next_capture_id = 1;
static _Atomic int gpools_live;

static _Thread_local rill_capture_mode tls_mode = RILL_CAPTURE_GLOBAL;

static const char *mode_name(rill_capture_mode m) {
    switch (m) {
    case RILL_CAPTURE_GLOBAL:
        return "GLOBAL";
    case RILL_CAPTURE_THREAD_LOCAL:
        return "THREAD_LOCAL";
    default:
        return "RELAXED";
    }
}

/* ------------------------------------------------------------- helpers */

static bool grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return true;
    size_t n = *cap == 0 ? 8 : *cap * 2;
    while (n < need)
        n *= 2;
    void *p = rill__realloc(*arr, n * elem);
    if (p == NULL)
        return false;
    *arr = p;
    *cap = n;
    return true;
}

/* The maps may name an entry that a failed call never committed (an index
 * at or past the count, or one reused since): the entry itself decides. */
static cap_stream *find_stream(rill__capture *c, rill__stream *s) {
    uint32_t i;
    if (!rill__ptrmap_get(&c->stream_index, s, &i) || i >= c->num_streams || c->streams[i].s != s)
        return NULL;
    return &c->streams[i];
}

static cap_record *find_record(rill__capture *c, rill__event *e) {
    uint32_t i;
    if (!rill__ptrmap_get(&c->record_index, e, &i) || i >= c->num_records || c->records[i].e != e)
        return NULL;
    return &c->records[i];
}

static rill__capture *find_capture(uint64_t id) {
    for (rill__capture *c = caps; c != NULL; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Replaces or extends a tail with nodes (a union; see cap_stream). */
static bool tail_merge(cap_stream *cs, const uint32_t *nodes, uint32_t n, bool replace) {
    if (replace)
        cs->num_tail = cs->num_unique = 0;
    size_t cap = cs->cap_tail;
    if (!grow((void **)&cs->tail, &cap, (size_t)cs->num_tail + n, sizeof *cs->tail))
        return false;
    cs->cap_tail = (uint32_t)cap;
    if (n > 0)
        memcpy(cs->tail + cs->num_tail, nodes, n * sizeof *nodes);
    cs->num_tail += n;
    if (cs->num_tail > 2 * cs->num_unique + 8) {
        qsort(cs->tail, cs->num_tail, sizeof *cs->tail, cmp_u32);
        uint32_t k = 0;
        for (uint32_t i = 0; i < cs->num_tail; i++)
            if (k == 0 || cs->tail[k - 1] != cs->tail[i])
                cs->tail[k++] = cs->tail[i];
        cs->num_tail = cs->num_unique = k;
    }
    return true;
}

static cap_stream *add_stream(rill__capture *c, rill__stream *s, const uint32_t *tail, uint32_t n) {
    if (!grow((void **)&c->streams, &c->cap_streams, c->num_streams + 1, sizeof *c->streams))
        return NULL;
    cap_stream *cs = &c->streams[c->num_streams];
    memset(cs, 0, sizeof *cs);
    if (!tail_merge(cs, tail, n, true) ||
        !rill__ptrmap_put(&c->stream_index, s, (uint32_t)c->num_streams)) {
        rill__free(cs->tail);
        return NULL;
    }
    rill__stream_ref(s);
    cs->s = s;
    c->num_streams++;
    atomic_store_explicit(&s->capture, c, memory_order_release);
    return cs;
}

/* Marks the ancestors of nodes (and the nodes) in mark[]. */
static void mark_ancestors(rill__graph *g, const uint32_t *nodes, uint32_t n, unsigned char *mark,
                           uint32_t *stack) {
    uint32_t top = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!mark[nodes[i]]) {
            mark[nodes[i]] = 1;
            stack[top++] = nodes[i];
        }
    while (top > 0) {
        rill__graph_node *x = g->nodes[stack[--top]];
        for (uint32_t j = 0; j < x->num_deps; j++)
            if (!mark[x->deps[j]]) {
                mark[x->deps[j]] = 1;
                stack[top++] = x->deps[j];
            }
    }
}

static void stream_label(rill__stream *s, char *buf, size_t size) {
    rill__stream_name(s, buf, size);
}

static void invalidate(rill__capture *c, const char *fmt_fn, rill__stream *s) {
    if (c->invalidated)
        return;
    char name[80];
    c->invalidated = 1;
    if (s != NULL) {
        stream_label(s, name, sizeof name);
        snprintf(c->why, sizeof c->why, "%s was called on capturing stream %s", fmt_fn, name);
    } else {
        snprintf(c->why, sizeof c->why, "%s was called while the capture was active", fmt_fn);
    }
}

static rill_status fail_invalidated(rill__capture *c, const char *fn) {
    char name[80];
    stream_label(c->origin, name, sizeof name);
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: the capture begun on stream %s was invalidated (%s); end it with "
                      "rill_stream_end_capture, which returns RILL_ERROR_CAPTURE_INVALIDATED",
                      fn, name, c->why);
}

/* True when the calling thread may not make an unsafe call because of c. */
static bool forbids(const rill__capture *c) {
    if (c->mode == RILL_CAPTURE_GLOBAL && tls_mode == RILL_CAPTURE_GLOBAL)
        return true;
    return c->mode != RILL_CAPTURE_RELAXED && tls_mode != RILL_CAPTURE_RELAXED &&
           c->thread == rill__thread_id();
}

/* ------------------------------------------------------------ gpools */

void rill__gpool_ref(rill__gpool *p) {
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void rill__gpool_unref(rill__gpool *p, rill__stream *last_stream, uint64_t last_seq) {
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    rill__spinlock_lock(&caps_lock);
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        gpools = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    atomic_fetch_sub(&gpools_live, 1);
    rill__spinlock_unlock(&caps_lock);
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

void rill__gpool_ready_point(rill__gpool *p, rill__stream **s, uint64_t *seq) {
    *seq = atomic_load_explicit(&p->ready_seq, memory_order_acquire);
    *s = NULL;
    if (*seq > atomic_load_explicit(&p->stream->done_seq, memory_order_acquire)) {
        rill__stream_ref(p->stream);
        *s = p->stream;
    }
}

static gblock *gpool_find(rill__gpool *p, const void *ptr) {
    for (size_t i = 0; i < p->num_blocks; i++)
        if (p->blocks[i].ptr == ptr)
            return &p->blocks[i];
    return NULL;
}

/* ------------------------------------------------------------ capture */

static void detach(rill__capture *c) {
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        caps = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    for (size_t i = 0; i < c->num_streams; i++) {
        atomic_store_explicit(&c->streams[i].s->capture, NULL, memory_order_release);
        rill__stream_unref(c->streams[i].s);
        rill__free(c->streams[i].tail);
    }
    for (size_t i = 0; i < c->num_records; i++) {
        rill__event_unref(c->records[i].e);
        rill__free(c->records[i].nodes);
    }
    rill__free(c->streams);
    rill__free(c->records);
    rill__ptrmap_free(&c->stream_index);
    rill__ptrmap_free(&c->record_index);
    rill__free(c->uses);
    atomic_fetch_sub(&rill__captures_active, 1);
    rill__free(c);
}

/* Ends c without a graph (caps_lock held) and returns the graph, which
 * the caller destroys once it has dropped the lock. */
static rill__graph *discard(rill__capture *c) {
    rill__graph *g = c->graph;
    detach(c);
    return g;
}

static rill__graph *discard_unlock(rill__capture *c) {
    rill__graph *g = discard(c);
    rill__spinlock_unlock(&caps_lock);
    return g;
}

void rill__captures_shutdown(void) {
    for (;;) {
        rill__spinlock_lock(&caps_lock);
        rill__graph *g = caps != NULL ? discard(caps) : NULL;
        rill__spinlock_unlock(&caps_lock);
        if (g == NULL)
            return;
        rill__graph_destroy(g);
    }
}

void rill__captures_forget(void) {
    /* The captures and their pools belong to the parent's streams, which
     * this process no longer runs: drop them, without touching them. */
    atomic_store(&caps_lock.held, 0);
    caps = NULL;
    gpools = NULL;
    atomic_store(&gpools_live, 0);
    atomic_store(&rill__captures_active, 0);
}

/* The capture of s with caps_lock held, or NULL (unlocked then). */
static rill__capture *lock_capture_of(rill__stream *s) {
    rill__spinlock_lock(&caps_lock);
    rill__capture *c = atomic_load_explicit(&s->capture, memory_order_acquire);
    if (c == NULL)
        rill__spinlock_unlock(&caps_lock);
    return c;
}

void rill__capture_stream_destroyed(rill__stream *s) {
    /* No fast path on rill__captures_active: only the lock orders this
     * against a rill_stream_begin_capture racing on the same stream (see
     * the owner_released check there). */
    rill__capture *c = lock_capture_of(s);
    if (c == NULL)
        return;
    if (c->origin != s) {
        /* A forked stream: its work may not be joined back yet, and the
         * origin's thread learns at end_capture what happened. */
        invalidate(c, "rill_stream_destroy", s);
        rill__spinlock_unlock(&caps_lock);
        return;
    }
    /* The origin: no handle is left to end the capture, so it ends here,
     * as a failed end_capture ends it. */
    rill__graph_destroy(discard_unlock(c));
}

static void note_use(rill__capture *c, const void *ptr, size_t bytes, uint32_t node) {
    if (ptr == NULL || !grow((void **)&c->uses, &c->cap_uses, c->num_uses + 1, sizeof *c->uses))
        return; /* without memory the use is not tracked: only checks weaken */
    c->uses[c->num_uses].lo = (uintptr_t)ptr;
    c->uses[c->num_uses].hi = (uintptr_t)ptr + (bytes > 0 ? bytes : 1);
    c->uses[c->num_uses].node = node;
    c->num_uses++;
}

static const char *cmd_what(const rill__cmd *cmd) {
    switch (cmd->kind) {
    case RILL__CMD_KERNEL:
        return "kernel launch";
    case RILL__CMD_HOST:
        return "host function";
    case RILL__CMD_COPY:
        return "memcpy";
    case RILL__CMD_SET:
        return "memset";
    default:
        return "command";
    }
}

rill_status rill__capture_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    *seq = 0;
    rill__capture *c = lock_capture_of(s);
    if (c == NULL)
        return rill__stream_submit_now(s, cmd, seq);
    rill_status st = RILL_OK;
    rill__gnode_params p = {0};
    if (c->invalidated) {
        st = fail_invalidated(c, cmd_what(cmd));
        goto out;
    }
    switch (cmd->kind) {
    case RILL__CMD_KERNEL:
        p.kind = RILL__GNODE_KERNEL;
        p.u.kernel.kernel = cmd->u.kernel.kernel;
        p.u.kernel.grid = cmd->u.kernel.grid;
        p.u.kernel.block = cmd->u.kernel.block;
        p.u.kernel.args = (void *)cmd->u.kernel.args;
        p.u.kernel.args_size = cmd->u.kernel.args_size;
        p.u.kernel.accesses = (rill_access *)cmd->u.kernel.accesses;
        p.u.kernel.num_accesses = cmd->u.kernel.num_accesses;
        break;
    case RILL__CMD_HOST:
        p.kind = RILL__GNODE_HOST;
        p.u.host.fn = cmd->u.host.fn;
        p.u.host.user_data = cmd->u.host.user_data;
        break;
    case RILL__CMD_COPY:
        p.kind = RILL__GNODE_COPY;
        p.u.copy.dst = cmd->u.copy.dst;
        p.u.copy.src = cmd->u.copy.src;
        p.u.copy.bytes = cmd->u.copy.bytes;
        break;
    case RILL__CMD_SET:
        p.kind = RILL__GNODE_SET;
        p.u.set.dst = cmd->u.set.dst;
        p.u.set.value = cmd->u.set.value;
        p.u.set.bytes = cmd->u.set.bytes;
        break;
    case RILL__CMD_CLEAR:
        st = rill__fail(RILL_ERROR_NOT_PERMITTED,
                        "rill_stream_clear_error: the stream is capturing; clear its error "
                        "before rill_stream_begin_capture or after rill_stream_end_capture");
        goto out;
    default:
        st = rill__fail(RILL_ERROR_NOT_SUPPORTED,
                        "this command cannot be captured; submit it outside the capture");
        goto out;
    }
    cap_stream *cs = find_stream(c, s);
    size_t cap = cs->cap_tail;
    if (!grow((void **)&cs->tail, &cap, 1, sizeof *cs->tail)) {
        st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", cmd_what(cmd));
        goto out;
    }
    cs->cap_tail = (uint32_t)cap;
    rill__graph_node *node;
    st = rill__graph_add(c->graph, cs->tail, cs->num_tail, &p, s, cmd_what(cmd), &node);
    if (st != RILL_OK)
        goto out;
    cs->tail[0] = node->index; /* the stream's next command follows this one */
    cs->num_tail = 1;
    if (cmd->kind == RILL__CMD_KERNEL) {
        for (size_t i = 0; i < cmd->u.kernel.num_accesses; i++)
            note_use(c, cmd->u.kernel.accesses[i].ptr, cmd->u.kernel.accesses[i].bytes,
                     node->index);
    } else if (cmd->kind == RILL__CMD_COPY) {
        note_use(c, cmd->u.copy.dst, cmd->u.copy.bytes, node->index);
        note_use(c, cmd->u.copy.src, cmd->u.copy.bytes, node->index);
    } else if (cmd->kind == RILL__CMD_SET) {
        note_use(c, cmd->u.set.dst, cmd->u.set.bytes, node->index);
    }
out:
    rill__spinlock_unlock(&caps_lock);
    return st;
}

rill_status rill__capture_event_record(rill__event *e, rill__stream *s, bool *handled) {
    *handled = false;
    if (!rill__stream_capturing(s))
        return RILL_OK;
    rill__capture *c = lock_capture_of(s);
    if (c == NULL)
        return RILL_OK;
    *handled = true;
    rill_status st = RILL_OK;
    if (c->invalidated) {
        st = fail_invalidated(c, "rill_event_record");
        goto out;
    }
    if (e->flags & RILL_EVENT_INTERPROCESS) {
        st = rill__fail(RILL_ERROR_NOT_SUPPORTED,
                        "rill_event_record: interprocess events cannot be recorded in a "
                        "capture; use a plain event to order the capture's streams");
        goto out;
    }
    cap_stream *cs = find_stream(c, s);
    cap_record *r = find_record(c, e);
    if (r == NULL) {
        if (!grow((void **)&c->records, &c->cap_records, c->num_records + 1, sizeof *c->records) ||
            !rill__ptrmap_put(&c->record_index, e, (uint32_t)c->num_records)) {
            st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_event_record: out of memory");
            goto out;
        }
        r = &c->records[c->num_records];
        memset(r, 0, sizeof *r);
    }
    uint32_t *nodes = rill__malloc((cs->num_tail > 0 ? cs->num_tail : 1) * sizeof *nodes);
    if (nodes == NULL) {
        st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_event_record: out of memory");
        goto out;
    }
    rill__mutex_lock(&e->lock);
    if (e->dev != NULL && e->dev != s->dev) {
        rill__mutex_unlock(&e->lock);
        rill__free(nodes);
        st = rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                        "rill_event_record: the event is bound to another device; create "
                        "another event for this stream");
        goto out;
    }
    rill__stream *old = e->stream;
    e->dev = s->dev;
    e->stream = NULL;
    e->seq = 0;
    e->gen++;
    e->ts_valid = 0;
    e->cap_id = c->id;
    rill__mutex_unlock(&e->lock);
    if (old != NULL)
        rill__stream_unref(old);
    if (cs->num_tail > 0)
        memcpy(nodes, cs->tail, cs->num_tail * sizeof *nodes);
    if (r->e == NULL) {
        atomic_fetch_add(&e->refs, 1);
        r->e = e;
        c->num_records++;
    }
    rill__free(r->nodes);
    r->nodes = nodes;
    r->num_nodes = cs->num_tail;
out:
    rill__spinlock_unlock(&caps_lock);
    return st;
}

/* Makes s (in capture sc, or none) depend on nodes of capture c. */
static rill_status join(rill__capture *c, rill__capture *sc, rill__stream *s, const uint32_t *nodes,
                        uint32_t n, const char *fn) {
    if (c->invalidated)
        return fail_invalidated(c, fn);
    if (sc == c) {
        if (!tail_merge(find_stream(c, s), nodes, n, false))
            return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
        return RILL_OK;
    }
    if (sc != NULL) {
        char a[80], b[80];
        stream_label(s, a, sizeof a);
        stream_label(c->origin, b, sizeof b);
        return rill__fail(RILL_ERROR_CAPTURE_ISOLATION,
                          "%s: stream %s belongs to another capture than the one begun on %s; "
                          "two captures cannot depend on each other",
                          fn, a, b);
    }
    if (add_stream(c, s, nodes, n) == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    return RILL_OK;
}

rill_status rill__capture_wait_event(rill__stream *s, rill__event *e, bool *handled) {
    *handled = false;
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__mutex_lock(&e->lock);
    uint64_t cap_id = e->cap_id;
    bool outside = e->stream != NULL;
    rill__mutex_unlock(&e->lock);
    rill__spinlock_lock(&caps_lock);
    rill__capture *sc = atomic_load_explicit(&s->capture, memory_order_acquire);
    rill_status st = RILL_OK;
    if (cap_id != 0) {
        *handled = true;
        rill__capture *c = find_capture(cap_id);
        /* Recorded in a capture that has ended: that record never ran, so
         * the event is as if never recorded. */
        if (c != NULL) {
            cap_record *r = find_record(c, e);
            st = join(c, sc, s, r->nodes, r->num_nodes, "rill_stream_wait_event");
        }
    } else if (sc != NULL) {
        *handled = true;
        if (sc->invalidated) {
            st = fail_invalidated(sc, "rill_stream_wait_event");
        } else if (outside) {
            char a[80];
            stream_label(s, a, sizeof a);
            st = rill__fail(RILL_ERROR_CAPTURE_ISOLATION,
                            "rill_stream_wait_event: stream %s is capturing and the event was "
                            "recorded outside the capture; a graph cannot wait for work outside "
                            "it: wait before rill_stream_begin_capture",
                            a);
        }
    }
    rill__spinlock_unlock(&caps_lock);
    return st;
}

rill_status rill__capture_wait_stream(rill__stream *s, rill__stream *other, bool *handled) {
    *handled = false;
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&caps_lock);
    rill__capture *sc = atomic_load_explicit(&s->capture, memory_order_acquire);
    rill__capture *oc = atomic_load_explicit(&other->capture, memory_order_acquire);
    rill_status st = RILL_OK;
    if (oc != NULL) {
        *handled = true;
        cap_stream *ocs = find_stream(oc, other);
        /* Copy: joining may grow oc->streams, which holds ocs. */
        uint32_t n = ocs->num_tail;
        uint32_t *nodes = rill__malloc((n > 0 ? n : 1) * sizeof *nodes);
        if (nodes == NULL) {
            st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_stream_wait_stream: out of memory");
        } else {
            if (n > 0)
                memcpy(nodes, ocs->tail, n * sizeof *nodes);
            st = join(oc, sc, s, nodes, n, "rill_stream_wait_stream");
            rill__free(nodes);
        }
    } else if (sc != NULL) {
        *handled = true;
        if (sc->invalidated) {
            st = fail_invalidated(sc, "rill_stream_wait_stream");
        } else if (atomic_load_explicit(&other->sub_seq, memory_order_acquire) != 0) {
            char a[80], b[80];
            stream_label(s, a, sizeof a);
            stream_label(other, b, sizeof b);
            st = rill__fail(RILL_ERROR_CAPTURE_ISOLATION,
                            "rill_stream_wait_stream: stream %s is capturing and stream %s is "
                            "not; a graph cannot wait for work outside it: wait before "
                            "rill_stream_begin_capture",
                            a, b);
        }
    }
    rill__spinlock_unlock(&caps_lock);
    return st;
}

rill_status rill__capture_check_stream_sync(rill__stream *s, const char *fn) {
    if (!rill__stream_capturing(s))
        return RILL_OK;
    rill__capture *c = lock_capture_of(s);
    if (c == NULL)
        return RILL_OK;
    invalidate(c, fn, s);
    rill_status st = rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                                "%s: the stream is capturing, and its captured work does not run "
                                "until the graph is launched; the capture is now invalidated. "
                                "Synchronize after rill_stream_end_capture",
                                fn);
    rill__spinlock_unlock(&caps_lock);
    return st;
}

rill_status rill__capture_check_event_sync(rill__event *e, const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__mutex_lock(&e->lock);
    uint64_t cap_id = e->cap_id;
    rill__mutex_unlock(&e->lock);
    if (cap_id == 0)
        return RILL_OK;
    rill__spinlock_lock(&caps_lock);
    rill__capture *c = find_capture(cap_id);
    rill_status st = RILL_OK;
    if (c != NULL) {
        invalidate(c, fn, NULL);
        st = rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                        "%s: the event was recorded inside an active capture, whose work does "
                        "not run until the graph is launched; the capture is now invalidated",
                        fn);
    }
    rill__spinlock_unlock(&caps_lock);
    return st;
}

rill_status rill__capture_check_device_sync(rill__device *dev, const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&caps_lock);
    int n = 0;
    char name[80] = "";
    for (rill__capture *c = caps; c != NULL; c = c->next) {
        if (c->origin->dev != dev)
            continue;
        if (n++ == 0)
            stream_label(c->origin, name, sizeof name);
        invalidate(c, fn, NULL);
    }
    rill__spinlock_unlock(&caps_lock);
    if (n == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: %d capture(s) are active on the device (one begun on stream %s), and "
                      "captured work does not run until launched; they are now invalidated",
                      fn, n, name);
}

/* Invalidates the captures in which the calling thread may not make an
 * unsafe call (all, or those using [lo, hi)); returns how many. */
static int forbid(const char *fn, uintptr_t lo, uintptr_t hi, char *name, size_t size) {
    int n = 0;
    for (rill__capture *c = caps; c != NULL; c = c->next) {
        if (!forbids(c))
            continue;
        if (hi != 0) {
            bool used = false;
            for (size_t i = 0; i < c->num_uses && !used; i++)
                used = c->uses[i].lo < hi && lo < c->uses[i].hi;
            if (!used)
                continue;
        }
        if (n++ == 0)
            stream_label(c->origin, name, size);
        invalidate(c, fn, NULL);
    }
    return n;
}

rill_status rill__capture_check_unsafe(const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    char name[80] = "";
    rill__spinlock_lock(&caps_lock);
    int n = forbid(fn, 0, 0, name, sizeof name);
    rill__spinlock_unlock(&caps_lock);
    if (n == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: not allowed while the capture begun on stream %s is active (a graph "
                      "could not replay it); the capture is now invalidated. Call it before "
                      "the capture, or switch this thread to RILL_CAPTURE_RELAXED with "
                      "rill_thread_exchange_capture_mode to run it once, uncaptured",
                      fn, name);
}

rill_status rill__capture_check_free(void *ptr, const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&gpools_live, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&caps_lock);
    for (rill__gpool *p = gpools; p != NULL; p = p->next) {
        if (gpool_find(p, ptr) != NULL) {
            rill__spinlock_unlock(&caps_lock);
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: %p was allocated during a capture and belongs to its graph; "
                              "free it with rill_free_async on a capturing stream, or it is "
                              "released with the graph and its execs",
                              fn, ptr);
        }
    }
    rill__device *dev;
    size_t bytes = 0;
    int n = 0;
    char name[80] = "";
    if (caps != NULL && rill__pool_find(ptr, &dev, &bytes))
        n = forbid(fn, (uintptr_t)ptr, (uintptr_t)ptr + bytes, name, sizeof name);
    rill__spinlock_unlock(&caps_lock);
    if (n == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: %p is used by the capture begun on stream %s, whose graph would use "
                      "it at every launch; the capture is now invalidated. Free it after the "
                      "graph's last launch",
                      fn, ptr, name);
}

rill_status rill__capture_malloc(rill__stream *s, size_t bytes, void **out) {
    static const char fn[] = "rill_malloc_async";
    rill__capture *c = lock_capture_of(s);
    if (c == NULL)
        return rill__pool_alloc(s, bytes, fn, out);
    rill_status st = RILL_OK;
    rill__graph *g = c->graph;
    cap_stream *cs = find_stream(c, s);
    unsigned char *mark = NULL;
    uint32_t *stack = NULL;
    if (c->invalidated) {
        st = fail_invalidated(c, fn);
        goto out;
    }
    if (g->pool == NULL) {
        rill__gpool *p = rill__calloc(1, sizeof *p);
        rill__stream *ps = NULL;
        if (p == NULL || rill__stream_tagged(s->dev, "rill:graph-memory", 0, &ps) != RILL_OK) {
            rill__free(p);
            st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out;
        }
        p->stream = ps;
        atomic_init(&p->refs, 1);
        p->next = gpools;
        if (gpools != NULL)
            gpools->prev = p;
        gpools = p;
        atomic_fetch_add(&gpools_live, 1);
        g->pool = p;
    }
    rill__gpool *p = g->pool;
    /* Reuse the smallest freed block whose uses all come before this point. */
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
            mark_ancestors(g, cs->tail, cs->num_tail, mark, stack);
        }
        bool after = true;
        for (uint32_t j = 0; j < b->num_deps && after; j++)
            after = mark[b->deps[j]] != 0;
        if (after)
            best = b;
    }
    if (best != NULL) {
        best->freed = 0;
        best->num_deps = 0;
        *out = best->ptr;
        goto out;
    }
    /* Allocate without the lock: the pool may wait for pending frees. The
     * graph holds the gpool, and the capture may end meanwhile. */
    uint64_t id = c->id;
    rill__gpool_ref(p);
    rill__spinlock_unlock(&caps_lock);
    void *ptr;
    st = rill__pool_alloc(p->stream, bytes, fn, &ptr);
    rill__spinlock_lock(&caps_lock);
    bool alive = find_capture(id) == c;
    if (st == RILL_OK && (!alive || !grow((void **)&p->blocks, &p->cap_blocks, p->num_blocks + 1,
                                          sizeof *p->blocks))) {
        rill__pool_free(ptr, NULL, fn);
        st = alive ? rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn)
                   : rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                                "%s: the capture ended while the allocation was made", fn);
    }
    if (st != RILL_OK) {
        rill__spinlock_unlock(&caps_lock);
        rill__gpool_unref(p, NULL, 0);
        rill__spinlock_lock(&caps_lock);
        goto out;
    }
    atomic_fetch_sub(&p->refs, 1); /* the graph still holds it */
    gblock *b = &p->blocks[p->num_blocks++];
    memset(b, 0, sizeof *b);
    b->ptr = ptr;
    b->bytes = bytes;
    atomic_store_explicit(&p->ready_seq,
                          atomic_load_explicit(&p->stream->sub_seq, memory_order_acquire),
                          memory_order_release);
    *out = ptr;
out:
    rill__free(mark);
    rill__free(stack);
    rill__spinlock_unlock(&caps_lock);
    return st;
}

rill_status rill__capture_free(rill__stream *s, void *ptr, bool *handled) {
    static const char fn[] = "rill_free_async";
    *handled = false;
    rill__capture *c = lock_capture_of(s);
    if (c == NULL)
        return RILL_OK;
    rill_status st = RILL_OK;
    rill__graph *g = c->graph;
    gblock *b = g->pool != NULL ? gpool_find(g->pool, ptr) : NULL;
    if (b == NULL) {
        /* Memory from outside the capture: an unsafe free (checked by the
         * caller); it runs at once when allowed. */
        rill__spinlock_unlock(&caps_lock);
        return RILL_OK;
    }
    *handled = true;
    if (c->invalidated) {
        st = fail_invalidated(c, fn);
        goto out;
    }
    if (b->freed) {
        st = rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %p was already freed in this capture", fn,
                        ptr);
        goto out;
    }
    cap_stream *cs = find_stream(c, s);
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
    rill__spinlock_unlock(&caps_lock);
    return st;
}

/* ---------------------------------------------------------------- public */

rill_status rill_stream_begin_capture(rill_stream *stream_h, rill_capture_mode mode) {
    static const char fn[] = "rill_stream_begin_capture";
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    if (mode != RILL_CAPTURE_GLOBAL && mode != RILL_CAPTURE_THREAD_LOCAL &&
        mode != RILL_CAPTURE_RELAXED)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: mode %d is not a capture mode; pass RILL_CAPTURE_GLOBAL, "
                          "RILL_CAPTURE_THREAD_LOCAL or RILL_CAPTURE_RELAXED",
                          fn, (int)mode);
    rill__capture *c = rill__calloc(1, sizeof *c);
    rill__graph *g = NULL;
    if (c == NULL || (st = rill__graph_new(&g)) != RILL_OK) {
        rill__free(c);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    rill__spinlock_lock(&caps_lock);
    /* rill_stream_destroy marks the stream before it looks for a capture
     * under caps_lock: a capture begun here is either seen and ended there
     * or refused here, never left on a stream that nobody can name. */
    if (atomic_load(&stream->owner_released)) {
        rill__spinlock_unlock(&caps_lock);
        rill__free(c);
        rill__graph_destroy(g);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the stream handle is not valid (destroyed, or not a stream)", fn);
    }
    rill__capture *other = atomic_load_explicit(&stream->capture, memory_order_acquire);
    if (other != NULL) {
        char a[80];
        stream_label(other->origin, a, sizeof a);
        rill__spinlock_unlock(&caps_lock);
        rill__free(c);
        rill__graph_destroy(g);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the stream already belongs to the capture begun on stream %s; "
                          "end that capture first",
                          fn, a);
    }
    c->id = next_capture_id++;
    c->mode = mode;
    c->thread = rill__thread_id();
    c->origin = stream;
    c->graph = g;
    atomic_fetch_add(&rill__captures_active, 1);
    if (add_stream(c, stream, NULL, 0) == NULL) {
        atomic_fetch_sub(&rill__captures_active, 1);
        rill__spinlock_unlock(&caps_lock);
        rill__free(c->streams);
        rill__ptrmap_free(&c->stream_index);
        rill__free(c);
        rill__graph_destroy(g);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    c->next = caps;
    if (caps != NULL)
        caps->prev = c;
    caps = c;
    rill__spinlock_unlock(&caps_lock);
    return RILL_OK;
}

/* The first node of stream_id that is not marked, and how many are not. */
static uint32_t unjoined(rill__graph *g, uint64_t stream_id, const unsigned char *mark,
                         uint32_t *first) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        if (g->nodes[i]->stream_id == stream_id && !mark[i]) {
            if (n++ == 0)
                *first = i;
        }
    }
    return n;
}

static void node_label(const rill__graph_node *n, char *buf, size_t size) {
    switch (n->p.kind) {
    case RILL__GNODE_KERNEL:
        snprintf(buf, size, "kernel '%s'", n->p.u.kernel.kernel->name);
        break;
    case RILL__GNODE_HOST:
        snprintf(buf, size, "a host function");
        break;
    case RILL__GNODE_COPY:
        snprintf(buf, size, "a memcpy");
        break;
    case RILL__GNODE_SET:
        snprintf(buf, size, "a memset");
        break;
    default:
        snprintf(buf, size, "a command");
        break;
    }
}

rill_status rill_stream_end_capture(rill_stream *stream_h, rill_graph **out) {
    static const char fn[] = "rill_stream_end_capture";
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    char a[80], b[80];
    rill__spinlock_lock(&caps_lock);
    rill__capture *c = atomic_load_explicit(&stream->capture, memory_order_acquire);
    if (c == NULL || c->origin != stream) {
        stream_label(stream, a, sizeof a);
        if (c != NULL)
            stream_label(c->origin, b, sizeof b);
        rill__spinlock_unlock(&caps_lock);
        if (c == NULL)
            return rill__fail(RILL_ERROR_CAPTURE_UNMATCHED,
                              "%s: stream %s is not capturing; end the capture on the stream "
                              "passed to rill_stream_begin_capture",
                              fn, a);
        return rill__fail(RILL_ERROR_CAPTURE_UNMATCHED,
                          "%s: stream %s joined the capture by a wait but did not begin it; end "
                          "the capture on its origin stream %s",
                          fn, a, b);
    }
    stream_label(stream, a, sizeof a);
    if (c->mode != RILL_CAPTURE_RELAXED && c->thread != rill__thread_id()) {
        /* Like UNMATCHED, this leaves the capture as it was: a stray thread
         * must not end a capture that its own thread is still building. */
        rill_capture_mode mode = c->mode;
        rill__spinlock_unlock(&caps_lock);
        return rill__fail(RILL_ERROR_CAPTURE_WRONG_THREAD,
                          "%s: the capture on stream %s was begun in %s mode by another thread, "
                          "which must end it (only RELAXED captures may end on any thread); "
                          "the capture goes on unchanged",
                          fn, a, mode_name(mode));
    }
    if (c->invalidated) {
        char why[320];
        snprintf(why, sizeof why, "%s", c->why);
        rill__graph_destroy(discard_unlock(c));
        return rill__fail(RILL_ERROR_CAPTURE_INVALIDATED,
                          "%s: the capture on stream %s was invalidated because %s; nothing "
                          "captured runs: capture again without that call",
                          fn, a, why);
    }
    rill__graph *g = c->graph;
    unsigned char *mark = rill__calloc(g->num_nodes + 1, 1);
    uint32_t *stack = rill__malloc((g->num_nodes + 1) * sizeof *stack);
    if (mark == NULL || stack == NULL) {
        rill__free(mark);
        rill__free(stack);
        rill__graph_destroy(discard_unlock(c));
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: out of memory checking the capture; it is discarded", fn);
    }
    cap_stream *ocs = find_stream(c, stream);
    mark_ancestors(g, ocs->tail, ocs->num_tail, mark, stack);
    /* One pass for the first node that is not an ancestor of the origin's
     * tail; the origin's own nodes all are. */
    uint32_t bad = g->num_nodes;
    for (uint32_t i = 0; i < g->num_nodes && bad == g->num_nodes; i++)
        if (!mark[i] && g->nodes[i]->stream_id != stream->id)
            bad = i;
    for (size_t i = 0; bad < g->num_nodes && i < c->num_streams; i++) {
        rill__stream *s = c->streams[i].s;
        if (s->id != g->nodes[bad]->stream_id)
            continue;
        uint32_t first = 0;
        uint32_t n = unjoined(g, s->id, mark, &first);
        char what[96];
        stream_label(s, b, sizeof b);
        node_label(g->nodes[first], what, sizeof what);
        rill__free(mark);
        rill__free(stack);
        rill__graph_destroy(discard_unlock(c));
        return rill__fail(RILL_ERROR_CAPTURE_UNJOINED,
                          "%s: stream %s has %u command%s after its last join to the origin "
                          "stream %s (the first: %s); record an event on it and wait on that "
                          "event from %s before ending the capture. The capture is discarded",
                          fn, b, n, n == 1 ? "" : "s", a, what, a);
    }
    rill__free(mark);
    rill__free(stack);
    c->graph = NULL;
    detach(c);
    rill__spinlock_unlock(&caps_lock);
    *out = g->handle;
    return RILL_OK;
}

rill_status rill_stream_get_capture_status(rill_stream *stream_h, rill_capture_status *out) {
    static const char fn[] = "rill_stream_get_capture_status";
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = RILL_CAPTURE_NONE;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    rill__capture *c = lock_capture_of(stream);
    if (c == NULL)
        return RILL_OK;
    *out = c->invalidated ? RILL_CAPTURE_INVALIDATED : RILL_CAPTURE_ACTIVE;
    rill__spinlock_unlock(&caps_lock);
    return RILL_OK;
}

rill_status rill_thread_exchange_capture_mode(rill_capture_mode *mode) {
    if (mode == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_thread_exchange_capture_mode: mode is NULL");
    if (*mode != RILL_CAPTURE_GLOBAL && *mode != RILL_CAPTURE_THREAD_LOCAL &&
        *mode != RILL_CAPTURE_RELAXED)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_thread_exchange_capture_mode: %d is not a capture mode",
                          (int)*mode);
    rill_capture_mode old = tls_mode;
    tls_mode = *mode;
    *mode = old;
    return RILL_OK;
}
