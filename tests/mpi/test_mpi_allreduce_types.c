/* SPDX-License-Identifier: MIT */
/* rill_allreduce of every rill_dtype and every reduction (RILL_REDUCE_PROD
 * too) against a reference computed on the host in that type, at the sizes
 * ctest starts the world with, for counts 0, 1, odd and, for sums, large
 * (over 4 MiB of 8-byte elements: two pieces), in place and not. The inputs need
 * the type's own range: int64 values beyond 2^60 and float64 values finer
 * than a float holds, whose sums are exact in the type and wrong in float32
 * or float64; products multiply small integers, exact in every type. */
#include "mpi_fixture.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LARGE ((1u << 19) + 3) /* an odd count; more than 4 MiB of 8-byte elements */

static const size_t counts[] = {0, 1, 7, LARGE};
static const rill_dtype dtypes[] = {RILL_DTYPE_F32, RILL_DTYPE_F64, RILL_DTYPE_I32, RILL_DTYPE_I64};
static const rill_reduce_op ops[] = {RILL_REDUCE_SUM, RILL_REDUCE_MAX, RILL_REDUCE_MIN,
                                     RILL_REDUCE_PROD, RILL_REDUCE_AVG};
enum { NUM_COUNTS = 4, NUM_DTYPES = 4, NUM_OPS = 5 };

static size_t elem_bytes(rill_dtype t) {
    return t == RILL_DTYPE_F64 || t == RILL_DTYPE_I64 ? 8 : 4;
}

static bool has_average(rill_dtype t) {
    return t == RILL_DTYPE_F32 || t == RILL_DTYPE_F64;
}

/* Whether the test runs op on counts[k]: the large count only sums. */
static bool runs(int k, int o, rill_dtype t) {
    if (ops[o] == RILL_REDUCE_AVG && !has_average(t))
        return false;
    return counts[k] != LARGE || ops[o] == RILL_REDUCE_SUM;
}

/* A small integer of rank r at i: -30 to 30, and 1 to 3 for products. */
static int64_t small(int r, size_t i, rill_reduce_op op) {
    if (op == RILL_REDUCE_PROD)
        return (int64_t)((i + (size_t)r * 5u) % 3u) + 1;
    return (int64_t)((i * 7u + (size_t)r * 13u) % 61u) - 30;
}

/* Element i of rank r's input in each type: beyond the small integer, the
 * type's range (none for products). */
static float f32_of(int r, size_t i, rill_reduce_op op) {
    return (float)small(r, i, op);
}
static double f64_of(int r, size_t i, rill_reduce_op op) {
    return (double)small(r, i, op) + (op == RILL_REDUCE_PROD ? 0.0 : 0x1p-40 * (double)(r + 1));
}
static int32_t i32_of(int r, size_t i, rill_reduce_op op) {
    return (int32_t)small(r, i, op) + (op == RILL_REDUCE_PROD ? 0 : (int32_t)1 << 28);
}
static int64_t i64_of(int r, size_t i, rill_reduce_op op) {
    return small(r, i, op) + (op == RILL_REDUCE_PROD ? 0 : ((int64_t)1 << 60) + r);
}

/* acc op= v, and the average's division by size at the end. */
#define COMBINE(acc, v, op)                                                                        \
    ((op) == RILL_REDUCE_MAX    ? ((v) > (acc) ? (v) : (acc))                                      \
     : (op) == RILL_REDUCE_MIN  ? ((v) < (acc) ? (v) : (acc))                                      \
     : (op) == RILL_REDUCE_PROD ? (acc) * (v)                                                      \
                                : (acc) + (v))

/* Fills out with rank r's n elements (ref: the reduction over size ranks
 * instead, as MPI computes it; the sums are exact, so any order gives it). */
static void fill(rill_dtype t, void *out, size_t n, int r, int size, bool ref, rill_reduce_op op) {
    for (size_t i = 0; i < n; i++) {
        switch (t) {
        case RILL_DTYPE_F32: {
            float acc = f32_of(ref ? 0 : r, i, op);
            for (int k = 1; ref && k < size; k++)
                acc = COMBINE(acc, f32_of(k, i, op), op);
            ((float *)out)[i] = ref && op == RILL_REDUCE_AVG ? acc / (float)size : acc;
            break;
        }
        case RILL_DTYPE_F64: {
            double acc = f64_of(ref ? 0 : r, i, op);
            for (int k = 1; ref && k < size; k++)
                acc = COMBINE(acc, f64_of(k, i, op), op);
            ((double *)out)[i] = ref && op == RILL_REDUCE_AVG ? acc / (double)size : acc;
            break;
        }
        case RILL_DTYPE_I32: {
            /* sums of up to 4 ranks of 2^28 fit in int32 */
            int32_t acc = i32_of(ref ? 0 : r, i, op);
            for (int k = 1; ref && k < size; k++)
                acc = COMBINE(acc, i32_of(k, i, op), op);
            ((int32_t *)out)[i] = acc;
            break;
        }
        case RILL_DTYPE_I64: {
            /* sums of up to 4 ranks of 2^60 fit in int64 */
            int64_t acc = i64_of(ref ? 0 : r, i, op);
            for (int k = 1; ref && k < size; k++)
                acc = COMBINE(acc, i64_of(k, i, op), op);
            ((int64_t *)out)[i] = acc;
            break;
        }
        }
    }
}

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes > 0 ? bytes : 1);
    assert_non_null(p);
    return p;
}

/* rill_mpi.h: "rill_allreduce_f32 of count elements of dtype (count, not
 * bytes), in MPI's arithmetic" */
static void test_mpi_allreduce_of_each_dtype_matches_host_reference(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    int rank = rt_rank(), size = rt_size();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    void *recv[NUM_DTYPES][NUM_COUNTS][NUM_OPS][2] = {0};
    void *send[NUM_DTYPES][NUM_COUNTS][NUM_OPS][2] = {0};
    for (int d = 0; d < NUM_DTYPES; d++)
        for (int k = 0; k < NUM_COUNTS; k++)
            for (int o = 0; o < NUM_OPS; o++) {
                if (!runs(k, o, dtypes[d]))
                    continue;
                size_t n = counts[k], bytes = n * elem_bytes(dtypes[d]);
                void *in = host_alloc(bytes);
                fill(dtypes[d], in, n, rank, size, false, ops[o]);
                for (int in_place = 0; in_place < 2; in_place++) {
                    void *snd = rt_dev_alloc(bytes, in);
                    void *rcv = in_place ? snd : rt_dev_alloc(bytes, NULL);
                    send[d][k][o][in_place] = snd;
                    recv[d][k][o][in_place] = rcv;
                    RT_OK(rill_allreduce(s, c, rcv, snd, n, dtypes[d], ops[o]));
                }
                free(in);
            }
    RT_OK(rill_stream_synchronize(s));
    for (int d = 0; d < NUM_DTYPES; d++)
        for (int k = 0; k < NUM_COUNTS; k++)
            for (int o = 0; o < NUM_OPS; o++) {
                if (!runs(k, o, dtypes[d]))
                    continue;
                size_t n = counts[k], eb = elem_bytes(dtypes[d]), bytes = n * eb;
                unsigned char *got = host_alloc(bytes), *want = host_alloc(bytes);
                fill(dtypes[d], want, n, rank, size, true, ops[o]);
                for (int in_place = 0; in_place < 2; in_place++) {
                    rt_dev_read(got, recv[d][k][o][in_place], bytes);
                    for (size_t i = 0; i < n; i++)
                        if (memcmp(got + i * eb, want + i * eb, eb) != 0)
                            fail_msg("rank %d: %sallreduce of %zu elements of dtype %d, op %d: "
                                     "element %zu differs from the host's",
                                     rank, in_place ? "in-place " : "", n, (int)dtypes[d],
                                     (int)ops[o], i);
                    if (!in_place)
                        rt_dev_free(recv[d][k][o][in_place]);
                    rt_dev_free(send[d][k][o][in_place]);
                }
                free(got);
                free(want);
            }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

/* rill_mpi.h: "An average of integers is RILL_ERROR_INVALID_ARGUMENT
 * (reduce with RILL_REDUCE_SUM and divide), as is a dtype that is not a
 * rill_dtype". Refused before anything is issued: no other rank takes
 * part, and the communicator goes on. */
static void test_mpi_allreduce_refuses_integer_average_and_unknown_dtype(void **state) {
    (void)state;
    rill_comm *c = rt_world();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    int64_t one = 1;
    int64_t *x = rt_dev_alloc(sizeof one, &one);
    assert_int_equal(rill_allreduce(s, c, x, x, 1, RILL_DTYPE_I64, RILL_REDUCE_AVG),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_allreduce: RILL_REDUCE_AVG of int64"));
    assert_int_equal(rill_allreduce(s, c, x, x, 1, (rill_dtype)9, RILL_REDUCE_SUM),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_allreduce: dtype 9 is not an element type"));
    RT_OK(rill_allreduce(s, c, x, x, 1, RILL_DTYPE_I64, RILL_REDUCE_SUM));
    RT_OK(rill_stream_synchronize(s));
    int64_t got = 0;
    rt_dev_read(&got, x, sizeof got);
    assert_int_equal(got, rt_size());
    rt_dev_free(x);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_comm_destroy(c));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_allreduce_of_each_dtype_matches_host_reference),
        cmocka_unit_test(test_mpi_allreduce_refuses_integer_average_and_unknown_dtype),
    };
    return RT_MPI_RUN(tests);
}
