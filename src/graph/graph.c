/* SPDX-License-Identifier: MIT */
/* Graphs built by hand or by capture, and their DOT drawing (execs are in
 * exec.c).
 *
 * A node may only depend on nodes that exist when it is added, so the
 * order of the node list is a topological order and a graph never has a
 * cycle: instantiation keeps that order and only inverts the dependency
 * lists into successor lists. Adding a node costs O(1 + its deps): a
 * dependency is checked against the graph's slabs (graph.h), not against
 * its nodes. */
#include "graph/graph.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "mem/memory.h"
#include "mem/pool.h"
#include "util/alloc.h"
#include "util/status.h"

/* ------------------------------------------------------------- lifetime */

static void params_release(rill__gnode_params *p) {
    switch (p->kind) {
    case RILL__GNODE_KERNEL:
        atomic_fetch_sub(&p->u.kernel.kernel->graph_refs, 1);
        rill__free((void *)p->u.kernel.args); /* owned by the node */
        rill__free((void *)p->u.kernel.accesses);
        break;
    case RILL__GNODE_RECORD:
    case RILL__GNODE_WAIT:
        rill__event_unref(p->u.event.event);
        break;
    case RILL__GNODE_EXTERN:
        p->u.ext.ops->unref(p->u.ext.obj);
        break;
    default:
        break;
    }
}

static void graph_free(rill__graph *g) {
    rill__handle_close(g->handle);
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        rill__handle_close(g->nodes[i]->handle); /* NULL for captured nodes: nothing */
        params_release(&g->nodes[i]->p);
        rill__free(g->nodes[i]->deps);
    }
    for (uint32_t k = 0; k < g->num_slabs; k++)
        rill__free(g->slabs[k]);
    rill__free(g->nodes);
    if (g->pool != NULL)
        g->pool_release(g->pool); /* the part that gave the graph its pool frees it */
    rill__mutex_destroy(&g->lock);
    rill__free(g);
}

static void graph_unlink(rill__runtime *rt, rill__graph *g) {
    rill__mutex_lock(&rt->lock);
    rill__list_remove(&rt->graphs, &g->rt_link);
    rill__mutex_unlock(&rt->lock);
}

rill_status rill__graph_new(rill__graph **out) {
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return st;
    rill__graph *g = rill__calloc(1, sizeof *g);
    if (g == NULL || !rill__handle_open(RILL__HANDLE_GRAPH, g, (void **)&g->handle)) {
        rill__free(g);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "rill_graph_create: out of host memory; no graph was created");
    }
    rill__mutex_init_ranked(&g->lock, RILL__RANK_GRAPH);
    atomic_store(&g->magic, RILL__MAGIC_GRAPH);
    rill__mutex_lock(&rt->lock);
    rill__list_push(&rt->graphs, &g->rt_link);
    rill__mutex_unlock(&rt->lock);
    *out = g;
    return RILL_OK;
}

/* ------------------------------------------------------------ shutdown */

void rill__graphs_shutdown(rill__runtime *rt) {
    while (rt->graphs != NULL) {
        rill__graph *g = RILL__OWNER(rt->graphs, rill__graph, rt_link);
        rill__list_remove(&rt->graphs, &g->rt_link);
        atomic_store(&g->magic, RILL__MAGIC_DEAD);
        graph_free(g);
    }
}

/* ------------------------------------------------------------ building */

rill_status rill__graph_resolve(rill_graph *handle, const char *fn, rill__graph **out) {
    /* Graphs come from rill_graph_create or rill_stream_end_capture. */
    rill__graph *g = rill__handle_get(handle, RILL__HANDLE_GRAPH);
    if (g == NULL)
        return rill__handle_fail(fn, "the graph", handle, RILL__HANDLE_GRAPH);
    *out = g;
    return RILL_OK;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The index of the first node of slab k. */
static uint64_t slab_first(uint32_t k) {
    return (uint64_t)RILL__GRAPH_SLAB0 * ((UINT64_C(1) << k) - 1);
}

/* The storage for node g->num_nodes, in the last slab or a new one; NULL
 * when out of memory (or when the graph is full). */
static rill__graph_node *next_slot(rill__graph *g) {
    uint32_t k = g->num_slabs;
    if (k == 0 || g->num_nodes == slab_first(k)) {
        if (k == RILL__GRAPH_SLABS)
            return NULL;
        g->slabs[k] = rill__malloc(((size_t)RILL__GRAPH_SLAB0 << k) * sizeof(rill__graph_node));
        if (g->slabs[k] == NULL)
            return NULL;
        g->num_slabs = ++k;
    }
    return &g->slabs[k - 1][g->num_nodes - slab_first(k - 1)];
}

/* The index of the node that handle d names when it is a node of g, else
 * -1: a node's handle is open while its graph lives (graph_free closes it),
 * so a node it resolves to may be read. */
static int64_t node_index(const rill__graph *g, const rill_graph_node *d) {
    const rill__graph_node *n = rill__handle_get(d, RILL__HANDLE_NODE);
    return n != NULL && n->graph == g ? (int64_t)n->index : -1;
}

rill_status rill__graph_add(rill__graph *g, const uint32_t *deps, uint32_t num_deps,
                            const rill__gnode_params *params, rill__stream *captured_from,
                            const char *fn, rill__graph_node **out) {
    rill__graph_node *n = next_slot(g);
    if (n == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: out of host memory adding a graph node; the graph is unchanged", fn);
    memset(n, 0, sizeof *n);
    if (num_deps > 0) {
        n->deps = rill__malloc(num_deps * sizeof *n->deps);
        if (n->deps == NULL)
            goto oom;
        memcpy(n->deps, deps, num_deps * sizeof *n->deps);
        qsort(n->deps, num_deps, sizeof *n->deps, cmp_u32);
        uint32_t k = 0; /* drop duplicates: each dependency counts once */
        for (uint32_t i = 0; i < num_deps; i++)
            if (k == 0 || n->deps[k - 1] != n->deps[i])
                n->deps[k++] = n->deps[i];
        n->num_deps = n->cap_deps = k;
    }
    n->p = *params;
    if (params->kind == RILL__GNODE_KERNEL) {
        n->p.u.kernel.args = NULL;
        n->p.u.kernel.accesses = NULL;
        n->p.u.kernel.loaded = NULL; /* a graph is for no device: its execs load */
        size_t as = params->u.kernel.args_size, na = params->u.kernel.num_accesses;
        void *args = as > 0 ? rill__malloc(as) : NULL;
        n->p.u.kernel.args = args;
        if (as > 0 && args == NULL)
            goto oom;
        rill_access *acc = na > 0 ? rill__malloc(na * sizeof *acc) : NULL;
        n->p.u.kernel.accesses = acc;
        if (na > 0 && acc == NULL)
            goto oom;
        if (as > 0)
            memcpy(args, params->u.kernel.args, as);
        if (na > 0)
            memcpy(acc, params->u.kernel.accesses, na * sizeof *acc);
    }
    if (g->num_nodes == g->cap_nodes) {
        uint32_t cap = g->cap_nodes == 0 ? 16 : 2 * g->cap_nodes;
        rill__graph_node **nodes = rill__realloc(g->nodes, cap * sizeof *nodes);
        if (nodes == NULL)
            goto oom;
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    if (params->kind == RILL__GNODE_KERNEL)
        atomic_fetch_add(&params->u.kernel.kernel->graph_refs, 1);
    else if (params->kind == RILL__GNODE_RECORD || params->kind == RILL__GNODE_WAIT)
        atomic_fetch_add(&params->u.event.event->refs, 1);
    else if (params->kind == RILL__GNODE_EXTERN)
        params->u.ext.ops->ref(params->u.ext.obj);
    n->graph = g;
    n->index = g->num_nodes;
    if (captured_from != NULL) {
        n->stream_id = captured_from->q.id;
        rill__mutex_lock(&captured_from->err_lock);
        if (captured_from->name[0] != '\0')
            snprintf(n->stream_name, sizeof n->stream_name, "%s", captured_from->name);
        else
            snprintf(n->stream_name, sizeof n->stream_name, "stream %llu",
                     (unsigned long long)captured_from->q.id);
        rill__mutex_unlock(&captured_from->err_lock);
    }
    g->nodes[g->num_nodes++] = n;
    if (out != NULL)
        *out = n;
    return RILL_OK;
oom:
    /* The slot stays free for the next node. */
    if (params->kind == RILL__GNODE_KERNEL) {
        rill__free((void *)n->p.u.kernel.args);
        rill__free((void *)n->p.u.kernel.accesses);
    }
    rill__free(n->deps);
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                      "%s: out of host memory adding a graph node; the graph is unchanged", fn);
}

static rill_status add_node_locked(rill__graph *graph, rill_graph_node *const *deps,
                                   size_t num_deps, uint32_t *idx, const rill__gnode_params *p,
                                   const char *fn, rill_graph_node **out);

/* Validates a hand-made node's dependency list and adds the node, with a
 * handle for the caller. */
static rill_status add_node(rill_graph *graph_h, rill_graph_node *const *deps, size_t num_deps,
                            const rill__gnode_params *p, const char *fn, rill_graph_node **out) {
    if (out != NULL)
        *out = NULL;
    rill__graph *graph;
    rill_status st = rill__graph_resolve(graph_h, fn, &graph);
    if (st != RILL_OK)
        return st;
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_graph_node * to receive the node", fn);
    if (num_deps > 0 && deps == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: num_deps is %zu but deps is NULL; pass the nodes it depends on, or 0 for none", fn,
            num_deps);
    if (num_deps > UINT32_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %zu dependencies, more than a node can have (2^32 - 1); join them "
                          "through empty nodes",
                          fn, num_deps);
    uint32_t local[16] = {0};
    uint32_t *idx = num_deps <= 16 ? local : rill__malloc(num_deps * sizeof *idx);
    if (idx == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    rill__mutex_lock(&graph->lock);
    st = add_node_locked(graph, deps, num_deps, idx, p, fn, out);
    rill__mutex_unlock(&graph->lock);
    if (idx != local)
        rill__free(idx);
    return st;
}

/* add_node's work on the graph's nodes (graph->lock held); idx has room
 * for num_deps indices. */
static rill_status add_node_locked(rill__graph *graph, rill_graph_node *const *deps,
                                   size_t num_deps, uint32_t *idx, const rill__gnode_params *p,
                                   const char *fn, rill_graph_node **out) {
    for (size_t i = 0; i < num_deps; i++) {
        /* A node pointer is valid when it lies in the graph's slabs. */
        int64_t k = node_index(graph, deps[i]);
        if (k < 0) {
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: dependency %zu is NULL, a node of another (or a destroyed) "
                              "graph, or no node; pass nodes this graph returned",
                              fn, i);
        }
        idx[i] = (uint32_t)k;
    }
    rill__graph_node *n = NULL;
    rill_status st = rill__graph_add(graph, idx, (uint32_t)num_deps, p, NULL, fn, &n);
    if (st != RILL_OK)
        return st;
    if (!rill__handle_open(RILL__HANDLE_NODE, n, (void **)&n->handle))
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: out of memory for the node's handle; the node was added to the "
                          "graph, which runs it, but it cannot be named as a dependency",
                          fn);
    *out = n->handle;
    return RILL_OK;
}

rill_status rill_graph_create(rill_graph **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_graph_create: out is NULL; pass the address of a rill_graph * to "
                          "receive the graph");
    *out = NULL;
    rill__graph *g;
    rill_status st = rill__graph_new(&g);
    if (st == RILL_OK)
        *out = g->handle;
    return st;
}

static void release_graph(void *g) {
    rill__graph_destroy(g);
}

rill_status rill_graph_destroy(rill_graph *graph_h) {
    RILL_CALL_SCOPE();
    rill__graph *graph;
    rill_status st = rill__graph_resolve(graph_h, "rill_graph_destroy", &graph);
    if (st != RILL_OK)
        return st;
    /* Its nodes' handles close when it goes. */
    return rill__destroy(&graph->magic, RILL__MAGIC_GRAPH, graph->handle, release_graph, graph,
                         RILL__RETIRE_PROMPT, "rill_graph_destroy", "graph");
}

void rill__graph_destroy(rill__graph *g) {
    atomic_store(&g->magic, RILL__MAGIC_DEAD);
    rill__runtime *rt;
    rill__runtime_get(&rt);
    graph_unlink(rt, g);
    graph_free(g);
}

rill_status rill_graph_add_kernel_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                       size_t num_deps, rill_kernel *kernel_h,
                                       const rill_launch *launch, rill_graph_node **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_add_kernel_node";
    if (out != NULL)
        *out = NULL;
    rill__kernel *kernel = NULL;
    rill_status st = rill__launch_check(kernel_h, launch, fn, &kernel);
    if (st != RILL_OK)
        return st;
    /* A node refused now rather than at instantiation: the current device
     * (where the graph's exec will run) must be able to run the kernel. */
    rill__device *current;
    st = rill__device_resolve(NULL, fn, &current);
    void *loaded;
    if (st == RILL_OK)
        st = rill__kernel_load(kernel, current, fn, &loaded);
    if (st != RILL_OK)
        return st;
    rill__gnode_params p = {.kind = RILL__GNODE_KERNEL};
    p.u.kernel.kernel = kernel;
    p.u.kernel.grid = launch->grid;
    p.u.kernel.block = launch->block;
    p.u.kernel.args = launch->args;
    p.u.kernel.args_size = launch->args_size;
    p.u.kernel.accesses = launch->accesses;
    p.u.kernel.num_accesses = launch->num_accesses;
    return add_node(graph_h, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_host_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                     size_t num_deps, rill_host_fn fn_, void *user_data,
                                     rill_graph_node **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_add_host_node";
    if (out != NULL)
        *out = NULL;
    if (fn_ == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: fn is NULL; pass the host function the node runs", fn);
    rill__gnode_params p = {.kind = RILL__GNODE_HOST};
    p.u.host.fn = fn_;
    p.u.host.user_data = user_data;
    return add_node(graph_h, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_memcpy_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                       size_t num_deps, void *dst, const void *src, size_t bytes,
                                       rill_graph_node **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_add_memcpy_node";
    if (out != NULL)
        *out = NULL;
    /* As rill_memcpy_async checks a copy it captures, and with the devices
     * of both sides, as a command carries them. */
    rill__gnode_params p = {.kind = RILL__GNODE_COPY};
    rill_status st =
        rill__mem_check_copy(dst, src, bytes, fn, &p.u.copy.src_dev, &p.u.copy.dst_dev);
    if (st != RILL_OK)
        return st;
    p.u.copy.dst = dst;
    p.u.copy.src = src;
    p.u.copy.bytes = bytes;
    return add_node(graph_h, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_memset_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                       size_t num_deps, void *dst, int value, size_t bytes,
                                       rill_graph_node **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_add_memset_node";
    if (out != NULL)
        *out = NULL;
    if (dst == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: dst is NULL; pass the memory to set",
                          fn);
    rill__device *dev;
    rill_status st = rill__mem_check_access(fn, "dst", NULL, dst, bytes, &dev);
    if (st != RILL_OK)
        return st;
    rill__gnode_params p = {.kind = RILL__GNODE_SET};
    p.u.set.dst = dst;
    p.u.set.value = value;
    p.u.set.bytes = bytes;
    return add_node(graph_h, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_empty_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                      size_t num_deps, rill_graph_node **out) {
    RILL_CALL_SCOPE();
    rill__gnode_params p = {.kind = RILL__GNODE_EMPTY};
    return add_node(graph_h, deps, num_deps, &p, "rill_graph_add_empty_node", out);
}

static rill_status add_event_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                  size_t num_deps, rill_event *event_h, rill__gnode_kind kind,
                                  const char *fn, rill_graph_node **out) {
    if (out != NULL)
        *out = NULL;
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, fn, &event);
    if (st != RILL_OK)
        return st;
    if (event->flags & RILL_EVENT_INTERPROCESS)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: interprocess events cannot be graph nodes; record or wait on them "
                          "with rill_event_record and rill_stream_wait_event",
                          fn);
    rill__gnode_params p = {.kind = kind};
    p.u.event.event = event;
    p.u.event.timing = (event->flags & RILL_EVENT_TIMING) != 0;
    return add_node(graph_h, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_event_record_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                             size_t num_deps, rill_event *event_h,
                                             rill_graph_node **out) {
    RILL_CALL_SCOPE();
    return add_event_node(graph_h, deps, num_deps, event_h, RILL__GNODE_RECORD,
                          "rill_graph_add_event_record_node", out);
}

rill_status rill_graph_add_event_wait_node(rill_graph *graph_h, rill_graph_node *const *deps,
                                           size_t num_deps, rill_event *event_h,
                                           rill_graph_node **out) {
    RILL_CALL_SCOPE();
    return add_event_node(graph_h, deps, num_deps, event_h, RILL__GNODE_WAIT,
                          "rill_graph_add_event_wait_node", out);
}

rill_status rill_graph_node_count(rill_graph *graph_h, size_t *out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_graph_node_count: out is NULL; pass the address of a size_t to "
                          "receive the count");
    *out = 0;
    rill__graph *graph;
    rill_status st = rill__graph_resolve(graph_h, "rill_graph_node_count", &graph);
    if (st == RILL_OK) {
        rill__mutex_lock(&graph->lock);
        *out = graph->num_nodes;
        rill__mutex_unlock(&graph->lock);
    }
    return st;
}

/* ----------------------------------------------------------------- DOT */

static const char *const palette[] = {"#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6",
                                      "#fb9a99", "#ffff99", "#8dd3c7", "#bebada"};

/* Writes s as a DOT string body (quotes and backslashes escaped). */
static void dot_escape(FILE *f, const char *s) {
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
}

static void dot_label(FILE *f, const rill__graph_node *n) {
    const rill__gnode_params *p = &n->p;
    if (n->op_name != NULL) {
        dot_escape(f, n->op_name);
        fprintf(f, "\\n");
    }
    switch (p->kind) {
    case RILL__GNODE_KERNEL:
        dot_escape(f, p->u.kernel.kernel->image.name);
        fprintf(f, "\\ngrid %ux%ux%u", p->u.kernel.grid.x, p->u.kernel.grid.y, p->u.kernel.grid.z);
        break;
    case RILL__GNODE_HOST:
        fprintf(f, "host function");
        break;
    case RILL__GNODE_COPY:
        fprintf(f, "memcpy\\n%zu bytes", p->u.copy.bytes);
        break;
    case RILL__GNODE_SET:
        fprintf(f, "memset %d\\n%zu bytes", p->u.set.value, p->u.set.bytes);
        break;
    case RILL__GNODE_EMPTY:
        fprintf(f, "empty");
        break;
    case RILL__GNODE_RECORD:
        fprintf(f, "event record");
        break;
    case RILL__GNODE_WAIT:
        fprintf(f, "event wait");
        break;
    case RILL__GNODE_EXTERN: {
        char what[160];
        p->u.ext.ops->describe(p->u.ext.obj, what, sizeof what);
        dot_escape(f, what);
        break;
    }
    }
}

/* How many nodes the search for redundant edges may visit in all: beyond
 * it, the rest of a very large graph is drawn with every edge. */
#define DOT_REDUCE_BUDGET 4000000u

/* Marks (stamp[x] = mark) the proper ancestors of node i's dependencies,
 * with at most *budget visits; false when the budget ran out. */
static bool mark_grand_ancestors(const rill__graph *g, uint32_t i, uint32_t *stamp, uint32_t *stack,
                                 uint32_t mark, uint64_t *budget) {
    const rill__graph_node *n = g->nodes[i];
    uint32_t top = 0;
    for (uint32_t k = 0; k < n->num_deps; k++) {
        const rill__graph_node *d = g->nodes[n->deps[k]];
        for (uint32_t j = 0; j < d->num_deps; j++)
            if (stamp[d->deps[j]] != mark) {
                stamp[d->deps[j]] = mark;
                stack[top++] = d->deps[j];
            }
    }
    while (top > 0) {
        if ((*budget)-- == 0)
            return false;
        const rill__graph_node *x = g->nodes[stack[--top]];
        for (uint32_t j = 0; j < x->num_deps; j++)
            if (stamp[x->deps[j]] != mark) {
                stamp[x->deps[j]] = mark;
                stack[top++] = x->deps[j];
            }
    }
    return true;
}

/* Writes the dependency edges, without those that a longer path implies
 * (a transitive reduction: seed 004's copy -> copy beside copy -> add ->
 * copy). A node's dependency is redundant when it is an ancestor of
 * another of its dependencies. Every edge is kept where there is no memory
 * for the search or its budget is spent. */
static void write_edges(FILE *f, const rill__graph *g) {
    uint32_t n = g->num_nodes;
    uint32_t *stamp = rill__calloc(n > 0 ? n : 1, sizeof *stamp);
    uint32_t *stack = rill__malloc((n > 0 ? n : 1) * sizeof *stack);
    uint64_t budget = DOT_REDUCE_BUDGET;
    bool reduce = stamp != NULL && stack != NULL;
    for (uint32_t i = 0; i < n; i++) {
        const rill__graph_node *x = g->nodes[i];
        bool marked = reduce && x->num_deps > 1;
        if (marked && !mark_grand_ancestors(g, i, stamp, stack, i + 1, &budget)) {
            fprintf(f, "  /* nodes from n%u on: every edge (too large to reduce) */\n", i);
            reduce = marked = false;
        }
        for (uint32_t j = 0; j < x->num_deps; j++)
            if (!marked || stamp[x->deps[j]] != i + 1)
                fprintf(f, "  n%u -> n%u;\n", x->deps[j], i);
    }
    rill__free(stamp);
    rill__free(stack);
}

rill_status rill_graph_write_dot(rill_graph *graph_h, const char *path) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_graph_write_dot";
    rill__graph *graph;
    rill_status st = rill__graph_resolve(graph_h, fn, &graph);
    if (st != RILL_OK)
        return st;
    if (path == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: path is NULL; pass the name of the file to write", fn);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: cannot open '%s' for writing (%s); pass a path in a writable directory", fn, path,
            strerror(errno));
    /* Colour by stream: the first stream seen gets the first colour. */
    uint64_t seen[8] = {0};
    rill__mutex_lock(&graph->lock);
    fprintf(f, "digraph rill_graph {\n  rankdir=TB;\n"
               "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n");
    for (uint32_t i = 0; i < graph->num_nodes; i++) {
        const rill__graph_node *n = graph->nodes[i];
        const char *color = "#eeeeee";
        if (n->stream_id != 0) {
            size_t c = 0;
            while (c < 8 && seen[c] != 0 && seen[c] != n->stream_id)
                c++;
            if (c < 8) {
                seen[c] = n->stream_id;
                color = palette[c];
            } else {
                color = "#dddddd";
            }
        }
        fprintf(f, "  n%u [label=\"", i);
        dot_label(f, n);
        if (n->stream_name[0] != '\0') {
            fprintf(f, "\\n[");
            dot_escape(f, n->stream_name);
            fprintf(f, "]");
        }
        fprintf(f, "\", fillcolor=\"%s\"];\n", color);
    }
    write_edges(f, graph);
    rill__mutex_unlock(&graph->lock);
    fprintf(f, "}\n");
    if (ferror(f) | fclose(f)) /* both: a failed write, or a failed flush */
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: writing '%s' failed (%s); check that its file system has room", fn,
                          path, strerror(errno));
    return RILL_OK;
}
