/* SPDX-License-Identifier: MIT */
/* Streams: creation and zombie destruction, the current stream, sequence
 * counters and their waiters, and the public stream calls (host waits
 * are in stream_wait.c, the sticky-error windows in stream_fail.c). The backend runs
 * commands; everything a stream means is decided here. */

#include "core/stream.h"

#include <stdio.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "core/kernel.h"
#include "core/queue_limit.h"
#include "core/trace_api.h"
#include "util/alloc.h"
#include "util/status.h"

static const char *kind_label(rill__stream_kind kind) {
    switch (kind) {
    case RILL__STREAM_DEFAULT:
        return "the default stream";
    case RILL__STREAM_TAGGED:
        return "a tagged stream";
    default:
        return "a stream";
    }
}

static _Atomic uint64_t next_stream_id = 1;

rill_status rill__stream_new(rill__device *dev, int priority, rill__stream_kind kind,
                             rill__stream **out) {
    size_t bytes = sizeof(rill__stream) + dev->ops->stream_state_bytes;
    rill__stream *s = rill__malloc_lines(bytes);
    if (s == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a stream");
    memset(s, 0, bytes);
    s->q.id = atomic_fetch_add_explicit(&next_stream_id, 1, memory_order_relaxed);
    s->q.dev = dev;
    s->q.priority = priority;
    s->q.state = s->backend;
    s->kind = kind;
    rill__mutex_init_ranked(&s->err_lock, RILL__RANK_STREAM);
    rill__mutex_init_ranked(&s->wait_lock, RILL__RANK_STREAM);
    atomic_init(&s->refs, 1);
    atomic_init(&s->waiter_min, UINT64_MAX);
    s->windows = &s->first_window;
    s->cap_windows = 1;
    rill_status st = dev->ops->stream_init(s);
    if (st != RILL_OK) {
        rill__mutex_destroy(&s->wait_lock);
        rill__mutex_destroy(&s->err_lock);
        rill__free(s);
        return st;
    }
    if (!rill__handle_open(RILL__HANDLE_STREAM, s, (void **)&s->handle)) {
        dev->ops->stream_fini(s);
        rill__mutex_destroy(&s->wait_lock);
        rill__mutex_destroy(&s->err_lock);
        rill__free(s);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a stream");
    }
    if (kind == RILL__STREAM_DEFAULT)
        snprintf(s->name, sizeof s->name, "default");
    atomic_store(&s->magic, RILL__MAGIC_STREAM);
    rill__device_add_stream(dev, s);
    *out = s;
    return RILL_OK;
}

RILL_HOT rill_status rill__stream_resolve(rill_stream *handle, const char *fn, rill__stream **out) {
    if (handle == NULL) {
        rill__device *dev;
        rill_status st = rill__device_resolve(NULL, fn, &dev);
        if (st != RILL_OK)
            return st;
        return rill__thread_current_stream(dev, fn, out);
    }
    rill__stream *s = rill__handle_get(handle, RILL__HANDLE_STREAM);
    if (s == NULL)
        return rill__handle_fail(fn, "the stream", handle, RILL__HANDLE_STREAM);
    *out = s;
    return RILL_OK;
}

RILL_HOT void rill__stream_ref(rill__stream *s) {
    /* relaxed: taking a reference needs an existing one, which orders it. */
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

bool rill__stream_try_ref(rill__stream *s) {
    /* relaxed: dev->lock, held by the caller, orders it with the free. */
    int refs = atomic_load_explicit(&s->refs, memory_order_relaxed);
    while (refs > 0 && !atomic_compare_exchange_weak_explicit(
                           &s->refs, &refs, refs + 1, memory_order_relaxed, memory_order_relaxed)) {
    }
    return refs > 0;
}

RILL_HOT void rill__stream_unref(rill__stream *s) {
    /* acq_rel: the last release must see every other holder's writes. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        rill__stream_free(s);
}

void rill__stream_free(rill__stream *s) {
    rill__device *dev = s->q.dev;
    rill__handle_close(s->handle); /* library-owned streams: closed only now */
    rill__device_remove_stream(dev, s);
    dev->ops->stream_fini(s);
    for (size_t i = 0; i < s->num_windows; i++)
        rill__free(s->windows[i].message);
    if (s->windows != &s->first_window)
        rill__free(s->windows);
    rill__mutex_destroy(&s->wait_lock);
    rill__mutex_destroy(&s->err_lock);
    rill__free(s);
}

void rill__stream_name(rill__stream *s, char *buf, size_t size) {
    rill__mutex_lock(&s->err_lock);
    if (s->name[0] != '\0')
        snprintf(buf, size, "'%s'", s->name);
    else
        snprintf(buf, size, "%p", (void *)s->handle); /* the program's own value */
    rill__mutex_unlock(&s->err_lock);
}

void rill__stream_trace_track(rill__stream *s) {
    uint32_t now = rill__trace_session();
    /* relaxed: naming a track twice is harmless. */
    if (atomic_load_explicit(&s->trace_session, memory_order_relaxed) == now)
        return;
    atomic_store_explicit(&s->trace_session, now, memory_order_relaxed);
    rill__trace_rec r;
    memset(&r, 0, sizeof r);
    r.type = RILL__TRACE_TRACK;
    r.device = (int8_t)s->q.dev->base.info.ordinal;
    r.stream = s->q.id;
    r.t0 = rill__trace_now();
    r.a = s->kind == RILL__STREAM_DEFAULT;
    rill__mutex_lock(&s->err_lock);
    if (s->name[0] != '\0')
        rill__trace_set_name(&r, s->name);
    else if (s->kind == RILL__STREAM_DEFAULT)
        snprintf(r.name, sizeof r.name, "default (device %d)", s->q.dev->base.info.ordinal);
    else
        snprintf(r.name, sizeof r.name, "%llu", (unsigned long long)s->q.id);
    rill__mutex_unlock(&s->err_lock);
    rill__trace_emit(&r);
}

/* ----------------------------------------------------------- completion */

/* Least seq among s->waiters (UINT64_MAX when empty); wait_lock held. */
static uint64_t waiter_min_locked(rill__stream *s) {
    uint64_t min = UINT64_MAX;
    for (rill__waiter *w = s->waiters; w != NULL; w = w->next)
        if (w->seq < min)
            min = w->seq;
    return min;
}

RILL_HOT void rill__stream_complete(rill__stream *s, uint64_t seq) {
    /* seq_cst store and load: a Dekker pair with rill__stream_add_waiter,
     * which stores waiter_min and then loads done_seq, both seq_cst: either
     * it sees this completion or we see its waiter. The store also
     * publishes the completed command's writes to the acquire loads of
     * done_seq in waits and queries. Both sides pay one locked instruction
     * (an exchange here); the waiter's side used to pay a membarrier
     * system call instead, tens of microseconds on some virtual machines
     * (docs/cpu.md, "Idle and busy"). */
    atomic_store(&s->q.done_seq, seq);
    if (seq >= atomic_load(&s->waiter_min)) {
        rill__waiter *ready = NULL;
        rill__mutex_lock(&s->wait_lock);
        for (rill__waiter **p = &s->waiters; *p != NULL;) {
            rill__waiter *w = *p;
            if (w->seq <= seq) {
                *p = w->next;
                w->next = ready;
                ready = w;
            } else {
                p = &w->next;
            }
        }
        atomic_store_explicit(&s->waiter_min, waiter_min_locked(s), memory_order_relaxed);
        rill__mutex_unlock(&s->wait_lock);
        while (ready != NULL) {
            rill__waiter *w = ready;
            ready = w->next;
            w->fn(w); /* w may be gone once fn returns (or sooner: see wake_host) */
        }
    }
}

bool rill__stream_add_waiter(rill__stream *s, rill__waiter *w) {
    rill__mutex_lock(&s->wait_lock);
    w->next = s->waiters;
    s->waiters = w;
    /* The other half of the Dekker pair in rill__stream_complete: a seq_cst
     * store of waiter_min (even when it does not go down, so that the pair
     * never rests on an older store), then a seq_cst load of done_seq. */
    uint64_t min = atomic_load_explicit(&s->waiter_min, memory_order_relaxed);
    atomic_store(&s->waiter_min, w->seq < min ? w->seq : min);
    if (atomic_load(&s->q.done_seq) >= w->seq) {
        s->waiters = w->next; /* still first: the lock was held throughout */
        atomic_store_explicit(&s->waiter_min, waiter_min_locked(s), memory_order_relaxed);
        rill__mutex_unlock(&s->wait_lock);
        return false;
    }
    rill__mutex_unlock(&s->wait_lock);
    return true;
}

bool rill__stream_remove_waiter(rill__stream *s, rill__waiter *w) {
    bool found = false;
    rill__mutex_lock(&s->wait_lock);
    for (rill__waiter **p = &s->waiters; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            found = true;
            break;
        }
    }
    if (found)
        atomic_store_explicit(&s->waiter_min, waiter_min_locked(s), memory_order_relaxed);
    rill__mutex_unlock(&s->wait_lock);
    return found;
}

/* The clock is a seqlock: writers, serialised by clock_lock, make
 * clock_gen odd while they change entries, so that the pool's safety
 * checks read it without an atomic read-modify-write (which on the hot
 * path would wait for the stores of the submit just before to reach the
 * worker's processor). */
void rill__stream_clock_note(rill__stream *s, uint64_t other_id, uint64_t seq) {
    rill__spinlock_lock(&s->clock_lock);
    uint32_t gen = atomic_load_explicit(&s->clock_gen, memory_order_relaxed);
    atomic_store_explicit(&s->clock_gen, gen + 1, memory_order_relaxed);
    /* release: orders the odd generation before the entries' stores, for
     * readers that see a new entry (their acquire fence). */
    atomic_thread_fence(memory_order_release);
    unsigned slot = s->clock_next, i;
    for (i = 0; i < RILL__CLOCK_ENTRIES; i++)
        if (atomic_load_explicit(&s->clock[i].stream_id, memory_order_relaxed) == other_id)
            break;
    if (i < RILL__CLOCK_ENTRIES) {
        if (seq > atomic_load_explicit(&s->clock[i].seq, memory_order_relaxed))
            atomic_store_explicit(&s->clock[i].seq, seq, memory_order_relaxed);
    } else {
        /* Replace the oldest entry: forgetting only makes the pool wait. */
        atomic_store_explicit(&s->clock[slot].stream_id, other_id, memory_order_relaxed);
        atomic_store_explicit(&s->clock[slot].seq, seq, memory_order_relaxed);
        s->clock_next = (slot + 1) % RILL__CLOCK_ENTRIES;
    }
    /* release: publishes the entries with the even generation. */
    atomic_store_explicit(&s->clock_gen, gen + 2, memory_order_release);
    rill__spinlock_unlock(&s->clock_lock);
}

uint64_t rill__stream_known_after(rill__stream *s, uint64_t other_id) {
    if (s->q.id == other_id)
        return UINT64_MAX;
    for (int spins = 0;; spins++) {
        /* acquire: pairs with the release store of the even generation. */
        uint32_t gen = atomic_load_explicit(&s->clock_gen, memory_order_acquire);
        if ((gen & 1) == 0) {
            uint64_t seq = 0;
            for (unsigned i = 0; i < RILL__CLOCK_ENTRIES; i++) {
                uint64_t e = atomic_load_explicit(&s->clock[i].seq, memory_order_relaxed);
                if (atomic_load_explicit(&s->clock[i].stream_id, memory_order_relaxed) ==
                        other_id &&
                    e > seq)
                    seq = e;
            }
            /* acquire: orders the entries' loads before the generation's
             * reload (pairs with the release fence of a writer). */
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->clock_gen, memory_order_relaxed) == gen)
                return seq;
        }
        if (spins < 64)
            rill__cpu_relax();
        else
            rill__thread_yield(); /* a writer was preempted mid-note */
    }
}

bool rill__stream_ordered_after(rill__stream *s, uint64_t other_id, uint64_t seq) {
    return rill__stream_known_after(s, other_id) >= seq;
}

static rill_status lost(rill__stream *s, const char *fn, const char *what) {
    char name[80];
    const rill__device_base *b = rill__device_base_of(s->q.dev);
    rill__stream_name(s, name, sizeof name);
    return rill__fail(RILL_ERROR_DEVICE_LOST,
                      "%s%sstream %s: device %d (%s) was lost (%s)%s; only rill_shutdown and a new "
                      "runtime recover it",
                      fn != NULL ? fn : "", fn != NULL ? ": " : "", name, b->info.ordinal,
                      b->info.name, b->lost_why, what);
}

rill_status rill__stream_check_lost(rill__stream *s, const char *fn) {
    if (!atomic_load_explicit(&rill__device_base_of(s->q.dev)->lost, memory_order_acquire))
        return RILL_OK;
    return lost(s, fn, ", and its streams' work may not have run");
}

/* A submission to a stream of a lost device (rill__device_lost). */
static rill_status refuse_lost(rill__stream *s) {
    return lost(s, NULL, ", and takes no more work");
}

RILL_HOT rill_status rill__stream_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    uint64_t unused;
    if (__builtin_expect(
            atomic_load_explicit(&rill__device_base_of(s->q.dev)->lost, memory_order_acquire) != 0,
            0))
        return refuse_lost(s);
    rill__cmd named;
    if (__builtin_expect(rill__tls_op_name != NULL, 0)) {
        named = *cmd;
        named.op_name = rill__tls_op_name;
        cmd = &named;
    }
    if (rill__stream_capturing(s))
        return rill__capture_submit(s, cmd, seq != NULL ? seq : &unused);
    return rill__stream_submit_now(s, cmd, seq);
}

RILL_HOT rill_status rill__stream_submit_now(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    uint64_t unused;
    rill__queue_charge(s, cmd);
    rill_status st = s->q.dev->ops->submit(s, cmd, seq != NULL ? seq : &unused);
    if (__builtin_expect(st != RILL_OK, 0))
        rill__queue_discharge(s, cmd);
    return st;
}

/* ---------------------------------------------------------------- public */

static int clamp_priority(rill__device *dev, int priority) {
    if (priority < dev->base.info.greatest_priority)
        return dev->base.info.greatest_priority;
    if (priority > dev->base.info.least_priority)
        return dev->base.info.least_priority;
    return priority;
}

rill_status rill_stream_create(rill_device *dev_h, int priority, rill_stream **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_create: out is NULL; pass the address of a rill_stream * to "
                          "receive the stream");
    *out = NULL;
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_stream_create", &dev);
    if (st != RILL_OK)
        return st;
    rill__stream *s;
    st = rill__stream_new(dev, clamp_priority(dev, priority), RILL__STREAM_USER, &s);
    if (st != RILL_OK)
        return rill__fail_from(st, "rill_stream_create");
    *out = s->handle;
    return RILL_OK;
}

static void release_stream(void *s) {
    rill__stream_unref(s);
}

rill_status rill_stream_destroy(rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    if (stream_h == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_destroy: stream is NULL; pass a stream from "
                          "rill_stream_create");
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_destroy", &stream);
    if (st != RILL_OK)
        return st;
    if (stream->kind != RILL__STREAM_USER)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_destroy: %s is owned by the library and lives until "
                          "rill_shutdown; destroy only streams from rill_stream_create",
                          kind_label(stream->kind));
    if (atomic_exchange(&stream->owner_released, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_destroy: the stream was already destroyed");
    atomic_store(&stream->magic, RILL__MAGIC_DEAD);
    rill__handle_close(stream->handle); /* stale from here on, zombie or not */
    /* A capture the stream belongs to ends (origin) or is invalidated
     * (forked stream); the capture's reference keeps the stream until then. */
    rill__capture_stream_destroyed(stream);
    /* Pending work keeps its own reference: the stream is a zombie until
     * that work completes. Calls that found the stream before its handle
     * closed may still submit to it (core/calls.h). */
    rill__retire(release_stream, stream, RILL__RETIRE_BATCHED);
    return RILL_OK;
}

rill_status rill_stream_set_name(rill_stream *stream_h, const char *name) {
    RILL_CALL_SCOPE();
    if (name == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_set_name: name is NULL; pass a name for traces and reports, "
                          "or \"\" for none");
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_set_name", &stream);
    if (st != RILL_OK)
        return st;
    rill__mutex_lock(&stream->err_lock);
    snprintf(stream->name, sizeof stream->name, "%s", name);
    rill__mutex_unlock(&stream->err_lock);
    atomic_store_explicit(&stream->trace_session, 0, memory_order_relaxed); /* named again */
    return RILL_OK;
}

rill_status rill_stream_get_priority(rill_stream *stream_h, int *priority) {
    RILL_CALL_SCOPE();
    if (priority == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_get_priority: priority is NULL; pass the address of an int "
                          "to receive the priority");
    *priority = 0;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_get_priority", &stream);
    if (st == RILL_OK)
        *priority = stream->q.priority;
    return st;
}

rill_status rill_stream_native(rill_stream *stream_h, void **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_stream_native: out is NULL; pass the address of a void * to receive "
            "the native stream");
    *out = NULL;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_native", &stream);
    if (st == RILL_OK && stream->q.dev->ops->stream_native != NULL)
        *out = stream->q.dev->ops->stream_native(stream);
    return st;
}

rill_status rill_stream_get_device(rill_stream *stream_h, rill_device **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_get_device: out is NULL; pass the address of a rill_device "
                          "* to receive the device");
    *out = NULL;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_get_device", &stream);
    if (st == RILL_OK)
        *out = stream->q.dev->handle;
    return st;
}

rill_status rill_stream_query(rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    char msg[RILL__ERROR_BYTES];
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_query", &stream);
    if (st != RILL_OK)
        return st;
    st = rill__capture_check_stream_sync(stream, "rill_stream_query");
    if (st != RILL_OK)
        return st;
    /* acquire: pairs with the submit that assigned the sequence number. */
    uint64_t seq = atomic_load_explicit(&stream->q.sub_seq, memory_order_acquire);
    if ((st = rill__stream_check_lost(stream, "rill_stream_query")) != RILL_OK)
        return st;
    if (rill__stream_failed_at(stream, seq, msg, sizeof msg))
        return rill__fail(RILL_ERROR_KERNEL_FAILED, "rill_stream_query: %s", msg);
    if (rill__stream_reached(stream, seq)) {
        if (rill__san_active())
            rill__san()->observed(stream, seq, true);
        return RILL_OK;
    }
    /* A program that polls needs a worker to run what it polls for. */
    if (stream->q.dev->ops->kick != NULL)
        stream->q.dev->ops->kick(stream);
    return RILL_NOT_READY;
}

/* rill_stream_synchronize and rill_stream_synchronize_for (deadline
 * UINT64_MAX: none); outermost: RILL_CALL_OUTERMOST() of the call. */
static rill_status stream_sync(rill_stream *stream_h, uint64_t deadline_ns, bool outermost,
                               const char *fn) {
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    st = rill__capture_check_stream_sync(stream, fn);
    if (st != RILL_OK)
        return st;
    uint64_t seq = atomic_load_explicit(&stream->q.sub_seq, memory_order_acquire);
    uint64_t t0 = rill__tracing() ? rill__trace_now() : 0;
    /* Its uses of stream after the wait hold it: another thread may
     * destroy the stream while this one sleeps. */
    st = rill__stream_wait_status(stream, seq, outermost ? RILL__WAIT_PARKS_HOLDING : 0,
                                  deadline_ns, fn);
    if (t0 != 0)
        rill__trace_blocked(fn, stream, t0);
    if (st != RILL_NOT_READY && rill__san_active())
        rill__san()->observed(stream, seq, true);
    return st;
}

rill_status rill_stream_synchronize(rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    return stream_sync(stream_h, UINT64_MAX, RILL_CALL_OUTERMOST(), "rill_stream_synchronize");
}

rill_status rill_stream_synchronize_for(rill_stream *stream_h, uint64_t timeout_ns) {
    RILL_CALL_SCOPE();
    return stream_sync(stream_h, rill__deadline_after(timeout_ns), RILL_CALL_OUTERMOST(),
                       "rill_stream_synchronize_for");
}

/* Makes stream wait until other has completed seq. Shared by
 * rill_stream_wait_event, rill_stream_wait_stream and the library's own
 * waits (flags: RILL__CMD_ORDER_ONLY or 0). */
static rill_status wait_point(rill__stream *stream, rill__stream *other, uint64_t seq,
                              unsigned flags, const char *fn) {
    if (other == stream || seq == 0)
        return RILL_OK; /* stream order already implies it */
    if (rill__stream_reached(other, seq) &&
        ((flags & RILL__CMD_ORDER_ONLY) || !rill__stream_failed_at(other, seq, NULL, 0))) {
        rill__stream_clock_note(stream, other->q.id, seq);
        if (rill__san_active())
            rill__san()->order(stream, other, seq, false);
        return RILL_OK;
    }
    rill__cmd cmd = {.kind = RILL__CMD_WAIT, .flags = flags};
    /* Waiting behind work that may wait for anything makes this stream's
     * later work such work too. */
    if (rill__stream_opaque_pending(other))
        cmd.flags |= RILL__CMD_OPAQUE;
    rill__stream_ref(other);
    cmd.u.wait.stream = other;
    cmd.u.wait.seq = seq;
    rill_status st = rill__stream_submit(stream, &cmd, NULL);
    if (st != RILL_OK) {
        rill__stream_unref(other);
        return rill__fail_from(st, fn); /* the backend's or the capture's sentence */
    }
    /* Noted only once the wait is queued: the pool hands a block to work
     * that another thread submits to this stream from the moment the note
     * is visible, and that work must come after the wait. */
    rill__stream_clock_note(stream, other->q.id, seq);
    if (rill__san_active())
        rill__san()->order(stream, other, seq, false);
    return RILL_OK;
}

rill_status rill__stream_wait_point(rill__stream *stream, rill__stream *other, uint64_t seq,
                                    const char *fn) {
    return wait_point(stream, other, seq, 0, fn);
}

rill_status rill__stream_wait_order(rill__stream *stream, rill__stream *other, uint64_t seq,
                                    const char *fn) {
    return wait_point(stream, other, seq, RILL__CMD_ORDER_ONLY, fn);
}

rill_status rill_stream_wait_stream(rill_stream *stream_h, rill_stream *other_h) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_wait_stream", &stream);
    if (st != RILL_OK)
        return st;
    rill__stream *other;
    st = rill__stream_resolve(other_h, "rill_stream_wait_stream", &other);
    if (st != RILL_OK)
        return st;
    st = rill__stream_make_room(stream, false, "rill_stream_wait_stream");
    if (st != RILL_OK)
        return st;
    bool captured;
    st = rill__capture_wait_stream(stream, other, &captured);
    if (captured)
        return st;
    uint64_t seq = atomic_load_explicit(&other->q.sub_seq, memory_order_acquire);
    st = rill__stream_wait_point(stream, other, seq, "rill_stream_wait_stream");
    if (st == RILL_OK && other != stream && rill__san_active())
        rill__san()->order(stream, other, seq, true);
    return st;
}

rill_status rill_stream_clear_error(rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_stream_clear_error", &stream);
    if (st != RILL_OK)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_CLEAR};
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    /* The work submitted from now on runs: an open failure window ends at
     * the clear already, so that queries and waits for that work made
     * before the clear has run do not report the failure. (A failure still
     * to come before the clear opens a window that the clear closes when it
     * runs.) */
    if (st == RILL_OK && seq != 0)
        rill__stream_clear_failure(stream, seq);
    return st;
}

rill_status rill__stream_tagged(rill__device *dev, const char *tag, int priority,
                                rill__stream **out) {
    rill_status st;
    rill__mutex_lock(&dev->lock);
    for (rill__tagged_stream *t = dev->tagged; t != NULL; t = t->next) {
        if (strcmp(t->tag, tag) == 0) {
            *out = t->stream;
            rill__mutex_unlock(&dev->lock);
            return RILL_OK;
        }
    }
    rill__mutex_unlock(&dev->lock);
    /* Create outside the lock (stream creation takes dev->lock), then
     * publish unless another thread won the race. */
    rill__stream *s;
    st = rill__stream_new(dev, clamp_priority(dev, priority), RILL__STREAM_TAGGED, &s);
    if (st != RILL_OK)
        return rill__fail_from(st, "rill_stream_get_tagged");
    snprintf(s->name, sizeof s->name, "%s", tag);
    rill__tagged_stream *t = rill__malloc(sizeof *t);
    char *copy = rill__strdup(tag);
    if (t == NULL || copy == NULL) {
        rill__free(t);
        rill__free(copy);
        atomic_store(&s->owner_released, 1);
        rill__stream_unref(s);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "rill_stream_get_tagged: out of host memory; no stream was created");
    }
    rill__mutex_lock(&dev->lock);
    for (rill__tagged_stream *o = dev->tagged; o != NULL; o = o->next) {
        if (strcmp(o->tag, tag) == 0) {
            *out = o->stream;
            rill__mutex_unlock(&dev->lock);
            rill__free(t);
            rill__free(copy);
            atomic_store(&s->owner_released, 1);
            rill__stream_unref(s);
            return RILL_OK;
        }
    }
    t->tag = copy;
    t->stream = s;
    t->next = dev->tagged;
    dev->tagged = t;
    rill__mutex_unlock(&dev->lock);
    *out = s;
    return RILL_OK;
}

rill_status rill_stream_get_tagged(rill_device *dev_h, const char *tag, int priority,
                                   rill_stream **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_get_tagged: out is NULL; pass the address of a rill_stream "
                          "* to receive the stream");
    *out = NULL;
    if (tag == NULL || tag[0] == '\0')
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_stream_get_tagged: the tag is NULL or empty; pass a name such as "
                          "\"comm\"");
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_stream_get_tagged", &dev);
    if (st != RILL_OK)
        return st;
    rill__stream *s;
    st = rill__stream_tagged(dev, tag, priority, &s);
    if (st == RILL_OK)
        *out = s->handle;
    return st;
}
