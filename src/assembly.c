/* SPDX-License-Identifier: MIT */
/* The library's assembly: the subsystems above the core, lowest layer
 * first (core/hooks.h). The only file that names every layer; nothing
 * includes it. */
#include "core/hooks.h"
#include "graph/graph.h"
#include "mem/memory.h"

const rill__subsystem *const rill__subsystems[] = {
    &rill__mem_subsystem,
    &rill__graph_subsystem,
    NULL,
};
