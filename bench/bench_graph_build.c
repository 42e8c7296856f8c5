/* SPDX-License-Identifier: MIT */
/* bench_graph_build: how long building a graph takes as it grows, which
 * must grow linearly with its size.
 *
 *   chain    N kernel nodes built by hand, each depending on the one
 *            before (rill_graph_add_kernel_node), then instantiated
 *   capture  a capture that forks N streams from its origin (an event
 *            recorded on the origin, waited on by each), puts one kernel
 *            on each and joins them all back (an event per stream)
 *
 * Usage: bench_graph_build [N ...] (default: 100000 200000 400000).
 * Figures are seconds for one build, and nanoseconds per node; streams
 * are created before the capture is timed. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rill.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int check(rill_status st, const char *call) {
    if (st == RILL_OK)
        return 0;
    fprintf(stderr, "bench_graph_build: %s: %s: %s\n", call, rill_status_name(st),
            rill_last_error());
    return 1;
}

static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

static int chain(rill_kernel *k, size_t n) {
    rill_graph *g;
    if (check(rill_graph_create(&g), "rill_graph_create"))
        return 1;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    rill_graph_node *prev = NULL;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        rill_graph_node *node;
        if (check(rill_graph_add_kernel_node(g, &prev, prev != NULL, k, &l, &node),
                  "rill_graph_add_kernel_node"))
            return 1;
        prev = node;
    }
    double t1 = now_s();
    rill_graph_exec *x;
    if (check(rill_graph_instantiate(g, &x), "rill_graph_instantiate"))
        return 1;
    double t2 = now_s();
    printf("chain    %8zu nodes: build %8.3f s (%6.0f ns/node), instantiate %6.3f s\n", n, t1 - t0,
           (t1 - t0) * 1e9 / (double)n, t2 - t1);
    rill_graph_exec_destroy(x);
    rill_graph_destroy(g);
    return 0;
}

static int capture(rill_kernel *k, size_t n) {
    rill_stream *origin, **side = malloc(n * sizeof *side);
    rill_event *fork, **join = malloc(n * sizeof *join);
    if (side == NULL || join == NULL)
        return 1;
    if (check(rill_stream_create(NULL, 0, &origin), "rill_stream_create") ||
        check(rill_event_create(RILL_EVENT_DEFAULT, &fork), "rill_event_create"))
        return 1;
    for (size_t i = 0; i < n; i++)
        if (check(rill_stream_create(NULL, 0, &side[i]), "rill_stream_create") ||
            check(rill_event_create(RILL_EVENT_DEFAULT, &join[i]), "rill_event_create"))
            return 1;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    double t0 = now_s();
    if (check(rill_stream_begin_capture(origin, RILL_CAPTURE_GLOBAL), "begin_capture") ||
        check(rill_launch_kernel(origin, k, &l), "rill_launch_kernel") ||
        check(rill_event_record(fork, origin), "rill_event_record"))
        return 1;
    for (size_t i = 0; i < n; i++)
        if (check(rill_stream_wait_event(side[i], fork), "rill_stream_wait_event") ||
            check(rill_launch_kernel(side[i], k, &l), "rill_launch_kernel") ||
            check(rill_event_record(join[i], side[i]), "rill_event_record"))
            return 1;
    for (size_t i = 0; i < n; i++)
        if (check(rill_stream_wait_event(origin, join[i]), "rill_stream_wait_event"))
            return 1;
    if (check(rill_launch_kernel(origin, k, &l), "rill_launch_kernel"))
        return 1;
    rill_graph *g;
    if (check(rill_stream_end_capture(origin, &g), "rill_stream_end_capture"))
        return 1;
    double t1 = now_s();
    printf("capture  %8zu streams: build %8.3f s (%6.0f ns/stream)\n", n, t1 - t0,
           (t1 - t0) * 1e9 / (double)n);
    rill_graph_destroy(g);
    for (size_t i = 0; i < n; i++) {
        rill_stream_destroy(side[i]);
        rill_event_destroy(join[i]);
    }
    rill_event_destroy(fork);
    rill_stream_destroy(origin);
    free(side);
    free(join);
    return 0;
}

int main(int argc, char **argv) {
    size_t sizes[16] = {100000, 200000, 400000};
    int num = 3;
    if (argc > 1) {
        num = 0;
        for (int i = 1; i < argc && num < 16; i++)
            sizes[num++] = (size_t)strtoull(argv[i], NULL, 10);
    }
    rill_kernel *k;
    rill_kernel_desc d = {.name = "empty", .cpu = empty_kernel};
    if (check(rill_kernel_create(&d, &k), "rill_kernel_create"))
        return 1;
    for (int i = 0; i < num; i++)
        if (chain(k, sizes[i]) != 0)
            return 1;
    for (int i = 0; i < num; i++)
        if (capture(k, sizes[i]) != 0)
            return 1;
    rill_kernel_destroy(k);
    return rill_shutdown() == RILL_OK ? 0 : 1;
}
