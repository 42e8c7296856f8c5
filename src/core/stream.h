/* SPDX-License-Identifier: MIT */
/* Streams: sequence counters, sticky-error windows, waiters, host waits.
 *
 * Invariants: 0 <= done_seq <= sub_seq; commands complete in order. Each
 * failure window [lo, hi) holds the sequence numbers whose work failed or
 * was skipped (hi == UINT64_MAX while the failure is not cleared); windows
 * are disjoint and sorted: windows[i].hi <= windows[i+1].lo. */
#ifndef RILL_CORE_STREAM_H
#define RILL_CORE_STREAM_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/hooks.h"
#include "core/runtime.h"
#include "util/status.h"

/* Size of a buffer that holds a whole sentence about a failure, as
 * rill_last_error() may return it. */
#define RILL__ERROR_BYTES RILL__LAST_ERROR_BYTES

typedef enum rill__stream_kind {
    RILL__STREAM_USER = 0, /* rill_stream_create; the caller destroys it */
    RILL__STREAM_DEFAULT,  /* the device's default stream */
    RILL__STREAM_TAGGED,   /* rill_stream_get_tagged */
    RILL__STREAM_PROXY     /* numbers waits for other processes (event_ipc.c); runs no
                            * work, so device-wide waits pass it by */
} rill__stream_kind;

/* Sequence numbers [lo, hi) of a stream whose work failed or was skipped. */
typedef struct rill__fail_window {
    uint64_t lo, hi;
    char *message;      /* owned: the root cause, then how it reached this stream */
    size_t cause_bytes; /* the root cause's length at the start of message */
} rill__fail_window;

/* How many other streams' wait points a stream remembers (see clock). */
#define RILL__CLOCK_ENTRIES 8

struct rill__stream {
    /* what the backend reads and writes (backend.h): the identity, the
     * device (borrowed: outlives this), the priority, the backend's state
     * and the sequence counters; first, so rill__queue_of can find it */
    rill__queue q;
    _Atomic uint32_t magic;
    /* immutable after create */
    rill_stream *handle; /* its handle (handle.h), closed by destroy or free */
    rill__stream_kind kind;
    /* the capture the stream belongs to, or NULL; written under the
     * capture's lock by begin/end capture and forks (src/graph/capture.c) */
    _Atomic(struct rill__capture *) capture;
    /* guarded by err_lock (the name too: set_name may race with errors) */
    rill__mutex err_lock;
    char name[64];
    /* the trace that last named the stream's track (rill__trace_stream_track);
     * relaxed: naming a track twice is harmless */
    _Atomic uint32_t trace_session;
    rill__fail_window *windows; /* owned, or first_window */
    size_t num_windows, cap_windows;
    rill__fail_window first_window;
    /* guarded by dev->lock; a stream stays listed until it is freed */
    rill__link dev_link; /* on dev->streams */
    /* guarded by wait_lock */
    rill__mutex wait_lock;
    rill__waiter *waiters;
    /* for other streams (by id), the highest seq that this stream's later
     * work is ordered after, learned from the waits submitted to it (a
     * partial vector clock; forgetting is safe): written under clock_lock,
     * read without it through clock_gen, a seqlock (odd while written) */
    rill__spinlock clock_lock;
    _Atomic uint32_t clock_gen;
    struct {
        _Atomic uint64_t stream_id;
        _Atomic uint64_t seq;
    } clock[RILL__CLOCK_ENTRIES];
    unsigned clock_next; /* guarded by clock_lock: the entry to replace next */
    /* atomic */
    /* on its own line: taken and dropped by submitters, workers and the
     * memory pool, it must not drag the completion fields along */
    alignas(64) _Atomic int refs;           /* owner, pending work, events, waits, memory */
    alignas(64) _Atomic int owner_released; /* destroyed by its owner (a zombie if work remains) */
    _Atomic int has_failed;                 /* num_windows != 0, for a lock-free fast path */
    _Atomic uint64_t waiter_min;            /* least seq in waiters; UINT64_MAX: none */
    /* done_seq + 1 when a wait for room in a queue (core/queue_limit.c)
     * first found this stream's work stuck where it is, work that may wait
     * for the waiting thread (opaque), and since when (0: never); the waits
     * of all threads, and successive timed ones, count from then. Relaxed:
     * hints, whose races only move when a wait gives up. */
    _Atomic uint64_t stuck_mark;
    _Atomic uint64_t stuck_since_ns;
    /* the backend's state, rill__backend_ops.stream_state_bytes long: q.state */
    alignas(64) unsigned char backend[];
};

/* Creates a stream of the given kind (priority already clamped). Its
 * failure sentence names no public call: the caller adds its own
 * (rill__fail_from). */
rill_status rill__stream_new(rill__device *dev, int priority, rill__stream_kind kind,
                             rill__stream **out);
/* Resolves a stream argument: NULL means the current stream of the current
 * device; a bad handle is RILL_ERROR_INVALID_ARGUMENT naming fn. */
rill_status rill__stream_resolve(rill_stream *handle, const char *fn, rill__stream **out);
/* The tagged stream tag of dev, created at first use with priority
 * (rill_stream_get_tagged, and the library's own tagged streams). */
rill_status rill__stream_tagged(rill__device *dev, const char *tag, int priority,
                                rill__stream **out);
/* Takes a reference on a stream found on its device's list (dev->lock
 * held) unless its last reference is gone: such a stream is being freed and
 * waits for that lock to leave the list, so it must not be held again.
 * True when the reference was taken. */
bool rill__stream_try_ref(rill__stream *s);
/* Frees s whatever its references (rill_shutdown, once all work drained). */
void rill__stream_free(rill__stream *s);

/* Checks the invariants of s that hold at any moment (done_seq <= sub_seq,
 * the opaque mark at most one past the submitted numbers, the failure windows sorted
 * and apart, waiter_min a lower bound of the waiters): false, with a
 * sentence naming the first broken one in why (cap bytes), when one does
 * not hold. Takes s's err_lock and wait_lock, one after the other; for
 * tests and debugging. */
bool rill__stream_check(rill__stream *s, char *why, size_t cap);
/* True when the work up to seq failed; writes into msg the sentence for
 * the caller to put after its function's name: the root cause once, the
 * streams it reached, and what the stream does until cleared. */
bool rill__stream_failed_at(rill__stream *s, uint64_t seq, char *msg, size_t size);
/* RILL_ERROR_DEVICE_LOST, with a sentence naming fn, once s's device was
 * lost (rill__device_lost): whatever its streams did before, their work may
 * not have run, as CUDA reports its error for every stream of the
 * context. RILL_OK otherwise. */
rill_status rill__stream_check_lost(rill__stream *s, const char *fn);

/* How rill__stream_host_wait waits (flags). */
enum {
    /* Sleep at once (blocking-sync events). Without it the thread first
     * runs the work itself where the backend lets it (a host thread, and no
     * worker has taken it), then spins briefly, then sleeps. */
    RILL__WAIT_BLOCKING = 1,
    /* The caller holds a reference to every object that it uses after the
     * wait until its call returns: the sleep parks the call (core/calls.h),
     * so that objects destroyed meanwhile need not wait for it. */
    RILL__WAIT_PARKS = 2,
    /* The same for a caller that holds a reference to every such object
     * but s: the sleep takes one on s, which the call drops as it returns. */
    RILL__WAIT_PARKS_HOLDING = 4,
};

/* The stream whose dev_link l is (NULL for NULL): walks dev->streams. */
static inline rill__stream *rill__stream_of_dev_link(rill__link *l) {
    return l != NULL ? RILL__OWNER(l, rill__stream, dev_link) : NULL;
}
/* Whether s has completed seq. */
static inline bool rill__stream_reached(rill__stream *s, uint64_t seq) {
    /* acquire: pairs with the release store in rill__stream_complete. */
    return atomic_load_explicit(&s->q.done_seq, memory_order_acquire) >= seq;
}
/* Takes w off s's waiters (rill__stream_add_waiter): true when it was
 * still there, false when a completer took it first (and then called, or
 * is calling, w->fn). */
bool rill__stream_remove_waiter(rill__stream *s, rill__waiter *w);

/* Host waits (stream_wait.c).
 * Blocks the calling thread until s completes seq (flags: RILL__WAIT_*). A
 * sleeping thread is a waiter of s, which the thread that completes seq
 * wakes. */
void rill__stream_host_wait(rill__stream *s, uint64_t seq, unsigned flags);
/* The same until rill__now_ns() reaches deadline_ns at most (UINT64_MAX:
 * no deadline): true when s completed seq, false when the deadline came
 * first. A wait with a deadline runs the work itself (host_help) only
 * while s has none pending that may wait for anything (opaque). */
bool rill__stream_host_wait_until(rill__stream *s, uint64_t seq, unsigned flags,
                                  uint64_t deadline_ns);
/* Waits for seq until deadline_ns (UINT64_MAX: none) and turns a failure
 * into RILL_ERROR_KERNEL_FAILED; RILL_NOT_READY when the deadline came
 * first. */
rill_status rill__stream_wait_status(rill__stream *s, uint64_t seq, unsigned flags,
                                     uint64_t deadline_ns, const char *fn);
/* The deadline of a wait of at most timeout_ns from now, below UINT64_MAX
 * (which means no deadline) however long the timeout. */
uint64_t rill__deadline_after(uint64_t timeout_ns);

/* Makes stream's later work wait until other completes seq (nothing when
 * that is already implied or done). fn names the public call. A failure
 * of the awaited work fails stream's later work too (sticky errors). */
rill_status rill__stream_wait_point(rill__stream *stream, rill__stream *other, uint64_t seq,
                                    const char *fn);
/* The same, ordering memory only (RILL__CMD_ORDER_ONLY): the wait ends
 * when other completes seq or skips it after a failure, and stream's
 * later work runs either way. For the library's own waits, which the
 * program never made and whose failures it must not see. */
rill_status rill__stream_wait_order(rill__stream *stream, rill__stream *other, uint64_t seq,
                                    const char *fn);

/* Notes that s's later work is ordered after `other` completing seq. */
void rill__stream_clock_note(rill__stream *s, uint64_t other_id, uint64_t seq);
/* The highest seq of stream other_id that s's work submitted from now on
 * is known to run after (0 when none; UINT64_MAX when other_id is s). */
uint64_t rill__stream_known_after(rill__stream *s, uint64_t other_id);
/* True when s's work submitted from now on is known to run after stream
 * `other_id` completed seq (same stream, or a wait made it so). */
bool rill__stream_ordered_after(rill__stream *s, uint64_t other_id, uint64_t seq);

/* True when s has work pending that may wait for something the library
 * cannot see (RILL__CMD_OPAQUE): a wait behind it could deadlock. */
static inline bool rill__stream_opaque_pending(rill__stream *s) {
    /* acquire: pairs with the release store of sub_seq that followed the
     * opaque command's store (see opaque_seq); done_seq after it. */
    uint64_t opaque = atomic_load_explicit(&s->q.opaque_seq, memory_order_acquire);
    return opaque > atomic_load_explicit(&s->q.done_seq, memory_order_acquire);
}

/* True when s belongs to an active capture; one relaxed load otherwise. */
static inline bool rill__stream_capturing(rill__stream *s) {
    return atomic_load_explicit(&rill__captures_active, memory_order_relaxed) != 0 &&
           atomic_load_explicit(&s->capture, memory_order_acquire) != NULL;
}

/* Submits a command, the one path every command takes into a backend. On
 * a capturing stream the command becomes a graph node instead, and *seq
 * receives 0. */
rill_status rill__stream_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
/* Submits a command to the stream's queue even while it captures (work
 * that runs at once: allowed unsafe calls, internal waits). */
rill_status rill__stream_submit_now(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);

#endif
