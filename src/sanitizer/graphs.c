/* SPDX-License-Identifier: MIT */
/* The stream sanitizer inside a launched graph: two nodes that touch the
 * same bytes, one writing, with no path of edges between them race; and
 * every node's accesses are checked against other streams as a command's
 * are (internal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel.h"
#include "sanitizer/internal.h"
#include "util/alloc.h"

typedef struct node_acc {
    uintptr_t lo, hi;
    uint32_t node;
    uint8_t write;
} node_acc;

static int node_acc_cmp(const void *a, const void *b) {
    const node_acc *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Pairs of nodes checked per parameter set, at most: the check is a search
 * of the graph per pair. */
#define GRAPH_PAIRS_MAX 4096

/* Whether node `to` depends on node `from` through the exec's edges. Nodes
 * are numbered in topological order, so the search stays below `to`. */
static bool reaches(const rill__graph_exec *x, const rill__xparams *v, uint32_t from, uint32_t to,
                    uint32_t *stack, uint8_t *mark) {
    memset(mark, 0, x->num_nodes);
    uint32_t n = 0;
    stack[n++] = from;
    mark[from] = 1;
    while (n > 0) {
        const rill__xnode *xn = &v->nodes[stack[--n]];
        for (uint32_t k = 0; k < xn->num_succ; k++) {
            uint32_t s = x->succ[xn->succ_begin + k];
            if (s == to)
                return true;
            if (s < to && !mark[s]) {
                mark[s] = 1;
                stack[n++] = s;
            }
        }
    }
    return false;
}

static void node_name(const rill__xparams *v, uint32_t i, char *buf, size_t size) {
    const rill__xnode *xn = &v->nodes[i];
    char what[128];
    if (xn->p.kind == RILL__GNODE_KERNEL) {
        snprintf(buf, size, "graph node %u (kernel '%s')", xn->graph_index,
                 xn->p.u.kernel.kernel->image.name);
    } else if (xn->p.kind == RILL__GNODE_EXTERN) {
        xn->p.u.ext.ops->describe(xn->p.u.ext.obj, what, sizeof what);
        snprintf(buf, size, "graph node %u (%s)", xn->graph_index, what);
    } else
        snprintf(buf, size, "graph node %u (%s)", xn->graph_index,
                 xn->p.kind == RILL__GNODE_COPY ? "memcpy" : "memset");
}

/* Two nodes of the launch on stream t touch overlapping bytes, one writes,
 * and no path of edges joins them. Checked once per parameter set. */
static bool check_graph_inside(uint32_t t, uint64_t seq, const rill__xparams *v) {
    uint32_t seen_before;
    if (rill__ptrmap_get(&S.checked, v, &seen_before))
        return true;
    if (!rill__ptrmap_put(&S.checked, v, 1))
        return false;
    const rill__graph_exec *x = v->exec;
    size_t n = 0, cap = 0;
    for (uint32_t i = 0; i < x->num_nodes; i++) {
        const rill__gnode_params *p = &v->nodes[i].p;
        const rill_access *ext;
        cap += p->kind == RILL__GNODE_KERNEL   ? p->u.kernel.num_accesses
               : p->kind == RILL__GNODE_COPY   ? 2
               : p->kind == RILL__GNODE_SET    ? 1
               : p->kind == RILL__GNODE_EXTERN ? p->u.ext.ops->accesses(p->u.ext.obj, &ext)
                                               : 0;
    }
    if (cap < 2)
        return true;
    node_acc *acc = rill__malloc(cap * sizeof *acc);
    uint32_t *stack = rill__malloc(x->num_nodes * sizeof *stack);
    uint8_t *mark = rill__malloc(x->num_nodes);
    bool ok = acc != NULL && stack != NULL && mark != NULL;
    for (uint32_t i = 0; ok && i < x->num_nodes; i++) {
        const rill__gnode_params *p = &v->nodes[i].p;
        if (p->kind == RILL__GNODE_KERNEL) {
            for (size_t a = 0; a < p->u.kernel.num_accesses; a++) {
                const rill_access *d = &p->u.kernel.accesses[a];
                acc[n++] = (node_acc){(uintptr_t)d->ptr, (uintptr_t)d->ptr + d->bytes, i,
                                      (d->mode & RILL_WRITE) != 0};
            }
        } else if (p->kind == RILL__GNODE_COPY) {
            acc[n++] = (node_acc){(uintptr_t)p->u.copy.src,
                                  (uintptr_t)p->u.copy.src + p->u.copy.bytes, i, 0};
            acc[n++] = (node_acc){(uintptr_t)p->u.copy.dst,
                                  (uintptr_t)p->u.copy.dst + p->u.copy.bytes, i, 1};
        } else if (p->kind == RILL__GNODE_SET) {
            acc[n++] =
                (node_acc){(uintptr_t)p->u.set.dst, (uintptr_t)p->u.set.dst + p->u.set.bytes, i, 1};
        } else if (p->kind == RILL__GNODE_EXTERN) {
            const rill_access *ext;
            size_t k = p->u.ext.ops->accesses(p->u.ext.obj, &ext);
            for (size_t a = 0; a < k; a++)
                acc[n++] = (node_acc){(uintptr_t)ext[a].ptr, (uintptr_t)ext[a].ptr + ext[a].bytes,
                                      i, (ext[a].mode & RILL_WRITE) != 0};
        }
    }
    if (ok)
        qsort(acc, n, sizeof *acc, node_acc_cmp);
    unsigned pairs = 0;
    for (size_t i = 0; ok && i < n && pairs < GRAPH_PAIRS_MAX; i++) {
        for (size_t j = i + 1; j < n && acc[j].lo < acc[i].hi && pairs < GRAPH_PAIRS_MAX; j++) {
            const node_acc *a = &acc[i], *b = &acc[j];
            if (a->node == b->node || !(a->write || b->write))
                continue;
            uint32_t first = a->node < b->node ? a->node : b->node;
            uint32_t last = a->node < b->node ? b->node : a->node;
            pairs++;
            if (reaches(x, v, first, last, stack, mark))
                continue;
            const node_acc *fa = a->node == first ? a : b, *la = a->node == first ? b : a;
            char fw[160], lw[160];
            node_name(v, first, fw, sizeof fw);
            node_name(v, last, lw, sizeof lw);
            uintptr_t lo = b->lo, hi = a->hi < b->hi ? a->hi : b->hi;
            fprintf(stderr,
                    "rill sanitizer: race inside a graph on bytes [%p, %p) (%zu bytes)\n"
                    "  %s %s them\n"
                    "  %s %s them\n"
                    "  no edge of the graph orders the two (launched on stream %s, command "
                    "%" PRIu64 "); fix: make graph node %u depend on graph node %u\n",
                    (void *)lo, (void *)hi, (size_t)(hi - lo), lw, la->write ? "writes" : "reads",
                    fw, fa->write ? "writes" : "reads", S.streams[t].label, seq,
                    v->nodes[last].graph_index, v->nodes[first].graph_index);
            rill__san_finish_report();
        }
    }
    rill__free(acc);
    rill__free(stack);
    rill__free(mark);
    return ok;
}

bool rill__san_check_graph(uint32_t t, uint64_t seq, const rill__xparams *v, seen *sn) {
    if (!check_graph_inside(t, seq, v))
        return false;
    char what[160];
    for (uint32_t i = 0; i < v->exec->num_nodes; i++) {
        const rill__xnode *xn = &v->nodes[i];
        const rill__gnode_params *p = &xn->p;
        bool ok = true;
        /* The pool does not learn of a graph's uses: none is covered. */
        if (p->kind == RILL__GNODE_KERNEL) {
            snprintf(what, sizeof what, "graph node %u (kernel '%s')", xn->graph_index,
                     p->u.kernel.kernel->image.name);
            ok = rill__san_check_kernel(t, seq, p->u.kernel.accesses, p->u.kernel.num_accesses,
                                        what, 0, false, sn);
        } else if (p->kind == RILL__GNODE_COPY) {
            snprintf(what, sizeof what, "graph node %u (memcpy)", xn->graph_index);
            access a = rill__san_make_access(p->u.copy.src, p->u.copy.bytes, false, what, 0);
            a.covered = 0;
            ok = rill__san_check_access(t, seq, &a, sn);
            a = rill__san_make_access(p->u.copy.dst, p->u.copy.bytes, true, what, 0);
            a.covered = 0;
            ok = ok && rill__san_check_access(t, seq, &a, sn);
        } else if (p->kind == RILL__GNODE_SET) {
            snprintf(what, sizeof what, "graph node %u (memset)", xn->graph_index);
            access a = rill__san_make_access(p->u.set.dst, p->u.set.bytes, true, what, 0);
            a.covered = 0;
            ok = rill__san_check_access(t, seq, &a, sn);
        } else if (p->kind == RILL__GNODE_EXTERN) {
            const rill_access *ext;
            size_t k = p->u.ext.ops->accesses(p->u.ext.obj, &ext);
            node_name(v, i, what, sizeof what);
            ok = rill__san_check_kernel(t, seq, ext, k, what, 0, false, sn);
        }
        if (!ok)
            return false;
    }
    return true;
}
