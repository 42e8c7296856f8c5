/* SPDX-License-Identifier: MIT */
/* Back-pressure: the queue bounds, their setting, and the wait of a thread
 * that submits to a full queue (core/queue_limit.h; rill.h, "Queue
 * bounds"). Core code for every backend: the counts are the streams'
 * sequence numbers and the backend's cmd_bytes.
 *
 * A full queue makes the submitting thread wait until its stream (or the
 * device's fullest stream) has run down to half the bound, so that a long
 * run of submissions wakes the thread once per half a queue, not once per
 * command. The wait never starts where it could be the thread's own
 * deadlock: on a worker (a host function, a kernel), for a capturing
 * stream, or behind work that may wait for something the library cannot
 * see (an opaque command: a host function, another process) once that
 * work has not moved for STALL_NS. */
#include "core/queue_limit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/calls.h"
#include "util/status.h"

/* Bounds the default allows: CUDA's queue of pending launches is about
 * 1024 deep; queued commands may take 1/DEVICE_SHARE of the device's
 * memory (rill_device_info.memory_bytes). */
#define DEFAULT_COMMANDS 1024u
#define DEVICE_SHARE     32u
/* A stream with room is checked again after this many submissions at most,
 * so that a change of the bounds and the device's total are seen soon. */
#define CHECK_EVERY 64u
/* How often a device's queued bytes are summed over its streams at most,
 * while they are below its bound. */
#define SUM_EVERY_NS 1000000u
/* How long a wait behind opaque work waits for it to move before the
 * thread goes on past the bound (see the file's comment). */
#define STALL_NS 200000000u

/* relaxed: settings, read as hints by the checks. */
static _Atomic size_t limit_commands = DEFAULT_COMMANDS; /* per stream; 0: no bounds */
static _Atomic size_t limit_bytes;                       /* per device; 0: the default */
/* written at runtime initialisation, before any submission */
static char env_error[256];
static _Atomic int env_bad;

static void queue_limit_start(struct rill__runtime *rt) {
    (void)rt;
    atomic_store(&env_bad, 0);
    atomic_store(&limit_bytes, 0);
    const char *env = getenv("RILL_QUEUE_LIMIT");
    if (env == NULL || env[0] == '\0') {
        atomic_store(&limit_commands, DEFAULT_COMMANDS);
        return;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(env, &end, 10);
    if (errno != 0 || end == env || *end != '\0' || env[0] == '-' || n > SIZE_MAX) {
        snprintf(env_error, sizeof env_error,
                 "RILL_QUEUE_LIMIT='%.40s' is not a number of commands; set it to the most "
                 "commands a stream may hold queued (such as 1024; 0: no bound), or unset it",
                 env);
        atomic_store(&env_bad, 1);
        return;
    }
    atomic_store(&limit_commands, (size_t)n);
}

const rill__subsystem rill__queue_limit_subsystem = {
    .name = "queue bounds",
    .start = queue_limit_start,
};

/* The bound on dev's queued bytes (0: none). */
static size_t device_bound(rill__device *dev) {
    size_t b = atomic_load_explicit(&limit_bytes, memory_order_relaxed);
    return b != 0 ? b : dev->base.info.memory_bytes / DEVICE_SHARE;
}

/* Whether dev's queued commands reach its bound, as a submitter to a
 * stream with pending commands queued finds it; if so, *most gets its
 * stream with the most pending commands (a reference) and *target the
 * number that stream must complete for half of them to be done.
 *
 * Summing over the device's streams costs a walk of them all, so while
 * the last sum (with the extra bytes as they are now) is below the bound,
 * only a stream with CHECK_EVERY commands queued sums again, once per
 * SUM_EVERY_NS, and others take the last sum: a device of many streams
 * that each take a few commands (a capture that forks 40,000 of them)
 * must not walk them at each submission. Streams with fewer commands
 * queued than that are counted but do not wait for the device's bound. */
static bool device_full(rill__device *dev, uint64_t own, rill__stream **most, uint64_t *target) {
    size_t bound = device_bound(dev);
    if (bound == 0)
        return false;
    size_t extra = atomic_load_explicit(&dev->queued_extra_bytes, memory_order_relaxed);
    /* relaxed: hints (see queued_summed_bytes). */
    if (extra + atomic_load_explicit(&dev->queued_summed_bytes, memory_order_relaxed) < bound) {
        if (own < CHECK_EVERY)
            return false;
        uint64_t now = rill__now_ns();
        uint64_t last = atomic_load_explicit(&dev->queued_summed_ns, memory_order_relaxed);
        if (now - last < SUM_EVERY_NS ||
            !atomic_compare_exchange_strong_explicit(&dev->queued_summed_ns, &last, now,
                                                     memory_order_relaxed, memory_order_relaxed))
            return false; /* below the bound when last summed, or another thread sums now */
    }
    size_t per_cmd = dev->ops->cmd_bytes;
    size_t bytes = 0;
    rill__stream *m = NULL;
    uint64_t m_sub = 0, m_pending = 0;
    rill__mutex_lock(&dev->lock);
    for (rill__link *l = dev->streams; l != NULL; l = l->next) {
        rill__stream *s = RILL__OWNER(l, rill__stream, dev_link);
        if (s->kind == RILL__STREAM_PROXY)
            continue; /* it runs no work: its numbers stand for other processes' */
        /* done first, as in rill__queue_make_room: pending never wraps. */
        uint64_t done = atomic_load_explicit(&s->q.done_seq, memory_order_acquire);
        uint64_t sub = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
        uint64_t pending = sub > done ? sub - done : 0;
        bytes += (size_t)pending * per_cmd;
        if (pending > m_pending) {
            m = s;
            m_sub = sub;
            m_pending = pending;
        }
    }
    atomic_store_explicit(&dev->queued_summed_bytes, bytes, memory_order_relaxed);
    bool full = bytes + extra >= bound && m != NULL && rill__stream_try_ref(m);
    rill__mutex_unlock(&dev->lock);
    if (full) {
        *most = m;
        *target = m_sub - m_pending / 2;
    }
    return full;
}

typedef enum { DRAINED, GAVE_UP, TIMED_OUT } drain_result;

/* Waits until t completes target, or the deadline passes, or (behind
 * opaque work) t has not moved for STALL_NS, counted from the first wait
 * that found it where it is: a thread that waits in slices (the timed
 * call) gives up as one long wait would. */
static drain_result drain(rill__stream *t, uint64_t target, unsigned flags, uint64_t deadline_ns) {
    if (!rill__stream_opaque_pending(t))
        return rill__stream_host_wait_until(t, target, flags, deadline_ns) ? DRAINED : TIMED_OUT;
    /* acquire: pairs with the release store in rill__stream_complete. */
    uint64_t done = atomic_load_explicit(&t->q.done_seq, memory_order_acquire);
    uint64_t now = rill__now_ns();
    /* relaxed: hints (see stuck_mark). */
    if (atomic_load_explicit(&t->stuck_mark, memory_order_relaxed) != done + 1) {
        atomic_store_explicit(&t->stuck_since_ns, now, memory_order_relaxed);
        atomic_store_explicit(&t->stuck_mark, done + 1, memory_order_relaxed);
    }
    uint64_t give_up = atomic_load_explicit(&t->stuck_since_ns, memory_order_relaxed) + STALL_NS;
    if (now >= give_up)
        return GAVE_UP; /* stuck here for STALL_NS, as other waits found */
    if (rill__stream_host_wait_until(t, target, flags,
                                     give_up < deadline_ns ? give_up : deadline_ns))
        return DRAINED;
    if (atomic_load_explicit(&t->q.done_seq, memory_order_acquire) != done)
        return DRAINED; /* it moves: look again */
    return rill__now_ns() >= give_up ? GAVE_UP : TIMED_OUT;
}

rill_status rill__queue_make_room(rill__stream *s, bool outermost, uint64_t deadline_ns,
                                  const char *fn) {
    if (atomic_load_explicit(&env_bad, memory_order_relaxed))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s", fn, env_error);
    /* A worker (a host function, a kernel, a host thread running work as
     * one) may be the work that would have to run for the queue to drain;
     * a capturing stream queues nothing. Neither waits, nor moves room_seq,
     * so that the stream's next submitter checks. */
    if (rill__thread_is_worker() || rill__stream_capturing(s))
        return RILL_OK;
    size_t limit = atomic_load_explicit(&limit_commands, memory_order_relaxed);
    rill__queue *q = rill__queue_of(s);
    for (;;) {
        /* acquire: pairs with rill__stream_complete's and submit's release.
         * done first: read after it, sub is at least what done has reached,
         * so sub - done never wraps (read the other way round, a command
         * completing between the loads made it 2^64 - 1 and the thread
         * waited for a number the stream never reaches). */
        uint64_t done = atomic_load_explicit(&q->done_seq, memory_order_acquire);
        uint64_t sub = atomic_load_explicit(&q->sub_seq, memory_order_acquire);
        uint64_t pending = sub > done ? sub - done : 0;
        rill__stream *t = NULL; /* the stream to wait for */
        uint64_t target = 0;
        bool full = false, held = false; /* held: a reference on t, from device_full */
        if (limit != 0 && pending >= limit) {
            t = s;
            target = sub - limit / 2;
            full = true;
        } else if (limit != 0) {
            full = held = device_full(q->dev, pending, &t, &target);
        }
        if (!full) {
            uint64_t room = sub + CHECK_EVERY;
            if (limit != 0 && done + limit < room)
                room = done + limit;
            atomic_store_explicit(&q->room_seq, room, memory_order_relaxed);
            return RILL_OK;
        }
        /* Waits on s may park the call, which holds s (the caller uses
         * nothing else after this); a wait on another stream holds that
         * one and does not park. */
        unsigned flags = t == s && outermost ? RILL__WAIT_PARKS_HOLDING : 0;
        drain_result r = drain(t, target, flags, deadline_ns);
        if (held)
            rill__stream_unref(t);
        if (r == TIMED_OUT)
            return RILL_NOT_READY;
        if (r == GAVE_UP) {
            /* Past the bound: the next CHECK_EVERY submissions go on, and
             * then find the queue stuck where it was, or moving again. */
            atomic_store_explicit(&q->room_seq, sub + CHECK_EVERY, memory_order_relaxed);
            return RILL_OK;
        }
    }
}

/* ---------------------------------------------------------------- public */

rill_status rill_set_queue_limit(size_t commands, size_t bytes) {
    RILL_CALL_SCOPE();
    rill__runtime_enter(); /* which reads RILL_QUEUE_LIMIT first, when it starts */
    atomic_store_explicit(&limit_commands, commands, memory_order_relaxed);
    atomic_store_explicit(&limit_bytes, bytes, memory_order_relaxed);
    return RILL_OK;
}

rill_status rill_get_queue_limit(rill_device *dev_h, size_t *commands, size_t *bytes) {
    RILL_CALL_SCOPE();
    if (commands != NULL)
        *commands = 0;
    if (bytes != NULL)
        *bytes = 0;
    if (commands == NULL || bytes == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_get_queue_limit: commands or bytes is NULL; pass the addresses of "
                          "two size_t to receive the bounds");
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_get_queue_limit", &dev);
    if (st != RILL_OK)
        return st;
    size_t limit = atomic_load_explicit(&limit_commands, memory_order_relaxed);
    *commands = limit;
    *bytes = limit != 0 ? device_bound(dev) : 0;
    return RILL_OK;
}

rill_status rill_stream_make_room_for(rill_stream *stream_h, uint64_t timeout_ns) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_stream_make_room_for";
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    return rill__queue_make_room(stream, RILL_CALL_OUTERMOST(), rill__deadline_after(timeout_ns),
                                 fn);
}
