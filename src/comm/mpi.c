/* SPDX-License-Identifier: MIT */
/* librill_mpi: the MPI transport of librill's communication engine
 * (src/comm/comm.h) and the public calls of rill_mpi.h. The public calls
 * only describe the operation; librill checks it, orders it with its
 * stream and hands it to its communication thread, which is the only
 * thread that calls the functions of the transport below, and so the only
 * one that calls MPI once MPI_Init has run. Each communicator is a
 * duplicate of the caller's (MPI_Comm_idup, so that creating one never
 * stops the thread from progressing others' collectives) whose errors
 * return to rill (MPI_ERRORS_RETURN). Allocation here is plain malloc:
 * librill's allocation hooks are internal to it. */
#include "rill_mpi.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/status.h"

_Static_assert((int)RILL_REDUCE_SUM == (int)RILL__REDUCE_SUM &&
                   (int)RILL_REDUCE_MAX == (int)RILL__REDUCE_MAX &&
                   (int)RILL_REDUCE_MIN == (int)RILL__REDUCE_MIN &&
                   (int)RILL_REDUCE_AVG == (int)RILL__REDUCE_AVG,
               "the engine names reductions by rill_reduce_op's values");
_Static_assert(sizeof(MPI_Request) <= sizeof(((rill__comm_op *)0)->state),
               "an operation's state holds its MPI_Request");

/* One communicator's MPI state; the communication thread's only. */
typedef struct mpi_ctx {
    MPI_Comm parent; /* the caller's: read by OPEN */
    MPI_Comm comm;   /* the duplicate: rill's traffic only */
} mpi_ctx;

static MPI_Request *request_of(rill__comm_op *op) {
    return (MPI_Request *)(void *)op->state;
}

/* "MPI_ERR_TRUNCATE: message truncated" */
static void error_string(int code, char *why, size_t size) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    snprintf(why, size, "%s", text);
}

static MPI_Op mpi_op(int reduce) {
    switch (reduce) {
    case RILL__REDUCE_MAX:
        return MPI_MAX;
    case RILL__REDUCE_MIN:
        return MPI_MIN;
    default:
        return MPI_SUM; /* sum, and avg before its division */
    }
}

/* MPI_Init_thread has run, MPI_Finalize has not, and the thread level lets
 * this thread call MPI. */
static rill_status check_mpi(char *why, size_t size) {
    int initialized = 0, finalized = 0, level = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        snprintf(why, size,
                 "MPI is %s; call MPI_Init_thread (with MPI_THREAD_SERIALIZED or "
                 "MPI_THREAD_MULTIPLE) before creating communicators, and MPI_Finalize after "
                 "destroying them",
                 finalized ? "already finalised" : "not initialised");
        return RILL_ERROR_INVALID_ARGUMENT;
    }
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_SERIALIZED) {
        snprintf(why, size,
                 "MPI was initialised at %s, and rill's communication thread makes the MPI "
                 "calls; initialise MPI with MPI_Init_thread at MPI_THREAD_SERIALIZED (then make "
                 "no MPI call while collectives are pending) or MPI_THREAD_MULTIPLE",
                 level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED" : "MPI_THREAD_SINGLE");
        return RILL_ERROR_NOT_SUPPORTED;
    }
    return RILL_OK;
}

/* -------------------------------------------------------------- transport */

static rill_status mpi_start(void *vctx, rill__comm_op *op, char *why, size_t size) {
    mpi_ctx *c = vctx;
    const rill__comm_args *a = &op->a;
    MPI_Request *req = request_of(op);
    int n = (int)a->count; /* the engine checked count <= max_count */
    int rc = MPI_SUCCESS;
    *req = MPI_REQUEST_NULL;
    switch (a->kind) {
    case RILL__COMM_OPEN: {
        rill_status st = check_mpi(why, size);
        if (st != RILL_OK)
            return st;
        rc = MPI_Comm_idup(c->parent, &c->comm, req);
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            error_string(rc, text, sizeof text);
            snprintf(why, size, "MPI_Comm_idup failed: %s", text);
            return RILL_ERROR_INTERNAL;
        }
        return RILL_OK;
    }
    case RILL__COMM_CLOSE: {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) /* after MPI_Finalize, MPI has freed it itself */
            rc = MPI_Comm_free(&c->comm);
        break;
    }
    case RILL__COMM_ALLREDUCE: {
        /* recv == send reduces in place; 0 floats never need it */
        const void *send = a->send == a->recv && n > 0 ? MPI_IN_PLACE : a->send;
        rc = MPI_Iallreduce(send, a->recv, n, MPI_FLOAT, mpi_op(a->reduce), c->comm, req);
        break;
    }
    case RILL__COMM_BROADCAST:
        rc = MPI_Ibcast(a->recv, n, MPI_BYTE, a->peer, c->comm, req);
        break;
    case RILL__COMM_ALLGATHER:
        rc = MPI_Iallgather(a->send, n, MPI_BYTE, a->recv, n, MPI_BYTE, c->comm, req);
        break;
    case RILL__COMM_REDUCE_SCATTER:
        rc = MPI_Ireduce_scatter_block(a->send, a->recv, n, MPI_FLOAT, mpi_op(a->reduce), c->comm,
                                       req);
        break;
    case RILL__COMM_SEND:
        rc = MPI_Isend(a->recv, n, MPI_BYTE, a->peer, 0, c->comm, req);
        break;
    case RILL__COMM_RECV:
        rc = MPI_Irecv(a->recv, n, MPI_BYTE, a->peer, 0, c->comm, req);
        break;
    }
    if (rc != MPI_SUCCESS) {
        error_string(rc, why, size);
        return RILL_ERROR_INTERNAL;
    }
    return RILL_OK;
}

/* OPEN completed: the duplicate's errors come back to rill. */
static rill__comm_test opened(mpi_ctx *c, rill__comm_op *op, char *why, size_t size) {
    int rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(c->comm, &op->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(c->comm, &op->size);
    if (rc == MPI_SUCCESS)
        return RILL__COMM_DONE;
    error_string(rc, why, size);
    MPI_Comm_free(&c->comm);
    return RILL__COMM_FAILED;
}

static rill__comm_test mpi_test(void *vctx, rill__comm_op *op, char *why, size_t size) {
    mpi_ctx *c = vctx;
    const rill__comm_args *a = &op->a;
    MPI_Request *req = request_of(op);
    if (a->kind == RILL__COMM_CLOSE)
        return RILL__COMM_DONE;
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Test(req, &flag, &status);
    if (rc != MPI_SUCCESS) {
        error_string(rc, why, size);
        /* A request MPI has not let go of may still use the buffers. */
        return flag || *req == MPI_REQUEST_NULL ? RILL__COMM_FAILED : RILL__COMM_FAILED_HELD;
    }
    if (!flag)
        return RILL__COMM_PENDING;
    if (a->kind == RILL__COMM_OPEN)
        return opened(c, op, why, size);
    if (a->kind == RILL__COMM_RECV) {
        int cancelled = 0, got = 0;
        MPI_Test_cancelled(&status, &cancelled);
        if (cancelled) {
            snprintf(why, size, "cancelled");
            return RILL__COMM_FAILED;
        }
        MPI_Get_count(&status, MPI_BYTE, &got);
        if ((size_t)got != a->count) {
            snprintf(why, size,
                     "rank %d sent %d bytes, and the receive asked for %zu; a send and its "
                     "receive must move the same number of bytes",
                     a->peer, got, a->count);
            return RILL__COMM_FAILED;
        }
    }
    if (a->reduce == RILL__REDUCE_AVG &&
        (a->kind == RILL__COMM_ALLREDUCE || a->kind == RILL__COMM_REDUCE_SCATTER)) {
        int ranks = 1;
        MPI_Comm_size(c->comm, &ranks);
        float *x = a->recv;
        for (size_t i = 0; i < a->count; i++)
            x[i] /= (float)ranks;
    }
    return RILL__COMM_DONE;
}

static void mpi_cancel(void *vctx, rill__comm_op *op) {
    (void)vctx;
    /* Only point-to-point operations can be cancelled; a collective
     * stays under way in MPI. */
    if (op->a.kind == RILL__COMM_SEND || op->a.kind == RILL__COMM_RECV)
        MPI_Cancel(request_of(op));
}

static void mpi_release(void *vctx) {
    free(vctx);
}

static const rill__comm_transport mpi_transport = {
    .name = "MPI",
    .max_count = INT_MAX,
    .start = mpi_start,
    .test = mpi_test,
    .cancel = mpi_cancel,
    .release = mpi_release,
};

/* ---------------------------------------------------------------- public */

rill_status rill_comm_create_mpi(MPI_Comm comm, rill_comm **out) {
    static const char fn[] = "rill_comm_create_mpi";
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (comm == MPI_COMM_NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: comm is MPI_COMM_NULL; pass a communicator such as "
                          "MPI_COMM_WORLD",
                          fn);
    mpi_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    c->parent = comm;
    c->comm = MPI_COMM_NULL;
    return rill__comm_open(&mpi_transport, c, fn, out);
}

rill_status rill_comm_destroy(rill_comm *comm) {
    return rill__comm_close(comm, "rill_comm_destroy");
}

rill_status rill_comm_rank(rill_comm *comm, int *out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_comm_rank: out is NULL");
    *out = 0;
    return rill__comm_get(comm, "rill_comm_rank", out, NULL);
}

rill_status rill_comm_size(rill_comm *comm, int *out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_comm_size: out is NULL");
    *out = 0;
    return rill__comm_get(comm, "rill_comm_size", NULL, out);
}

rill_status rill_allreduce_f32(rill_stream *s, rill_comm *comm, float *recv, const float *send,
                               size_t count, rill_reduce_op op) {
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE, .fn = "rill_allreduce_f32"};
    a.recv = recv;
    a.send = send;
    a.count = count;
    a.reduce = (int)op;
    return rill__comm_issue(s, comm, &a);
}

rill_status rill_broadcast(rill_stream *s, rill_comm *comm, void *buf, size_t bytes, int root) {
    rill__comm_args a = {.kind = RILL__COMM_BROADCAST, .fn = "rill_broadcast"};
    a.recv = buf;
    a.count = bytes;
    a.peer = root;
    return rill__comm_issue(s, comm, &a);
}

rill_status rill_allgather(rill_stream *s, rill_comm *comm, void *recv, const void *send,
                           size_t bytes_per_rank) {
    rill__comm_args a = {.kind = RILL__COMM_ALLGATHER, .fn = "rill_allgather"};
    a.recv = recv;
    a.send = send;
    a.count = bytes_per_rank;
    return rill__comm_issue(s, comm, &a);
}

rill_status rill_reduce_scatter_f32(rill_stream *s, rill_comm *comm, float *recv, const float *send,
                                    size_t count_per_rank, rill_reduce_op op) {
    rill__comm_args a = {.kind = RILL__COMM_REDUCE_SCATTER, .fn = "rill_reduce_scatter_f32"};
    a.recv = recv;
    a.send = send;
    a.count = count_per_rank;
    a.reduce = (int)op;
    return rill__comm_issue(s, comm, &a);
}

rill_status rill_send(rill_stream *s, rill_comm *comm, const void *buf, size_t bytes, int peer) {
    rill__comm_args a = {.kind = RILL__COMM_SEND, .fn = "rill_send"};
    a.recv = (void *)buf; /* the one buffer; a send only reads it */
    a.count = bytes;
    a.peer = peer;
    return rill__comm_issue(s, comm, &a);
}

rill_status rill_recv(rill_stream *s, rill_comm *comm, void *buf, size_t bytes, int peer) {
    rill__comm_args a = {.kind = RILL__COMM_RECV, .fn = "rill_recv"};
    a.recv = buf;
    a.count = bytes;
    a.peer = peer;
    return rill__comm_issue(s, comm, &a);
}
