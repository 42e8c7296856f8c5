/* SPDX-License-Identifier: MIT */
/* sum, matmul and conv2d on halves (rill_op_*_f16): each against a host
 * reference computed in double from the same halves, with a tolerance of
 * half a half's spacing at the result (its one rounding) plus the float32
 * accumulation's error; accumulation in float32 rather than in halves;
 * every bad argument. */
#include "ops_support.h"

#include "backend/cpu/half.h"

#include <limits.h>
#include <math.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static rill_half *dev_halves(size_t n) {
    void *p = NULL;
    RT_OK(rill_malloc(cpu_device(), n * sizeof(rill_half), &p));
    return p;
}

/* n halves nearest to deterministic values in [-scale, scale), from a
 * linear congruential generator, on the host (*host_out, malloc'ed) and in
 * device memory (returned). */
static rill_half *dev_random(size_t n, uint32_t seed, float scale, rill_half **host_out) {
    rill_half *host = malloc(n * sizeof(rill_half));
    assert_non_null(host);
    uint32_t state = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        float x = (float)((double)(state >> 8) / 8388608.0 - 1.0);
        host[i] = rill__half_from_float(scale * x);
    }
    rill_half *dev = dev_halves(n);
    RT_OK(rill_memcpy(dev, host, n * sizeof(rill_half)));
    *host_out = host;
    return dev;
}

static rill_half *download(const rill_half *dev, size_t n) {
    rill_half *host = malloc(n * sizeof(rill_half));
    assert_non_null(host);
    RT_OK(rill_memcpy(host, dev, n * sizeof(rill_half)));
    return host;
}

static double value(rill_half h) {
    return (double)rill__half_to_float(h);
}

/* The spacing of halves at magnitude x: 2^(e - 10) for x in [2^e, 2^(e+1)),
 * and 2^-24 among the subnormals. */
static double half_spacing(double x) {
    x = fabs(x);
    if (x < 0x1p-14)
        return 0x1p-24;
    int e;
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    return ldexp(1.0, e - 1 - 10);
}

/* Fails unless the half got is within tol of want, or is want rounded to a
 * half (half a spacing away) plus the accumulation's error acc_err. */
static void expect_rounded(const char *what, size_t i, rill_half got, double want, double acc_err) {
    double tol = 0.5 * half_spacing(want + (want < 0 ? -acc_err : acc_err)) + acc_err;
    double g = value(got);
    if (!(fabs(g - want) <= tol))
        fail_msg("%s[%zu] = %.9g (0x%04x), expected %.9g (tolerance %.3g)", what, i, g, got, want,
                 tol);
}

/* ---- sum ---- */

/* rill.h: sum on halves is "accumulated in float32 (sum adds in double, as
 * rill_op_sum_f32 does), and each output element is rounded to a half
 * once" — on one element, a chunk's tail and many blocks. */
static void test_sum_f16_matches_double_reference(void **state) {
    (void)state;
    static const size_t sizes[] = {1, 7, 300, 1000003};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        rill_half *ha;
        rill_half *a = dev_random(n, (uint32_t)t + 1, 1.0f, &ha);
        rill_half *out = dev_halves(1);
        RT_OK(rill_op_sum_f16(NULL, out, a, n));
        rill_half got;
        RT_OK(rill_memcpy(&got, out, sizeof got));
        double want = 0.0, abs_sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            want += value(ha[i]);
            abs_sum += fabs(value(ha[i]));
        }
        /* The float the double total rounds to first: half its spacing. */
        expect_rounded("sum", n, got, want, U32 * fabs(want) + (double)n * 0x1p-52 * abs_sum);
        free(ha);
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
    }
}

/* ---- matmul ---- */

static void check_matmul(size_t m, size_t k, size_t n) {
    rill_half *ha, *hb;
    rill_half *a = dev_random(m * k, (uint32_t)(m * 31 + k), 1.0f, &ha);
    rill_half *b = dev_random(k * n, (uint32_t)(n * 17 + k), 1.0f, &hb);
    rill_half *c = dev_halves(m * n);
    RT_OK(rill_op_matmul_f16(NULL, c, a, b, m, k, n));
    rill_half *got = download(c, m * n);
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double want = 0.0, abs_sum = 0.0;
            for (size_t p = 0; p < k; p++) {
                double x = value(ha[i * k + p]) * value(hb[p * n + j]);
                want += x;
                abs_sum += fabs(x);
            }
            /* A float sum of k products errs by at most about k units of
             * float roundoff of the sum of their magnitudes. */
            expect_rounded("c", i * n + j, got[i * n + j], want, (double)(k + 2) * U32 * abs_sum);
        }
    }
    free(got);
    free(ha);
    free(hb);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
}

/* rill.h: matmul on halves has the f32 op's arguments ("c[m,n] = a[m,k]
 * b[k,n]"), computed in float32 and rounded once — on shapes that take one
 * chunk, several depth chunks, several row and column chunks, column
 * panels (few rows), and several tiles. */
static void test_matmul_f16_matches_double_reference(void **state) {
    (void)state;
    check_matmul(1, 1, 1);
    check_matmul(7, 5, 3);
    check_matmul(33, 600, 17);  /* depth in three chunks, the last short */
    check_matmul(130, 70, 600); /* rows and columns in several chunks */
    check_matmul(2, 513, 1000); /* few rows: the tiles split the columns */
    check_matmul(256, 256, 256);
}

/* "accumulated in float32": 3000 products of 1 sum to 3000, a half; a sum
 * kept in halves stops at 2048, where adding 1 rounds back to 2048. */
static void test_f16_products_and_sums_accumulate_in_float(void **state) {
    (void)state;
    enum { K = 3000 };
    rill_half *a = dev_halves(K), *b = dev_halves(K), *c = dev_halves(1);
    RT_OK(rill_op_fill_f16(NULL, a, 1.0f, K));
    RT_OK(rill_op_fill_f16(NULL, b, 1.0f, K));
    RT_OK(rill_op_matmul_f16(NULL, c, a, b, 1, K, 1));
    rill_half got;
    RT_OK(rill_memcpy(&got, c, sizeof got));
    assert_int_equal(got, rill__half_from_float(3000.0f));
    RT_OK(rill_op_sum_f16(NULL, c, a, K));
    RT_OK(rill_memcpy(&got, c, sizeof got));
    assert_int_equal(got, rill__half_from_float(3000.0f));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
}

/* ---- conv2d ---- */

static void check_conv2d(size_t n, size_t c, size_t h, size_t w, size_t k, size_t r, size_t s) {
    size_t oh = h - r + 1, ow = w - s + 1;
    rill_half *hin, *hw;
    rill_half *in = dev_random(n * c * h * w, (uint32_t)(n + c * 7 + h), 1.0f, &hin);
    rill_half *weight = dev_random(k * c * r * s, (uint32_t)(k * 13 + r), 0.5f, &hw);
    rill_half *out = dev_halves(n * k * oh * ow);
    RT_OK(rill_op_conv2d_f16(NULL, out, in, weight, n, c, h, w, k, r, s));
    rill_half *got = download(out, n * k * oh * ow);
    for (size_t img = 0; img < n; img++)
        for (size_t f = 0; f < k; f++)
            for (size_t y = 0; y < oh; y++)
                for (size_t x = 0; x < ow; x++) {
                    double want = 0.0, abs_sum = 0.0;
                    for (size_t ci = 0; ci < c; ci++)
                        for (size_t ri = 0; ri < r; ri++)
                            for (size_t si = 0; si < s; si++) {
                                double p = value(hin[((img * c + ci) * h + y + ri) * w + x + si]) *
                                           value(hw[((f * c + ci) * r + ri) * s + si]);
                                want += p;
                                abs_sum += fabs(p);
                            }
                    size_t i = ((img * k + f) * oh + y) * ow + x;
                    expect_rounded("out", i, got[i], want, (double)(c * r * s + 2) * U32 * abs_sum);
                }
    free(got);
    free(hin);
    free(hw);
    RT_OK(rill_free(in));
    RT_OK(rill_free(weight));
    RT_OK(rill_free(out));
}

/* rill.h: conv2d on halves has the f32 op's arguments ("NCHW input
 * [n,c,h,w], weight [k,c,r,s], stride 1, no padding"), computed in float32
 * and rounded once — the f32 op's test shapes. */
static void test_conv2d_f16_matches_double_reference(void **state) {
    (void)state;
    check_conv2d(1, 1, 1, 1, 1, 1, 1);
    check_conv2d(2, 3, 7, 9, 5, 3, 2);
    check_conv2d(3, 2, 5, 5, 4, 5, 5); /* the filter covers the whole input */
    check_conv2d(2, 4, 6, 5, 3, 1, 1); /* 1x1 */
    check_conv2d(1, 3, 41, 37, 2, 2, 3);
    check_conv2d(1, 16, 64, 64, 16, 3, 3); /* one image cut into bands */
    check_conv2d(4, 64, 32, 32, 64, 1, 1); /* 1x1 over several blocks */
}

/* ---- bad arguments ---- */

/* rill.h: "the arguments, shapes, checks and declared accesses of their
 * f32 twins" — each rejected with RILL_ERROR_INVALID_ARGUMENT and a
 * sentence naming the function and the argument, and nothing written. */
static void test_f16_sum_matmul_conv2d_reject_bad_arguments(void **state) {
    (void)state;
    rill_half *p = dev_halves(64);
    rill_half *q = dev_halves(64);
    rill_half *o = dev_halves(64);
    RT_OK(rill_op_fill_f16(NULL, o, 5.0f, 64));

    expect_invalid(rill_op_sum_f16(NULL, NULL, p, 8), "rill_op_sum_f16: out is NULL");
    expect_invalid(rill_op_sum_f16(NULL, o, NULL, 8), "rill_op_sum_f16: a is NULL");
    expect_invalid(rill_op_sum_f16(NULL, o, p, 0), "rill_op_sum_f16: n is 0");
    expect_invalid(rill_op_sum_f16(NULL, o, p, 65), "n halves");

    expect_invalid(rill_op_matmul_f16(NULL, NULL, p, q, 2, 2, 2), "rill_op_matmul_f16: c is NULL");
    expect_invalid(rill_op_matmul_f16(NULL, o, NULL, q, 2, 2, 2), "rill_op_matmul_f16: a is NULL");
    expect_invalid(rill_op_matmul_f16(NULL, o, p, NULL, 2, 2, 2), "rill_op_matmul_f16: b is NULL");
    expect_invalid(rill_op_matmul_f16(NULL, o, p, q, 0, 2, 2), "rill_op_matmul_f16: m is 0");
    expect_invalid(rill_op_matmul_f16(NULL, o, p, q, 2, 0, 2), "rill_op_matmul_f16: k is 0");
    expect_invalid(rill_op_matmul_f16(NULL, o, p, q, 2, 2, 0), "rill_op_matmul_f16: n is 0");
    expect_invalid(rill_op_matmul_f16(NULL, o, p, q, 8, 9, 1), "m*k halves"); /* a: 72 of 64 */
    expect_invalid(rill_op_matmul_f16(NULL, o, p, q, 1, 9, 8), "k*n halves");
    expect_invalid(rill_op_matmul_f16(NULL, o, p, q, 9, 1, 8), "m*n halves");
    expect_invalid(rill_op_matmul_f16(NULL, p + 2, p, q, 2, 2, 2), "c overlaps a");
    expect_invalid(rill_op_matmul_f16(NULL, q, p, q + 3, 2, 2, 2), "c overlaps b");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED,
              rill_op_matmul_f16(NULL, o, p, q, (size_t)INT_MAX + 1, 1, 1));

    expect_invalid(rill_op_conv2d_f16(NULL, NULL, p, q, 1, 1, 2, 2, 1, 1, 1),
                   "rill_op_conv2d_f16: out is NULL");
    expect_invalid(rill_op_conv2d_f16(NULL, o, NULL, q, 1, 1, 2, 2, 1, 1, 1),
                   "rill_op_conv2d_f16: in is NULL");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, NULL, 1, 1, 2, 2, 1, 1, 1),
                   "rill_op_conv2d_f16: weight is NULL");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, q, 1, 0, 2, 2, 1, 1, 1),
                   "rill_op_conv2d_f16: c is 0");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, q, 1, 1, 2, 2, 1, 3, 1), "filter height r");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, q, 1, 1, 2, 2, 1, 1, 3), "filter width sz");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, q, 1, 1, 9, 8, 1, 1, 1), "n*c*h*w halves");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, q, 1, 1, 8, 8, 2, 6, 6), "k*c*r*sz halves");
    expect_invalid(rill_op_conv2d_f16(NULL, o, p, q, 1, 1, 8, 8, 2, 1, 1),
                   "n*k*(h-r+1)*(w-sz+1) halves");
    expect_invalid(rill_op_conv2d_f16(NULL, p + 1, p, q, 1, 1, 4, 4, 1, 1, 1), "out overlaps in");
    expect_invalid(rill_op_conv2d_f16(NULL, q + 1, p, q, 1, 1, 4, 4, 1, 2, 2),
                   "out overlaps weight");

    /* None of the rejected calls wrote o. */
    rill_half *got = download(o, 64);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(got[i], rill__half_from_float(5.0f));
    free(got);
    RT_OK(rill_free(p));
    RT_OK(rill_free(q));
    RT_OK(rill_free(o));
}

/* The f16 ops check their stream as the f32 ops do: a pointer that is not
 * a stream is RILL_ERROR_INVALID_ARGUMENT. */
static void test_f16_ops_reject_a_bad_stream_handle(void **state) {
    (void)state;
    static alignas(64) unsigned char not_a_stream[1024];
    rill_half *p = dev_halves(16);
    rill_stream *s = (rill_stream *)(void *)not_a_stream;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_op_sum_f16(s, p, p + 1, 4));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_op_matmul_f16(s, p, p + 4, p + 8, 2, 2, 2));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_op_conv2d_f16(s, p, p + 4, p + 8, 1, 1, 2, 2, 1, 1, 1));
    RT_OK(rill_free(p));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_f16_matches_double_reference),
        cmocka_unit_test(test_matmul_f16_matches_double_reference),
        cmocka_unit_test(test_f16_products_and_sums_accumulate_in_float),
        cmocka_unit_test(test_conv2d_f16_matches_double_reference),
        cmocka_unit_test(test_f16_sum_matmul_conv2d_reject_bad_arguments),
        cmocka_unit_test(test_f16_ops_reject_a_bad_stream_handle),
    };
    return RT_RUN(tests);
}
