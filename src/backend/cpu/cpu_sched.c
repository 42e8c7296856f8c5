/* SPDX-License-Identifier: MIT */
/* The CPU device's scheduler: stream queues, the priority-ordered ready
 * queue, worker threads, and command execution.
 *
 * Workers take whole ready streams, highest priority first, and run their
 * commands in order; a worker yields a stream between commands when a
 * stream of higher priority is ready, or after a batch when others of equal
 * priority wait. A kernel with several blocks is published on the device's
 * launch list, and idle workers take chunks of its blocks by atomic
 * counter. A stream blocked on a wait parks on the producing stream (a
 * rill__waiter) and holds no worker. Idle workers spin briefly, then sleep
 * on the device's work_gen futex word. */
#include <stdio.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/alloc.h"
#include "core/event.h"
#include "core/status.h"

/* Idle workers spin this long before sleeping: a steady flow of work never
 * pays a wake-up, and an idle process stops using the CPU within a tenth
 * of a millisecond. They do not sched_yield: on a machine shared with busy
 * processes a yield gives away a whole time slice. */
#define IDLE_SPIN_NS 100000u
/* A stream keeps its worker for at most this many commands while another
 * stream of the same priority is ready. */
#define FAIR_BATCH 64
/* How long a worker spins for the next command of its stream, and for a
 * wait's dependency, before it gives the stream up or parks it. */
#define STREAM_SPIN_NS 20000u
#define WAIT_SPIN_NS   50000u

/* Set when this worker woke a sleeping host thread and has nothing left to
 * run: it sleeps at once instead of spinning, so that the woken thread
 * gets a processor without waiting for an idle one to wake up. */
static _Thread_local bool leave_cpu;

static int prio_index(rill__stream *s) {
    return s->priority - s->dev->info.greatest_priority;
}

static void wake_workers(cpu_device *d, int count) {
    /* seq_cst load: a Dekker pair with the sleepers increment in
     * idle_wait, which is followed by a seq_cst load of the work state. */
    if (atomic_load(&d->sleepers) > 0) {
        atomic_fetch_add(&d->work_gen, 1);
        rill__futex_wake(&d->work_gen, count);
    }
}

static void push_ready(cpu_device *d, rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    int i = prio_index(s);
    rill__mutex_lock(&d->ready_lock);
    cs->ready_next = NULL;
    if (d->ready_tail[i] != NULL)
        cpu_stream_of(d->ready_tail[i])->ready_next = s;
    else
        d->ready_head[i] = s;
    d->ready_tail[i] = s;
    atomic_fetch_or(&d->ready_mask, 1u << i);
    rill__mutex_unlock(&d->ready_lock);
    wake_workers(d, 1);
}

static rill__stream *pop_ready(cpu_device *d) {
    /* relaxed: a hint; the lock below orders the queue itself. */
    if (atomic_load_explicit(&d->ready_mask, memory_order_relaxed) == 0)
        return NULL;
    rill__mutex_lock(&d->ready_lock);
    uint32_t mask = atomic_load_explicit(&d->ready_mask, memory_order_relaxed);
    rill__stream *s = NULL;
    if (mask != 0) {
        int i = __builtin_ctz(mask);
        s = d->ready_head[i];
        d->ready_head[i] = cpu_stream_of(s)->ready_next;
        if (d->ready_head[i] == NULL) {
            d->ready_tail[i] = NULL;
            atomic_fetch_and(&d->ready_mask, ~(1u << i));
        }
    }
    rill__mutex_unlock(&d->ready_lock);
    return s;
}

/* ---------------------------------------------------------------- submit */

void rill__cpu_free_cmd(cpu_cmd *c) {
    rill__free(c->args_heap);
    rill__free(c->accesses_heap);
    rill__free(c);
}

static void free_chain(cpu_cmd *c) {
    while (c != NULL) {
        cpu_cmd *next = atomic_load_explicit(&c->next, memory_order_relaxed);
        rill__cpu_free_cmd(c);
        c = next;
    }
}

void rill__cpu_stream_free_nodes(cpu_stream *cs) {
    /* The queue is empty: head is the dummy and equals tail. */
    rill__cpu_free_cmd(cs->head);
    free_chain(cs->free_list);
    free_chain(atomic_exchange(&cs->returned, NULL));
    free_chain(cs->done_list);
}

/* Takes a node for a new command: from the submitters' free list, else
 * every node the worker has returned, else the heap. */
static cpu_cmd *take_node_locked(cpu_stream *cs) {
    cpu_cmd *c = cs->free_list;
    if (c == NULL)
        /* acquire: pairs with the release CAS in return_nodes. */
        c = atomic_exchange_explicit(&cs->returned, NULL, memory_order_acquire);
    if (c != NULL) {
        cs->free_list = atomic_load_explicit(&c->next, memory_order_relaxed);
        return c;
    }
    c = rill__malloc(sizeof *c);
    if (c != NULL) {
        c->args_heap = NULL;
        c->accesses_heap = NULL;
        c->stream = NULL;
    }
    return c;
}

rill_status rill__cpu_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    cpu_stream *cs = cpu_stream_of(s);
    void *args_heap = NULL;
    rill_access *acc_heap = NULL;
    if (cmd->kind == RILL__CMD_KERNEL) {
        if (cmd->u.kernel.args_size > CPU_ARGS_INLINE &&
            (args_heap = rill__malloc(cmd->u.kernel.args_size)) == NULL)
            goto oom;
        if (cmd->u.kernel.num_accesses > CPU_ACCESS_INLINE &&
            (acc_heap = rill__malloc(cmd->u.kernel.num_accesses * sizeof(rill_access))) == NULL)
            goto oom;
    }
    rill__spinlock_lock(&cs->lock);
    cpu_cmd *c = take_node_locked(cs);
    if (c == NULL) {
        rill__spinlock_unlock(&cs->lock);
        goto oom;
    }
    /* Copy only the member in use, so that most commands write one line. */
    c->c.kind = cmd->kind;
    c->c.flags = cmd->flags;
    switch (cmd->kind) {
    case RILL__CMD_KERNEL: {
        c->c.u.kernel = cmd->u.kernel;
        c->args_heap = args_heap;
        c->accesses_heap = acc_heap;
        void *args = args_heap != NULL ? args_heap : (void *)c->args_inline;
        rill_access *acc = acc_heap != NULL ? acc_heap : c->accesses_inline;
        if (cmd->u.kernel.args_size > 0)
            memcpy(args, cmd->u.kernel.args, cmd->u.kernel.args_size);
        if (cmd->u.kernel.num_accesses > 0)
            memcpy(acc, cmd->u.kernel.accesses, cmd->u.kernel.num_accesses * sizeof *acc);
        c->c.u.kernel.args = args;
        c->c.u.kernel.accesses = acc;
        break;
    }
    case RILL__CMD_HOST:
        c->c.u.host = cmd->u.host;
        break;
    case RILL__CMD_WAIT:
        c->c.u.wait = cmd->u.wait;
        break;
    case RILL__CMD_RECORD:
        c->c.u.record = cmd->u.record;
        break;
    case RILL__CMD_COPY:
        c->c.u.copy = cmd->u.copy;
        break;
    case RILL__CMD_SET:
        c->c.u.set = cmd->u.set;
        break;
    case RILL__CMD_CLEAR:
        break;
    case RILL__CMD_GRAPH:
        c->c.u.graph = cmd->u.graph;
        break;
    }
    if (c->stream != s)
        c->stream = s; /* nodes stay with their stream: usually already set */
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    /* release: pairs with the acquire loads of sub_seq in queries, records
     * and synchronize. */
    uint64_t n = atomic_load_explicit(&s->sub_seq, memory_order_relaxed) + 1;
    if (cmd->flags & RILL__CMD_OPAQUE) /* published by the release store below */
        atomic_store_explicit(&s->opaque_seq, n, memory_order_relaxed);
    atomic_store_explicit(&s->sub_seq, n, memory_order_release);
    c->seq = n;
    /* release: publishes the node to the worker (its acquire load of
     * next). With the light barrier, one half of a Dekker pair with
     * go_idle, which stores IDLE, runs a heavy barrier and loads next:
     * either the worker sees this node or we see IDLE. */
    atomic_store_explicit(&cs->tail->next, c, memory_order_release);
    cs->tail = c;
    rill__spinlock_unlock(&cs->lock);
    rill__barrier_light();
    if (atomic_load_explicit(&cs->state, memory_order_relaxed) == CPU_IDLE) {
        int expected = CPU_IDLE;
        if (atomic_compare_exchange_strong(&cs->state, &expected, CPU_READY)) {
            rill__stream_ref(s); /* the scheduled reference */
            push_ready(cpu_device_of(s->dev), s);
        }
    }
    *seq = n;
    return RILL_OK;

oom:
    rill__free(args_heap);
    rill__free(acc_heap);
    return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                      "out of host memory storing a command for the CPU device; nothing was "
                      "submitted");
}

/* ------------------------------------------------------------- execution */

/* Hands the nodes the worker has finished with back to the submitters. */
static void return_nodes(cpu_stream *cs) {
    if (cs->done_list == NULL)
        return;
    cpu_cmd *top = atomic_load_explicit(&cs->returned, memory_order_relaxed);
    do {
        atomic_store_explicit(&cs->done_tail->next, top, memory_order_relaxed);
        /* release: pairs with the acquire exchange in take_node_locked. */
    } while (!atomic_compare_exchange_weak_explicit(&cs->returned, &top, cs->done_list,
                                                    memory_order_release, memory_order_relaxed));
    cs->done_list = cs->done_tail = NULL;
    cs->num_done = 0;
}

/* Completes the command after the dummy head: it becomes the new dummy,
 * the old one is recycled, and the stream's done_seq advances. */
static void finish(rill__stream *s, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(s);
    uint64_t seq = c->seq;
    rill__cmd_release(&c->c);
    if (c->args_heap != NULL || c->accesses_heap != NULL) {
        rill__free(c->args_heap);
        rill__free(c->accesses_heap);
        c->args_heap = NULL;
        c->accesses_heap = NULL;
    }
    cpu_cmd *old = cs->head;
    cs->head = c;
    atomic_store_explicit(&old->next, cs->done_list, memory_order_relaxed);
    if (cs->done_list == NULL)
        cs->done_tail = old;
    cs->done_list = old;
    if (++cs->num_done >= 32)
        return_nodes(cs);
    rill__stream_complete(s, seq);
}

/* what ("kernel 'scale'") failed with the kernel's message, detail. */
static void fail_stream(rill__stream *s, uint64_t seq, const char *what, const char *detail) {
    char name[80], msg[RILL__CAUSE_BYTES];
    cpu_stream_of(s)->skipping = 1;
    rill__stream_name(s, name, sizeof name);
    snprintf(msg, sizeof msg, "%s on stream %s failed: %s", what, name,
             detail[0] != '\0' ? detail : "(no message)");
    rill__stream_fail(s, seq, msg);
}

static void run_blocks(cpu_worker *w, cpu_cmd *c, uint32_t first, uint32_t end) {
    cpu_stream *cs = cpu_stream_of(c->stream);
    rill_dim3 g = c->c.u.kernel.grid;
    rill_block_ctx ctx = {.grid_dim = g, .worker = w->index, .state = &cs->ls};
    rill_cpu_kernel_fn body = c->c.u.kernel.kernel->cpu;
    for (uint32_t i = first; i < end; i++) {
        /* acquire: pairs with the release store in rill_kernel_fail. */
        if (atomic_load_explicit(&cs->ls.failed, memory_order_acquire))
            return;
        ctx.block_idx.x = i % g.x;
        ctx.block_idx.y = (i / g.x) % g.y;
        ctx.block_idx.z = i / (g.x * g.y);
        body(&ctx, c->c.u.kernel.args);
    }
}

static void unlist(cpu_device *d, cpu_cmd *c) {
    rill__mutex_lock(&d->launch_lock);
    if (c->listed) {
        cpu_cmd **p = &d->launches;
        while (*p != c)
            p = &(*p)->launch_next;
        *p = c->launch_next;
        c->listed = 0;
        atomic_fetch_sub(&d->num_launches, 1);
    }
    rill__mutex_unlock(&d->launch_lock);
}

/* Takes chunks of c's blocks until none are left. The worker that takes
 * the last chunk removes c from the launch list at once, so idle workers
 * do not keep finding a launch with nothing left to hand out. */
static void run_chunks(cpu_device *d, cpu_worker *w, cpu_cmd *c) {
    for (;;) {
        /* relaxed: the counter only partitions block indices. */
        uint32_t first = atomic_fetch_add_explicit(&c->next_block, c->chunk, memory_order_relaxed);
        if (first >= c->total_blocks)
            return;
        uint32_t end = c->total_blocks - first <= c->chunk ? c->total_blocks : first + c->chunk;
        if (end == c->total_blocks)
            unlist(d, c);
        run_blocks(w, c, first, end);
    }
}

/* Called once every block of c has run: turns a failure into the
 * stream's sticky error. */
static void kernel_done(cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(c->stream);
    if (atomic_load_explicit(&cs->ls.failed, memory_order_acquire)) {
        char what[96], name[80];
        rill__fit(name, sizeof name, c->c.u.kernel.kernel->name);
        snprintf(what, sizeof what, "kernel '%s'", name);
        fail_stream(c->stream, c->seq, what, cs->ls.message);
    }
}

static enum exec_result exec_kernel(cpu_device *d, cpu_worker *w, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(c->stream);
    rill_dim3 g = c->c.u.kernel.grid;
    uint32_t total = g.x * g.y * g.z;
    atomic_store_explicit(&cs->ls.failed, 0, memory_order_relaxed);
    if (total == 1 || d->num_workers == 1) {
        run_blocks(w, c, 0, total);
        kernel_done(c);
        return EXEC_DONE;
    }
    c->total_blocks = total;
    c->chunk = total / ((uint32_t)d->num_workers * 4u);
    if (c->chunk == 0)
        c->chunk = 1;
    atomic_store_explicit(&c->next_block, 0, memory_order_relaxed);
    atomic_store_explicit(&c->refs, 1, memory_order_relaxed);
    rill__mutex_lock(&d->launch_lock);
    c->launch_next = d->launches;
    d->launches = c;
    c->listed = 1;
    atomic_fetch_add(&d->num_launches, 1);
    rill__mutex_unlock(&d->launch_lock);
    wake_workers(
        d, (int)(total - 1 < (uint32_t)d->num_workers ? total - 1 : (uint32_t)d->num_workers));
    run_chunks(d, w, c);
    unlist(d, c);
    /* acq_rel: the last worker out sees every block's writes. */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return EXEC_HANDED_OFF;
    kernel_done(c);
    return EXEC_DONE;
}

static void on_wait_met(rill__waiter *wt) {
    cpu_stream *cs = (cpu_stream *)((char *)wt - offsetof(cpu_stream, waiter));
    rill__stream *s = cs->self;
    atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
    push_ready(cpu_device_of(s->dev), s);
}

/* True when this worker may spin for its stream: the device has nothing
 * else to do, or another worker is idle and will take what there is. */
static int device_quiet(cpu_device *d) {
    /* relaxed: hints for how long to spin. */
    return atomic_load_explicit(&d->idle, memory_order_relaxed) > 0 ||
           (atomic_load_explicit(&d->ready_mask, memory_order_relaxed) == 0 &&
            atomic_load_explicit(&d->num_launches, memory_order_relaxed) == 0);
}

/* Parks cs's stream until t completes seq: true when it is parked (it may
 * already run elsewhere), false when t got there first (it goes on). */
static bool park(cpu_stream *cs, rill__stream *t, uint64_t seq) {
    cs->waiter.seq = seq;
    cs->waiter.fn = on_wait_met;
    atomic_store_explicit(&cs->state, CPU_PARKED, memory_order_relaxed);
    if (rill__stream_add_waiter(t, &cs->waiter))
        return true;
    atomic_store_explicit(&cs->state, CPU_RUNNING, memory_order_relaxed);
    return false;
}

static enum exec_result exec_wait(cpu_device *d, rill__stream *s, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(s);
    rill__stream *t = c->c.u.wait.stream;
    uint64_t seq = c->c.u.wait.seq;
    uint64_t spin_until = 0;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&t->done_seq, memory_order_acquire) >= seq) {
            /* A stream already failing skips its work anyway; an order-only
             * wait never carries a failure. */
            if (!cs->skipping && !(c->c.flags & RILL__CMD_ORDER_ONLY) &&
                rill__stream_carry_failure(s, c->seq, t, seq))
                cs->skipping = 1;
            return EXEC_DONE;
        }
        /* A dependency that completes within a few microseconds is cheaper
         * to spin for than to park and wake, when no other work waits. */
        if (spin_until == 0)
            spin_until = rill__now_ns() + WAIT_SPIN_NS;
        if (device_quiet(d) && ((spins & 31u) != 0 || rill__now_ns() < spin_until)) {
            rill__cpu_relax();
            continue;
        }
        if (park(cs, t, seq))
            return EXEC_PARKED; /* s may already run elsewhere: touch nothing */
    }
}

enum exec_result rill__cpu_wait_ended(rill__stream *s, rill__stream *t, uint64_t seq) {
    cpu_stream *cs = cpu_stream_of(s);
    for (;;) {
        if (atomic_load_explicit(&t->done_seq, memory_order_acquire) >= seq)
            return EXEC_DONE;
        if (park(cs, t, seq))
            return EXEC_PARKED; /* s may already run elsewhere: touch nothing */
    }
}

/* A host function that called fork() returns, in the child, on the
 * child's copy of this worker. That copy must neither run the parent's
 * work (device memory is shared with the parent) nor wait for work that
 * nothing will submit: it ends, and with it the child unless the child
 * made threads of its own. */
static void stop_if_forked(const cpu_worker *w) {
    /* relaxed: only the fork's child handler, on this thread, changes it. */
    if (atomic_load_explicit(&rill__fork_count, memory_order_relaxed) != w->forks)
        rill__thread_exit();
}

static enum exec_result exec(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(s);
    switch (c->c.kind) {
    case RILL__CMD_KERNEL:
        return cs->skipping ? EXEC_DONE : exec_kernel(d, w, c);
    case RILL__CMD_HOST:
        if (!cs->skipping) {
            /* The stream's launch state is free: a kernel's ends with it. */
            bool failed = rill__host_run(c->c.u.host.fn, c->c.u.host.user_data, &cs->ls);
            stop_if_forked(w);
            if (failed)
                fail_stream(s, c->seq, "host function", cs->ls.message);
        }
        return EXEC_DONE;
    case RILL__CMD_WAIT:
        /* Even while skipping: the work after a later CLEAR, and memory the
         * pool handed out behind this wait, rely on the order. */
        return exec_wait(d, s, c);
    case RILL__CMD_RECORD:
        rill__event_stamp(c->c.u.record.event, c->c.u.record.gen, rill__now_ns(), cs->skipping);
        return EXEC_DONE;
    case RILL__CMD_COPY:
        if (!cs->skipping)
            memmove(c->c.u.copy.dst, c->c.u.copy.src, c->c.u.copy.bytes);
        return EXEC_DONE;
    case RILL__CMD_SET:
        if (!cs->skipping)
            memset(c->c.u.set.dst, c->c.u.set.value, c->c.u.set.bytes);
        return EXEC_DONE;
    case RILL__CMD_CLEAR:
        cs->skipping = 0;
        rill__stream_clear_failure(s, c->seq);
        return EXEC_DONE;
    case RILL__CMD_GRAPH: /* skipped there, after its wait for the exec's last launch */
        return rill__cpu_exec_graph(d, w, c);
    }
    return EXEC_DONE;
}

/* True when s should give its worker to another ready stream. */
static int should_yield(cpu_device *d, rill__stream *s, int batch) {
    /* relaxed: a scheduling hint. */
    uint32_t mask = atomic_load_explicit(&d->ready_mask, memory_order_relaxed);
    uint32_t level = 1u << prio_index(s);
    if (mask & (level - 1u))
        return 1; /* a higher priority is ready */
    return batch >= FAIR_BATCH && (mask & level);
}

/* The next command of s, spinning briefly for one to arrive while the
 * device has nothing else to do, so a stream that is being fed keeps its
 * worker instead of going idle and being scheduled again. */
static cpu_cmd *next_cmd(cpu_device *d, cpu_stream *cs) {
    /* acquire: pairs with the release store of next in submit. */
    cpu_cmd *c = atomic_load_explicit(&cs->head->next, memory_order_acquire);
    if (c != NULL || !device_quiet(d))
        return c;
    if (rill__stream_took_host_wake()) {
        /* The woken host thread needs a processor: leave this one. */
        leave_cpu = true;
        return NULL;
    }
    uint64_t until = rill__now_ns() + STREAM_SPIN_NS;
    for (unsigned spins = 1;; spins++) {
        rill__cpu_relax();
        c = atomic_load_explicit(&cs->head->next, memory_order_acquire);
        if (c != NULL || ((spins & 31u) == 0 && (!device_quiet(d) || rill__now_ns() > until)))
            return c;
    }
}

/* The queue looked empty: marks s IDLE unless a command arrived meanwhile.
 * Returns 1 when the worker gave s up. */
static int go_idle(rill__stream *s, cpu_stream *cs) {
    return_nodes(cs);
    cpu_cmd *h = cs->head;
    /* The other half of the Dekker pair in submit. */
    atomic_store_explicit(&cs->state, CPU_IDLE, memory_order_seq_cst);
    rill__barrier_heavy();
    if (atomic_load_explicit(&h->next, memory_order_acquire) != NULL) {
        int expected = CPU_IDLE;
        if (atomic_compare_exchange_strong(&cs->state, &expected, CPU_RUNNING))
            return 0; /* still ours, with the scheduled reference */
    }
    rill__stream_unref(s); /* the scheduled reference */
    return 1;
}

/* Runs s's commands until its queue is empty, it parks, a multi-block
 * kernel hands it to another worker, or it yields to other streams. */
static void run_stream(cpu_device *d, cpu_worker *w, rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    atomic_store_explicit(&cs->state, CPU_RUNNING, memory_order_relaxed);
    for (int batch = 1;; batch++) {
        cpu_cmd *c = next_cmd(d, cs);
        if (c == NULL) {
            if (go_idle(s, cs))
                return;
            continue;
        }
        enum exec_result r = exec(d, w, s, c);
        if (r != EXEC_DONE)
            return;
        finish(s, c);
        if (should_yield(d, s, batch) &&
            atomic_load_explicit(&cs->head->next, memory_order_acquire) != NULL) {
            atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
            push_ready(d, s);
            return;
        }
    }
}

void rill__cpu_wake_workers(cpu_device *d, int count) {
    wake_workers(d, count);
}

void rill__cpu_fail_stream(rill__stream *s, uint64_t seq, const char *what, const char *detail) {
    fail_stream(s, seq, what, detail);
}

void rill__cpu_resume_stream(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c) {
    finish(s, c);
    run_stream(d, w, s);
}

/* Runs blocks of a published launch; the last worker out finishes the
 * command and carries on with its stream. Returns 0 when there was none. */
static int help_launch(cpu_device *d, cpu_worker *w) {
    if (atomic_load_explicit(&d->num_launches, memory_order_relaxed) == 0)
        return 0;
    rill__mutex_lock(&d->launch_lock);
    cpu_cmd *c = d->launches;
    if (c != NULL)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    rill__mutex_unlock(&d->launch_lock);
    if (c == NULL)
        return 0;
    run_chunks(d, w, c);
    unlist(d, c);
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
        rill__stream *s = c->stream;
        kernel_done(c);
        finish(s, c);
        run_stream(d, w, s);
    }
    return 1;
}

static int has_work(cpu_device *d) {
    return atomic_load(&d->ready_mask) != 0 || atomic_load(&d->num_launches) != 0 ||
           atomic_load(&d->graph_work) > 0 || atomic_load(&d->stop);
}

/* True when an idle worker may spin: a processor is left over after the
 * busy workers, the workers already spinning, and one for the threads that
 * submit work. Spinning on a processor that a submitting thread needs
 * would slow the very submissions it waits for. */
static int may_spin(cpu_device *d) {
    /* relaxed: a hint. */
    int busy = d->num_workers - atomic_load_explicit(&d->idle, memory_order_relaxed);
    int spinning = atomic_load_explicit(&d->spinning, memory_order_relaxed);
    return busy + spinning + 1 < d->num_cpus;
}

/* Idle workers sleep at most this long while a graph launch runs, so that
 * nodes its publisher did not wake anyone for (cpu_graph.c) find a worker
 * even while the publisher runs a long node; the nap doubles, up to 32
 * times, while naps find nothing. */
#define GRAPH_NAP_NS 50000u

static void idle_wait(cpu_device *d, cpu_worker *w) {
    atomic_fetch_add_explicit(&d->idle, 1, memory_order_relaxed);
    bool spin = !leave_cpu && !rill__stream_took_host_wake();
    leave_cpu = false;
    if (spin && may_spin(d)) {
        uint64_t start = rill__now_ns();
        atomic_fetch_add_explicit(&d->spinning, 1, memory_order_relaxed);
        for (unsigned spins = 1;; spins++) {
            if (has_work(d)) {
                atomic_fetch_sub_explicit(&d->spinning, 1, memory_order_relaxed);
                atomic_fetch_sub_explicit(&d->idle, 1, memory_order_relaxed);
                return;
            }
            rill__cpu_relax();
            if ((spins & 63u) == 0 && rill__now_ns() - start > IDLE_SPIN_NS)
                break;
        }
        atomic_fetch_sub_explicit(&d->spinning, 1, memory_order_relaxed);
    }
    uint32_t gen = atomic_load(&d->work_gen);
    atomic_fetch_add(&d->sleepers, 1);
    if (!has_work(d)) {
        if (atomic_load_explicit(&d->num_graph_runs, memory_order_relaxed) > 0) {
            unsigned shift = w->naps < 5 ? w->naps : 5;
            w->naps++;
            rill__futex_wait_for(&d->work_gen, gen, (uint64_t)GRAPH_NAP_NS << shift);
        } else {
            w->naps = 0;
            rill__futex_wait(&d->work_gen, gen);
        }
    }
    atomic_fetch_sub(&d->sleepers, 1);
    atomic_fetch_sub_explicit(&d->idle, 1, memory_order_relaxed);
}

static void worker_main(void *arg) {
    cpu_worker *w = arg;
    cpu_device *d = w->d;
    rill__thread_set_worker(1);
    w->forks = atomic_load_explicit(&rill__fork_count, memory_order_relaxed);
    for (;;) {
        rill__stream *s = pop_ready(d);
        if (s != NULL) {
            run_stream(d, w, s);
            continue;
        }
        if (help_launch(d, w))
            continue;
        if (rill__cpu_help_graph(d, w)) {
            w->naps = 0;
            continue;
        }
        if (atomic_load(&d->stop))
            return;
        idle_wait(d, w);
    }
}

void rill__cpu_workers_start(cpu_device *d) {
    for (int i = 0; i < d->num_workers; i++) {
        char name[32];
        snprintf(name, sizeof name, "rill-cpu-%d", i);
        d->workers[i].d = d;
        d->workers[i].index = i;
        rill__thread_start(&d->workers[i].thread, name, worker_main, &d->workers[i]);
    }
}

void rill__cpu_workers_stop(cpu_device *d) {
    atomic_store(&d->stop, 1);
    atomic_fetch_add(&d->work_gen, 1);
    rill__futex_wake(&d->work_gen, INT32_MAX);
    for (int i = 0; i < d->num_workers; i++)
        rill__thread_join(&d->workers[i].thread);
}
