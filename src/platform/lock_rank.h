/* SPDX-License-Identifier: MIT */
/* Lock ranks: the order in which a thread may take rill's locks, written
 * once, here, and checked in debug builds (those without NDEBUG, such as the
 * asan-ubsan and tsan presets): each lock is
 * given its rank where it is initialised, and taking a ranked lock while
 * the thread holds one of an equal or higher rank aborts with a message
 * that names both. In release builds the ranks, the checks and the
 * per-thread list of held locks are compiled out. Locks of rank NONE (the
 * default) are not checked: the leaves of the trace, the sanitizer, the
 * communicators (their engine lock is taken with no other lock held), a
 * CPU graph run's active_lock (taken after the launch lock, it takes none)
 * and the CUDA backend's.
 *
 * Callbacks run from rill__stream_complete (waiter wake-ups) are invoked
 * with no lock held. */
#ifndef RILL_PLATFORM_LOCK_RANK_H
#define RILL_PLATFORM_LOCK_RANK_H

#include <stdbool.h>

#ifndef NDEBUG
#define RILL_LOCK_RANKS 1
#else
#define RILL_LOCK_RANKS 0
#endif

/* A thread holding a lock of one rank may take a lock of a later rank,
 * never one of the same or an earlier rank (exceptions: siblings, below). */
typedef enum rill__lock_rank {
    RILL__RANK_NONE = 0,
    RILL__RANK_INIT,     /* core/device.c: initialisation, rill_shutdown, fork() */
    RILL__RANK_GRAPH,    /* graph->lock (graph/graph.c, exec.c): a hand-built graph's nodes */
    RILL__RANK_EXEC,     /* exec->lock (graph/exec.c): an exec's parameter set, last launch */
    RILL__RANK_CAPTURES, /* rill__caps_lock (graph/capture*.c, gmem.c): every capture, graph
                          * memory */
    RILL__RANK_RUNTIME,  /* rt->lock: event, kernel, graph and exec lists, tagged events */
    RILL__RANK_EVENT,    /* event->lock: an event's recorded point */
    RILL__RANK_QUEUE,    /* (CPU backend) a stream's command queue and state */
    RILL__RANK_STREAM,   /* stream->wait_lock (its waiters), stream->err_lock (its failure) */
    RILL__RANK_LAUNCH,   /* (CPU backend) a device's ready queue; its launches, graph runs */
    RILL__RANK_POOL,     /* mem/pool.c, pool_alloc.c: a device's memory pool */
    /* dev->lock: a device's stream list and tagged streams. After the pool:
     * the pool may drop the last reference to a stream under its lock, and
     * freeing a stream takes its device's lock, briefly, to unlist it. */
    RILL__RANK_DEVICE,
    RILL__RANK_REGISTRY, /* mem/registry.c: the pointer registry */
    RILL__RANK_HANDLES,  /* core/handle.c: the handle table; takes no other lock */
    RILL__RANK_CALLS,    /* core/calls.c: the registry of calls and the limbo; takes none */
    RILL__RANK_COUNT
} rill__lock_rank;

/* Siblings: a thread may hold several locks of one rank only when it takes
 * them with a sibling lock call, in an order that the caller documents
 * (fork()'s prepare handler takes every dev->lock by ordinal). */

#if RILL_LOCK_RANKS
/* Notes that the calling thread is about to take lock, of rank rank; aborts
 * when it holds a lock of rank >= rank (> with sibling). */
void rill__lock_rank_acquire(const void *lock, rill__lock_rank rank, bool sibling);
/* Notes that the calling thread released lock (taken with rank rank). */
void rill__lock_rank_release(const void *lock, rill__lock_rank rank);
#else
static inline void rill__lock_rank_acquire(const void *lock, rill__lock_rank rank, bool sibling) {
    (void)lock;
    (void)rank;
    (void)sibling;
}
static inline void rill__lock_rank_release(const void *lock, rill__lock_rank rank) {
    (void)lock;
    (void)rank;
}
#endif

#endif
