/* SPDX-License-Identifier: MIT */
/* The library's assembly: the subsystems above the core, lowest layer
 * first (core/hooks.h), and the backends below it, in device order
 * (backend/backend.h). The only file that names every layer; nothing
 * includes it. */
#include "backend/backend.h"
#include "core/hooks.h"
#include "graph/graph.h"
#include "mem/memory.h"
#include "sanitizer/sanitizer.h"

const rill__subsystem *const rill__subsystems[] = {
    &rill__mem_subsystem,
    &rill__graph_subsystem,
    &rill__sanitizer_subsystem,
    NULL,
};

const rill__backend_ops *const rill__backends[] = {
#ifdef RILL_HAVE_CUDA
    &rill__cuda_backend,
#endif
    &rill__cpu_backend,
    NULL,
};
