/* SPDX-License-Identifier: MIT */
/* Lock order: the one list of rill's locks, in the order a thread may take
 * them. */

/* A thread holding a lock of one line may take a lock of a
 * later line, never of an earlier one:
 *
 *   0. init lock          src/core/device.c: initialisation, rill_shutdown, fork()
 *   1. graph->lock        src/graph/graph.c, exec.c: a hand-built graph's nodes
 *   2. exec->lock         src/graph/exec.c: an exec's parameter set, last launch
 *   3. rill__caps_lock    src/graph/capture*.c, gmem.c: every capture, graph memory
 *   4. rt->lock           runtime: event, kernel, graph and exec lists, tagged events
 *   5. dev->lock          device: its stream list and tagged streams
 *   6. event->lock        an event's recorded point
 *   7. stream queue lock  (backend) a stream's command queue and state
 *   8. stream->wait_lock  a stream's waiter list; stream->err_lock
 *   9. ready/launch lock  (backend) a device's ready queue, launches, graph runs;
 *                         a graph run's active_lock after it
 *  10. pool lock          src/mem/pool.c, pool_alloc.c: a device's memory pool
 *  11. registry lock      src/mem/registry.c: the pointer registry
 *  12. comm engine lock   src/comm/engine.c, engine_calls.c: communicators' queues,
 *                         free proxy streams; taken with no other lock held, and
 *                         takes none
 *
 * Locks of one line are never held together, except the dev->locks of
 * every device, taken in ordinal order by fork()'s prepare handler.
 *
 * One exception, safe because nothing takes a pool lock while holding a
 * device lock: the pool may drop the last reference to a stream under its
 * lock, and freeing a stream takes dev->lock (briefly, to unlist it).
 *
 * Callbacks run from rill__stream_complete (waiter wake-ups) are invoked
 * with no lock held. */
#ifndef RILL_CORE_LOCKING_H
#define RILL_CORE_LOCKING_H
#endif
