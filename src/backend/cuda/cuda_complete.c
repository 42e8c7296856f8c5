/* SPDX-License-Identifier: MIT */
/* Completion in the CUDA backend (see cuda.h): what the GPU finished is
 * what a stream's done word says; commands are completed in stream order
 * by one thread at a time, the device's pump or a host thread that waits
 * (host_help) or polls (kick). A host thread that waits asks the GPU to
 * write the done word (flush) and spins on it itself; the pump asks for
 * the writes nobody else asks for: for a stream whose unreported work has
 * been quiet for QUIET_NS, or one another stream's completion waits for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_graph.h"
#include "util/alloc.h"
#include "util/status.h"

/* ------------------------------------------------------------- the bell */

void rill__cuda_ring(cuda_device *d) {
    /* seq_cst: a Dekker pair with the pump's store of sleeping and load
     * of bell. */
    atomic_fetch_add(&d->bell, 1);
    if (atomic_load(&d->sleeping))
        rill__futex_wake(&d->bell, 1);
}

static void on_met(rill__waiter *w) {
    cuda_cmd *n = (cuda_cmd *)(void *)((char *)w - offsetof(cuda_cmd, waiter));
    cuda_device *d = n->d; /* n may be freed once met is seen */
    atomic_store_explicit(&n->met, 1, memory_order_release);
    rill__cuda_ring(d);
}

/* Once the waiter is registered only its call says the wait is met:
 * rill__stream_complete publishes done_seq before it takes the waiters out
 * of t's list, and n, freed once it completes, must not be freed while its
 * waiter is still there (a WAIT for a collective's proxy, completed by the
 * communication thread while this stream issued, was). */
bool rill__cuda_wait_for(cuda_cmd *n, rill__stream *t, uint64_t seq) {
    if (n->waiting)
        return atomic_load_explicit(&n->met, memory_order_acquire) != 0;
    if (atomic_load_explicit(&rill__queue_of(t)->done_seq, memory_order_acquire) >= seq)
        return true;
    n->waiter.seq = seq;
    n->waiter.fn = on_met;
    if (!rill__stream_add_waiter(t, &n->waiter))
        return true;
    n->waiting = true;
    return atomic_load_explicit(&n->met, memory_order_acquire) != 0;
}

/* ------------------------------------------------------------ failures */

void rill__cuda_fail_stream(cuda_stream *cs, uint64_t seq, const char *what, const char *detail) {
    char name[80], msg[RILL__CAUSE_BYTES];
    rill__stream_name(cs->self, name, sizeof name);
    snprintf(msg, sizeof msg, "%s on stream %s failed: %s", what, name,
             detail[0] != '\0' ? detail : "(no message)");
    rill__stream_fail(cs->self, seq, msg);
    cs->failing = 1;
    /* Work issued after a CLEAR past seq runs; what follows seq does not. */
    rill__mutex_lock(&cs->lock);
    if (cs->clear_seq < seq)
        cs->skipping = 1;
    rill__mutex_unlock(&cs->lock);
}

static const char *kind_name(const cuda_cmd *n) {
    switch (n->c.kind) {
    case RILL__CMD_COPY:
        return "memcpy";
    case RILL__CMD_SET:
        return "memset";
    case RILL__CMD_WAIT:
        return "wait";
    case RILL__CMD_HOST:
        return "host function";
    case RILL__CMD_GRAPH:
        return "graph launch";
    default:
        return "command";
    }
}

/* A fault on the GPU, which every later call of the context reports too. */
bool rill__cuda_ends_context(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return true;
    default:
        return false;
    }
}

/* A command that failed when it was issued fails its stream. */
static void report_error(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    if (rill__cuda_ends_context(n->error)) {
        char why[200];
        rill__cuda_describe(d, n->error, "the GPU stopped", why, sizeof why);
        rill__device_lost(rill__queue_of(cs->self)->dev, why);
    }
    if (cs->failing)
        return;
    char what[96], why[256];
    if (n->c.kind == RILL__CMD_KERNEL)
        snprintf(what, sizeof what, "kernel '%.60s'",
                 rill__kernel_image_of(n->c.u.kernel.kernel)->name);
    else
        snprintf(what, sizeof what, "%s", kind_name(n));
    if (n->why != NULL)
        snprintf(why, sizeof why, "%s", n->why);
    else
        rill__cuda_describe(d, n->error, "the CUDA driver refused it", why, sizeof why);
    rill__cuda_fail_stream(cs, n->seq, what, why);
}

/* What a completed command does on the host, then its release and
 * completion (no lock held). */
static void finish(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    rill__stream *s = cs->self;
    rill__cuda_trace_finish(d, cs, n);
    if (n->error != CUDA_SUCCESS)
        report_error(d, cs, n);
    rill__free(n->why);
    switch (n->c.kind) {
    case RILL__CMD_WAIT:
        if (n->carried)
            cs->failing = 1;
        else if (!cs->failing && !(n->c.flags & RILL__CMD_ORDER_ONLY) &&
                 rill__stream_carry_failure(s, n->seq, n->c.u.wait.stream, n->c.u.wait.seq)) {
            cs->failing = 1;
            rill__mutex_lock(&cs->lock);
            if (cs->clear_seq < n->seq)
                cs->skipping = 1;
            rill__mutex_unlock(&cs->lock);
        }
        break;
    case RILL__CMD_RECORD:
        if (n->c.flags & RILL__CMD_NATIVE_ONLY)
            break;
        /* rill__cuda_stamp takes the event. */
        rill__event_stamp(n->c.u.record.event, n->c.u.record.gen,
                          n->ev != NULL ? rill__cuda_stamp(d, n->ev) : rill__now_ns(), cs->failing);
        break;
    case RILL__CMD_CLEAR:
        cs->failing = 0;
        rill__stream_clear_failure(s, n->seq);
        break;
    case RILL__CMD_GRAPH:
        rill__cuda_graph_done(d, n->c.u.graph.launch, n->graph_run, cs->failing);
        break;
    default:
        break;
    }
    uint64_t seq = n->seq;
    rill__cuda_stage_release(d, n);
    rill__cmd_release(s, &n->c);
    rill__cuda_cmd_free(cs, n);
    rill__stream_complete(s, seq);
}

/* ----------------------------------------------------------- completion */

/* Asks the GPU to report ts's work (no lock held). */
static void flush(cuda_device *d, cuda_stream *ts) {
    rill__mutex_lock(&ts->lock);
    rill__cuda_flush_locked(d, ts);
    rill__mutex_unlock(&ts->lock);
}

/* The end of a completer's turn on cs (no lock held). */
static void end_completing(cuda_device *d, cuda_stream *cs) {
    /* release: the next completer, and the runner of the command first
     * now, see what this one did (failing). */
    atomic_store_explicit(&cs->completing, 0, memory_order_release);
    /* A runner's command that came first meanwhile was not taken: the
     * pump hands it over. Under the lock, so that a take after the store
     * above sees 0 and one before it set job_deferred. */
    rill__mutex_lock(&cs->lock);
    bool deferred = cs->job_deferred;
    cs->job_deferred = false;
    rill__mutex_unlock(&cs->lock);
    if (deferred)
        rill__cuda_ring(d);
}

/* A wait that the GPU did for another stream of the device completes only
 * after that stream's awaited work is reported complete, so that what a
 * host thread sees done keeps the order the GPU ran it in (an event that a
 * finished stream waited for is complete too); that stream is asked to
 * report and completed first when it can be. */
bool rill__cuda_complete_done(cuda_device *d, cuda_stream *cs) {
    int idle = 0;
    if (!atomic_compare_exchange_strong_explicit(&cs->completing, &idle, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    bool moved = false;
    for (;;) {
        cuda_cmd *done = NULL, **done_tail = &done, *h;
        rill__stream *behind = NULL; /* the awaited stream that holds the next wait back */
        rill__mutex_lock(&cs->lock);
        /* acquire: the GPU's write follows the command's work. */
        uint64_t word = atomic_load_explicit(cs->done_word, memory_order_acquire);
        while ((h = cs->head) != NULL && h != cs->next_issue &&
               (h->state == CUDA_MET || (h->state == CUDA_ON_GPU && h->seq <= word))) {
            if (h->gpu_wait && atomic_load_explicit(&rill__queue_of(h->c.u.wait.stream)->done_seq,
                                                    memory_order_acquire) < h->c.u.wait.seq) {
                behind = h->c.u.wait.stream;
                break;
            }
            /* Before the next command can start: a host function after
             * it sees what it copied into host memory. */
            if (h->c.kind == RILL__CMD_COPY && h->staged != CUDA_STAGED_NONE)
                rill__cuda_stage_complete_locked(h);
            cs->head = h->next;
            if (cs->head == NULL)
                cs->tail = NULL;
            h->next = NULL;
            *done_tail = h;
            done_tail = &h->next;
        }
        rill__mutex_unlock(&cs->lock);
        moved |= done != NULL;
        while (done != NULL) {
            cuda_cmd *next = done->next;
            finish(d, cs, done);
            done = next;
        }
        if (behind == NULL)
            break;
        /* The awaited work ran (this stream's GPU went past its mark): its
         * stream's completer may be another thread (then the next look goes
         * on) or this one, further up: no waiting here. */
        flush(d, cuda_stream_of(behind));
        if (!rill__cuda_complete_done(d, cuda_stream_of(behind)))
            break;
    }
    end_completing(d, cs);
    return moved;
}

/* Whether the done word shows work that is not reported complete yet. */
static bool word_moved(cuda_stream *cs) {
    /* acquire: pairs with the GPU's write, as in complete_done. */
    return atomic_load_explicit(cs->done_word, memory_order_acquire) >
           atomic_load_explicit(&rill__queue_of(cs->self)->done_seq, memory_order_acquire);
}

/* Asks the GPU to report, and completes what it reported, on a host
 * thread that waits or polls (as a worker: completions run callbacks). */
static bool report(rill__stream *s) {
    cuda_stream *cs = cuda_stream_of(s);
    cuda_device *d = cuda_device_of(rill__queue_of(s)->dev);
    CUcontext prev = NULL;
    bool entered = false;
    rill__mutex_lock(&cs->lock);
    if (cs->gpu_seq > cs->written) {
        prev = rill__cuda_enter(d);
        entered = true;
        rill__cuda_flush_locked(d, cs);
    }
    rill__mutex_unlock(&cs->lock);
    bool moved = false, left = false;
    if (word_moved(cs)) {
        rill__thread_enter_worker();
        if (!entered)
            prev = rill__cuda_enter(d); /* completing stamps events */
        entered = true;
        moved = rill__cuda_complete_done(d, cs);
        rill__thread_leave_worker();
        rill__mutex_lock(&cs->lock);
        left = cs->head != NULL;
        rill__mutex_unlock(&cs->lock);
    }
    if (entered)
        rill__cuda_leave(d, prev);
    if (moved && left)
        rill__cuda_ring(d); /* the pump runs what the completions let through */
    return moved;
}

bool rill__cuda_host_help(rill__stream *s, uint64_t seq) {
    (void)seq; /* the write covers all that is issued */
    return report(s);
}

void rill__cuda_kick(rill__stream *s) {
    (void)report(s);
}

/* ------------------------------------------------------------------ pump */

/* A stream whose CUstream reports an error: the context failed (an illegal
 * address, a trap). Everything issued is lost; the stream fails, and so
 * does every later command. */
static void check_context(cuda_device *d, rill__stream *s) {
    cuda_stream *cs = cuda_stream_of(s);
    CUresult r = d->drv->cuStreamQuery(cs->cu);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY)
        return;
    int idle = 0;
    if (!atomic_compare_exchange_strong_explicit(&cs->completing, &idle, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return; /* a completer is at work: the next round sees the failure */
    rill__mutex_lock(&cs->lock);
    cuda_cmd *h = cs->head;
    uint64_t seq = h != NULL ? h->seq : 0;
    for (cuda_cmd *n = h; n != NULL && n != cs->next_issue; n = n->next)
        if (n->state == CUDA_ON_GPU)
            n->state = CUDA_MET;
    cs->skipping = 1;
    cs->clear_seq = 0;
    rill__mutex_unlock(&cs->lock);
    /* A context error ends the device as a whole (CUDA cannot recover the
     * context): every stream of it fails, each as the pump finds it. */
    char why[200];
    rill__cuda_describe(d, r, "the GPU stopped", why, sizeof why);
    rill__device_lost(rill__queue_of(s)->dev, why);
    if (seq != 0)
        rill__cuda_fail_stream(cs, seq, "the device", why);
    end_completing(d, cs);
}

/* Removes one entry of s from the active list and drops its reference. */
static void deactivate(cuda_device *d, rill__stream *s) {
    rill__mutex_lock(&d->lock);
    for (size_t i = 0; i < d->num_active; i++) {
        if (d->active[i] == s) {
            d->active[i] = d->active[--d->num_active];
            break;
        }
    }
    rill__mutex_unlock(&d->lock);
    rill__stream_unref(s);
}

#define POLL_SPINS   64
#define POLL_WAIT_NS 20000u   /* the longest nap while work is on the GPU */
#define CHECK_NS     1000000u /* how often a stream with no progress is queried */
#define QUIET_NS     200000u  /* unreported work this long without new work: flush */

/* Completes what is done on s, hands the host function or graph launch
 * that comes first to a runner, issues what that lets through, and asks
 * for the writes of the done word nobody else asks for. Returns whether
 * anything moved; *gpu is set when work is left on the GPU. */
static bool service(cuda_device *d, rill__stream *s, uint64_t now, bool *gpu, bool *idle) {
    cuda_stream *cs = cuda_stream_of(s);
    bool moved = rill__cuda_complete_done(d, cs);
    rill__mutex_lock(&cs->lock);
    cuda_cmd *job = rill__cuda_take_job_locked(cs);
    uint64_t issued = atomic_load_explicit(&cs->issued_seq, memory_order_relaxed);
    rill__cuda_issue_ready(d, cs, false);
    bool issued_now = atomic_load_explicit(&cs->issued_seq, memory_order_relaxed) != issued;
    /* What the pump issued nobody waits to submit more behind. */
    if (issued_now || atomic_load_explicit(&cs->want_flush, memory_order_relaxed) ||
        (cs->gpu_seq > cs->written && now > cs->issued_ns + QUIET_NS))
        rill__cuda_flush_locked(d, cs);
    moved |= issued_now || job != NULL;
    /* Issued and not completed: the done word is to be watched. */
    *gpu = *gpu || (cs->head != NULL && cs->head != cs->next_issue);
    *idle = cs->head == NULL;
    if (*idle)
        cs->active = false;
    rill__mutex_unlock(&cs->lock);
    if (job != NULL)
        rill__cuda_hand_over(d, job);
    return moved;
}

void rill__cuda_pump(void *arg) {
    cuda_device *d = arg;
    rill__thread_set_worker(1);
    rill__stream **snap = NULL;
    size_t cap = 0;
    unsigned idle_rounds = 0;
    uint64_t last_move = rill__now_ns();
    bool enter = true;
    for (;;) {
        if (atomic_load(&d->exiting))
            break;
        /* The completions it reports may run code that changes the current
         * context: it is made current again after a round that moved. */
        if (enter)
            (void)rill__cuda_enter(d);
        uint32_t bell = atomic_load(&d->bell);
        rill__mutex_lock(&d->lock);
        size_t n = d->num_active;
        if (n > cap) {
            rill__stream **grown = rill__realloc(snap, n * sizeof *grown);
            if (grown != NULL) {
                snap = grown;
                cap = n;
            }
        }
        n = n < cap ? n : cap;
        for (size_t i = 0; i < n; i++) {
            snap[i] = d->active[i];
            rill__stream_ref(snap[i]);
        }
        rill__mutex_unlock(&d->lock);

        bool moved = false, gpu = false;
        uint64_t now = rill__now_ns();
        for (size_t i = 0; i < n; i++) {
            bool idle = false;
            moved |= service(d, snap[i], now, &gpu, &idle);
            if (idle) {
                deactivate(d, snap[i]);
                moved = true; /* the list changed: look again before sleeping */
            }
        }
        enter = moved;
        if (moved)
            last_move = now;
        else if (gpu && now - last_move > CHECK_NS) {
            for (size_t i = 0; i < n; i++)
                check_context(d, snap[i]);
            last_move = now;
        }
        for (size_t i = 0; i < n; i++)
            rill__stream_unref(snap[i]);
        if (moved) {
            idle_rounds = 0;
            continue;
        }
        if (atomic_load(&d->stop) && n == 0)
            break;
        if (gpu && ++idle_rounds < POLL_SPINS) {
            rill__cpu_relax();
            continue;
        }
        /* seq_cst: the other half of the Dekker pair in rill__cuda_ring. */
        atomic_store(&d->sleeping, 1);
        if (atomic_load(&d->bell) == bell) {
            if (gpu)
                rill__futex_wait_for(&d->bell, bell, POLL_WAIT_NS);
            else
                rill__futex_wait(&d->bell, bell);
        }
        atomic_store(&d->sleeping, 0);
    }
    rill__free(snap);
}
