/* SPDX-License-Identifier: MIT */
/* Calls in flight, and the objects they may still use.
 *
 * A public call looks its handles up (core/handle.h) and then uses the
 * objects without holding a reference: a reference per call would cost two
 * locked instructions per handle on every launch. So an object must not go
 * while a call that found it before its handle closed is still running,
 * even when another thread destroys it meanwhile. Every public call that
 * takes a handle runs inside RILL_CALL_SCOPE(), which marks the calling
 * thread as in a call; a destroy closes the handle and then hands the
 * owner's reference to rill__retire, which drops it (release) at once when
 * no other thread is in a call, and otherwise once each thread that was in
 * one has left it. A call that races with the destruction of its handle
 * thus either finds the handle closed (RILL_ERROR_INVALID_ARGUMENT) or
 * works on an object that is still whole, as if it came before the
 * destroy; the object's own references keep it for work that the call
 * submitted.
 *
 * Each thread that makes a call has a record whose state counts its calls:
 * odd while it is in one (the outermost, for nested calls). Entering stores
 * the odd value and then, through a light barrier, looks handles up;
 * retiring closes the handle and then, through a heavy barrier
 * (platform/thread.h), reads every record: a thread whose state it reads
 * even is in no call that found the object (a call it enters later finds
 * the handle closed), and one it reads odd is waited for until its state
 * moves on. A destroy made by a kernel or host function waits for its own
 * thread's call too: that thread may be running the work while it waits in
 * a call on the same object. Leaving a call stores the next even value (release),
 * so whoever sees it sees the call's last use of the object. Records are
 * never freed; a thread that exits leaves its record to the next new thread.
 *
 * The heavy barrier is a membarrier system call when the process has other
 * threads with records (microseconds, more on some virtual machines): it is
 * paid by destroys, not by calls. */
#ifndef RILL_CORE_CALLS_H
#define RILL_CORE_CALLS_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "platform/thread.h"

/* A line of its own: its thread writes it twice per call, and sharing a
 * line with what a worker uses would make every call a cache miss. */
typedef struct rill__call_rec {
    alignas(64) _Atomic uint64_t state; /* calls entered and left; odd while in one */
    _Atomic int taken;                  /* a live thread owns the record */
    struct rill__call_rec *next;        /* the registry, newest first; never unlinked */
} rill__call_rec;

/* The calling thread's record (NULL until its first call). */
extern _Thread_local rill__call_rec *rill__call_self;
/* Retired objects not yet released (a hint for leaving calls). */
extern _Atomic int rill__call_limbo;

/* Gives the calling thread a record and returns it. */
rill__call_rec *rill__call_register(void);
/* Releases what retired objects no call holds any more. */
void rill__call_reclaim(void);

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
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    /* release: our uses of the objects happen before their release. */
    atomic_store_explicit(&r->state, v + 1, memory_order_release);
    /* relaxed: a hint; the limbo's lock decides. */
    if (atomic_load_explicit(&rill__call_limbo, memory_order_relaxed) != 0)
        rill__call_reclaim();
}

/* The first statement of a public call that takes a handle: the call is in
 * flight until it returns (see above). */
#define RILL_CALL_SCOPE()                                                                          \
    rill__call_rec *rill__call_scope_ __attribute__((cleanup(rill__call_leave), unused)) =         \
        rill__call_enter()

/* Drops the owner's reference to obj, release(obj), once no call that may
 * have found obj through its handle is still running; obj's handle is
 * closed already. At once when no other thread is in a call. */
typedef void (*rill__release_fn)(void *obj);
void rill__retire(rill__release_fn release, void *obj);
/* rill_shutdown: releases every retired object now (the calls that other
 * threads make while the runtime shuts down race with it anyway). */
void rill__call_drain(void);
/* fork(): the registry's lock around the fork; in the child, the parent's
 * other threads are gone (their records are left) and so are the objects
 * retired in the parent's runtime, which the child forgets. */
void rill__call_fork_prepare(void);
void rill__call_fork_parent(void);
void rill__call_fork_child(void);

#endif
