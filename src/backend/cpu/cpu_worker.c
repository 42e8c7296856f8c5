/* SPDX-License-Identifier: MIT */
/* The CPU device's worker threads: their loop, how an idle worker waits (a
 * bounded spin, then a futex sleep), and the watch: for WATCH_WINDOW_NS
 * after the device was last busy one idle worker naps instead of
 * sleeping, so that a launch from a thread that comes back for its work
 * wakes no one (docs/cpu.md, "Idle and busy"). Invariant: units held by
 * awake workers + units borrowed + free units = num_workers. */
#include <stdio.h>

#include "backend/cpu/cpu.h"

/* Idle workers spin this long before sleeping: a steady flow of work never
 * pays a wake-up, and an idle process stops using the CPU within a tenth
 * of a millisecond. They do not sched_yield: on a machine shared with busy
 * processes a yield gives away a whole time slice. */
#define IDLE_SPIN_NS 100000u

/* The watch's nap, and how long after the device was last busy it keeps
 * watching: more than the pauses of a program that serves requests a few
 * milliseconds apart. */
#define WATCH_NAP_NS    4000000u
#define WATCH_WINDOW_NS 50000000u

/* Idle workers sleep at most this long while a graph launch runs, so that
 * nodes its publisher did not wake anyone for (cpu_graph.c) find a worker
 * even while the publisher runs a long node; the nap doubles, up to 32
 * times, while naps find nothing. */
#define GRAPH_NAP_NS 50000u

/* After a sleep: a worker that the system woke on the processor of the
 * thread that woke it takes that thread's processor (the waker goes on
 * only when the worker sleeps again). It then runs what it finds but does
 * not spin for more. */
static void woken_here(cpu_device *d) {
    /* relaxed: a hint. */
    if (rill__cpu_current() == atomic_load_explicit(&d->waker_cpu, memory_order_relaxed))
        rill__cpu_leave_processor();
}

/* Takes a unit for a worker that has just woken up, sleeping while every
 * free unit is borrowed. False when the device stops meanwhile. */
static bool wait_for_unit(cpu_device *d, cpu_worker *w) {
    for (;;) {
        if ((w->unit = rill__cpu_unit_take(d)) >= 0)
            return true;
        if (atomic_load(&d->stop))
            return false;
        /* A Dekker pair with rill__cpu_unit_put: waiters up, then the bits
         * again; there, the bit set, then waiters loaded. */
        uint32_t gen = atomic_load(&d->work_gen);
        atomic_fetch_add(&d->unit_waiters, 1);
        atomic_fetch_add(&d->sleepers, 1);
        w->unit = rill__cpu_unit_take(d);
        if (w->unit < 0 && !atomic_load(&d->stop)) {
            rill__futex_wait(&d->work_gen, gen);
            woken_here(d);
        }
        atomic_fetch_sub(&d->sleepers, 1);
        atomic_fetch_sub(&d->unit_waiters, 1);
        if (w->unit >= 0)
            return true;
    }
}

/* ------------------------------------------------------------ idle waits */

/* Whether a host thread is asleep in a wait for the device's work. */
static bool host_asleep(cpu_device *d) {
    /* relaxed: a hint. */
    return atomic_load_explicit(&rill__device_base_of(d->dev)->hosts_asleep, memory_order_relaxed) >
           0;
}

/* True when an idle worker may spin: a processor is left over after the
 * busy workers, the workers already spinning, and one for the threads that
 * submit work, unless such a thread sleeps until the work is done.
 * Spinning on a processor that a submitting thread needs would slow the
 * very submissions it waits for. */
static int may_spin(cpu_device *d, bool *on_host_cpu) {
    /* relaxed: a hint. */
    int busy = d->num_workers - atomic_load_explicit(&d->idle, memory_order_relaxed);
    int spinning = atomic_load_explicit(&d->spinning, memory_order_relaxed);
    if (busy + spinning + 1 < d->num_cpus) {
        *on_host_cpu = false;
        return true;
    }
    *on_host_cpu = busy + spinning < d->num_cpus && host_asleep(d);
    return *on_host_cpu;
}

/* Spins for work while that is worth a processor; true when work came. A
 * spin on the processor of a sleeping host thread ends when it wakes. */
static bool spin_for_work(cpu_device *d) {
    bool spin = !rill__cpu_leaving_processor() && !rill__stream_took_host_wake();
    rill__cpu_stay_on_processor();
    bool on_host_cpu;
    if (!spin || !may_spin(d, &on_host_cpu))
        return false;
    uint64_t start = rill__now_ns();
    atomic_fetch_add_explicit(&d->spinning, 1, memory_order_relaxed);
    bool found = false;
    for (unsigned spins = 1;; spins++) {
        if (rill__cpu_has_work(d)) {
            found = true;
            break;
        }
        rill__cpu_relax();
        if ((spins & 63u) == 0 &&
            (rill__now_ns() - start > IDLE_SPIN_NS || (on_host_cpu && !host_asleep(d))))
            break;
    }
    atomic_fetch_sub_explicit(&d->spinning, 1, memory_order_relaxed);
    return found;
}

/* Naps as the watch until work comes or the window passes. Returns true
 * when there is work (the watch is over either way). */
static bool watch(cpu_device *d) {
    uint64_t last_busy = rill__now_ns();
    bool woken_by_call = true;
    for (;;) {
        uint32_t gen = atomic_load(&d->work_gen);
        atomic_fetch_add(&d->sleepers, 1);
        if (!rill__cpu_has_work(d))
            rill__futex_wait_for(&d->work_gen, gen, WATCH_NAP_NS);
        atomic_fetch_sub(&d->sleepers, 1);
        if (rill__cpu_has_work(d)) {
            /* Woken (work_gen moved), or the nap ended: then the watch
             * caught work that nobody came for. */
            woken_by_call = atomic_load(&d->work_gen) != gen;
            woken_here(d);
            break;
        }
        /* relaxed: a hint, set by host threads that left work to us (and
         * ran it themselves meanwhile): the device was busy. */
        uint64_t now = rill__now_ns();
        if (atomic_exchange_explicit(&d->left_to_watch, 0, memory_order_relaxed))
            last_busy = now;
        if (now - last_busy > WATCH_WINDOW_NS)
            break;
    }
    /* seq_cst: the other half of the Dekker pair in rill__cpu_push_ready:
     * a host thread that saw watching set before this store left work that
     * the load of ready_mask in has_work below sees. */
    atomic_store(&d->watching, 0);
    if (!rill__cpu_has_work(d))
        return false;
    /* Work that a host thread left to the watch: its guess that it would
     * come back for the work was wrong. (Streams that others left too get
     * a worker each as the workers take them: rill__cpu_pop_ready.) */
    if (!woken_by_call && atomic_load_explicit(&d->ready_mask, memory_order_relaxed) != 0)
        atomic_fetch_add_explicit(&d->watch_catches, 1, memory_order_relaxed);
    return true;
}

/* Sleeps until woken. The worker's unit is free meanwhile, for a host
 * thread to borrow; the caller takes one again before it runs anything.
 * The first worker to go idle after the device was busy keeps watch. */
static void sleep_for_work(cpu_device *d, cpu_worker *w) {
    rill__cpu_unit_release(d, w->unit);
    w->unit = -1;
    int idle = 0;
    /* relaxed: graph runs nap their own way (below). */
    if (atomic_load_explicit(&d->num_graph_runs, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong(&d->watching, &idle, 1) && watch(d))
        return;
    uint32_t gen = atomic_load(&d->work_gen);
    atomic_fetch_add(&d->sleepers, 1);
    if (!rill__cpu_has_work(d)) {
        if (atomic_load_explicit(&d->num_graph_runs, memory_order_relaxed) > 0) {
            unsigned shift = w->naps < 5 ? w->naps : 5;
            w->naps++;
            rill__futex_wait_for(&d->work_gen, gen, (uint64_t)GRAPH_NAP_NS << shift);
        } else {
            w->naps = 0;
            rill__futex_wait(&d->work_gen, gen);
        }
        woken_here(d);
    }
    atomic_fetch_sub(&d->sleepers, 1);
}

static void idle_wait(cpu_device *d, cpu_worker *w) {
    atomic_fetch_add_explicit(&d->idle, 1, memory_order_relaxed);
    if (!spin_for_work(d))
        sleep_for_work(d, w);
    atomic_fetch_sub_explicit(&d->idle, 1, memory_order_relaxed);
}

static void worker_main(void *arg) {
    cpu_worker *w = arg;
    cpu_device *d = w->d;
    rill__thread_set_worker(1);
    /* Several devices split the processors: a device's workers stay on
     * its own (its NUMA node's, when there is a device per node). */
    if (d->pinned)
        (void)rill__thread_pin(d->cpus, d->num_cpus);
    else if (d->pin_each) /* RILL_CPU_PIN=1: a processor of its own */
        (void)rill__thread_pin(&d->cpus[w->index], 1);
    w->forks = atomic_load_explicit(&rill__fork_count, memory_order_relaxed);
    for (;;) {
        if (w->unit < 0 && !wait_for_unit(d, w))
            return;
        rill__stream *s = rill__cpu_pop_ready(d);
        if (s != NULL) {
            rill__cpu_run_stream(d, w, s);
            continue;
        }
        if (rill__cpu_help_launch(d, w))
            continue;
        cpu_cmd *ran = NULL;
        if (rill__cpu_help_graph(d, w, &ran)) {
            if (ran != NULL) /* this worker ran the launch's last node */
                rill__cpu_resume_stream(d, w, ran->stream, ran);
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
        int ordinal = rill__device_base_of(d->dev)->info.ordinal;
        if (ordinal == 0)
            snprintf(name, sizeof name, "rill-cpu-%d", i);
        else
            snprintf(name, sizeof name, "rill-cpu%d-%d", ordinal, i);
        d->workers[i].d = d;
        d->workers[i].index = i;
        d->workers[i].unit = i; /* every unit starts held: free_units is all zero */
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
