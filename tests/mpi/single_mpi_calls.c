/* SPDX-License-Identifier: MIT */
/* rill_mpi.h's calls in a world of one process (MPI_Init without mpirun
 * makes a singleton): every refused argument, through the public API, with
 * its sentence; and the calls that work with one rank (a collective, a
 * send to itself). */
#include "mpi_fixture.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static void assert_contains(const char *text, const char *part) {
    if (strstr(text, part) == NULL)
        fail_msg("expected \"%s\" in: %s", part, text);
}

/* rill_mpi.h: "Each refuses, with RILL_ERROR_INVALID_ARGUMENT and before
 * anything is issued, a NULL or destroyed handle, ... a count above
 * INT_MAX ..., a buffer that is not device memory of the stream's device
 * ..., and a root or peer that is not a rank of comm." */
static void test_single_bad_arguments_are_refused_with_sentences(void **state) {
    (void)state;
    rill_comm *c = rt_world(), *dead = rt_world();
    RT_OK(rill_comm_destroy(dead));
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(16, NULL), host[4] = {0};
    int n = 5;

    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_create_mpi(MPI_COMM_WORLD, NULL));
    assert_contains(rill_last_error(), "rill_comm_create_mpi: out is NULL");
    rill_comm *none = (rill_comm *)&n;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_create_mpi(MPI_COMM_NULL, &none));
    assert_null(none);
    assert_contains(rill_last_error(), "comm is MPI_COMM_NULL");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_rank(NULL, &n));
    assert_int_equal(n, 0);
    assert_contains(rill_last_error(), "rill_comm_rank: comm is NULL");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_size(dead, &n));
    assert_contains(rill_last_error(), "rill_comm_size: the communicator handle is not valid");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_destroy(dead));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_rank(c, NULL));

    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_allreduce_f32(s, c, x, x, (size_t)INT_MAX + 1, RILL_REDUCE_SUM));
    assert_contains(rill_last_error(), "rill_allreduce_f32: count is 2147483648, more than MPI "
                                       "takes in one call (2147483647)");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_allreduce_f32(s, c, x, host, 4, RILL_REDUCE_SUM));
    assert_contains(rill_last_error(), "is not device memory");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_allreduce_f32(s, c, x, x, 5, RILL_REDUCE_MIN));
    assert_contains(rill_last_error(), "covers 20 bytes (count floats), but its allocation has 16");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_allreduce_f32(s, c, x, x, 4, (rill_reduce_op)9));
    assert_contains(rill_last_error(), "op 9 is not a reduction");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_broadcast(s, c, x, 16, 1));
    assert_contains(rill_last_error(), "rill_broadcast: root 1 is not a rank of the "
                                       "communicator, whose ranks are 0 to 0");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_send(s, c, x, 16, -1));
    assert_contains(rill_last_error(), "rill_send: peer -1 is not a rank");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_recv(s, c, NULL, 16, 0));
    assert_contains(rill_last_error(), "rill_recv: buf is NULL");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_allgather(s, c, x, x, 8));
    assert_contains(rill_last_error(), "rill_allgather: recv and send overlap");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_reduce_scatter_f32(s, c, x, NULL, 2, RILL_REDUCE_SUM));
    assert_contains(rill_last_error(), "rill_reduce_scatter_f32: send is NULL");
    RT_OK(rill_stream_synchronize(s));

    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* With one rank, a collective is this rank's data, and a send to itself
 * meets the receive issued before it on another stream. */
static void test_single_collective_and_send_to_self_work(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s1, *s2;
    RT_OK(rill_stream_create(NULL, 0, &s1));
    RT_OK(rill_stream_create(NULL, 0, &s2));
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    float *x = rt_dev_alloc(sizeof in, in), *y = rt_dev_alloc(sizeof in, NULL);
    float *z = rt_dev_alloc(sizeof in, NULL);
    RT_OK(rill_allreduce_f32(s1, c, y, x, 4, RILL_REDUCE_AVG));
    RT_OK(rill_recv(s2, c, z, sizeof in, 0));
    RT_OK(rill_send(s1, c, y, sizeof in, 0));
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_stream_synchronize(s2));
    rt_dev_read(out, z, sizeof out);
    assert_memory_equal(out, in, sizeof in);
    rt_dev_free(x);
    rt_dev_free(y);
    rt_dev_free(z);
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "RILL_MPI_CUDA_AWARE, read when a communicator is created: 1
 * hands device pointers to MPI, 0 stages them, unset or empty asks MPI
 * ...; another value is RILL_ERROR_INVALID_ARGUMENT from
 * rill_comm_create_mpi", and rill_comm_cuda_aware says which. */
static void test_single_cuda_path_follows_the_environment(void **state) {
    (void)state;
    static const char *const values[] = {"1", "0", ""};
    for (int i = 0; i < 3; i++) {
        setenv("RILL_MPI_CUDA_AWARE", values[i], 1);
        rill_comm *c = rt_world();
        unsetenv("RILL_MPI_CUDA_AWARE");
        int aware = -1;
        RT_OK(rill_comm_cuda_aware(c, &aware));
        if (i < 2)
            assert_int_equal(aware, values[i][0] == '1');
        else
            assert_true(aware == 0 || aware == 1); /* as MPI says */
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_cuda_aware(c, NULL));
        assert_contains(rill_last_error(), "rill_comm_cuda_aware: out is NULL");
        RT_OK(rill_comm_destroy(c));
    }
    setenv("RILL_MPI_CUDA_AWARE", "yes", 1);
    rill_comm *c = (rill_comm *)&c;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    unsetenv("RILL_MPI_CUDA_AWARE");
    assert_null(c);
    assert_contains(rill_last_error(), "rill_comm_create_mpi: RILL_MPI_CUDA_AWARE='yes' is "
                                       "neither 0 nor 1");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_bad_arguments_are_refused_with_sentences),
        cmocka_unit_test(test_single_collective_and_send_to_self_work),
        cmocka_unit_test(test_single_cuda_path_follows_the_environment),
    };
    return RT_MPI_RUN(tests);
}
