/* SPDX-License-Identifier: MIT */
/* The runners of the CUDA backend (see cuda.h): threads that run what the
 * GPU cannot, once it is first in its stream (everything before it
 * completed): host functions, memsets of memory the GPU cannot set,
 * copies with pageable host memory that go through staging buffers in
 * rounds (cuda_stage.c), and graph launches with nodes the host runs,
 * whose phases (CUDA graphs, and the nodes between them) they run in
 * order (cuda_graph.c). A runner goes
 * on with its stream itself afterwards, issuing and completing what the
 * command let through and running the next such command when it comes
 * first, so that a host function is one hand-off from the thread that
 * found it ready (a submitting thread when the stream is idle, else the
 * pump). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_graph.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/status.h"

/* ------------------------------------------- host functions, host memsets */

static void run_host(cuda_stream *cs, cuda_cmd *n) {
    if (cs->failing) {
        rill__host_skipped(&n->c.u.host, n->c.flags, &cs->ls);
        return;
    }
    if (rill__host_run(n->c.u.host.fn, n->c.u.host.user_data, &cs->ls))
        rill__cuda_fail_stream(cs, n->seq, "host function", cs->ls.message);
}

/* A memset of host memory the GPU cannot write, first in its stream. */
static void run_set(cuda_stream *cs, cuda_cmd *n) {
    if (!cs->failing)
        memset(n->c.u.set.dst, n->c.u.set.value, n->c.u.set.bytes);
}

/* --------------------------------------------------------------- runners */

cuda_cmd *rill__cuda_take_job_locked(cuda_stream *cs) {
    cuda_cmd *h = cs->head;
    /* next_issue stays on a command a runner runs, so that nothing after
     * it is issued before it is done. */
    if (h == NULL || h != cs->next_issue || h->state != CUDA_QUEUED)
        return NULL;
    if (h->c.kind != RILL__CMD_HOST &&
        !(h->c.kind == RILL__CMD_GRAPH && !rill__cuda_graph_direct(h->c.u.graph.launch)) &&
        !((h->c.kind == RILL__CMD_SET || h->c.kind == RILL__CMD_COPY) && h->on_host))
        return NULL;
    /* acquire: pairs with the completer's release, after which the
     * commands before h have finished (failing is theirs until then). */
    if (atomic_load_explicit(&cs->completing, memory_order_acquire) != 0) {
        cs->job_deferred = true;
        return NULL;
    }
    rill__stream *after = h->c.kind == RILL__CMD_GRAPH ? h->c.u.graph.after_stream : NULL;
    /* A launch waits for the exec's previous one, even when skipped; a
     * stream of this device is asked to report it. */
    if (after != NULL && !rill__cuda_wait_for(h, after, h->c.u.graph.after_seq)) {
        if (rill__queue_of(after)->dev == rill__queue_of(cs->self)->dev)
            atomic_store_explicit(&cuda_stream_of(after)->want_flush, 1, memory_order_relaxed);
        return NULL;
    }
    h->state = CUDA_RUNNING;
    return h;
}

/* Runs a host function, host memset or graph launch that is first in its
 * stream, lets the stream's later work through, completes what is done and
 * returns the stream's next such command when it is first now (a runner
 * thread, no lock held). */
static cuda_cmd *run_job(cuda_device *d, cuda_cmd *n) {
    cuda_stream *cs = n->cs;
    bool settled = true;
    /* Held until the last look at cs: once its last command completes,
     * the pump may drop the stream from its list, and with it the
     * reference that kept it. */
    rill__stream *s = cs->self;
    rill__stream_ref(s);
    uint64_t t0 = rill__tracing() ? rill__trace_now() : 0;
    if (n->c.kind == RILL__CMD_HOST)
        run_host(cs, n);
    else if (n->c.kind == RILL__CMD_SET)
        run_set(cs, n);
    else if (n->c.kind == RILL__CMD_COPY)
        settled = rill__cuda_stage_run(d, cs, n);
    else if (!cs->failing) {
        char what[96], why[RILL__CAUSE_BYTES];
        settled = rill__cuda_graph_run(d, cs, n->c.u.graph.launch, n->c.u.graph.ext, &n->graph_run,
                                       what, sizeof what, why, sizeof why);
        if (what[0] != '\0')
            rill__cuda_fail_stream(cs, n->seq, what, why);
    }
    if (t0 != 0)
        rill__cuda_trace_host(cs, n, t0);
    if (atomic_load(&d->exiting))
        return NULL; /* the process exits: the driver may be gone (s stays) */
    /* A host function may have made another context current (through
     * the CUDA runtime, PyTorch): this thread is rill's own. */
    (void)rill__cuda_enter(d);
    rill__mutex_lock(&cs->lock);
    cs->next_issue = n->next;
    atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
    if (settled)
        n->state = CUDA_MET;
    else {
        n->state = CUDA_ON_GPU; /* its last nodes are on the GPU */
        cs->gpu_seq = n->seq;
    }
    /* Nobody waits to submit more behind what this issues: it is reported
     * as soon as it is done. */
    rill__cuda_issue_ready(d, cs, true);
    rill__mutex_unlock(&cs->lock);
    (void)rill__cuda_complete_done(d, cs);
    rill__mutex_lock(&cs->lock);
    cuda_cmd *next = rill__cuda_take_job_locked(cs);
    bool left = cs->head != NULL;
    rill__mutex_unlock(&cs->lock);
    /* What is left is the pump's (another completer may have been at it). */
    if (next == NULL && left)
        rill__cuda_ring(d);
    rill__stream_unref(s);
    return next;
}

static void runner_main(void *arg) {
    cuda_device *d = arg;
    (void)rill__cuda_enter(d);
    rill__thread_set_worker(1);
    rill__mutex_lock(&d->run_lock);
    for (;;) {
        while (d->jobs == NULL && !atomic_load(&d->stop)) {
            uint32_t bell = atomic_load(&d->run_bell);
            d->idle_runners++;
            rill__mutex_unlock(&d->run_lock);
            rill__futex_wait(&d->run_bell, bell);
            rill__mutex_lock(&d->run_lock);
            d->idle_runners--;
        }
        cuda_cmd *n = d->jobs;
        if (n == NULL || atomic_load(&d->exiting))
            break; /* stopping, and nothing is left, or the process exits */
        d->jobs = n->job_next;
        if (d->jobs == NULL)
            d->jobs_tail = NULL;
        rill__mutex_unlock(&d->run_lock);
        while (n != NULL)
            n = run_job(d, n);
        rill__mutex_lock(&d->run_lock);
    }
    rill__mutex_unlock(&d->run_lock);
}

/* An idle runner takes n, or a new one while there are fewer than
 * RILL__CUDA_MAX_RUNNERS (beyond that, n waits for one to finish). */
void rill__cuda_hand_over(cuda_device *d, cuda_cmd *n) {
    rill__mutex_lock(&d->run_lock);
    n->job_next = NULL;
    if (d->jobs_tail != NULL)
        d->jobs_tail->job_next = n;
    else
        d->jobs = n;
    d->jobs_tail = n;
    bool wake = d->idle_runners > 0;
    if (!wake && d->num_runners < RILL__CUDA_MAX_RUNNERS) {
        rill__thread_start(&d->runners[d->num_runners], "rill-cuda-run", runner_main, d);
        d->num_runners++;
    }
    rill__mutex_unlock(&d->run_lock);
    if (wake) {
        atomic_fetch_add(&d->run_bell, 1);
        rill__futex_wake(&d->run_bell, 1);
    }
}

void rill__cuda_runners_wake(cuda_device *d) {
    atomic_store(&d->stop, 1);
    atomic_fetch_add(&d->run_bell, 1);
    rill__futex_wake(&d->run_bell, INT32_MAX);
}

void rill__cuda_runners_stop(cuda_device *d) {
    rill__mutex_lock(&d->run_lock);
    int n = d->num_runners;
    rill__mutex_unlock(&d->run_lock);
    rill__cuda_runners_wake(d);
    for (int i = 0; i < n; i++)
        rill__thread_join(&d->runners[i]);
}
