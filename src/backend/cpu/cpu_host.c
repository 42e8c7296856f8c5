/* SPDX-License-Identifier: MIT */
/* Host threads that help: a thread that waits for its stream's work runs
 * it itself, with the compute unit of a sleeping worker, when the stream
 * waits in the ready queue or a kernel or graph launch of it has work left
 * (rill__cpu_host_help, the backend's host_help). While it holds the unit,
 * no other thread runs blocks as that unit; it gives the unit back before
 * it hands the stream back. Layer: CPU backend. */
#include "backend/cpu/cpu_sched_internal.h"

/* Runs s's commands on a host thread until s has completed seq. Returns
 * whether the thread still owns s: false when s parked on a wait or a
 * worker took it over (it finished the last block of a kernel). */
RILL_HOT static bool host_run(cpu_device *d, cpu_worker *w, rill__stream *s, uint64_t seq) {
    cpu_stream *cs = cpu_stream_of(s);
    atomic_store_explicit(&cs->state, CPU_RUNNING, memory_order_relaxed);
    /* relaxed: the owner wrote done_seq. */
    while (atomic_load_explicit(&rill__queue_of(s)->done_seq, memory_order_relaxed) < seq) {
        cpu_cmd *c = cpu_peek(cs);
        if (c == NULL)
            break; /* the awaited command is not published yet */
        if (rill__cpu_exec(d, w, s, c) != EXEC_DONE)
            return false;
        rill__cpu_finish(s, c);
    }
    return true;
}

/* Hands a stream that a host thread ran back to the device: idle when its
 * queue is empty, else ready for a worker. */
RILL_HOT static void give_back(cpu_device *d, rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    if (cpu_peek(cs) == NULL && rill__cpu_go_idle(s, cs))
        return;
    atomic_store_explicit(&cs->state, CPU_READY, memory_order_relaxed);
    rill__cpu_push_ready(d, s, true);
}

/* Runs blocks of a published launch of s: 0 when there is none, 1 when it
 * ran some, 2 when it ran the last one and so completed the command and
 * took the stream over, as a worker does. */
static int host_help_launch(cpu_device *d, cpu_worker *w, rill__stream *s) {
    /* relaxed: a hint; the lock decides. */
    if (atomic_load_explicit(&d->num_launches, memory_order_relaxed) == 0)
        return 0;
    rill__mutex_lock(&d->launch_lock);
    cpu_cmd *c = NULL;
    for (rill__link *l = d->launches; l != NULL && c == NULL; l = l->next)
        if (RILL__OWNER(l, cpu_cmd, pub.link)->stream == s)
            c = RILL__OWNER(l, cpu_cmd, pub.link);
    if (c != NULL)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    rill__mutex_unlock(&d->launch_lock);
    if (c == NULL)
        return 0;
    rill__cpu_help_chunks(d, w, c);
    rill__cpu_unlist(d, c);
    /* acq_rel: the last one out sees every block's writes. */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return 1;
    rill__cpu_kernel_done(c);
    rill__cpu_finish(s, c);
    return 2;
}

/* Makes the calling host thread a worker with the unit of a sleeping
 * worker: while it holds the unit, no other thread runs blocks as that
 * compute unit. False when no unit is free. */
static bool borrow_unit(cpu_device *d, cpu_worker *w) {
    *w = (cpu_worker){.d = d, .index = -1, .unit = rill__cpu_unit_take(d)};
    if (w->unit < 0)
        return false;
    w->forks = atomic_load_explicit(&rill__fork_count, memory_order_relaxed);
    rill__thread_enter_worker();
    return true;
}

/* The thread is a host thread again; the unit goes back before the caller
 * gives the stream back, so that a worker woken for the stream's later
 * work finds it free. */
static void return_unit(cpu_device *d, cpu_worker *w) {
    rill__thread_leave_worker();
    rill__cpu_unit_put(d, w->unit);
}

RILL_HOT bool rill__cpu_run_small(rill__stream *s, uint64_t seq) {
    cpu_device *d = cpu_device_of(rill__queue_of(s)->dev);
    /* Only when the small kernel is next: another thread's command, queued
     * before it meanwhile, may be long. */
    cpu_cmd *c = cpu_peek(cpu_stream_of(s));
    cpu_worker w;
    if (c == NULL || c->seq != seq || !rill__cpu_unit_any_free(d) || !borrow_unit(d, &w))
        return false;
    bool owned = host_run(d, &w, s, seq);
    return_unit(d, &w);
    if (owned)
        give_back(d, s);
    return true;
}

RILL_HOT bool rill__cpu_host_help(rill__stream *s, uint64_t seq) {
    cpu_device *d = cpu_device_of(rill__queue_of(s)->dev);
    cpu_stream *cs = cpu_stream_of(s);
    /* relaxed: hints; the ready lock and the launch lock decide. */
    bool ready = atomic_load_explicit(&cs->state, memory_order_relaxed) == CPU_READY;
    if ((!ready && atomic_load_explicit(&d->num_launches, memory_order_relaxed) == 0 &&
         atomic_load_explicit(&d->graph_work, memory_order_relaxed) <= 0) ||
        !rill__cpu_unit_any_free(d))
        return false;
    cpu_worker w;
    if (!borrow_unit(d, &w))
        return false;
    bool ran = false, owned = false;
    if (ready && rill__cpu_take_ready(d, s)) {
        ran = true;
        rill__cpu_note_comes_back(d);
        owned = host_run(d, &w, s, seq);
    } else {
        int r = host_help_launch(d, &w, s);
        cpu_cmd *done = NULL;
        if (r == 0 && (r = rill__cpu_host_help_graph(d, &w, s, &done)) == 2)
            rill__cpu_finish(s, done);
        ran = r != 0;
        owned = r == 2 && host_run(d, &w, s, seq);
    }
    return_unit(d, &w);
    if (owned)
        give_back(d, s);
    (void)rill__stream_took_host_wake(); /* a hint for workers, not for us */
    return ran;
}
