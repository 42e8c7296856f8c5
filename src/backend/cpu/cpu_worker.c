/* SPDX-License-Identifier: MIT */
/* The CPU device's worker threads: their compute units, how an idle worker
 * waits (a bounded spin, then a futex sleep) and how others wake it.
 *
 * Compute units are what rill_block_ctx.worker names: 0 .. num_workers-1.
 * Bit u of free_units is set while no thread holds unit u. A worker holds
 * one from the moment it wakes until it goes to sleep; a host thread that
 * runs work while it waits (cpu_sched.c, rill__cpu_host_help) borrows a
 * free one, the unit of a sleeping worker, for that time. Every block runs
 * on a thread that holds a unit, and a unit changes hands through a
 * release and an acquire of its bit, so the blocks that run at once have
 * different units:
 *     units held by awake workers + units borrowed + free units = num_workers.
 * A worker that wakes while every free unit is borrowed waits for one as a
 * sleeper (unit_waiters), and whoever puts a unit back wakes a sleeper when
 * there is work for it. */
#include <stdio.h>

#include "backend/cpu/cpu.h"
#include "core/stream.h"

/* Idle workers spin this long before sleeping: a steady flow of work never
 * pays a wake-up, and an idle process stops using the CPU within a tenth
 * of a millisecond. They do not sched_yield: on a machine shared with busy
 * processes a yield gives away a whole time slice. */
#define IDLE_SPIN_NS 100000u

/* Idle workers sleep at most this long while a graph launch runs, so that
 * nodes its publisher did not wake anyone for (cpu_graph.c) find a worker
 * even while the publisher runs a long node; the nap doubles, up to 32
 * times, while naps find nothing. */
#define GRAPH_NAP_NS 50000u

/* Set when this worker woke a sleeping host thread and has nothing left to
 * run: it sleeps at once instead of spinning, so that the woken thread
 * gets a processor without waiting for an idle one to wake up. */
static _Thread_local bool leave_cpu;

void rill__cpu_leave_processor(void) {
    leave_cpu = true;
}

void rill__cpu_wake_workers(cpu_device *d, int count) {
    /* seq_cst load: a Dekker pair with the sleepers increment in
     * idle_wait, which is followed by a seq_cst load of the work state. */
    if (atomic_load(&d->sleepers) > 0) {
        atomic_fetch_add(&d->work_gen, 1);
        rill__futex_wake(&d->work_gen, count);
    }
}

static int has_work(cpu_device *d) {
    return atomic_load(&d->ready_mask) != 0 || atomic_load(&d->num_launches) != 0 ||
           atomic_load(&d->graph_work) > 0 || atomic_load(&d->stop);
}

/* ---------------------------------------------------------- compute units */

int rill__cpu_unit_take(cpu_device *d) {
    int words = (d->num_workers + 63) / 64;
    for (int i = 0; i < words; i++) {
        /* seq_cst: a Dekker pair with unit_put's seq_cst store of the bit
         * and load of unit_waiters (see wait_for_unit). */
        uint64_t v = atomic_load(&d->free_units[i]);
        while (v != 0) {
            uint64_t bit = v & (~v + 1);
            /* seq_cst, an acquire: pairs with the release in
             * rill__cpu_unit_put, so the previous holder's blocks happen
             * before ours. */
            if (atomic_compare_exchange_weak(&d->free_units[i], &v, v & ~bit))
                return i * 64 + __builtin_ctzll(bit);
        }
    }
    return -1;
}

static void unit_put(cpu_device *d, int unit) {
    /* seq_cst, a release: see rill__cpu_unit_take. */
    atomic_fetch_or(&d->free_units[unit / 64], (uint64_t)1 << (unit % 64));
}

void rill__cpu_unit_put(cpu_device *d, int unit) {
    unit_put(d, unit);
    /* seq_cst: the other half of the pair in wait_for_unit. A worker that
     * waits for a unit is needed only when there is work to do. */
    if (atomic_load(&d->unit_waiters) > 0 && has_work(d))
        rill__cpu_wake_workers(d, 1);
}

bool rill__cpu_unit_any_free(cpu_device *d) {
    int words = (d->num_workers + 63) / 64;
    for (int i = 0; i < words; i++)
        /* relaxed: a hint; rill__cpu_unit_take decides. */
        if (atomic_load_explicit(&d->free_units[i], memory_order_relaxed) != 0)
            return true;
    return false;
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
        if (w->unit < 0 && !atomic_load(&d->stop))
            rill__futex_wait(&d->work_gen, gen);
        atomic_fetch_sub(&d->sleepers, 1);
        atomic_fetch_sub(&d->unit_waiters, 1);
        if (w->unit >= 0)
            return true;
    }
}

/* ------------------------------------------------------------ idle waits */

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

/* Spins for work while that is worth a processor; true when work came. */
static bool spin_for_work(cpu_device *d) {
    bool spin = !leave_cpu && !rill__stream_took_host_wake();
    leave_cpu = false;
    if (!spin || !may_spin(d))
        return false;
    uint64_t start = rill__now_ns();
    atomic_fetch_add_explicit(&d->spinning, 1, memory_order_relaxed);
    bool found = false;
    for (unsigned spins = 1;; spins++) {
        if (has_work(d)) {
            found = true;
            break;
        }
        rill__cpu_relax();
        if ((spins & 63u) == 0 && rill__now_ns() - start > IDLE_SPIN_NS)
            break;
    }
    atomic_fetch_sub_explicit(&d->spinning, 1, memory_order_relaxed);
    return found;
}

/* Sleeps until woken. The worker's unit is free meanwhile, for a host
 * thread to borrow; the caller takes one again before it runs anything. */
static void sleep_for_work(cpu_device *d, cpu_worker *w) {
    unit_put(d, w->unit);
    w->unit = -1;
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
