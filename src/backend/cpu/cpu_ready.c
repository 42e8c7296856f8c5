/* SPDX-License-Identifier: MIT */
/* The CPU device's ready queue: streams that wait for a worker, one FIFO
 * per priority level under the device's ready_lock, with ready_mask's bit i
 * set while level i holds one. Workers take the greatest priority first
 * (rill__cpu_pop_ready). Whether a push wakes a worker or leaves the
 * wake-up to the watch is decided here (docs/cpu.md, "Scheduling"). Layer:
 * CPU backend. */
#include "backend/cpu/cpu_sched_internal.h"

/* The value of watch_catches + 1 when this host thread last came to wait
 * or poll for work that was not done yet (rill__cpu_host_help ran it, or
 * rill__cpu_kick saw it); 0: never. While it matches, the thread's
 * launches may leave the wake-up to the watch (see rill__cpu_push_ready): the thread
 * comes back for its work, and the watch has not had to run work that
 * nobody came for since. */
static _Thread_local uint64_t tls_comes_back_mark;

/* How long a host thread may go on submitting to a stream whose wake-up it
 * left to the watch before a worker is woken for it: longer than the few
 * launches of a request (which the thread runs itself when it waits), and
 * about what the wake-up costs the waker on a virtual machine whose idle
 * processors halt (bench_primitives p3). */
#define LEFT_WAKE_NS 20000u

RILL_HOT void rill__cpu_note_comes_back(cpu_device *d) {
    tls_comes_back_mark = atomic_load_explicit(&d->watch_catches, memory_order_relaxed) + 1;
}

/* by_host: a host thread (not a worker) made s ready.
 *
 * s may be gone as soon as it is in the ready queue: a worker can run its
 * last command and drop the last reference before this returns. So
 * nothing here touches s after the unlock; the hints for a wake-up left
 * to the watch are written before, on the guess that it will be left, and
 * stay set when it is not (then a long batch wakes one worker more, once:
 * see submitted_with_wake_left). */
RILL_HOT void rill__cpu_push_ready(cpu_device *d, rill__stream *s, bool by_host) {
    cpu_stream *cs = cpu_stream_of(s);
    int i = cpu_prio_index(s);
    bool may_leave =
        by_host &&
        tls_comes_back_mark == atomic_load_explicit(&d->watch_catches, memory_order_relaxed) + 1;
    /* relaxed: hints (see cpu_stream); the lock below publishes them with s. */
    if (may_leave) {
        atomic_store_explicit(&cs->left_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&cs->wake_left, true, memory_order_relaxed);
    } else if (atomic_load_explicit(&cs->wake_left, memory_order_relaxed)) {
        atomic_store_explicit(&cs->wake_left, false, memory_order_relaxed);
    }
    rill__spinlock_lock(&d->ready_lock);
    cs->ready_next = NULL;
    if (d->ready_tail[i] != NULL)
        cpu_stream_of(d->ready_tail[i])->ready_next = s;
    else
        d->ready_head[i] = s;
    d->ready_tail[i] = s;
    atomic_fetch_or(&d->ready_mask, 1u << i);
    rill__spinlock_unlock(&d->ready_lock);
    /* A host thread that came back for its work last time will likely
     * wait for this too, and run it then: while a worker watches (naps,
     * cpu_worker.c), waking another would cost this thread a futex wake of
     * a halted processor, and the woken worker could take this thread's
     * processor. The watch runs the work within a nap when nobody waits for
     * it. seq_cst load of watching: a Dekker pair with the watch, which
     * stores 0 there and then loads ready_mask; we set ready_mask (the
     * seq_cst fetch_or above) and then load watching. */
    if (may_leave && atomic_load(&d->watching)) {
        /* relaxed: a hint for the watch. */
        atomic_store_explicit(&d->left_to_watch, 1, memory_order_relaxed);
        return;
    }
    rill__cpu_wake_workers(d, 1);
}

/* A submit to a stream whose wake-up was left to the watch: the first one
 * notes the time; one LEFT_WAKE_NS later wakes a worker, once. A thread
 * that comes back within that time (a request of a few launches, then a
 * wait) runs the work itself and pays no wake-up; one that goes on
 * submitting (a batch of many launches) has its work start while it does,
 * for the price of one. */
void rill__cpu_submitted_with_wake_left(rill__stream *s, cpu_stream *cs) {
    uint64_t now = rill__now_ns();
    /* relaxed: hints. */
    uint64_t since = atomic_load_explicit(&cs->left_ns, memory_order_relaxed);
    if (since == 0) {
        atomic_store_explicit(&cs->left_ns, now, memory_order_relaxed);
        return;
    }
    if (now - since >= LEFT_WAKE_NS &&
        atomic_exchange_explicit(&cs->wake_left, false, memory_order_relaxed))
        rill__cpu_wake_workers(cpu_device_of(rill__queue_of(s)->dev), 1);
}

rill__stream *rill__cpu_pop_ready(cpu_device *d) {
    /* relaxed: a hint; the lock below orders the queue itself. */
    if (atomic_load_explicit(&d->ready_mask, memory_order_relaxed) == 0)
        return NULL;
    rill__spinlock_lock(&d->ready_lock);
    uint32_t mask = atomic_load_explicit(&d->ready_mask, memory_order_relaxed);
    rill__stream *s = NULL;
    if (mask != 0) {
        int i = __builtin_ctz(mask);
        s = d->ready_head[i];
        d->ready_head[i] = cpu_stream_of(s)->ready_next;
        if (d->ready_head[i] == NULL) {
            d->ready_tail[i] = NULL;
            mask = atomic_fetch_and(&d->ready_mask, ~(1u << i)) & ~(1u << i);
        }
    }
    rill__spinlock_unlock(&d->ready_lock);
    /* More streams wait: a push that left its wake-up to the watch woke
     * nobody for them (rill__cpu_push_ready), so wake a sleeper, who does the same. */
    if (mask != 0)
        rill__cpu_wake_workers(d, 1);
    return s;
}

/* ------------------------------------------------------ for host threads */

/* Takes s off the ready queue, where it waits for a worker; false when it
 * is not there (a worker took it, or it is about to be pushed). */
RILL_HOT bool rill__cpu_take_ready(cpu_device *d, rill__stream *s) {
    cpu_stream *cs = cpu_stream_of(s);
    int i = cpu_prio_index(s);
    bool taken = false;
    rill__spinlock_lock(&d->ready_lock);
    rill__stream *prev = NULL;
    for (rill__stream *t = d->ready_head[i]; t != NULL; t = cpu_stream_of(t)->ready_next) {
        if (t != s) {
            prev = t;
            continue;
        }
        if (prev != NULL)
            cpu_stream_of(prev)->ready_next = cs->ready_next;
        else
            d->ready_head[i] = cs->ready_next;
        if (d->ready_tail[i] == s)
            d->ready_tail[i] = prev;
        if (d->ready_head[i] == NULL)
            atomic_fetch_and(&d->ready_mask, ~(1u << i));
        taken = true;
        break;
    }
    rill__spinlock_unlock(&d->ready_lock);
    /* Other streams wait, maybe left to the watch by this thread's other
     * launches: they get a worker now (as in rill__cpu_pop_ready). */
    if (taken && atomic_load(&d->ready_mask) != 0)
        rill__cpu_wake_workers(d, 1);
    return taken;
}

RILL_HOT void rill__cpu_kick(rill__stream *s) {
    cpu_device *d = cpu_device_of(rill__queue_of(s)->dev);
    /* The thread came back for work that is not done yet. */
    rill__cpu_note_comes_back(d);
    /* seq_cst load: a stale zero only delays the work until the watch's
     * next nap ends. */
    if (atomic_load(&d->ready_mask) != 0)
        rill__cpu_wake_workers(d, 1);
}
