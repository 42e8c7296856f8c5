/* SPDX-License-Identifier: MIT */
/* Interprocess events: the state of a RILL_EVENT_INTERPROCESS event that
 * every process sharing it sees, and waits for records made in other
 * processes. event.c calls these for events whose ipc member is set. */
#ifndef RILL_CORE_EVENT_IPC_H
#define RILL_CORE_EVENT_IPC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/handle.h"
#include "core/hooks.h"
#include "rill.h"

typedef struct rill__ipc_event rill__ipc_event;

/* Creates the shared state of a new interprocess event (rill_event_create). */
rill_status rill__ipc_event_create(rill__ipc_event **out);
/* Drops the event's hold on its shared state (the event is being freed). */
void rill__ipc_event_release(rill__ipc_event *ipc);

/* The generation of a new record, unique among every process sharing the
 * event; the caller holds the event's lock. */
uint64_t rill__ipc_event_next_gen(rill__ipc_event *ipc);
/* The latest generation recorded in any process (0: never recorded). */
uint64_t rill__ipc_event_latest(rill__ipc_event *ipc);
/* The RECORD command of generation gen ran; failed != 0 when the work
 * before it failed. Any thread, no lock held; never blocks. */
void rill__ipc_event_complete(rill__ipc_event *ipc, uint64_t gen, int failed);
/* The id of the trace arrow from generation gen's record to the waits it
 * releases: the same in every process that opened the event (a hash of
 * the exporter's object and process start time, and gen). */
uint64_t rill__ipc_event_flow_id(const rill__ipc_event *ipc, uint64_t gen);

/* rill_event_query, rill_event_synchronize and rill_stream_wait_event for
 * a record of generation gen that this process cannot follow itself (it
 * was made in another process, or later than this process's own). */
rill_status rill__ipc_event_query(rill__ipc_event *ipc, uint64_t gen, const char *fn);
/* True when the record of generation gen (or a later one) has run without
 * failure; as the query, but it sets no sentence. */
bool rill__ipc_event_completed_ok(rill__ipc_event *ipc, uint64_t gen);
/* deadline_ns: as for rill__stream_wait_status. A synchronize that the
 * deadline ends leaves its queued wait behind, which completes with the
 * record as usual; the next synchronize for the same record waits on it
 * while it is the last one queued. */
rill_status rill__ipc_event_synchronize(rill__ipc_event *ipc, uint64_t gen, int blocking,
                                        uint64_t deadline_ns, const char *fn);
rill_status rill__ipc_event_wait(rill__ipc_event *ipc, rill__stream *stream, uint64_t gen,
                                 const char *fn);

/* The interprocess events' part in the runtime's life (core/hooks.h):
 * rill_shutdown stops the waiter thread once the backends stopped, before
 * events and devices are freed; a fork's child forgets the parent's waiter
 * thread and the events it watches, without freeing or locking anything. */
extern const rill__subsystem rill__ipc_event_subsystem;

#endif
