/* SPDX-License-Identifier: MIT */
/* rill_trace_start, rill_trace_stop and RILL_TRACE (trace_api.h). */
#include "core/trace_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "platform/shm.h"
#include "util/status.h"

static _Atomic int env_done;

_Thread_local const char *rill__tls_op_name;

RILL_HOT rill_status rill_thread_exchange_op_name(const char **name) {
    if (name == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_thread_exchange_op_name: name is NULL; pass the address of a "
                          "const char * holding the new name (or NULL for none)");
    const char *previous = rill__tls_op_name;
    rill__tls_op_name = *name;
    *name = previous;
    return RILL_OK;
}

rill_status rill_trace_start(const char *path) {
    RILL_CALL_SCOPE();
    if (path == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_trace_start: path is NULL; pass the file to write the trace to");
    if (path[0] == '\0')
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_trace_start: path is empty; pass the file to write the trace to");
    char what[700];
    int err = rill__trace_begin(path, what, sizeof what);
    if (err == -1)
        return rill__fail(RILL_ERROR_NOT_PERMITTED,
                          "rill_trace_start: %s; call rill_trace_stop first", what);
    if (err != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_trace_start: %s; pass a path in a directory that exists and that "
                          "you may write",
                          what);
    return RILL_OK;
}

rill_status rill_trace_stop(void) {
    RILL_CALL_SCOPE();
    char what[700];
    int err = rill__trace_end(what, sizeof what);
    if (err > 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_trace_stop: %s; the trace is lost: check the disk and start again",
                          what);
    return RILL_OK; /* written, or no trace was running */
}

static void trace_env_start(struct rill__runtime *rt) {
    (void)rt;
    const char *env = getenv("RILL_TRACE");
    if (env == NULL || env[0] == '\0' || atomic_exchange(&env_done, 1))
        return;
    /* "%p": the process id, so that processes that inherit the variable
     * (a program that starts itself again, mpirun's ranks) do not write
     * over each other's traces. */
    char path[4096];
    size_t n = 0;
    for (const char *c = env; *c != '\0' && n + 24 < sizeof path; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%d", (int)rill__process_id());
            c++;
        } else {
            path[n++] = *c;
        }
    }
    path[n] = '\0';
    char what[700];
    int err = rill__trace_begin(path, what, sizeof what);
    if (err > 0)
        fprintf(stderr, "rill: RILL_TRACE: %s; no trace is written\n", what);
}

static void trace_shutdown(struct rill__runtime *rt, rill__shutdown_phase phase) {
    (void)rt;
    if (phase != RILL__SHUTDOWN_DEVICES)
        return;
    char what[700];
    if (rill__trace_end(what, sizeof what) > 0)
        fprintf(stderr, "rill: rill_shutdown: %s\n", what);
}

const rill__subsystem rill__trace_subsystem = {
    .name = "traces",
    .start = trace_env_start,
    .shutdown = trace_shutdown,
};

void rill__trace_describe(rill__trace_rec *r, rill__stream *s, const rill__cmd *c, uint64_t seq) {
    /* every field but thread, which emit sets, and the caller's (type,
     * unit, flags, t0, t1): no memset of the whole record */
    r->what = 0;
    r->device = (int8_t)rill__device_base_of(s->q.dev)->info.ordinal;
    r->grid[0] = r->grid[1] = r->grid[2] = 0;
    r->stream = s->q.id;
    r->seq = seq;
    r->bytes = r->a = r->b = 0;
    r->name[0] = '\0';
    switch (c->kind) {
    case RILL__CMD_KERNEL:
        r->what = RILL__TRACE_KERNEL;
        rill__trace_set_name(r, rill__kernel_image_of(c->u.kernel.kernel)->name);
        r->grid[0] = c->u.kernel.grid.x;
        r->grid[1] = c->u.kernel.grid.y;
        r->grid[2] = c->u.kernel.grid.z;
        for (size_t i = 0; i < c->u.kernel.num_accesses; i++)
            r->bytes += c->u.kernel.accesses[i].bytes;
        break;
    case RILL__CMD_HOST:
        r->what = RILL__TRACE_HOST_FN;
        break;
    case RILL__CMD_WAIT:
        r->what = RILL__TRACE_WAIT;
        r->a = c->u.wait.stream->q.id;
        r->b = c->u.wait.seq;
        break;
    case RILL__CMD_RECORD:
        r->what = RILL__TRACE_RECORD;
        break;
    case RILL__CMD_COPY:
        r->what = RILL__TRACE_COPY;
        r->bytes = c->u.copy.bytes;
        r->grid[0] = r->grid[1] = r->grid[2] = 1;
        break;
    case RILL__CMD_SET:
        r->what = RILL__TRACE_SET;
        r->bytes = c->u.set.bytes;
        r->grid[0] = r->grid[1] = r->grid[2] = 1;
        break;
    case RILL__CMD_CLEAR:
        r->what = RILL__TRACE_CLEAR;
        break;
    case RILL__CMD_GRAPH:
        r->what = RILL__TRACE_GRAPH;
        break;
    }
    if (c->op_name != NULL)
        rill__trace_name_op(r, c->op_name);
}

void rill__trace_blocked(const char *call, rill__stream *s, uint64_t t0) {
    if (s != NULL)
        rill__stream_trace_track(s);
    rill__trace_host_slice(call, s != NULL ? s->q.id : 0, t0);
}
