/* SPDX-License-Identifier: MIT */
/* The CPU device's records for traces (cpu_trace.h, src/trace/trace.h). */
#include "backend/cpu/cpu_trace.h"

#include <string.h>

#include "platform/thread.h"

/* c's slice on its stream's track, from its first start to now; before
 * rill__cpu_finish releases what c names. */
void rill__cpu_trace_stream_slice(rill__stream *s, cpu_cmd *c) {
    rill__trace_rec r;
    rill__trace_describe(&r, s, &c->c, c->seq);
    r.type = RILL__TRACE_STREAM_SLICE;
    r.unit = c->trace_unit;
    r.flags = c->trace_on_unit ? RILL__TRACE_ON_UNIT : 0;
    r.t0 = c->trace_t0;
    r.t1 = rill__trace_now();
    c->trace_t0 = 0;
    rill__stream_trace_track(s);
    rill__trace_emit(&r);
}
