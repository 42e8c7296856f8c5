/* SPDX-License-Identifier: MIT */
/* The core's side of traces (src/trace/trace.h records): rill_trace_start
 * and rill_trace_stop, RILL_TRACE, and the tracks of streams. */
#ifndef RILL_CORE_TRACE_API_H
#define RILL_CORE_TRACE_API_H

#include <stdint.h>

#include "core/handle.h"
#include "core/hooks.h"
#include "trace/trace.h"

/* The traces' part in the runtime's life (core/hooks.h): at the
 * runtime's start, RILL_TRACE=path starts a trace, once per process (a path
 * that cannot be written is told on stderr); at the end of rill_shutdown,
 * once every command has run and been recorded, the trace is written. */
extern const rill__subsystem rill__trace_subsystem;
/* The calling thread spent [t0, now) in call, blocked on s (or NULL). */
void rill__trace_blocked(const char *call, rill__stream *s, uint64_t t0);
/* The calling thread's op name (rill_thread_exchange_op_name), or NULL. */
extern _Thread_local const char *rill__tls_op_name;

#endif
