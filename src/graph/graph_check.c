/* SPDX-License-Identifier: MIT */
/* rill__graph_check and rill__exec_check: walk a graph or an exec and check
 * the invariants that graph.c and exec.c rely on, so that a test that
 * builds graphs at random (tests/fuzz/fuzz_graph.c) finds a broken
 * structure where it was built rather than as a wrong launch later. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/runtime.h"
#include "graph/graph.h"
#include "util/alloc.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool
broken(char *why, size_t cap, const char *fmt, ...) {
    if (why != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Graph nodes: each knows its graph and index, and depends only on earlier
 * nodes, each once and in order (graph.c sorts and deduplicates), which is
 * what makes the index order a topological order and the graph acyclic. */
static bool graph_check(const rill__graph *g, char *why, size_t cap) {
    if (g->num_nodes > g->cap_nodes)
        return broken(why, cap, "graph: %" PRIu32 " nodes in room for %" PRIu32, g->num_nodes,
                      g->cap_nodes);
    for (uint32_t i = 0; i < g->num_nodes; i++) {
        const rill__graph_node *n = g->nodes[i];
        if (n == NULL || n->graph != g || n->index != i)
            return broken(why, cap, "graph: node %" PRIu32 " is missing or names another place", i);
        if (n->num_deps > n->cap_deps)
            return broken(why, cap,
                          "graph: node %" PRIu32 " has %" PRIu32
                          " dependencies in room for %" PRIu32,
                          i, n->num_deps, n->cap_deps);
        for (uint32_t j = 0; j < n->num_deps; j++) {
            if (n->deps[j] >= i || (j > 0 && n->deps[j - 1] >= n->deps[j]))
                return broken(why, cap,
                              "graph: node %" PRIu32 " depends on node %" PRIu32
                              " (dependencies must be earlier nodes, each once, sorted)",
                              i, n->deps[j]);
        }
    }
    return true;
}

/* An exec's nodes in topological order: successors come later, the
 * successor lists tile exec->succ, each node's count of predecessors is the
 * number of lists that name it, and the roots are the nodes without any. */
static bool exec_check(const rill__graph_exec *x, const rill__xparams *ps, char *why, size_t cap) {
    uint32_t n = x->num_nodes;
    const rill__xnode *nodes = ps->nodes;
    uint32_t *preds = rill__calloc(n > 0 ? n : 1, sizeof *preds);
    if (preds == NULL)
        return broken(why, cap, "exec: no memory to count %" PRIu32 " nodes' predecessors", n);
    bool ok = true;
    uint64_t next_begin = 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        const rill__xnode *xn = &nodes[i];
        if (xn->succ_begin != next_begin)
            ok = broken(why, cap,
                        "exec: node %" PRIu32 "'s successors start at %" PRIu32
                        " (expected %" PRIu64 ")",
                        i, xn->succ_begin, next_begin);
        next_begin += xn->num_succ;
        for (uint32_t j = 0; ok && j < xn->num_succ; j++) {
            uint32_t t = x->succ[xn->succ_begin + j];
            if (t <= i || t >= n)
                ok = broken(why, cap,
                            "exec: node %" PRIu32 " has successor %" PRIu32
                            " (successors come later, below %" PRIu32 ")",
                            i, t, n);
            else
                preds[t]++;
        }
    }
    uint32_t roots = 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        if (preds[i] != nodes[i].num_preds)
            ok = broken(why, cap,
                        "exec: node %" PRIu32 " counts %" PRIu32 " predecessors, %" PRIu32
                        " lists name it",
                        i, nodes[i].num_preds, preds[i]);
        else if (preds[i] == 0 && (roots >= x->num_roots || x->roots[roots++] != i))
            ok = broken(why, cap,
                        "exec: node %" PRIu32 " has no predecessor but is not root %" PRIu32, i,
                        roots);
    }
    if (ok && roots != x->num_roots)
        ok = broken(why, cap,
                    "exec: %" PRIu32 " roots listed, %" PRIu32 " nodes without a predecessor",
                    x->num_roots, roots);
    rill__free(preds);
    return ok;
}

bool rill__graph_check(rill_graph *graph_h, char *why, size_t cap) {
    rill__graph *g;
    if (rill__graph_resolve(graph_h, "rill__graph_check", &g) != RILL_OK)
        return broken(why, cap, "%s", rill_last_error());
    return graph_check(g, why, cap);
}

bool rill__exec_check(rill_graph_exec *exec_h, char *why, size_t cap) {
    rill__graph_exec *x = rill__handle_get(exec_h, RILL__HANDLE_EXEC);
    if (x == NULL)
        return broken(why, cap, "rill__exec_check: not a live exec");
    /* The current parameter set, held so that an update cannot free it. */
    rill__mutex_lock(&x->lock);
    rill__xparams *ps = x->params;
    if (ps != NULL)
        atomic_fetch_add(&ps->refs, 1);
    rill__mutex_unlock(&x->lock);
    if (ps == NULL)
        return broken(why, cap, "rill__exec_check: the exec was destroyed");
    bool ok = exec_check(x, ps, why, cap);
    rill__xparams_unref(ps);
    return ok;
}
