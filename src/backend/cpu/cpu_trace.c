/* SPDX-License-Identifier: MIT */
/* The CPU device's records for traces (cpu_trace.h, src/trace/trace.h). */
#include "backend/cpu/cpu_trace.h"

#include <string.h>

#include "platform/thread.h"

/* The fields of c's records that its kind decides. */
void rill__cpu_trace_describe(rill__trace_rec *r, rill__stream *s, const cpu_cmd *c) {
    /* every field but thread, which emit sets, and the caller's (type,
     * unit, flags, t0, t1): no memset of the whole record */
    r->what = 0;
    r->device = (int8_t)rill__device_base_of(rill__queue_of(s)->dev)->info.ordinal;
    r->grid[0] = r->grid[1] = r->grid[2] = 0;
    r->stream = rill__queue_of(s)->id;
    r->seq = c->seq;
    r->bytes = r->a = r->b = 0;
    r->name[0] = '\0';
    switch (c->c.kind) {
    case RILL__CMD_KERNEL:
        r->what = RILL__TRACE_KERNEL;
        rill__trace_set_name(r, rill__kernel_image_of(c->c.u.kernel.kernel)->name);
        r->grid[0] = c->c.u.kernel.grid.x;
        r->grid[1] = c->c.u.kernel.grid.y;
        r->grid[2] = c->c.u.kernel.grid.z;
        for (size_t i = 0; i < c->c.u.kernel.num_accesses; i++)
            r->bytes += c->c.u.kernel.accesses[i].bytes;
        break;
    case RILL__CMD_HOST:
        r->what = RILL__TRACE_HOST_FN;
        break;
    case RILL__CMD_WAIT:
        r->what = RILL__TRACE_WAIT;
        r->a = rill__queue_of(c->c.u.wait.stream)->id;
        r->b = c->c.u.wait.seq;
        break;
    case RILL__CMD_RECORD:
        r->what = RILL__TRACE_RECORD;
        break;
    case RILL__CMD_COPY:
        r->what = RILL__TRACE_COPY;
        r->bytes = c->c.u.copy.bytes;
        r->grid[0] = r->grid[1] = r->grid[2] = 1;
        break;
    case RILL__CMD_SET:
        r->what = RILL__TRACE_SET;
        r->bytes = c->c.u.set.bytes;
        r->grid[0] = r->grid[1] = r->grid[2] = 1;
        break;
    case RILL__CMD_CLEAR:
        r->what = RILL__TRACE_CLEAR;
        break;
    case RILL__CMD_GRAPH:
        r->what = RILL__TRACE_GRAPH;
        break;
    }
    if (c->c.op_name != NULL)
        rill__trace_name_op(r, c->c.op_name);
}

/* c's slice on its stream's track, from its first start to now; before
 * rill__cpu_finish releases what c names. */
void rill__cpu_trace_stream_slice(rill__stream *s, cpu_cmd *c) {
    rill__trace_rec r;
    rill__cpu_trace_describe(&r, s, c);
    r.type = RILL__TRACE_STREAM_SLICE;
    r.unit = c->trace_unit;
    r.flags = c->trace_on_unit ? RILL__TRACE_ON_UNIT : 0;
    r.t0 = c->trace_t0;
    r.t1 = rill__trace_now();
    c->trace_t0 = 0;
    rill__stream_trace_track(s);
    rill__trace_emit(&r);
}
