/* SPDX-License-Identifier: MIT */
/* What the CPU device records for traces (src/trace/trace.h): a command's
 * slice on its stream's track (its fields: rill__trace_describe). Called
 * only while a trace records (cpu_exec.c, cpu_graph.c). */
#ifndef RILL_BACKEND_CPU_TRACE_H
#define RILL_BACKEND_CPU_TRACE_H

#include "backend/cpu/cpu.h"
#include "trace/trace.h"

/* c's slice on s's track, from its first start to now; called by finish
 * before it releases what c names. */
void rill__cpu_trace_stream_slice(rill__stream *s, cpu_cmd *c);

#endif
