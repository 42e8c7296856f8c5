/* SPDX-License-Identifier: MIT */
/* Communication overlaps computation when every compute unit is busy
 * (-np 2; ctest runs it with one worker per rank, and again under Open
 * MPI's default binding, which gives each rank one processor and so a CPU
 * device of one compute unit). Stream A runs four long host functions,
 * which hold the device's only unit until the test opens their gate; a
 * collective on stream B must start and complete meanwhile, on the
 * communication thread, without a unit to run B's commands. A's own flags
 * say whether it still ran when B's work was done, so the checks hold on a
 * loaded machine whatever the timings; the gate opens by itself after
 * HOLD_NS, so a run that needs a unit for B fails instead of hanging. */
#include "mpi_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#define N        1024
#define HOST_FNS 4
#define HOLD_NS  5000000000ull

/* Stream A's long work: each host function runs until the test opens the
 * gate or the deadline passes, then counts itself done. */
typedef struct long_work {
    atomic_int started;
    atomic_int done;
    atomic_int open;
    uint64_t deadline_ns;
} long_work;

static void long_host_fn(void *arg) {
    long_work *w = arg;
    atomic_fetch_add(&w->started, 1);
    while (!atomic_load(&w->open) && rt_now_ns() < w->deadline_ns)
        rt_sleep_us(200);
    atomic_fetch_add(&w->done, 1);
}

/* Launches A's host functions and waits until the first one runs: from
 * then on the device's units (one, under the tests' settings) are busy. */
static void start_long_work(rill_stream *a, long_work *w) {
    atomic_init(&w->started, 0);
    atomic_init(&w->done, 0);
    atomic_init(&w->open, 0);
    w->deadline_ns = rt_now_ns() + HOLD_NS;
    for (int i = 0; i < HOST_FNS; i++)
        RT_OK(rill_launch_host_func(a, long_host_fn, w));
    while (atomic_load(&w->started) == 0 && rt_now_ns() < w->deadline_ns)
        rt_sleep_us(100);
    assert_int_equal(atomic_load(&w->started), 1);
}

static int compute_units(void) {
    rill_device *dev;
    rill_device_info info;
    RT_OK(rill_get_device(&dev));
    RT_OK(rill_device_get_info(dev, &info));
    return info.compute_units;
}

/* B's work is done (its synchronize returned): A must not have finished
 * any host function yet. */
static void check_a_still_runs(const long_work *w, uint64_t t0, const char *what) {
    int done = atomic_load(&w->done);
    double ms = (double)(rt_now_ns() - t0) / 1e6;
    printf("rank %d (%d compute unit(s)): %s completed after %.1f ms, with %d of stream A's %d "
           "host functions done\n",
           rt_rank(), compute_units(), what, ms, done, HOST_FNS);
    fflush(stdout);
    if (done != 0)
        fail_msg("rank %d: %s completed only after %d of stream A's host functions had finished "
                 "(%.1f ms): it waited for a compute unit",
                 rt_rank(), what, done, ms);
}

static void check_all(const float *dev, size_t n, float want, const char *what) {
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    rt_dev_read(got, dev, n * sizeof *got);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want)
            fail_msg("rank %d: %s: element %zu is %g, expected %g", rt_rank(), what, i,
                     (double)got[i], (double)want);
    free(got);
}

static float *filled(float value) {
    float *host = malloc(N * sizeof *host);
    assert_non_null(host);
    for (size_t i = 0; i < N; i++)
        host[i] = value;
    float *dev = rt_dev_alloc(N * sizeof(float), host);
    free(host);
    return dev;
}

/* The sum over the ranks of rank + 1. */
static float sum_of_ranks_plus_one(void) {
    int size = rt_size();
    return (float)(size * (size + 1) / 2);
}

/* rill_mpi.h: a collective "starts when the stream's earlier work is done"
 * and holds no compute unit. An allreduce on an idle stream B completes
 * while stream A's host functions hold every unit. */
static void test_mpi_allreduce_completes_while_other_stream_holds_every_unit(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    float *x = filled((float)(rt_rank() + 1));
    long_work w;
    start_long_work(a, &w);
    uint64_t t0 = rt_now_ns();
    RT_OK(rill_allreduce_f32(b, c, x, x, N, RILL_REDUCE_SUM));
    RT_OK(rill_stream_synchronize(b));
    check_a_still_runs(&w, t0, "the allreduce on stream B");
    atomic_store(&w.open, 1);
    RT_OK(rill_stream_synchronize(a));
    assert_int_equal(atomic_load(&w.done), HOST_FNS);
    check_all(x, N, sum_of_ranks_plus_one(), "allreduce");
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_comm_destroy(c));
}

/* A collective whose stream waits on an event recorded after another
 * collective: the wait, the record and both collectives need no unit, so
 * both complete while A holds every unit, the second after the first (it
 * reduces the first's result). */
static void test_mpi_collective_behind_event_of_collective_needs_no_unit(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *a, *b1, *b2;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b1));
    RT_OK(rill_stream_create(NULL, 0, &b2));
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    float *x = filled((float)(rt_rank() + 1));
    long_work w;
    start_long_work(a, &w);
    uint64_t t0 = rt_now_ns();
    RT_OK(rill_allreduce_f32(b1, c, x, x, N, RILL_REDUCE_SUM));
    RT_OK(rill_event_record(e, b1));
    RT_OK(rill_stream_wait_event(b2, e));
    RT_OK(rill_allreduce_f32(b2, c, x, x, N, RILL_REDUCE_SUM));
    RT_OK(rill_stream_synchronize(b2));
    check_a_still_runs(&w, t0, "two allreduces ordered by an event");
    atomic_store(&w.open, 1);
    RT_OK(rill_stream_synchronize(a));
    assert_int_equal(atomic_load(&w.done), HOST_FNS);
    check_all(x, N, sum_of_ranks_plus_one() * (float)rt_size(), "allreduce of the allreduce");
    rt_dev_free(x);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b1));
    RT_OK(rill_stream_destroy(b2));
    RT_OK(rill_comm_destroy(c));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_allreduce_completes_while_other_stream_holds_every_unit),
        cmocka_unit_test(test_mpi_collective_behind_event_of_collective_needs_no_unit),
    };
    return RT_MPI_RUN(tests);
}
