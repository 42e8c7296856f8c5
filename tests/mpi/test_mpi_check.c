/* SPDX-License-Identifier: MIT */
/* RILL_COMM_CHECK=1 over real MPI (-np 2 and 3): a collective whose count,
 * op, root or kind differs between ranks fails on every rank with a
 * sentence naming the collective, this rank's value and the other one,
 * before any rank starts it; matching collectives give their results as
 * without the check; with the mode off no extra MPI call is made. The test
 * counts the MPI_Iallreduce calls that librill_mpi makes through MPI's
 * profiling interface: this file defines MPI_Iallreduce, which the
 * statically linked transport calls, and forwards to PMPI_Iallreduce. */
#include "mpi_fixture.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI_Iallreduce calls made so far: with MPI_INT (the check), with
 * MPI_FLOAT (rill_allreduce_f32). Written by rill's communication thread;
 * read once a synchronize has ordered them. */
static _Atomic long int_calls, float_calls;

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
    if (datatype == MPI_INT)
        atomic_fetch_add(&int_calls, 1);
    else if (datatype == MPI_FLOAT)
        atomic_fetch_add(&float_calls, 1);
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

static void assert_contains(const char *text, const char *part) {
    if (strstr(text, part) == NULL)
        fail_msg("rank %d: expected \"%s\" in: %s", rt_rank(), part, text);
}

static rill_comm *world_checked(const char *value) {
    setenv("RILL_COMM_CHECK", value, 1);
    rill_comm *c = rt_world();
    unsetenv("RILL_COMM_CHECK");
    return c;
}

static int last_rank(void) {
    return rt_size() - 1;
}

/* Synchronizes s, expects the sticky error, checks that its sentence holds
 * "<what> on rank R of N failed: RILL_COMM_CHECK found that this rank
 * <found>", and clears it. */
static void expect_check_failure(rill_stream *s, const char *what, const char *found) {
    char part[512];
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    snprintf(part, sizeof part,
             "%s on rank %d of %d failed: RILL_COMM_CHECK found that this rank %s", what, rt_rank(),
             rt_size(), found);
    assert_contains(rill_last_error(), part);
    RT_OK(rill_stream_clear_error(s));
}

/* rill_mpi.h: under RILL_COMM_CHECK=1, "A collective whose count ...
 * differs between ranks then fails on every rank, before any rank starts
 * it, with a sentence that names the collective, this rank's value and
 * another rank's, and says to pass the same on every rank; it breaks the
 * communicator as any failure does". The last rank passes 8 floats, the
 * others 4: no rank starts the allreduce (recv keeps its values). */
static void test_mpi_check_mismatched_count_fails_on_every_rank(void **state) {
    (void)state;
    rill_comm *c = world_checked("1");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *x = rt_dev_alloc(8 * sizeof(float), NULL), host[8];
    RT_OK(rill_op_fill_f32(s, x, 1.0f, 8));
    size_t mine = rt_rank() == last_rank() ? 8 : 4, other = rt_rank() == last_rank() ? 4 : 8;
    RT_OK(rill_allreduce_f32(s, c, x, x, mine, RILL_REDUCE_SUM));
    char what[128], found[256];
    snprintf(what, sizeof what, "rill_allreduce_f32 (sum of %zu floats)", mine);
    snprintf(found, sizeof found,
             "passed count %zu and another rank passed %zu; pass the same count on every rank",
             mine, other);
    expect_check_failure(s, what, found);
    rt_dev_read(host, x, sizeof host);
    for (int i = 0; i < 8; i++)
        assert_true(host[i] == 1.0f);

    RT_OK(rill_allreduce_f32(s, c, x, x, 4, RILL_REDUCE_SUM));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "was not started: the communicator failed before");
    assert_contains(rill_last_error(), "RILL_COMM_CHECK found that this rank passed count");
    RT_OK(rill_stream_clear_error(s));
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The check names each collective's own count: reduce-scatter's
 * count_per_rank, allgather's bytes_per_rank, broadcast's bytes. A fresh
 * communicator for each, since a mismatch breaks the one it happened on. */
static void test_mpi_check_mismatch_names_each_collectives_count(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    int size = rt_size();
    bool odd = rt_rank() == last_rank();
    size_t mine = odd ? 3 : 2, other = odd ? 2 : 3;
    float *send = rt_dev_alloc((size_t)size * 3 * sizeof(float), NULL);
    float *recv = rt_dev_alloc((size_t)size * 3 * sizeof(float), NULL);
    char what[128], found[256];

    rill_comm *c = world_checked("1");
    RT_OK(rill_reduce_scatter_f32(s, c, recv, send, mine, RILL_REDUCE_SUM));
    snprintf(what, sizeof what, "rill_reduce_scatter_f32 (sum, %zu floats per rank)", mine);
    snprintf(found, sizeof found,
             "passed count_per_rank %zu and another rank passed %zu; pass the same "
             "count_per_rank on every rank",
             mine, other);
    expect_check_failure(s, what, found);
    RT_OK(rill_comm_destroy(c));

    c = world_checked("1");
    RT_OK(rill_allgather(s, c, recv, send, mine));
    snprintf(what, sizeof what, "rill_allgather (%zu bytes per rank)", mine);
    snprintf(found, sizeof found,
             "passed bytes_per_rank %zu and another rank passed %zu; pass the same "
             "bytes_per_rank on every rank",
             mine, other);
    expect_check_failure(s, what, found);
    RT_OK(rill_comm_destroy(c));

    c = world_checked("1");
    RT_OK(rill_broadcast(s, c, recv, mine, 0));
    snprintf(what, sizeof what, "rill_broadcast (%zu bytes from rank 0)", mine);
    snprintf(found, sizeof found,
             "passed bytes %zu and another rank passed %zu; pass the same bytes on every rank",
             mine, other);
    expect_check_failure(s, what, found);
    RT_OK(rill_comm_destroy(c));

    rt_dev_free(recv);
    rt_dev_free(send);
    RT_OK(rill_stream_destroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* With equal counts, a differing op, dtype, root or collective fails the same
 * way, naming what differs. */
static void test_mpi_check_mismatched_op_root_and_collective(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    bool odd = rt_rank() == last_rank();
    float *x = rt_dev_alloc((size_t)rt_size() * 4 * sizeof(float), NULL);
    float *y = rt_dev_alloc((size_t)rt_size() * 4 * sizeof(float), NULL);
    char what[128], found[256];

    rill_comm *c = world_checked("1");
    RT_OK(rill_allreduce_f32(s, c, x, x, 4, odd ? RILL_REDUCE_MAX : RILL_REDUCE_SUM));
    snprintf(what, sizeof what, "rill_allreduce_f32 (%s of 4 floats)", odd ? "max" : "sum");
    snprintf(found, sizeof found,
             "passed op %s and another rank passed op %s; pass the same op on every rank",
             odd ? "max" : "sum", odd ? "sum" : "max");
    expect_check_failure(s, what, found);
    RT_OK(rill_comm_destroy(c));

    /* rill_mpi.h: "Under RILL_COMM_CHECK, a dtype that differs between
     * ranks fails the collective as a count does." */
    const char *dtype = odd ? "int64" : "float64", *other_dtype = odd ? "float64" : "int64";
    c = world_checked("1");
    RT_OK(rill_allreduce(s, c, x, x, 2, odd ? RILL_DTYPE_I64 : RILL_DTYPE_F64, RILL_REDUCE_SUM));
    snprintf(what, sizeof what, "rill_allreduce (sum of 2 %s)", dtype);
    snprintf(found, sizeof found,
             "passed dtype %s and another rank passed dtype %s; pass the same dtype on every "
             "rank",
             dtype, other_dtype);
    expect_check_failure(s, what, found);
    RT_OK(rill_comm_destroy(c));

    int root = odd ? 1 : 0, other_root = odd ? 0 : 1;
    c = world_checked("1");
    RT_OK(rill_broadcast(s, c, x, 16, root));
    snprintf(what, sizeof what, "rill_broadcast (16 bytes from rank %d)", root);
    snprintf(found, sizeof found,
             "passed root %d and another rank passed root %d; pass the same root on every rank",
             root, other_root);
    expect_check_failure(s, what, found);
    RT_OK(rill_comm_destroy(c));

    c = world_checked("1");
    if (odd)
        RT_OK(rill_allgather(s, c, y, x, 16));
    else
        RT_OK(rill_allreduce_f32(s, c, x, x, 4, RILL_REDUCE_SUM));
    snprintf(found, sizeof found,
             "issued %s where another rank issued %s; issue the same collectives in the same "
             "order on every rank",
             odd ? "rill_allgather" : "rill_allreduce_f32",
             odd ? "rill_allreduce_f32 or rill_allreduce" : "rill_allgather");
    expect_check_failure(
        s, odd ? "rill_allgather (16 bytes per rank)" : "rill_allreduce_f32 (sum of 4 floats)",
        found);
    RT_OK(rill_comm_destroy(c));

    rt_dev_free(y);
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Matching collectives pass the check and give the results they give
 * without it, issued back to back on one stream and on two streams at
 * once (the check of one holds the next back until its own call is made,
 * so every rank makes the calls in one order); each collective makes one
 * check call and its own. */
static void test_mpi_check_matching_collectives_pass(void **state) {
    (void)state;
    enum { N = 1000, ROUNDS = 20 };
    rill_comm *c = world_checked("1");
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    int size = rt_size(), rank = rt_rank();
    float *x = rt_dev_alloc(N * sizeof(float), NULL);
    float *y = rt_dev_alloc(N * sizeof(float), NULL);
    unsigned char *bytes = rt_dev_alloc(64, NULL), *root_bytes = rt_dev_alloc(64, NULL);
    unsigned char *gathered = rt_dev_alloc(64 * (size_t)size, NULL);
    RT_OK(rill_op_fill_f32(a, x, 1.0f, N));
    RT_OK(rill_op_fill_f32(b, y, (float)rank, N));
    RT_OK(rill_memset_async(bytes, rank + 1, 64, a));
    RT_OK(rill_memset_async(root_bytes, rank + 1, 64, a));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    long ints = atomic_load(&int_calls), floats = atomic_load(&float_calls);
    for (int r = 0; r < ROUNDS; r++) {
        RT_OK(rill_allreduce_f32(a, c, x, x, N, RILL_REDUCE_AVG));
        RT_OK(rill_allreduce_f32(b, c, y, y, N, RILL_REDUCE_MAX));
    }
    RT_OK(rill_allgather(a, c, gathered, bytes, 64));
    RT_OK(rill_broadcast(b, c, root_bytes, 64, size - 1));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    assert_int_equal(atomic_load(&int_calls) - ints, 2 * ROUNDS + 2);
    assert_int_equal(atomic_load(&float_calls) - floats, 2 * ROUNDS);

    float hx[N], hy[N];
    rt_dev_read(hx, x, sizeof hx);
    rt_dev_read(hy, y, sizeof hy);
    for (int i = 0; i < N; i++) {
        assert_true(hx[i] == 1.0f);
        assert_true(hy[i] == (float)(size - 1));
    }
    unsigned char hg[64 * 4], hb[64];
    assert_true(size <= 4);
    rt_dev_read(hg, gathered, 64 * (size_t)size);
    rt_dev_read(hb, root_bytes, sizeof hb);
    for (int i = 0; i < 64 * size; i++)
        assert_int_equal(hg[i], i / 64 + 1);
    for (int i = 0; i < 64; i++)
        assert_int_equal(hb[i], size);

    rt_dev_free(gathered);
    rt_dev_free(root_bytes);
    rt_dev_free(bytes);
    rt_dev_free(y);
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_comm_destroy(c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* rill_mpi.h: "unset, empty or 0: no check and no extra call". Each
 * allreduce makes its own MPI_Iallreduce and nothing else; the other
 * collectives make none. */
static void test_mpi_check_off_makes_no_extra_call(void **state) {
    (void)state;
    static const char *const offs[] = {NULL, "", "0"};
    for (int k = 0; k < 3; k++) {
        rill_comm *c = offs[k] != NULL ? world_checked(offs[k]) : rt_world();
        rill_stream *s;
        RT_OK(rill_stream_create(NULL, 0, &s));
        float *x = rt_dev_alloc(16 * sizeof(float), NULL);
        RT_OK(rill_op_fill_f32(s, x, 2.0f, 16));
        RT_OK(rill_stream_synchronize(s));
        long ints = atomic_load(&int_calls), floats = atomic_load(&float_calls);
        RT_OK(rill_allreduce_f32(s, c, x, x, 16, RILL_REDUCE_SUM));
        RT_OK(rill_broadcast(s, c, x, 16 * sizeof(float), 0));
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(atomic_load(&int_calls) - ints, 0);
        assert_int_equal(atomic_load(&float_calls) - floats, 1);
        float host[16];
        rt_dev_read(host, x, sizeof host);
        for (int i = 0; i < 16; i++)
            assert_true(host[i] == 2.0f * (float)rt_size());
        rt_dev_free(x);
        RT_OK(rill_stream_destroy(s));
        RT_OK(rill_comm_destroy(c));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* rill_mpi.h: for RILL_COMM_CHECK, "another value is
 * RILL_ERROR_INVALID_ARGUMENT from rill_comm_create_mpi" (on every rank,
 * before any MPI call, so the ranks stay matched). */
static void test_mpi_check_value_other_than_0_or_1_is_invalid(void **state) {
    (void)state;
    setenv("RILL_COMM_CHECK", "yes", 1);
    rill_comm *c = NULL;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    unsetenv("RILL_COMM_CHECK");
    assert_null(c);
    assert_contains(rill_last_error(), "RILL_COMM_CHECK='yes' is neither 0 nor 1");
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_check_mismatched_count_fails_on_every_rank),
        cmocka_unit_test(test_mpi_check_mismatch_names_each_collectives_count),
        cmocka_unit_test(test_mpi_check_mismatched_op_root_and_collective),
        cmocka_unit_test(test_mpi_check_matching_collectives_pass),
        cmocka_unit_test(test_mpi_check_off_makes_no_extra_call),
        cmocka_unit_test(test_mpi_check_value_other_than_0_or_1_is_invalid),
    };
    return RT_MPI_RUN(tests);
}
