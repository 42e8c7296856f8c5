/* SPDX-License-Identifier: MIT */
/* The CUDA device's commands in traces (cuda.h): a command the GPU runs is
 * its stream's slice from an event recorded before it to one recorded
 * after it, in the host's time (rill__cuda_stamp); a command a runner runs
 * is timed on the host. */
#include "backend/cuda/cuda.h"

#include "trace/trace.h"

/* A timing event recorded on cs's stream now, or NULL. */
static CUevent mark(cuda_device *d, cuda_stream *cs) {
    CUevent ev = rill__cuda_timing_event(d);
    if (ev != NULL && d->drv->cuEventRecord(ev, cs->cu) != CUDA_SUCCESS) {
        rill__cuda_timing_event_put(d, ev);
        ev = NULL;
    }
    return ev;
}

void rill__cuda_trace_begin(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    if (rill__tracing())
        n->trace_ev[0] = mark(d, cs);
}

void rill__cuda_trace_end(cuda_device *d, cuda_stream *cs, cuda_cmd *n, bool issued) {
    if (n->trace_ev[0] == NULL)
        return;
    if (issued && (n->trace_ev[1] = mark(d, cs)) != NULL)
        return;
    rill__cuda_timing_event_put(d, n->trace_ev[0]);
    n->trace_ev[0] = NULL;
}

static void emit(cuda_stream *cs, const cuda_cmd *n, uint8_t flags, uint64_t t0, uint64_t t1) {
    rill__trace_rec r;
    rill__trace_describe(&r, cs->self, &n->c, n->seq);
    r.type = RILL__TRACE_STREAM_SLICE;
    r.unit = -1;
    r.flags = flags;
    r.t0 = t0;
    r.t1 = t1 > t0 ? t1 : t0;
    rill__stream_trace_track(cs->self);
    rill__trace_emit(&r);
}

void rill__cuda_trace_finish(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    if (n->trace_ev[0] == NULL)
        return;
    /* rill__cuda_stamp takes the events. */
    uint64_t t0 = rill__cuda_stamp(d, n->trace_ev[0]), t1 = rill__cuda_stamp(d, n->trace_ev[1]);
    n->trace_ev[0] = n->trace_ev[1] = NULL;
    if (rill__tracing() && n->error == CUDA_SUCCESS)
        emit(cs, n, RILL__TRACE_NS, t0, t1);
}

void rill__cuda_trace_host(cuda_stream *cs, const cuda_cmd *n, uint64_t t0) {
    if (rill__tracing())
        emit(cs, n, 0, t0, rill__trace_now());
}
