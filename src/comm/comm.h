/* SPDX-License-Identifier: MIT */
/* Communicators: stream-ordered operations of a transport (MPI, in
 * librill_mpi), as librill runs them. This is the interface between
 * librill and a transport library, which calls the four entry points at
 * the end (exported from librill.so for that purpose only: they are
 * internal, and not part of the contract) and hands in a table of
 * functions that the communication thread calls (src/comm/engine.c).
 *
 * librill itself knows no MPI: it checks arguments, orders each operation
 * with its stream, starts operations in issue order on one communication
 * thread, tests them until they complete, enforces the timeout, and turns
 * failures into sticky stream errors. The transport only starts, tests and
 * cancels the operation it is handed. */
#ifndef RILL_COMM_COMM_H
#define RILL_COMM_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rill.h"

typedef struct rill_comm rill_comm;

/* The communicators' part in the runtime's life (core/hooks.h):
 * rill_shutdown destroys the communicators left and stops the
 * communication thread; a fork's child forgets the parent's. */
struct rill__subsystem;
extern const struct rill__subsystem rill__comm_subsystem;

typedef enum rill__comm_kind {
    RILL__COMM_OPEN = 1, /* make the transport's communicator (rill_comm_create_mpi) */
    RILL__COMM_CLOSE,    /* release it (rill_comm_destroy), once nothing is under way */
    RILL__COMM_ALLREDUCE,
    RILL__COMM_BROADCAST,
    RILL__COMM_ALLGATHER,
    RILL__COMM_REDUCE_SCATTER,
    RILL__COMM_SEND,
    RILL__COMM_RECV
} rill__comm_kind;

/* The reductions and the element types of an allreduce, numbered as
 * rill_reduce_op and rill_dtype number them (rill_mpi.h, which needs MPI's
 * header and so cannot be included here). */
enum {
    RILL__REDUCE_SUM,
    RILL__REDUCE_MAX,
    RILL__REDUCE_MIN,
    RILL__REDUCE_AVG,
    RILL__REDUCE_PROD,
    RILL__NUM_REDUCE
};
enum { RILL__DTYPE_F32, RILL__DTYPE_F64, RILL__DTYPE_I32, RILL__DTYPE_I64, RILL__NUM_DTYPE };

/* "sum", "max", "min", "avg", "prod": a reduction in sentences. */
static inline const char *rill__comm_reduce_name(int reduce) {
    static const char *const names[] = {"sum", "max", "min", "avg", "prod"};
    return reduce >= 0 && reduce < RILL__NUM_REDUCE ? names[reduce] : "?";
}

/* "float32", "float64", "int32", "int64": an element type in sentences. */
static inline const char *rill__comm_dtype_name(int dtype) {
    static const char *const names[] = {"float32", "float64", "int32", "int64"};
    return dtype >= 0 && dtype < RILL__NUM_DTYPE ? names[dtype] : "?";
}

/* The bytes of an element of dtype (a valid one). */
static inline size_t rill__comm_dtype_bytes(int dtype) {
    return dtype == RILL__DTYPE_F64 || dtype == RILL__DTYPE_I64 ? 8 : 4;
}

/* The public parameter that holds an operation's count, for sentences. */
static inline const char *rill__comm_count_name(rill__comm_kind kind) {
    switch (kind) {
    case RILL__COMM_ALLREDUCE:
        return "count";
    case RILL__COMM_REDUCE_SCATTER:
        return "count_per_rank";
    case RILL__COMM_ALLGATHER:
        return "bytes_per_rank";
    default:
        return "bytes";
    }
}

/* One operation as the public call describes it. */
typedef struct rill__comm_args {
    rill__comm_kind kind;
    const char *fn;   /* the public call, for sentences (static storage) */
    void *recv;       /* written; broadcast and send/recv: the one buffer */
    const void *send; /* read (allreduce: may equal recv) */
    /* allreduce: elements of dtype; reduce_scatter: floats per rank;
     * allgather: bytes per rank; broadcast, send, recv: bytes */
    size_t count;
    int reduce; /* RILL__REDUCE_*: allreduce, reduce_scatter */
    int dtype;  /* RILL__DTYPE_*: allreduce (0, float32, elsewhere) */
    int peer;   /* broadcast: the root; send, recv: the other rank */
} rill__comm_args;

/* An operation handed to the transport. */
typedef struct rill__comm_op {
    /* immutable once issued */
    rill__comm_args a;
    /* a collective of a communicator made under RILL_COMM_CHECK=1: the
     * transport first checks that every rank passed the same arguments */
    bool check;
    /* written by the transport's start and test: the operation is under
     * way but its own call into the transport is not made yet (the check
     * runs first). The engine starts nothing later on the channel until
     * it is cleared, so that every rank makes its calls in one order. */
    bool starting;
    /* set by the transport's test when the operation moved on without
     * completing (it started its next piece): the engine keeps testing
     * without pause, as after a completion */
    bool progressed;
    /* immutable once issued: the buffers are memory of a CUDA device, which
     * the transport hands to a CUDA-aware library as they are and never
     * touches itself (an average is left a sum: librill divides it on the
     * device) */
    bool device_memory;
    /* the transport's, between start and its last test (an MPI_Request) */
    _Alignas(16) unsigned char state[64];
    /* OPEN: written by the transport's test when it completes. cuda_aware:
     * the transport takes memory of CUDA devices as it is (else librill
     * stages such memory through page-locked host memory) */
    int rank, size;
    bool cuda_aware;
} rill__comm_op;

/* What test says of an operation. */
typedef enum rill__comm_test {
    RILL__COMM_PENDING = 0, /* still under way */
    RILL__COMM_DONE,        /* completed; the transport holds none of its memory */
    RILL__COMM_FAILED,      /* failed (why); the transport holds none of its memory */
    RILL__COMM_FAILED_HELD  /* failed (why), and the transport may still use its memory */
} rill__comm_test;

/* A transport: every function runs on the communication thread, with no
 * lock held, and returns without waiting for other processes. ctx is the
 * transport's state of one communicator. */
typedef struct rill__comm_transport {
    const char *name; /* "MPI" */
    size_t max_count; /* the largest count of one call (MPI: INT_MAX) */
    /* Starts op. RILL_OK when it is under way (test follows; CLOSE is
     * always done at once); otherwise a status and, in why, the
     * transport's reason, with nothing under way. */
    rill_status (*start)(void *ctx, rill__comm_op *op, char *why, size_t size);
    /* Tests op; for FAILED and FAILED_HELD, why says what failed. */
    rill__comm_test (*test)(void *ctx, rill__comm_op *op, char *why, size_t size);
    /* op missed its deadline: cancels it where the transport can
     * (point-to-point), after which test completes it; else nothing. */
    void (*cancel)(void *ctx, rill__comm_op *op);
    /* Frees ctx, after CLOSE or a failed OPEN; never called while the
     * transport may still write memory of ctx (an OPEN that timed out). */
    void (*release)(void *ctx);
} rill__comm_transport;

/* Makes a communicator of transport t: starts the communication thread if
 * needed, runs OPEN on it and waits for it. ctx is the engine's from the
 * call on, whatever the outcome (released with t->release). Blocks:
 * RILL_ERROR_NOT_PERMITTED from a kernel or host function. The timeout is
 * read from RILL_COMM_TIMEOUT (RILL_ERROR_INVALID_ARGUMENT when it is not a
 * number of seconds), the argument check from RILL_COMM_CHECK
 * (RILL_ERROR_INVALID_ARGUMENT when it is not 0 or 1). fn names the public
 * call. */
rill_status rill__comm_open(const rill__comm_transport *t, void *ctx, const char *fn,
                            rill_comm **out);
/* Closes comm: waits until every operation issued on it has completed,
 * then runs CLOSE. Blocks, as rill__comm_open. */
rill_status rill__comm_close(rill_comm *comm, const char *fn);
/* Resolves comm: its rank, its size, and 1 when it hands memory of CUDA
 * devices to its transport as it is, 0 when it stages it (any may be
 * NULL). */
rill_status rill__comm_get(rill_comm *comm, const char *fn, int *rank, int *size, int *cuda_aware);
/* Issues the operation a on stream: checks every argument (the handles,
 * counts, ranks, overlaps, and that buffers are device memory of the
 * stream's device within their allocations), then makes it a command of
 * the stream. On a CUDA device's stream, unless the transport is
 * CUDA-aware, the command is staged: copies of the device's bytes into
 * page-locked host memory before it, the operation on that memory, and
 * copies of the result back after it, all on the stream. Never blocks. */
rill_status rill__comm_issue(rill_stream *stream, rill_comm *comm, const rill__comm_args *a);

#endif
