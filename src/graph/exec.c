/* SPDX-License-Identifier: MIT */
/* Execs: instantiation of a graph, its parameter sets, update and launch.
 *
 * An exec keeps what all its launches share (the successor lists, the
 * roots, the run state of the launch being run) and a current parameter
 * set: the nodes with their kernels' arguments. A launch takes a reference
 * on the current set and the backend runs that set, so an update, which
 * swaps in a new set, never changes a launch already submitted. Launches
 * of one exec never overlap: a launch on another stream than the previous
 * one waits for it to end (rill__cmd's after_stream), without taking on
 * its failure. */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "core/queue_limit.h"
#include "util/alloc.h"
#include "util/status.h"

/* ------------------------------------------------------------- lifetime */

/* Frees what instantiation allocated for x (each may be NULL). */
static void exec_arrays_free(rill__graph_exec *x) {
    rill__free(x->succ);
    rill__free(x->roots);
    rill__free(x->event_nodes);
    rill__free((void *)x->record_gen);
}

static void exec_free(rill__graph_exec *x) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__handle_close(x->handle);
    rill__mutex_lock(&rt->lock);
    rill__list_remove(&rt->execs, &x->rt_link);
    rill__mutex_unlock(&rt->lock);
    if (x->pool != NULL)
        rill__gpool_unref(x->pool, x->last_stream, x->last_seq);
    if (x->last_stream != NULL)
        rill__stream_unref(x->last_stream);
    x->dev->ops->graph_release(x->dev, x->backend);
    exec_arrays_free(x);
    rill__mutex_destroy(&x->lock);
    rill__free(x);
}

void rill__exec_unref(rill__graph_exec *x) {
    /* acq_rel: the last release sees every launch's writes. */
    if (atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1)
        exec_free(x);
}

/* Frees a parameter set and drops the references its nodes hold. */
static void xparams_free(rill__xparams *v, uint32_t num_nodes) {
    for (uint32_t i = 0; v->nodes != NULL && i < num_nodes; i++) {
        rill__gnode_params *p = &v->nodes[i].p;
        if (p->kind == RILL__GNODE_KERNEL)
            atomic_fetch_sub(&p->u.kernel.kernel->graph_refs, 1);
        else if (p->kind == RILL__GNODE_RECORD || p->kind == RILL__GNODE_WAIT)
            rill__event_unref(p->u.event.event);
        else if (p->kind == RILL__GNODE_EXTERN)
            p->u.ext.ops->unref(p->u.ext.obj);
    }
    rill__free(v->nodes);
    rill__free(v->arena);
    rill__free(v);
}

void rill__xparams_unref(rill__xparams *v) {
    /* acq_rel: the last release sees every launch's reads done. */
    if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
        return;
    rill__graph_exec *x = v->exec;
    xparams_free(v, x->num_nodes);
    rill__exec_unref(x);
}

void rill__execs_shutdown(rill__runtime *rt) {
    /* Every stream has drained: no launch holds an exec or a parameter
     * set, and each exec left has only its current set. */
    while (rt->execs != NULL) {
        rill__graph_exec *x = RILL__OWNER(rt->execs, rill__graph_exec, rt_link);
        atomic_store(&x->magic, RILL__MAGIC_DEAD);
        if (x->params != NULL)
            xparams_free(x->params, x->num_nodes);
        x->params = NULL;
        atomic_store(&x->refs, 1);
        exec_free(x);
    }
}

/* -------------------------------------------------------- instantiation */

/* Lays out the kernel nodes' args and accesses of g in one arena. */
static unsigned char *build_arena(rill__graph *g, rill__xnode *xn) {
    size_t bytes = 0;
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        const rill__gnode_params *p = &g->nodes[i]->p;
        if (p->kind == RILL__GNODE_KERNEL)
            bytes += (p->u.kernel.args_size + 15) / 16 * 16 +
                     p->u.kernel.num_accesses * sizeof(rill_access);
    }
    unsigned char *arena = rill__malloc(bytes > 0 ? bytes : 1);
    if (arena == NULL)
        return NULL;
    size_t off = 0;
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        const rill__gnode_params *p = &g->nodes[i]->p;
        if (p->kind != RILL__GNODE_KERNEL)
            continue;
        xn[i].p.u.kernel.args = arena + off;
        if (p->u.kernel.args_size > 0)
            memcpy(arena + off, p->u.kernel.args, p->u.kernel.args_size);
        off += (p->u.kernel.args_size + 15) / 16 * 16;
        xn[i].p.u.kernel.accesses = (rill_access *)(void *)(arena + off);
        if (p->u.kernel.num_accesses > 0)
            memcpy(arena + off, p->u.kernel.accesses,
                   p->u.kernel.num_accesses * sizeof(rill_access));
        off += p->u.kernel.num_accesses * sizeof(rill_access);
    }
    return arena;
}

static void take_params(rill__xnode *xn, const rill__graph_node *n) {
    const void *args = xn->p.u.kernel.args; /* in the parameter set's arena */
    const rill_access *acc = xn->p.u.kernel.accesses;
    xn->p = n->p;
    if (n->p.kind == RILL__GNODE_KERNEL) {
        xn->p.u.kernel.args = args;
        xn->p.u.kernel.accesses = acc;
    }
}

/* Loads the kernels of graph's kernel nodes on dev (kernel_load), the
 * device an exec of it runs on: a kernel with no body for dev is refused
 * here, before anything is made. */
static rill_status load_kernels(rill__graph *graph, rill__device *dev, const char *fn) {
    for (uint32_t i = 0; i < graph->num_nodes; i++) {
        const rill__gnode_params *p = &graph->nodes[i]->p;
        void *loaded;
        if (p->kind == RILL__GNODE_KERNEL) {
            rill_status st = rill__kernel_load(p->u.kernel.kernel, dev, fn, &loaded);
            if (st != RILL_OK)
                return st;
        }
    }
    return RILL_OK;
}

/* A parameter set of x from graph's nodes. nodes has x's topology filled
 * in; the set owns it from now on (it is freed on failure). Takes the
 * references of the set's nodes and one on x. NULL when out of memory. */
static rill__xparams *xparams_make(rill__graph_exec *x, rill__graph *graph, rill__xnode *nodes) {
    rill__xparams *v = rill__calloc(1, sizeof *v);
    unsigned char *arena = v != NULL ? build_arena(graph, nodes) : NULL;
    if (arena == NULL) {
        rill__free(v);
        rill__free(nodes);
        return NULL;
    }
    v->nodes = nodes;
    v->arena = arena;
    v->exec = x;
    /* state and version are set by the caller, once the backend has the
     * set (graph_prepare, graph_update). */
    v->launch = (rill__graph_launch){.prog = &x->prog, .nodes = nodes, .record_gen = x->record_gen};
    int ordinal = x->dev->base.info.ordinal;
    for (uint32_t i = 0; i < x->num_nodes; i++) {
        rill__xnode *xn = &nodes[i];
        take_params(xn, graph->nodes[i]);
        if (xn->p.kind == RILL__GNODE_KERNEL) {
            /* Loaded by load_kernels before the set was made. */
            xn->p.u.kernel.loaded = xn->p.u.kernel.kernel->loaded[ordinal];
            atomic_fetch_add(&xn->p.u.kernel.kernel->graph_refs, 1);
        } else if (xn->p.kind == RILL__GNODE_RECORD || xn->p.kind == RILL__GNODE_WAIT) {
            atomic_fetch_add(&xn->p.u.event.event->refs, 1);
        } else if (xn->p.kind == RILL__GNODE_EXTERN) {
            xn->p.u.ext.ops->ref(xn->p.u.ext.obj);
        }
    }
    atomic_init(&v->refs, 1);
    /* relaxed: the caller holds x (its owner's reference or a set's); the
     * release that frees x is the acq_rel in rill__exec_unref. */
    atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
    return v;
}

/* Fills in the topology of graph's nodes (predecessor counts, successor
 * lists in node order) and x's roots and event nodes. */
static void build_topology(rill__graph_exec *x, rill__graph *graph, rill__xnode *nodes) {
    uint32_t n = graph->num_nodes;
    for (uint32_t i = 0; i < n; i++) {
        const rill__graph_node *gn = graph->nodes[i];
        nodes[i].graph_index = i;
        nodes[i].num_preds = gn->num_deps;
        if (gn->num_deps == 0)
            x->roots[x->num_roots++] = i;
        if (gn->p.kind == RILL__GNODE_RECORD || gn->p.kind == RILL__GNODE_WAIT)
            x->event_nodes[x->num_event_nodes++] = i;
        /* A host function, or a collective (other processes), may wait
         * for anything. */
        if (gn->p.kind == RILL__GNODE_HOST || gn->p.kind == RILL__GNODE_EXTERN)
            x->opaque = 1;
        if (gn->p.kind == RILL__GNODE_EXTERN) {
            nodes[i].ext_slot = x->num_ext;
            x->ext_nodes[x->num_ext++] = i;
        }
        for (uint32_t j = 0; j < gn->num_deps; j++)
            nodes[gn->deps[j]].num_succ++;
    }
    /* Successor lists: counted above, then filled in node order. */
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        nodes[i].succ_begin = off;
        off += nodes[i].num_succ;
        nodes[i].num_succ = 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        const rill__graph_node *gn = graph->nodes[i];
        for (uint32_t j = 0; j < gn->num_deps; j++) {
            rill__xnode *d = &nodes[gn->deps[j]];
            x->succ[d->succ_begin + d->num_succ++] = i;
        }
    }
}

static rill_status instantiate_locked(rill__graph *graph, rill__device *dev, const char *fn,
                                      rill_graph_exec **out);

rill_status rill_graph_instantiate(rill_graph *graph_h, rill_graph_exec **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_instantiate";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_graph_exec * to receive the exec", fn);
    *out = NULL;
    rill__graph *graph;
    rill_status st = rill__graph_resolve(graph_h, fn, &graph);
    if (st != RILL_OK)
        return st;
    /* The exec is for the calling thread's current device, as a CUDA graph
     * exec is for its context's: launches go to that device's streams. */
    rill__device *dev;
    st = rill__device_resolve(NULL, fn, &dev);
    if (st != RILL_OK)
        return st;
    rill__mutex_lock(&graph->lock);
    st = instantiate_locked(graph, dev, fn, out);
    rill__mutex_unlock(&graph->lock);
    return st;
}

/* rill_graph_instantiate's work on the graph (graph->lock held). */
static rill_status instantiate_locked(rill__graph *graph, rill__device *dev, const char *fn,
                                      rill_graph_exec **out) {
    rill_status st = load_kernels(graph, dev, fn);
    if (st != RILL_OK)
        return st;
    uint32_t n = graph->num_nodes, num_events = 0, num_ext = 0;
    size_t edges = 0;
    for (uint32_t i = 0; i < n; i++) {
        edges += graph->nodes[i]->num_deps;
        rill__gnode_kind k = graph->nodes[i]->p.kind;
        num_events += k == RILL__GNODE_RECORD || k == RILL__GNODE_WAIT;
        num_ext += k == RILL__GNODE_EXTERN;
    }
    rill__graph_exec *x = rill__calloc(1, sizeof *x);
    if (x == NULL || !rill__handle_open(RILL__HANDLE_EXEC, x, (void **)&x->handle)) {
        rill__free(x);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    size_t m = n > 0 ? n : 1;
    rill__xnode *nodes = rill__calloc(m, sizeof *nodes);
    x->succ = rill__malloc((edges > 0 ? edges : 1) * sizeof *x->succ);
    x->roots = rill__malloc(m * sizeof *x->roots);
    /* One array: the event nodes, then the extern nodes. */
    x->event_nodes = rill__malloc((num_events + num_ext > 0 ? num_events + num_ext : 1) *
                                  sizeof *x->event_nodes);
    x->ext_nodes = x->event_nodes + num_events;
    x->record_gen = rill__calloc(m, sizeof *x->record_gen);
    if (nodes == NULL || x->succ == NULL || x->roots == NULL || x->event_nodes == NULL ||
        x->record_gen == NULL) {
        rill__free(nodes);
        exec_arrays_free(x);
        rill__handle_close(x->handle);
        rill__free(x);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: out of host memory for an exec of %u nodes; no exec was created", fn,
                          n);
    }
    x->num_nodes = n;
    build_topology(x, graph, nodes);
    x->prog = (rill__gprog){.num_nodes = n,
                            .succ = x->succ,
                            .roots = x->roots,
                            .num_roots = x->num_roots,
                            .num_ext = x->num_ext};
    x->dev = dev;
    atomic_init(&x->refs, 1);
    x->params = xparams_make(x, graph, nodes);
    if (x->params == NULL) {
        exec_arrays_free(x);
        rill__handle_close(x->handle);
        rill__free(x);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: out of host memory for an exec of %u nodes; no exec was created", fn,
                          n);
    }
    /* The backend builds its state from the first set's nodes. */
    st = dev->ops->graph_prepare(dev, &x->prog, x->params->nodes, &x->backend);
    if (st != RILL_OK) {
        xparams_free(x->params, n);
        exec_arrays_free(x);
        rill__handle_close(x->handle);
        rill__free(x);
        return rill__fail_from(st, fn);
    }
    x->params->launch.state = x->backend;
    x->pool = graph->pool;
    if (x->pool != NULL)
        rill__gpool_ref(x->pool);
    rill__mutex_init_ranked(&x->lock, RILL__RANK_EXEC);
    atomic_store(&x->magic, RILL__MAGIC_EXEC);
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__mutex_lock(&rt->lock);
    rill__list_push(&rt->execs, &x->rt_link);
    rill__mutex_unlock(&rt->lock);
    *out = x->handle;
    return RILL_OK;
}

/* Execs come from rill_graph_instantiate. */
static rill_status resolve_exec(rill_graph_exec *handle, const char *fn, rill__graph_exec **out) {
    rill__graph_exec *x = rill__handle_get(handle, RILL__HANDLE_EXEC);
    if (x == NULL)
        return rill__handle_fail(fn, "the exec", handle, RILL__HANDLE_EXEC);
    *out = x;
    return RILL_OK;
}

static rill_status fail_destroyed(const char *fn) {
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: the exec was destroyed by another thread during the call", fn);
}

/* The owner's hold on an exec whose handle closed, once no call uses it. */
static void release_exec(void *x) {
    rill__graph_exec *exec = x;
    /* Pending launches hold their own parameter sets, which hold the
     * exec. */
    rill__mutex_lock(&exec->lock);
    rill__xparams *v = exec->params;
    exec->params = NULL;
    rill__mutex_unlock(&exec->lock);
    rill__xparams_unref(v);
    rill__exec_unref(exec);
}

rill_status rill_graph_exec_destroy(rill_graph_exec *exec_h) {
    RILL_CALL_SCOPE();
    rill__graph_exec *exec = NULL;
    rill_status st = resolve_exec(exec_h, "rill_graph_exec_destroy", &exec);
    if (st != RILL_OK)
        return st;
    /* Calls that found it before may still launch or update it. */
    return rill__destroy(&exec->magic, RILL__MAGIC_EXEC, exec->handle, release_exec, exec,
                         RILL__RETIRE_PROMPT, "rill_graph_exec_destroy", "exec");
}

static const char *kind_name(rill__gnode_kind k) {
    static const char *const names[] = {"?",         "kernel", "host",         "memcpy",
                                        "memset",    "empty",  "event record", "event wait",
                                        "collective"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* Checks that graph has the topology and node kinds of x, whose nodes
 * (of any parameter set) are xn. O(nodes + edges). */
static rill_status check_topology(const rill__graph_exec *x, const rill__xnode *xn,
                                  rill__graph *graph, const char *fn) {
    if (graph->num_nodes != x->num_nodes)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the graph has %u nodes and the exec %u; update takes a graph of "
                          "the same topology, instantiate a new exec for another one",
                          fn, graph->num_nodes, x->num_nodes);
    size_t edges = 0;
    for (uint32_t i = 0; i < graph->num_nodes; i++) {
        const rill__graph_node *gn = graph->nodes[i];
        if (gn->p.kind != xn[i].p.kind)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: node %u is a %s node in the graph and a %s node in the exec; "
                              "node kinds must match",
                              fn, i, kind_name(gn->p.kind), kind_name(xn[i].p.kind));
        if (gn->num_deps != xn[i].num_preds)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: node %u depends on %u nodes in the graph and on %u in the "
                              "exec; the dependencies must match",
                              fn, i, gn->num_deps, xn[i].num_preds);
        edges += gn->num_deps;
    }
    /* Same dependencies: with the same count of distinct predecessors per
     * node, it is enough that every edge of the graph is one of the exec.
     * The exec's predecessor lists come from its successor lists, and a
     * node's are stamped with its index + 1 while its deps are checked. */
    uint32_t n = x->num_nodes;
    uint32_t *begin = rill__calloc((size_t)n + 1, sizeof *begin);
    uint32_t *preds = rill__malloc((edges > 0 ? edges : 1) * sizeof *preds);
    uint32_t *stamp = rill__calloc(n > 0 ? n : 1, sizeof *stamp);
    rill_status st = RILL_OK;
    if (begin == NULL || preds == NULL || stamp == NULL) {
        st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++)
        begin[i + 1] = begin[i] + xn[i].num_preds;
    for (uint32_t d = 0; d < n; d++)
        for (uint32_t k = 0; k < xn[d].num_succ; k++) {
            uint32_t i = x->succ[xn[d].succ_begin + k];
            preds[begin[i] + stamp[i]++] = d; /* stamp counts, for now */
        }
    memset(stamp, 0, n * sizeof *stamp);
    for (uint32_t i = 0; i < n && st == RILL_OK; i++) {
        for (uint32_t k = begin[i]; k < begin[i + 1]; k++)
            stamp[preds[k]] = i + 1;
        const rill__graph_node *gn = graph->nodes[i];
        for (uint32_t j = 0; j < gn->num_deps && st == RILL_OK; j++)
            if (stamp[gn->deps[j]] != i + 1)
                st = rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                                "%s: node %u depends on node %u in the graph but not in the "
                                "exec; the dependencies must match",
                                fn, i, gn->deps[j]);
    }
out:
    rill__free(begin);
    rill__free(preds);
    rill__free(stamp);
    return st;
}

rill_status rill_graph_exec_update(rill_graph_exec *exec_h, rill_graph *graph_h) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_exec_update";
    rill__graph_exec *exec = NULL;
    rill__graph *graph;
    rill_status st = resolve_exec(exec_h, fn, &exec);
    if (st == RILL_OK)
        st = rill__graph_resolve(graph_h, fn, &graph);
    if (st != RILL_OK)
        return st;
    /* The current set, held while the new one is made from it: its
     * topology is the exec's. */
    rill__mutex_lock(&exec->lock);
    rill__xparams *cur = exec->params;
    if (cur != NULL)
        /* relaxed: exec->lock and the exec's reference keep cur alive */
        atomic_fetch_add_explicit(&cur->refs, 1, memory_order_relaxed);
    rill__mutex_unlock(&exec->lock);
    if (cur == NULL)
        return fail_destroyed(fn);
    rill__mutex_lock(&graph->lock);
    st = check_topology(exec, cur->nodes, graph, fn);
    if (st == RILL_OK)
        st = load_kernels(graph, exec->dev, fn);
    rill__xparams *v = NULL;
    if (st == RILL_OK) {
        size_t bytes = (exec->num_nodes > 0 ? exec->num_nodes : 1) * sizeof(rill__xnode);
        rill__xnode *nodes = rill__malloc(bytes);
        if (nodes != NULL) {
            memcpy(nodes, cur->nodes, exec->num_nodes * sizeof *nodes);
            v = xparams_make(exec, graph, nodes);
        }
        if (v == NULL)
            st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    rill__mutex_unlock(&graph->lock);
    if (v != NULL) {
        /* Launches submitted from now on take v; those already submitted,
         * running or not, hold the set they were submitted with. The
         * backend readies v under the lock, so versions follow the order
         * in which sets become current. */
        rill__mutex_lock(&exec->lock);
        rill__xparams *old = exec->params;
        if (old == NULL) {
            st = fail_destroyed(fn);
        } else {
            v->launch.state = exec->backend;
            v->launch.version = old->launch.version + 1;
            rill__device *dev = exec->dev;
            if (dev->ops->graph_update != NULL)
                st = dev->ops->graph_update(dev, exec->backend, v->nodes, v->launch.version);
            if (st == RILL_OK)
                exec->params = v;
            else
                st = rill__fail_from(st, fn);
        }
        rill__mutex_unlock(&exec->lock);
        rill__xparams_unref(st == RILL_OK ? old : v);
    }
    rill__xparams_unref(cur);
    return st;
}

/* --------------------------------------------------------------- launch */

/* Records the exec's event record nodes at (stream, seq of the launch):
 * the events complete when the launch does. exec->lock held. */
static void record_events(rill__graph_exec *x, const rill__xparams *v, rill__stream *s,
                          uint64_t seq) {
    for (uint32_t k = 0; k < x->num_event_nodes; k++) {
        uint32_t i = x->event_nodes[k];
        if (v->nodes[i].p.kind != RILL__GNODE_RECORD)
            continue;
        rill__event *e = v->nodes[i].p.u.event.event;
        rill__spinlock_lock(&e->lock);
        rill__stream *old = e->stream;
        rill__stream_ref(s);
        e->dev = s->q.dev;
        e->stream = s;
        e->seq = seq;
        e->gen++;
        e->cap_id = 0;
        e->ts_valid = 0;
        atomic_store_explicit(&x->record_gen[i], e->gen, memory_order_relaxed);
        rill__spinlock_unlock(&e->lock);
        if (old != NULL)
            rill__stream_unref(old);
    }
}

/* The waits a launch makes before its command, exec->lock held: for the
 * memory its capture allocated, and for its event wait nodes (snapshots
 * taken now, as rill_stream_wait_event does; the node holds its event,
 * so a destroyed event is waited for as last recorded). */
static rill_status launch_waits(rill__graph_exec *x, const rill__xparams *v, rill__stream *stream,
                                const char *fn) {
    for (uint32_t k = 0; k < x->num_event_nodes; k++) {
        const rill__xnode *xn = &v->nodes[x->event_nodes[k]];
        if (xn->p.kind == RILL__GNODE_RECORD && xn->p.u.event.event->dev != NULL &&
            xn->p.u.event.event->dev != stream->q.dev)
            return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                              "%s: node %u records an event bound to another device", fn,
                              xn->graph_index);
    }
    if (x->pool != NULL) {
        rill__stream *ps;
        uint64_t pseq;
        rill__gpool_ready_point(x->pool, &ps, &pseq);
        if (ps != NULL) {
            /* The pool's own stream: its waits order memory only. */
            rill_status st = rill__stream_wait_order(stream, ps, pseq, fn);
            rill__stream_unref(ps);
            if (st != RILL_OK)
                return st;
        }
    }
    for (uint32_t k = 0; k < x->num_event_nodes; k++) {
        const rill__xnode *xn = &v->nodes[x->event_nodes[k]];
        if (xn->p.kind != RILL__GNODE_WAIT)
            continue;
        rill_status st = rill__event_wait(stream, xn->p.u.event.event, fn);
        if (st != RILL_OK)
            return st;
    }
    return RILL_OK;
}

/* Drops the extern work of a launch that was not run (ext[k] NULL: the
 * backend started that node) and frees ext. withdraw: the launch was never
 * submitted. */
static void drop_ext(const rill__graph_exec *x, const rill__xnode *nodes, void **ext,
                     bool withdraw) {
    if (ext == NULL)
        return;
    for (uint32_t k = 0; k < x->num_ext; k++) {
        if (ext[k] == NULL)
            continue;
        const rill__extern_call *call = &nodes[x->ext_nodes[k]].p.u.ext;
        if (withdraw)
            call->ops->withdraw(ext[k]);
        else
            call->ops->drop(ext[k]);
    }
    rill__free(ext);
}

/* The release of a launch command: drops what it did not run and its
 * parameter set. */
static void release_launch(rill__graph_launch *launch, void **ext) {
    rill__xparams *v = rill__xparams_of(launch);
    drop_ext(v->exec, v->nodes, ext, false);
    rill__xparams_unref(v);
}

/* Issues the extern work of a launch of v on stream, in node order, into
 * *out (NULL when the exec has none). */
static rill_status issue_ext(const rill__graph_exec *x, const rill__xparams *v,
                             rill__stream *stream, const char *fn, void ***out) {
    *out = NULL;
    if (x->num_ext == 0)
        return RILL_OK;
    void **ext = rill__calloc(x->num_ext, sizeof *ext);
    if (ext == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (uint32_t k = 0; k < x->num_ext; k++) {
        const rill__xnode *xn = &v->nodes[x->ext_nodes[k]];
        rill_status st = xn->p.u.ext.ops->issue(xn->p.u.ext.obj, stream, &ext[k]);
        if (st != RILL_OK) {
            drop_ext(x, v->nodes, ext, true);
            char where[96];
            snprintf(where, sizeof where, "%s (graph node %u)", fn, xn->graph_index);
            return rill__fail_from(st, where);
        }
    }
    *out = ext;
    return RILL_OK;
}

/* Long (94 lines) because every step after the exec's lock must unwind under that one lock. */
rill_status rill_graph_launch(rill_graph_exec *exec_h, rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_launch";
    rill__graph_exec *exec = NULL;
    rill_status st = resolve_exec(exec_h, fn, &exec);
    if (st != RILL_OK)
        return st;
    rill__stream *stream;
    st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    if (rill__stream_capturing(stream))
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: the stream is capturing; launching a graph into a capture is not "
                          "supported: capture its work directly",
                          fn);
    if (stream->q.dev != exec->dev)
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "%s: the exec was instantiated for device %d and the stream belongs to "
                          "device %d; launch it on a stream of device %d, or instantiate the graph "
                          "again with device %d current",
                          fn, exec->dev->base.info.ordinal, stream->q.dev->base.info.ordinal,
                          exec->dev->base.info.ordinal, stream->q.dev->base.info.ordinal);
    /* Before the exec's lock; without parking, which would let the exec go
     * while the call waits. */
    st = rill__stream_make_room(stream, false, fn);
    if (st != RILL_OK)
        return st;
    /* The lock serializes the launches of one exec: each takes the current
     * parameter set and comes after the one before. */
    rill__mutex_lock(&exec->lock);
    rill__xparams *v = exec->params;
    if (v == NULL) {
        rill__mutex_unlock(&exec->lock);
        return fail_destroyed(fn);
    }
    st = launch_waits(exec, v, stream, fn);
    if (st != RILL_OK) {
        rill__mutex_unlock(&exec->lock);
        return st;
    }
    /* A host or extern node may wait for anything, as a host function does. */
    rill__cmd cmd = {.kind = RILL__CMD_GRAPH, .flags = exec->opaque ? RILL__CMD_OPAQUE : 0};
    cmd.u.graph.launch = &v->launch;
    cmd.u.graph.release = release_launch;
    st = issue_ext(exec, v, stream, fn, &cmd.u.graph.ext);
    if (st != RILL_OK) {
        rill__mutex_unlock(&exec->lock);
        return st;
    }
    /* The previous launch on another stream: this one waits for it to end,
     * however it ended (see rill__cmd). On the same stream, stream order
     * does it. */
    rill__stream *ls = exec->last_stream;
    if (ls != NULL && ls != stream &&
        atomic_load_explicit(&ls->q.done_seq, memory_order_acquire) < exec->last_seq) {
        rill__stream_ref(ls);
        cmd.u.graph.after_stream = ls;
        cmd.u.graph.after_seq = exec->last_seq;
        if (rill__stream_opaque_pending(ls))
            cmd.flags |= RILL__CMD_OPAQUE; /* as a wait behind it would be */
    }
    /* relaxed: exec->lock and the exec's reference keep v alive; the
     * command's release is the acq_rel in rill__xparams_unref. */
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    /* Launches of one exec run one after another, whether or not the
     * previous one is done yet. */
    if (ls != NULL && ls != stream && rill__san_active())
        rill__san()->order(stream, ls, exec->last_seq, false);
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    if (st != RILL_OK) {
        atomic_fetch_sub_explicit(&v->refs, 1, memory_order_relaxed);
        drop_ext(exec, v->nodes, cmd.u.graph.ext, true);
        if (cmd.u.graph.after_stream != NULL)
            rill__stream_unref(cmd.u.graph.after_stream);
        rill__mutex_unlock(&exec->lock);
        return st;
    }
    if (cmd.u.graph.after_stream != NULL)
        rill__stream_clock_note(stream, ls->q.id, exec->last_seq);
    if (seq != 0 && rill__san_active())
        rill__san()->command(stream, seq, &cmd, 0);
    record_events(exec, v, stream, seq);
    if (ls != stream) {
        if (ls != NULL)
            rill__stream_unref(ls);
        rill__stream_ref(stream);
        exec->last_stream = stream;
    }
    exec->last_seq = seq;
    rill__mutex_unlock(&exec->lock);
    return RILL_OK;
}
