/* SPDX-License-Identifier: MIT */
/* The built-in float32 ops (rill_op_*_f32): every op against a naive
 * double-precision reference on odd sizes, with tolerances derived from
 * float rounding; in-place use; non-default and current streams; every bad
 * argument; re-creation of the cached kernels after rill_shutdown and their
 * thread-safe creation on first use. */
#include "ops_support.h"

#include "backend/cpu/half.h"
#include "backend/cpu/op_kernels.h"
#include "backend/op_math.h"
#include "core/handle.h"
#include "core/kernel.h"
#include "ops/ops_internal.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static float *dev_floats(size_t n) {
    void *p = NULL;
    RT_OK(rill_malloc(cpu_device(), n * sizeof(float), &p));
    return p;
}

static float *host_floats(size_t n) {
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    return p;
}

/* Deterministic values in [-1, 1) from a linear congruential generator. */
static void fill_random(float *x, size_t n, uint32_t seed) {
    uint32_t state = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        x[i] = (float)((double)(state >> 8) / 8388608.0 - 1.0);
    }
}

/* A device copy of n random floats. */
static float *dev_random(size_t n, uint32_t seed, float **host_out) {
    float *host = host_floats(n);
    fill_random(host, n, seed);
    float *dev = dev_floats(n);
    RT_OK(rill_memcpy(dev, host, n * sizeof(float)));
    *host_out = host;
    return dev;
}

static float *download(const float *dev, size_t n) {
    float *host = host_floats(n);
    RT_OK(rill_memcpy(host, dev, n * sizeof(float)));
    return host;
}

/* Fails unless |got - want| <= tol, naming the element. */
static void expect_near(const char *what, size_t i, double got, double want, double tol) {
    if (!(fabs(got - want) <= tol))
        fail_msg("%s[%zu] = %.9g, expected %.9g (tolerance %.3g)", what, i, got, want, tol);
}

static const size_t odd_sizes[] = {1, 7, 1000003};
#define NUM_ODD_SIZES (sizeof odd_sizes / sizeof odd_sizes[0])

/* ---- element-wise ops ---- */

/* rill.h: "float32, row-major, on device memory" — fill sets every element. */
static void test_fill_sets_every_element(void **state) {
    (void)state;
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *x = dev_floats(n);
        RT_OK(rill_op_fill_f32(NULL, x, 3.25f, n));
        float *got = download(x, n);
        for (size_t i = 0; i < n; i++)
            expect_near("x", i, got[i], 3.25, 0.0);
        free(got);
        RT_OK(rill_free(x));
    }
}

/* rill.h: "out = a + alpha*b". */
static void test_add_computes_a_plus_alpha_b(void **state) {
    (void)state;
    static const float alphas[] = {1.0f, -0.5f, 2.75f};
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *ha, *hb;
        float *a = dev_random(n, 1, &ha), *b = dev_random(n, 2, &hb);
        float *out = dev_floats(n);
        for (size_t j = 0; j < sizeof alphas / sizeof alphas[0]; j++) {
            RT_OK(rill_op_add_f32(NULL, out, a, b, alphas[j], n));
            float *got = download(out, n);
            for (size_t i = 0; i < n; i++) {
                double ab = (double)alphas[j] * hb[i];
                double tol = 2 * U32 * (fabs(ha[i]) + 2 * fabs(ab));
                expect_near("out", i, got[i], ha[i] + ab, tol);
            }
            free(got);
        }
        free(ha);
        free(hb);
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(out));
    }
}

static void test_mul_multiplies_elementwise(void **state) {
    (void)state;
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *ha, *hb;
        float *a = dev_random(n, 3, &ha), *b = dev_random(n, 4, &hb);
        float *out = dev_floats(n);
        RT_OK(rill_op_mul_f32(NULL, out, a, b, n));
        float *got = download(out, n);
        for (size_t i = 0; i < n; i++) {
            double want = (double)ha[i] * hb[i];
            expect_near("out", i, got[i], want, U32 * fabs(want));
        }
        free(got);
        free(ha);
        free(hb);
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(out));
    }
}

static void test_add_scalar_adds_value(void **state) {
    (void)state;
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *ha;
        float *a = dev_random(n, 5, &ha);
        float *out = dev_floats(n);
        RT_OK(rill_op_add_scalar_f32(NULL, out, a, -1.5f, n));
        float *got = download(out, n);
        for (size_t i = 0; i < n; i++) {
            double want = (double)ha[i] - 1.5;
            expect_near("out", i, got[i], want, U32 * fabs(want));
        }
        free(got);
        free(ha);
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
    }
}

/* Element-wise ops may write in place: out == a or out == b. */
static void test_elementwise_ops_run_in_place(void **state) {
    (void)state;
    size_t n = 100003;
    float *ha, *hb;
    float *a = dev_random(n, 6, &ha), *b = dev_random(n, 7, &hb);
    RT_OK(rill_op_add_scalar_f32(NULL, a, a, 1.0f, n)); /* a += 1 */
    RT_OK(rill_op_mul_f32(NULL, b, a, b, n));           /* b = a * b */
    RT_OK(rill_op_add_f32(NULL, a, a, a, 1.0f, n));     /* a = 2a */
    float *ga = download(a, n), *gb = download(b, n);
    for (size_t i = 0; i < n; i++) {
        float a1 = ha[i] + 1.0f;
        expect_near("a", i, ga[i], 2.0 * a1, 0.0);
        expect_near("b", i, gb[i], (double)a1 * hb[i], U32 * fabs((double)a1 * hb[i]));
    }
    free(ga);
    free(gb);
    free(ha);
    free(hb);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
}

/* ---- sum ---- */

/* rill.h: sum writes "out[0]". */
static void test_sum_matches_double_reference(void **state) {
    (void)state;
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *ha;
        float *a = dev_random(n, 8, &ha);
        float *out = dev_floats(1);
        RT_OK(rill_op_sum_f32(NULL, out, a, n));
        float got;
        RT_OK(rill_memcpy(&got, out, sizeof got));
        double want = 0.0, abs_sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            want += ha[i];
            abs_sum += fabs(ha[i]);
        }
        expect_near("sum", 0, got, want, U32 * fabs(want) + 1e-12 * abs_sum);
        free(ha);
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
    }
}

/* The sum is computed in a fixed order: the same input gives the same bits. */
static void test_sum_is_deterministic(void **state) {
    (void)state;
    size_t n = 1000003;
    float *ha;
    float *a = dev_random(n, 9, &ha);
    float *out = dev_floats(2);
    RT_OK(rill_op_sum_f32(NULL, out, a, n));
    RT_OK(rill_op_sum_f32(NULL, out + 1, a, n));
    float got[2];
    RT_OK(rill_memcpy(got, out, sizeof got));
    assert_memory_equal(&got[0], &got[1], sizeof got[0]);
    free(ha);
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
}

/* ---- matmul ---- */

/* c[m,n] = a[m,k] b[k,n], checked against a double product: each element
 * may differ by gamma_k times the sum of |a_ip b_pj| (k roundings). */
static void check_matmul(size_t m, size_t k, size_t n, rill_stream *s) {
    float *ha, *hb;
    float *a = dev_random(m * k, 10, &ha), *b = dev_random(k * n, 11, &hb);
    float *c = dev_floats(m * n);
    RT_OK(rill_op_matmul_f32(s, c, a, b, m, k, n));
    RT_OK(rill_stream_synchronize(s));
    float *got = download(c, m * n);
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double want = 0.0, mag = 0.0;
            for (size_t p = 0; p < k; p++) {
                double term = (double)ha[i * k + p] * hb[p * n + j];
                want += term;
                mag += fabs(term);
            }
            expect_near("c", i * n + j, got[i * n + j], want, (double)(k + 2) * U32 * mag);
        }
    }
    free(got);
    free(ha);
    free(hb);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
}

static void test_matmul_matches_double_reference(void **state) {
    (void)state;
    check_matmul(1, 1, 1, NULL);
    check_matmul(17, 33, 9, NULL);
    check_matmul(256, 512, 128, NULL);
}

/* Few rows and many columns: the grid splits columns instead of rows. */
static void test_matmul_with_few_rows_splits_columns(void **state) {
    (void)state;
    check_matmul(3, 64, 4099, NULL);
    check_matmul(1, 300, 2001, NULL);
    check_matmul(40, 129, 1000, NULL);
}

/* a and b may be the same buffer (seed 000: B = matmul(A, A)). */
static void test_matmul_of_a_matrix_with_itself(void **state) {
    (void)state;
    size_t n = 20;
    float *ha;
    float *a = dev_random(n * n, 12, &ha);
    float *c = dev_floats(n * n);
    RT_OK(rill_op_matmul_f32(NULL, c, a, a, n, n, n));
    float *got = download(c, n * n);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            double want = 0.0, mag = 0.0;
            for (size_t p = 0; p < n; p++) {
                want += (double)ha[i * n + p] * ha[p * n + j];
                mag += fabs((double)ha[i * n + p] * ha[p * n + j]);
            }
            expect_near("c", i * n + j, got[i * n + j], want, (double)(n + 2) * U32 * mag);
        }
    }
    free(got);
    free(ha);
    RT_OK(rill_free(a));
    RT_OK(rill_free(c));
}

/* With a, b or both stored transposed, the product is that of the
 * contiguous operands within the rounding bound of check_matmul (BLIS
 * picks its kernels by the operands' storage, so the bits may differ), on
 * one block and on several (the grid splits rows, and columns when rows
 * are few). */
static void check_matmul_ex(size_t m, size_t k, size_t n) {
    float *ha, *hb;
    float *a = dev_random(m * k, 21, &ha), *b = dev_random(k * n, 22, &hb);
    float *hat = host_floats(m * k), *hbt = host_floats(k * n);
    for (size_t i = 0; i < m; i++)
        for (size_t p = 0; p < k; p++)
            hat[p * m + i] = ha[i * k + p];
    for (size_t p = 0; p < k; p++)
        for (size_t j = 0; j < n; j++)
            hbt[j * k + p] = hb[p * n + j];
    float *at = dev_floats(m * k), *bt = dev_floats(k * n), *c = dev_floats(m * n);
    RT_OK(rill_memcpy(at, hat, m * k * sizeof(float)));
    RT_OK(rill_memcpy(bt, hbt, k * n * sizeof(float)));
    for (unsigned flags = 1; flags < 4; flags++) {
        RT_OK(rill_op_matmul_ex_f32(NULL, c, (flags & RILL_MATMUL_A_T) ? at : a,
                                    (flags & RILL_MATMUL_B_T) ? bt : b, m, k, n, flags));
        float *got = download(c, m * n);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double want = 0.0, mag = 0.0;
                for (size_t p = 0; p < k; p++) {
                    double term = (double)ha[i * k + p] * hb[p * n + j];
                    want += term;
                    mag += fabs(term);
                }
                expect_near("c", i * n + j, got[i * n + j], want, (double)(k + 2) * U32 * mag);
            }
        free(got);
    }
    free(ha);
    free(hb);
    free(hat);
    free(hbt);
    float *frees[] = {a, b, at, bt, c};
    for (size_t i = 0; i < sizeof frees / sizeof *frees; i++)
        RT_OK(rill_free(frees[i]));
}

static void test_matmul_ex_with_transposed_operands_matches_double_reference(void **state) {
    (void)state;
    check_matmul_ex(1, 1, 1);
    check_matmul_ex(32, 784, 256);
    check_matmul_ex(3, 64, 1000);
    check_matmul_ex(200, 129, 70);
}

/* ---- conv2d ---- */

/* rill.h: "NCHW input [n,c,h,w], weight [k,c,r,s], stride 1, no padding:
 * output [n,k,h-r+1,w-s+1]". */
static void check_conv2d(size_t n, size_t c, size_t h, size_t w, size_t k, size_t r, size_t sz) {
    size_t oh = h - r + 1, ow = w - sz + 1;
    float *hin, *hw;
    float *in = dev_random(n * c * h * w, 13, &hin), *wt = dev_random(k * c * r * sz, 14, &hw);
    float *out = dev_floats(n * k * oh * ow);
    RT_OK(rill_op_conv2d_f32(NULL, out, in, wt, n, c, h, w, k, r, sz));
    float *got = download(out, n * k * oh * ow);
    size_t crs = c * r * sz;
    for (size_t img = 0; img < n; img++) {
        for (size_t f = 0; f < k; f++) {
            for (size_t y = 0; y < oh; y++) {
                for (size_t x = 0; x < ow; x++) {
                    double want = 0.0, mag = 0.0;
                    for (size_t ci = 0; ci < c; ci++) {
                        for (size_t ri = 0; ri < r; ri++) {
                            for (size_t si = 0; si < sz; si++) {
                                double term =
                                    (double)hin[((img * c + ci) * h + y + ri) * w + x + si] *
                                    hw[((f * c + ci) * r + ri) * sz + si];
                                want += term;
                                mag += fabs(term);
                            }
                        }
                    }
                    size_t i = ((img * k + f) * oh + y) * ow + x;
                    expect_near("out", i, got[i], want, (double)(crs + 2) * U32 * mag);
                }
            }
        }
    }
    free(got);
    free(hin);
    free(hw);
    RT_OK(rill_free(in));
    RT_OK(rill_free(wt));
    RT_OK(rill_free(out));
}

static void test_conv2d_matches_double_reference(void **state) {
    (void)state;
    check_conv2d(1, 1, 1, 1, 1, 1, 1);
    check_conv2d(2, 3, 7, 9, 5, 3, 2);
    check_conv2d(3, 2, 5, 5, 4, 5, 5); /* the filter covers the whole input */
    check_conv2d(2, 4, 6, 5, 3, 1, 1); /* 1x1: no im2col */
    check_conv2d(1, 3, 41, 37, 2, 2, 3);
    check_conv2d(1, 16, 64, 64, 16, 3, 3); /* one image cut into bands, a short last one */
    check_conv2d(4, 64, 32, 32, 64, 1, 1); /* 1x1 over several blocks */
}

/* "Blocks of one launch run concurrently on the device's compute units",
 * and so do launches on different streams: matrix products computed at the
 * same time on four streams give the bits each gives alone (a sgemm that
 * is not reentrant shares its work buffers between concurrent calls and
 * returns wrong values). Bounded by a count and by two seconds. */
static void test_matmuls_on_concurrent_streams_give_the_bits_of_one(void **state) {
    (void)state;
    enum { STREAMS = 8, SIZE = 256, ROUNDS = 400 };
    const size_t n = SIZE;
    float *ha, *hb;
    float *a = dev_random(n * n, 21, &ha), *b = dev_random(n * n, 22, &hb);
    float *ref = dev_floats(n * n);
    RT_OK(rill_op_matmul_f32(NULL, ref, a, b, n, n, n));
    float *want = download(ref, n * n);
    rill_stream *s[STREAMS];
    float *c[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        RT_OK(rill_stream_create(NULL, 0, &s[i]));
        c[i] = dev_floats(n * n);
    }
    float *got = host_floats(n * n);
    uint64_t deadline = rt_now_ns() + 2000000000ull;
    size_t wrong = 0;
    for (int r = 0; r < ROUNDS && rt_now_ns() < deadline; r++) {
        for (int i = 0; i < STREAMS; i++) {
            RT_OK(rill_memset_async(c[i], 0, n * n * sizeof(float), s[i]));
            RT_OK(rill_op_matmul_f32(s[i], c[i], a, b, n, n, n));
        }
        for (int i = 0; i < STREAMS; i++) {
            RT_OK(rill_stream_synchronize(s[i]));
            RT_OK(rill_memcpy(got, c[i], n * n * sizeof(float)));
            wrong += memcmp(got, want, n * n * sizeof(float)) != 0;
        }
    }
    assert_int_equal(wrong, 0);
    for (int i = 0; i < STREAMS; i++) {
        RT_OK(rill_stream_synchronize(s[i]));
        RT_OK(rill_free(c[i]));
        RT_OK(rill_stream_destroy(s[i]));
    }
    free(got);
    free(want);
    free(ha);
    free(hb);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(ref));
}

/* The shapes of seed 000: conv2d(add_s0 [10,32,32,32], weight [32,32,3,3]). */
static void test_conv2d_on_seed_000_shapes(void **state) {
    (void)state;
    check_conv2d(10, 32, 32, 32, 32, 3, 3);
}

/* ---- streams ---- */

/* rill.h: ops take a stream; work on a non-default stream is ordered there. */
static void test_ops_run_on_a_non_default_stream(void **state) {
    (void)state;
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(cpu_device(), 0, &s));
    size_t n = 1000003;
    float *ha;
    float *a = dev_random(n, 15, &ha);
    float *b = dev_floats(n), *c = dev_floats(n), *sum = dev_floats(1);
    RT_OK(rill_op_fill_f32(s, b, 2.0f, n));
    RT_OK(rill_op_mul_f32(s, c, a, b, n));           /* c = 2a */
    RT_OK(rill_op_add_f32(s, c, c, a, -1.0f, n));    /* c = a */
    RT_OK(rill_op_add_scalar_f32(s, c, c, 0.5f, n)); /* c = a + 0.5 */
    RT_OK(rill_op_sum_f32(s, sum, c, n));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_query(s));
    float *got = download(c, n);
    double want_sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        expect_near("c", i, got[i], (double)ha[i] + 0.5, U32 * 2.0);
        want_sum += got[i];
    }
    float got_sum;
    RT_OK(rill_memcpy(&got_sum, sum, sizeof got_sum));
    expect_near("sum", 0, got_sum, want_sum, U32 * fabs(want_sum) + 1e-6);
    free(got);
    free(ha);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
    RT_OK(rill_free(sum));
    check_matmul(64, 96, 80, s);
    RT_OK(rill_stream_destroy(s));
}

/* rill.h: "A NULL rill_stream* means the calling thread's current stream". */
static void test_null_stream_means_current_stream(void **state) {
    (void)state;
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(cpu_device(), 0, &s));
    size_t n = 1000;
    float *x = dev_floats(n);
    rill_stream *prev = rill_set_current_stream(s);
    RT_OK(rill_op_fill_f32(NULL, x, 7.0f, n));
    RT_OK(rill_op_add_scalar_f32(NULL, x, x, 1.0f, n));
    rill_set_current_stream(prev);
    RT_OK(rill_stream_synchronize(s));
    float *got = download(x, n);
    for (size_t i = 0; i < n; i++)
        expect_near("x", i, got[i], 8.0, 0.0);
    free(got);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* ---- bad arguments ---- */

/* rill.h: "RILL_ERROR_INVALID_ARGUMENT: NULL where a value is needed, bad
 * flag, size 0"; on failure rill_last_error() explains. */
static void test_fill_rejects_bad_arguments(void **state) {
    (void)state;
    float *x = dev_floats(8);
    expect_invalid(rill_op_fill_f32(NULL, NULL, 1.0f, 8), "rill_op_fill_f32: x is NULL");
    expect_invalid(rill_op_fill_f32(NULL, x, 1.0f, 0), "rill_op_fill_f32: n is 0");
    expect_invalid(rill_op_fill_f32(NULL, x, 1.0f, SIZE_MAX), "rill_op_fill_f32: n is");
    RT_OK(rill_free(x));
}

static void test_elementwise_ops_reject_bad_arguments(void **state) {
    (void)state;
    float *a = dev_floats(16), *b = dev_floats(16), *out = dev_floats(16);
    expect_invalid(rill_op_add_f32(NULL, NULL, a, b, 1.0f, 16), "rill_op_add_f32: out is NULL");
    expect_invalid(rill_op_add_f32(NULL, out, NULL, b, 1.0f, 16), "rill_op_add_f32: a is NULL");
    expect_invalid(rill_op_add_f32(NULL, out, a, NULL, 1.0f, 16), "rill_op_add_f32: b is NULL");
    expect_invalid(rill_op_add_f32(NULL, out, a, b, 1.0f, 0), "rill_op_add_f32: n is 0");
    expect_invalid(rill_op_add_f32(NULL, a + 1, a, b, 1.0f, 8), "out overlaps a");
    expect_invalid(rill_op_add_f32(NULL, b, a, b + 3, 1.0f, 8), "out overlaps b");

    expect_invalid(rill_op_mul_f32(NULL, NULL, a, b, 16), "rill_op_mul_f32: out is NULL");
    expect_invalid(rill_op_mul_f32(NULL, out, NULL, b, 16), "rill_op_mul_f32: a is NULL");
    expect_invalid(rill_op_mul_f32(NULL, out, a, NULL, 16), "rill_op_mul_f32: b is NULL");
    expect_invalid(rill_op_mul_f32(NULL, out, a, b, 0), "rill_op_mul_f32: n is 0");
    expect_invalid(rill_op_mul_f32(NULL, a + 2, a, b, 8), "out overlaps a");

    expect_invalid(rill_op_add_scalar_f32(NULL, NULL, a, 1.0f, 16),
                   "rill_op_add_scalar_f32: out is NULL");
    expect_invalid(rill_op_add_scalar_f32(NULL, out, NULL, 1.0f, 16),
                   "rill_op_add_scalar_f32: a is NULL");
    expect_invalid(rill_op_add_scalar_f32(NULL, out, a, 1.0f, 0), "rill_op_add_scalar_f32: n is 0");
    expect_invalid(rill_op_add_scalar_f32(NULL, a, a + 1, 1.0f, 8), "out overlaps a");

    expect_invalid(rill_op_sum_f32(NULL, NULL, a, 16), "rill_op_sum_f32: out is NULL");
    expect_invalid(rill_op_sum_f32(NULL, out, NULL, 16), "rill_op_sum_f32: a is NULL");
    expect_invalid(rill_op_sum_f32(NULL, out, a, 0), "rill_op_sum_f32: n is 0");
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out));
}

static void test_matmul_rejects_bad_arguments(void **state) {
    (void)state;
    float *a = dev_floats(64), *b = dev_floats(64), *c = dev_floats(64);
    expect_invalid(rill_op_matmul_f32(NULL, NULL, a, b, 4, 4, 4), "rill_op_matmul_f32: c is NULL");
    expect_invalid(rill_op_matmul_f32(NULL, c, NULL, b, 4, 4, 4), "rill_op_matmul_f32: a is NULL");
    expect_invalid(rill_op_matmul_f32(NULL, c, a, NULL, 4, 4, 4), "rill_op_matmul_f32: b is NULL");
    expect_invalid(rill_op_matmul_f32(NULL, c, a, b, 0, 4, 4), "rill_op_matmul_f32: m is 0");
    expect_invalid(rill_op_matmul_f32(NULL, c, a, b, 4, 0, 4), "rill_op_matmul_f32: k is 0");
    expect_invalid(rill_op_matmul_f32(NULL, c, a, b, 4, 4, 0), "rill_op_matmul_f32: n is 0");
    expect_invalid(rill_op_matmul_f32(NULL, a + 4, a, b, 4, 4, 4), "c overlaps a");
    expect_invalid(rill_op_matmul_f32(NULL, b, a, b, 4, 4, 4), "c overlaps b");
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
}

static void test_conv2d_rejects_bad_arguments(void **state) {
    (void)state;
    float *in = dev_floats(2 * 3 * 5 * 5), *w = dev_floats(4 * 3 * 3 * 3);
    float *out = dev_floats(2 * 4 * 3 * 3);
    expect_invalid(rill_op_conv2d_f32(NULL, NULL, in, w, 2, 3, 5, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: out is NULL");
    expect_invalid(rill_op_conv2d_f32(NULL, out, NULL, w, 2, 3, 5, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: in is NULL");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, NULL, 2, 3, 5, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: weight is NULL");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 0, 3, 5, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: n is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 0, 5, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: c is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 0, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: h is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 5, 0, 4, 3, 3),
                   "rill_op_conv2d_f32: w is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 5, 5, 0, 3, 3),
                   "rill_op_conv2d_f32: k is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 5, 5, 4, 0, 3),
                   "rill_op_conv2d_f32: r is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 5, 5, 4, 3, 0),
                   "rill_op_conv2d_f32: sz is 0");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 5, 5, 4, 6, 3),
                   "rill_op_conv2d_f32: the filter height r (6) exceeds the input height h (5)");
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 2, 3, 5, 5, 4, 3, 7),
                   "rill_op_conv2d_f32: the filter width sz (7) exceeds the input width w (5)");
    expect_invalid(rill_op_conv2d_f32(NULL, in + 1, in, w, 2, 3, 5, 5, 4, 3, 3),
                   "rill_op_conv2d_f32: out overlaps in");
    expect_invalid(rill_op_conv2d_f32(NULL, w, in, w + 8, 1, 1, 5, 5, 1, 3, 3),
                   "rill_op_conv2d_f32: out overlaps weight");
    RT_OK(rill_free(in));
    RT_OK(rill_free(w));
    RT_OK(rill_free(out));
}

/* A bad stream handle is reported, not used as a stream. The fake handle
 * is zeroed memory aligned like any rill object, so reading its magic
 * number is defined behaviour. */
static void test_ops_reject_a_bad_stream_handle(void **state) {
    (void)state;
    static alignas(64) unsigned char not_a_stream[1024];
    float *x = dev_floats(4);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_op_fill_f32((rill_stream *)(void *)not_a_stream, x, 1.0f, 4));
    RT_OK(rill_free(x));
}

/* Style contract: "a failed call changes nothing". */
static void test_a_rejected_op_leaves_memory_unchanged(void **state) {
    (void)state;
    size_t n = 64;
    float *x = dev_floats(n);
    RT_OK(rill_op_fill_f32(NULL, x, 5.0f, n));
    expect_invalid(rill_op_add_scalar_f32(NULL, x + 1, x, 1.0f, n - 1), "out overlaps a");
    expect_invalid(rill_op_matmul_f32(NULL, x, x, x + 16, 4, 4, 4), "c overlaps a");
    expect_invalid(rill_op_conv2d_f32(NULL, x, x + 32, x, 1, 1, 4, 4, 1, 5, 1),
                   "exceeds the input height");
    float *got = download(x, n);
    for (size_t i = 0; i < n; i++)
        expect_near("x", i, got[i], 5.0, 0.0);
    free(got);
    RT_OK(rill_free(x));
}

/* ---- accesses against their allocations ---- */

/* Fails unless status is RILL_ERROR_INVALID_ARGUMENT and rill_last_error()
 * names the op and the argument (head, up to the pointer) and the sizes
 * (tail): "rill_op_fill_f32: x (0x...) covers 4100 bytes (n floats), but
 * its allocation has 4096 bytes from x to its end; ...". */
static void expect_overrun(rill_status status, const char *head, const char *tail) {
    expect_invalid(status, head);
    if (strstr(rill_last_error(), tail) == NULL)
        fail_msg("rill_last_error() is \"%s\", which does not mention \"%s\"", rill_last_error(),
                 tail);
}

/* Fails unless the n floats at dev all equal want. */
static void expect_all(const char *what, const float *dev, size_t n, float want) {
    float *got = download(dev, n);
    for (size_t i = 0; i < n; i++)
        expect_near(what, i, got[i], want, 0.0);
    free(got);
}

/* An op's operand in a block that the calling thread's cache handed out
 * (a same-stream allocation after a same-stream free: how a tensor
 * library's memory turns over) is checked against that block, as any
 * other: one float past its end is refused with both sizes, an interior
 * pointer is measured to the block's end, and a freed block is refused. */
static void test_op_checks_a_block_the_thread_cache_leased(void **state) {
    (void)state;
    rill_stream *s = rill_default_stream(cpu_device());
    for (int round = 0; round < 3; round++) {
        float *x = NULL;
        RT_OK(rill_malloc_async(1024 * sizeof(float), s, (void **)&x));
        expect_overrun(rill_op_fill_f32(s, x, 1.0f, 1025), "rill_op_fill_f32: x (",
                       "covers 4100 bytes (n floats), but its allocation has 4096 bytes from x "
                       "to its end");
        expect_overrun(rill_op_fill_f32(s, x + 1, 1.0f, 1024), "rill_op_fill_f32: x (",
                       "covers 4096 bytes (n floats), but its allocation has 4092 bytes from x");
        RT_OK(rill_op_fill_f32(s, x, 3.0f, 1024));
        expect_all("x", x, 1024, 3.0f);
        RT_OK(rill_free_async(x, s));
        RT_OK(rill_stream_synchronize(s));
        expect_invalid(rill_op_fill_f32(s, x, 1.0f, 1), "is device memory that is not allocated");
    }
}

/* Issue 10: "rill_op_fill_f32 of 1025 floats into a 4096-byte block
 * returns OK and overwrites the next allocation". Every op checks its
 * declared accesses against the allocation that holds them, as
 * rill_memset_async does: one float past the end is refused with a sentence
 * naming the op, the argument and both sizes, and the allocation after it
 * keeps its contents; the exact fit runs; a count whose bytes do not fit in
 * a size_t is refused. */
static void test_fill_refuses_to_run_past_its_allocation(void **state) {
    (void)state;
    float *x = dev_floats(1024), *next = dev_floats(1024);
    RT_OK(rill_op_fill_f32(NULL, next, 7.0f, 1024));
    expect_overrun(rill_op_fill_f32(NULL, x, 1.0f, 1025), "rill_op_fill_f32: x (",
                   "covers 4100 bytes (n floats), but its allocation has 4096 bytes from x to its "
                   "end");
    expect_overrun(rill_op_fill_f32(NULL, x + 1, 1.0f, 1024), "rill_op_fill_f32: x (",
                   "covers 4096 bytes (n floats), but its allocation has 4092 bytes from x");
    RT_OK(rill_op_fill_f32(NULL, x + 1, 2.0f, 1023));
    RT_OK(rill_op_fill_f32(NULL, x, 3.0f, 1024));
    expect_invalid(rill_op_fill_f32(NULL, x, 1.0f, SIZE_MAX / 2), "do not fit in memory");
    expect_invalid(rill_op_fill_f32(NULL, x, 1.0f, SIZE_MAX / 4 + 1), "do not fit in memory");
    expect_all("x", x, 1024, 3.0f);
    expect_all("next", next, 1024, 7.0f);

    /* Page-locked host memory is rill's too, and checked the same way. */
    float *pinned = NULL;
    RT_OK(rill_malloc_host(4096, (void **)&pinned));
    expect_overrun(rill_op_fill_f32(NULL, pinned, 1.0f, 1025), "rill_op_fill_f32: x (",
                   "but its allocation has 4096 bytes from x");
    RT_OK(rill_op_fill_f32(NULL, pinned, 4.0f, 1024));
    RT_OK(rill_device_synchronize(NULL));
    for (size_t i = 0; i < 1024; i++)
        expect_near("pinned", i, pinned[i], 4.0, 0.0);
    RT_OK(rill_free_host(pinned));
    RT_OK(rill_free(x));
    RT_OK(rill_free(next));
}

/* A freed block is no longer an allocation an op may write. */
static void test_ops_refuse_freed_device_memory(void **state) {
    (void)state;
    float *x = dev_floats(64);
    RT_OK(rill_free(x));
    expect_overrun(rill_op_fill_f32(NULL, x, 1.0f, 64), "rill_op_fill_f32: x (",
                   "is device memory that is not allocated");
}

/* Memory that rill did not allocate cannot be checked and stays allowed,
 * as for rill_memcpy. */
static void test_ops_on_ordinary_host_memory_are_not_checked(void **state) {
    (void)state;
    float *x = host_floats(100);
    RT_OK(rill_op_fill_f32(NULL, x, 6.0f, 100));
    RT_OK(rill_device_synchronize(NULL));
    for (size_t i = 0; i < 100; i++)
        expect_near("x", i, x[i], 6.0, 0.0);
    free(x);
}

static void test_elementwise_ops_refuse_to_run_past_an_allocation(void **state) {
    (void)state;
    enum { N = 256 };
    float *a = dev_floats(N), *b = dev_floats(N), *out = dev_floats(N);
    float *big = dev_floats(N + 1), *big2 = dev_floats(N + 1), *next = dev_floats(N);
    RT_OK(rill_op_fill_f32(NULL, a, 1.0f, N));
    RT_OK(rill_op_fill_f32(NULL, b, 2.0f, N));
    RT_OK(rill_op_fill_f32(NULL, big, 1.0f, N + 1));
    RT_OK(rill_op_fill_f32(NULL, big2, 2.0f, N + 1));
    RT_OK(rill_op_fill_f32(NULL, next, 9.0f, N));

    expect_overrun(rill_op_add_f32(NULL, big, a, big2, 1.0f, N + 1), "rill_op_add_f32: a (",
                   "covers 1028 bytes (n floats), but its allocation has 1024 bytes from a");
    expect_overrun(rill_op_add_f32(NULL, big, big2, b, 1.0f, N + 1), "rill_op_add_f32: b (",
                   "covers 1028 bytes (n floats), but its allocation has 1024 bytes from b");
    expect_overrun(rill_op_add_f32(NULL, out, big, big2, 1.0f, N + 1), "rill_op_add_f32: out (",
                   "covers 1028 bytes (n floats), but its allocation has 1024 bytes from out");
    expect_invalid(rill_op_add_f32(NULL, out, a, b, 1.0f, SIZE_MAX / 2), "do not fit in memory");

    expect_overrun(rill_op_mul_f32(NULL, big, a, big2, N + 1), "rill_op_mul_f32: a (",
                   "but its allocation has 1024 bytes from a");
    expect_overrun(rill_op_mul_f32(NULL, big, big2, b, N + 1), "rill_op_mul_f32: b (",
                   "but its allocation has 1024 bytes from b");
    expect_overrun(rill_op_mul_f32(NULL, out, big, big2, N + 1), "rill_op_mul_f32: out (",
                   "but its allocation has 1024 bytes from out");
    expect_invalid(rill_op_mul_f32(NULL, out, a, b, SIZE_MAX / 2), "do not fit in memory");

    expect_overrun(rill_op_add_scalar_f32(NULL, big, a, 1.0f, N + 1), "rill_op_add_scalar_f32: a (",
                   "but its allocation has 1024 bytes from a");
    expect_overrun(rill_op_add_scalar_f32(NULL, out, big, 1.0f, N + 1),
                   "rill_op_add_scalar_f32: out (", "but its allocation has 1024 bytes from out");
    /* In place, the buffer is named as the input, checked first. */
    expect_overrun(rill_op_add_scalar_f32(NULL, out, out, 1.0f, N + 1),
                   "rill_op_add_scalar_f32: a (", "but its allocation has 1024 bytes from a");
    expect_invalid(rill_op_add_scalar_f32(NULL, out, a, 1.0f, SIZE_MAX / 2),
                   "do not fit in memory");
    expect_all("next", next, N, 9.0f);

    /* The exact fit runs. */
    RT_OK(rill_op_add_f32(NULL, out, a, b, 1.0f, N));
    expect_all("out", out, N, 3.0f);
    RT_OK(rill_op_mul_f32(NULL, out, a, b, N));
    expect_all("out", out, N, 2.0f);
    RT_OK(rill_op_add_scalar_f32(NULL, out, a, 4.0f, N));
    expect_all("out", out, N, 5.0f);
    expect_all("next", next, N, 9.0f);
    float *bufs[] = {a, b, out, big, big2, next};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        RT_OK(rill_free(bufs[i]));
}

/* sum reads n floats of a and writes one float to out; both are checked,
 * with one block and with several (the partial sums' scratch is the
 * library's own). */
static void test_sum_refuses_to_run_past_an_allocation(void **state) {
    (void)state;
    size_t sizes[] = {100, 3 * ((size_t)1 << 15) + 5};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        float *a = dev_floats(n), *out = dev_floats(1);
        void *tiny = NULL;
        RT_OK(rill_malloc(cpu_device(), 3, &tiny));
        RT_OK(rill_op_fill_f32(NULL, a, 1.0f, n));
        RT_OK(rill_op_fill_f32(NULL, out, -1.0f, 1));
        expect_overrun(rill_op_sum_f32(NULL, out, a, n + 1), "rill_op_sum_f32: a (",
                       "(n floats), but its allocation has");
        expect_overrun(rill_op_sum_f32(NULL, tiny, a, n), "rill_op_sum_f32: out (",
                       "covers 4 bytes (one float), but its allocation has 3 bytes from out");
        expect_overrun(rill_op_sum_f32(NULL, out, a + 1, n), "rill_op_sum_f32: a (",
                       "(n floats), but its allocation has");
        expect_invalid(rill_op_sum_f32(NULL, out, a, SIZE_MAX / 2), "do not fit in memory");
        expect_all("out", out, 1, -1.0f);
        RT_OK(rill_op_sum_f32(NULL, out, a, n));
        expect_all("out", out, 1, (float)n);
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        RT_OK(rill_free(tiny));
    }
}

/* matmul declares m*k floats of a, k*n of b and m*n of c. Dimensions are at
 * most INT_MAX, so their products fit in a size_t; the largest are still
 * refused, by the allocations. */
static void test_matmul_refuses_to_run_past_an_allocation(void **state) {
    (void)state;
    enum { M = 4, K = 5, N = 6 };
    float *a = dev_floats(M * K), *b = dev_floats(K * N), *c = dev_floats(M * N);
    RT_OK(rill_op_fill_f32(NULL, a, 1.0f, M * K));
    RT_OK(rill_op_fill_f32(NULL, b, 2.0f, K * N));
    RT_OK(rill_op_fill_f32(NULL, c, -1.0f, M * N));
    expect_overrun(rill_op_matmul_f32(NULL, c, a, b, M + 1, K, N - 1), "rill_op_matmul_f32: a (",
                   "covers 100 bytes (m*k floats), but its allocation has 80 bytes from a");
    expect_overrun(rill_op_matmul_f32(NULL, c, a, b, M - 1, K, N + 1), "rill_op_matmul_f32: b (",
                   "covers 140 bytes (k*n floats), but its allocation has 120 bytes from b");
    expect_overrun(rill_op_matmul_f32(NULL, c, a, b, M, K - 1, N + 1), "rill_op_matmul_f32: c (",
                   "covers 112 bytes (m*n floats), but its allocation has 96 bytes from c");
    size_t big = (size_t)INT_MAX;
    expect_overrun(rill_op_matmul_f32(NULL, c, a, b, big, big, 1), "rill_op_matmul_f32: a (",
                   "(m*k floats), but its allocation has 80 bytes from a");
    expect_overrun(rill_op_matmul_f32(NULL, c, a, b, 1, big, big), "rill_op_matmul_f32: a (",
                   "(m*k floats), but its allocation has 80 bytes from a");
    expect_all("c", c, M * N, -1.0f);
    RT_OK(rill_op_matmul_f32(NULL, c, a, b, M, K, N));
    expect_all("c", c, M * N, 2.0f * K);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
}

/* conv2d declares n*c*h*w floats of in, k*c*r*sz of weight and
 * n*k*(h-r+1)*(w-sz+1) of out; a product that does not fit in a size_t is
 * refused before any allocation is looked at. */
static void test_conv2d_refuses_to_run_past_an_allocation(void **state) {
    (void)state;
    /* in [1,2,4,4], weight [3,2,3,3], out [1,3,2,2] */
    float *in = dev_floats(32), *w = dev_floats(54), *out = dev_floats(12);
    RT_OK(rill_op_fill_f32(NULL, in, 1.0f, 32));
    RT_OK(rill_op_fill_f32(NULL, w, 0.5f, 54));
    RT_OK(rill_op_fill_f32(NULL, out, -1.0f, 12));
    expect_overrun(rill_op_conv2d_f32(NULL, out, in, w, 1, 2, 4, 5, 3, 3, 4),
                   "rill_op_conv2d_f32: in (",
                   "covers 160 bytes (n*c*h*w floats), but its allocation has 128 bytes from in");
    expect_overrun(rill_op_conv2d_f32(NULL, out, in, w, 1, 2, 4, 4, 4, 3, 3),
                   "rill_op_conv2d_f32: weight (",
                   "covers 288 bytes (k*c*r*sz floats), but its allocation has 216 bytes from "
                   "weight");
    expect_overrun(rill_op_conv2d_f32(NULL, out, in, w, 1, 2, 4, 4, 3, 2, 3),
                   "rill_op_conv2d_f32: out (",
                   "covers 72 bytes (n*k*(h-r+1)*(w-sz+1) floats), but its allocation has 48 "
                   "bytes from out");
    size_t huge = (size_t)1 << 20;
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, huge, huge, huge, huge, 1, 1, 1),
                   "rill_op_conv2d_f32: in has n*c*h*w floats, more than fit in memory");
    size_t wide = (size_t)INT_MAX;
    expect_invalid(rill_op_conv2d_f32(NULL, out, in, w, 1, wide, 2, 2, wide, 2, 2),
                   "rill_op_conv2d_f32: weight has k*c*r*sz floats, more than fit in memory");
    expect_all("out", out, 12, -1.0f);
    RT_OK(rill_op_conv2d_f32(NULL, out, in, w, 1, 2, 4, 4, 3, 3, 3));
    expect_all("out", out, 12, 9.0f);
    RT_OK(rill_free(in));
    RT_OK(rill_free(w));
    RT_OK(rill_free(out));
}

/* ---- kernel cache ---- */

/* rill.h: "rill_shutdown() waits for all work and releases everything"; the
 * library initialises itself again on next use, built-in kernels included. */
static void test_ops_work_again_after_shutdown(void **state) {
    (void)state;
    for (int round = 0; round < 3; round++) {
        float *x = dev_floats(100);
        RT_OK(rill_op_fill_f32(NULL, x, (float)round, 100));
        float *got = download(x, 100);
        expect_near("x", 99, got[99], round, 0.0);
        free(got);
        RT_OK(rill_free(x));
        RT_OK(rill_shutdown());
    }
}

#define RACERS 8

typedef struct racer {
    pthread_t thread;
    float *x;
    float *sum;
    _Atomic int status;
} racer;

static void *race_first_use(void *arg) {
    racer *r = arg;
    rill_status st = rill_op_fill_f32(NULL, r->x, 1.0f, 70000);
    if (st == RILL_OK)
        st = rill_op_sum_f32(NULL, r->sum, r->x, 70000);
    if (st == RILL_OK)
        st = rill_stream_synchronize(NULL);
    atomic_store(&r->status, (int)st);
    return NULL;
}

/* rill.h: "Every function is thread-safe": threads that use ops for the
 * first time at once all succeed (the kernels are created racing). */
static void test_first_use_of_ops_from_many_threads(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    racer racers[RACERS];
    for (int i = 0; i < RACERS; i++) {
        racers[i].x = dev_floats(70000);
        racers[i].sum = dev_floats(1);
        atomic_init(&racers[i].status, -1);
    }
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_create(&racers[i].thread, NULL, race_first_use, &racers[i]), 0);
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_join(racers[i].thread, NULL), 0);
    for (int i = 0; i < RACERS; i++) {
        assert_int_equal(atomic_load(&racers[i].status), RILL_OK);
        float got;
        RT_OK(rill_memcpy(&got, racers[i].sum, sizeof got));
        expect_near("sum", (size_t)i, got, 70000.0, 0.0);
        RT_OK(rill_free(racers[i].x));
        RT_OK(rill_free(racers[i].sum));
    }
}

/* Every built-in op has a kernel with a name of its own (errors, traces
 * and graph dumps show it) and a body on the CPU device: an op added to
 * rill__op without its entries in ops.c's names or rill__cpu_op_body
 * fails here rather than running as "(null)" or not at all. */
static void test_every_op_has_a_named_kernel_and_a_cpu_body(void **state) {
    (void)state;
    (void)cpu_device();
    for (int op = RILL__OP_NONE + 1; op < RILL__OP_COUNT; op++) {
        rill_kernel *handle = NULL;
        RT_OK(rill__op_kernel((rill__op)op, &handle));
        rill__kernel *k = rill__handle_get(handle, RILL__HANDLE_KERNEL);
        assert_non_null(k);
        if (k->image.name[0] == '\0' || strcmp(k->image.name, "(null)") == 0)
            fail_msg("op %d's kernel has no name; add it to op_names in src/ops/ops.c", op);
        for (int other = RILL__OP_NONE + 1; other < op; other++) {
            rill_kernel *h = NULL;
            RT_OK(rill__op_kernel((rill__op)other, &h));
            rill__kernel *o = rill__handle_get(h, RILL__HANDLE_KERNEL);
            if (strcmp(o->image.name, k->image.name) == 0)
                fail_msg("ops %d and %d are both named %s", other, op, k->image.name);
        }
        if (rill__cpu_op_body((rill__op)op) == NULL)
            fail_msg("op %d (%s) has no CPU body in rill__cpu_op_body", op, k->image.name);
    }
}

/* ---- randn ---- */

/* rill.h: "x[i] = mean + std * z[i], z a standard normal sample that
 * depends only on seed and i" — a million samples have the normal's mean,
 * variance and share within one sigma. */
static void test_randn_fills_normal_samples(void **state) {
    (void)state;
    size_t n = 1000003;
    float *x = dev_floats(n);
    RT_OK(rill_op_randn_f32(NULL, x, n, 2.0f, 3.0f, 42));
    float *h = download(x, n);
    double sum = 0.0, sq = 0.0;
    size_t within = 0;
    for (size_t i = 0; i < n; i++) {
        double z = ((double)h[i] - 2.0) / 3.0;
        sum += z;
        sq += z * z;
        within += fabs(z) <= 1.0;
    }
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    /* Standard errors: 1/sqrt(n) ~ 0.001 for the mean, sqrt(2/n) for the
     * variance; five of them. */
    expect_near("mean", 0, mean, 0.0, 0.005);
    expect_near("variance", 0, var, 1.0, 0.007);
    expect_near("share within one sigma", 0, (double)within / (double)n, 0.682689, 0.003);
    free(h);
    RT_OK(rill_free(x));
}

/* rill.h: "the values are the same for every grid, stream and device" —
 * a prefix of a longer fill (another grid) has the same bits, and another
 * seed gives other values. */
static void test_randn_depends_only_on_seed_and_index(void **state) {
    (void)state;
    size_t n = 1 << 20, small = 37;
    float *big = dev_floats(n), *few = dev_floats(small), *other = dev_floats(small);
    RT_OK(rill_op_randn_f32(NULL, big, n, 0.0f, 1.0f, 7));
    RT_OK(rill_op_randn_f32(NULL, few, small, 0.0f, 1.0f, 7));
    RT_OK(rill_op_randn_f32(NULL, other, small, 0.0f, 1.0f, 8));
    float *hb = download(big, small), *hf = download(few, small), *ho = download(other, small);
    assert_memory_equal(hb, hf, small * sizeof(float));
    size_t same = 0;
    for (size_t i = 0; i < small; i++) {
        expect_near("randn", i, hf[i], rill__op_randn_value(7, i), 1e-6 * (1 + fabs(hf[i])));
        same += hf[i] == ho[i];
    }
    assert_true(same < small);
    RT_OK(rill_op_randn_f32(NULL, few, small, 5.0f, 0.0f, 9));
    free(hf);
    hf = download(few, small);
    for (size_t i = 0; i < small; i++)
        expect_near("randn std 0", i, hf[i], 5.0, 0.0);
    free(hb);
    free(hf);
    free(ho);
    RT_OK(rill_free(big));
    RT_OK(rill_free(few));
    RT_OK(rill_free(other));
}

static void test_randn_rejects_bad_arguments(void **state) {
    (void)state;
    float *x = dev_floats(8);
    expect_invalid(rill_op_randn_f32(NULL, NULL, 8, 0.0f, 1.0f, 1), "rill_op_randn_f32: x is NULL");
    expect_invalid(rill_op_randn_f32(NULL, x, 0, 0.0f, 1.0f, 1), "rill_op_randn_f32: n is 0");
    expect_invalid(rill_op_randn_f32(NULL, x, 8, 0.0f, -1.0f, 1), "std is -1");
    expect_invalid(rill_op_randn_f32(NULL, x, 8, 0.0f, NAN, 1), "std is nan");
    expect_invalid(rill_op_randn_f32(NULL, x, 8, INFINITY, 1.0f, 1), "mean is inf");
    expect_invalid(rill_op_randn_f32(NULL, x, 9, 0.0f, 1.0f, 1), "rill_op_randn_f32");
    RT_OK(rill_free(x));
}

/* ---- float16 ---- */

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The nearest half to f by search over all finite halves, ties to even,
 * with 65520 and up to infinity: the reference the conversions must meet. */
static uint16_t nearest_half(float f) {
    if (isnan(f))
        return 0; /* not used for NaN */
    double v = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    if (v >= 65520.0)
        return sign | 0x7c00u;
    uint16_t best = 0;
    double best_err = INFINITY;
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        double err = fabs((double)rill__half_to_float((uint16_t)h) - v);
        if (err < best_err || (err == best_err && (h & 1u) == 0)) {
            best = (uint16_t)h;
            best_err = err;
        }
    }
    return sign | best;
}

/* rill.h: "Converting a half to float is exact" — every one of the 65536
 * halves, against the value its fields define, and the F16C path (where
 * the processor has it) gives the portable path's bits. */
static void test_every_half_converts_to_its_float(void **state) {
    (void)state;
    uint16_t *all = malloc(65536 * sizeof *all);
    float *fast = host_floats(65536), *portable = host_floats(65536);
    assert_non_null(all);
    for (uint32_t h = 0; h < 65536; h++) {
        all[h] = (uint16_t)h;
        unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        double want = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, (int)e - 25);
        float got = rill__half_to_float((uint16_t)h);
        if (e == 0x1f) {
            assert_true(m == 0 ? isinf(got) : isnan(got));
        } else {
            expect_near("half", h, fabs(got), want, 0.0);
        }
        assert_int_equal(signbit(got) != 0, (h & 0x8000u) != 0);
    }
    rill__half_to_float_n(fast, all, 65536);
    rill__half_force_portable(true);
    rill__half_to_float_n(portable, all, 65536);
    rill__half_force_portable(false);
    for (uint32_t h = 0; h < 65536; h++)
        if (float_bits(fast[h]) != float_bits(portable[h]))
            fail_msg("half 0x%04x: F16C gives 0x%08x, portable 0x%08x", h, float_bits(fast[h]),
                     float_bits(portable[h]));
    free(all);
    free(fast);
    free(portable);
}

/* rill.h: "rounds to the nearest half, ties to even; values from 65520 up
 * in magnitude become infinity; a NaN stays a (quiet) NaN" — halfway
 * points, their neighbours, subnormals and a sweep of floats, against a
 * search; the F16C and portable paths agree bit for bit. */
static void test_floats_round_to_the_nearest_half(void **state) {
    (void)state;
    enum { SWEEP = 4096 };
    float in[SWEEP + 64];
    size_t count = 0;
    for (uint32_t h = 0; h < 0x7bffu; h += 97) {
        float lo = rill__half_to_float((uint16_t)h), hi = rill__half_to_float((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2);
        if (count + 3 > SWEEP)
            break;
        in[count++] = mid;
        in[count++] = nextafterf(mid, 0.0f);
        in[count++] = -nextafterf(mid, INFINITY);
    }
    const float special[] = {0.0f,
                             -0.0f,
                             65504.0f,
                             65519.99f,
                             65520.0f,
                             -1e9f,
                             1e-8f,
                             2.98e-8f,
                             5.96e-8f,
                             6.1e-5f,
                             bits_float(0x33000001u),
                             1.0f / 3};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        in[count++] = special[i];
    uint16_t fast[SWEEP + 64], portable[SWEEP + 64];
    rill__half_from_float_n(fast, in, count);
    rill__half_force_portable(true);
    rill__half_from_float_n(portable, in, count);
    rill__half_force_portable(false);
    for (size_t i = 0; i < count; i++) {
        uint16_t want = nearest_half(in[i]);
        if (portable[i] != want || fast[i] != want)
            fail_msg("%.9g: portable 0x%04x, F16C 0x%04x, nearest 0x%04x", (double)in[i],
                     portable[i], fast[i], want);
    }
    float nans[2] = {NAN, -bits_float(0x7f800001u)}; /* quiet, and a signalling one */
    uint16_t hn[2];
    rill__half_from_float_n(hn, nans, 2);
    assert_int_equal(hn[0] & 0x7e00u, 0x7e00u);
    assert_int_equal(hn[1] & 0xfe00u, 0xfe00u);
}

/* rill_op_cast_f32_f16 and rill_op_cast_f16_f32 on device memory: a float
 * array to halves and back is the nearest half of each float, on odd
 * sizes (so blocks end mid-cache-line). */
static void test_casts_round_trip_through_halves(void **state) {
    (void)state;
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *host;
        float *a = dev_random(n, (uint32_t)t + 11, &host);
        void *hp = NULL;
        RT_OK(rill_malloc(cpu_device(), n * sizeof(rill_half), &hp));
        rill_half *h = hp;
        float *back = dev_floats(n);
        RT_OK(rill_op_randn_f32(NULL, back, n, 0.0f, 1.0f, 3)); /* overwritten below */
        RT_OK(rill_op_cast_f32_f16(NULL, h, a, n));
        RT_OK(rill_op_cast_f16_f32(NULL, back, h, n));
        float *got = download(back, n);
        for (size_t i = 0; i < n; i++) {
            float want = rill__half_to_float(rill__half_from_float(host[i]));
            if (float_bits(got[i]) != float_bits(want))
                fail_msg("element %zu: %.9g came back %.9g, expected %.9g", i, (double)host[i],
                         (double)got[i], (double)want);
        }
        free(host);
        free(got);
        RT_OK(rill_free(a));
        RT_OK(rill_free(h));
        RT_OK(rill_free(back));
    }
}

static void test_casts_reject_bad_arguments(void **state) {
    (void)state;
    float *f = dev_floats(8);
    void *hp = NULL;
    RT_OK(rill_malloc(cpu_device(), 8 * sizeof(rill_half), &hp));
    rill_half *h = hp;
    expect_invalid(rill_op_cast_f32_f16(NULL, NULL, f, 8), "rill_op_cast_f32_f16: out is NULL");
    expect_invalid(rill_op_cast_f32_f16(NULL, h, NULL, 8), "rill_op_cast_f32_f16: in is NULL");
    expect_invalid(rill_op_cast_f16_f32(NULL, f, h, 0), "rill_op_cast_f16_f32: n is 0");
    /* 8 halves hold 16 bytes: 9 run past them; 9 floats past f's 32. */
    expect_invalid(rill_op_cast_f16_f32(NULL, f, h, 9), "rill_op_cast_f16_f32");
    expect_invalid(rill_op_cast_f32_f16(NULL, h, f, 9), "rill_op_cast_f32_f16");
    expect_invalid(rill_op_cast_f32_f16(NULL, (rill_half *)(void *)(f + 1), f, 4),
                   "out overlaps in");
    RT_OK(rill_free(f));
    RT_OK(rill_free(h));
}

/* rill.h: "each element computed in float32 from the halves' values, as
 * the f32 op computes it, and rounded to a half once" — every f16 op
 * against the f32 op on the halves' values, rounded, on odd sizes (chunk
 * and block tails), out of place and in place. */
static void test_f16_ops_are_the_f32_ops_rounded_once(void **state) {
    (void)state;
    for (size_t t = 0; t < NUM_ODD_SIZES; t++) {
        size_t n = odd_sizes[t];
        float *fa = host_floats(n), *fb = host_floats(n);
        fill_random(fa, n, (uint32_t)t + 21);
        fill_random(fb, n, (uint32_t)t + 22);
        uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2), *got = malloc(n * 2);
        assert_non_null(ha);
        assert_non_null(hb);
        assert_non_null(got);
        for (size_t i = 0; i < n; i++) {
            ha[i] = rill__half_from_float(fa[i] * 300.0f);
            hb[i] = rill__half_from_float(fb[i] * 3.0f);
        }
        void *pa = NULL, *pb = NULL, *po = NULL;
        RT_OK(rill_malloc(cpu_device(), n * 2, &pa));
        RT_OK(rill_malloc(cpu_device(), n * 2, &pb));
        RT_OK(rill_malloc(cpu_device(), n * 2, &po));
        RT_OK(rill_memcpy(pa, ha, n * 2));
        RT_OK(rill_memcpy(pb, hb, n * 2));
        for (int op = 0; op < 5; op++) {
            switch (op) {
            case 0:
                RT_OK(rill_op_add_f16(NULL, po, pa, pb, 1.0f, n));
                break;
            case 1:
                RT_OK(rill_op_add_f16(NULL, po, pa, pb, -0.75f, n));
                break;
            case 2:
                RT_OK(rill_op_mul_f16(NULL, po, pa, pb, n));
                break;
            case 3:
                RT_OK(rill_op_add_scalar_f16(NULL, po, pa, 0.1f, n));
                break;
            default:
                RT_OK(rill_op_fill_f16(NULL, po, 1.0f / 3, n));
                break;
            }
            RT_OK(rill_memcpy(got, po, n * 2));
            for (size_t i = 0; i < n; i++) {
                float x = rill__half_to_float(ha[i]), y = rill__half_to_float(hb[i]);
                float r = op == 0   ? x + y
                          : op == 1 ? x + -0.75f * y
                          : op == 2 ? x * y
                          : op == 3 ? x + 0.1f
                                    : 1.0f / 3;
                uint16_t w = rill__half_from_float(r);
                if (got[i] != w)
                    fail_msg("op %d, n %zu, element %zu: 0x%04x, expected 0x%04x", op, n, i, got[i],
                             w);
            }
        }
        RT_OK(rill_op_add_f16(NULL, pa, pa, pa, 1.0f, n)); /* in place: a = 2a */
        RT_OK(rill_memcpy(got, pa, n * 2));
        for (size_t i = 0; i < n; i++)
            assert_int_equal(got[i], rill__half_from_float(2.0f * rill__half_to_float(ha[i])));
        free(fa);
        free(fb);
        free(ha);
        free(hb);
        free(got);
        RT_OK(rill_free(pa));
        RT_OK(rill_free(pb));
        RT_OK(rill_free(po));
    }
}

static void test_f16_ops_reject_bad_arguments(void **state) {
    (void)state;
    void *p = NULL;
    RT_OK(rill_malloc(cpu_device(), 16 * 2, &p));
    rill_half *h = p;
    expect_invalid(rill_op_fill_f16(NULL, NULL, 1.0f, 8), "rill_op_fill_f16: x is NULL");
    expect_invalid(rill_op_fill_f16(NULL, h, 1.0f, 0), "rill_op_fill_f16: n is 0");
    expect_invalid(rill_op_fill_f16(NULL, h, 1.0f, 17), "rill_op_fill_f16");
    expect_invalid(rill_op_add_f16(NULL, NULL, h, h, 1.0f, 8), "rill_op_add_f16: out is NULL");
    expect_invalid(rill_op_add_f16(NULL, h, NULL, h, 1.0f, 8), "rill_op_add_f16: a is NULL");
    expect_invalid(rill_op_add_f16(NULL, h, h, NULL, 1.0f, 8), "rill_op_add_f16: b is NULL");
    expect_invalid(rill_op_add_f16(NULL, h + 1, h, h + 8, 1.0f, 8), "out overlaps a");
    expect_invalid(rill_op_mul_f16(NULL, h, h + 8, h + 1, 8), "out overlaps b");
    expect_invalid(rill_op_mul_f16(NULL, h, h, h, 17), "rill_op_mul_f16");
    expect_invalid(rill_op_add_scalar_f16(NULL, h, NULL, 1.0f, 8),
                   "rill_op_add_scalar_f16: a is NULL");
    expect_invalid(rill_op_add_scalar_f16(NULL, h + 2, h, 1.0f, 8), "out overlaps a");
    RT_OK(rill_free(p));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_sets_every_element),
        cmocka_unit_test(test_add_computes_a_plus_alpha_b),
        cmocka_unit_test(test_mul_multiplies_elementwise),
        cmocka_unit_test(test_add_scalar_adds_value),
        cmocka_unit_test(test_elementwise_ops_run_in_place),
        cmocka_unit_test(test_sum_matches_double_reference),
        cmocka_unit_test(test_sum_is_deterministic),
        cmocka_unit_test(test_matmul_matches_double_reference),
        cmocka_unit_test(test_matmul_with_few_rows_splits_columns),
        cmocka_unit_test(test_matmul_of_a_matrix_with_itself),
        cmocka_unit_test(test_matmul_ex_with_transposed_operands_matches_double_reference),
        cmocka_unit_test(test_matmuls_on_concurrent_streams_give_the_bits_of_one),
        cmocka_unit_test(test_conv2d_matches_double_reference),
        cmocka_unit_test(test_conv2d_on_seed_000_shapes),
        cmocka_unit_test(test_ops_run_on_a_non_default_stream),
        cmocka_unit_test(test_null_stream_means_current_stream),
        cmocka_unit_test(test_fill_rejects_bad_arguments),
        cmocka_unit_test(test_elementwise_ops_reject_bad_arguments),
        cmocka_unit_test(test_matmul_rejects_bad_arguments),
        cmocka_unit_test(test_conv2d_rejects_bad_arguments),
        cmocka_unit_test(test_ops_reject_a_bad_stream_handle),
        cmocka_unit_test(test_a_rejected_op_leaves_memory_unchanged),
        cmocka_unit_test(test_fill_refuses_to_run_past_its_allocation),
        cmocka_unit_test(test_op_checks_a_block_the_thread_cache_leased),
        cmocka_unit_test(test_ops_refuse_freed_device_memory),
        cmocka_unit_test(test_ops_on_ordinary_host_memory_are_not_checked),
        cmocka_unit_test(test_elementwise_ops_refuse_to_run_past_an_allocation),
        cmocka_unit_test(test_sum_refuses_to_run_past_an_allocation),
        cmocka_unit_test(test_matmul_refuses_to_run_past_an_allocation),
        cmocka_unit_test(test_conv2d_refuses_to_run_past_an_allocation),
        cmocka_unit_test(test_ops_work_again_after_shutdown),
        cmocka_unit_test(test_first_use_of_ops_from_many_threads),
        cmocka_unit_test(test_every_op_has_a_named_kernel_and_a_cpu_body),
        cmocka_unit_test(test_randn_fills_normal_samples),
        cmocka_unit_test(test_randn_depends_only_on_seed_and_index),
        cmocka_unit_test(test_randn_rejects_bad_arguments),
        cmocka_unit_test(test_every_half_converts_to_its_float),
        cmocka_unit_test(test_floats_round_to_the_nearest_half),
        cmocka_unit_test(test_casts_round_trip_through_halves),
        cmocka_unit_test(test_casts_reject_bad_arguments),
        cmocka_unit_test(test_f16_ops_are_the_f32_ops_rounded_once),
        cmocka_unit_test(test_f16_ops_reject_bad_arguments),
    };
    return RT_RUN(tests);
}
