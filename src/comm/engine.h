/* SPDX-License-Identifier: MIT */
/* The communication engine: the communication thread, the channels (one
 * per communicator) whose operations it starts in issue order and tests
 * until they complete, and the proxy streams through which the streams
 * that issued them wait (src/comm/engine.c; what other threads call, in
 * engine_calls.c). comm.c and comm_issue.c drive it from the callers'
 * threads. */

/* A stream operation is one WAIT command of its stream, for number k of a
 * proxy stream that only this engine completes: k when the operation has
 * completed or failed (the stream goes on, or fails), k + 1 once the
 * transport no longer holds its buffers. The two differ only after a
 * timeout that could not cancel the operation: the stream fails at once,
 * and its buffers are never handed out again. The memory pool's point for
 * the buffers is the WAIT itself while the operation is under way (one
 * point per stream and buffer, however many operations are in flight),
 * and (proxy, k + 1) from the moment an operation is abandoned; a graph
 * node's operation, which has no WAIT, has (proxy, k + 1) from the start. */
#ifndef RILL_COMM_ENGINE_H
#define RILL_COMM_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/stream.h"

/* Room for the reason a channel broke, quoted in later failures. */
#define RILL__COMM_WHY_BYTES 320

typedef struct rill__comm_channel rill__comm_channel;

/* One operation as the engine tracks it: a stream operation from
 * rill__comm_issue, or OPEN or CLOSE (control tasks, which a caller's
 * thread waits for). */
typedef struct rill__comm_task {
    rill__comm_op op; /* what the transport sees */
    /* immutable once queued */
    rill__comm_channel *ch; /* borrowed: outlives its tasks */
    /* guarded by the engine's lock */
    struct rill__comm_task *next; /* the channel's queue, in issue order */
    /* stream operations: immutable once queued (wait_seq: once chained) */
    rill__stream *stream; /* ref: released when the task finishes */
    rill__stream *proxy;  /* the engine's proxy while the task holds it */
    uint64_t number;      /* k (see above) */
    /* the buffers the transport may write or read (bytes 0: none) */
    const void *buf[2];
    size_t bytes[2];
    uint64_t wait_seq;   /* the WAIT's number on stream */
    rill__waiter waiter; /* on stream, for the command before the WAIT;
                          * a graph node's: on proxy, for number */
    /* a graph node's operation: its completion, called by the waiter */
    rill__extern_done node_done;
    void *node_arg;
    /* a staged operation (on a CUDA device's memory): the page-locked
     * buffer its transport works on, whose transport hold the task lets
     * go once the transport has (stage.h); NULL otherwise. Set before the
     * task is made ready. */
    struct rill__comm_stage *stage;
    /* set before the task is made ready, with skip_why: the issuing call
     * could not queue all of the operation's commands on its stream, so
     * the operation fails (its stream with it) without starting */
    bool refused;
    /* guarded by the engine's lock: the task issued right behind this one
     * on the same stream and channel, made ready when this one finishes */
    struct rill__comm_task *chained;
    /* written by the waiter before ready is set (release), then read-only */
    bool skipped;
    char skip_why[RILL__COMM_WHY_BYTES];
    _Atomic int ready; /* the stream has reached the operation */
    /* communication thread only */
    uint64_t trace_t0; /* when it started, while a trace records; else 0 */
    struct rill__comm_task *active_next;
    uint64_t deadline_ns; /* 0: none */
    bool abandoned;       /* failed by the timeout; the transport still holds its memory */
    /* control tasks: written before done is set (release) */
    rill_status status;
    char message[RILL__ERROR_BYTES];
    _Atomic int done;
} rill__comm_task;

struct rill__comm_channel {
    /* immutable after create (rank, size and cuda_aware: once OPEN is done) */
    const rill__comm_transport *t;
    void *ctx; /* owned: released by the engine */
    int rank, size;
    bool cuda_aware;               /* the transport takes CUDA devices' memory as it is */
    uint64_t timeout_ns;           /* 0: no limit */
    double timeout_s;              /* the same, for sentences */
    bool check;                    /* RILL_COMM_CHECK=1: collectives check their arguments */
    uint32_t forks;                /* rill__fork_count when made */
    void *handle;                  /* the public handle, once open */
    struct rill__comm_task *close; /* owned: CLOSE's task, made at create */
    /* guarded by the engine's lock */
    struct rill__comm_channel *next; /* the engine's channels */
    rill__comm_task *head, *tail;    /* issued and not yet started, in issue order */
    /* the last stream operation issued: its stream's id, its WAIT's
     * number, the task until it finishes, then whether it completed */
    uint64_t last_stream_id, last_wait_seq;
    rill__comm_task *last;
    bool last_ok;
    bool opened;  /* OPEN succeeded */
    bool closing; /* CLOSE is queued: nothing more may be */
    int users;    /* calls between rill__comm_engine_enter and _leave */
    /* communication thread only */
    int active; /* started and not finished, abandoned ones aside */
    /* the started task whose op.starting is set: nothing later starts */
    rill__comm_task *gate;
    bool broken;   /* a failure: later operations would not match the other ranks' */
    bool closed;   /* CLOSE ran, or OPEN failed: the channel is freed */
    bool leak_ctx; /* the transport may still write ctx */
    char broken_why[RILL__COMM_WHY_BYTES];
};

/* "rill_allreduce_f32 (sum of 1000 floats)": what a does, in sentences. */
void rill__comm_describe(const rill__comm_args *a, char *buf, size_t size);

/* Adds a new channel and queues its OPEN task; starts the communication
 * thread if it does not run. */
void rill__comm_engine_add(rill__comm_channel *ch, rill__comm_task *open);
/* Queues task at the end of ch's queue; false (nothing queued) when ch
 * is closing and task is a stream operation. A stream operation is not
 * startable yet: whoever marks it ready kicks the thread. */
bool rill__comm_engine_queue(rill__comm_channel *ch, rill__comm_task *task);
/* When the stream's command just before task's WAIT (task queued, its
 * WAIT at task->wait_seq) is the WAIT of ch's previous stream operation,
 * makes task ready once that one completes, or at once when it has
 * completed, and returns true: the caller registers no waiter (the engine
 * may free task at once). Otherwise false. Back-to-back operations on one
 * stream thus start one after another on the communication thread,
 * without the stream's worker in between; after a failure the stream's
 * waiter decides, as for any operation. */
bool rill__comm_engine_chain(rill__comm_channel *ch, rill__comm_task *task);
/* Takes a queued task that is not ready back out of ch's queue. */
void rill__comm_engine_unqueue(rill__comm_channel *ch, rill__comm_task *task);
/* Wakes the communication thread: a task became ready. Any thread. */
void rill__comm_engine_kick(void);
/* Waits until the communication thread has finished a control task. */
void rill__comm_engine_wait(rill__comm_task *task);
/* What rill__comm_engine_enter found. */
typedef enum rill__comm_entry {
    RILL__COMM_ENTERED = 0,
    RILL__COMM_NO_CHANNEL, /* the handle names no communicator */
    RILL__COMM_CLOSING     /* it names one that is being destroyed */
} rill__comm_entry;
/* The channel that handle names, into *out, marked in use until
 * rill__comm_engine_leave: its CLOSE does not start meanwhile, so a
 * rill_comm_destroy on another thread cannot free it under the caller.
 * The handle is resolved under the engine's lock, which orders it with
 * the destroy's: a handle that resolves names a channel not yet freed. */
rill__comm_entry rill__comm_engine_enter(const void *handle, rill__comm_channel **out);
void rill__comm_engine_leave(rill__comm_channel *ch);

/* Marks ch open (it gets a handle) or closing; begin_close returns false
 * when it already was closing. */
void rill__comm_engine_set_opened(rill__comm_channel *ch);
bool rill__comm_engine_begin_close(rill__comm_channel *ch);
/* An open channel that nothing closes yet, marked closing (NULL: none). */
rill__comm_channel *rill__comm_engine_claim_open(void);

/* Notes task's buffers as uses of the memory pool at (proxy, k + 1): they
 * are not handed out again before the transport has let them go. */
void rill__comm_task_hold_buffers(rill__comm_task *task);

/* A proxy stream for one operation on a stream of dev, with nothing
 * pending (made when none is free): a stream of dev when dev is a CPU
 * device, else of the CPU device (a CUDA stream's WAIT for a proxy is then
 * met on the host, which is what a number the engine completes needs).
 * Its failure sentence names no public call. */
rill_status rill__comm_engine_take_proxy(rill__device *dev, rill__stream **out);
/* Gives a proxy taken for an operation that was never issued back. */
void rill__comm_engine_give_proxy(rill__stream *proxy);

/* Stops the communication thread once every channel has gone, and
 * releases the proxies (rill_shutdown, after every channel was closed). */
void rill__comm_engine_shutdown(void);
/* In the child of a fork, on its only thread: forgets the parent's thread,
 * channels and proxies, without freeing or locking anything. */
void rill__comm_engine_forget(void);

#endif
