/* SPDX-License-Identifier: MIT */
/* Stream capture: commands submitted to a capturing stream become nodes of
 * the capture's graph; records and waits become edges through each stream's
 * tail (docs/design.md, "Graphs"). At the end, every node of a forked stream
 * must be an ancestor of the origin's tail. One spin lock (rill__caps_lock)
 * guards every capture, its streams' membership and the graph memory pools;
 * with no capture active, the hooks cost one relaxed load
 * (rill__captures_active). Graph memory is in gmem.c, the calls a capture
 * forbids and rill_stream_get_capture_status in capture_rules.c, the hooks'
 * table in layer.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "graph/capture_internal.h"
#include "graph/graph.h"
#include "mem/pool.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/ptrmap.h"
#include "util/status.h"

/* A spin lock: it needs no initialisation, and it is held only for short
 * bookkeeping (never across a wait). */
rill__spinlock rill__caps_lock = RILL__SPINLOCK_RANKED(RILL__RANK_CAPTURES);
rill__link *rill__caps;
rill__ptrmap rill__gmem_index;
_Atomic int rill__gpools_live;
static uint64_t next_capture_id = 1;

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

bool rill__cap_grow(void **arr, size_t *cap, size_t need, size_t elem) {
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
cap_stream *rill__cap_stream_of(rill__capture *c, rill__stream *s) {
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

rill__capture *rill__cap_find(uint64_t id) {
    for (rill__capture *c = rill__cap_at(rill__caps); c != NULL; c = rill__cap_at(c->link.next))
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
    if (!rill__cap_grow((void **)&cs->tail, &cap, (size_t)cs->num_tail + n, sizeof *cs->tail))
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
    if (!rill__cap_grow((void **)&c->streams, &c->cap_streams, c->num_streams + 1,
                        sizeof *c->streams))
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
void rill__cap_mark_ancestors(rill__graph *g, const uint32_t *nodes, uint32_t n,
                              unsigned char *mark, uint32_t *stack) {
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

void rill__cap_invalidate(rill__capture *c, const char *fmt_fn, rill__stream *s) {
    if (c->invalidated)
        return;
    char name[80];
    c->invalidated = 1;
    if (s != NULL) {
        rill__stream_name(s, name, sizeof name);
        snprintf(c->why, sizeof c->why, "%s was called on capturing stream %s", fmt_fn, name);
    } else {
        snprintf(c->why, sizeof c->why, "%s was called while the capture was active", fmt_fn);
    }
}

rill_status rill__cap_fail_invalidated(rill__capture *c, const char *fn) {
    char name[80];
    rill__stream_name(c->origin, name, sizeof name);
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: the capture begun on stream %s was invalidated (%s); end it with "
                      "rill_stream_end_capture, which returns RILL_ERROR_CAPTURE_INVALIDATED",
                      fn, name, c->why);
}

/* ------------------------------------------------------------ capture */

static void detach(rill__capture *c) {
    rill__list_remove(&rill__caps, &c->link);
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

/* Ends c without a graph (rill__caps_lock held) and returns the graph, which
 * the caller destroys once it has dropped the lock. */
static rill__graph *discard(rill__capture *c) {
    rill__graph *g = c->graph;
    detach(c);
    return g;
}

static rill__graph *discard_unlock(rill__capture *c) {
    rill__graph *g = discard(c);
    rill__spinlock_unlock(&rill__caps_lock);
    return g;
}

void rill__captures_shutdown(void) {
    for (;;) {
        rill__spinlock_lock(&rill__caps_lock);
        rill__graph *g = rill__caps != NULL ? discard(rill__cap_at(rill__caps)) : NULL;
        rill__spinlock_unlock(&rill__caps_lock);
        if (g == NULL)
            return;
        rill__graph_destroy(g);
    }
}

void rill__captures_forget(void) {
    /* The captures and their pools belong to the parent's streams, which
     * this process no longer runs: drop them, without touching them. */
    atomic_store(&rill__caps_lock.held, 0);
    rill__caps = NULL;
    memset(&rill__gmem_index, 0, sizeof rill__gmem_index);
    atomic_store(&rill__gpools_live, 0);
    atomic_store(&rill__captures_active, 0);
}

/* The capture of s with rill__caps_lock held, or NULL (unlocked then). */
rill__capture *rill__cap_lock_of(rill__stream *s) {
    rill__spinlock_lock(&rill__caps_lock);
    rill__capture *c = atomic_load_explicit(&s->capture, memory_order_acquire);
    if (c == NULL)
        rill__spinlock_unlock(&rill__caps_lock);
    return c;
}

void rill__cap_stream_destroyed(rill__stream *s) {
    /* No fast path on rill__captures_active: only the lock orders this
     * against a rill_stream_begin_capture racing on the same stream (see
     * the owner_released check there). */
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL)
        return;
    if (c->origin != s) {
        /* A forked stream: its work may not be joined back yet, and the
         * origin's thread learns at end_capture what happened. */
        rill__cap_invalidate(c, "rill_stream_destroy", s);
        rill__spinlock_unlock(&rill__caps_lock);
        return;
    }
    /* The origin: no handle is left to end the capture, so it ends here,
     * as a failed end_capture ends it. */
    rill__graph_destroy(discard_unlock(c));
}

static void note_use(rill__capture *c, const void *ptr, size_t bytes, uint32_t node) {
    if (ptr == NULL ||
        !rill__cap_grow((void **)&c->uses, &c->cap_uses, c->num_uses + 1, sizeof *c->uses))
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

/* Adds a node of p to c after the last node of s, which it becomes. */
static rill_status add_node(rill__capture *c, rill__stream *s, const rill__gnode_params *p,
                            const char *what, rill__graph_node **out) {
    cap_stream *cs = rill__cap_stream_of(c, s);
    size_t cap = cs->cap_tail;
    if (!rill__cap_grow((void **)&cs->tail, &cap, 1, sizeof *cs->tail))
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
    cs->cap_tail = (uint32_t)cap;
    rill_status st = rill__graph_add(c->graph, cs->tail, cs->num_tail, p, s, what, out);
    if (st != RILL_OK)
        return st;
    cs->tail[0] = (*out)->index; /* the stream's next command follows this one */
    cs->num_tail = 1;
    return RILL_OK;
}

rill_status rill__capture_extern(rill__stream *s, const rill__extern_call *call,
                                 const rill_access *accesses, size_t num_accesses, const char *fn) {
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL) /* cap_lock_of unlocked */
        return rill__fail(RILL_ERROR_CAPTURE_INVALIDATED,
                          "%s: the stream's capture ended while the call was made; issue it "
                          "again",
                          fn);
    rill_status st;
    rill__graph_node *node;
    if (c->invalidated) {
        st = rill__cap_fail_invalidated(c, fn);
    } else {
        rill__gnode_params p = {.kind = RILL__GNODE_EXTERN};
        p.u.ext = *call;
        st = add_node(c, s, &p, fn, &node);
        for (size_t i = 0; st == RILL_OK && i < num_accesses; i++)
            note_use(c, accesses[i].ptr, accesses[i].bytes, node->index);
    }
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

rill_status rill__cap_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    *seq = 0;
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL)
        return rill__stream_submit_now(s, cmd, seq);
    rill_status st = RILL_OK;
    rill__gnode_params p = {0};
    if (c->invalidated) {
        st = rill__cap_fail_invalidated(c, cmd_what(cmd));
        goto out;
    }
    switch (cmd->kind) {
    case RILL__CMD_KERNEL:
        /* A captured command becomes the node of the same payload (the
         * graph copies what it borrows). */
        p.kind = RILL__GNODE_KERNEL;
        p.u.kernel = cmd->u.kernel;
        break;
    case RILL__CMD_HOST:
        if (cmd->flags & RILL__CMD_ALWAYS) {
            rill__cap_invalidate(c, "rill_stream_add_callback", s);
            st = rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                            "rill_stream_add_callback: the stream is capturing, and a graph runs "
                            "its nodes at each launch while a callback runs once; the capture is "
                            "now invalidated. Capture rill_launch_host_func instead");
            goto out;
        }
        p.kind = RILL__GNODE_HOST;
        p.u.host = cmd->u.host;
        break;
    case RILL__CMD_COPY:
        p.kind = RILL__GNODE_COPY;
        p.u.copy = cmd->u.copy;
        break;
    case RILL__CMD_SET:
        p.kind = RILL__GNODE_SET;
        p.u.set = cmd->u.set;
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
    rill__graph_node *node;
    st = add_node(c, s, &p, cmd_what(cmd), &node);
    if (st != RILL_OK)
        goto out;
    node->op_name = cmd->op_name;
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
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

RILL_HOT rill_status rill__cap_event_record(rill__event *e, rill__stream *s, bool *handled) {
    *handled = false;
    if (!rill__stream_capturing(s))
        return RILL_OK;
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL)
        return RILL_OK;
    *handled = true;
    rill_status st = RILL_OK;
    if (c->invalidated) {
        st = rill__cap_fail_invalidated(c, "rill_event_record");
        goto out;
    }
    if (e->flags & RILL_EVENT_INTERPROCESS) {
        st = rill__fail(RILL_ERROR_NOT_SUPPORTED,
                        "rill_event_record: interprocess events cannot be recorded in a "
                        "capture; use a plain event to order the capture's streams");
        goto out;
    }
    cap_stream *cs = rill__cap_stream_of(c, s);
    cap_record *r = find_record(c, e);
    if (r == NULL) {
        if (!rill__cap_grow((void **)&c->records, &c->cap_records, c->num_records + 1,
                            sizeof *c->records) ||
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
    rill__spinlock_lock(&e->lock);
    if (e->dev != NULL && e->dev != s->q.dev) {
        rill__spinlock_unlock(&e->lock);
        rill__free(nodes);
        st = rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                        "rill_event_record: the event is bound to another device; create "
                        "another event for this stream");
        goto out;
    }
    rill__stream *old = e->stream;
    e->dev = s->q.dev;
    e->stream = NULL;
    e->seq = 0;
    e->gen++;
    e->ts_valid = 0;
    e->cap_id = c->id;
    rill__spinlock_unlock(&e->lock);
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
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

/* Makes s (in capture sc, or none) depend on nodes of capture c. */
static rill_status join(rill__capture *c, rill__capture *sc, rill__stream *s, const uint32_t *nodes,
                        uint32_t n, const char *fn) {
    if (c->invalidated)
        return rill__cap_fail_invalidated(c, fn);
    if (sc == c) {
        if (!tail_merge(rill__cap_stream_of(c, s), nodes, n, false))
            return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
        return RILL_OK;
    }
    if (sc != NULL) {
        char a[80], b[80];
        rill__stream_name(s, a, sizeof a);
        rill__stream_name(c->origin, b, sizeof b);
        return rill__fail(RILL_ERROR_CAPTURE_ISOLATION,
                          "%s: stream %s belongs to another capture than the one begun on %s; "
                          "two captures cannot depend on each other",
                          fn, a, b);
    }
    if (s->q.dev != c->origin->q.dev) {
        /* A graph's exec runs on one device (the one current when it is
         * instantiated), so a capture takes streams of its origin's only. */
        char a[80], b[80];
        rill__stream_name(s, a, sizeof a);
        rill__stream_name(c->origin, b, sizeof b);
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "%s: stream %s belongs to device %d and the capture begun on %s to "
                          "device %d; a graph runs on one device, so only streams of device %d "
                          "can join it: capture each device's work into a graph of its own",
                          fn, a, s->q.dev->base.info.ordinal, b,
                          c->origin->q.dev->base.info.ordinal, c->origin->q.dev->base.info.ordinal);
    }
    if (add_stream(c, s, nodes, n) == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    return RILL_OK;
}

rill_status rill__cap_wait_event(rill__stream *s, rill__event *e, bool *handled) {
    *handled = false;
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&e->lock);
    uint64_t cap_id = e->cap_id;
    bool outside = e->stream != NULL;
    rill__spinlock_unlock(&e->lock);
    rill__spinlock_lock(&rill__caps_lock);
    rill__capture *sc = atomic_load_explicit(&s->capture, memory_order_acquire);
    rill_status st = RILL_OK;
    if (cap_id != 0) {
        *handled = true;
        rill__capture *c = rill__cap_find(cap_id);
        /* Recorded in a capture that has ended: that record never ran, so
         * the event is as if never recorded. */
        if (c != NULL) {
            cap_record *r = find_record(c, e);
            st = join(c, sc, s, r->nodes, r->num_nodes, "rill_stream_wait_event");
        }
    } else if (sc != NULL) {
        *handled = true;
        if (sc->invalidated) {
            st = rill__cap_fail_invalidated(sc, "rill_stream_wait_event");
        } else if (outside) {
            char a[80];
            rill__stream_name(s, a, sizeof a);
            st = rill__fail(RILL_ERROR_CAPTURE_ISOLATION,
                            "rill_stream_wait_event: stream %s is capturing and the event was "
                            "recorded outside the capture; a graph cannot wait for work outside "
                            "it: wait before rill_stream_begin_capture",
                            a);
        }
    }
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

rill_status rill__cap_wait_stream(rill__stream *s, rill__stream *other, bool *handled) {
    *handled = false;
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&rill__caps_lock);
    rill__capture *sc = atomic_load_explicit(&s->capture, memory_order_acquire);
    rill__capture *oc = atomic_load_explicit(&other->capture, memory_order_acquire);
    rill_status st = RILL_OK;
    if (oc != NULL) {
        *handled = true;
        cap_stream *ocs = rill__cap_stream_of(oc, other);
        /* Copy: joining may rill__cap_grow oc->streams, which holds ocs. */
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
            st = rill__cap_fail_invalidated(sc, "rill_stream_wait_stream");
        } else if (atomic_load_explicit(&other->q.sub_seq, memory_order_acquire) != 0) {
            char a[80], b[80];
            rill__stream_name(s, a, sizeof a);
            rill__stream_name(other, b, sizeof b);
            st = rill__fail(RILL_ERROR_CAPTURE_ISOLATION,
                            "rill_stream_wait_stream: stream %s is capturing and stream %s is "
                            "not; a graph cannot wait for work outside it: wait before "
                            "rill_stream_begin_capture",
                            a, b);
        }
    }
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

/* ---------------------------------------------------------------- public */

/* A capture began or ended on s: an instant on its track. */
static void trace_capture(rill__stream *s, const char *what) {
    rill__trace_rec r;
    memset(&r, 0, sizeof r);
    r.type = RILL__TRACE_INSTANT;
    r.device = (int8_t)s->q.dev->base.info.ordinal;
    r.stream = s->q.id;
    r.t0 = rill__trace_now();
    rill__trace_set_name(&r, what);
    rill__stream_trace_track(s);
    rill__trace_emit(&r);
}

rill_status rill_stream_begin_capture(rill_stream *stream_h, rill_capture_mode mode) {
    RILL_CALL_SCOPE();
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
    rill__spinlock_lock(&rill__caps_lock);
    /* rill_stream_destroy marks the stream before it looks for a capture
     * under rill__caps_lock: a capture begun here is either seen and ended there
     * or refused here, never left on a stream that nobody can name. */
    if (atomic_load(&stream->owner_released)) {
        rill__spinlock_unlock(&rill__caps_lock);
        rill__free(c);
        rill__graph_destroy(g);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the stream handle is not valid (destroyed, or not a stream)", fn);
    }
    rill__capture *other = atomic_load_explicit(&stream->capture, memory_order_acquire);
    if (other != NULL) {
        char a[80];
        rill__stream_name(other->origin, a, sizeof a);
        rill__spinlock_unlock(&rill__caps_lock);
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
        rill__spinlock_unlock(&rill__caps_lock);
        rill__free(c->streams);
        rill__ptrmap_free(&c->stream_index);
        rill__free(c);
        rill__graph_destroy(g);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    rill__list_push(&rill__caps, &c->link);
    rill__spinlock_unlock(&rill__caps_lock);
    if (rill__tracing())
        trace_capture(stream, "capture begin");
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
        snprintf(buf, size, "kernel '%s'", n->p.u.kernel.kernel->image.name);
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
    case RILL__GNODE_EXTERN:
        snprintf(buf, size, "a collective");
        break;
    default:
        snprintf(buf, size, "a command");
        break;
    }
}

/* rill_stream_end_capture of c on its origin stream (named a), caps lock
 * held: RILL_OK, the lock still held, when every node of a forked stream is
 * an ancestor of the origin's tail; otherwise the capture is discarded, the
 * lock released, and the failure returned. */
static rill_status check_joined_locked(rill__capture *c, rill__stream *stream, const char *a,
                                       const char *fn) {
    char b[80];
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
    cap_stream *ocs = rill__cap_stream_of(c, stream);
    rill__cap_mark_ancestors(g, ocs->tail, ocs->num_tail, mark, stack);
    /* One pass for the first node that is not an ancestor of the origin's
     * tail; the origin's own nodes all are. */
    uint32_t bad = g->num_nodes;
    for (uint32_t i = 0; i < g->num_nodes && bad == g->num_nodes; i++)
        if (!mark[i] && g->nodes[i]->stream_id != stream->q.id)
            bad = i;
    for (size_t i = 0; bad < g->num_nodes && i < c->num_streams; i++) {
        rill__stream *s = c->streams[i].s;
        if (s->q.id != g->nodes[bad]->stream_id)
            continue;
        uint32_t first = 0;
        uint32_t n = unjoined(g, s->q.id, mark, &first);
        char what[96];
        rill__stream_name(s, b, sizeof b);
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
    return RILL_OK;
}

rill_status rill_stream_end_capture(rill_stream *stream_h, rill_graph **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_stream_end_capture";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_graph * to receive the captured graph",
            fn);
    *out = NULL;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    char a[80], b[80];
    rill__spinlock_lock(&rill__caps_lock);
    rill__capture *c = atomic_load_explicit(&stream->capture, memory_order_acquire);
    if (c == NULL || c->origin != stream) {
        rill__stream_name(stream, a, sizeof a);
        if (c != NULL)
            rill__stream_name(c->origin, b, sizeof b);
        rill__spinlock_unlock(&rill__caps_lock);
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
    rill__stream_name(stream, a, sizeof a);
    if (c->mode != RILL_CAPTURE_RELAXED && c->thread != rill__thread_id()) {
        /* Like UNMATCHED, this leaves the capture as it was: a stray thread
         * must not end a capture that its own thread is still building. */
        rill_capture_mode mode = c->mode;
        rill__spinlock_unlock(&rill__caps_lock);
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
    st = check_joined_locked(c, stream, a, fn);
    if (st != RILL_OK)
        return st;
    rill__graph *g = c->graph;
    c->graph = NULL;
    detach(c);
    rill__spinlock_unlock(&rill__caps_lock);
    if (rill__tracing())
        trace_capture(stream, "capture end");
    *out = g->handle;
    return RILL_OK;
}
