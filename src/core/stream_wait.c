/* SPDX-License-Identifier: MIT */
/* Host waits on a stream (part of the core's streams, stream.h): until a
 * sequence number completes, with a deadline, and the status of the wait.
 *
 * A host wait (default events and streams) first runs the awaited work
 * itself when the backend lets it (host_help), then spins briefly, then
 * sleeps; blocking-sync events sleep at once. A sleeping host thread is a
 * waiter like a parked stream, with a futex word of its own that the
 * completing thread sets and wakes. Waiters publish the least sequence
 * number they await (waiter_min), so a completion that nobody awaits costs
 * an atomic exchange, a load and a compare, and never a system call or a
 * lock. */
#include <stdio.h>

#include "core/calls.h"
#include "core/stream.h"
#include "util/status.h"

/* How long a default (non-blocking) host wait spins before it sleeps:
 * work that completes within this window wakes the host in well under a
 * microsecond; longer waits cost no CPU. There is no sched_yield phase: on
 * a machine shared with busy processes a yield gives away a whole time
 * slice, turning a microsecond wait into a millisecond one. */
#define SPIN_NS 60000u

static _Thread_local bool woke_host;

RILL_HOT bool rill__stream_took_host_wake(void) {
    bool w = woke_host;
    woke_host = false;
    return w;
}

/* ------------------------------------------------------------ host waits */

/* A host thread asleep in rill__stream_host_wait: a waiter of the stream
 * with a futex word of its own, so that the thread that completes the
 * awaited number wakes exactly this thread, with one futex wake. */
typedef struct host_waiter {
    rill__waiter w; /* first: wake_host casts back */
    _Atomic uint32_t woken;
} host_waiter;

static void wake_host(rill__waiter *w) {
    _Atomic uint32_t *word = &((host_waiter *)w)->woken;
    /* release: pairs with the acquire load in sleep_until. From this store
     * on the sleeper may return and its stack frame go: only the word's
     * address is used after it, for the wake, and a wake that reaches a
     * later user of that address is a spurious one, which every futex
     * waiter allows. */
    atomic_store_explicit(word, 1, memory_order_release);
    rill__futex_wake(word, 1);
    woke_host = true;
}

static void drop_held(void *s) {
    rill__stream_unref(s);
}

/* Parks the calling thread's call for a sleep on s (flags: see
 * RILL__WAIT_PARKS); NULL when it does not park. */
static rill__call_rec *park(rill__stream *s, unsigned flags) {
    if (flags & RILL__WAIT_PARKS)
        return rill__call_park(NULL, NULL);
    if (!(flags & RILL__WAIT_PARKS_HOLDING))
        return NULL;
    /* The call's scope keeps s whole until the park: this is not its last
     * reference, and neither is the one dropped below. */
    rill__stream_ref(s);
    rill__call_rec *r = rill__call_park(s, drop_held);
    if (r == NULL)
        rill__stream_unref(s);
    return r;
}

/* Sleeps until s completes seq: one futex wait, woken by the completer.
 * With a deadline (not UINT64_MAX), false when it passed first: the
 * waiter is off the list again, so that nothing touches this frame. */
static bool sleep_until(rill__stream *s, uint64_t seq, unsigned flags, uint64_t deadline_ns) {
    host_waiter h = {.w = {.seq = seq, .fn = wake_host}};
    atomic_init(&h.woken, 0);
    if (!rill__stream_add_waiter(s, &h.w))
        return true;
    rill__call_rec *parked = park(s, flags);
    _Atomic int *asleep = rill__thread_is_worker() ? NULL : &s->q.dev->base.hosts_asleep;
    if (asleep != NULL)
        atomic_fetch_add_explicit(asleep, 1, memory_order_relaxed);
    bool done = true;
    while (!atomic_load_explicit(&h.woken, memory_order_acquire)) {
        if (deadline_ns == UINT64_MAX) {
            rill__futex_wait(&h.woken, 0);
            continue;
        }
        uint64_t now = rill__now_ns();
        if (now < deadline_ns) {
            rill__futex_wait_for(&h.woken, 0, deadline_ns - now);
            continue;
        }
        if (rill__stream_remove_waiter(s, &h.w)) {
            done = false;
            break;
        }
        /* A completer holds the waiter: its store of the word comes soon,
         * and this frame must live until then. */
        while (!atomic_load_explicit(&h.woken, memory_order_acquire))
            rill__futex_wait(&h.woken, 0);
    }
    if (asleep != NULL)
        atomic_fetch_sub_explicit(asleep, 1, memory_order_relaxed);
    rill__call_unpark(parked);
    return done;
}

/* Runs what the backend lets this thread run of s's work up to seq; true
 * when seq is then reached. */
RILL_HOT static bool help(rill__stream *s, uint64_t seq) {
    while (s->q.dev->ops->host_help(s, seq))
        if (rill__stream_reached(s, seq))
            return true;
    return false;
}

RILL_HOT bool rill__stream_host_wait_until(rill__stream *s, uint64_t seq, unsigned flags,
                                           uint64_t deadline_ns) {
    bool blocking = (flags & RILL__WAIT_BLOCKING) != 0;
    if (rill__stream_reached(s, seq))
        return true;
    /* A host thread that waits for work that no worker has taken runs it
     * itself: that costs what running it costs, where waking a sleeping
     * worker costs what the system charges for a wake-up. Workers (and
     * host threads running work as workers) never do. A wait with a
     * deadline must return by then whatever the work does, so it runs
     * none while s has work pending that may wait for anything (a host
     * function may never return); kernels, copies and waits for such
     * work end on their own. */
    bool helps = !blocking && s->q.dev->ops->host_help != NULL && !rill__thread_is_worker() &&
                 (deadline_ns == UINT64_MAX || !rill__stream_opaque_pending(s));
    if (helps && help(s, seq))
        return true;
    /* What this thread does not run needs a worker. */
    if (s->q.dev->ops->kick != NULL)
        s->q.dev->ops->kick(s);
    if (!blocking) {
        uint64_t until = rill__now_ns() + SPIN_NS;
        if (until > deadline_ns)
            until = deadline_ns;
        for (unsigned spins = 1;; spins++) {
            if (rill__stream_reached(s, seq))
                return true;
            rill__cpu_relax();
            if ((spins & 63u) != 0)
                continue;
            /* The stream may have become ready meanwhile (its wait was
             * met), or a kernel of it may have blocks to hand out. */
            if (helps && help(s, seq))
                return true;
            if (rill__now_ns() > until)
                break;
        }
    }
    return sleep_until(s, seq, flags, deadline_ns);
}

RILL_HOT void rill__stream_host_wait(rill__stream *s, uint64_t seq, unsigned flags) {
    (void)rill__stream_host_wait_until(s, seq, flags, UINT64_MAX);
}

RILL_HOT rill_status rill__stream_wait_status(rill__stream *s, uint64_t seq, unsigned flags,
                                              uint64_t deadline_ns, const char *fn) {
    char msg[RILL__ERROR_BYTES];
    if (!rill__stream_host_wait_until(s, seq, flags, deadline_ns))
        return RILL_NOT_READY;
    if (rill__san_active())
        rill__san()->observed(s, seq, false);
    rill_status st = rill__stream_check_lost(s, fn);
    if (st != RILL_OK)
        return st;
    if (rill__stream_failed_at(s, seq, msg, sizeof msg))
        return rill__fail(RILL_ERROR_KERNEL_FAILED, "%s: %s", fn, msg);
    return RILL_OK;
}

uint64_t rill__deadline_after(uint64_t timeout_ns) {
    uint64_t now = rill__now_ns();
    return timeout_ns >= UINT64_MAX - now ? UINT64_MAX - 1 : now + timeout_ns;
}
