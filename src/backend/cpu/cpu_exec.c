/* SPDX-License-Identifier: MIT */
/* Running a CPU stream's commands: a worker takes a whole ready stream and
 * runs it until its queue is empty, it parks, a multi-block kernel hands
 * it to another worker, or it yields to streams of its priority or above.
 * Multi-block kernels are shared through the device's launch list; a
 * stream blocked on a wait parks on the producing stream and holds no
 * worker; waits, records and clears run on whichever thread meets the
 * wait, without a compute unit (docs/cpu.md, "Scheduling"). Exactly one
 * thread owns a RUNNING stream (cpu.h). Layer: CPU backend. */
#include <stdio.h>
#include <string.h>

#include "backend/cpu/cpu_sched_internal.h"
#include "backend/cpu/cpu_trace.h"
#include "trace/trace.h"
#include "util/status.h"

/* A stream keeps its worker for at most this many commands while another
 * stream of the same priority is ready and no worker is idle; while one
 * is, for at most KEEP_BATCH, and the idle worker is woken for the other
 * stream (should_yield). */
#define FAIR_BATCH 64
#define KEEP_BATCH (8 * FAIR_BATCH)
/* How long a worker spins for the next command of its stream, and for a
 * wait's dependency, before it gives the stream up or parks it. */
#define STREAM_SPIN_NS 20000u
#define WAIT_SPIN_NS   50000u

/* ------------------------------------------------------------- execution */

/* A host function, wait or record and its completion read one line of the
 * slot (the two words of its member of c.u). */
_Static_assert(offsetof(cpu_cmd, c.u) + 2 * sizeof(void *) <= 64,
               "cpu_cmd: what a host function, wait or record reads on its first line");

/* Completes the stream's next command, c: its slot is free for the
 * submitters once the owner has moved past its block, and the stream's
 * done_seq advances. */
RILL_HOT void rill__cpu_finish(rill__stream *s, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(s);
    uint64_t seq = c->seq;
    if (__builtin_expect(c->trace_t0 != 0, 0))
        rill__cpu_trace_stream_slice(s, c);
    bool kernel = c->c.kind == RILL__CMD_KERNEL;
    rill__cmd_release(s, &c->c);
    if (kernel && (c->args_heap != NULL || c->accesses_heap != NULL)) {
        rill__free(c->args_heap);
        rill__free(c->accesses_heap);
        c->args_heap = NULL;
        c->accesses_heap = NULL;
    }
    cs->rd_seq = seq + 1;
    if (++cs->rd_idx == CPU_BLOCK_SLOTS)
        cpu_next_block(cs);
    rill__stream_complete(s, seq);
}

void rill__cpu_unlist(cpu_device *d, cpu_cmd *c) {
    rill__cpu_unpublish(d, &d->launches, &d->num_launches, &c->pub);
}

RILL_HOT static void run_blocks(cpu_worker *w, cpu_cmd *c, uint32_t first, uint32_t end) {
    (void)rill__cpu_grid_run(w, ((const rill_kernel_image *)c->c.u.kernel.loaded)->fn,
                             c->c.u.kernel.args, c->c.u.kernel.grid, &cpu_stream_of(c->stream)->ls,
                             first, end);
}

/* Takes chunks of c's blocks until none are left. The worker that takes
 * the last chunk removes c from the launch list at once, so idle workers
 * do not keep finding a launch with nothing left to hand out. */
static void run_chunks(cpu_device *d, cpu_worker *w, cpu_cmd *c) {
    uint32_t first, end;
    while (rill__cpu_grid_take(&c->next_block, c->chunk, c->total_blocks, &first, &end)) {
        if (end == c->total_blocks)
            rill__cpu_unlist(d, c);
        run_blocks(w, c, first, end);
    }
}

/* Called once every block of c has run: turns a failure into the
 * stream's sticky error. */
RILL_HOT void rill__cpu_kernel_done(cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(c->stream);
    if (atomic_load_explicit(&cs->ls.failed, memory_order_acquire)) {
        char what[96], name[80];
        rill__fit(name, sizeof name, rill__kernel_image_of(c->c.u.kernel.kernel)->name);
        snprintf(what, sizeof what, "kernel '%s'", name);
        rill__cpu_fail_stream(c->stream, c->seq, what, cs->ls.message);
    }
}

RILL_HOT static enum exec_result exec_kernel(cpu_device *d, cpu_worker *w, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(c->stream);
    rill_dim3 g = c->c.u.kernel.grid;
    uint32_t total = g.x * g.y * g.z;
    atomic_store_explicit(&cs->ls.failed, 0, memory_order_relaxed);
    if (total == 1 || d->num_workers == 1) {
        run_blocks(w, c, 0, total);
        rill__cpu_kernel_done(c);
        return EXEC_DONE;
    }
    c->total_blocks = total;
    c->chunk = rill__cpu_grid_chunk(d, total);
    atomic_store_explicit(&c->next_block, 0, memory_order_relaxed);
    atomic_store_explicit(&c->refs, 1, memory_order_relaxed);
    /* The lock orders the initialisation above before the helpers' accesses. */
    rill__cpu_publish(d, &d->launches, &d->num_launches, &c->pub);
    rill__cpu_wake_workers(
        d, (int)(total - 1 < (uint32_t)d->num_workers ? total - 1 : (uint32_t)d->num_workers));
    run_chunks(d, w, c);
    rill__cpu_unlist(d, c);
    /* acq_rel: the last worker out sees every block's writes. */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return EXEC_HANDED_OFF;
    rill__cpu_kernel_done(c);
    return EXEC_DONE;
}

static void run_unitless(rill__stream *s);

/* Streams whose waits this thread met while it ran another stream's
 * commands in on_wait_met: run after that one, not inside it, so that a
 * chain of streams that wait on each other does not nest a call per
 * stream on the thread's stack. */
static _Thread_local rill__stream *tls_met_head, *tls_met_tail;
static _Thread_local bool tls_running_met;
/* Set while a submitting thread completes waits (rill__cpu_dispatch_first_waits):
 * it may hold a lock of a caller's (an event's, while it records), so the
 * streams it wakes go to the ready queue, as they went before any thread
 * without a unit ran waits. */
static _Thread_local bool tls_submitting;

/* A parked stream's wait is met: this thread, which completed the
 * producer's number, now owns the stream and runs what needs no unit. */
static void on_wait_met(rill__waiter *wt) {
    cpu_stream *cs = (cpu_stream *)((char *)wt - offsetof(cpu_stream, waiter));
    rill__stream *s = cs->self;
    if (tls_submitting) {
        atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
        rill__cpu_push_ready(cpu_device_of(rill__queue_of(s)->dev), s, false);
        return;
    }
    if (tls_running_met) {
        cs->met_next = NULL;
        if (tls_met_tail != NULL)
            cpu_stream_of(tls_met_tail)->met_next = s;
        else
            tls_met_head = s;
        tls_met_tail = s;
        return;
    }
    tls_running_met = true;
    for (;;) {
        run_unitless(s);
        if ((s = tls_met_head) == NULL)
            break;
        tls_met_head = cpu_stream_of(s)->met_next;
        if (tls_met_head == NULL)
            tls_met_tail = NULL;
    }
    tls_running_met = false;
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

/* Whether the producer of c, a WAIT of s, has completed the awaited
 * number; when it has, s takes on the producer's failure there. */
static bool wait_met(rill__stream *s, cpu_stream *cs, cpu_cmd *c) {
    rill__stream *t = c->c.u.wait.stream;
    uint64_t seq = c->c.u.wait.seq;
    if (atomic_load_explicit(&rill__queue_of(t)->done_seq, memory_order_acquire) < seq)
        return false;
    /* A stream already failing skips its work anyway; an order-only wait
     * never carries a failure. */
    if (!cs->skipping && !(c->c.flags & RILL__CMD_ORDER_ONLY) &&
        rill__stream_carry_failure(s, c->seq, t, seq))
        cs->skipping = 1;
    return true;
}

/* How many waits in a row met just after a yield make a thread park at its
 * next wait instead of spinning (exec_wait). */
#define SHARED_PROCESSOR_WAITS 3

static enum exec_result exec_wait(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c) {
    cpu_stream *cs = cpu_stream_of(s);
    uint64_t spin_until = 0;
    bool yielded = false;
    for (unsigned spins = 1;; spins++) {
        if (wait_met(s, cs, c)) {
            w->met_after_yield = yielded ? w->met_after_yield + 1 : 0;
            return EXEC_DONE;
        }
        /* A dependency that completes within a few microseconds is cheaper
         * to spin for than to park and wake, when no other work waits. The
         * clock is read every 32 spins only: a read costs about as much as
         * a hop between two streams. A thread whose waits keep being met
         * just after its yields shares its processor with the thread it
         * waits for (the system put both on one processor and leaves them
         * there, since both stay runnable): it parks instead, and the
         * wake-up that resumes the stream moves the worker that takes it
         * to an idle processor. */
        if (device_quiet(d) && w->met_after_yield < SHARED_PROCESSOR_WAITS) {
            if ((spins & 31u) != 0) {
                rill__cpu_relax();
                continue;
            }
            uint64_t now = rill__now_ns();
            if (spin_until == 0)
                spin_until = now + WAIT_SPIN_NS;
            if (now < spin_until) {
                /* Now and then, the processor to a thread that wants it: on
                 * a machine with no processor to spare, the host thread
                 * that submits the work this wait is for (or the worker
                 * that runs it) would otherwise wait for this spin to end. */
                rill__thread_yield();
                yielded = true;
                continue;
            }
        }
        w->met_after_yield = 0;
        if (park(cs, c->c.u.wait.stream, c->c.u.wait.seq))
            return EXEC_PARKED; /* s may already run elsewhere: touch nothing */
    }
}

/* A command that a thread without a compute unit runs starts its trace
 * slice here, on no unit's track (once: a wait met later keeps it). */
static void trace_unitless(cpu_cmd *c) {
    if (c->trace_t0 != 0 || !rill__tracing())
        return;
    c->trace_t0 = rill__trace_now();
    c->trace_unit = -1;
    c->trace_on_unit = 0;
}

enum exec_result rill__cpu_wait_ended(rill__stream *s, rill__stream *t, uint64_t seq) {
    cpu_stream *cs = cpu_stream_of(s);
    for (;;) {
        if (atomic_load_explicit(&rill__queue_of(t)->done_seq, memory_order_acquire) >= seq)
            return EXEC_DONE;
        if (park(cs, t, seq))
            return EXEC_PARKED; /* s may already run elsewhere: touch nothing */
    }
}

/* A RECORD or a CLEAR of s: what needs no compute unit besides waits. */
static void exec_mark(rill__stream *s, cpu_stream *cs, cpu_cmd *c) {
    if (c->c.kind == RILL__CMD_RECORD) {
        rill__event_stamp(c->c.u.record.event, c->c.u.record.gen, rill__now_ns(), cs->skipping);
    } else {
        cs->skipping = 0;
        rill__stream_clear_failure(s, c->seq);
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

RILL_HOT static enum exec_result exec_body(cpu_device *d, cpu_worker *w, rill__stream *s,
                                           cpu_cmd *c) {
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
                rill__cpu_fail_stream(s, c->seq, "host function", cs->ls.message);
        } else {
            rill__host_skipped(&c->c.u.host, c->c.flags, &cs->ls);
            stop_if_forked(w);
        }
        return EXEC_DONE;
    case RILL__CMD_WAIT:
        /* Even while skipping: the work after a later CLEAR, and memory the
         * pool handed out behind this wait, rely on the order. */
        return exec_wait(d, w, s, c);
    case RILL__CMD_RECORD:
    case RILL__CMD_CLEAR:
        exec_mark(s, cs, c);
        return EXEC_DONE;
    case RILL__CMD_COPY:
        if (!cs->skipping)
            memmove(c->c.u.copy.dst, c->c.u.copy.src, c->c.u.copy.bytes);
        return EXEC_DONE;
    case RILL__CMD_SET:
        if (!cs->skipping)
            memset(c->c.u.set.dst, c->c.u.set.value, c->c.u.set.bytes);
        return EXEC_DONE;
    case RILL__CMD_GRAPH:
        /* The exec's previous launch, on another stream, must have ended,
         * even when this stream skips this launch: a later launch that
         * waits for this one must find the run free. */
        if (c->c.u.graph.after_stream != NULL &&
            rill__cpu_wait_ended(s, c->c.u.graph.after_stream, c->c.u.graph.after_seq) ==
                EXEC_PARKED)
            return EXEC_PARKED;
        return cs->skipping ? EXEC_DONE : rill__cpu_exec_graph(d, w, c);
    }
    return EXEC_DONE;
}

/* rill__cpu_exec, traced: notes when c started (its stream slice ends at
 * rill__cpu_finish) and which unit ran it. A command that runs whole here,
 * in one go, is finished by this thread next: its stream slice is its
 * unit's slice too, one record. A kernel or graph that other threads may
 * finish gets a unit slice of its own for this thread's part, described
 * before it runs (once handed off, it may be finished and reused by
 * another thread). Waits, records and clears hold no unit. */
static enum exec_result exec_traced(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c) {
    uint64_t t0 = rill__trace_now();
    bool first = c->trace_t0 == 0;
    if (first) {
        c->trace_t0 = t0;
        c->trace_unit = w->unit;
        c->trace_on_unit = 0;
    }
    rill__cmd_kind kind = c->c.kind;
    bool on_unit = w->unit >= 0 && kind != RILL__CMD_WAIT && kind != RILL__CMD_RECORD &&
                   kind != RILL__CMD_CLEAR;
    bool may_hand_off =
        kind == RILL__CMD_GRAPH ||
        (kind == RILL__CMD_KERNEL &&
         (c->c.u.kernel.grid.x > 1 || c->c.u.kernel.grid.y > 1 || c->c.u.kernel.grid.z > 1));
    rill__trace_rec r;
    if (on_unit && may_hand_off)
        rill__trace_describe(&r, s, &c->c, c->seq);
    enum exec_result res = exec_body(d, w, s, c);
    if (on_unit && first && res == EXEC_DONE) {
        c->trace_on_unit = 1;
    } else if (on_unit && may_hand_off) {
        r.type = RILL__TRACE_UNIT_SLICE;
        r.flags = 0;
        r.unit = w->unit;
        r.t0 = t0;
        r.t1 = rill__trace_now();
        rill__trace_emit(&r);
    }
    return res;
}

RILL_HOT enum exec_result rill__cpu_exec(cpu_device *d, cpu_worker *w, rill__stream *s,
                                         cpu_cmd *c) {
    if (rill__tracing())
        return exec_traced(d, w, s, c);
    return exec_body(d, w, s, c);
}

/* run_chunks for a thread that helps with another's launch: traced as
 * that thread's part of the kernel. */
void rill__cpu_help_chunks(cpu_device *d, cpu_worker *w, cpu_cmd *c) {
    if (!rill__tracing() || w->unit < 0) {
        run_chunks(d, w, c);
        return;
    }
    rill__trace_rec r;
    rill__trace_describe(&r, c->stream, &c->c, c->seq);
    r.type = RILL__TRACE_UNIT_SLICE;
    r.flags = 0;
    r.unit = w->unit;
    r.t0 = rill__trace_now();
    run_chunks(d, w, c);
    r.t1 = rill__trace_now();
    rill__trace_emit(&r);
}

/* True when s should give its worker to another ready stream: at once for
 * a higher priority; for one of its own, after FAIR_BATCH commands, unless
 * a worker is idle. Then the other stream is that worker's to take, and s
 * keeps the worker it runs on: handing s over would move it to a worker
 * that the system has yet to wake, often on the processor of the thread
 * that submits (seen: a chain moved there at its 64th command and crawled
 * behind the submitting thread while its old processor idled). The idle
 * worker is woken, once a FAIR_BATCH, in case its wake-up was left to the
 * watch; after KEEP_BATCH commands s yields all the same, so a worker that
 * never comes costs the other stream a bounded wait. */
static int should_yield(cpu_device *d, rill__stream *s, int batch) {
    /* relaxed: scheduling hints. */
    uint32_t mask = atomic_load_explicit(&d->ready_mask, memory_order_relaxed);
    uint32_t level = 1u << cpu_prio_index(s);
    if (mask & (level - 1u))
        return 1; /* a higher priority is ready */
    if (batch < FAIR_BATCH || !(mask & level))
        return 0;
    if (batch < KEEP_BATCH && atomic_load_explicit(&d->idle, memory_order_relaxed) > 0) {
        if (batch % FAIR_BATCH == 0)
            rill__cpu_wake_workers(d, 1);
        return 0;
    }
    return 1;
}

/* The next command of s, spinning briefly for one to arrive while the
 * device has nothing else to do, so a stream that is being fed keeps its
 * worker instead of going idle and being scheduled again. */
static cpu_cmd *next_cmd(cpu_device *d, cpu_stream *cs) {
    cpu_cmd *c = cpu_peek(cs);
    if (c != NULL || !device_quiet(d))
        return c;
    if (rill__stream_took_host_wake())
        rill__cpu_leave_processor(); /* the woken host thread needs a processor */
    if (rill__cpu_leaving_processor())
        return NULL;
    uint64_t until = rill__now_ns() + STREAM_SPIN_NS;
    for (unsigned spins = 1;; spins++) {
        rill__cpu_relax();
        c = cpu_peek(cs);
        if (c != NULL || ((spins & 31u) == 0 && (!device_quiet(d) || rill__now_ns() > until)))
            return c;
    }
}

/* The queue looked empty: marks s IDLE unless a command arrived meanwhile.
 * Returns 1 when the worker gave s up. The check and the store happen
 * under the submitters' lock, and submit reads the state under it after
 * it published its command: either we see the command or the submitter
 * sees IDLE and schedules the stream. No barrier is needed beyond the
 * lock. */
RILL_HOT int rill__cpu_go_idle(rill__stream *s, cpu_stream *cs) {
    rill__spinlock_lock(&cs->lock);
    /* The lock orders this with submit's store of ready. */
    bool empty = cpu_peek(cs) == NULL;
    /* release: pairs with the compare-exchange in rill__cpu_submit. A
     * submitter that read IDLE under the lock in an earlier idle spell may
     * make the stream ready after this spell began, without taking the
     * lock after us: its exchange must still see what this runner wrote,
     * for the worker it hands the stream to. */
    if (empty)
        atomic_store_explicit(&cs->state, CPU_IDLE, memory_order_release);
    rill__spinlock_unlock(&cs->lock);
    if (!empty)
        return 0;          /* still ours, with the scheduled reference */
    rill__stream_unref(s); /* the scheduled reference */
    return 1;
}

/* Runs s, whose wait this thread met (on_wait_met), as far as it can
 * without a compute unit: waits that are met, records and clears, up to a
 * batch. It parks s again at a wait not met, lets it go idle when its
 * queue is empty, and makes it ready for a worker at the first command
 * that needs a unit (or after the batch). */
static void run_unitless(rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    atomic_store_explicit(&cs->state, CPU_RUNNING, memory_order_relaxed);
    for (int batch = 0; batch < FAIR_BATCH; batch++) {
        cpu_cmd *c = cpu_peek(cs);
        if (c == NULL) {
            if (rill__cpu_go_idle(s, cs))
                return;
            continue;
        }
        rill__cmd_kind kind = c->c.kind;
        if (kind != RILL__CMD_WAIT && kind != RILL__CMD_RECORD && kind != RILL__CMD_CLEAR)
            break;
        trace_unitless(c);
        if (kind == RILL__CMD_WAIT) {
            if (!wait_met(s, cs, c)) {
                if (park(cs, c->c.u.wait.stream, c->c.u.wait.seq))
                    return; /* s may already run elsewhere: touch nothing */
                continue;   /* met meanwhile */
            }
        } else {
            exec_mark(s, cs, c);
        }
        rill__cpu_finish(s, c);
    }
    atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
    rill__cpu_push_ready(cpu_device_of(rill__queue_of(s)->dev), s, false);
}

/* s just became ready on a submitting thread, which owns it until it
 * hands it on. While its first command is a WAIT, the thread runs it
 * here instead of putting s in the ready queue: a WAIT that is met it
 * finishes, one that is not it parks on its producer, whose completion
 * runs s on (on_wait_met). So no worker, and no compute unit, is needed to
 * get a stream past its waits. Returns false when s is to go to the ready
 * queue (its first command needs a unit), true when it is parked or idle.
 * Only waits run here: the caller may hold the lock of an event that a
 * record would take. */
bool rill__cpu_dispatch_first_waits(rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    atomic_store_explicit(&cs->state, CPU_RUNNING, memory_order_relaxed);
    for (int batch = 0; batch < FAIR_BATCH; batch++) {
        cpu_cmd *c = cpu_peek(cs);
        if (c == NULL) {
            if (rill__cpu_go_idle(s, cs))
                return true;
            continue;
        }
        if (c->c.kind != RILL__CMD_WAIT)
            break;
        trace_unitless(c); /* before the park: c may be finished at once after it */
        if (!wait_met(s, cs, c)) {
            if (park(cs, c->c.u.wait.stream, c->c.u.wait.seq))
                return true; /* s may already run elsewhere: touch nothing */
            continue;        /* met meanwhile */
        }
        tls_submitting = true;
        rill__cpu_finish(s, c);
        tls_submitting = false;
    }
    atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
    return false;
}

void rill__cpu_run_stream(cpu_device *d, cpu_worker *w, rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    atomic_store_explicit(&cs->state, CPU_RUNNING, memory_order_relaxed);
    for (int batch = 1;; batch++) {
        cpu_cmd *c = next_cmd(d, cs);
        if (c == NULL) {
            if (rill__cpu_go_idle(s, cs))
                return;
            continue;
        }
        enum exec_result r = rill__cpu_exec(d, w, s, c);
        if (r != EXEC_DONE)
            return;
        rill__cpu_finish(s, c);
        if (should_yield(d, s, batch) && cpu_peek(cs) != NULL) {
            atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
            rill__cpu_push_ready(d, s, false);
            return;
        }
    }
}

void rill__cpu_resume_stream(cpu_device *d, cpu_worker *w, rill__stream *s, cpu_cmd *c) {
    rill__cpu_finish(s, c);
    rill__cpu_run_stream(d, w, s);
}

int rill__cpu_help_launch(cpu_device *d, cpu_worker *w) {
    if (atomic_load_explicit(&d->num_launches, memory_order_relaxed) == 0)
        return 0;
    rill__mutex_lock(&d->launch_lock);
    cpu_cmd *c = d->launches != NULL ? RILL__OWNER(d->launches, cpu_cmd, pub.link) : NULL;
    if (c != NULL)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    rill__mutex_unlock(&d->launch_lock);
    if (c == NULL)
        return 0;
    rill__cpu_help_chunks(d, w, c);
    rill__cpu_unlist(d, c);
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
        rill__stream *s = c->stream;
        rill__cpu_kernel_done(c);
        rill__cpu_finish(s, c);
        rill__cpu_run_stream(d, w, s);
    }
    return 1;
}
