/* SPDX-License-Identifier: MIT */
/* What the CPU device records for traces (src/trace/trace.h): a command's
 * fields, and its slice on its stream's track. Called only while a trace
 * records (cpu_exec.c, cpu_graph.c). */
#ifndef RILL_BACKEND_CPU_TRACE_H
#define RILL_BACKEND_CPU_TRACE_H

#include "backend/cpu/cpu.h"
#include "trace/trace.h"

/* Fills the fields of *r that c's kind decides (what, device, stream, seq,
 * name, grid, bytes, a, b); the caller sets type, unit, flags, t0, t1. */
void rill__cpu_trace_describe(rill__trace_rec *r, rill__stream *s, const cpu_cmd *c);
/* c's slice on s's track, from its first start to now; called by finish
 * before it releases what c names. */
void rill__cpu_trace_stream_slice(rill__stream *s, cpu_cmd *c);

#endif
