/* SPDX-License-Identifier: MIT */
/* Collectives captured into graphs over real MPI (-np 2 and 3): rill_mpi.h
 * says "Collectives captured from a stream replay with the graph". A
 * captured step replays with its collective in the order the graph's edges
 * give; a communicator starts the collectives of a launch in capture order
 * whatever order the run reaches them in; failures inside a launch, before
 * it and in the transport become the stream's sticky error and break the
 * communicator as eager ones do; a graph whose communicator was destroyed
 * fails to launch. Every rank runs the same steps. */
#include "mpi_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 1024

static void assert_contains(const char *text, const char *part) {
    if (strstr(text, part) == NULL)
        fail_msg("rank %d: expected \"%s\" in: %s", rt_rank(), part, text);
}

static void check_all(const float *dev, size_t n, double want, const char *what) {
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    rt_dev_read(got, dev, n * sizeof *got);
    for (size_t i = 0; i < n; i++)
        if ((double)got[i] != want)
            fail_msg("rank %d: %s: element %zu is %g, expected %g", rt_rank(), what, i,
                     (double)got[i], want);
    free(got);
}

typedef struct delay_args {
    unsigned us;
} delay_args;

static void delay_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    rt_spin_us(((const delay_args *)args)->us);
}

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    rill_kernel_fail(ctx, "value out of range");
}

static void launch(rill_stream *s, rill_cpu_kernel_fn body, const char *name, unsigned us) {
    rill_kernel_desc d = {.name = name, .cpu = body};
    rill_kernel *k;
    RT_OK(rill_kernel_create(&d, &k));
    delay_args a = {us};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, k, &l));
    RT_OK(rill_kernel_destroy(k));
}

/* One training-like step on two streams: the gradient g = w + rank + 1 on
 * the compute stream, its allreduce on the communication stream while the
 * compute stream works on, then w += g once the allreduce is done. */
static rill_graph *capture_step(rill_stream *s, rill_stream *c, rill_comm *comm, float *w,
                                float *g) {
    rill_event *grad_ready, *reduced;
    RT_OK(rill_event_create(0, &grad_ready));
    RT_OK(rill_event_create(0, &reduced));
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_op_add_scalar_f32(s, g, w, (float)(rt_rank() + 1), N));
    RT_OK(rill_event_record(grad_ready, s));
    RT_OK(rill_stream_wait_event(c, grad_ready));
    RT_OK(rill_allreduce_f32(c, comm, g, g, N, RILL_REDUCE_SUM));
    RT_OK(rill_event_record(reduced, c));
    launch(s, delay_kernel, "other_work", 200); /* overlaps the allreduce */
    RT_OK(rill_stream_wait_event(s, reduced));
    RT_OK(rill_op_add_f32(s, w, w, g, 1.0f, N));
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(s, &graph));
    RT_OK(rill_event_destroy(grad_ready));
    RT_OK(rill_event_destroy(reduced));
    return graph;
}

/* w after steps steps from 0: w' = w + sum over ranks of (w + r + 1). */
static double expected_weight(int steps) {
    double p = rt_size(), w = 0;
    for (int k = 0; k < steps; k++)
        w = (p + 1) * w + p * (p + 1) / 2;
    return w;
}

/* rill_mpi.h: "Collectives captured from a stream replay with the graph".
 * The step, replayed 6 times back to back with no synchronisation between
 * launches, reduces each launch's gradient after it is computed and before
 * it is applied. The graph's DOT dump names the collective. */
static void test_mpi_captured_step_replays_with_its_allreduce(void **state) {
    (void)state;
    rill_comm *comm = rt_world();
    rill_stream *s, *c;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_create(NULL, 0, &c));
    float *w = rt_dev_alloc(N * sizeof(float), NULL);
    float *g = rt_dev_alloc(N * sizeof(float), NULL);
    RT_OK(rill_op_fill_f32(s, w, 0.0f, N));
    RT_OK(rill_stream_synchronize(s));
    rill_graph *graph = capture_step(s, c, comm, w, g);
    char path[64];
    snprintf(path, sizeof path, "/tmp/rill-mpi-graph-%d-%d.dot", (int)getpid(), rt_rank());
    RT_OK(rill_graph_write_dot(graph, path));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char dot[8192];
    size_t len = fread(dot, 1, sizeof dot - 1, f);
    dot[len] = '\0';
    fclose(f);
    unlink(path);
    assert_contains(dot, "rill_allreduce_f32 (sum of 1024 floats)");
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(graph, &exec));
    for (int k = 0; k < 6; k++)
        RT_OK(rill_graph_launch(exec, s));
    RT_OK(rill_stream_synchronize(s));
    check_all(w, N, expected_weight(6), "weights after 6 replays");
    /* An eager collective after the replays still matches the other ranks'. */
    RT_OK(rill_allreduce_f32(s, comm, g, w, N, RILL_REDUCE_MAX));
    RT_OK(rill_stream_synchronize(s));
    check_all(g, N, expected_weight(6), "eager allreduce after the replays");
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(graph));
    rt_dev_free(w);
    rt_dev_free(g);
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(comm));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Two collectives on two streams with no edge between them: each rank's
 * run reaches them in a different order (rank 0's first branch is slow,
 * the others' second), yet every launch starts them in capture order on
 * every rank, so they match instead of crossing. */
static void test_mpi_unordered_collectives_start_in_capture_order(void **state) {
    (void)state;
    rill_comm *comm = rt_world();
    rill_stream *s, *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    float *x = rt_dev_alloc(N * sizeof(float), NULL);
    float *y = rt_dev_alloc(2 * N * sizeof(float), NULL);
    rill_event *fork, *ja, *jb;
    RT_OK(rill_event_create(0, &fork));
    RT_OK(rill_event_create(0, &ja));
    RT_OK(rill_event_create(0, &jb));
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_event_record(fork, s));
    RT_OK(rill_stream_wait_event(a, fork));
    RT_OK(rill_stream_wait_event(b, fork));
    launch(a, delay_kernel, "slow_a", rt_rank() == 0 ? 20000 : 0);
    RT_OK(rill_op_fill_f32(a, x, (float)(rt_rank() + 1), N));
    RT_OK(rill_allreduce_f32(a, comm, x, x, N, RILL_REDUCE_SUM)); /* captured first */
    launch(b, delay_kernel, "slow_b", rt_rank() == 0 ? 0 : 20000);
    RT_OK(rill_op_fill_f32(b, y, 1.0f, 2 * N));
    RT_OK(rill_allreduce_f32(b, comm, y, y, 2 * N, RILL_REDUCE_SUM)); /* a different size */
    RT_OK(rill_event_record(ja, a));
    RT_OK(rill_event_record(jb, b));
    RT_OK(rill_stream_wait_event(s, ja));
    RT_OK(rill_stream_wait_event(s, jb));
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(s, &graph));
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(graph, &exec));
    for (int k = 0; k < 3; k++) {
        RT_OK(rill_graph_launch(exec, s));
        RT_OK(rill_stream_synchronize(s));
        int p = rt_size();
        check_all(x, N, p * (p + 1) / 2, "the first collective");
        check_all(y, 2 * N, p, "the second collective");
    }
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(graph));
    RT_OK(rill_event_destroy(fork));
    RT_OK(rill_event_destroy(ja));
    RT_OK(rill_event_destroy(jb));
    rt_dev_free(x);
    rt_dev_free(y);
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(comm));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A kernel fails, inside the launch before its collective node (inside)
 * or on the stream before the launch: the stream's error is the kernel's,
 * the collective is skipped (as on a stream), and the skip breaks the
 * communicator on every rank, so that the next collective fails at once
 * with a sentence containing expect instead of mismatching. */
static void collective_skipped_after_failure(bool inside, const char *expect) {
    rill_comm *comm = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(4 * sizeof(float), NULL);
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    if (inside)
        launch(s, fail_kernel, "check", 0);
    RT_OK(rill_allreduce_f32(s, comm, x, x, 4, RILL_REDUCE_SUM));
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(s, &graph));
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(graph, &exec));
    if (!inside)
        launch(s, fail_kernel, "check", 0);
    RT_OK(rill_graph_launch(exec, s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "kernel 'check'");
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_allreduce_f32(s, comm, x, x, 4, RILL_REDUCE_SUM));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "was not started: the communicator failed before");
    assert_contains(rill_last_error(), expect);
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(graph));
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(comm));
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_mpi_failure_in_launch_skips_collective_and_breaks_communicator(void **state) {
    (void)state;
    collective_skipped_after_failure(true, "an earlier node of its graph launch failed");
}

/* A launch that its stream skips skips its collectives too. */
static void test_mpi_skipped_launch_skips_its_collectives(void **state) {
    (void)state;
    collective_skipped_after_failure(false, "its graph launch was skipped");
}

/* RILL_COMM_TIMEOUT holds inside graphs: rank 0 launches a graph whose
 * allreduce the other ranks never issue; after about a second its stream
 * fails, naming the graph node and the collective, instead of hanging. */
static void test_mpi_collective_in_graph_times_out(void **state) {
    (void)state;
    setenv("RILL_COMM_TIMEOUT", "1", 1);
    rill_comm *comm = rt_world();
    unsetenv("RILL_COMM_TIMEOUT");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(4 * sizeof(float), NULL);
    if (rt_rank() == 0) {
        RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
        RT_OK(rill_op_fill_f32(s, x, 1.0f, 4));
        RT_OK(rill_allreduce_f32(s, comm, x, x, 4, RILL_REDUCE_SUM));
        rill_graph *graph;
        RT_OK(rill_stream_end_capture(s, &graph));
        rill_graph_exec *exec;
        RT_OK(rill_graph_instantiate(graph, &exec));
        RT_OK(rill_graph_launch(exec, s));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "collective (graph node 1)");
        assert_contains(rill_last_error(), "rill_allreduce_f32 (sum of 4 floats) on rank 0");
        assert_contains(rill_last_error(), "did not complete within RILL_COMM_TIMEOUT (1 s)");
        RT_OK(rill_stream_clear_error(s));
        RT_OK(rill_graph_exec_destroy(exec));
        RT_OK(rill_graph_destroy(graph));
    }
    RT_OK(rill_comm_destroy(comm));
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A graph outlives its communicator: its launch fails cleanly, naming the
 * collective, runs nothing, and leaves the stream usable. */
static void test_mpi_launch_after_communicator_destroyed_fails(void **state) {
    (void)state;
    rill_comm *comm = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(4 * sizeof(float), NULL);
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_op_fill_f32(s, x, 5.0f, 4));
    RT_OK(rill_broadcast(s, comm, x, 4 * sizeof(float), 0));
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(s, &graph));
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(graph, &exec));
    RT_OK(rill_comm_destroy(comm));
    RT_OK(rill_op_fill_f32(s, x, 2.0f, 4));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_launch(exec, s));
    assert_contains(rill_last_error(), "rill_graph_launch (graph node 1): rill_broadcast, "
                                       "captured in the graph, names a communicator that was "
                                       "destroyed");
    RT_OK(rill_stream_synchronize(s));
    check_all(x, 4, 2.0, "the buffer the launch would have filled");
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(graph));
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* rill_graph_exec_update takes a graph whose collective has other buffers:
 * launches from then on reduce those. */
static void test_mpi_exec_update_changes_collective_buffers(void **state) {
    (void)state;
    rill_comm *comm = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(N * sizeof(float), NULL);
    float *y = rt_dev_alloc(N * sizeof(float), NULL);
    rill_graph *gx, *gy;
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_op_fill_f32(s, x, 1.0f, N));
    RT_OK(rill_allreduce_f32(s, comm, x, x, N, RILL_REDUCE_SUM));
    RT_OK(rill_stream_end_capture(s, &gx));
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_op_fill_f32(s, y, 2.0f, N));
    RT_OK(rill_allreduce_f32(s, comm, y, y, N, RILL_REDUCE_SUM));
    RT_OK(rill_stream_end_capture(s, &gy));
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(gx, &exec));
    RT_OK(rill_op_fill_f32(s, y, 0.0f, N));
    RT_OK(rill_graph_launch(exec, s));
    RT_OK(rill_graph_exec_update(exec, gy));
    RT_OK(rill_graph_launch(exec, s));
    RT_OK(rill_stream_synchronize(s));
    check_all(x, N, rt_size(), "the first launch's buffer");
    check_all(y, N, 2.0 * rt_size(), "the updated launch's buffer");
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(gx));
    RT_OK(rill_graph_destroy(gy));
    rt_dev_free(x);
    rt_dev_free(y);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(comm));
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_captured_step_replays_with_its_allreduce),
        cmocka_unit_test(test_mpi_unordered_collectives_start_in_capture_order),
        cmocka_unit_test(test_mpi_failure_in_launch_skips_collective_and_breaks_communicator),
        cmocka_unit_test(test_mpi_skipped_launch_skips_its_collectives),
        cmocka_unit_test(test_mpi_collective_in_graph_times_out),
        cmocka_unit_test(test_mpi_launch_after_communicator_destroyed_fails),
        cmocka_unit_test(test_mpi_exec_update_changes_collective_buffers),
    };
    return RT_MPI_RUN(tests);
}
