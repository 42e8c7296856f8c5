/* SPDX-License-Identifier: MIT */
/* Stream order of collectives over real MPI (-np 2): a collective starts
 * after its stream's earlier work, its stream's later work and other
 * streams that wait on an event recorded after it wait for it (and so for
 * the other ranks), and a communicator starts its collectives in issue
 * order whatever the streams. Where a wrong order could go unseen, one
 * rank delays its side so that the wrong order would read stale data. */
#include "mpi_fixture.h"

#include <stdlib.h>
#include <string.h>

#define N 4096

typedef struct slow_fill_args {
    float *x;
    float value;
    size_t n;
    unsigned delay_us;
} slow_fill_args;

/* Spins, then fills: a kernel that writes its buffer late. */
static void slow_fill(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const slow_fill_args *a = args;
    rt_spin_us(a->delay_us);
    for (size_t i = 0; i < a->n; i++)
        a->x[i] = a->value;
}

static void launch_slow_fill(rill_stream *s, float *x, float value, size_t n, unsigned delay_us) {
    rill_kernel_desc d = {.name = "slow_fill", .cpu = slow_fill};
    rill_kernel *k;
    RT_OK(rill_kernel_create(&d, &k));
    slow_fill_args a = {x, value, n, delay_us};
    rill_access acc = {x, n * sizeof(float), RILL_WRITE};
    rill_launch l = {.grid = {1, 1, 1},
                     .block = {1, 1, 1},
                     .args = &a,
                     .args_size = sizeof a,
                     .accesses = &acc,
                     .num_accesses = 1};
    RT_OK(rill_launch_kernel(s, k, &l));
    RT_OK(rill_kernel_destroy(k));
}

/* The sum over the ranks of rank + 1. */
static float sum_of_ranks_plus_one(void) {
    int size = rt_size();
    return (float)(size * (size + 1) / 2);
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

/* rill_mpi.h: "it starts when the stream's earlier work is done". A kernel
 * that writes the buffer 20 ms late, then the allreduce on the same stream:
 * the sum is of what the kernel wrote. */
static void test_mpi_allreduce_reduces_what_earlier_kernel_wrote(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(N * sizeof(float), NULL);
    RT_OK(rill_op_fill_f32(s, x, -100.0f, N));
    launch_slow_fill(s, x, (float)(rt_rank() + 1), N, 20000);
    RT_OK(rill_allreduce_f32(s, c, x, x, N, RILL_REDUCE_SUM));
    RT_OK(rill_stream_synchronize(s));
    check_all(x, N, sum_of_ranks_plus_one(), "allreduce after a kernel on its stream");
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "events and rill_stream_wait_* order it with other streams
 * exactly like a kernel". A kernel on another stream waits on an event
 * recorded after the allreduce, which rank 1 issues 50 ms late: the kernel
 * still reads the sum, not what was there before. */
static void test_mpi_kernel_waiting_on_event_after_allreduce_reads_result(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s1, *s2;
    RT_OK(rill_stream_create(NULL, 0, &s1));
    RT_OK(rill_stream_create(NULL, 0, &s2));
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    float *x = rt_dev_alloc(N * sizeof(float), NULL), *y = rt_dev_alloc(N * sizeof(float), NULL);
    float *out = rt_dev_alloc(N * sizeof(float), NULL);
    RT_OK(rill_op_fill_f32(s1, x, (float)(rt_rank() + 1), N));
    RT_OK(rill_op_fill_f32(s1, y, -100.0f, N));
    RT_OK(rill_stream_synchronize(s1));
    if (rt_rank() == 1)
        rt_sleep_us(50000);
    RT_OK(rill_allreduce_f32(s1, c, y, x, N, RILL_REDUCE_SUM));
    RT_OK(rill_event_record(e, s1));
    RT_OK(rill_stream_wait_event(s2, e));
    RT_OK(rill_op_add_scalar_f32(s2, out, y, 1.0f, N));
    RT_OK(rill_stream_synchronize(s2));
    check_all(out, N, sum_of_ranks_plus_one() + 1.0f, "kernel after the allreduce's event");
    rt_dev_free(x);
    rt_dev_free(y);
    rt_dev_free(out);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_comm_destroy(c));
}

static void set_flag(void *flag) {
    atomic_store((atomic_int *)flag, 1);
}

/* rill_mpi.h: "the stream's later work waits for it", and so for the
 * other ranks: rank 1 issues its allreduce only after rank 0 has seen its
 * own later work still held back. */
static void test_mpi_later_work_waits_for_the_other_rank(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(N * sizeof(float), NULL);
    RT_OK(rill_op_fill_f32(s, x, (float)(rt_rank() + 1), N));
    atomic_int after = 0;
    int go = 1;
    if (rt_rank() == 0) {
        RT_OK(rill_allreduce_f32(s, c, x, x, N, RILL_REDUCE_SUM));
        RT_OK(rill_launch_host_func(s, set_flag, &after));
        assert_int_equal(rill_stream_query(s), RILL_NOT_READY);
        assert_int_equal(atomic_load(&after), 0);
        for (int r = 1; r < rt_size(); r++)
            MPI_Send(&go, 1, MPI_INT, r, 0, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&go, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        RT_OK(rill_allreduce_f32(s, c, x, x, N, RILL_REDUCE_SUM));
        RT_OK(rill_launch_host_func(s, set_flag, &after));
    }
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&after), 1);
    check_all(x, N, sum_of_ranks_plus_one(), "allreduce");
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "A communicator starts its collectives in issue order ...
 * MPI matches them in the order they are called, whatever the streams."
 * On rank 0 the first collective's stream is held back 50 ms by a kernel
 * while the second's stream is free; had rank 0 called the second first,
 * it would have met rank 1's first (another size and reduction). */
static void test_mpi_collectives_start_in_issue_order_across_streams(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s1, *s2;
    RT_OK(rill_stream_create(NULL, 0, &s1));
    RT_OK(rill_stream_create(NULL, 0, &s2));
    float *a = rt_dev_alloc(3 * sizeof(float), NULL), *b = rt_dev_alloc(5 * sizeof(float), NULL);
    float rank_value = (float)(rt_rank() + 1);
    RT_OK(rill_op_fill_f32(s2, b, rank_value, 5));
    RT_OK(rill_stream_synchronize(s2));
    launch_slow_fill(s1, a, rank_value, 3, rt_rank() == 0 ? 50000 : 0);
    RT_OK(rill_allreduce_f32(s1, c, a, a, 3, RILL_REDUCE_SUM));
    RT_OK(rill_allreduce_f32(s2, c, b, b, 5, RILL_REDUCE_MAX));
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_stream_synchronize(s2));
    check_all(a, 3, sum_of_ranks_plus_one(), "first collective (sum)");
    check_all(b, 5, (float)rt_size(), "second collective (max)");
    rt_dev_free(a);
    rt_dev_free(b);
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_comm_destroy(c));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_allreduce_reduces_what_earlier_kernel_wrote),
        cmocka_unit_test(test_mpi_kernel_waiting_on_event_after_allreduce_reads_result),
        cmocka_unit_test(test_mpi_later_work_waits_for_the_other_rank),
        cmocka_unit_test(test_mpi_collectives_start_in_issue_order_across_streams),
    };
    return RT_MPI_RUN(tests);
}
