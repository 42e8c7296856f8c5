/* SPDX-License-Identifier: MIT */
/* Back-pressure: the bounds on what streams hold queued, and the wait of a
 * submitting thread that finds them reached (rill.h, "Queue bounds").
 *
 * A stream holds at most `commands` commands submitted and not completed
 * (sub_seq - done_seq <= commands, give or take the submissions that
 * threads make at the same moment); a device's streams together hold at
 * most `bytes`: sum over its streams of (sub_seq - done_seq) * cmd_bytes,
 * plus queued_extra_bytes (the large arguments). The public calls that
 * queue a command check both before they take any lock or resolve any
 * other handle (rill__stream_make_room); the library's own commands are
 * counted but never wait. */
#ifndef RILL_CORE_QUEUE_LIMIT_H
#define RILL_CORE_QUEUE_LIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hooks.h"
#include "core/stream.h"

/* The queue bounds' part in the runtime's life (core/hooks.h): at the
 * runtime's start, RILL_QUEUE_LIMIT is read, and the bounds start from it,
 * or from the defaults. */
extern const rill__subsystem rill__queue_limit_subsystem;

/* The slow path of rill__stream_make_room: checks the bounds, and waits
 * (until deadline_ns at most; UINT64_MAX: none) while they are reached and
 * the calling thread may wait. RILL_OK when s may take a command,
 * RILL_NOT_READY when the deadline came first, RILL_ERROR_INVALID_ARGUMENT
 * (naming fn) when RILL_QUEUE_LIMIT is not a number. outermost: the call
 * is the thread's outermost (RILL_CALL_OUTERMOST), and holds no object but
 * s that it uses after this returns. */
rill_status rill__queue_make_room(rill__stream *s, bool outermost, uint64_t deadline_ns,
                                  const char *fn);

/* Waits, where the bounds say so, until s may take another command: the
 * first step of a public call that queues one, after resolving s. Costs
 * two loads of the line that submit writes anyway while the stream is
 * known to have room. */
static inline rill_status rill__stream_make_room(rill__stream *s, bool outermost, const char *fn) {
    rill__queue *q = rill__queue_of(s);
    /* relaxed: a hint; the slow path reads the counters with acquire. */
    if (__builtin_expect(atomic_load_explicit(&q->sub_seq, memory_order_relaxed) <
                             atomic_load_explicit(&q->room_seq, memory_order_relaxed),
                         1))
        return RILL_OK;
    return rill__queue_make_room(s, outermost, UINT64_MAX, fn);
}

/* Counts a command's extra_bytes against its device as it enters the
 * backend's queue, and gives them back (rill__cmd_release). */
static inline void rill__queue_charge(rill__stream *s, const rill__cmd *cmd) {
    if (__builtin_expect(cmd->extra_bytes != 0, 0)) {
        /* relaxed: a count; the bound reads it as an estimate. */
        atomic_fetch_add_explicit(&s->q.dev->queued_extra_bytes, cmd->extra_bytes,
                                  memory_order_relaxed);
        /* The stream's next submission checks the device's bound: large
         * arguments pass it by one command at most. */
        atomic_store_explicit(&s->q.room_seq, 0, memory_order_relaxed);
    }
}
static inline void rill__queue_discharge(rill__stream *s, const rill__cmd *cmd) {
    if (__builtin_expect(cmd->extra_bytes != 0, 0))
        atomic_fetch_sub_explicit(&s->q.dev->queued_extra_bytes, cmd->extra_bytes,
                                  memory_order_relaxed);
}

#endif
