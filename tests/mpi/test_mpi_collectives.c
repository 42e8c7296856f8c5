/* SPDX-License-Identifier: MIT */
/* Every collective of rill_mpi.h against a reference computed on the host,
 * at every size the world is started with (ctest runs it at -np 2, 3 and
 * 4), for sizes 0, 1, odd and large (a few MiB), every reduction, in place
 * and not. Each test issues all its operations on its streams first and
 * synchronizes once, so that many are under way together. The inputs are
 * small integers, so every sum is exact whatever order MPI adds in, and
 * the results must equal the reference exactly. */
#include "mpi_fixture.h"

#include <stdlib.h>
#include <string.h>

#define LARGE_FLOATS ((1u << 20) + 3) /* 4 MiB and an odd count */

static const size_t float_counts[] = {0, 1, 7, LARGE_FLOATS};
static const rill_reduce_op ops[] = {RILL_REDUCE_SUM, RILL_REDUCE_MAX, RILL_REDUCE_MIN,
                                     RILL_REDUCE_AVG};
enum { NUM_COUNTS = 4, NUM_OPS = 4 };

/* Element i of rank r's input. */
static float value(int r, size_t i) {
    return (float)((int)((i * 7u + (size_t)r * 13u) % 61u) - 30);
}

/* Byte i of rank r's data. */
static unsigned char byte_of(int r, size_t i) {
    return (unsigned char)(i * 31u + (size_t)r * 101u + 7u);
}

/* op over the ranks of value(r, i), as MPI computes it: an exact sum of
 * small integers, divided by the size for the average. */
static float reduced(rill_reduce_op op, size_t i, int size) {
    float acc = value(0, i);
    for (int r = 1; r < size; r++) {
        float v = value(r, i);
        if (op == RILL_REDUCE_MAX)
            acc = v > acc ? v : acc;
        else if (op == RILL_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else
            acc += v;
    }
    return op == RILL_REDUCE_AVG ? acc / (float)size : acc;
}

static float *host_floats(size_t n) {
    float *p = malloc((n > 0 ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

static void check_floats(const float *got, const float *want, size_t n, const char *what,
                         size_t count, int op) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("rank %d: %s of %zu (op %d): element %zu is %g, expected %g", rt_rank(), what,
                     count, op, i, (double)got[i], (double)want[i]);
}

/* rill_mpi.h: "recv[i] = op over the ranks of send[i]; recv may equal send
 * (in place)." */
static void test_mpi_allreduce_matches_host_reference(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *recv[NUM_COUNTS][NUM_OPS][2], *send[NUM_COUNTS][NUM_OPS][2];
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = float_counts[k];
        float *in = host_floats(n);
        for (size_t i = 0; i < n; i++)
            in[i] = value(rank, i);
        for (int o = 0; o < NUM_OPS; o++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                send[k][o][in_place] = rt_dev_alloc(n * sizeof(float), in);
                recv[k][o][in_place] =
                    in_place ? send[k][o][in_place] : rt_dev_alloc(n * sizeof(float), NULL);
                RT_OK(rill_allreduce_f32(s, c, recv[k][o][in_place], send[k][o][in_place], n,
                                         ops[o]));
            }
        }
        free(in);
    }
    RT_OK(rill_stream_synchronize(s));
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = float_counts[k];
        float *got = host_floats(n), *want = host_floats(n);
        for (int o = 0; o < NUM_OPS; o++) {
            for (size_t i = 0; i < n; i++)
                want[i] = reduced(ops[o], i, size);
            for (int in_place = 0; in_place < 2; in_place++) {
                rt_dev_read(got, recv[k][o][in_place], n * sizeof(float));
                check_floats(got, want, n, in_place ? "in-place allreduce" : "allreduce", n,
                             (int)ops[o]);
                if (!in_place)
                    rt_dev_free(recv[k][o][in_place]);
                rt_dev_free(send[k][o][in_place]);
            }
        }
        free(got);
        free(want);
    }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "buf on every rank becomes root's buf." */
static void test_mpi_broadcast_matches_host_reference(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 7, LARGE_FLOATS * sizeof(float)};
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    unsigned char *buf[NUM_COUNTS][2];
    int roots[2] = {0, size - 1};
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = sizes[k];
        unsigned char *host = malloc(n + 1);
        assert_non_null(host);
        for (int j = 0; j < 2; j++) {
            for (size_t i = 0; i < n; i++)
                host[i] = rank == roots[j] ? byte_of(roots[j], i) : 0xee;
            buf[k][j] = rt_dev_alloc(n, host);
            RT_OK(rill_broadcast(s, c, buf[k][j], n, roots[j]));
        }
        free(host);
    }
    RT_OK(rill_stream_synchronize(s));
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = sizes[k];
        unsigned char *got = malloc(n + 1);
        assert_non_null(got);
        for (int j = 0; j < 2; j++) {
            rt_dev_read(got, buf[k][j], n);
            for (size_t i = 0; i < n; i++)
                if (got[i] != byte_of(roots[j], i))
                    fail_msg("rank %d: broadcast of %zu bytes from %d: byte %zu is %u", rank, n,
                             roots[j], i, got[i]);
            rt_dev_free(buf[k][j]);
        }
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "recv (size * bytes_per_rank) holds every rank's send, in
 * rank order." */
static void test_mpi_allgather_matches_host_reference(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 7, (1u << 18) + 5};
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    unsigned char *recv[NUM_COUNTS], *send[NUM_COUNTS];
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = sizes[k];
        unsigned char *host = malloc(n + 1);
        assert_non_null(host);
        for (size_t i = 0; i < n; i++)
            host[i] = byte_of(rank, i);
        send[k] = rt_dev_alloc(n, host);
        recv[k] = rt_dev_alloc(n * (size_t)size, NULL);
        RT_OK(rill_allgather(s, c, recv[k], send[k], n));
        free(host);
    }
    RT_OK(rill_stream_synchronize(s));
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = sizes[k];
        unsigned char *got = malloc(n * (size_t)size + 1);
        assert_non_null(got);
        rt_dev_read(got, recv[k], n * (size_t)size);
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < n; i++)
                if (got[(size_t)r * n + i] != byte_of(r, i))
                    fail_msg("rank %d: allgather of %zu bytes per rank: byte %zu of rank %d's "
                             "block is %u",
                             rank, n, i, r, got[(size_t)r * n + i]);
        rt_dev_free(recv[k]);
        rt_dev_free(send[k]);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "Reduces send (size * count_per_rank) over the ranks; rank r
 * keeps block r in recv." */
static void test_mpi_reduce_scatter_matches_host_reference(void **state) {
    (void)state;
    static const size_t counts[] = {0, 1, 7, (1u << 18) + 1};
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *recv[NUM_COUNTS][NUM_OPS], *send[NUM_COUNTS][NUM_OPS];
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = counts[k], total = n * (size_t)size;
        float *in = host_floats(total);
        for (size_t i = 0; i < total; i++)
            in[i] = value(rank, i);
        for (int o = 0; o < NUM_OPS; o++) {
            send[k][o] = rt_dev_alloc(total * sizeof(float), in);
            recv[k][o] = rt_dev_alloc(n * sizeof(float), NULL);
            RT_OK(rill_reduce_scatter_f32(s, c, recv[k][o], send[k][o], n, ops[o]));
        }
        free(in);
    }
    RT_OK(rill_stream_synchronize(s));
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = counts[k];
        float *got = host_floats(n), *want = host_floats(n);
        for (int o = 0; o < NUM_OPS; o++) {
            for (size_t i = 0; i < n; i++)
                want[i] = reduced(ops[o], (size_t)rank * n + i, size);
            rt_dev_read(got, recv[k][o], n * sizeof(float));
            check_floats(got, want, n, "reduce_scatter", n, (int)ops[o]);
            rt_dev_free(recv[k][o]);
            rt_dev_free(send[k][o]);
        }
        free(got);
        free(want);
    }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "Point to point; a send and its recv match in issue order
 * per pair of ranks." A ring: each rank receives from the left on one
 * stream and sends to the right on another, every size in turn. */
static void test_mpi_send_recv_ring_matches_in_issue_order(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 7, LARGE_FLOATS * sizeof(float)};
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    rill_stream *rs, *ss;
    RT_OK(rill_stream_create(NULL, 0, &rs));
    RT_OK(rill_stream_create(NULL, 0, &ss));
    unsigned char *in[NUM_COUNTS], *out[NUM_COUNTS];
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = sizes[k];
        unsigned char *host = malloc(n + 1);
        assert_non_null(host);
        for (size_t i = 0; i < n; i++)
            host[i] = byte_of(rank, i);
        out[k] = rt_dev_alloc(n, host);
        in[k] = rt_dev_alloc(n, NULL);
        RT_OK(rill_recv(rs, c, in[k], n, left));
        RT_OK(rill_send(ss, c, out[k], n, right));
        free(host);
    }
    RT_OK(rill_stream_synchronize(rs));
    RT_OK(rill_stream_synchronize(ss));
    for (int k = 0; k < NUM_COUNTS; k++) {
        size_t n = sizes[k];
        unsigned char *got = malloc(n + 1);
        assert_non_null(got);
        rt_dev_read(got, in[k], n);
        for (size_t i = 0; i < n; i++)
            if (got[i] != byte_of(left, i))
                fail_msg("rank %d: %zu bytes from rank %d: byte %zu is %u", rank, n, left, i,
                         got[i]);
        rt_dev_free(in[k]);
        rt_dev_free(out[k]);
        free(got);
    }
    RT_OK(rill_stream_destroy(rs));
    RT_OK(rill_stream_destroy(ss));
    RT_OK(rill_comm_destroy(c));
}

/* rill_comm_rank and rill_comm_size are those of the communicator
 * duplicated. */
static void test_mpi_rank_and_size_are_the_duplicated_communicators(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    int rank = -1, size = -1;
    RT_OK(rill_comm_rank(c, &rank));
    RT_OK(rill_comm_size(c, &size));
    assert_int_equal(rank, rt_rank());
    assert_int_equal(size, rt_size());
    RT_OK(rill_comm_destroy(c));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_rank_and_size_are_the_duplicated_communicators),
        cmocka_unit_test(test_mpi_allreduce_matches_host_reference),
        cmocka_unit_test(test_mpi_broadcast_matches_host_reference),
        cmocka_unit_test(test_mpi_allgather_matches_host_reference),
        cmocka_unit_test(test_mpi_reduce_scatter_matches_host_reference),
        cmocka_unit_test(test_mpi_send_recv_ring_matches_in_issue_order),
    };
    return RT_MPI_RUN(tests);
}
