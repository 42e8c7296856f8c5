/* SPDX-License-Identifier: MIT */
/* librill_mpi: the MPI transport of librill's communication engine
 * (src/comm/comm.h) and the public calls of rill_mpi.h. Only librill's
 * communication thread calls the transport, and so MPI, once MPI_Init has
 * run. Each communicator is an MPI_Comm_idup of the caller's with
 * MPI_ERRORS_RETURN; allocation here is plain malloc. RILL_COMM_CHECK=1's
 * agreement check before each collective: docs/mpi.md. */
#include "rill_mpi.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/status.h"

/* Open MPI's extensions: MPIX_Query_cuda_support says at run time whether
 * the library takes memory of CUDA devices (mpi-ext.h, where the library
 * has it). */
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

_Static_assert((int)RILL_REDUCE_SUM == (int)RILL__REDUCE_SUM &&
                   (int)RILL_REDUCE_MAX == (int)RILL__REDUCE_MAX &&
                   (int)RILL_REDUCE_MIN == (int)RILL__REDUCE_MIN &&
                   (int)RILL_REDUCE_AVG == (int)RILL__REDUCE_AVG &&
                   (int)RILL_REDUCE_PROD == (int)RILL__REDUCE_PROD,
               "the engine names reductions by rill_reduce_op's values");
_Static_assert((int)RILL_DTYPE_F32 == (int)RILL__DTYPE_F32 &&
                   (int)RILL_DTYPE_F64 == (int)RILL__DTYPE_F64 &&
                   (int)RILL_DTYPE_I32 == (int)RILL__DTYPE_I32 &&
                   (int)RILL_DTYPE_I64 == (int)RILL__DTYPE_I64,
               "the engine names element types by rill_dtype's values");

/* What the check reduces: each argument, then its negation. */
enum { CHECK_KIND, CHECK_COUNT, CHECK_REDUCE, CHECK_ROOT, CHECK_DTYPE, CHECK_ARGS };

/* One communicator's MPI state; the communication thread's only. */
typedef struct mpi_ctx {
    MPI_Comm parent; /* the caller's: read by OPEN */
    MPI_Comm comm;   /* the duplicate: rill's traffic only */
    /* the check under way: at most one per communicator (op.starting) */
    int check_send[2 * CHECK_ARGS], check_recv[2 * CHECK_ARGS];
    /* a check timed out, and MPI may still write check_recv: ctx is never
     * freed, as the engine never frees the ctx of an OPEN that timed out */
    bool check_held;
    /* RILL_MPI_CUDA_AWARE: 0 or 1 as set, -1 unset (MPI says) */
    int cuda_aware;
} mpi_ctx;

/* Where an operation is, in op->state beside its request. */
enum phase {
    PHASE_RUN = 0,   /* the operation's own call is made (no check, or it passed) */
    PHASE_CHECK,     /* the check's MPI_Iallreduce is under way */
    PHASE_CHECK_LOST /* the check timed out: its completion starts nothing */
};

typedef struct mpi_state {
    MPI_Request req;
    enum phase phase;
    size_t offset; /* in pieces (start_piece): the first element of the piece under way */
} mpi_state;

_Static_assert(sizeof(mpi_state) <= sizeof(((rill__comm_op *)0)->state),
               "an operation's state holds its MPI_Request and phase");

static mpi_state *state_of(rill__comm_op *op) {
    return (mpi_state *)(void *)op->state;
}

static MPI_Request *request_of(rill__comm_op *op) {
    return &state_of(op)->req;
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
    case RILL__REDUCE_PROD:
        return MPI_PROD;
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

/* Open MPI runs MPI_Iallreduce through libnbc, whose default algorithm for
 * few ranks is a binomial tree: measured on 2 ranks of one machine, 3.2
 * GB/s at 4 MiB where the blocking MPI_Allreduce reaches 7.8, while its
 * Rabenseifner algorithm (reduce-scatter then allgather) reaches 8.3 and
 * costs 0.2 us more at 4 bytes. Unless the program or the environment
 * chose an algorithm (the control variable is then not 0, "ignore"), rill
 * selects that one, through the MPI tool interface, once per process. The
 * variable is the process's: the program's own MPI_Iallreduce calls get it
 * too. Another MPI has no such variable, and nothing changes. */
#define NBC_IALLREDUCE_CVAR         "coll_libnbc_iallreduce_algorithm"
#define NBC_IALLREDUCE_RABENSEIFNER 3

static void tune_iallreduce(void) {
    static _Atomic int done;
    /* The MPI library's own thread level: Open MPI 4.1 records the level
     * asked of the tool interface as the process's. */
    int level = MPI_THREAD_SINGLE, provided;
    if (atomic_exchange(&done, 1) || MPI_Query_thread(&level) != MPI_SUCCESS ||
        MPI_T_init_thread(level, &provided) != MPI_SUCCESS)
        return;
    int index, count, value = -1;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(NBC_IALLREDUCE_CVAR, &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count) == MPI_SUCCESS) {
        if (count == 1 && MPI_T_cvar_read(h, &value) == MPI_SUCCESS && value == 0) {
            value = NBC_IALLREDUCE_RABENSEIFNER;
            (void)MPI_T_cvar_write(h, &value);
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
}

/* -------------------------------------------------------------- transport */

/* A large allreduce or broadcast runs as consecutive calls of PIECE_BYTES
 * (4 MiB) each. Measured with plain MPI on 2 ranks of one machine, 64 MiB
 * allreduced in place: MPI_Iallreduce 1.72 GB/s, the blocking call 1.69 to
 * 1.73, and 16 pieces of 4 MiB one after another 3.7 to 3.9 (a piece's
 * working set stays in the caches). Each piece that completes is progress
 * for the engine, which keeps testing without pause (a single call of 64
 * MiB outlasts the engine's spin, and MPI progresses it only inside the
 * tests). Every rank cuts the same count the same way, so the pieces
 * match. */
#define PIECE_BYTES ((size_t)4 << 20)

/* MPI's type of an allreduce's elements. */
static MPI_Datatype mpi_type(int dtype) {
    switch (dtype) {
    case RILL__DTYPE_F64:
        return MPI_DOUBLE;
    case RILL__DTYPE_I32:
        return MPI_INT32_T;
    case RILL__DTYPE_I64:
        return MPI_INT64_T;
    default:
        return MPI_FLOAT;
    }
}

/* The size in bytes of an element of a's pieces: 0 when a is not cut. */
static size_t piece_elem(const rill__comm_args *a) {
    return a->kind == RILL__COMM_ALLREDUCE   ? rill__comm_dtype_bytes(a->dtype)
           : a->kind == RILL__COMM_BROADCAST ? 1
                                             : 0;
}

/* Starts the piece of a that begins at element offset. */
static int start_piece(mpi_ctx *c, const rill__comm_args *a, size_t offset, MPI_Request *req) {
    size_t elem = piece_elem(a), per = PIECE_BYTES / elem, left = a->count - offset;
    int n = (int)(left < per ? left : per);
    if (a->kind == RILL__COMM_BROADCAST)
        return MPI_Ibcast((char *)a->recv + offset, n, MPI_BYTE, a->peer, c->comm, req);
    char *recv = (char *)a->recv + offset * elem;
    /* recv == send reduces in place; 0 elements never need it */
    const void *send =
        a->send == a->recv && n > 0 ? MPI_IN_PLACE : (const char *)a->send + offset * elem;
    return MPI_Iallreduce(send, recv, n, mpi_type(a->dtype), mpi_op(a->reduce), c->comm, req);
}

/* Makes the operation's own call (a stream operation's). */
static int start_call(mpi_ctx *c, rill__comm_op *op) {
    const rill__comm_args *a = &op->a;
    MPI_Request *req = request_of(op);
    int n = (int)a->count; /* the engine checked count <= max_count */
    switch (a->kind) {
    case RILL__COMM_ALLREDUCE:
    case RILL__COMM_BROADCAST:
        state_of(op)->offset = 0;
        return start_piece(c, a, 0, req);
    case RILL__COMM_ALLGATHER:
        return MPI_Iallgather(a->send, n, MPI_BYTE, a->recv, n, MPI_BYTE, c->comm, req);
    case RILL__COMM_REDUCE_SCATTER:
        return MPI_Ireduce_scatter_block(a->send, a->recv, n, MPI_FLOAT, mpi_op(a->reduce), c->comm,
                                         req);
    case RILL__COMM_SEND:
        return MPI_Isend(a->recv, n, MPI_BYTE, a->peer, 0, c->comm, req);
    case RILL__COMM_RECV:
        return MPI_Irecv(a->recv, n, MPI_BYTE, a->peer, 0, c->comm, req);
    default:
        return MPI_ERR_OP; /* OPEN and CLOSE are not stream operations */
    }
}

/* What the check compares of a: its kind, count, and op and root where
 * the collective has them (-1 where not). */
static void check_args_of(const rill__comm_args *a, int out[CHECK_ARGS]) {
    bool reduces = a->kind == RILL__COMM_ALLREDUCE || a->kind == RILL__COMM_REDUCE_SCATTER;
    out[CHECK_KIND] = (int)a->kind;
    out[CHECK_COUNT] = (int)a->count;
    out[CHECK_REDUCE] = reduces ? a->reduce : -1;
    out[CHECK_ROOT] = a->kind == RILL__COMM_BROADCAST ? a->peer : -1;
    out[CHECK_DTYPE] = a->kind == RILL__COMM_ALLREDUCE ? a->dtype : -1;
}

/* Starts the check of op: the operation's own call waits for its result. */
static int start_check(mpi_ctx *c, rill__comm_op *op) {
    int mine[CHECK_ARGS];
    check_args_of(&op->a, mine);
    for (int i = 0; i < CHECK_ARGS; i++) {
        c->check_send[i] = mine[i];
        c->check_send[CHECK_ARGS + i] = -mine[i]; /* its maximum is minus the minimum */
    }
    int rc = MPI_Iallreduce(c->check_send, c->check_recv, 2 * CHECK_ARGS, MPI_INT, MPI_MAX, c->comm,
                            request_of(op));
    if (rc == MPI_SUCCESS) {
        state_of(op)->phase = PHASE_CHECK;
        op->starting = true;
    }
    return rc;
}

static rill_status mpi_start(void *vctx, rill__comm_op *op, char *why, size_t size) {
    mpi_ctx *c = vctx;
    const rill__comm_args *a = &op->a;
    MPI_Request *req = request_of(op);
    int rc = MPI_SUCCESS;
    *req = MPI_REQUEST_NULL;
    state_of(op)->phase = PHASE_RUN;
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
    default:
        rc = op->check ? start_check(c, op) : start_call(c, op);
        break;
    }
    if (rc != MPI_SUCCESS) {
        error_string(rc, why, size);
        return RILL_ERROR_INTERNAL;
    }
    return RILL_OK;
}

/* Whether the MPI library takes memory of CUDA devices (a CUDA-aware
 * build): Open MPI's MPIX_Query_cuda_support, where its mpi-ext.h declares
 * it; else no (RILL_MPI_CUDA_AWARE=1 says yes for another MPI). */
static bool mpi_cuda_support(void) {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
    return MPIX_Query_cuda_support() == 1;
#else
    return false;
#endif
}

/* OPEN completed: the duplicate's errors come back to rill. */
static rill__comm_test opened(mpi_ctx *c, rill__comm_op *op, char *why, size_t size) {
    op->cuda_aware = c->cuda_aware >= 0 ? c->cuda_aware == 1 : mpi_cuda_support();
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

static const char *collective_name(int kind) {
    switch (kind) {
    case RILL__COMM_ALLREDUCE:
        return "rill_allreduce_f32 or rill_allreduce";
    case RILL__COMM_BROADCAST:
        return "rill_broadcast";
    case RILL__COMM_ALLGATHER:
        return "rill_allgather";
    case RILL__COMM_REDUCE_SCATTER:
        return "rill_reduce_scatter_f32";
    default:
        return "another operation";
    }
}

/* The check's result: false, and why, when a rank passed other arguments
 * than this one. Every rank reads the same maxima and minima, so every
 * rank finds the same argument differing. */
static bool check_agrees(const mpi_ctx *c, const rill__comm_op *op, char *why, size_t size) {
    static const char found[] = "RILL_COMM_CHECK found that this rank";
    int mine[CHECK_ARGS];
    check_args_of(&op->a, mine);
    for (int i = 0; i < CHECK_ARGS; i++) {
        int max = c->check_recv[i], min = -c->check_recv[CHECK_ARGS + i];
        if (max == min)
            continue;
        int other = max != mine[i] ? max : min;
        switch (i) {
        case CHECK_KIND:
            snprintf(why, size,
                     "%s issued %s where another rank issued %s; issue the same collectives in "
                     "the same order on every rank",
                     found, op->a.fn, collective_name(other));
            break;
        case CHECK_COUNT: {
            const char *name = rill__comm_count_name(op->a.kind);
            snprintf(why, size,
                     "%s passed %s %d and another rank passed %d; pass the same %s on every "
                     "rank",
                     found, name, mine[i], other, name);
            break;
        }
        case CHECK_REDUCE:
            snprintf(why, size,
                     "%s passed op %s and another rank passed op %s; pass the same op on every "
                     "rank",
                     found, rill__comm_reduce_name(mine[i]), rill__comm_reduce_name(other));
            break;
        case CHECK_DTYPE:
            snprintf(why, size,
                     "%s passed dtype %s and another rank passed dtype %s; pass the same dtype "
                     "on every rank",
                     found, rill__comm_dtype_name(mine[i]), rill__comm_dtype_name(other));
            break;
        default:
            snprintf(why, size,
                     "%s passed root %d and another rank passed root %d; pass the same root on "
                     "every rank",
                     found, mine[i], other);
            break;
        }
        return false;
    }
    return true;
}

/* Tests the check of op; once every rank agreed, makes the operation's
 * own call. */
static rill__comm_test test_check(mpi_ctx *c, rill__comm_op *op, char *why, size_t size) {
    mpi_state *st = state_of(op);
    int flag = 0;
    int rc = MPI_Test(&st->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        error_string(rc, why, size);
        op->starting = false;
        if (flag || st->req == MPI_REQUEST_NULL) {
            c->check_held = false;
            return RILL__COMM_FAILED;
        }
        /* MPI may still write check_recv: the test goes on, starting
         * nothing. */
        st->phase = PHASE_CHECK_LOST;
        c->check_held = true;
        return RILL__COMM_FAILED_HELD;
    }
    if (!flag)
        return RILL__COMM_PENDING;
    op->starting = false;
    if (st->phase == PHASE_CHECK_LOST) {
        c->check_held = false;
        snprintf(why, size, "the check completed after the operation was given up");
        return RILL__COMM_FAILED;
    }
    if (!check_agrees(c, op, why, size))
        return RILL__COMM_FAILED;
    st->phase = PHASE_RUN;
    rc = start_call(c, op);
    if (rc != MPI_SUCCESS) {
        error_string(rc, why, size);
        return RILL__COMM_FAILED;
    }
    return RILL__COMM_PENDING;
}

static rill__comm_test mpi_test(void *vctx, rill__comm_op *op, char *why, size_t size) {
    mpi_ctx *c = vctx;
    const rill__comm_args *a = &op->a;
    MPI_Request *req = request_of(op);
    if (a->kind == RILL__COMM_CLOSE)
        return RILL__COMM_DONE;
    if (state_of(op)->phase != PHASE_RUN)
        return test_check(c, op, why, size);
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
    mpi_state *st = state_of(op);
    size_t elem = piece_elem(a);
    if (elem != 0 && a->count - st->offset > PIECE_BYTES / elem) {
        st->offset += PIECE_BYTES / elem;
        rc = start_piece(c, a, st->offset, req);
        if (rc != MPI_SUCCESS) {
            error_string(rc, why, size);
            return RILL__COMM_FAILED;
        }
        op->progressed = true;
        return RILL__COMM_PENDING;
    }
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
    /* On a CUDA device's memory, librill divides on the device. */
    if (a->reduce == RILL__REDUCE_AVG && !op->device_memory &&
        (a->kind == RILL__COMM_ALLREDUCE || a->kind == RILL__COMM_REDUCE_SCATTER)) {
        int ranks = 1;
        MPI_Comm_size(c->comm, &ranks);
        if (a->dtype == RILL__DTYPE_F64) {
            double *x = a->recv;
            for (size_t i = 0; i < a->count; i++)
                x[i] /= (double)ranks;
        } else { /* float32: integers have no average (comm_issue.c) */
            float *x = a->recv;
            for (size_t i = 0; i < a->count; i++)
                x[i] /= (float)ranks;
        }
    }
    return RILL__COMM_DONE;
}

static void mpi_cancel(void *vctx, rill__comm_op *op) {
    mpi_ctx *c = vctx;
    mpi_state *st = state_of(op);
    if (st->phase == PHASE_CHECK) {
        /* A check cannot be cancelled either; its late completion must
         * start nothing, and MPI may write check_recv until then. */
        st->phase = PHASE_CHECK_LOST;
        c->check_held = true;
        return;
    }
    /* Only point-to-point operations can be cancelled; a collective
     * stays under way in MPI. */
    if (op->a.kind == RILL__COMM_SEND || op->a.kind == RILL__COMM_RECV)
        MPI_Cancel(request_of(op));
}

static void mpi_release(void *vctx) {
    mpi_ctx *c = vctx;
    if (!c->check_held) /* else MPI may still write c->check_recv: kept for good */
        free(c);
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
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_comm * to receive the communicator", fn);
    *out = NULL;
    if (comm == MPI_COMM_NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: comm is MPI_COMM_NULL; pass a communicator such as "
                          "MPI_COMM_WORLD",
                          fn);
    int cuda_aware = -1;
    const char *env = getenv("RILL_MPI_CUDA_AWARE");
    if (env != NULL && env[0] != '\0') {
        if (strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: RILL_MPI_CUDA_AWARE='%s' is neither 0 nor 1; set it to 0 to "
                              "stage collectives on CUDA devices' memory through page-locked "
                              "host memory, to 1 to hand that memory to MPI as it is (a "
                              "CUDA-aware MPI), or unset it to ask MPI",
                              fn, env);
        cuda_aware = env[0] == '1';
    }
    int initialized = 0;
    if (MPI_Initialized(&initialized) == MPI_SUCCESS && initialized)
        tune_iallreduce();
    mpi_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    c->parent = comm;
    c->comm = MPI_COMM_NULL;
    c->cuda_aware = cuda_aware;
    return rill__comm_open(&mpi_transport, c, fn, out);
}

rill_status rill_comm_destroy(rill_comm *comm) {
    return rill__comm_close(comm, "rill_comm_destroy");
}

rill_status rill_comm_rank(rill_comm *comm, int *out) {
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_comm_rank: out is NULL; pass the address of an int to receive the rank");
    *out = 0;
    return rill__comm_get(comm, "rill_comm_rank", out, NULL, NULL);
}

rill_status rill_comm_size(rill_comm *comm, int *out) {
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_comm_size: out is NULL; pass the address of an int to receive the size");
    *out = 0;
    return rill__comm_get(comm, "rill_comm_size", NULL, out, NULL);
}

rill_status rill_comm_cuda_aware(rill_comm *comm, int *out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_comm_cuda_aware: out is NULL; pass the address of an int to "
                          "receive the answer");
    *out = 0;
    return rill__comm_get(comm, "rill_comm_cuda_aware", NULL, NULL, out);
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

rill_status rill_allreduce(rill_stream *s, rill_comm *comm, void *recv, const void *send,
                           size_t count, rill_dtype dtype, rill_reduce_op op) {
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE, .fn = "rill_allreduce"};
    a.recv = recv;
    a.send = send;
    a.count = count;
    a.reduce = (int)op;
    a.dtype = (int)dtype;
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
