/* SPDX-License-Identifier: MIT */
/* Collectives on a CUDA device's memory across processes (ctest runs it at
 * -np 2 with RILL_TEST_DEVICE=cuda: with the stand-in driver, staged and
 * handed to MPI as it is, and on a GPU, both ranks on cuda:0). rill_mpi.h:
 * "Either way it all runs in stream order, none of it waits on the calling
 * thread, and the host never touches the device's memory. Several
 * processes may share one GPU." Results are read back with rill_memcpy. */
#include "mpi_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#define SEC_NS 1000000000ull

/* Element i of rank r's input: small integers, so sums are exact. */
static float value(int r, size_t i) {
    return (float)((int)((i * 5u + (size_t)r * 11u) % 37u) - 18);
}

static float sum_over_ranks(size_t i, int size) {
    float acc = 0;
    for (int r = 0; r < size; r++)
        acc += value(r, i);
    return acc;
}

static float *pinned(size_t n) {
    float *p = NULL;
    RT_OK(rill_malloc_host(n * sizeof *p, (void **)&p));
    return p;
}

/* A gate holds the stream: the allreduce's call returns at once, MPI has
 * nothing to start on this rank (the other rank's part waits for it), and
 * the copy after it has not run; once the gate opens, the allreduce reduces
 * what the copy before it wrote, and the copy after it reads its result.
 * Large enough to take many pieces of staging and MPI. */
static void test_mpi_cuda_allreduce_returns_while_its_stream_is_held(void **state) {
    (void)state;
    const size_t n = (1u << 20) + 3;
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size(), aware = -1;
    RT_OK(rill_comm_cuda_aware(c, &aware));
    if (rank == 0)
        printf("collectives on a CUDA device's memory: %s\n",
               aware ? "handed to MPI as it is (CUDA-aware)"
                     : "staged through page-locked host memory");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *in = pinned(n), *out = pinned(n), *x;
    for (size_t i = 0; i < n; i++) {
        in[i] = value(rank, i);
        out[i] = -1000.0f;
    }
    RT_OK(rill_malloc_async(n * sizeof(float), s, (void **)&x));
    rt_gate g;
    rt_gate_reset(&g);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_memcpy_async(x, in, n * sizeof(float), s));
    uint64_t t0 = rt_now_ns();
    RT_OK(rill_allreduce_f32(s, c, x, x, n, RILL_REDUCE_SUM));
    uint64_t took = rt_now_ns() - t0;
    RT_OK(rill_memcpy_async(out, x, n * sizeof(float), s));
    assert_true(rt_gate_wait_entered(&g));
    if (took >= SEC_NS)
        fail_msg("rank %d: rill_allreduce_f32 took %.3f s to return while its stream was held",
                 rank, (double)took / 1e9);
    rt_sleep_us(50000);
    assert_int_equal(rill_stream_query(s), RILL_NOT_READY);
    assert_true(out[0] == -1000.0f && out[n - 1] == -1000.0f);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    for (size_t i = 0; i < n; i++)
        if (out[i] != sum_over_ranks(i, size))
            fail_msg("rank %d: element %zu is %g, expected %g", rank, i, (double)out[i],
                     (double)sum_over_ranks(i, size));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_free_host(in));
    RT_OK(rill_free_host(out));
    RT_OK(rill_comm_destroy(c));
}

/* A training step's order across streams: the compute stream writes the
 * gradient (a fill), the communication stream waits for it through an
 * event, averages it, and the compute stream waits for that through
 * another event before it adds 1. Repeated with the buffers reused, so
 * that staging memory is reused between steps. */
static void test_mpi_cuda_average_orders_with_other_streams_through_events(void **state) {
    (void)state;
    const size_t n = 4099;
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    rill_stream *compute, *comm;
    RT_OK(rill_stream_create(NULL, 0, &compute));
    RT_OK(rill_stream_create(NULL, 0, &comm));
    rill_event *ready, *reduced;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &ready));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &reduced));
    float *grad, *out = pinned(n);
    RT_OK(rill_malloc(NULL, n * sizeof(float), (void **)&grad));
    float mean = 0; /* of (rank + 1) * step over the ranks */
    for (int step = 1; step <= 5; step++) {
        RT_OK(rill_op_fill_f32(compute, grad, (float)((rank + 1) * step), n));
        RT_OK(rill_event_record(ready, compute));
        RT_OK(rill_stream_wait_event(comm, ready));
        RT_OK(rill_allreduce_f32(comm, c, grad, grad, n, RILL_REDUCE_AVG));
        RT_OK(rill_event_record(reduced, comm));
        RT_OK(rill_stream_wait_event(compute, reduced));
        RT_OK(rill_op_add_scalar_f32(compute, grad, grad, 1.0f, n));
        RT_OK(rill_memcpy_async(out, grad, n * sizeof(float), compute));
        RT_OK(rill_stream_synchronize(compute));
        mean = 0;
        for (int r = 0; r < size; r++)
            mean += (float)((r + 1) * step);
        mean /= (float)size;
        for (size_t i = 0; i < n; i++)
            if (out[i] != mean + 1.0f)
                fail_msg("rank %d, step %d: element %zu is %g, expected %g", rank, step, i,
                         (double)out[i], (double)(mean + 1.0f));
    }
    RT_OK(rill_free(grad));
    RT_OK(rill_free_host(out));
    RT_OK(rill_event_destroy(ready));
    RT_OK(rill_event_destroy(reduced));
    RT_OK(rill_stream_destroy(compute));
    RT_OK(rill_stream_destroy(comm));
    RT_OK(rill_comm_destroy(c));
}

/* Point to point between the two ranks' GPU memory, both ways at once on
 * two streams, each message then echoed back: rank 0 gets its own bytes. */
static void test_mpi_cuda_send_and_receive_both_ways(void **state) {
    (void)state;
    const size_t bytes = 3 * 4096 + 5;
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    if (size < 2) {
        RT_OK(rill_comm_destroy(c));
        skip();
    }
    int peer = rank == 0 ? 1 : 0;
    if (rank > 1) {
        RT_OK(rill_comm_destroy(c));
        return;
    }
    rill_stream *ss, *rs;
    RT_OK(rill_stream_create(NULL, 0, &ss));
    RT_OK(rill_stream_create(NULL, 0, &rs));
    unsigned char *mine = rt_dev_alloc(bytes, NULL), *theirs = rt_dev_alloc(bytes, NULL);
    unsigned char *host = malloc(bytes);
    assert_non_null(host);
    for (size_t i = 0; i < bytes; i++)
        host[i] = (unsigned char)(i * 7u + (size_t)rank * 91u);
    RT_OK(rill_memcpy(mine, host, bytes));
    RT_OK(rill_recv(rs, c, theirs, bytes, peer));
    RT_OK(rill_send(ss, c, mine, bytes, peer));
    RT_OK(rill_stream_wait_stream(ss, rs)); /* echo what arrived */
    RT_OK(rill_send(ss, c, theirs, bytes, peer));
    RT_OK(rill_recv(rs, c, mine, bytes, peer));
    RT_OK(rill_stream_synchronize(ss));
    RT_OK(rill_stream_synchronize(rs));
    rt_dev_read(host, mine, bytes);
    for (size_t i = 0; i < bytes; i++)
        if (host[i] != (unsigned char)(i * 7u + (size_t)rank * 91u))
            fail_msg("rank %d: byte %zu came back as %u", rank, i, host[i]);
    free(host);
    rt_dev_free(mine);
    rt_dev_free(theirs);
    RT_OK(rill_stream_destroy(ss));
    RT_OK(rill_stream_destroy(rs));
    RT_OK(rill_comm_destroy(c));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_cuda_allreduce_returns_while_its_stream_is_held),
        cmocka_unit_test(test_mpi_cuda_average_orders_with_other_streams_through_events),
        cmocka_unit_test(test_mpi_cuda_send_and_receive_both_ways),
    };
    return RT_MPI_RUN(tests);
}
