/* SPDX-License-Identifier: MIT */
/* Building large graphs: a chain of hundreds of thousands of nodes by
 * hand, and a capture that forks tens of thousands of streams from its
 * origin and joins them back. Building is linear in the graph's size, so
 * both end well inside the test's timeout; a quadratic build (a node
 * looked for among all the others at every dependency, a stream among all
 * the capture's streams at every command) takes minutes here. And one
 * graph built by several threads at once. */
#include "fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void count_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    atomic_int *count;
    memcpy(&count, args, sizeof count);
    atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

static rill_kernel *count_k;

static int setup(void **state) {
    (void)state;
    rill_kernel_desc d = {.name = "count", .cpu = count_kernel};
    return rill_kernel_create(&d, &count_k) == RILL_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    rill_kernel_destroy(count_k);
    return rill_shutdown() == RILL_OK ? 0 : -1;
}

/* "Adding a node costs time linear in its dependencies": a chain of
 * 200,000 nodes built by hand, kernel and empty nodes in turn, runs in
 * order; a dependency that is not a node this graph returned (NULL, a
 * pointer into a node, a node of another graph) is still refused. */
static void test_graph_by_hand_chain_of_200k_nodes_builds_in_linear_time(void **state) {
    (void)state;
    enum { N = 200000 };
    static atomic_int count;
    atomic_store(&count, 0);
    atomic_int *cp = &count;
    rill_launch l = {.grid = {1, 1, 1}, .args = &cp, .args_size = sizeof cp};
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *prev = NULL, *first = NULL;
    for (int i = 0; i < N; i++) {
        rill_graph_node *n;
        if (i % 2 == 0)
            RT_OK(rill_graph_add_kernel_node(g, &prev, prev != NULL, count_k, &l, &n));
        else
            RT_OK(rill_graph_add_empty_node(g, &prev, 1, &n));
        if (first == NULL)
            first = n;
        prev = n;
    }
    size_t nodes;
    RT_OK(rill_graph_node_count(g, &nodes));
    assert_int_equal(nodes, N);
    rill_graph *other;
    RT_OK(rill_graph_create(&other));
    rill_graph_node *foreign, *bad = NULL;
    RT_OK(rill_graph_add_empty_node(other, NULL, 0, &foreign));
    rill_graph_node *wrong[3] = {NULL, (rill_graph_node *)(void *)((char *)prev + 1), foreign};
    for (int i = 0; i < 3; i++) {
        rill_graph_node *deps[2] = {first, wrong[i]};
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_empty_node(g, deps, 2, &bad));
        assert_null(bad);
        assert_non_null(strstr(rill_last_error(), "dependency 1"));
    }
    RT_OK(rill_graph_node_count(g, &nodes));
    assert_int_equal(nodes, N);
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&count), N / 2);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_destroy(other));
    RT_OK(rill_stream_destroy(s));
}

/* "Capture is linear in what it records": a capture forks 40,000 streams
 * from its origin (one event recorded on the origin, waited on by each),
 * gives each a kernel and joins each back through an event of its own;
 * the graph has every node and runs each once. Then the same capture with
 * one stream given work after its join: UNJOINED names that stream. */
static void test_graph_capture_fork_join_of_40k_streams_builds_in_linear_time(void **state) {
    (void)state;
    enum { N = 40000, LATE = N / 2 };
    static atomic_int count;
    atomic_int *cp = &count;
    rill_launch l = {.grid = {1, 1, 1}, .args = &cp, .args_size = sizeof cp};
    rill_stream *origin, **side = malloc(N * sizeof *side);
    rill_event *fork, **join = malloc(N * sizeof *join);
    assert_non_null(side);
    assert_non_null(join);
    RT_OK(rill_stream_create(NULL, 0, &origin));
    RT_OK(rill_stream_set_name(origin, "origin"));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &fork));
    for (int i = 0; i < N; i++) {
        RT_OK(rill_stream_create(NULL, 0, &side[i]));
        RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &join[i]));
    }
    RT_OK(rill_stream_set_name(side[LATE], "late"));
    for (int late = 0; late < 2; late++) {
        atomic_store(&count, 0);
        RT_OK(rill_stream_begin_capture(origin, RILL_CAPTURE_GLOBAL));
        RT_OK(rill_launch_kernel(origin, count_k, &l));
        RT_OK(rill_event_record(fork, origin));
        for (int i = 0; i < N; i++) {
            RT_OK(rill_stream_wait_event(side[i], fork));
            RT_OK(rill_launch_kernel(side[i], count_k, &l));
            RT_OK(rill_event_record(join[i], side[i]));
        }
        for (int i = 0; i < N; i++)
            RT_OK(rill_stream_wait_event(origin, join[i]));
        RT_OK(rill_launch_kernel(origin, count_k, &l));
        if (late)
            RT_OK(rill_launch_kernel(side[LATE], count_k, &l));
        rill_graph *g;
        if (late) {
            RT_STATUS(RILL_ERROR_CAPTURE_UNJOINED, rill_stream_end_capture(origin, &g));
            assert_null(g);
            assert_non_null(strstr(rill_last_error(), "stream 'late' has 1 command after"));
            continue;
        }
        RT_OK(rill_stream_end_capture(origin, &g));
        size_t nodes;
        RT_OK(rill_graph_node_count(g, &nodes));
        assert_int_equal(nodes, N + 2);
        rill_graph_exec *x;
        RT_OK(rill_graph_instantiate(g, &x));
        RT_OK(rill_graph_launch(x, origin));
        RT_OK(rill_stream_synchronize(origin));
        assert_int_equal(atomic_load(&count), N + 2);
        RT_OK(rill_graph_exec_destroy(x));
        RT_OK(rill_graph_destroy(g));
    }
    assert_int_equal(atomic_load(&count), 0); /* nothing of the discarded capture ran */
    for (int i = 0; i < N; i++) {
        RT_OK(rill_stream_destroy(side[i]));
        RT_OK(rill_event_destroy(join[i]));
    }
    RT_OK(rill_event_destroy(fork));
    RT_OK(rill_stream_destroy(origin));
    free(side);
    free(join);
}

enum { BUILDERS = 4, CHAIN = 3000 };

typedef struct builder {
    rill_graph *graph;
    atomic_int *count;
    int failures;
} builder;

static void *build_chain(void *arg) {
    builder *b = arg;
    rill_launch l = {.grid = {1, 1, 1}, .args = &b->count, .args_size = sizeof b->count};
    rill_graph_node *prev = NULL;
    for (int i = 0; i < CHAIN; i++) {
        rill_graph_node *n;
        if (rill_graph_add_kernel_node(b->graph, &prev, prev != NULL, count_k, &l, &n) != RILL_OK)
            b->failures++;
        else
            prev = n;
    }
    return NULL;
}

/* "Every function is thread-safe": threads that add chains of nodes to one graph at once,
 * while another counts its nodes and instantiates it, build one graph that has every node and
 * runs each once. */
static void test_graph_built_by_several_threads_at_once(void **state) {
    (void)state;
    static atomic_int count;
    atomic_store(&count, 0);
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    builder b[BUILDERS];
    pthread_t t[BUILDERS];
    for (int i = 0; i < BUILDERS; i++) {
        b[i] = (builder){g, &count, 0};
        assert_int_equal(pthread_create(&t[i], NULL, build_chain, &b[i]), 0);
    }
    size_t seen = 0;
    for (int round = 0; round < 20; round++) {
        size_t nodes;
        RT_OK(rill_graph_node_count(g, &nodes));
        assert_true(nodes >= seen); /* nodes are only ever added */
        seen = nodes;
        rill_graph_exec *x;
        RT_OK(rill_graph_instantiate(g, &x)); /* a graph of the nodes added so far */
        RT_OK(rill_graph_exec_destroy(x));
    }
    for (int i = 0; i < BUILDERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(b[i].failures, 0);
    }
    size_t nodes;
    RT_OK(rill_graph_node_count(g, &nodes));
    assert_int_equal(nodes, BUILDERS * CHAIN);
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, NULL));
    RT_OK(rill_stream_synchronize(NULL));
    assert_int_equal(atomic_load(&count), BUILDERS * CHAIN);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_by_hand_chain_of_200k_nodes_builds_in_linear_time),
        cmocka_unit_test(test_graph_capture_fork_join_of_40k_streams_builds_in_linear_time),
        cmocka_unit_test(test_graph_built_by_several_threads_at_once),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, setup, teardown);
}
