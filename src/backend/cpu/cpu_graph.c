/* SPDX-License-Identifier: MIT */
/* Graph launches on the CPU device: the worker that reaches a launch runs
 * its nodes (a chain of one-block nodes in order; otherwise by predecessor
 * counters, one ready successor run at once and the others published in the
 * run's ready array for idle workers), wakes sleepers once per launch, and
 * the worker that completes the last node finishes the command once the
 * others have left the run (docs/design.md, "Graphs"). A launch on another
 * stream than the exec's previous one first parks until that one has ended,
 * so launches of one exec end in order. How to run an exec is decided here
 * from the nodes the graph layer gives: the order of each node's successors
 * (those it alone readies first), once, and whether a parameter set is a
 * chain, once per set. */
#include <stdio.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/status.h"

#define NONE          UINT32_MAX
#define RANGE         0x80000000u /* an active-list entry for a node's successor range */
#define EXT_DONE      0x80000000u /* a ready-array entry: an extern node to complete */
#define PUBLISH_BATCH 32
#define MAX_CLAIM     32

/* A worker's private state inside a run. */
typedef struct gworker {
    cpu_worker *w;
    uint32_t next;                /* ready node to run next, or NONE */
    uint32_t done;                /* completed nodes not yet taken off remaining */
    uint32_t fan_node, fan_count; /* batched decrements of one successor */
    uint32_t out[PUBLISH_BATCH];  /* ready nodes to publish */
    uint32_t num_out;
} gworker;

enum gresult { G_LEFT, G_FINISHED };

/* One step of a wait for another worker of the run: a pause, and every
 * 256th a yield, so that a wait for a preempted thread (more runnable
 * threads than processors) costs a yield, not the rest of a time slice. */
static void spin_or_yield(unsigned spins) {
    if ((spins & 255u) == 0)
        rill__thread_yield();
    else
        rill__cpu_relax();
}

static void publish(cpu_device *d, cpu_grun *r, gworker *g) {
    uint32_t k = g->num_out;
    if (k == 0)
        return;
    /* relaxed: the slot stores below publish the entries. */
    uint32_t base = atomic_fetch_add_explicit(&r->tail, k, memory_order_relaxed);
    for (uint32_t i = 0; i < k; i++)
        /* release: pairs with the acquire load in claim. */
        atomic_store_explicit(&r->ready[base + i], g->out[i] + 1, memory_order_release);
    g->num_out = 0;
    atomic_fetch_add_explicit(&d->graph_work, (int)k, memory_order_relaxed);
    if (!atomic_load_explicit(&r->woken, memory_order_relaxed) &&
        !atomic_exchange_explicit(&r->woken, 1, memory_order_relaxed))
        rill__cpu_wake_workers(d, d->num_workers - 1);
}

static void make_ready(cpu_device *d, cpu_grun *r, gworker *g, uint32_t j) {
    if (g->next == NONE) {
        g->next = j;
        return;
    }
    g->out[g->num_out++] = j;
    if (g->num_out == PUBLISH_BATCH)
        publish(d, r, g);
}

static void flush_fan(cpu_device *d, cpu_grun *r, gworker *g) {
    if (g->fan_count == 0)
        return;
    uint32_t j = g->fan_node, n = g->fan_count;
    g->fan_count = 0;
    /* acq_rel: the worker that readies j sees every predecessor's writes. */
    if (atomic_fetch_sub_explicit(&r->pending[j], (int32_t)n, memory_order_acq_rel) == (int32_t)n)
        make_ready(d, r, g, j);
}

/* Puts an entry on the run's active list: a multi-block kernel node whose
 * blocks are handed out, or (RANGE) a node whose single successors are. */
static void activate(cpu_device *d, cpu_grun *r, uint32_t entry, bool wake_always) {
    rill__spinlock_lock(&r->active_lock);
    r->active[r->num_active++] = entry;
    atomic_store_explicit(&r->has_active, r->num_active, memory_order_relaxed);
    rill__spinlock_unlock(&r->active_lock);
    atomic_fetch_add_explicit(&d->graph_work, 1, memory_order_relaxed);
    if (wake_always || (!atomic_load_explicit(&r->woken, memory_order_relaxed) &&
                        !atomic_exchange_explicit(&r->woken, 1, memory_order_relaxed)))
        rill__cpu_wake_workers(d, d->num_workers - 1);
}

static void complete(cpu_device *d, cpu_grun *r, gworker *g, uint32_t i) {
    const rill__xnode *n = &r->nodes[i];
    const uint32_t *succ = r->succ + n->succ_begin;
    uint32_t single = r->num_single[i];
    g->done++;
    /* Successors with no other predecessor are ready now: run the first,
     * and hand the rest out as a range (the successor list is read-only,
     * so workers share it without moving cache lines). */
    if (single > 0) {
        make_ready(d, r, g, succ[0]);
        if (single > 1) {
            atomic_store_explicit(&r->next_succ[i], 1, memory_order_relaxed);
            activate(d, r, i | RANGE, false); /* its lock publishes the store */
        }
    }
    for (uint32_t k = single; k < n->num_succ; k++) {
        uint32_t j = succ[k];
        if (g->fan_count > 0 && g->fan_node == j) {
            g->fan_count++;
        } else {
            flush_fan(d, r, g);
            g->fan_node = j;
            g->fan_count = 1;
        }
    }
}

/* Names node n as the one whose failure the run records (called by the
 * thread whose failure was recorded, so the name is the failed node's
 * even when other nodes finish meanwhile). */
static void name_failure(cpu_grun *r, const rill__xnode *n) {
    if (!atomic_exchange(&r->named, 1)) {
        if (n->p.kind == RILL__GNODE_HOST || n->p.kind == RILL__GNODE_EXTERN) {
            snprintf(r->failed_node, sizeof r->failed_node, "%s (graph node %u)",
                     n->p.kind == RILL__GNODE_HOST ? "host function" : "collective",
                     n->graph_index);
            return;
        }
        char name[60]; /* with the rest, within failed_node */
        rill__fit(name, sizeof name, rill__kernel_image_of(n->p.u.kernel.kernel)->name);
        snprintf(r->failed_node, sizeof r->failed_node, "kernel '%s' (graph node %u)", name,
                 n->graph_index);
    }
}

/* The blocks of a kernel node's grid. */
static inline uint32_t node_blocks(const rill__xnode *n) {
    rill_dim3 g = n->p.u.kernel.grid;
    return g.x * g.y * g.z;
}

static void run_blocks(cpu_worker *w, cpu_grun *r, const rill__xnode *n, uint32_t first,
                       uint32_t end) {
    if (rill__cpu_grid_run(w, ((const rill_kernel_image *)n->p.u.kernel.loaded)->fn,
                           n->p.u.kernel.args, n->p.u.kernel.grid, &r->ls, first, end))
        name_failure(r, n);
}

static void deactivate(cpu_grun *r, uint32_t i, cpu_device *d) {
    rill__spinlock_lock(&r->active_lock);
    for (uint32_t k = 0; k < r->num_active; k++) {
        if (r->active[k] == i) {
            r->active[k] = r->active[--r->num_active];
            atomic_store_explicit(&r->has_active, r->num_active, memory_order_relaxed);
            atomic_fetch_sub_explicit(&d->graph_work, 1, memory_order_relaxed);
            break;
        }
    }
    rill__spinlock_unlock(&r->active_lock);
}

/* Runs chunks of node i's blocks; true when this worker ran the last. */
static bool run_chunks(cpu_device *d, gworker *g, cpu_grun *r, uint32_t i) {
    const rill__xnode *n = &r->nodes[i];
    uint32_t blocks = node_blocks(n);
    uint32_t chunk = rill__cpu_grid_chunk(d, blocks), first, end;
    for (;;) {
        if (!rill__cpu_grid_take(&r->next_block[i], chunk, blocks, &first, &end))
            return false;
        if (end == blocks)
            deactivate(r, i, d);
        run_blocks(g->w, r, n, first, end);
        /* acq_rel: the worker that runs the last block sees all the others. */
        if (atomic_fetch_add_explicit(&r->blocks_done[i], end - first, memory_order_acq_rel) +
                (end - first) ==
            blocks)
            return true;
    }
}

/* An extern node's work is done (any thread, no lock held): the node is
 * published for a worker to complete, like a ready node, and a worker is
 * woken for it. Nothing of the run is touched after the publication: the
 * worker that completes the node may finish the run at once. */
static void extern_done(void *arg, const char *failure) {
    cpu_gext *e = arg;
    cpu_device *d = e->d;
    cpu_grun *r = e->r;
    uint32_t i = e->node;
    if (failure != NULL && rill__launch_state_fail(&r->ls, failure))
        name_failure(r, &r->nodes[i]);
    /* relaxed: the slot store publishes the entry; the count is a hint
     * that lets a sleeping worker find it. */
    uint32_t slot = atomic_fetch_add_explicit(&r->tail, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->graph_work, 1, memory_order_relaxed);
    /* The workers may have gone to sleep while the work was under way:
     * the next publication of the run wakes them again, as the launch's
     * first one did. */
    atomic_store_explicit(&r->woken, 0, memory_order_relaxed);
    /* release: pairs with the acquire load in claim. */
    atomic_store_explicit(&r->ready[slot], (i | EXT_DONE) + 1, memory_order_release);
    rill__cpu_wake_workers(d, 1);
}

/* Starts extern node i (skip: the launch failed before it); it completes
 * through extern_done, holding no worker meanwhile. */
static void start_extern(cpu_device *d, cpu_grun *r, uint32_t i, bool skip) {
    const rill__xnode *n = &r->nodes[i];
    void *token = r->ext[n->ext_slot];
    r->ext[n->ext_slot] = NULL; /* started: the release leaves it alone */
    cpu_gext *e = &r->ext_args[n->ext_slot];
    *e = (cpu_gext){.d = d, .r = r, .node = i};
    n->p.u.ext.ops->start(token, skip, extern_done, e);
}

/* Runs node i; false when it is not complete yet: other workers still run
 * its blocks (the one that runs the last completes it), or it is extern
 * work under way. */
static bool run_node_body(cpu_device *d, gworker *g, cpu_grun *r, uint32_t i) {
    const rill__xnode *n = &r->nodes[i];
    /* After a failure the remaining nodes are skipped, as a stream skips. */
    bool skip = atomic_load_explicit(&r->ls.failed, memory_order_acquire) != 0;
    if (n->p.kind == RILL__GNODE_EXTERN) {
        start_extern(d, r, i, skip);
        return false;
    }
    switch (skip ? RILL__GNODE_EMPTY : n->p.kind) {
    case RILL__GNODE_KERNEL:
        if (node_blocks(n) == 1) {
            rill_block_ctx ctx = {
                .grid_dim = n->p.u.kernel.grid, .worker = g->w->unit, .state = &r->ls};
            (void)rill__took_kernel_failure(); /* an eager launch's, on this worker */
            ((const rill_kernel_image *)n->p.u.kernel.loaded)->fn(&ctx, n->p.u.kernel.args);
            if (rill__took_kernel_failure())
                name_failure(r, n);
            break;
        }
        if (d->num_workers == 1) {
            run_blocks(g->w, r, n, 0, node_blocks(n));
            break;
        }
        atomic_store_explicit(&r->next_block[i], 0, memory_order_relaxed);
        atomic_store_explicit(&r->blocks_done[i], 0, memory_order_relaxed);
        activate(d, r, i, true);
        return run_chunks(d, g, r, i);
    case RILL__GNODE_HOST: {
        /* A state of its own: the run's is shared with concurrent nodes. */
        rill__launch_state hs;
        if (rill__host_run(n->p.u.host.fn, n->p.u.host.user_data, &hs) &&
            rill__launch_state_fail(&r->ls, hs.message))
            name_failure(r, n);
        break;
    }
    case RILL__GNODE_COPY:
        memmove(n->p.u.copy.dst, n->p.u.copy.src, n->p.u.copy.bytes);
        break;
    case RILL__GNODE_SET:
        memset(n->p.u.set.dst, n->p.u.set.value, n->p.u.set.bytes);
        break;
    case RILL__GNODE_RECORD:
        if (n->p.u.event.timing)
            rill__event_stamp(n->p.u.event.event,
                              atomic_load_explicit(&r->record_gen[i], memory_order_relaxed),
                              rill__now_ns(), 0); /* the CPU device's timestamp_ns */
        break;
    default: /* empty and wait nodes: the wait happened before the launch */
        break;
    }
    return true;
}

static const char *const node_names[] = {
    [RILL__GNODE_HOST] = "host function",  [RILL__GNODE_COPY] = "memcpy",
    [RILL__GNODE_SET] = "memset",          [RILL__GNODE_EMPTY] = "empty",
    [RILL__GNODE_RECORD] = "event record", [RILL__GNODE_WAIT] = "event wait",
};

/* run_node_body, traced: the node's slice on the unit that ran it (its
 * part of the blocks, for a kernel node that others help with). */
static bool run_node_traced(cpu_device *d, gworker *g, cpu_grun *r, uint32_t i) {
    const rill__xnode *n = &r->nodes[i];
    const cpu_cmd *c = r->cmd;
    rill__trace_rec t;
    memset(&t, 0, sizeof t);
    t.type = RILL__TRACE_NODE_SLICE;
    t.device = (int8_t)rill__device_base_of(d->dev)->info.ordinal;
    t.unit = g->w->unit;
    t.stream = rill__queue_of(c->stream)->id;
    t.seq = c->seq;
    t.a = n->graph_index;
    if (n->p.kind == RILL__GNODE_KERNEL) {
        t.what = RILL__TRACE_KERNEL;
        rill__trace_set_name(&t, rill__kernel_image_of(n->p.u.kernel.kernel)->name);
        t.grid[0] = n->p.u.kernel.grid.x;
        t.grid[1] = n->p.u.kernel.grid.y;
        t.grid[2] = n->p.u.kernel.grid.z;
        for (size_t k = 0; k < n->p.u.kernel.num_accesses; k++)
            t.bytes += n->p.u.kernel.accesses[k].bytes;
    } else {
        t.what = n->p.kind == RILL__GNODE_HOST   ? RILL__TRACE_HOST_FN
                 : n->p.kind == RILL__GNODE_COPY ? RILL__TRACE_COPY
                 : n->p.kind == RILL__GNODE_SET  ? RILL__TRACE_SET
                                                 : RILL__TRACE_RECORD;
        if ((size_t)n->p.kind < sizeof node_names / sizeof node_names[0] &&
            node_names[n->p.kind] != NULL)
            rill__trace_set_name(&t, node_names[n->p.kind]);
        t.grid[0] = t.grid[1] = t.grid[2] = 1;
        if (n->p.kind == RILL__GNODE_COPY)
            t.bytes = n->p.u.copy.bytes;
        if (n->p.kind == RILL__GNODE_SET)
            t.bytes = n->p.u.set.bytes;
    }
    t.t0 = rill__trace_now();
    bool done = run_node_body(d, g, r, i);
    t.t1 = rill__trace_now();
    rill__trace_emit(&t);
    return done;
}

static bool run_node(cpu_device *d, gworker *g, cpu_grun *r, uint32_t i) {
    /* An extern node holds no unit while it runs: no slice on one. */
    if (rill__tracing() && g->w->unit >= 0 && r->nodes[i].p.kind != RILL__GNODE_EXTERN)
        return run_node_traced(d, g, r, i);
    return run_node_body(d, g, r, i);
}

static void run_and_complete(cpu_device *d, gworker *g, cpu_grun *r, uint32_t i) {
    if (run_node(d, g, r, i))
        complete(d, r, g, i);
}

/* Claims up to MAX_CLAIM published nodes into out; returns how many. */
static uint32_t claim(cpu_device *d, cpu_grun *r, uint32_t *out) {
    uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
        if (head >= tail)
            return 0;
        uint32_t k = (tail - head) / ((uint32_t)d->num_workers * 2u);
        if (k == 0)
            k = 1;
        if (k > MAX_CLAIM)
            k = MAX_CLAIM;
        if (atomic_compare_exchange_weak_explicit(&r->head, &head, head + k, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            for (uint32_t i = 0; i < k; i++) {
                uint32_t v;
                /* acquire: pairs with the release store in publish; a slot
                 * reserved but not yet written is a publisher mid-store,
                 * perhaps preempted (processes that share the processors,
                 * such as MPI ranks): spin a little, then yield to it. */
                for (unsigned spins = 1;
                     (v = atomic_load_explicit(&r->ready[head + i], memory_order_acquire)) == 0;
                     spins++)
                    spin_or_yield(spins);
                out[i] = v - 1;
            }
            atomic_fetch_sub_explicit(&d->graph_work, (int)k, memory_order_relaxed);
            return k;
        }
    }
}

static void run_ready(cpu_device *d, gworker *g, cpu_grun *r);

/* Runs chunks of node i's single successors (guided: a share of what is
 * left each time), each with whatever it readies for this worker. */
static void run_range(cpu_device *d, gworker *g, cpu_grun *r, uint32_t i) {
    const uint32_t *succ = r->succ + r->nodes[i].succ_begin;
    uint32_t total = r->num_single[i];
    for (;;) {
        /* relaxed: the counter only partitions the range. */
        uint32_t cur = atomic_load_explicit(&r->next_succ[i], memory_order_relaxed);
        if (cur >= total)
            return;
        uint32_t chunk = (total - cur) / ((uint32_t)d->num_workers * 2u);
        if (chunk == 0)
            chunk = 1;
        uint32_t first = atomic_fetch_add_explicit(&r->next_succ[i], chunk, memory_order_relaxed);
        if (first >= total)
            return;
        uint32_t end = total - first <= chunk ? total : first + chunk;
        if (end == total)
            deactivate(r, i | RANGE, d);
        for (uint32_t k = first; k < end; k++) {
            g->next = succ[k];
            run_ready(d, g, r);
        }
    }
}

/* Takes work from the active list: blocks of a multi-block node, or a
 * chunk of a node's successor range. */
static bool help_active(cpu_device *d, gworker *g, cpu_grun *r) {
    if (atomic_load_explicit(&r->has_active, memory_order_relaxed) == 0)
        return false;
    rill__spinlock_lock(&r->active_lock);
    uint32_t e = r->num_active > 0 ? r->active[0] : NONE;
    rill__spinlock_unlock(&r->active_lock);
    if (e == NONE)
        return false;
    if (e & RANGE)
        run_range(d, g, r, e & ~RANGE);
    else if (run_chunks(d, g, r, e))
        complete(d, r, g, e);
    return true;
}

/* Runs g->next and the successors it readies for itself, publishing the
 * others first so that other workers may start on them meanwhile. */
static void run_ready(cpu_device *d, gworker *g, cpu_grun *r) {
    while (g->next != NONE) {
        uint32_t i = g->next;
        g->next = NONE;
        publish(d, r, g);
        run_and_complete(d, g, r, i);
    }
}

/* Works on the run until nothing is left to claim (G_LEFT) or this worker
 * completed the last node (G_FINISHED). */
static enum gresult work(cpu_device *d, cpu_worker *w, cpu_grun *r, uint32_t first) {
    gworker g = {.w = w, .next = first};
    uint32_t claimed[MAX_CLAIM];
    for (;;) {
        run_ready(d, &g, r);
        /* Batched decrements go out before this worker claims or leaves. */
        flush_fan(d, r, &g);
        if (g.next != NONE)
            continue;
        publish(d, r, &g);
        if (g.done > 0) {
            uint32_t n = g.done;
            g.done = 0;
            /* acq_rel: the finisher sees every node's writes. */
            if (atomic_fetch_sub_explicit(&r->remaining, n, memory_order_acq_rel) == n)
                return G_FINISHED;
        }
        uint32_t k = claim(d, r, claimed);
        if (k > 0) {
            for (uint32_t c = 0; c < k; c++) {
                if (claimed[c] & EXT_DONE)
                    complete(d, r, &g, claimed[c] & ~EXT_DONE);
                else
                    g.next = claimed[c];
                run_ready(d, &g, r);
            }
            continue;
        }
        if (help_active(d, &g, r))
            continue;
        return G_LEFT;
    }
}

static void unlist(cpu_device *d, cpu_grun *r) {
    rill__cpu_unpublish(d, &d->graph_runs, &d->num_graph_runs, &r->pub);
}

/* The finisher's part: waits for the other workers to leave the run and
 * turns a failure into the stream's sticky error. */
static void finish_run(cpu_device *d, cpu_grun *r, cpu_cmd *c) {
    unlist(d, r);
    /* acquire: the others' last accesses to the run happen before. A
     * worker still inside may have been preempted: spin, then yield. */
    for (unsigned spins = 1; atomic_load_explicit(&r->refs, memory_order_acquire) > 1; spins++)
        spin_or_yield(spins);
    atomic_store_explicit(&r->refs, 0, memory_order_relaxed);
    if (atomic_load_explicit(&r->ls.failed, memory_order_acquire))
        rill__cpu_fail_stream(c->stream, c->seq, r->failed_node, r->ls.message);
}

/* Whether the nodes of prog with parameters nodes form a single chain of
 * one-block nodes, which a launch may run in order on one thread with no
 * bookkeeping. An extern node completes later, on another thread. */
static bool is_chain(const rill__gprog *prog, const rill__xnode *nodes) {
    if (prog->num_roots > 1)
        return false;
    for (uint32_t i = 0; i < prog->num_nodes; i++) {
        const rill__xnode *n = &nodes[i];
        if (n->num_succ > 1 || n->p.kind == RILL__GNODE_EXTERN ||
            (n->p.kind == RILL__GNODE_KERNEL && node_blocks(n) > 1))
            return false;
    }
    return true;
}

enum exec_result rill__cpu_exec_graph(cpu_device *d, cpu_worker *w, cpu_cmd *c) {
    const rill__graph_launch *v = c->c.u.graph.launch;
    cpu_grun *r = v->state;
    uint32_t n = r->prog->num_nodes;
    if (n == 0)
        return EXEC_DONE;
    /* Launches of one exec run one at a time, each set's version once
     * decided: the cache is the run's own. */
    if (v->version != r->chain_version) {
        r->chain = is_chain(r->prog, v->nodes);
        r->chain_version = v->version;
    }
    r->nodes = v->nodes;
    r->record_gen = v->record_gen;
    r->ext = c->c.u.graph.ext;
    r->cmd = c; /* for traces too, on a chain */
    r->stream = c->stream;
    atomic_store_explicit(&r->ls.failed, 0, memory_order_relaxed);
    atomic_store_explicit(&r->named, 0, memory_order_relaxed);
    if (r->chain) {
        gworker g = {.w = w, .next = NONE};
        for (uint32_t i = 0; i < n; i++)
            run_node(d, &g, r, i); /* one-block nodes: always completed */
        if (atomic_load_explicit(&r->ls.failed, memory_order_acquire))
            rill__cpu_fail_stream(c->stream, c->seq, r->failed_node, r->ls.message);
        return EXEC_DONE;
    }
    for (uint32_t i = 0; i < n; i++)
        atomic_store_explicit(&r->pending[i], (int32_t)r->nodes[i].num_preds, memory_order_relaxed);
    for (uint32_t i = 0; i < r->last_tail; i++)
        atomic_store_explicit(&r->ready[i], 0, memory_order_relaxed);
    atomic_store_explicit(&r->head, 0, memory_order_relaxed);
    atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
    atomic_store_explicit(&r->remaining, n, memory_order_relaxed);
    atomic_store_explicit(&r->refs, 1, memory_order_relaxed);
    r->num_active = 0;
    atomic_store_explicit(&r->has_active, 0, memory_order_relaxed);
    atomic_store_explicit(&r->woken, 0, memory_order_relaxed);
    /* List the run for helpers (the lock orders the initialisation above
     * before their accesses), then publish the roots beyond the first. */
    rill__cpu_publish(d, &d->graph_runs, &d->num_graph_runs, &r->pub);
    gworker g0 = {.w = w, .next = NONE};
    for (uint32_t k = 1; k < r->prog->num_roots;) {
        while (k < r->prog->num_roots && g0.num_out < PUBLISH_BATCH)
            g0.out[g0.num_out++] = r->prog->roots[k++];
        publish(d, r, &g0);
    }
    enum gresult res = work(d, w, r, r->prog->roots[0]);
    if (res == G_FINISHED) {
        r->last_tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
        finish_run(d, r, c);
        return EXEC_DONE;
    }
    /* acq_rel: our accesses to the run happen before the finisher's reuse. */
    atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel);
    return EXEC_HANDED_OFF;
}

/* Joins a listed graph launch as a helper: the first one, or (s not NULL)
 * the first of stream s. Returns the command when this thread completed
 * the launch (it is finished then: the caller finishes the command and
 * carries on with its stream), else NULL; *joined says whether there was
 * a launch to join. */
static cpu_cmd *help_run(cpu_device *d, cpu_worker *w, rill__stream *s, bool *joined) {
    *joined = false;
    /* relaxed: a hint; the lock decides. */
    if (atomic_load_explicit(&d->graph_work, memory_order_relaxed) <= 0)
        return NULL;
    cpu_grun *r = NULL;
    rill__mutex_lock(&d->launch_lock);
    for (rill__link *l = d->graph_runs; l != NULL && r == NULL; l = l->next)
        if (s == NULL || RILL__OWNER(l, cpu_grun, pub.link)->stream == s)
            r = RILL__OWNER(l, cpu_grun, pub.link);
    if (r != NULL)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    rill__mutex_unlock(&d->launch_lock);
    if (r == NULL)
        return NULL;
    *joined = true;
    cpu_cmd *c = r->cmd;
    if (work(d, w, r, NONE) == G_FINISHED) {
        r->last_tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
        finish_run(d, r, c);
        return c;
    }
    /* acq_rel: our accesses to the run happen before the finisher's reuse. */
    atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel);
    return NULL;
}

int rill__cpu_help_graph(cpu_device *d, cpu_worker *w, cpu_cmd **done) {
    bool joined;
    *done = help_run(d, w, NULL, &joined);
    return joined;
}

int rill__cpu_host_help_graph(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd **done) {
    bool joined;
    *done = help_run(d, w, s, &joined);
    return *done != NULL ? 2 : joined;
}

/* Copies prog's successor lists into r->succ, each with the successors
 * that have no other predecessor first (r->num_single of them): they
 * become ready together, and a run hands them out as one range. */
static void order_successors(cpu_grun *r, const rill__gprog *prog, const rill__xnode *nodes) {
    for (uint32_t i = 0; i < prog->num_nodes; i++) {
        const rill__xnode *n = &nodes[i];
        uint32_t *list = r->succ + n->succ_begin, k = 0;
        memcpy(list, prog->succ + n->succ_begin, n->num_succ * sizeof *list);
        for (uint32_t j = 0; j < n->num_succ; j++) {
            if (nodes[list[j]].num_preds == 1) {
                uint32_t t = list[k];
                list[k++] = list[j];
                list[j] = t;
            }
        }
        r->num_single[i] = k;
    }
}

rill_status rill__cpu_graph_prepare(rill__device *dev, const rill__gprog *prog,
                                    const rill__xnode *nodes, void **state) {
    (void)dev;
    size_t m = prog->num_nodes > 0 ? prog->num_nodes : 1;
    size_t edges = prog->num_nodes > 0
                       ? nodes[prog->num_nodes - 1].succ_begin + nodes[prog->num_nodes - 1].num_succ
                       : 0;
    cpu_grun *r = rill__calloc(1, sizeof *r);
    if (r != NULL) {
        r->prog = prog;
        r->chain = is_chain(prog, nodes); /* version 0's */
        r->succ = rill__malloc((edges > 0 ? edges : 1) * sizeof *r->succ);
        r->num_single = rill__malloc(m * sizeof *r->num_single);
        r->pending = rill__malloc(m * sizeof *r->pending);
        /* Every node is published once at most, and each extern node once
         * more, when its work is done. Claimers wait for nonzero. */
        r->ready = rill__calloc(m + prog->num_ext, sizeof *r->ready);
        r->ext_args = rill__calloc(prog->num_ext > 0 ? prog->num_ext : 1, sizeof *r->ext_args);
        r->next_block = rill__malloc(m * sizeof *r->next_block);
        r->blocks_done = rill__malloc(m * sizeof *r->blocks_done);
        r->next_succ = rill__malloc(m * sizeof *r->next_succ);
        r->active = rill__malloc(m * sizeof *r->active);
    }
    if (r == NULL || r->pending == NULL || r->ready == NULL || r->next_block == NULL ||
        r->blocks_done == NULL || r->next_succ == NULL || r->active == NULL ||
        r->ext_args == NULL || r->succ == NULL || r->num_single == NULL) {
        rill__cpu_graph_release(dev, r);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory for a graph of %u nodes",
                          prog->num_nodes);
    }
    order_successors(r, prog, nodes);
    *state = r;
    return RILL_OK;
}

void rill__cpu_graph_release(rill__device *dev, void *state) {
    (void)dev;
    cpu_grun *r = state;
    if (r == NULL)
        return;
    rill__free((void *)r->pending);
    rill__free((void *)r->ready);
    rill__free((void *)r->next_block);
    rill__free((void *)r->blocks_done);
    rill__free((void *)r->next_succ);
    rill__free(r->active);
    rill__free(r->ext_args);
    rill__free(r->succ);
    rill__free(r->num_single);
    rill__free(r);
}
