/* SPDX-License-Identifier: MIT */
/* Events. A record is the pair (stream, seq): the event is complete when
 * the stream's done_seq reaches seq, so a query is a load and a compare,
 * and a wait copies the pair when it is made. Only timing events and
 * interprocess events put a command into the stream; interprocess events
 * number their records in shared memory (event_ipc.c), which answers for
 * them once another process made the latest record. */
#include "core/event.h"

#include <stdio.h>
#include <string.h>

#include "core/calls.h"
#include "core/queue_limit.h"
#include "core/stream.h"
#include "core/trace_api.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/status.h"

#define VALID_FLAGS (RILL_EVENT_TIMING | RILL_EVENT_BLOCKING_SYNC | RILL_EVENT_INTERPROCESS)

RILL_HOT rill_status rill__event_resolve(rill_event *handle, const char *fn, rill__event **out) {
    rill__event *e = rill__handle_get(handle, RILL__HANDLE_EVENT);
    if (e == NULL)
        return rill__handle_fail(fn, "the event", handle, RILL__HANDLE_EVENT);
    *out = e;
    return RILL_OK;
}

static rill_status event_new(unsigned flags, int is_tagged, const char *fn, rill__event **out) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__event *e = rill__calloc(1, sizeof *e);
    if (e == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    e->flags = flags;
    e->is_tagged = is_tagged;
    if (!rill__handle_open(RILL__HANDLE_EVENT, e, (void **)&e->handle)) {
        rill__free(e);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    rill__spinlock_init(&e->lock, RILL__RANK_EVENT);
    atomic_init(&e->refs, 1);
    atomic_store(&e->magic, RILL__MAGIC_EVENT);
    rill__mutex_lock(&rt->lock);
    rill__list_push(&rt->events, &e->rt_link);
    rill__mutex_unlock(&rt->lock);
    *out = e;
    return RILL_OK;
}

rill_status rill__event_new(unsigned flags, const char *fn, rill__event **out) {
    return event_new(flags, 0, fn, out);
}

static void event_free(rill__event *e) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__mutex_lock(&rt->lock);
    rill__list_remove(&rt->events, &e->rt_link);
    rill__mutex_unlock(&rt->lock);
    rill__handle_close(e->handle);
    if (e->native != NULL)
        e->dev->ops->native_event_destroy(e->dev, e->native);
    if (e->stream != NULL)
        rill__stream_unref(e->stream);
    if (e->ipc != NULL)
        rill__ipc_event_release(e->ipc);
    rill__free(e);
}

void rill__event_unref(rill__event *e) {
    /* acq_rel: the last release must see every other holder's writes. */
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
        event_free(e);
}

RILL_HOT void rill__event_stamp(rill__event *e, uint64_t gen, uint64_t now_ns, int failed) {
    if (e->ipc != NULL) {
        if (rill__tracing() && !failed) {
            /* The arrow's start, on the recording stream's track, before
             * a waiter can see the record complete. */
            rill__spinlock_lock(&e->lock);
            uint64_t sid = e->stream != NULL ? e->stream->q.id : 0;
            rill__spinlock_unlock(&e->lock);
            rill__trace_flow(sid, rill__ipc_event_flow_id(e->ipc, gen), false);
        }
        rill__ipc_event_complete(e->ipc, gen, failed);
        return; /* interprocess events take no timestamps */
    }
    rill__spinlock_lock(&e->lock);
    if (e->gen == gen) {
        e->ts_ns = now_ns;
        e->ts_valid = 1;
    }
    rill__spinlock_unlock(&e->lock);
}

static void events_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    if (phase != RILL__SHUTDOWN_STOPPED)
        return;
    while (rt->tagged_events != NULL) {
        rill__tagged_event *t = rt->tagged_events;
        rt->tagged_events = t->next;
        rill__free(t->tag);
        rill__free(t);
    }
    /* Every stream has drained, so no record command holds a reference:
     * free the events nobody destroyed. */
    while (rt->events != NULL) {
        rill__event *e = RILL__OWNER(rt->events, rill__event, rt_link);
        atomic_store(&e->magic, RILL__MAGIC_DEAD);
        event_free(e);
    }
}

static void events_fork_child(rill__runtime *rt) {
    for (rill__link *l = rt != NULL ? rt->events : NULL; l != NULL; l = l->next)
        atomic_store(&RILL__OWNER(l, rill__event, rt_link)->magic, RILL__MAGIC_DEAD);
}

const rill__subsystem rill__event_subsystem = {
    .name = "events",
    .shutdown = events_shutdown,
    .fork_child = events_fork_child,
};

/* Copies the event's recorded point under its lock, with a reference.
 * *ipc_gen is the generation of an interprocess event's latest record in
 * any process (0 for other events); *s is NULL when another process made
 * that record (or a later one than this process's). */
RILL_HOT static void snapshot(rill__event *e, rill__stream **s, uint64_t *seq, uint64_t *ipc_gen) {
    rill__spinlock_lock(&e->lock);
    uint64_t latest = e->ipc != NULL ? rill__ipc_event_latest(e->ipc) : e->gen;
    *ipc_gen = e->ipc != NULL ? latest : 0;
    *s = latest == e->gen ? e->stream : NULL;
    *seq = e->seq;
    if (*s != NULL)
        rill__stream_ref(*s);
    rill__spinlock_unlock(&e->lock);
}

/* ---------------------------------------------------------------- public */

rill_status rill_event_create(unsigned flags, rill_event **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_create: out is NULL; pass the address of a rill_event * to "
                          "receive the event");
    *out = NULL;
    if ((flags & ~(unsigned)VALID_FLAGS) != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_create: flags 0x%x has unknown bits 0x%x; combine "
                          "RILL_EVENT_TIMING, RILL_EVENT_BLOCKING_SYNC and RILL_EVENT_INTERPROCESS",
                          flags, flags & ~(unsigned)VALID_FLAGS);
    if ((flags & RILL_EVENT_INTERPROCESS) && (flags & RILL_EVENT_TIMING))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_create: RILL_EVENT_INTERPROCESS cannot be combined with "
                          "RILL_EVENT_TIMING; drop one of them");
    rill__event *e;
    if (!(flags & RILL_EVENT_INTERPROCESS)) {
        rill_status st = event_new(flags, 0, "rill_event_create", &e);
        if (st == RILL_OK)
            *out = e->handle;
        return st;
    }
    rill__ipc_event *ipc;
    rill_status st = rill__ipc_event_create(&ipc);
    if (st != RILL_OK)
        return st;
    st = event_new(flags, 0, "rill_event_create", &e);
    if (st != RILL_OK) {
        rill__ipc_event_release(ipc);
        return st;
    }
    e->ipc = ipc; /* not yet visible to the caller */
    *out = e->handle;
    return RILL_OK;
}

static void release_event(void *e) {
    rill__event_unref(e);
}

rill_status rill_event_destroy(rill_event *event_h) {
    RILL_CALL_SCOPE();
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, "rill_event_destroy", &event);
    if (st != RILL_OK)
        return st;
    if (event->is_tagged)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_destroy: tagged events are owned by the library and live "
                          "until rill_shutdown");
    return rill__destroy(&event->magic, RILL__MAGIC_EVENT, event->handle, release_event, event,
                         RILL__RETIRE_BATCHED, "rill_event_destroy", "event");
}

RILL_HOT rill_status rill_event_record(rill_event *event_h, rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, "rill_event_record", &event);
    if (st != RILL_OK)
        return st;
    rill__stream *stream;
    st = rill__stream_resolve(stream_h, "rill_event_record", &stream);
    if (st != RILL_OK)
        return st;
    /* Before the event's lock; without parking, which would let the event
     * go while the call waits. */
    st = rill__stream_make_room(stream, false, "rill_event_record");
    if (st != RILL_OK)
        return st;
    return rill__event_record(event, stream);
}

RILL_HOT rill_status rill__event_record(rill__event *event, rill__stream *stream) {
    bool captured;
    rill_status st = rill__capture_event_record(event, stream, &captured);
    if (captured)
        return st;
    rill__spinlock_lock(&event->lock);
    if (event->dev != NULL && event->dev != stream->q.dev) {
        rill__spinlock_unlock(&event->lock);
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "rill_event_record: the event is bound to device %d (by its first "
                          "record or its interprocess handle) and may only be recorded on "
                          "streams of that device, not device %d; create another event for "
                          "this stream",
                          event->dev->base.info.ordinal, stream->q.dev->base.info.ordinal);
    }
    uint64_t seq;
    uint64_t gen = event->ipc != NULL ? rill__ipc_event_next_gen(event->ipc) : event->gen + 1;
    bool stamped = (event->flags & (RILL_EVENT_TIMING | RILL_EVENT_INTERPROCESS)) != 0;
    if (stamped || event->native != NULL) {
        /* The timestamp is taken (other processes learn of completion,
         * the native event is recorded) when the stream reaches this
         * point. The event lock is held across submit so concurrent
         * records of the same event are ordered with their generations. */
        rill__cmd cmd = {.kind = RILL__CMD_RECORD};
        atomic_fetch_add_explicit(&event->refs, 1, memory_order_relaxed);
        cmd.flags = stamped ? 0 : RILL__CMD_NATIVE_ONLY;
        cmd.u.record.event = event;
        cmd.u.record.gen = gen;
        cmd.u.record.native = event->native;
        st = rill__stream_submit(stream, &cmd, &seq);
        if (st != RILL_OK) {
            atomic_fetch_sub_explicit(&event->refs, 1, memory_order_relaxed);
            /* The shared number is spent: mark it complete, so nobody
             * waits for a record that never happened. */
            if (event->ipc != NULL)
                rill__ipc_event_complete(event->ipc, gen, 0);
            rill__spinlock_unlock(&event->lock);
            return st;
        }
    } else {
        /* acquire: pairs with the submit that assigned the number. */
        seq = atomic_load_explicit(&stream->q.sub_seq, memory_order_acquire);
    }
    rill__stream *old = event->stream;
    rill__stream_ref(stream);
    event->dev = stream->q.dev;
    event->stream = stream;
    event->seq = seq;
    event->gen = gen;
    event->ts_valid = 0;
    event->cap_id = 0;
    if (rill__san_active())
        rill__san()->event_record(event, stream, seq);
    rill__spinlock_unlock(&event->lock);
    if (old != NULL)
        rill__stream_unref(old);
    return RILL_OK;
}

/* Makes event's native event on dev and records it where the event's
 * latest record (s, seq) is not complete yet: at the end of s, covering
 * that record and what was submitted to s after it (no lock held). */
static rill_status native_event_make(rill__event *event, rill__device *dev, void **out) {
    static const char fn[] = "rill_event_native";
    void *native;
    rill_status st = dev->ops->native_event_create(dev, &native);
    if (st != RILL_OK)
        return rill__fail_from(st, fn);
    rill__spinlock_lock(&event->lock);
    if (event->native != NULL) {
        /* another thread made one first: that one is the event's */
        void *theirs = event->native;
        rill__spinlock_unlock(&event->lock);
        dev->ops->native_event_destroy(dev, native);
        *out = theirs;
        return RILL_OK;
    }
    rill__stream *s = event->stream;
    uint64_t seq = event->seq;
    if (s != NULL && atomic_load_explicit(&s->q.done_seq, memory_order_acquire) < seq) {
        /* The library's own command, at once even while s captures (the
         * record it covers was not captured): counted by the queue bounds,
         * never waiting for them. s is a stream of dev. */
        rill__cmd cmd = {.kind = RILL__CMD_RECORD, .flags = RILL__CMD_NATIVE_ONLY};
        atomic_fetch_add_explicit(&event->refs, 1, memory_order_relaxed);
        cmd.u.record.event = event;
        cmd.u.record.gen = event->gen;
        cmd.u.record.native = native;
        uint64_t at;
        st = rill__stream_submit_now(s, &cmd, &at);
        if (st != RILL_OK) {
            atomic_fetch_sub_explicit(&event->refs, 1, memory_order_relaxed);
            rill__spinlock_unlock(&event->lock);
            dev->ops->native_event_destroy(dev, native);
            return rill__fail_from(st, fn);
        }
    }
    event->native = native;
    rill__spinlock_unlock(&event->lock);
    *out = native;
    return RILL_OK;
}

rill_status rill_event_native(rill_event *event_h, void **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_native: out is NULL; pass the address of a void * to receive "
                          "the native event");
    *out = NULL;
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, "rill_event_native", &event);
    if (st != RILL_OK)
        return st;
    rill__spinlock_lock(&event->lock);
    rill__device *dev = event->dev; /* devices live until rill_shutdown */
    void *native = event->native;
    rill__spinlock_unlock(&event->lock);
    if (dev == NULL)
        return rill__fail(RILL_ERROR_NOT_RECORDED,
                          "rill_event_native: the event was never recorded, so it is bound to no "
                          "device; record it on a stream of a CUDA device first");
    if (dev->ops->native_event_create == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "rill_event_native: the event is bound to device %d (%s) by its first "
                          "record, whose events have no native handle; record an event on a "
                          "stream of a CUDA device to share it with the CUDA runtime",
                          dev->base.info.ordinal, dev->base.info.name);
    if (native != NULL) {
        *out = native;
        return RILL_OK;
    }
    return native_event_make(event, dev, out);
}

rill_status rill_event_get_device(rill_event *event_h, rill_device **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_get_device: out is NULL; pass the address of a rill_device "
                          "* to receive the device");
    *out = NULL;
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, "rill_event_get_device", &event);
    if (st != RILL_OK)
        return st;
    rill__spinlock_lock(&event->lock);
    if (event->dev != NULL)
        *out = event->dev->handle;
    rill__spinlock_unlock(&event->lock);
    return RILL_OK;
}

rill_status rill_event_query(rill_event *event_h) {
    RILL_CALL_SCOPE();
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, "rill_event_query", &event);
    if (st != RILL_OK)
        return st;
    st = rill__capture_check_event_sync(event, "rill_event_query");
    if (st != RILL_OK)
        return st;
    rill__stream *s;
    uint64_t seq, remote;
    char msg[RILL__ERROR_BYTES];
    snapshot(event, &s, &seq, &remote);
    if (s == NULL && remote != 0)
        return rill__ipc_event_query(event->ipc, remote, "rill_event_query");
    if (s == NULL)
        return RILL_OK;
    /* Other processes learn of an interprocess record when its command
     * runs, a moment before the stream counts it done: agree with them. */
    if ((st = rill__stream_check_lost(s, "rill_event_query")) != RILL_OK) {
        rill__stream_unref(s);
        return st;
    }
    if (rill__stream_failed_at(s, seq, msg, sizeof msg))
        st = rill__fail(RILL_ERROR_KERNEL_FAILED, "rill_event_query: %s", msg);
    else if (atomic_load_explicit(&s->q.done_seq, memory_order_acquire) < seq &&
             !(remote != 0 && rill__ipc_event_completed_ok(event->ipc, remote)))
        st = RILL_NOT_READY;
    /* A program that polls needs a worker to run what it polls for. */
    if (st == RILL_NOT_READY && s->q.dev->ops->kick != NULL)
        s->q.dev->ops->kick(s);
    if (st == RILL_OK && rill__san_active())
        rill__san()->event_observed(event);
    rill__stream_unref(s);
    return st;
}

/* rill_event_synchronize and rill_event_synchronize_for (deadline
 * UINT64_MAX: none); outermost: RILL_CALL_OUTERMOST() of the call. */
RILL_HOT static rill_status event_sync(rill_event *event_h, uint64_t deadline_ns, bool outermost,
                                       const char *fn) {
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, fn, &event);
    if (st != RILL_OK)
        return st;
    st = rill__capture_check_event_sync(event, fn);
    if (st != RILL_OK)
        return st;
    st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    rill__stream *s;
    uint64_t seq, remote;
    snapshot(event, &s, &seq, &remote);
    if (s == NULL && remote != 0)
        return rill__ipc_event_synchronize(
            event->ipc, remote, (event->flags & RILL_EVENT_BLOCKING_SYNC) != 0, deadline_ns, fn);
    if (s == NULL)
        return RILL_OK;
    uint64_t t0 = rill__tracing() ? rill__trace_now() : 0;
    /* The snapshot's reference holds s. The sanitizer's note uses the
     * event, which another thread may destroy while this one sleeps: then
     * the sleep does not park. */
    bool san = rill__san_active();
    unsigned flags = (event->flags & RILL_EVENT_BLOCKING_SYNC) ? RILL__WAIT_BLOCKING : 0;
    if (!san && outermost)
        flags |= RILL__WAIT_PARKS;
    st = rill__stream_wait_status(s, seq, flags, deadline_ns, fn);
    if (t0 != 0)
        rill__trace_blocked(fn, s, t0);
    if (san && st != RILL_NOT_READY)
        rill__san()->event_observed(event);
    rill__stream_unref(s);
    return st;
}

RILL_HOT rill_status rill_event_synchronize(rill_event *event_h) {
    RILL_CALL_SCOPE();
    return event_sync(event_h, UINT64_MAX, RILL_CALL_OUTERMOST(), "rill_event_synchronize");
}

rill_status rill_event_synchronize_for(rill_event *event_h, uint64_t timeout_ns) {
    RILL_CALL_SCOPE();
    return event_sync(event_h, rill__deadline_after(timeout_ns), RILL_CALL_OUTERMOST(),
                      "rill_event_synchronize_for");
}

/* Reads a timing event's state for elapsed_ms. */
static rill_status timing_point(rill__event *e, const char *which, uint64_t *ts) {
    rill__stream *s;
    uint64_t seq, remote;
    char msg[RILL__ERROR_BYTES];
    if (!(e->flags & RILL_EVENT_TIMING))
        return rill__fail(RILL_ERROR_TIMING_DISABLED,
                          "rill_event_elapsed_ms: the %s event was created without "
                          "RILL_EVENT_TIMING; create both events with that flag",
                          which);
    snapshot(e, &s, &seq, &remote); /* timing events are never interprocess */
    if (s == NULL)
        return rill__fail(RILL_ERROR_NOT_RECORDED,
                          "rill_event_elapsed_ms: the %s event was never recorded; record it "
                          "with rill_event_record first",
                          which);
    rill_status st = rill__stream_check_lost(s, "rill_event_elapsed_ms");
    if (st != RILL_OK) {
        /* its sentence is set */
    } else if (rill__stream_failed_at(s, seq, msg, sizeof msg)) {
        st = rill__fail(RILL_ERROR_KERNEL_FAILED, "rill_event_elapsed_ms: %s", msg);
    } else if (atomic_load_explicit(&s->q.done_seq, memory_order_acquire) < seq) {
        st = RILL_NOT_READY;
    } else {
        rill__spinlock_lock(&e->lock);
        if (e->stream == s && e->seq == seq && e->ts_valid)
            *ts = e->ts_ns;
        else
            st = RILL_NOT_READY; /* re-recorded since the snapshot */
        rill__spinlock_unlock(&e->lock);
    }
    rill__stream_unref(s);
    return st;
}

rill_status rill_event_elapsed_ms(rill_event *start_h, rill_event *end_h, float *ms) {
    RILL_CALL_SCOPE();
    if (ms == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_elapsed_ms: ms is NULL; pass the address of a float to "
                          "receive the milliseconds");
    *ms = 0.0f;
    rill__event *start, *end;
    rill_status st = rill__event_resolve(start_h, "rill_event_elapsed_ms", &start);
    if (st == RILL_OK)
        st = rill__event_resolve(end_h, "rill_event_elapsed_ms", &end);
    if (st != RILL_OK)
        return st;
    uint64_t t0 = 0, t1 = 0;
    st = timing_point(start, "start", &t0);
    if (st != RILL_OK)
        return st;
    st = timing_point(end, "end", &t1);
    if (st != RILL_OK)
        return st;
    /* Timestamps are of one device's clock (timestamp_ns). */
    rill__spinlock_lock(&start->lock);
    rill__device *d0 = start->dev;
    rill__spinlock_unlock(&start->lock);
    rill__spinlock_lock(&end->lock);
    rill__device *d1 = end->dev;
    rill__spinlock_unlock(&end->lock);
    if (d0 != d1)
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "rill_event_elapsed_ms: the start event was recorded on device %d and "
                          "the end event on device %d; elapsed time compares two events of one "
                          "device: record both on streams of the same device",
                          d0->base.info.ordinal, d1->base.info.ordinal);
    *ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
    return RILL_OK;
}

rill_status rill_event_get_tagged(const char *tag, rill_event **out) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_get_tagged: out is NULL; pass the address of a rill_event * "
                          "to receive the event");
    *out = NULL;
    if (tag == NULL || tag[0] == '\0')
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_event_get_tagged: the tag is NULL or empty; pass a name");
    rill__runtime_get(&rt);
    rill__mutex_lock(&rt->lock);
    for (rill__tagged_event *t = rt->tagged_events; t != NULL; t = t->next) {
        if (strcmp(t->tag, tag) == 0) {
            *out = t->event->handle;
            rill__mutex_unlock(&rt->lock);
            return RILL_OK;
        }
    }
    rill__mutex_unlock(&rt->lock);
    rill__event *e;
    rill_status st = event_new(RILL_EVENT_DEFAULT, 1, "rill_event_get_tagged", &e);
    if (st != RILL_OK)
        return st;
    rill__tagged_event *t = rill__malloc(sizeof *t);
    char *copy = rill__strdup(tag);
    rill__mutex_lock(&rt->lock);
    for (rill__tagged_event *o = rt->tagged_events; o != NULL; o = o->next) {
        if (strcmp(o->tag, tag) == 0) {
            *out = o->event->handle;
            rill__mutex_unlock(&rt->lock);
            rill__free(t);
            rill__free(copy);
            rill__event_unref(e);
            return RILL_OK;
        }
    }
    if (t == NULL || copy == NULL) {
        rill__mutex_unlock(&rt->lock);
        rill__free(t);
        rill__free(copy);
        rill__event_unref(e);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "rill_event_get_tagged: out of host memory; no event was created");
    }
    t->tag = copy;
    t->event = e;
    t->next = rt->tagged_events;
    rt->tagged_events = t;
    rill__mutex_unlock(&rt->lock);
    *out = e->handle;
    return RILL_OK;
}

rill_status rill_stream_wait_event(rill_stream *stream_h, rill_event *event_h) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_wait_event", &stream);
    if (st != RILL_OK)
        return st;
    rill__event *event;
    st = rill__event_resolve(event_h, "rill_stream_wait_event", &event);
    if (st != RILL_OK)
        return st;
    st = rill__stream_make_room(stream, false, "rill_stream_wait_event");
    if (st != RILL_OK)
        return st;
    bool captured;
    st = rill__capture_wait_event(stream, event, &captured);
    if (captured)
        return st;
    return rill__event_wait(stream, event, "rill_stream_wait_event");
}

rill_status rill__event_wait(rill__stream *stream, rill__event *event, const char *fn) {
    rill__stream *s;
    uint64_t seq, remote;
    snapshot(event, &s, &seq, &remote);
    if (s == NULL && remote != 0)
        return rill__ipc_event_wait(event->ipc, stream, remote, fn);
    if (s == NULL)
        return RILL_OK; /* never recorded (or only in a capture): nothing to wait for */
    rill_status st = rill__stream_wait_point(stream, s, seq, fn);
    if (st == RILL_OK && rill__san_active())
        rill__san()->event_wait(stream, event);
    rill__stream_unref(s);
    return st;
}
