/* SPDX-License-Identifier: MIT */
/* Graphs built by hand or by capture, their DOT drawing, instantiation
 * into execs, exec update and launch.
 *
 * A node may only depend on nodes that exist when it is added, so the
 * order of the node list is a topological order and a graph never has a
 * cycle: instantiation keeps that order and only inverts the dependency
 * lists into successor lists. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/event.h"
#include "core/status.h"
#include "mem/memory.h"
#include "mem/pool.h"

/* ------------------------------------------------------------- lifetime */

static void params_release(rill__gnode_params *p) {
    switch (p->kind) {
    case RILL__GNODE_KERNEL:
        atomic_fetch_sub(&p->u.kernel.kernel->graph_refs, 1);
        rill__free(p->u.kernel.args);
        rill__free(p->u.kernel.accesses);
        break;
    case RILL__GNODE_RECORD:
    case RILL__GNODE_WAIT:
        rill__event_unref(p->u.event.event);
        break;
    default:
        break;
    }
}

static void graph_free(rill_graph *g) {
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        params_release(&g->nodes[i]->p);
        rill__free(g->nodes[i]->deps);
        rill__free(g->nodes[i]);
    }
    rill__free(g->nodes);
    if (g->pool != NULL)
        rill__gpool_unref(g->pool, NULL, 0);
    rill__free(g);
}

static void graph_unlink(rill__runtime *rt, rill_graph *g) {
    rill__mutex_lock(&rt->lock);
    if (g->rt_prev != NULL)
        g->rt_prev->rt_next = g->rt_next;
    else
        rt->graphs = g->rt_next;
    if (g->rt_next != NULL)
        g->rt_next->rt_prev = g->rt_prev;
    rill__mutex_unlock(&rt->lock);
}

rill_status rill__graph_new(rill_graph **out) {
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return st;
    rill_graph *g = rill__calloc(1, sizeof *g);
    if (g == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_graph_create: out of memory");
    atomic_store(&g->magic, RILL__MAGIC_GRAPH);
    rill__mutex_lock(&rt->lock);
    g->rt_next = rt->graphs;
    if (rt->graphs != NULL)
        rt->graphs->rt_prev = g;
    rt->graphs = g;
    rill__mutex_unlock(&rt->lock);
    *out = g;
    return RILL_OK;
}

/* Frees what instantiation allocated for x (each may be NULL). */
static void exec_arrays_free(rill_graph_exec *x) {
    rill__free(x->nodes);
    rill__free(x->succ);
    rill__free(x->roots);
    rill__free(x->arena);
    rill__free((void *)x->run.pending);
    rill__free((void *)x->run.ready);
    rill__free((void *)x->run.next_block);
    rill__free((void *)x->run.blocks_done);
    rill__free((void *)x->run.next_succ);
    rill__free((void *)x->run.record_gen);
    rill__free(x->run.active);
}

static void exec_free(rill_graph_exec *x) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__mutex_lock(&rt->lock);
    if (x->rt_prev != NULL)
        x->rt_prev->rt_next = x->rt_next;
    else
        rt->execs = x->rt_next;
    if (x->rt_next != NULL)
        x->rt_next->rt_prev = x->rt_prev;
    rill__mutex_unlock(&rt->lock);
    for (uint32_t i = 0; i < x->num_nodes; i++) {
        rill__gnode_params *p = &x->nodes[i].p;
        if (p->kind == RILL__GNODE_KERNEL)
            atomic_fetch_sub(&p->u.kernel.kernel->graph_refs, 1);
        else if (p->kind == RILL__GNODE_RECORD || p->kind == RILL__GNODE_WAIT)
            rill__event_unref(p->u.event.event);
    }
    if (x->pool != NULL)
        rill__gpool_unref(x->pool, x->last_stream, x->last_seq);
    if (x->last_stream != NULL)
        rill__stream_unref(x->last_stream);
    exec_arrays_free(x);
    rill__mutex_destroy(&x->lock);
    rill__free(x);
}

void rill__exec_unref(rill_graph_exec *x) {
    /* acq_rel: the last release sees every launch's writes. */
    if (atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1)
        exec_free(x);
}

void rill__graphs_shutdown(rill__runtime *rt) {
    /* Every stream has drained: no launch holds an exec. */
    while (rt->execs != NULL) {
        rill_graph_exec *x = rt->execs;
        atomic_store(&x->magic, RILL__MAGIC_DEAD);
        atomic_store(&x->refs, 1);
        exec_free(x);
    }
    while (rt->graphs != NULL) {
        rill_graph *g = rt->graphs;
        rt->graphs = g->rt_next;
        atomic_store(&g->magic, RILL__MAGIC_DEAD);
        graph_free(g);
    }
}

/* ------------------------------------------------------------ building */

static rill_status resolve_graph(rill_graph *g, const char *fn) {
    if (rill__handle_magic(g) != RILL__MAGIC_GRAPH)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the graph is NULL or not valid (destroyed?); create one with "
                          "rill_graph_create or rill_stream_end_capture",
                          fn);
    return RILL_OK;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

rill_status rill__graph_add(rill_graph *g, const uint32_t *deps, uint32_t num_deps,
                            const rill__gnode_params *params, rill_stream *captured_from,
                            const char *fn, rill_graph_node **out) {
    rill_graph_node *n = rill__calloc(1, sizeof *n);
    if (n == NULL)
        goto oom;
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
        size_t as = params->u.kernel.args_size, na = params->u.kernel.num_accesses;
        if (as > 0 && (n->p.u.kernel.args = rill__malloc(as)) == NULL)
            goto oom;
        if (na > 0 && (n->p.u.kernel.accesses = rill__malloc(na * sizeof(rill_access))) == NULL)
            goto oom;
        if (as > 0)
            memcpy(n->p.u.kernel.args, params->u.kernel.args, as);
        if (na > 0)
            memcpy(n->p.u.kernel.accesses, params->u.kernel.accesses, na * sizeof(rill_access));
    }
    if (g->num_nodes == g->cap_nodes) {
        uint32_t cap = g->cap_nodes == 0 ? 16 : 2 * g->cap_nodes;
        rill_graph_node **nodes = rill__realloc(g->nodes, cap * sizeof *nodes);
        if (nodes == NULL)
            goto oom;
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    if (params->kind == RILL__GNODE_KERNEL)
        atomic_fetch_add(&params->u.kernel.kernel->graph_refs, 1);
    else if (params->kind == RILL__GNODE_RECORD || params->kind == RILL__GNODE_WAIT)
        atomic_fetch_add(&params->u.event.event->refs, 1);
    n->graph = g;
    n->index = g->num_nodes;
    if (captured_from != NULL) {
        n->stream_id = captured_from->id;
        rill__mutex_lock(&captured_from->err_lock);
        if (captured_from->name[0] != '\0')
            snprintf(n->stream_name, sizeof n->stream_name, "%s", captured_from->name);
        else
            snprintf(n->stream_name, sizeof n->stream_name, "stream %llu",
                     (unsigned long long)captured_from->id);
        rill__mutex_unlock(&captured_from->err_lock);
    }
    g->nodes[g->num_nodes++] = n;
    if (out != NULL)
        *out = n;
    return RILL_OK;
oom:
    if (n != NULL) {
        if (params->kind == RILL__GNODE_KERNEL) {
            rill__free(n->p.u.kernel.args);
            rill__free(n->p.u.kernel.accesses);
        }
        rill__free(n->deps);
        rill__free(n);
    }
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory adding a graph node", fn);
}

/* Validates a hand-made node's dependency list and adds the node. */
static rill_status add_node(rill_graph *graph, rill_graph_node *const *deps, size_t num_deps,
                            const rill__gnode_params *p, const char *fn, rill_graph_node **out) {
    if (out != NULL)
        *out = NULL;
    rill_status st = resolve_graph(graph, fn);
    if (st != RILL_OK)
        return st;
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (num_deps > 0 && deps == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: num_deps is %zu but deps is NULL", fn,
                          num_deps);
    if (num_deps > UINT32_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: too many dependencies", fn);
    uint32_t local[16] = {0};
    uint32_t *idx = num_deps <= 16 ? local : rill__malloc(num_deps * sizeof *idx);
    if (idx == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (size_t i = 0; i < num_deps; i++) {
        rill_graph_node *d = deps[i];
        /* A node pointer is valid when the graph's list holds it there. */
        int ok = 0;
        for (uint32_t j = 0; d != NULL && j < graph->num_nodes && !ok; j++)
            ok = graph->nodes[j] == d;
        if (!ok) {
            if (idx != local)
                rill__free(idx);
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: dependency %zu is NULL or a node of another graph; pass nodes "
                              "this graph returned",
                              fn, i);
        }
        idx[i] = d->index;
    }
    st = rill__graph_add(graph, idx, (uint32_t)num_deps, p, NULL, fn, out);
    if (idx != local)
        rill__free(idx);
    return st;
}

rill_status rill_graph_create(rill_graph **out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_graph_create: out is NULL");
    *out = NULL;
    return rill__graph_new(out);
}

rill_status rill_graph_destroy(rill_graph *graph) {
    rill_status st = resolve_graph(graph, "rill_graph_destroy");
    if (st != RILL_OK)
        return st;
    uint32_t expected = RILL__MAGIC_GRAPH;
    if (!atomic_compare_exchange_strong(&graph->magic, &expected, RILL__MAGIC_DEAD))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_graph_destroy: the graph was already destroyed");
    rill__runtime *rt;
    rill__runtime_get(&rt);
    graph_unlink(rt, graph);
    graph_free(graph);
    return RILL_OK;
}

/* Checks a kernel launch description; shared with rill_launch_kernel's
 * rules. */
static rill_status check_kernel(rill_kernel *kernel, const rill_launch *launch, const char *fn) {
    if (rill__handle_magic(kernel) != RILL__MAGIC_KERNEL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the kernel is NULL or not valid; pass a kernel from "
                          "rill_kernel_create",
                          fn);
    if (launch == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: launch is NULL", fn);
    if (launch->grid.x == 0 || launch->grid.y == 0 || launch->grid.z == 0 ||
        (uint64_t)launch->grid.x * launch->grid.y * launch->grid.z > UINT32_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has grid (%u, %u, %u); each dimension needs 1 or more "
                          "blocks, at most 2^32-1 in all",
                          fn, kernel->name, launch->grid.x, launch->grid.y, launch->grid.z);
    if ((launch->args_size > 0 && launch->args == NULL) ||
        (launch->num_accesses > 0 && launch->accesses == NULL))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has a size or count for args or accesses but a NULL "
                          "pointer",
                          fn, kernel->name);
    if (kernel->cpu == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: kernel '%s' has no CPU body; graphs run on the CPU device", fn,
                          kernel->name);
    return RILL_OK;
}

rill_status rill_graph_add_kernel_node(rill_graph *graph, rill_graph_node *const *deps,
                                       size_t num_deps, rill_kernel *kernel,
                                       const rill_launch *launch, rill_graph_node **out) {
    static const char fn[] = "rill_graph_add_kernel_node";
    if (out != NULL)
        *out = NULL;
    rill_status st = check_kernel(kernel, launch, fn);
    if (st != RILL_OK)
        return st;
    rill__gnode_params p = {.kind = RILL__GNODE_KERNEL};
    p.u.kernel.kernel = kernel;
    p.u.kernel.grid = launch->grid;
    p.u.kernel.block = launch->block;
    p.u.kernel.args = (void *)launch->args;
    p.u.kernel.args_size = launch->args_size;
    p.u.kernel.accesses = (rill_access *)launch->accesses;
    p.u.kernel.num_accesses = launch->num_accesses;
    return add_node(graph, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_host_node(rill_graph *graph, rill_graph_node *const *deps,
                                     size_t num_deps, rill_host_fn fn_, void *user_data,
                                     rill_graph_node **out) {
    static const char fn[] = "rill_graph_add_host_node";
    if (out != NULL)
        *out = NULL;
    if (fn_ == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: fn is NULL", fn);
    rill__gnode_params p = {.kind = RILL__GNODE_HOST};
    p.u.host.fn = fn_;
    p.u.host.user_data = user_data;
    return add_node(graph, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_memcpy_node(rill_graph *graph, rill_graph_node *const *deps,
                                       size_t num_deps, void *dst, const void *src, size_t bytes,
                                       rill_graph_node **out) {
    static const char fn[] = "rill_graph_add_memcpy_node";
    if (out != NULL)
        *out = NULL;
    if (dst == NULL || src == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                          dst == NULL ? "dst" : "src");
    /* As rill_memcpy_async checks a copy it captures. */
    rill_device *dev;
    rill_status st = rill__mem_check_access(fn, "dst", NULL, dst, bytes, &dev);
    if (st == RILL_OK)
        st = rill__mem_check_access(fn, "src", NULL, src, bytes, &dev);
    if (st != RILL_OK)
        return st;
    rill__gnode_params p = {.kind = RILL__GNODE_COPY};
    p.u.copy.dst = dst;
    p.u.copy.src = src;
    p.u.copy.bytes = bytes;
    return add_node(graph, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_memset_node(rill_graph *graph, rill_graph_node *const *deps,
                                       size_t num_deps, void *dst, int value, size_t bytes,
                                       rill_graph_node **out) {
    static const char fn[] = "rill_graph_add_memset_node";
    if (out != NULL)
        *out = NULL;
    if (dst == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    rill_device *dev;
    rill_status st = rill__mem_check_access(fn, "dst", NULL, dst, bytes, &dev);
    if (st != RILL_OK)
        return st;
    rill__gnode_params p = {.kind = RILL__GNODE_SET};
    p.u.set.dst = dst;
    p.u.set.value = value;
    p.u.set.bytes = bytes;
    return add_node(graph, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_empty_node(rill_graph *graph, rill_graph_node *const *deps,
                                      size_t num_deps, rill_graph_node **out) {
    rill__gnode_params p = {.kind = RILL__GNODE_EMPTY};
    return add_node(graph, deps, num_deps, &p, "rill_graph_add_empty_node", out);
}

static rill_status add_event_node(rill_graph *graph, rill_graph_node *const *deps, size_t num_deps,
                                  rill_event *event, rill__gnode_kind kind, const char *fn,
                                  rill_graph_node **out) {
    if (out != NULL)
        *out = NULL;
    if (rill__handle_magic(event) != RILL__MAGIC_EVENT)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the event is NULL or not valid; pass an event from "
                          "rill_event_create",
                          fn);
    if (event->flags & RILL_EVENT_INTERPROCESS)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: interprocess events cannot be graph nodes; record or wait on them "
                          "with rill_event_record and rill_stream_wait_event",
                          fn);
    rill__gnode_params p = {.kind = kind};
    p.u.event.event = event;
    return add_node(graph, deps, num_deps, &p, fn, out);
}

rill_status rill_graph_add_event_record_node(rill_graph *graph, rill_graph_node *const *deps,
                                             size_t num_deps, rill_event *event,
                                             rill_graph_node **out) {
    return add_event_node(graph, deps, num_deps, event, RILL__GNODE_RECORD,
                          "rill_graph_add_event_record_node", out);
}

rill_status rill_graph_add_event_wait_node(rill_graph *graph, rill_graph_node *const *deps,
                                           size_t num_deps, rill_event *event,
                                           rill_graph_node **out) {
    return add_event_node(graph, deps, num_deps, event, RILL__GNODE_WAIT,
                          "rill_graph_add_event_wait_node", out);
}

rill_status rill_graph_node_count(rill_graph *graph, size_t *out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_graph_node_count: out is NULL");
    *out = 0;
    rill_status st = resolve_graph(graph, "rill_graph_node_count");
    if (st == RILL_OK)
        *out = graph->num_nodes;
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

static void dot_label(FILE *f, const rill_graph_node *n) {
    const rill__gnode_params *p = &n->p;
    switch (p->kind) {
    case RILL__GNODE_KERNEL:
        dot_escape(f, p->u.kernel.kernel->name);
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
    }
}

rill_status rill_graph_write_dot(rill_graph *graph, const char *path) {
    static const char fn[] = "rill_graph_write_dot";
    rill_status st = resolve_graph(graph, fn);
    if (st != RILL_OK)
        return st;
    if (path == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: path is NULL", fn);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: cannot open '%s' for writing", fn,
                          path);
    /* Colour by stream: the first stream seen gets the first colour. */
    uint64_t seen[8] = {0};
    fprintf(f, "digraph rill_graph {\n  rankdir=TB;\n"
               "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n");
    for (uint32_t i = 0; i < graph->num_nodes; i++) {
        const rill_graph_node *n = graph->nodes[i];
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
    for (uint32_t i = 0; i < graph->num_nodes; i++)
        for (uint32_t j = 0; j < graph->nodes[i]->num_deps; j++)
            fprintf(f, "  n%u -> n%u;\n", graph->nodes[i]->deps[j], i);
    fprintf(f, "}\n");
    if (fclose(f) != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: writing '%s' failed", fn, path);
    return RILL_OK;
}

/* -------------------------------------------------------- instantiation */

/* Lays out the kernel nodes' args and accesses of g in one arena. */
static unsigned char *build_arena(rill_graph *g, rill__xnode *xn) {
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

static void take_params(rill__xnode *xn, const rill_graph_node *n) {
    void *args = xn->p.u.kernel.args;
    rill_access *acc = xn->p.u.kernel.accesses;
    xn->p = n->p;
    if (n->p.kind == RILL__GNODE_KERNEL) {
        xn->p.u.kernel.args = args;
        xn->p.u.kernel.accesses = acc;
        rill_dim3 gr = n->p.u.kernel.grid;
        xn->blocks = gr.x * gr.y * gr.z;
    } else {
        xn->blocks = 1;
    }
}

rill_status rill_graph_instantiate(rill_graph *graph, rill_graph_exec **out) {
    static const char fn[] = "rill_graph_instantiate";
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    rill_status st = resolve_graph(graph, fn);
    if (st != RILL_OK)
        return st;
    uint32_t n = graph->num_nodes;
    size_t edges = 0;
    for (uint32_t i = 0; i < n; i++)
        edges += graph->nodes[i]->num_deps;
    rill_graph_exec *x = rill__calloc(1, sizeof *x);
    if (x == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    size_t m = n > 0 ? n : 1;
    x->nodes = rill__calloc(m, sizeof *x->nodes);
    x->succ = rill__malloc((edges > 0 ? edges : 1) * sizeof *x->succ);
    x->roots = rill__malloc(m * sizeof *x->roots);
    x->run.pending = rill__malloc(m * sizeof *x->run.pending);
    x->run.ready = rill__calloc(m, sizeof *x->run.ready); /* claimers wait for nonzero */
    x->run.next_block = rill__malloc(m * sizeof *x->run.next_block);
    x->run.blocks_done = rill__malloc(m * sizeof *x->run.blocks_done);
    x->run.next_succ = rill__malloc(m * sizeof *x->run.next_succ);
    x->run.record_gen = rill__calloc(m, sizeof *x->run.record_gen);
    x->run.active = rill__malloc(m * sizeof *x->run.active);
    if (x->nodes == NULL || x->succ == NULL || x->roots == NULL || x->run.pending == NULL ||
        x->run.ready == NULL || x->run.next_block == NULL || x->run.blocks_done == NULL ||
        x->run.next_succ == NULL || x->run.record_gen == NULL || x->run.active == NULL ||
        (x->arena = build_arena(graph, x->nodes)) == NULL) {
        exec_arrays_free(x);
        rill__free(x);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory for %u nodes", fn, n);
    }
    x->num_nodes = n;
    /* Successor lists: count, then fill in node order. */
    for (uint32_t i = 0; i < n; i++) {
        const rill_graph_node *gn = graph->nodes[i];
        take_params(&x->nodes[i], gn);
        x->nodes[i].graph_index = i;
        x->nodes[i].num_preds = gn->num_deps;
        if (gn->num_deps == 0)
            x->roots[x->num_roots++] = i;
        for (uint32_t j = 0; j < gn->num_deps; j++)
            x->nodes[gn->deps[j]].num_succ++;
        if (x->nodes[i].blocks > x->max_blocks)
            x->max_blocks = x->nodes[i].blocks;
    }
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        x->nodes[i].succ_begin = off;
        off += x->nodes[i].num_succ;
        x->nodes[i].num_succ = 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        const rill_graph_node *gn = graph->nodes[i];
        for (uint32_t j = 0; j < gn->num_deps; j++) {
            rill__xnode *d = &x->nodes[gn->deps[j]];
            x->succ[d->succ_begin + d->num_succ++] = i;
        }
    }
    /* Successors whose only predecessor is this node first: they become
     * ready together, and a launch hands them out as one range. */
    for (uint32_t i = 0; i < n; i++) {
        rill__xnode *xn = &x->nodes[i];
        uint32_t *list = x->succ + xn->succ_begin, k = 0;
        for (uint32_t j = 0; j < xn->num_succ; j++) {
            if (x->nodes[list[j]].num_preds == 1) {
                uint32_t t = list[k];
                list[k++] = list[j];
                list[j] = t;
            }
        }
        xn->num_single = k;
    }
    x->chain = x->num_roots <= 1;
    for (uint32_t i = 0; i < n; i++)
        if (x->nodes[i].num_succ > 1 || x->nodes[i].blocks > 1)
            x->chain = 0;
    for (uint32_t i = 0; i < n; i++) {
        rill__gnode_params *p = &x->nodes[i].p;
        if (p->kind == RILL__GNODE_KERNEL)
            atomic_fetch_add(&p->u.kernel.kernel->graph_refs, 1);
        else if (p->kind == RILL__GNODE_RECORD || p->kind == RILL__GNODE_WAIT)
            atomic_fetch_add(&p->u.event.event->refs, 1);
    }
    x->pool = graph->pool;
    if (x->pool != NULL)
        rill__gpool_ref(x->pool);
    rill__mutex_init(&x->lock);
    atomic_init(&x->refs, 1);
    atomic_store(&x->magic, RILL__MAGIC_EXEC);
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__mutex_lock(&rt->lock);
    x->rt_next = rt->execs;
    if (rt->execs != NULL)
        rt->execs->rt_prev = x;
    rt->execs = x;
    rill__mutex_unlock(&rt->lock);
    *out = x;
    return RILL_OK;
}

static rill_status resolve_exec(rill_graph_exec *x, const char *fn) {
    if (rill__handle_magic(x) != RILL__MAGIC_EXEC)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the exec is NULL or not valid (destroyed?); create one with "
                          "rill_graph_instantiate",
                          fn);
    return RILL_OK;
}

rill_status rill_graph_exec_destroy(rill_graph_exec *exec) {
    rill_status st = resolve_exec(exec, "rill_graph_exec_destroy");
    if (st != RILL_OK)
        return st;
    uint32_t expected = RILL__MAGIC_EXEC;
    if (!atomic_compare_exchange_strong(&exec->magic, &expected, RILL__MAGIC_DEAD))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_graph_exec_destroy: the exec was already destroyed");
    /* Pending launches hold their own references. */
    rill__exec_unref(exec);
    return RILL_OK;
}

static const char *kind_name(rill__gnode_kind k) {
    static const char *const names[] = {"?",      "kernel", "host",         "memcpy",
                                        "memset", "empty",  "event record", "event wait"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

rill_status rill_graph_exec_update(rill_graph_exec *exec, rill_graph *graph) {
    static const char fn[] = "rill_graph_exec_update";
    rill_status st = resolve_exec(exec, fn);
    if (st == RILL_OK)
        st = resolve_graph(graph, fn);
    if (st != RILL_OK)
        return st;
    if (graph->num_nodes != exec->num_nodes)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the graph has %u nodes and the exec %u; update takes a graph of "
                          "the same topology, instantiate a new exec for another one",
                          fn, graph->num_nodes, exec->num_nodes);
    for (uint32_t i = 0; i < graph->num_nodes; i++) {
        const rill_graph_node *gn = graph->nodes[i];
        const rill__xnode *xn = &exec->nodes[i];
        if (gn->p.kind != xn->p.kind)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: node %u is a %s node in the graph and a %s node in the exec; "
                              "node kinds must match",
                              fn, i, kind_name(gn->p.kind), kind_name(xn->p.kind));
        if (gn->num_deps != xn->num_preds)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: node %u depends on %u nodes in the graph and on %u in the "
                              "exec; the dependencies must match",
                              fn, i, gn->num_deps, xn->num_preds);
    }
    /* Same dependencies: every edge of the graph is an edge of the exec. */
    for (uint32_t i = 0; i < graph->num_nodes; i++) {
        const rill_graph_node *gn = graph->nodes[i];
        for (uint32_t j = 0; j < gn->num_deps; j++) {
            const rill__xnode *d = &exec->nodes[gn->deps[j]];
            int found = 0;
            for (uint32_t k = 0; k < d->num_succ && !found; k++)
                found = exec->succ[d->succ_begin + k] == i;
            if (!found)
                return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                                  "%s: node %u depends on node %u in the graph but not in the "
                                  "exec; the dependencies must match",
                                  fn, i, gn->deps[j]);
        }
    }
    rill__xnode *nodes = rill__calloc(exec->num_nodes > 0 ? exec->num_nodes : 1, sizeof *nodes);
    unsigned char *arena = nodes != NULL ? build_arena(graph, nodes) : NULL;
    if (arena == NULL) {
        rill__free(nodes);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    /* Launches in flight read the parameters: wait for the last one. */
    rill__mutex_lock(&exec->lock);
    rill_stream *ls = exec->last_stream;
    uint64_t lseq = exec->last_seq;
    if (ls != NULL)
        rill__stream_ref(ls);
    rill__mutex_unlock(&exec->lock);
    if (ls != NULL) {
        if (atomic_load_explicit(&ls->done_seq, memory_order_acquire) < lseq &&
            (st = rill__check_may_block(fn)) != RILL_OK) {
            rill__stream_unref(ls);
            rill__free(arena);
            rill__free(nodes);
            return st;
        }
        rill__stream_host_wait(ls, lseq, 0);
        rill__stream_unref(ls);
    }
    for (uint32_t i = 0; i < exec->num_nodes; i++) {
        rill__xnode *xn = &exec->nodes[i];
        rill__gnode_params old = xn->p;
        rill__xnode tmp = nodes[i]; /* holds the node's slots in the new arena */
        take_params(&tmp, graph->nodes[i]);
        xn->p = tmp.p;
        xn->blocks = tmp.blocks;
        if (xn->blocks > exec->max_blocks)
            exec->max_blocks = xn->blocks;
        if (xn->p.kind == RILL__GNODE_KERNEL) {
            atomic_fetch_add(&xn->p.u.kernel.kernel->graph_refs, 1);
            atomic_fetch_sub(&old.u.kernel.kernel->graph_refs, 1);
        } else if (xn->p.kind == RILL__GNODE_RECORD || xn->p.kind == RILL__GNODE_WAIT) {
            atomic_fetch_add(&xn->p.u.event.event->refs, 1);
            rill__event_unref(old.u.event.event);
        }
    }
    rill__free(exec->arena);
    exec->arena = arena;
    rill__free(nodes);
    exec->chain = exec->num_roots <= 1;
    for (uint32_t i = 0; i < exec->num_nodes; i++)
        if (exec->nodes[i].num_succ > 1 || exec->nodes[i].blocks > 1)
            exec->chain = 0;
    return RILL_OK;
}

/* --------------------------------------------------------------- launch */

/* Records the exec's event record nodes at (stream, seq of the launch):
 * the events complete when the launch does. */
static void record_events(rill_graph_exec *x, rill_stream *s, uint64_t seq) {
    for (uint32_t i = 0; i < x->num_nodes; i++) {
        if (x->nodes[i].p.kind != RILL__GNODE_RECORD)
            continue;
        rill_event *e = x->nodes[i].p.u.event.event;
        rill__mutex_lock(&e->lock);
        rill_stream *old = e->stream;
        rill__stream_ref(s);
        e->dev = s->dev;
        e->stream = s;
        e->seq = seq;
        e->gen++;
        e->cap_id = 0;
        e->ts_valid = 0;
        atomic_store_explicit(&x->run.record_gen[i], e->gen, memory_order_relaxed);
        rill__mutex_unlock(&e->lock);
        if (old != NULL)
            rill__stream_unref(old);
    }
}

rill_status rill_graph_launch(rill_graph_exec *exec, rill_stream *stream) {
    static const char fn[] = "rill_graph_launch";
    rill_status st = resolve_exec(exec, fn);
    if (st != RILL_OK)
        return st;
    st = rill__stream_resolve(stream, fn, &stream);
    if (st != RILL_OK)
        return st;
    if (rill__stream_capturing(stream))
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: the stream is capturing; launching a graph into a capture is not "
                          "supported: capture its work directly",
                          fn);
    for (uint32_t i = 0; i < exec->num_nodes; i++) {
        const rill__xnode *xn = &exec->nodes[i];
        if (xn->p.kind == RILL__GNODE_RECORD && xn->p.u.event.event->dev != NULL &&
            xn->p.u.event.event->dev != stream->dev)
            return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                              "%s: node %u records an event bound to another device", fn, i);
    }
    /* Serialize the launches of one exec, and wait for the memory its
     * capture allocated and for its event wait nodes (snapshots taken now,
     * as rill_stream_wait_event does). */
    rill__mutex_lock(&exec->lock);
    if (exec->last_stream != NULL && exec->last_stream != stream)
        st = rill__stream_wait_point(stream, exec->last_stream, exec->last_seq, fn);
    if (st == RILL_OK && exec->pool != NULL) {
        rill_stream *ps;
        uint64_t pseq;
        rill__gpool_ready_point(exec->pool, &ps, &pseq);
        if (ps != NULL) {
            st = rill__stream_wait_point(stream, ps, pseq, fn);
            rill__stream_unref(ps);
        }
    }
    for (uint32_t i = 0; st == RILL_OK && i < exec->num_nodes; i++)
        if (exec->nodes[i].p.kind == RILL__GNODE_WAIT)
            st = rill_stream_wait_event(stream, exec->nodes[i].p.u.event.event);
    if (st != RILL_OK) {
        rill__mutex_unlock(&exec->lock);
        return st;
    }
    rill__cmd cmd = {.kind = RILL__CMD_GRAPH};
    atomic_fetch_add_explicit(&exec->refs, 1, memory_order_relaxed);
    cmd.u.graph.exec = exec;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    if (st != RILL_OK) {
        atomic_fetch_sub_explicit(&exec->refs, 1, memory_order_relaxed);
        rill__mutex_unlock(&exec->lock);
        return st;
    }
    record_events(exec, stream, seq);
    if (exec->last_stream != stream) {
        if (exec->last_stream != NULL)
            rill__stream_unref(exec->last_stream);
        rill__stream_ref(stream);
        exec->last_stream = stream;
    }
    exec->last_seq = seq;
    rill__mutex_unlock(&exec->lock);
    return RILL_OK;
}
