/* SPDX-License-Identifier: MIT */
/* CUDA graphs in the stand-in driver: the cuGraph* entry points that
 * rill's CUDA backend calls, with the driver's rules for them. A graph is
 * a list of nodes (kernel, memcpy, memset, event record, empty), each
 * after the nodes it depends on; instantiation copies it into an exec,
 * whose node parameters cuGraphExec*SetParams change for later launches
 * only; a launch snapshots the exec's parameters and runs the nodes on its
 * stream, as one operation after the stream's earlier work, in an order
 * that keeps every dependency but is not the order the nodes were added
 * in (the last ready node first), so that a missing dependency shows.
 * Calls are counted with the driver's others (fake_counts.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_graph.h"
#include "rill.h"

/* ---------------------------------------------------------------- graphs */

typedef enum nkind { N_EMPTY, N_KERNEL, N_COPY, N_SET, N_RECORD } nkind;

/* What a node does. */
typedef struct params {
    nkind kind;
    rill_cpu_kernel_fn fn;
    unsigned grid[3];
    size_t args_size;
    unsigned char *args; /* owned */
    void *dst;
    const void *src;
    size_t bytes;
    unsigned char value;
    CUevent ev;
} params;

struct CUgraphNode_st {
    CUgraph graph;
    uint32_t index;
};

struct CUgraph_st {
    uint32_t n, cap;
    struct CUgraphNode_st **nodes; /* owned, each too */
    params *p;                     /* per node */
    uint32_t **deps;               /* per node: owned indices */
    uint32_t *num_deps;
};

/* An exec's topology, shared with its launches in flight. */
typedef struct topo {
    _Atomic int refs;
    uint32_t n;
    uint32_t *succ_begin; /* n + 1 */
    uint32_t *succ;
    uint32_t *num_preds;
} topo;

struct CUgraphExec_st {
    CUgraph source; /* compared only: the graph its nodes' handles belong to */
    topo *t;
    params *p; /* per node: what the next launch runs */
};

static void params_clear(params *p) {
    free(p->args);
    p->args = NULL;
}

static void topo_unref(topo *t) {
    if (atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    free(t->succ_begin);
    free(t->succ);
    free(t->num_preds);
    free(t);
}

CUresult fake_cuGraphCreate(CUgraph *out, unsigned int flags) {
    NEED_CONTEXT();
    if (out == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *out = calloc(1, sizeof **out);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult fake_cuGraphDestroy(CUgraph g) {
    NEED_CONTEXT();
    if (g == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < g->n; i++) {
        free(g->nodes[i]);
        free(g->deps[i]);
        params_clear(&g->p[i]);
    }
    free(g->nodes);
    free(g->p);
    free(g->deps);
    free(g->num_deps);
    free(g);
    return CUDA_SUCCESS;
}

/* Appends a node doing p after deps: the driver refuses a dependency that
 * is not a node of g, or one named twice. Takes p's args. */
static CUresult add(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t num_deps,
                    params *p) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    uint32_t *d = NULL;
    if (out == NULL || g == NULL || (num_deps > 0 && deps == NULL))
        goto fail;
    d = malloc((num_deps > 0 ? num_deps : 1) * sizeof *d);
    if (d == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    for (size_t k = 0; k < num_deps; k++) {
        if (deps[k] == NULL || deps[k]->graph != g)
            goto fail;
        for (size_t j = 0; j < k; j++)
            if (deps[j] == deps[k])
                goto fail;
        d[k] = deps[k]->index;
    }
    if (g->n == g->cap) {
        uint32_t cap = g->cap > 0 ? 2 * g->cap : 16;
        void *a = realloc(g->nodes, cap * sizeof *g->nodes);
        if (a != NULL)
            g->nodes = a;
        void *b = realloc(g->p, cap * sizeof *g->p);
        if (b != NULL)
            g->p = b;
        void *c = realloc(g->deps, cap * sizeof *g->deps);
        if (c != NULL)
            g->deps = c;
        void *e = realloc(g->num_deps, cap * sizeof *g->num_deps);
        if (e != NULL)
            g->num_deps = e;
        if (a == NULL || b == NULL || c == NULL || e == NULL) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            goto fail;
        }
        g->cap = cap;
    }
    struct CUgraphNode_st *node = malloc(sizeof *node);
    if (node == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    *node = (struct CUgraphNode_st){.graph = g, .index = g->n};
    g->nodes[g->n] = node;
    g->p[g->n] = *p;
    g->deps[g->n] = d;
    g->num_deps[g->n] = (uint32_t)num_deps;
    g->n++;
    *out = node;
    return CUDA_SUCCESS;
fail:
    free(d);
    params_clear(p);
    return r;
}

/* A kernel node's parameters as the driver reads them: rill passes its
 * arguments as one buffer (extra); kernelParams the stand-in cannot size. */
static CUresult kernel_of(const CUDA_KERNEL_NODE_PARAMS *kp, params *p) {
    memset(p, 0, sizeof *p);
    if (kp == NULL || kp->func == NULL || kp->kernelParams != NULL || kp->gridDimX == 0 ||
        kp->gridDimY == 0 || kp->gridDimZ == 0 || kp->blockDimX == 0 || kp->blockDimY == 0 ||
        kp->blockDimZ == 0)
        return CUDA_ERROR_INVALID_VALUE;
    const void *buf = NULL;
    size_t size = 0;
    for (void **e = kp->extra; e != NULL && *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = e[1];
        else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = *(size_t *)e[1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (size > 0 && buf == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    p->kind = N_KERNEL;
    memcpy(&p->fn, &kp->func, sizeof p->fn);
    p->grid[0] = kp->gridDimX;
    p->grid[1] = kp->gridDimY;
    p->grid[2] = kp->gridDimZ;
    p->args_size = size;
    if ((p->args = malloc(size > 0 ? size : 1)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (size > 0)
        memcpy(p->args, buf, size);
    return CUDA_SUCCESS;
}

/* One-dimensional copies between addresses of unified addressing; the
 * driver refuses a zero-length one. */
static CUresult copy_of(const CUDA_MEMCPY3D *m, CUcontext ctx, params *p) {
    memset(p, 0, sizeof *p);
    if (m == NULL || ctx == NULL || m->WidthInBytes == 0 || m->Height != 1 || m->Depth != 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (m->srcMemoryType != CU_MEMORYTYPE_UNIFIED || m->dstMemoryType != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_NOT_SUPPORTED; /* the stand-in reads these only */
    p->kind = N_COPY;
    p->dst = (void *)(uintptr_t)m->dstDevice;
    p->src = (const void *)(uintptr_t)m->srcDevice;
    p->bytes = m->WidthInBytes;
    return CUDA_SUCCESS;
}

/* Of device memory, as cuMemsetD8Async, in elements of 1, 2 or 4 bytes
 * (the stand-in sets bytes), one row, not empty. */
static CUresult set_of(const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx, params *p) {
    memset(p, 0, sizeof *p);
    fake_range known;
    if (m == NULL || ctx == NULL || m->width == 0 || m->height != 1 ||
        (m->elementSize != 1 && m->elementSize != 2 && m->elementSize != 4) ||
        !fake_ranges_find((uintptr_t)m->dst, &known) || known.device < 0 ||
        !fake_ranges_cover((uintptr_t)m->dst, m->width, true))
        return CUDA_ERROR_INVALID_VALUE;
    if (m->elementSize != 1)
        return CUDA_ERROR_NOT_SUPPORTED;
    p->kind = N_SET;
    p->dst = (void *)(uintptr_t)m->dst;
    p->value = (unsigned char)m->value;
    p->bytes = m->width;
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                   size_t num_deps, const CUDA_KERNEL_NODE_PARAMS *kp) {
    NEED_CONTEXT();
    params p;
    CUresult r = kernel_of(kp, &p);
    if (r != CUDA_SUCCESS) {
        params_clear(&p);
        return r;
    }
    return add(out, g, deps, num_deps, &p);
}

CUresult fake_cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                   size_t num_deps, const CUDA_MEMCPY3D *m, CUcontext ctx) {
    NEED_CONTEXT();
    params p;
    CUresult r = copy_of(m, ctx, &p);
    return r != CUDA_SUCCESS ? r : add(out, g, deps, num_deps, &p);
}

CUresult fake_cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                   size_t num_deps, const CUDA_MEMSET_NODE_PARAMS *m,
                                   CUcontext ctx) {
    NEED_CONTEXT();
    params p;
    CUresult r = set_of(m, ctx, &p);
    return r != CUDA_SUCCESS ? r : add(out, g, deps, num_deps, &p);
}

CUresult fake_cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                  size_t num_deps) {
    NEED_CONTEXT();
    params p = {.kind = N_EMPTY};
    return add(out, g, deps, num_deps, &p);
}

CUresult fake_cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                        size_t num_deps, CUevent ev) {
    NEED_CONTEXT();
    if (ev == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    params p = {.kind = N_RECORD, .ev = ev};
    return add(out, g, deps, num_deps, &p);
}

/* ----------------------------------------------------------------- execs */

static void exec_free(CUgraphExec x, uint32_t n) {
    for (uint32_t i = 0; x->p != NULL && i < n; i++)
        params_clear(&x->p[i]);
    free(x->p);
    if (x->t != NULL)
        topo_unref(x->t);
    free(x);
}

/* Copies p's args into memory of its own (false: out of memory). */
static bool params_copy(params *to, const params *from) {
    *to = *from;
    to->args = NULL;
    if (from->kind != N_KERNEL)
        return true;
    if ((to->args = malloc(from->args_size > 0 ? from->args_size : 1)) == NULL)
        return false;
    if (from->args_size > 0)
        memcpy(to->args, from->args, from->args_size);
    return true;
}

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long flags) {
    NEED_CONTEXT();
    if (out == NULL || g == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint32_t n = g->n, m = n > 0 ? n : 1, edges = 0;
    for (uint32_t i = 0; i < n; i++)
        edges += g->num_deps[i];
    CUgraphExec x = calloc(1, sizeof *x);
    topo *t = calloc(1, sizeof *t);
    if (x == NULL || t == NULL) {
        free(x);
        free(t);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    x->t = t;
    atomic_init(&t->refs, 1);
    t->n = n;
    x->source = g;
    x->p = calloc(m, sizeof *x->p);
    t->succ_begin = calloc(m + 1, sizeof *t->succ_begin);
    t->succ = malloc((edges > 0 ? edges : 1) * sizeof *t->succ);
    t->num_preds = calloc(m, sizeof *t->num_preds);
    uint32_t *fill = calloc(m, sizeof *fill);
    bool ok = x->p != NULL && t->succ_begin != NULL && t->succ != NULL && t->num_preds != NULL &&
              fill != NULL;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = params_copy(&x->p[i], &g->p[i]);
    if (!ok) {
        free(fill);
        exec_free(x, n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++) {
        t->num_preds[i] = g->num_deps[i];
        for (uint32_t k = 0; k < g->num_deps[i]; k++)
            t->succ_begin[g->deps[i][k] + 1]++;
    }
    for (uint32_t i = 0; i < n; i++)
        t->succ_begin[i + 1] += t->succ_begin[i];
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < g->num_deps[i]; k++) {
            uint32_t d = g->deps[i][k];
            t->succ[t->succ_begin[d] + fill[d]++] = i;
        }
    free(fill);
    *out = x;
    return CUDA_SUCCESS;
}

/* Launches hold what they run: the driver frees an exec at once. */
CUresult fake_cuGraphExecDestroy(CUgraphExec x) {
    NEED_CONTEXT();
    if (x == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    exec_free(x, x->t->n);
    return CUDA_SUCCESS;
}

/* A launch: the exec's parameters at the call, and the generation of each
 * event record node's record. */
typedef struct launch {
    CUstream stream;
    topo *t; /* ref */
    params *p;
    uint64_t *gen;
} launch;

static void launch_free(launch *l) {
    for (uint32_t i = 0; l->p != NULL && i < l->t->n; i++)
        params_clear(&l->p[i]);
    free(l->p);
    free(l->gen);
    topo_unref(l->t);
    free(l);
}

static void run_node(const params *p, uint64_t gen) {
    switch (p->kind) {
    case N_KERNEL: {
        rill_block_ctx ctx = {.grid_dim = {p->grid[0], p->grid[1], p->grid[2]}};
        for (unsigned z = 0; z < p->grid[2]; z++)
            for (unsigned y = 0; y < p->grid[1]; y++)
                for (unsigned x = 0; x < p->grid[0]; x++) {
                    ctx.block_idx = (rill_dim3){x, y, z};
                    p->fn(&ctx, p->args);
                }
        break;
    }
    case N_COPY:
        memmove(p->dst, p->src, p->bytes);
        break;
    case N_SET:
        memset(p->dst, p->value, p->bytes);
        break;
    case N_RECORD:
        fake_event_reach(p->ev, gen);
        break;
    case N_EMPTY:
        break;
    }
}

/* On the stream's thread: every node once its predecessors have run, the
 * last one readied first; a fault of the GPU abandons the rest. */
static void run_launch(void *arg) {
    launch *l = arg;
    uint32_t n = l->t->n;
    uint32_t *left = malloc((n > 0 ? n : 1) * sizeof *left);
    uint32_t *ready = malloc((n > 0 ? n : 1) * sizeof *ready);
    if (left == NULL || ready == NULL)
        abort(); /* a stand-in has nowhere to report it */
    uint32_t top = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((left[i] = l->t->num_preds[i]) == 0)
            ready[top++] = i;
    while (top > 0 && !fake_stream_fault(l->stream)) {
        uint32_t i = ready[--top];
        run_node(&l->p[i], l->gen[i]);
        for (uint32_t k = l->t->succ_begin[i]; k < l->t->succ_begin[i + 1]; k++)
            if (--left[l->t->succ[k]] == 0)
                ready[top++] = l->t->succ[k];
    }
    free(left);
    free(ready);
    launch_free(l);
}

CUresult fake_cuGraphLaunch(CUgraphExec x, CUstream s) {
    NEED_CONTEXT();
    if (x == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE; /* rill never uses the legacy stream */
    int fault = fake_stream_fault(s);
    if (fault)
        return (CUresult)fault;
    uint32_t n = x->t->n, m = n > 0 ? n : 1;
    launch *l = calloc(1, sizeof *l);
    if (l == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->stream = s;
    l->t = x->t;
    atomic_fetch_add(&x->t->refs, 1);
    l->p = calloc(m, sizeof *l->p);
    l->gen = calloc(m, sizeof *l->gen);
    bool ok = l->p != NULL && l->gen != NULL;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = params_copy(&l->p[i], &x->p[i]);
    if (!ok) {
        launch_free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++)
        if (l->p[i].kind == N_RECORD)
            l->gen[i] = fake_event_arm(l->p[i].ev, s);
    CUresult r = fake_stream_call(s, run_launch, l);
    if (r != CUDA_SUCCESS)
        launch_free(l);
    return r;
}

/* The node of x that node names, of kind: the driver refuses a node of
 * another graph than x's, or of another kind. */
static params *exec_node(CUgraphExec x, CUgraphNode node, nkind kind) {
    if (x == NULL || node == NULL || node->graph != x->source || node->index >= x->t->n ||
        x->p[node->index].kind != kind)
        return NULL;
    return &x->p[node->index];
}

/* Replaces *at with p (taking p's args). */
static void replace(params *at, params *p) {
    params_clear(at);
    *at = *p;
}

CUresult fake_cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode node,
                                             const CUDA_KERNEL_NODE_PARAMS *kp) {
    NEED_CONTEXT();
    params *at = exec_node(x, node, N_KERNEL), p;
    if (at == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = kernel_of(kp, &p);
    if (r != CUDA_SUCCESS) {
        params_clear(&p);
        return r;
    }
    replace(at, &p);
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode node,
                                             const CUDA_MEMCPY3D *m, CUcontext ctx) {
    NEED_CONTEXT();
    params *at = exec_node(x, node, N_COPY), p;
    if (at == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = copy_of(m, ctx, &p);
    if (r == CUDA_SUCCESS)
        replace(at, &p);
    return r;
}

CUresult fake_cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode node,
                                             const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx) {
    NEED_CONTEXT();
    params *at = exec_node(x, node, N_SET), p;
    if (at == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = set_of(m, ctx, &p);
    if (r == CUDA_SUCCESS)
        replace(at, &p);
    return r;
}

CUresult fake_cuGraphExecEventRecordNodeSetEvent(CUgraphExec x, CUgraphNode node, CUevent ev) {
    NEED_CONTEXT();
    params *at = exec_node(x, node, N_RECORD);
    if (at == NULL || ev == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    at->ev = ev;
    return CUDA_SUCCESS;
}
