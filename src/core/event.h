/* SPDX-License-Identifier: MIT */
/* Events: a recorded point is the pair (stream, seq); a query compares it
 * with the stream's done_seq. */
#ifndef RILL_CORE_EVENT_H
#define RILL_CORE_EVENT_H

#include "core/event_ipc.h"
#include "core/hooks.h"
#include "core/runtime.h"

struct rill__event {
    _Atomic uint32_t magic;
    /* immutable after create */
    rill_event *handle; /* its handle (handle.h), closed by destroy or free */
    unsigned flags;
    int is_tagged;        /* owned by the runtime */
    rill__ipc_event *ipc; /* owned: the shared state of interprocess events, else NULL */
    /* guarded by lock: a spin lock, held for a few loads and stores (and
     * across a submit for timing and interprocess records) */
    rill__spinlock lock;
    rill__device *dev;    /* bound on first record; borrowed */
    rill__stream *stream; /* ref: the stream of the last record, or NULL */
    uint64_t seq;         /* the recorded point on stream */
    uint64_t gen;         /* bumped by every record */
    uint64_t ts_ns;       /* timing events: when the record ran */
    uint64_t cap_id;      /* recorded inside this capture (src/graph), or 0 */
    int ts_valid;
    /* owned: the device's native event (native_event_create), made by the
     * first rill_event_native and recorded by every later record; or NULL.
     * Destroyed when the event is freed. */
    void *native;
    /* guarded by rt->lock */
    rill__link rt_link; /* on rt->events */
    /* atomic */
    _Atomic int refs; /* creator plus pending record commands */
};

/* The event that handle names; RILL_ERROR_INVALID_ARGUMENT with a sentence
 * naming fn otherwise. */
rill_status rill__event_resolve(rill_event *handle, const char *fn, rill__event **out);
/* rill_event_record of event on a stream already resolved, whose failures
 * name that call: for an op that records its event after its launch and
 * must not resolve the handles again and find one destroyed half-way. */
rill_status rill__event_record(rill__event *event, rill__stream *stream);
/* A new untagged event (rill_event_create, rill_event_open_ipc_handle); fn
 * names the public call in a failure's sentence. */
rill_status rill__event_new(unsigned flags, const char *fn, rill__event **out);
void rill__event_unref(rill__event *e);
/* Called by a backend when a RECORD command of generation gen runs;
 * failed != 0 when the stream is skipping work after a failure. */
void rill__event_stamp(rill__event *e, uint64_t gen, uint64_t now_ns, int failed);
/* Makes stream's later work wait for event as recorded now (the wait of
 * rill_stream_wait_event once the capture had nothing to do with it).
 * For holders of a reference, such as graph wait nodes: the event may
 * have been destroyed by its owner. fn names the public call. */
rill_status rill__event_wait(rill__stream *stream, rill__event *event, const char *fn);
/* The events' part in the runtime's life (core/hooks.h): rill_shutdown
 * frees every event once the backends stopped; a fork's child marks the
 * parent's dead. */
extern const rill__subsystem rill__event_subsystem;

#endif
