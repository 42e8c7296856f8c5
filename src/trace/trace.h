/* SPDX-License-Identifier: MIT */
/* The trace recorder: what ran where and when, written as Chrome
 * trace-event JSON (Perfetto, chrome://tracing) when the trace stops. A
 * layer of its own above the platform only, so every layer records into it
 * directly; the public calls are the core's (core/trace_api.c). Records go
 * to a per-thread buffer under its own lock; while no trace runs a recording
 * point costs one relaxed load (rill__tracing). docs/design.md, "Traces". */
#ifndef RILL_TRACE_TRACE_H
#define RILL_TRACE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/thread.h"

/* Non-zero while a trace records (rill__tracing reads it). */
extern _Atomic int rill__trace_on;

static inline bool rill__tracing(void) {
    /* relaxed: a record made just before or after a start or stop is
     * kept or dropped, either is right. */
    return __builtin_expect(atomic_load_explicit(&rill__trace_on, memory_order_relaxed), 0);
}

/* Non-zero while records take their times from rill__ticks (set at start). */
extern _Atomic int rill__trace_ticks;

/* The time for a record: rill__ticks when they are steady, else
 * rill__now_ns; the writer turns either into nanoseconds. */
static inline uint64_t rill__trace_now(void) {
    /* relaxed: set before rill__trace_on, and constant for the machine. */
    if (atomic_load_explicit(&rill__trace_ticks, memory_order_relaxed))
        return rill__ticks();
    return rill__now_ns();
}

/* The number of the trace that records now or last recorded (starts at 1):
 * what a stream compares to know whether its track was named in it. */
uint32_t rill__trace_session(void);

/* What a record describes. */
typedef enum rill__trace_type {
    RILL__TRACE_STREAM_SLICE = 1, /* a command on its stream's track, from start to end */
    RILL__TRACE_UNIT_SLICE,       /* the part of a command a compute unit ran */
    RILL__TRACE_NODE_SLICE,       /* a graph node on the unit that ran it */
    RILL__TRACE_HOST_SLICE,       /* a blocking call on the calling thread's track */
    RILL__TRACE_COUNTER,          /* memory: allocated (a) and reserved (b) bytes */
    RILL__TRACE_INSTANT,          /* a mark on a stream's track (capture begin, end) */
    RILL__TRACE_TRACK,            /* the name of a stream's track */
    RILL__TRACE_FLOW              /* an end of an arrow between processes */
} rill__trace_type;

/* What a command is (the slice's category). */
typedef enum rill__trace_what {
    RILL__TRACE_KERNEL = 1,
    RILL__TRACE_HOST_FN,
    RILL__TRACE_WAIT,
    RILL__TRACE_RECORD,
    RILL__TRACE_COPY,
    RILL__TRACE_SET,
    RILL__TRACE_CLEAR,
    RILL__TRACE_GRAPH,
    RILL__TRACE_COLLECTIVE, /* an operation of a communicator, on its proxy's track */
    RILL__TRACE_WHAT_COUNT
} rill__trace_what;

#define RILL__TRACE_NAME_BYTES 64

enum rill__trace_flags {
    /* a STREAM_SLICE that ran whole on its unit: it is the unit's slice too */
    RILL__TRACE_ON_UNIT = 1u << 0,
    /* t0 and t1 are rill__now_ns times, not rill__trace_now ones: a GPU's
     * command, timed by its events */
    RILL__TRACE_NS = 1u << 1
};

/* One record. The fields each type uses:
 *   STREAM_SLICE  device, stream, seq, what, name, grid, bytes, t0, t1,
 *                 unit (where it started), flags;
 *                 a WAIT: (a, b) = the stream id and seq it waited for
 *   UNIT_SLICE    device, unit, stream, seq, what, name, t0, t1
 *   NODE_SLICE    device, unit, stream and seq of the graph launch, name,
 *                 grid, bytes, a = the node's index in its graph, t0, t1
 *   HOST_SLICE    name (the call), stream (0 or the stream it waits for), t0, t1
 *   COUNTER       device, a = allocated bytes, b = reserved bytes, t0
 *   INSTANT       device, stream, name, t0
 *   TRACK         device, stream, name, a = 1 for a device's default stream
 *   FLOW          stream, t0, a = the arrow's id (the same in every process),
 *                 b = 0 where it starts (a record ran), 1 where it ends (a
 *                 wait was released)
 * thread is filled in by rill__trace_emit. */
typedef struct rill__trace_rec {
    uint8_t type; /* rill__trace_type */
    uint8_t what; /* rill__trace_what */
    int8_t device;
    uint8_t flags; /* enum rill__trace_flags */
    int32_t unit;
    uint32_t grid[3];
    uint32_t thread; /* the recording thread (rill__thread_id) */
    uint64_t stream, seq;
    uint64_t t0, t1; /* rill__trace_now */
    uint64_t bytes;
    uint64_t a, b;
    char name[RILL__TRACE_NAME_BYTES];
} rill__trace_rec;

/* Copies name into r->name, cut to fit. */
void rill__trace_set_name(rill__trace_rec *r, const char *name);
/* Names r after op, a framework's op (rill_thread_exchange_op_name), with
 * the kernel or kind it was named by in parentheses: "aten::add
 * (binary_f32)". */
void rill__trace_name_op(rill__trace_rec *r, const char *op);
/* Appends *r to the calling thread's buffer (nothing when no trace runs). */
void rill__trace_emit(rill__trace_rec *r);
/* A host slice: the calling thread spent [t0, now) in call (a blocking
 * call, for stream stream_id or 0). */
void rill__trace_host_slice(const char *call, uint64_t stream_id, uint64_t t0);

/* An end of an arrow that crosses processes (an interprocess event's
 * record and the waits it released), on stream stream_id's track now; id
 * names the arrow in every process's trace. Nothing when no trace runs. */
void rill__trace_flow(uint64_t stream_id, uint64_t id, bool end);

/* Starts recording into path, which is created (or truncated) now. Returns
 * 0, or an errno value with what (up to what_size bytes) saying why the
 * path cannot be written, or -1 when a trace already runs (what names its
 * path). */
int rill__trace_begin(const char *path, char *what, size_t what_size);
/* Stops recording and writes the trace; returns 0, -1 when no trace ran,
 * or an errno value with what saying why the file could not be written. */
int rill__trace_end(char *what, size_t what_size);

#endif
