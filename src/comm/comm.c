/* SPDX-License-Identifier: MIT */
/* Communicators, from the callers' threads (comm.h): handles, and creation
 * and destruction through control tasks that the communication thread
 * runs (engine.h). Operations are checked and issued in comm_issue.c. A
 * layer above the core: it orders through the core's streams, waiters and
 * memory pool, and the core knows nothing of it. rill_shutdown destroys
 * the communicators left. */
#include "comm/comm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/op_args.h"
#include "comm/comm_internal.h"
#include "comm/engine.h"
#include "comm/stage.h"
#include "core/calls.h"
#include "core/handle.h"
#include "core/kernel.h"
#include "core/stream.h"
#include "graph/graph.h"
#include "mem/memory.h"
#include "mem/pool.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/status.h"

/* ---------------------------------------------------------------- handles */

rill_status rill__comm_resolve(rill_comm *comm, const char *fn, rill__comm_channel **out) {
    if (comm == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: comm is NULL; pass a communicator from rill_comm_create_mpi", fn);
    rill__comm_channel *ch;
    switch (rill__comm_engine_enter(comm, &ch)) {
    case RILL__COMM_NO_CHANNEL:
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the communicator handle is not valid (destroyed, or not a "
                          "communicator)",
                          fn);
    case RILL__COMM_CLOSING:
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the communicator is being destroyed by another call; use it "
                          "before rill_comm_destroy",
                          fn);
    default:
        break;
    }
    /* relaxed: only the fork's child handler, on this thread, changes it. */
    if (ch->forks != atomic_load_explicit(&rill__fork_count, memory_order_relaxed)) {
        rill__comm_engine_leave(ch);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the communicator was created by the parent of this process, "
                          "before fork(); MPI communicators do not carry over to a child",
                          fn);
    }
    *out = ch;
    return RILL_OK;
}

rill_status rill__comm_get(rill_comm *comm, const char *fn, int *rank, int *size, int *cuda_aware) {
    rill__comm_channel *ch = NULL;
    rill_status st = rill__comm_resolve(comm, fn, &ch);
    if (st != RILL_OK)
        return st;
    if (rank != NULL)
        *rank = ch->rank;
    if (size != NULL)
        *size = ch->size;
    if (cuda_aware != NULL)
        *cuda_aware = ch->cuda_aware;
    rill__comm_engine_leave(ch);
    return RILL_OK;
}

/* ------------------------------------------------------- create, destroy */

static void comm_shutdown(void);
static void forget_after_fork(void);

_Atomic(rill_kernel *) rill__comm_divide_kernel;

/* Reads RILL_COMM_TIMEOUT: seconds, decimals allowed; unset, empty or 0
 * means no limit. */
static rill_status read_timeout(const char *fn, rill__comm_channel *ch) {
    const char *env = getenv("RILL_COMM_TIMEOUT");
    ch->timeout_ns = 0;
    ch->timeout_s = 0;
    if (env == NULL || env[0] == '\0')
        return RILL_OK;
    char *end = NULL;
    errno = 0;
    double s = strtod(env, &end);
    if (errno != 0 || end == env || *end != '\0' || !isfinite(s) || s < 0 || s > 1e9)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: RILL_COMM_TIMEOUT='%s' is not a number of seconds; set it to "
                          "the longest time a collective may take (such as 30 or 0.5), or unset "
                          "it for no limit",
                          fn, env);
    ch->timeout_s = s;
    ch->timeout_ns = (uint64_t)(s * 1e9);
    if (s > 0 && ch->timeout_ns == 0)
        ch->timeout_ns = 1;
    return RILL_OK;
}

/* Reads RILL_COMM_CHECK: 1 checks every collective's arguments against
 * the other ranks'; unset, empty or 0 does not. */
static rill_status read_check(const char *fn, rill__comm_channel *ch) {
    const char *env = getenv("RILL_COMM_CHECK");
    ch->check = false;
    if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0)
        return RILL_OK;
    if (strcmp(env, "1") != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: RILL_COMM_CHECK='%s' is neither 0 nor 1; set it to 1 (on every "
                          "rank) to check that the ranks pass the same counts, or unset it",
                          fn, env);
    ch->check = true;
    return RILL_OK;
}

static rill__comm_task *control_task(rill__comm_channel *ch, rill__comm_kind kind, const char *fn) {
    rill__comm_task *t = rill__calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->op.a.kind = kind;
    t->op.a.fn = fn;
    t->ch = ch;
    return t;
}

/* Queues CLOSE on a channel marked closing and waits for it. */
static rill_status close_channel(rill__comm_channel *ch, rill__comm_task *t) {
    rill__comm_engine_queue(ch, t);
    rill__comm_engine_wait(t);
    rill_status st = t->status;
    if (st != RILL_OK)
        rill__fail(st, "%s", t->message);
    rill__free(t);
    return st;
}

rill_status rill__comm_open(const rill__comm_transport *t, void *ctx, const char *fn,
                            rill_comm **out) {
    *out = NULL;
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st == RILL_OK)
        st = rill__check_may_block(fn);
    rill__comm_channel *ch = NULL;
    rill__comm_task *open = NULL, *close = NULL;
    if (st == RILL_OK) {
        ch = rill__calloc(1, sizeof *ch);
        open = control_task(ch, RILL__COMM_OPEN, fn);
        close = control_task(ch, RILL__COMM_CLOSE, fn);
        if (ch == NULL || open == NULL || close == NULL)
            st = rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (st == RILL_OK)
        st = read_timeout(fn, ch);
    if (st == RILL_OK)
        st = read_check(fn, ch);
    if (st != RILL_OK) {
        rill__free(close);
        rill__free(open);
        rill__free(ch);
        t->release(ctx);
        return st;
    }
    ch->t = t;
    ch->ctx = ctx;
    ch->forks = atomic_load_explicit(&rill__fork_count, memory_order_relaxed);
    rill__comm_engine_add(ch, open);
    rill__comm_engine_wait(open);
    st = open->status;
    if (st != RILL_OK) {
        /* ctx is released, and ch is the communication thread's to free. */
        st = rill__fail(st, "%s", open->message);
        rill__free(open);
        rill__free(close);
        return st;
    }
    rill__free(open);
    if (!rill__handle_open(RILL__HANDLE_COMM, ch, &ch->handle)) {
        rill__comm_engine_begin_close(ch);
        close_channel(ch, close);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: out of memory for the communicator's handle", fn);
    }
    /* CLOSE's task, made now so that destroy cannot run out of memory. */
    ch->close = close;
    rill__comm_engine_set_opened(ch);
    *out = ch->handle;
    return RILL_OK;
}

rill_status rill__comm_close(rill_comm *comm, const char *fn) {
    rill_status st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    rill__comm_channel *ch = NULL;
    if ((st = rill__comm_resolve(comm, fn, &ch)) != RILL_OK)
        return st;
    bool first = rill__comm_engine_begin_close(ch);
    /* Closing: nothing enters any more, and CLOSE waits for the calls
     * still inside. */
    rill__comm_engine_leave(ch);
    if (!first)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the communicator is already being destroyed", fn);
    rill__handle_close(ch->handle);
    ch->close->op.a.fn = fn;
    st = close_channel(ch, ch->close);
    /* A blocking call: the place to free page-locked staging memory that
     * no operation uses now. */
    rill__comm_stage_trim();
    return st;
}

/* rill_shutdown: destroys the communicators left, then stops the thread. */
static void comm_shutdown(void) {
    rill__comm_channel *ch = NULL;
    while ((ch = rill__comm_engine_claim_open()) != NULL) {
        rill__handle_close(ch->handle);
        ch->close->op.a.fn = "rill_shutdown";
        close_channel(ch, ch->close);
    }
    rill__comm_engine_shutdown();
    rill__comm_stage_shutdown();
    rill_kernel *k = atomic_exchange(&rill__comm_divide_kernel, NULL);
    if (k != NULL)
        rill_kernel_destroy(k);
}

static void forget_after_fork(void) {
    rill__comm_engine_forget();
    rill__comm_stage_forget();
}

static void comm_phase(rill__runtime *rt, rill__shutdown_phase phase) {
    (void)rt;
    if (phase == RILL__SHUTDOWN_BEGIN)
        comm_shutdown();
}

static void comm_fork_child(rill__runtime *rt) {
    (void)rt;
    forget_after_fork();
}

const rill__subsystem rill__comm_subsystem = {
    .name = "communicators",
    .shutdown = comm_phase,
    .fork_child = comm_fork_child,
};
