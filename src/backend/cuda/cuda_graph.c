/* SPDX-License-Identifier: MIT */
/* CUDA graphs for rill's execs: graph_prepare builds them from the exec's
 * nodes, and a launch is cuGraphLaunch, issued as a kernel is (cuda.h).
 *
 * Each node goes where the device can run it: into a CUDA graph (kernels,
 * copies of memory the driver knows, memsets of device memory, timing
 * event records as event record nodes, other event nodes and empty nodes
 * as empty nodes: a graph's event waits are stream waits made at submit),
 * onto the stream between CUDA graphs (built-in ops that cuBLAS or cuDNN
 * run, copies of pageable memory), or onto the host once the stream has
 * drained (host functions, which may call rill, collectives, memsets of
 * host memory).
 * The nodes of the last two kinds split the exec into phases: phase(n) =
 * max over predecessors p of phase(p) + (p is not a CUDA graph node), and
 * phase k runs its CUDA graph, then its other nodes, in topological order.
 * An exec of one phase with no such node is one cuGraphLaunch.
 *
 * A build is one such layout, instantiated; an exec keeps the builds that
 * launches not yet issued may need, newest first, each for the parameter
 * sets from its version on. An update with the layout of the newest build
 * is applied to its CUDA graphs when the first launch of the new set is
 * issued (cuGraphExec*SetParams of the nodes that changed), so that
 * launches issued before run with theirs; one that changes the layout
 * (a kernel becomes a library's op, a memset's memory becomes pageable) is
 * instantiated anew. Launches of one exec are issued one after another
 * (rill__cmd's after_stream), which is what lets them share the builds. */
#include "backend/cuda/cuda_graph.h"

#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/status.h"

/* Where a node runs (one byte per node: a build's layout). */
enum where {
    ON_GRAPH = 0, /* a kernel, memcpy or memset node of its phase's CUDA graph */
    ON_EMPTY,     /* an empty node there: event nodes but timing records, empty copies */
    ON_TIMING,    /* an event record node there (a timing event's record) */
    ON_STREAM,    /* issued on the stream after its phase's CUDA graph */
    ON_HOST       /* run on the host after its phase's CUDA graph has drained */
};

typedef struct phase {
    CUgraph graph; /* owned; NULL when the phase has no CUDA graph node */
    CUgraphExec exec;
    uint32_t first, end; /* its other nodes: build.order[first, end) */
} phase;

typedef struct build {
    struct build *older; /* guarded by the state's lock */
    uint64_t version;    /* immutable: the first parameter set it runs */
    unsigned char *where;
    uint32_t *phase_of;
    CUgraphNode *cu;   /* per node: its node in its phase's graph */
    CUevent *stand_in; /* per node: a timing record node's event until a launch sets its own */
    uint32_t *order;   /* the nodes of no CUDA graph, by phase, then topological */
    uint32_t *timing;  /* the timing record nodes */
    uint32_t num_timing, num_phases;
    phase *phases;
    bool direct; /* one phase, every node in its CUDA graph */
    /* guarded by the state's lock: the set whose parameters the CUDA
     * graphs hold (UINT64_MAX: unknown after a failure), and a copy of
     * its nodes' parameters (kernel args owned) */
    uint64_t applied;
    rill__gnode_params *held;
} build;

typedef struct gstate {
    cuda_device *d;
    const rill__gprog *prog; /* borrowed: the exec's, outlives this */
    rill__mutex lock;
    build *builds; /* guarded by lock: newest first */
} gstate;

/* What the completion of a launch with timing record nodes needs: each
 * node's event, recorded by this launch. */
typedef struct grun {
    uint32_t num;
    struct {
        uint32_t node;
        CUevent ev;
    } stamp[];
} grun;

/* ---------------------------------------------------------------- layout */

static bool known(cuda_device *d, const void *p) {
    return rill__cuda_memory_type(d, p) != 0;
}

static unsigned char where_of(cuda_device *d, const rill__gnode_params *p) {
    switch (p->kind) {
    case RILL__GNODE_KERNEL:
        return ((const cuda_loaded *)p->u.kernel.loaded)->fn != NULL ? ON_GRAPH : ON_STREAM;
    case RILL__GNODE_COPY:
        if (p->u.copy.bytes == 0)
            return ON_EMPTY;
        return known(d, p->u.copy.dst) && known(d, p->u.copy.src) ? ON_GRAPH : ON_STREAM;
    case RILL__GNODE_SET:
        if (p->u.set.bytes == 0)
            return ON_EMPTY;
        /* The driver sets device memory only (rill__cuda_gpu_settable). */
        return rill__cuda_gpu_settable(d, p->u.set.dst) ? ON_GRAPH : ON_HOST;
    case RILL__GNODE_RECORD:
        return p->u.event.timing ? ON_TIMING : ON_EMPTY;
    case RILL__GNODE_HOST:
    case RILL__GNODE_EXTERN:
        return ON_HOST;
    default: /* empty and wait nodes */
        return ON_EMPTY;
    }
}

static bool on_graph(unsigned char w) {
    return w <= ON_TIMING;
}

/* The layout of nodes into where (num_nodes bytes). */
static void layout(cuda_device *d, const rill__gprog *prog, const rill__xnode *nodes,
                   unsigned char *where) {
    for (uint32_t i = 0; i < prog->num_nodes; i++)
        where[i] = where_of(d, &nodes[i].p);
}

/* ------------------------------------------------------------ parameters */

static CUDA_KERNEL_NODE_PARAMS kernel_params(const rill__kernel_call *k, void **extra,
                                             size_t *size) {
    *size = k->args_size;
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = (void *)(uintptr_t)k->args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = size;
    extra[4] = CU_LAUNCH_PARAM_END;
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = ((const cuda_loaded *)k->loaded)->fn;
    kp.gridDimX = k->grid.x;
    kp.gridDimY = k->grid.y;
    kp.gridDimZ = k->grid.z;
    kp.blockDimX = k->block.x;
    kp.blockDimY = k->block.y;
    kp.blockDimZ = k->block.z;
    kp.extra = k->args_size > 0 ? extra : NULL;
    return kp;
}

static CUDA_MEMCPY3D copy_params(const rill__copy_call *c) {
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    m.srcDevice = (CUdeviceptr)(uintptr_t)c->src;
    m.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    m.dstDevice = (CUdeviceptr)(uintptr_t)c->dst;
    m.WidthInBytes = c->bytes;
    m.Height = 1;
    m.Depth = 1;
    return m;
}

static CUDA_MEMSET_NODE_PARAMS set_params(const rill__set_call *s) {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = (CUdeviceptr)(uintptr_t)s->dst;
    m.value = (unsigned char)s->value;
    m.elementSize = 1;
    m.width = s->bytes;
    m.height = 1;
    return m;
}

/* Whether a graph node's parameters are the same in a and b (of one kind). */
static bool same_params(const rill__gnode_params *a, const rill__gnode_params *b) {
    switch (a->kind) {
    case RILL__GNODE_KERNEL: {
        const rill__kernel_call *x = &a->u.kernel, *y = &b->u.kernel;
        return x->loaded == y->loaded && !memcmp(&x->grid, &y->grid, sizeof x->grid) &&
               !memcmp(&x->block, &y->block, sizeof x->block) && x->args_size == y->args_size &&
               (x->args_size == 0 || !memcmp(x->args, y->args, x->args_size));
    }
    case RILL__GNODE_COPY:
        return a->u.copy.dst == b->u.copy.dst && a->u.copy.src == b->u.copy.src &&
               a->u.copy.bytes == b->u.copy.bytes;
    case RILL__GNODE_SET:
        return a->u.set.dst == b->u.set.dst && a->u.set.value == b->u.set.value &&
               a->u.set.bytes == b->u.set.bytes;
    default:
        return true;
    }
}

/* Keeps a copy of p in *held (a kernel's args in memory of its own). */
static bool hold(rill__gnode_params *held, const rill__gnode_params *p) {
    void *args = NULL;
    if (p->kind == RILL__GNODE_KERNEL && p->u.kernel.args_size > 0) {
        if ((args = rill__malloc(p->u.kernel.args_size)) == NULL)
            return false;
        memcpy(args, p->u.kernel.args, p->u.kernel.args_size);
    }
    if (held->kind == RILL__GNODE_KERNEL)
        rill__free((void *)(uintptr_t)held->u.kernel.args);
    *held = *p;
    if (p->kind == RILL__GNODE_KERNEL) {
        held->u.kernel.args = args;
        held->u.kernel.accesses = NULL;
        held->u.kernel.num_accesses = 0;
    }
    return true;
}

/* Brings b's CUDA graphs to the parameters of nodes (numbered version):
 * cuGraphExec*SetParams of each CUDA graph node that changed since the
 * set they hold. The state's lock held. */
static CUresult apply(cuda_device *d, uint32_t n, build *b, const rill__xnode *nodes,
                      uint64_t version) {
    if (b->applied == version)
        return CUDA_SUCCESS;
    b->applied = UINT64_MAX; /* until every node is done */
    for (uint32_t i = 0; i < n; i++) {
        const rill__gnode_params *p = &nodes[i].p;
        if (b->where[i] != ON_GRAPH || b->cu[i] == NULL || same_params(&b->held[i], p))
            continue;
        CUgraphExec x = b->phases[b->phase_of[i]].exec;
        CUresult r = CUDA_SUCCESS;
        if (p->kind == RILL__GNODE_KERNEL) {
            void *extra[5];
            size_t size;
            CUDA_KERNEL_NODE_PARAMS kp = kernel_params(&p->u.kernel, extra, &size);
            r = d->drv->cuGraphExecKernelNodeSetParams(x, b->cu[i], &kp);
        } else if (p->kind == RILL__GNODE_COPY) {
            CUDA_MEMCPY3D m = copy_params(&p->u.copy);
            r = d->drv->cuGraphExecMemcpyNodeSetParams(x, b->cu[i], &m, d->ctx);
        } else if (p->kind == RILL__GNODE_SET) {
            CUDA_MEMSET_NODE_PARAMS m = set_params(&p->u.set);
            r = d->drv->cuGraphExecMemsetNodeSetParams(x, b->cu[i], &m, d->ctx);
        }
        if (r != CUDA_SUCCESS)
            return r;
        if (!hold(&b->held[i], p))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    b->applied = version;
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------------- builds */

static void build_free(cuda_device *d, uint32_t n, build *b) {
    if (b == NULL)
        return;
    const rill__cuda_driver *drv = d->drv;
    for (uint32_t k = 0; b->phases != NULL && k < b->num_phases; k++) {
        /* The driver frees an exec that is still running once it ends. */
        if (b->phases[k].exec != NULL)
            (void)drv->cuGraphExecDestroy(b->phases[k].exec);
        if (b->phases[k].graph != NULL)
            (void)drv->cuGraphDestroy(b->phases[k].graph);
    }
    for (uint32_t i = 0; b->stand_in != NULL && i < n; i++)
        if (b->stand_in[i] != NULL)
            (void)drv->cuEventDestroy(b->stand_in[i]);
    for (uint32_t i = 0; b->held != NULL && i < n; i++)
        if (b->held[i].kind == RILL__GNODE_KERNEL)
            rill__free((void *)(uintptr_t)b->held[i].u.kernel.args);
    rill__free(b->where);
    rill__free(b->phase_of);
    rill__free(b->cu);
    rill__free(b->stand_in);
    rill__free(b->order);
    rill__free(b->timing);
    rill__free(b->phases);
    rill__free(b->held);
    rill__free(b);
}

/* Adds node i to its phase's graph after deps (num_deps of them). */
static CUresult add_node(cuda_device *d, build *b, const rill__xnode *node, uint32_t i,
                         const CUgraphNode *deps, size_t num_deps) {
    const rill__cuda_driver *drv = d->drv;
    const rill__gnode_params *p = &node->p;
    CUgraph g = b->phases[b->phase_of[i]].graph;
    CUgraphNode *out = &b->cu[i];
    if (p->kind == RILL__GNODE_KERNEL) {
        void *extra[5];
        size_t size;
        CUDA_KERNEL_NODE_PARAMS kp = kernel_params(&p->u.kernel, extra, &size);
        return drv->cuGraphAddKernelNode(out, g, deps, num_deps, &kp);
    }
    if (b->where[i] == ON_GRAPH && p->kind == RILL__GNODE_COPY) {
        CUDA_MEMCPY3D m = copy_params(&p->u.copy);
        return drv->cuGraphAddMemcpyNode(out, g, deps, num_deps, &m, d->ctx);
    }
    if (b->where[i] == ON_GRAPH && p->kind == RILL__GNODE_SET) {
        CUDA_MEMSET_NODE_PARAMS m = set_params(&p->u.set);
        return drv->cuGraphAddMemsetNode(out, g, deps, num_deps, &m, d->ctx);
    }
    if (b->where[i] == ON_TIMING) {
        CUresult r = drv->cuEventCreate(&b->stand_in[i], CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS)
            return r;
        return drv->cuGraphAddEventRecordNode(out, g, deps, num_deps, b->stand_in[i]);
    }
    return drv->cuGraphAddEmptyNode(out, g, deps, num_deps);
}

/* Numbers b's phases (see the top of the file), in topological order: a
 * node's is final when it is reached, and pushes its successors'. Counts
 * into count[j + 1] the edges into graph node j from graph nodes (those of
 * its phase among them), and b's timing record nodes. */
static void number_phases(const rill__gprog *prog, const rill__xnode *nodes, build *b,
                          uint32_t *count) {
    uint32_t top = 0;
    for (uint32_t i = 0; i < prog->num_nodes; i++) {
        uint32_t next = b->phase_of[i] + !on_graph(b->where[i]);
        top = b->phase_of[i] > top ? b->phase_of[i] : top;
        b->num_timing += b->where[i] == ON_TIMING;
        const uint32_t *succ = prog->succ + nodes[i].succ_begin;
        for (uint32_t k = 0; k < nodes[i].num_succ; k++) {
            if (b->phase_of[succ[k]] < next)
                b->phase_of[succ[k]] = next;
            if (on_graph(b->where[i]) && on_graph(b->where[succ[k]]))
                count[succ[k] + 1]++;
        }
    }
    b->num_phases = top + 1;
}

/* Lists the nodes of no graph in b->order by phase (a stable counting
 * sort), each phase's range in its phase, and the timing record nodes in
 * b->timing; false when out of memory. */
static bool list_nodes(uint32_t n, build *b) {
    uint32_t *at = rill__calloc(b->num_phases + 1, sizeof *at);
    if (at == NULL)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!on_graph(b->where[i]))
            at[b->phase_of[i] + 1]++;
    for (uint32_t k = 0; k < b->num_phases; k++) {
        at[k + 1] += at[k];
        b->phases[k].first = at[k];
        b->phases[k].end = at[k + 1];
    }
    for (uint32_t i = 0, t = 0; i < n; i++) {
        if (!on_graph(b->where[i]))
            b->order[at[b->phase_of[i]]++] = i;
        else if (b->where[i] == ON_TIMING)
            b->timing[t++] = i;
    }
    rill__free(at);
    return true;
}

/* Makes each phase's graph, its nodes after their predecessors of the same
 * graph (count: number_phases', summed into offsets here), and
 * instantiates it. */
static CUresult make_graphs(cuda_device *d, const rill__gprog *prog, const rill__xnode *nodes,
                            build *b, uint32_t *count) {
    uint32_t n = prog->num_nodes;
    for (uint32_t i = 0; i < n; i++)
        count[i + 1] += count[i];
    CUgraphNode *deps = rill__malloc((count[n] > 0 ? count[n] : 1) * sizeof *deps);
    uint32_t *fill = rill__calloc(n > 0 ? n : 1, sizeof *fill);
    CUresult r = deps != NULL && fill != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        if (!on_graph(b->where[i]))
            continue;
        phase *ph = &b->phases[b->phase_of[i]];
        if (ph->graph == NULL && (r = d->drv->cuGraphCreate(&ph->graph, 0)) != CUDA_SUCCESS)
            break;
        r = add_node(d, b, &nodes[i], i, deps + count[i], fill[i]);
        if (r == CUDA_SUCCESS && !hold(&b->held[i], &nodes[i].p))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        const uint32_t *succ = prog->succ + nodes[i].succ_begin;
        for (uint32_t k = 0; r == CUDA_SUCCESS && k < nodes[i].num_succ; k++) {
            uint32_t j = succ[k];
            if (on_graph(b->where[j]) && b->phase_of[j] == b->phase_of[i])
                deps[count[j] + fill[j]++] = b->cu[i];
        }
    }
    rill__free(deps);
    rill__free(fill);
    for (uint32_t k = 0; k < b->num_phases && r == CUDA_SUCCESS; k++)
        if (b->phases[k].graph != NULL)
            r = d->drv->cuGraphInstantiateWithFlags(&b->phases[k].exec, b->phases[k].graph, 0);
    return r;
}

/* Builds and instantiates the layout where for nodes (a set numbered
 * version): NULL, with the driver's result in *res, when it cannot. */
static build *build_new(cuda_device *d, const rill__gprog *prog, const rill__xnode *nodes,
                        const unsigned char *where, uint64_t version, CUresult *res) {
    uint32_t n = prog->num_nodes, m = n > 0 ? n : 1;
    *res = CUDA_ERROR_OUT_OF_MEMORY;
    build *b = rill__calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->version = version;
    b->applied = version;
    b->where = rill__malloc(m);
    b->phase_of = rill__calloc(m, sizeof *b->phase_of);
    b->cu = rill__calloc(m, sizeof *b->cu);
    b->stand_in = rill__calloc(m, sizeof *b->stand_in);
    b->order = rill__malloc(m * sizeof *b->order);
    b->held = rill__calloc(m, sizeof *b->held);
    uint32_t *count = rill__calloc(m + 1, sizeof *count);
    if (b->where == NULL || b->phase_of == NULL || b->cu == NULL || b->stand_in == NULL ||
        b->order == NULL || b->held == NULL || count == NULL)
        goto fail;
    memcpy(b->where, where, n);
    number_phases(prog, nodes, b, count);
    b->phases = rill__calloc(b->num_phases, sizeof *b->phases);
    b->timing = rill__malloc((b->num_timing > 0 ? b->num_timing : 1) * sizeof *b->timing);
    if (b->phases == NULL || b->timing == NULL || !list_nodes(n, b))
        goto fail;
    if ((*res = make_graphs(d, prog, nodes, b, count)) != CUDA_SUCCESS)
        goto fail;
    b->direct = b->num_phases == 1 && b->phases[0].first == b->phases[0].end;
    rill__free(count);
    return b;
fail:
    rill__free(count);
    build_free(d, n, b);
    return NULL;
}

/* The sentence of a failed build; returns its status. */
static rill_status fail_build(cuda_device *d, CUresult r, uint32_t n) {
    char why[200];
    rill__cuda_describe(d, r, "the CUDA driver refused it", why, sizeof why);
    return rill__fail(r == CUDA_ERROR_OUT_OF_MEMORY ? RILL_ERROR_OUT_OF_MEMORY
                                                    : RILL_ERROR_NOT_SUPPORTED,
                      "a CUDA graph of %u nodes could not be made: %s", n, why);
}

/* -------------------------------------------------------------- the ops */

rill_status rill__cuda_graph_prepare(rill__device *dev, const rill__gprog *prog,
                                     const rill__xnode *nodes, void **state) {
    cuda_device *d = cuda_device_of(dev);
    uint32_t n = prog->num_nodes;
    gstate *g = rill__calloc(1, sizeof *g);
    unsigned char *where = rill__malloc(n > 0 ? n : 1);
    if (g == NULL || where == NULL) {
        rill__free(g);
        rill__free(where);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory for a graph of %u nodes", n);
    }
    g->d = d;
    g->prog = prog;
    CUcontext prev = rill__cuda_enter(d);
    layout(d, prog, nodes, where);
    CUresult r;
    g->builds = build_new(d, prog, nodes, where, 0, &r);
    rill__cuda_leave(d, prev);
    rill__free(where);
    if (g->builds == NULL) {
        rill__free(g);
        return fail_build(d, r, n);
    }
    rill__mutex_init(&g->lock);
    *state = g;
    return RILL_OK;
}

rill_status rill__cuda_graph_update(rill__device *dev, void *state, const rill__xnode *nodes,
                                    uint64_t version) {
    cuda_device *d = cuda_device_of(dev);
    gstate *g = state;
    uint32_t n = g->prog->num_nodes;
    unsigned char *where = rill__malloc(n > 0 ? n : 1);
    if (where == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory for a graph of %u nodes", n);
    CUcontext prev = rill__cuda_enter(d);
    layout(d, g->prog, nodes, where);
    rill__mutex_lock(&g->lock);
    bool same = memcmp(where, g->builds->where, n) == 0;
    rill__mutex_unlock(&g->lock);
    /* The same layout: the new parameters go to the graphs before its
     * first launch (apply). Another one: a new instantiation. */
    rill_status st = RILL_OK;
    if (!same) {
        CUresult r;
        build *b = build_new(d, g->prog, nodes, where, version, &r);
        if (b == NULL) {
            st = fail_build(d, r, n);
        } else {
            rill__mutex_lock(&g->lock);
            b->older = g->builds;
            g->builds = b;
            rill__mutex_unlock(&g->lock);
        }
    }
    rill__cuda_leave(d, prev);
    rill__free(where);
    return st;
}

void rill__cuda_graph_release(rill__device *dev, void *state) {
    gstate *g = state;
    if (g == NULL)
        return;
    cuda_device *d = cuda_device_of(dev);
    CUcontext prev = rill__cuda_enter(d);
    while (g->builds != NULL) {
        build *b = g->builds;
        g->builds = b->older;
        build_free(d, g->prog->num_nodes, b);
    }
    rill__cuda_leave(d, prev);
    rill__mutex_destroy(&g->lock);
    rill__free(g);
}

/* The build that runs parameter set version (the state's lock held). */
static build *build_for(gstate *g, uint64_t version) {
    build *b = g->builds;
    while (b->version > version && b->older != NULL)
        b = b->older;
    return b;
}

bool rill__cuda_graph_direct(const rill__graph_launch *l) {
    gstate *g = l->state;
    rill__mutex_lock(&g->lock);
    bool direct = build_for(g, l->version)->direct;
    rill__mutex_unlock(&g->lock);
    return direct;
}

/* ---------------------------------------------------------------- launch */

/* The build of l, its parameters applied, before l is issued: the builds
 * older than it are for launches issued already, which the driver finishes
 * before it frees their graphs. */
static CUresult begin(gstate *g, const rill__graph_launch *l, build **out) {
    uint32_t n = g->prog->num_nodes;
    rill__mutex_lock(&g->lock);
    build *b = build_for(g, l->version);
    while (b->older != NULL) {
        build *old = b->older;
        b->older = old->older;
        build_free(g->d, n, old);
    }
    CUresult r = apply(g->d, n, b, l->nodes, l->version);
    rill__mutex_unlock(&g->lock);
    *out = b;
    return r;
}

/* A run record for the timing record nodes of b (NULL: none). */
static grun *run_new(const build *b, CUresult *r) {
    if (b->num_timing == 0)
        return NULL;
    grun *run = rill__calloc(1, sizeof *run + b->num_timing * sizeof run->stamp[0]);
    if (run == NULL) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    run->num = b->num_timing;
    for (uint32_t k = 0; k < b->num_timing; k++)
        run->stamp[k].node = b->timing[k];
    return run;
}

/* Launches phase k of b on stream: each timing record node of the phase
 * records an event of this launch's own (run), from the device's pool. */
static CUresult launch_phase(cuda_device *d, const build *b, uint32_t k, grun *run,
                             CUstream stream) {
    const phase *ph = &b->phases[k];
    if (ph->exec == NULL)
        return CUDA_SUCCESS;
    for (uint32_t t = 0; run != NULL && t < run->num; t++) {
        uint32_t i = run->stamp[t].node;
        if (b->phase_of[i] != k)
            continue;
        run->stamp[t].ev = rill__cuda_timing_event(d);
        if (run->stamp[t].ev == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r =
            d->drv->cuGraphExecEventRecordNodeSetEvent(ph->exec, b->cu[i], run->stamp[t].ev);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return d->drv->cuGraphLaunch(ph->exec, stream);
}

CUresult rill__cuda_graph_issue(cuda_device *d, CUstream stream, const rill__graph_launch *l,
                                void **run) {
    build *b;
    *run = NULL;
    CUresult r = begin(l->state, l, &b);
    grun *gr = r == CUDA_SUCCESS ? run_new(b, &r) : NULL;
    if (r == CUDA_SUCCESS)
        r = launch_phase(d, b, 0, gr, stream);
    *run = gr;
    return r;
}

typedef struct ext_wait {
    _Atomic uint32_t done;
    char failure[RILL__CAUSE_BYTES];
} ext_wait;

static void ext_done(void *arg, const char *failure) {
    ext_wait *w = arg;
    if (failure != NULL)
        snprintf(w->failure, sizeof w->failure, "%s", failure);
    atomic_store_explicit(&w->done, 1, memory_order_release);
    rill__futex_wake(&w->done, 1);
}

/* Runs node i, one of no CUDA graph, after what came before it on cs's
 * stream (host nodes: once that drained; *on_gpu says whether anything
 * may be left there). skip: the launch failed before it (an extern node
 * is still started, to be skipped). */
static void run_other(cuda_device *d, cuda_stream *cs, const rill__graph_launch *l, void **ext,
                      uint32_t i, bool skip, bool *on_gpu, char *what, size_t what_size, char *why,
                      size_t why_size) {
    const rill__cuda_driver *drv = d->drv;
    const rill__xnode *x = &l->nodes[i];
    const rill__gnode_params *p = &x->p;
    CUresult r = CUDA_SUCCESS;
    bool host =
        p->kind == RILL__GNODE_EXTERN || p->kind == RILL__GNODE_HOST || p->kind == RILL__GNODE_SET;
    if (host && !skip && *on_gpu) {
        if ((r = drv->cuStreamSynchronize(cs->cu)) == CUDA_SUCCESS)
            *on_gpu = false;
        else
            skip = true;
    }
    if (p->kind == RILL__GNODE_EXTERN) {
        void *token = ext[x->ext_slot];
        ext[x->ext_slot] = NULL;
        ext_wait w = {.done = 0};
        p->u.ext.ops->start(token, skip, ext_done, &w);
        while (atomic_load_explicit(&w.done, memory_order_acquire) == 0)
            rill__futex_wait(&w.done, 0);
        if (w.failure[0] != '\0' && what[0] == '\0') {
            snprintf(what, what_size, "collective (graph node %u)", x->graph_index);
            snprintf(why, why_size, "%s", w.failure);
        }
    } else if (!skip && p->kind == RILL__GNODE_HOST) {
        rill__launch_state hs;
        bool failed = rill__host_run(p->u.host.fn, p->u.host.user_data, &hs);
        (void)rill__cuda_enter(d); /* the function may have changed it */
        if (failed) {
            snprintf(what, what_size, "host function (graph node %u)", x->graph_index);
            snprintf(why, why_size, "%s", hs.message);
        }
    } else if (!skip && p->kind == RILL__GNODE_SET) {
        memset(p->u.set.dst, p->u.set.value, p->u.set.bytes);
    } else if (!skip && p->kind == RILL__GNODE_COPY) {
        r = drv->cuMemcpyAsync((CUdeviceptr)(uintptr_t)p->u.copy.dst,
                               (CUdeviceptr)(uintptr_t)p->u.copy.src, p->u.copy.bytes, cs->cu);
        *on_gpu = true;
    } else if (!skip && p->kind == RILL__GNODE_KERNEL) {
        char text[320];
        const cuda_loaded *ld = p->u.kernel.loaded;
        *on_gpu = true;
        if (rill__cuda_op_library(&d->libs, ld->op, cs->cu, p->u.kernel.args, text, sizeof text) !=
            RILL_OK) {
            snprintf(what, what_size, "graph node %u", x->graph_index);
            snprintf(why, why_size, "%s", text);
        }
    }
    if (r != CUDA_SUCCESS && what[0] == '\0') {
        snprintf(what, what_size, "graph node %u", x->graph_index);
        rill__cuda_describe(d, r, "the CUDA driver refused it", why, why_size);
    }
}

bool rill__cuda_graph_run(cuda_device *d, cuda_stream *cs, const rill__graph_launch *l, void **ext,
                          void **run, char *what, size_t what_size, char *why, size_t why_size) {
    build *b;
    what[0] = '\0';
    CUresult r = begin(l->state, l, &b);
    grun *gr = r == CUDA_SUCCESS ? run_new(b, &r) : NULL;
    *run = gr;
    bool on_gpu = false;
    for (uint32_t k = 0; k < b->num_phases; k++) {
        if (r == CUDA_SUCCESS && what[0] == '\0' && b->phases[k].exec != NULL) {
            r = launch_phase(d, b, k, gr, cs->cu);
            on_gpu = true;
        }
        if (r != CUDA_SUCCESS && what[0] == '\0') {
            snprintf(what, what_size, "graph launch (phase %u of %u)", k + 1, b->num_phases);
            rill__cuda_describe(d, r, "the CUDA driver refused it", why, why_size);
        }
        for (uint32_t o = b->phases[k].first; o < b->phases[k].end; o++)
            run_other(d, cs, l, ext, b->order[o], what[0] != '\0', &on_gpu, what, what_size, why,
                      why_size);
    }
    return !on_gpu;
}

void rill__cuda_graph_done(cuda_device *d, const rill__graph_launch *l, void *run, bool failed) {
    grun *gr = run;
    if (gr == NULL)
        return;
    for (uint32_t t = 0; t < gr->num; t++) {
        uint32_t i = gr->stamp[t].node;
        const rill__gnode_params *p = &l->nodes[i].p;
        uint64_t gen = atomic_load_explicit(&l->record_gen[i], memory_order_relaxed);
        /* rill__cuda_stamp takes the event. */
        uint64_t ns =
            gr->stamp[t].ev != NULL ? rill__cuda_stamp(d, gr->stamp[t].ev) : rill__now_ns();
        rill__event_stamp(p->u.event.event, gen, ns, failed);
    }
    rill__free(gr);
}
