/* SPDX-License-Identifier: MIT */
/* Graphs: nodes and dependencies built by hand or captured from streams,
 * execs (a graph prepared for launching), stream capture and the memory
 * private to a graph.
 *
 * A graph is a list of nodes; each node names the nodes it depends on.
 * Instantiation copies it into an exec: the nodes in a topological order,
 * each with its count of predecessors and the list of its successors, so
 * that a launch only resets the counters and runs. A launch is one
 * RILL__CMD_GRAPH command in the stream; the backend runs the nodes
 * (src/backend/cpu/cpu_graph.c for the CPU device). */
#ifndef RILL_GRAPH_GRAPH_H
#define RILL_GRAPH_GRAPH_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hooks.h"
#include "core/kernel.h"
#include "core/runtime.h"
#include "core/stream.h"

#define RILL__MAGIC_GRAPH 0x52475048u /* "RGPH" */
#define RILL__MAGIC_EXEC  0x52455843u /* "REXC" */

typedef struct rill__gpool rill__gpool;

struct rill__graph_node {
    rill_graph_node *handle; /* nodes added by hand: open while the graph lives; else NULL */
    rill__graph *graph;      /* borrowed: the owner */
    uint32_t index;          /* in graph->nodes */
    rill__gnode_params p;
    uint32_t *deps; /* owned: indices of the nodes this one depends on */
    uint32_t num_deps, cap_deps;
    /* the stream it was captured from; stream_id 0 for nodes added by hand */
    uint64_t stream_id;
    char stream_name[64];
    /* the op that submitted it (rill_thread_exchange_op_name), or NULL */
    const char *op_name;
};

/* Nodes live in slabs that never move: slab k holds RILL__GRAPH_SLAB0 << k
 * nodes, node indices [RILL__GRAPH_SLAB0 * (2^k - 1), RILL__GRAPH_SLAB0 *
 * (2^(k+1) - 1)), so a node pointer that a caller passes back is checked
 * against a few address ranges instead of every node. */
#define RILL__GRAPH_SLAB0 16u
#define RILL__GRAPH_SLABS 28 /* 2^32 - 16 nodes in all */

struct rill__graph {
    _Atomic uint32_t magic;   /* RILL__MAGIC_GRAPH, or dead once destroyed */
    rill_graph *handle;       /* its handle (handle.h), closed when freed */
    rill__graph_node **nodes; /* owned array; the nodes are in slabs */
    uint32_t num_nodes, cap_nodes;
    rill__graph_node *slabs[RILL__GRAPH_SLABS]; /* owned */
    uint32_t num_slabs;
    rill__gpool *pool; /* ref, or NULL: memory allocated during its capture */
    /* Drops the graph's reference to pool: set with pool, by gmem.c. */
    void (*pool_release)(rill__gpool *pool);
    /* Guards the nodes (nodes, num_nodes, cap_nodes, slabs, num_slabs and
     * what the nodes hold) of a graph that calls on several threads build
     * and read at once. A capture's graph is its capture's alone until
     * rill_stream_end_capture hands it out. */
    rill__mutex lock;
    /* guarded by rt->lock: every live graph, for rill_shutdown */
    rill__link rt_link; /* on rt->graphs */
};

/* The parameters an exec's launches run with: every node (its topology
 * copied, the same in every set) and the kernel nodes' arguments. A launch
 * holds the set that was current when it was submitted, so it runs with
 * one whole set, old or new, whatever rill_graph_exec_update does
 * meanwhile; a set is freed after the last launch that holds it. */
typedef struct rill__xparams {
    _Atomic int refs;       /* the exec while current, and every pending launch */
    rill__graph_exec *exec; /* ref: each set holds one of exec->refs */
    rill__xnode *nodes;     /* owned, topological order */
    unsigned char *arena;   /* owned: the kernel nodes' args and accesses */
    /* what launches with this set run (launch.nodes is nodes) */
    rill__graph_launch launch;
} rill__xparams;

/* The parameter set whose launch is l (rill__cmd.u.graph.launch). */
static inline rill__xparams *rill__xparams_of(const rill__graph_launch *l) {
    return (rill__xparams *)(void *)((char *)(uintptr_t)l - offsetof(rill__xparams, launch));
}

struct rill__graph_exec {
    _Atomic uint32_t magic;  /* RILL__MAGIC_EXEC, or dead once destroyed */
    rill_graph_exec *handle; /* its handle (handle.h), closed by destroy or free */
    _Atomic int refs;        /* the owner and every parameter set */
    /* immutable after instantiate */
    rill__gprog prog;      /* succ and roots owned */
    uint32_t num_nodes;    /* prog.num_nodes */
    uint32_t *succ;        /* prog.succ, writable */
    uint32_t *roots;       /* prog.roots, writable */
    uint32_t num_roots;    /* prog.num_roots */
    rill__device *dev;     /* the device the backend prepared the exec for */
    void *backend;         /* the backend's state (graph_prepare), owned */
    uint32_t *event_nodes; /* owned: the event record and wait nodes */
    uint32_t num_event_nodes;
    uint32_t *ext_nodes; /* the extern nodes, in event_nodes' array after them */
    uint32_t num_ext;
    int opaque;        /* a host or extern node: launches are RILL__CMD_OPAQUE */
    rill__gpool *pool; /* ref, or NULL */
    /* per node: the generation of event record nodes, written by each
     * launch as it is submitted (launches run one after another) */
    _Atomic uint64_t *record_gen; /* owned */
    /* guarded by lock */
    rill__mutex lock;
    rill__xparams *params;     /* ref: the current set, NULL once destroyed */
    rill__stream *last_stream; /* ref: where the last launch went, or NULL */
    uint64_t last_seq;
    /* guarded by rt->lock */
    rill__link rt_link; /* on rt->execs */
};

/* Drops a reference to exec (a parameter set was freed, or the owner
 * destroyed it); the last one frees it. */
void rill__exec_unref(rill__graph_exec *exec);
/* Drops a reference to a parameter set (a launch was run or skipped, or
 * an update replaced the set); the last one frees it. */
void rill__xparams_unref(rill__xparams *params);
/* Free every exec, then every graph, left at rill_shutdown (work has
 * drained); the graph layer's subsystem (layer.c) calls them in that
 * order. */
void rill__execs_shutdown(rill__runtime *rt);  /* exec.c */
void rill__graphs_shutdown(rill__runtime *rt); /* graph.c */
/* The graph that handle names; RILL_ERROR_INVALID_ARGUMENT with a sentence
 * naming fn otherwise. */
rill_status rill__graph_resolve(rill_graph *handle, const char *fn, rill__graph **out);

/* For tests and debugging (graph_check.c): the invariants of a graph (each
 * node depends only on earlier nodes, each once, sorted) and of an exec's
 * current parameter set (successor lists tile exec->succ and point later,
 * predecessor counts and roots match them). False with a sentence naming
 * the first broken one in why (cap bytes), or when the handle names no
 * live graph or exec. */
bool rill__graph_check(rill_graph *graph, char *why, size_t cap);
bool rill__exec_check(rill_graph_exec *exec, char *why, size_t cap);

/* Node construction shared by the graph calls and by capture. Copies what
 * params borrows (kernel args and accesses) and takes the references. */
rill_status rill__graph_add(rill__graph *g, const uint32_t *deps, uint32_t num_deps,
                            const rill__gnode_params *params, rill__stream *captured_from,
                            const char *fn, rill__graph_node **out);
rill_status rill__graph_new(rill__graph **out);
/* Frees a graph nobody else may use any more (rill_graph_destroy, and the
 * graphs a failed capture made). */
void rill__graph_destroy(rill__graph *g);

/* ---------------------------------------------------------------- capture
 * src/graph/capture*.c and gmem.c, reached from the layers below through
 * the hooks of core/hooks.h, which the graph layer's subsystem installs. */

/* The graph layer in the runtime's life (layer.c): it installs the
 * capture hooks, ends captures and frees graphs and execs at shutdown,
 * and forgets them in a fork's child. */
extern const rill__subsystem rill__graph_subsystem;
/* Ends every capture (rill_shutdown): nothing captured runs. */
void rill__captures_shutdown(void);
/* In the child of a fork, on its only thread: forgets every capture and
 * graph memory pool of the parent, without freeing or locking anything. */
void rill__captures_forget(void);

/* Adds an extern node (a collective) to the capture of s, after the
 * stream's last node, with the memory it touches (accesses): the parts of
 * the library above the graph layer capture their work through this.
 * Takes a reference on call->obj. */
rill_status rill__capture_extern(rill__stream *s, const rill__extern_call *call,
                                 const rill_access *accesses, size_t num_accesses, const char *fn);

/* Memory owned by graphs (src/graph/gmem.c). */
void rill__gpool_unref(rill__gpool *pool, rill__stream *last_stream, uint64_t last_seq);
void rill__gpool_ref(rill__gpool *pool);
/* The point after which the pool's memory may be used by any stream:
 * launches wait for it (it is the end of the internal allocation waits). */
void rill__gpool_ready_point(rill__gpool *pool, rill__stream **s, uint64_t *seq);

#endif
