/* SPDX-License-Identifier: MIT */
/* The graph layer in the runtime's life: it installs the capture hooks
 * (capture.c, capture_rules.c, gmem.c), ends captures at rill_shutdown and
 * frees the execs left, then the graphs (exec.c, graph.c), and forgets them
 * all in a fork's child. The top of the graph layer: its other files call
 * one way, downwards, and none calls this one. */
#include "graph/capture_internal.h"
#include "graph/graph.h"

static const rill__capture_hooks capture_table = {
    .submit = rill__cap_submit,
    .event_record = rill__cap_event_record,
    .wait_event = rill__cap_wait_event,
    .wait_stream = rill__cap_wait_stream,
    .check_stream_sync = rill__cap_check_stream_sync,
    .check_event_sync = rill__cap_check_event_sync,
    .check_device_sync = rill__cap_check_device_sync,
    .check_unsafe = rill__cap_check_unsafe,
    .check_free = rill__cap_check_free,
    .malloc = rill__cap_malloc,
    .free = rill__cap_free,
    .stream_destroyed = rill__cap_stream_destroyed,
};

static void graph_start(rill__runtime *rt) {
    (void)rt;
    atomic_store_explicit(&rill__capture_ops, &capture_table, memory_order_relaxed);
}

static void graph_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    if (phase == RILL__SHUTDOWN_BEGIN) {
        rill__captures_shutdown(); /* nothing captured runs */
    } else if (phase == RILL__SHUTDOWN_DRAINED) {
        rill__execs_shutdown(rt); /* an exec holds its graph memory pool, as a graph does */
        rill__graphs_shutdown(rt);
    }
}

/* Marks the parent's graphs and execs dead and forgets its captures. */
static void graph_fork_child(rill__runtime *rt) {
    for (rill__link *l = rt != NULL ? rt->graphs : NULL; l != NULL; l = l->next)
        atomic_store(&RILL__OWNER(l, rill__graph, rt_link)->magic, RILL__MAGIC_DEAD);
    for (rill__link *l = rt != NULL ? rt->execs : NULL; l != NULL; l = l->next)
        atomic_store(&RILL__OWNER(l, rill__graph_exec, rt_link)->magic, RILL__MAGIC_DEAD);
    rill__captures_forget();
}

const rill__subsystem rill__graph_subsystem = {
    .name = "graph",
    .start = graph_start,
    .shutdown = graph_shutdown,
    .fork_child = graph_fork_child,
};
