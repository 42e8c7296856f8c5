/* SPDX-License-Identifier: MIT */
/* Calls in flight, and the objects they may still use.
 *
 * A public call looks its handles up (core/handle.h) and then uses the
 * objects without holding a reference: a reference per call would cost two
 * locked instructions per handle on every launch. So an object must not go
 * while a call that found it before its handle closed is still running,
 * even when another thread destroys it meanwhile. Every public call that
 * reaches the runtime runs inside RILL_CALL_SCOPE(), which marks the
 * calling thread as in a call (rill_shutdown waits for such calls too: see
 * rill__call_quiesce below); a destroy closes the handle and then hands the
 * owner's reference to rill__retire, which drops it (release) at once when
 * no other thread has made calls, and otherwise once each such thread is
 * seen out of the calls that may have found it. A call that races with the
 * destruction of its handle thus either finds the handle closed
 * (RILL_ERROR_INVALID_ARGUMENT) or works on an object that is still whole,
 * as if it came before the destroy; the object's own references keep it
 * for work that the call submitted.
 *
 * Each thread that makes a call has a record whose state counts its calls:
 * odd while it is in one (the outermost, for nested calls). Entering stores
 * the odd value and then, through a light barrier, looks handles up.
 * Retiring closes the handle and lists the other threads that have
 * records; each listed thread is owed the object's release until it is
 * seen out of any call that may have found the object, in one of two ways:
 *
 *   - it checks in: leaving its next outermost call (or exiting), it finds
 *     entries owed by it and, under the limbo's lock, a full barrier of its
 *     own, marks itself out of them. Its later calls find the handle
 *     closed. This costs the thread nothing until it owes something. A
 *     batched entry it completes is released by the next retire, on the
 *     thread that destroys, or by a barrier's reading.
 *   - a heavy barrier (platform/thread.h) after the retire, then a read of
 *     its state: even, it is in no call that found the object; odd, it
 *     checks in when that call ends.
 *
 * The heavy barrier is a membarrier system call (microseconds; tens, and an
 * interrupt of every other processor running the process, on some virtual
 * machines), so batched retires share one: it is issued once their limbo
 * holds RILL__LIMBO_BATCH entries or its oldest is RILL__LIMBO_AGE_NS old,
 * for the threads that have made calls but make none now. Prompt retires
 * (objects whose release returns memory the program may allocate next)
 * issue it at once. A destroy made by a kernel or host function counts its
 * own thread's call too: that thread may be running the work while it
 * waits in a call on the same object. Leaving a call stores the next even
 * value (release), so whoever sees it sees the call's last use of the
 * object. Records are never freed; a thread that exits leaves its record
 * to the next new thread. A program whose other threads never made a call
 * releases at once, without a barrier.
 *
 * A call that sleeps for long (a synchronize whose work takes seconds)
 * would hold back every object destroyed meanwhile, so it parks for the
 * sleep (rill__call_park): it promises to use, until it returns, no object
 * that it found through a handle without holding a reference of its own,
 * and then retires need not wait for it. A parked call is still in flight
 * for rill_shutdown, which waits for it as for any other. */
#ifndef RILL_CORE_CALLS_H
#define RILL_CORE_CALLS_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/thread.h"

typedef void (*rill__release_fn)(void *obj);

/* Lines of its own: its thread writes state twice per call, and sharing a
 * line with what a worker uses would make every call a cache miss. owed,
 * which retiring threads write and its thread reads as it leaves a call,
 * is on the next line, so that they do not take state's line from a
 * thread that is calling. */
typedef struct rill__call_rec {
    alignas(64) _Atomic uint64_t state; /* calls entered and left; odd while in one */
    _Atomic int taken;                  /* a live thread owns the record */
    _Atomic int parked;                 /* 1 while its call sleeps parked; its thread writes it */
    /* its thread's own: what its call holds for as long as it runs (set by
     * rill__call_park), released by hold_release as the call leaves */
    void *hold;
    rill__release_fn hold_release;
    struct rill__call_rec *next;       /* the registry, newest first; never unlinked */
    alignas(64) _Atomic uint32_t owed; /* limbo entries waiting for it to check in */
    _Atomic uint64_t shutdown_waits;   /* the call a rill_shutdown waited for (odd) */
    _Atomic uint64_t init_waits;       /* the call that waits for the init lock (odd) */
    uint64_t checked_upto; /* limbo_lock: its last check-in saw the entries up to this id */
} rill__call_rec;

/* The calling thread's record (NULL until its first call). */
extern _Thread_local rill__call_rec *rill__call_self;
/* Gives the calling thread a record and returns it. */
rill__call_rec *rill__call_register(void);
/* r's thread, in no call now (or parked), marks itself out of the limbo
 * entries that wait for it, and releases the prompt ones it was the last
 * of. */
void rill__call_check_in(rill__call_rec *r);
/* Leaving a call that holds an object (rill__call_park): releases it. */
void rill__call_drop_hold(rill__call_rec *r);

/* Enters a call: the record when this is the outermost call of the thread
 * (a public call made by another, or from a host function that a waiting
 * call runs, is inside it), else NULL. */
static inline rill__call_rec *rill__call_enter(void) {
    rill__call_rec *r = rill__call_self;
    if (__builtin_expect(r == NULL, 0))
        r = rill__call_register();
    /* relaxed: only this thread writes its state. */
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    if (v & 1u)
        return NULL;
    atomic_store_explicit(&r->state, v + 1, memory_order_relaxed);
    /* Pairs with the heavy barrier of rill__retire: our odd state is seen
     * there, or we see the handle it closed. */
    rill__barrier_light();
    return r;
}

static inline void rill__call_leave(rill__call_rec **scope) {
    rill__call_rec *r = *scope;
    if (r == NULL)
        return;
    /* Before the call is out, for rill_shutdown waits for it. */
    if (__builtin_expect(r->hold != NULL, 0))
        rill__call_drop_hold(r);
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    /* release: our uses of the objects happen before their release. */
    atomic_store_explicit(&r->state, v + 1, memory_order_release);
    /* relaxed: a hint (the limbo's lock decides), on the thread's record. */
    if (__builtin_expect(atomic_load_explicit(&r->owed, memory_order_relaxed) != 0, 0))
        rill__call_check_in(r);
}

/* The first statement of a public call that takes a handle: the call is in
 * flight until it returns (see above). */
#define RILL_CALL_SCOPE()                                                                          \
    rill__call_rec *rill__call_scope_ __attribute__((cleanup(rill__call_leave), unused)) =         \
        rill__call_enter()

/* In a function that began with RILL_CALL_SCOPE(): whether its call is the
 * thread's outermost, whose sleep may park (rill__call_park); a call made
 * inside another one must not park that one, which may still use what it
 * found without a reference. */
#define RILL_CALL_OUTERMOST() (rill__call_scope_ != NULL)

/* A batch's heavy barrier is issued once the limbo holds this many batched
 * entries not yet read under one, or the oldest of them is this old. */
#define RILL__LIMBO_BATCH  64
#define RILL__LIMBO_AGE_NS 10000000u

typedef enum rill__retire_mode {
    /* Events, streams, kernels: small, and destroyed often (an event per
     * step of a training loop). The release may wait for the other
     * threads' next calls, or for the batch's barrier. */
    RILL__RETIRE_BATCHED,
    /* Graphs and execs: their release returns memory (nodes, graph
     * memory) that the program may allocate next, and they are destroyed
     * rarely. The barrier is issued now: the object goes as soon as the
     * calls in flight that may have found it return. */
    RILL__RETIRE_PROMPT,
} rill__retire_mode;

/* Drops the owner's reference to obj, release(obj), once no call that may
 * have found obj through its handle is still running; obj's handle is
 * closed already. At once when no other thread has a record. */
void rill__retire(rill__release_fn release, void *obj, rill__retire_mode mode);
/* Parks the calling thread's call for a sleep: until rill__call_unpark,
 * retires do not wait for it (it checks in now for what it owes). The
 * caller promises that the call, from now until it returns, uses no object
 * that it found through a handle unless it holds a reference to it: its
 * own, or hold, a reference it took that the call releases with
 * hold_release as it returns (hold NULL: none). Returns what to give
 * rill__call_unpark: NULL when the thread is in no call, or its call holds
 * something already (then the call does not park, and hold is not kept:
 * the caller drops it). */
rill__call_rec *rill__call_park(void *hold, rill__release_fn hold_release);
/* The sleep is over: the call is one that retires wait for again. */
void rill__call_unpark(rill__call_rec *r);
/* Heavy barriers issued by retires so far (for tests and benchmarks). */
uint64_t rill__call_heavy_barriers(void);
/* rill_shutdown: releases every retired object now (the calls that other
 * threads make while the runtime shuts down race with it anyway). */
void rill__call_drain(void);
/* rill_shutdown (core/device.c) makes sure that no call of another thread
 * still uses the runtime it tears down:
 *
 *   rill__call_quiesce_begin();   before it unpublishes the runtime
 *   ... unpublish the runtime, refuse other threads' handle lookups ...
 *   rill__call_quiesce();         heavy barrier, then wait
 *
 * The barrier pairs with the light one of rill__call_enter: a call that
 * entered before it is seen in it and waited for, and one that entered
 * after it finds the runtime unpublished (and waits for the init lock, to
 * build the next one) and its handles refused. A waited call that needs
 * the runtime meanwhile gets the dying one (rill__call_waited_by_shutdown)
 * rather than wait for the init lock that the shutdown holds. */
void rill__call_quiesce_begin(void);
void rill__call_quiesce(void);
/* True when the calling thread is in the call that a rill_shutdown in
 * progress waits for. */
bool rill__call_waited_by_shutdown(void);
/* rill__runtime_get, around its wait for the init lock: the call uses no
 * runtime meanwhile (it goes on with the next one), so a shutdown, which
 * holds that lock, does not wait for it. */
void rill__call_init_wait_begin(void);
void rill__call_init_wait_end(void);
/* fork(): the registry's lock around the fork; in the child, the parent's
 * other threads are gone (their records are left) and so are the objects
 * retired in the parent's runtime, which the child forgets. */
void rill__call_fork_prepare(void);
void rill__call_fork_parent(void);
void rill__call_fork_child(void);

#endif
