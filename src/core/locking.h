/* SPDX-License-Identifier: MIT */
/* Lock order. A thread holding a lock of one line may take a lock of a
 * later line, never of an earlier one:
 *
 *   1. rt->lock           runtime: event and kernel lists, tagged events
 *   2. dev->lock          device: its stream list and tagged streams
 *   3. event->lock        an event's recorded point
 *   4. stream queue lock  (backend) a stream's command queue and state
 *   5. stream->wait_lock  a stream's waiter list; stream->err_lock
 *   6. ready/launch lock  (backend) a device's ready queue and launches
 *   7. pool lock          src/mem/pool.c: a device's memory pool
 *   8. registry lock      src/mem/registry.c: the pointer registry
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
