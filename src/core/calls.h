/* SPDX-License-Identifier: MIT */
/* Calls in flight, and the objects they may still use. Every public call
 * runs inside RILL_CALL_SCOPE(); a destroy closes the handle and hands the
 * owner's reference to rill__retire, which releases it once no call that may
 * have found the object is still running (check-ins, or a heavy barrier for
 * batched retires). A long sleep parks its call (rill__call_park).
 * rill_shutdown waits for every call, parked ones too (rill__call_quiesce).
 * The mechanism, its costs and its measurements: docs/design.md, "Handles". */
#ifndef RILL_CORE_CALLS_H
#define RILL_CORE_CALLS_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/thread.h"
#include "rill.h"

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
/* The destroy protocol of an object that a handle names (events, kernels,
 * graphs, execs), in one place:
 *
 *   1. invalidate: *magic goes from live to RILL__MAGIC_DEAD; when it was
 *      not live, another destroy came first, and the call fails
 *      (RILL_ERROR_INVALID_ARGUMENT, "fn: the what was already destroyed")
 *      with nothing done;
 *   2. close handle: later lookups of it fail;
 *   3. wait for users and free: rill__retire(release, obj, mode), so that
 *      the calls that found obj before the close may still use it.
 *
 * The caller resolved handle to obj and made its own checks first. */
rill_status rill__destroy(_Atomic uint32_t *magic, uint32_t live, const void *handle,
                          rill__release_fn release, void *obj, rill__retire_mode mode,
                          const char *fn, const char *what);
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
