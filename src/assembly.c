/* SPDX-License-Identifier: MIT */
/* The library's assembly: the subsystems, the core's parts first, then
 * the layers above it, lowest first (core/hooks.h), and the backends below
 * it, in device order (backend/backend.h). The only file that names every
 * layer; nothing includes it. */
#include "backend/backend.h"
#include "comm/comm.h"
#include "core/event.h"
#include "core/event_ipc.h"
#include "core/hooks.h"
#include "core/kernel.h"
#include "core/queue_limit.h"
#include "core/trace_api.h"
#include "graph/graph.h"
#include "mem/memory.h"
#include "ops/ops.h"
#include "sanitizer/sanitizer.h"

/* In each phase of rill_shutdown the list runs backwards: the ops and
 * communicators go first (they destroy kernels and streams through the
 * public calls), the trace is written last. Within the core, interprocess
 * events follow events, so that their waiter thread stops before the
 * events are freed. */
const rill__subsystem *const rill__subsystems[] = {
    &rill__trace_subsystem,
    &rill__queue_limit_subsystem,
    &rill__kernel_subsystem,
    &rill__event_subsystem,
    &rill__ipc_event_subsystem,
    &rill__mem_subsystem,
    &rill__graph_subsystem,
    &rill__sanitizer_subsystem,
    &rill__ops_subsystem,
    &rill__comm_subsystem,
    NULL,
};

/* The slots after the built-in backends are room for those a test program
 * adds (rill__backend_add_for_test); the list ends at the first NULL. */
const rill__backend_ops *rill__backends[RILL__MAX_BACKENDS + 1] = {
#ifdef RILL_HAVE_CUDA
    &rill__cuda_backend,
#endif
    &rill__cpu_backend,
    NULL,
};

bool rill__backend_add_for_test(const rill__backend_ops *ops) {
    int n = 0;
    while (rill__backends[n] != NULL)
        n++;
    if (n >= RILL__MAX_BACKENDS)
        return false;
    rill__backends[n] = ops;
    return true;
}
