/* SPDX-License-Identifier: MIT */
/* Failures of collectives over real MPI (-np 2): MPI's own error becomes
 * the stream's sticky error, naming the call, the rank and MPI's string; a
 * failure breaks the communicator; RILL_COMM_TIMEOUT fails what does not
 * complete instead of hanging; a skipped collective leaves the other rank
 * to its timeout; a fresh communicator works afterwards. Ranks meet at
 * MPI_Barrier between steps, so that each failure is the one provoked. */
#include "mpi_fixture.h"

#include <stdlib.h>
#include <string.h>

#define SEC_NS 1000000000ull

static void assert_contains(const char *text, const char *part) {
    if (strstr(text, part) == NULL)
        fail_msg("rank %d: expected \"%s\" in: %s", rt_rank(), part, text);
}

static rill_comm *world_with_timeout(const char *seconds) {
    setenv("RILL_COMM_TIMEOUT", seconds, 1);
    rill_comm *c = rt_world();
    unsetenv("RILL_COMM_TIMEOUT");
    return c;
}

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    rill_kernel_fail(ctx, "value out of range");
}

/* rill_mpi.h: "An MPI failure ... fails the command: the stream's sticky
 * error, with a sentence naming the collective, the rank and MPI's error
 * string", and "A failure breaks the communicator". Rank 1 receives 32
 * bytes of a 64-byte message: MPI truncates it and says so. */
static void test_mpi_truncated_receive_is_sticky_error_with_mpi_string(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    unsigned char *buf = rt_dev_alloc(64, NULL);
    if (rt_rank() == 0) {
        RT_OK(rill_send(s, c, buf, 64, 1));
        RT_OK(rill_stream_synchronize(s));
    } else if (rt_rank() == 1) {
        RT_OK(rill_recv(s, c, buf, 32, 0));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "rill_recv (32 bytes from rank 0) on rank 1 of 2 "
                                           "failed: MPI_ERR_TRUNCATE: message truncated");
        RT_OK(rill_stream_clear_error(s));
        RT_OK(rill_broadcast(s, c, buf, 8, 0));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "rill_broadcast (8 bytes from rank 0) on rank 1 of 2 "
                                           "was not started: the communicator failed before");
        RT_OK(rill_stream_clear_error(s));
    }
    rt_dev_free(buf);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* rill_mpi.h: "A receive must get as many bytes as it asks for: a shorter
 * message fails it". */
static void test_mpi_short_message_fails_receive(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    unsigned char *buf = rt_dev_alloc(32, NULL);
    if (rt_rank() == 0) {
        RT_OK(rill_send(s, c, buf, 16, 1));
        RT_OK(rill_stream_synchronize(s));
    } else if (rt_rank() == 1) {
        RT_OK(rill_recv(s, c, buf, 32, 0));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "rill_recv (32 bytes from rank 0) on rank 1 of 2 "
                                           "failed: rank 0 sent 16 bytes, and the receive asked "
                                           "for 32");
        RT_OK(rill_stream_clear_error(s));
    }
    rt_dev_free(buf);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* rill_mpi.h: "no completion within RILL_COMM_TIMEOUT seconds ... fails
 * the command". Rank 0 receives a message that rank 1 never sends: after
 * about a second its stream fails instead of hanging, and destroy returns. */
static void test_mpi_unmatched_receive_times_out(void **state) {
    (void)state;
    rill_comm *c = world_with_timeout("1");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    unsigned char *buf = rt_dev_alloc(16, NULL);
    if (rt_rank() == 0) {
        uint64_t t0 = rt_now_ns();
        RT_OK(rill_recv(s, c, buf, 16, 1));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        uint64_t waited = rt_now_ns() - t0;
        assert_true(waited >= SEC_NS / 2 && waited < 30 * SEC_NS);
        assert_contains(rill_last_error(), "rill_recv (16 bytes from rank 1) on rank 0 of 2 did "
                                           "not complete within RILL_COMM_TIMEOUT (1 s)");
        RT_OK(rill_stream_clear_error(s));
    }
    rt_dev_free(buf);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* rill_mpi.h: a collective "skipped because its stream had failed (as a
 * kernel is)" breaks the communicator, and "The other ranks' matching
 * collective fails at their RILL_COMM_TIMEOUT". A communicator created
 * afterwards works. */
static void test_mpi_skipped_collective_breaks_communicator_and_peer_times_out(void **state) {
    (void)state;
    rill_comm *c = world_with_timeout("1");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(4 * sizeof(float), NULL);
    RT_OK(rill_op_fill_f32(s, x, 1.0f, 4));
    if (rt_rank() == 0) {
        rill_kernel_desc d = {.name = "check", .cpu = fail_kernel};
        rill_kernel *k;
        RT_OK(rill_kernel_create(&d, &k));
        rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
        RT_OK(rill_launch_kernel(s, k, &l));
        RT_OK(rill_kernel_destroy(k));
        RT_OK(rill_allreduce_f32(s, c, x, x, 4, RILL_REDUCE_SUM));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "kernel 'check'");
        RT_OK(rill_stream_clear_error(s));
        RT_OK(rill_allreduce_f32(s, c, x, x, 4, RILL_REDUCE_SUM));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "rill_allreduce_f32 (sum of 4 floats) on rank 0 of 2 "
                                           "was skipped because its stream had failed");
    } else {
        RT_OK(rill_allreduce_f32(s, c, x, x, 4, RILL_REDUCE_SUM));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_contains(rill_last_error(), "rill_allreduce_f32 (sum of 4 floats) on rank 1 of 2 "
                                           "did not complete within RILL_COMM_TIMEOUT (1 s)");
    }
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_comm_destroy(c));
    rt_dev_free(x);
    MPI_Barrier(MPI_COMM_WORLD);

    rill_comm *fresh = rt_world();
    float *y = rt_dev_alloc(4 * sizeof(float), NULL), host[4];
    RT_OK(rill_op_fill_f32(s, y, 1.0f, 4));
    RT_OK(rill_allreduce_f32(s, fresh, y, y, 4, RILL_REDUCE_SUM));
    RT_OK(rill_stream_synchronize(s));
    rt_dev_read(host, y, sizeof host);
    for (int i = 0; i < 4; i++)
        assert_true(host[i] == (float)rt_size());
    rt_dev_free(y);
    RT_OK(rill_comm_destroy(fresh));
    RT_OK(rill_stream_destroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_truncated_receive_is_sticky_error_with_mpi_string),
        cmocka_unit_test(test_mpi_short_message_fails_receive),
        cmocka_unit_test(test_mpi_unmatched_receive_times_out),
        cmocka_unit_test(test_mpi_skipped_collective_breaks_communicator_and_peer_times_out),
    };
    return RT_MPI_RUN(tests);
}
