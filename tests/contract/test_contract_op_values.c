/* SPDX-License-Identifier: MIT */
/* The values of the maps, softmaxes and sums along a dimension on the
 * device under test (contract.h) where they are easy to get wrong: the
 * special values (infinities, NaN, overflow, underflow, rows of -inf),
 * long rows against double precision, and the same bits for an element
 * or a row wherever it sits in a launch, so that no split of the work
 * changes a result. */
#include "contract.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Pseudo-random values in [-lim, lim), a pure function of i. */
static float spread(size_t i, float lim) {
    uint32_t h = (uint32_t)i * 2654435761u;
    h ^= h >> 15;
    return ((float)(h % 100000u) / 50000.0f - 1.0f) * lim;
}

static bool same_bits(float x, float y) {
    return memcmp(&x, &y, sizeof x) == 0;
}

/* "exp x", "tanh x", "1 / (1 + exp(-x))": at the infinities, NaN, past
 * overflow and underflow, the C library's values. */
static void test_maps_special_values_are_the_c_librarys(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    static const float xs[] = {-INFINITY, INFINITY, NAN,    0.0f,     -0.0f,   88.7228394f, 89.0f,
                               1e30f,     -104.0f,  -1e30f, -FLT_MAX, FLT_MAX, -103.0f,     -90.0f};
    enum { N = sizeof xs / sizeof xs[0] };
    static const rill_map_op ops[] = {RILL_MAP_EXP, RILL_MAP_TANH, RILL_MAP_SIGMOID, RILL_MAP_SILU,
                                      RILL_MAP_GELU_TANH};
    float got[N];
    float *a = contract_floats(s, xs, N), *out = contract_floats(s, NULL, N);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        RT_OK(rill_op_map_f32(s, ops[k], out, a, 0.0f, N));
        contract_download(s, got, out, sizeof got);
        for (size_t i = 0; i < N; i++) {
            double x = xs[i], want;
            switch (ops[k]) {
            case RILL_MAP_EXP:
                want = expf(xs[i]);
                break;
            case RILL_MAP_TANH:
                want = tanhf(xs[i]);
                break;
            case RILL_MAP_SIGMOID:
                want = 1.0f / (1.0f + expf(-xs[i]));
                break;
            case RILL_MAP_SILU:
                want = xs[i] * (1.0f / (1.0f + expf(-xs[i])));
                break;
            default:
                want = (float)(0.5 * x *
                               (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
                break;
            }
            if (isnan(want) || isinf(want) || want == 0.0) {
                if (!(isnan(want) ? isnan(got[i]) : got[i] == (float)want))
                    fail_msg("map %d of %a = %a, want %a", (int)ops[k], x, (double)got[i], want);
            } else {
                contract_expect_close("map", i, got[i], want, 1e-6);
            }
        }
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* Each element's result is a function of that element alone: the maps of
 * a[k..n) give, bit for bit, what those of a[0..n) gave at the same
 * elements, whatever vector lane or loop end each falls in. */
static void test_maps_give_the_same_bits_at_any_offset(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { N = 1031 };
    float h[N], whole[N], part[N];
    for (size_t i = 0; i < N; i++)
        h[i] = spread(i, 20.0f);
    float *a = contract_floats(s, h, N), *out = contract_floats(s, NULL, N);
    for (int op = RILL_MAP_NEG; op <= RILL_MAP_ABS; op++) {
        float alpha = op == RILL_MAP_POW ? 2.0f : 0.75f;
        RT_OK(rill_op_map_f32(s, (rill_map_op)op, out, a, alpha, N));
        contract_download(s, whole, out, sizeof whole);
        for (size_t k = 1; k < 9; k++) {
            RT_OK(rill_op_map_f32(s, (rill_map_op)op, out, a + k, alpha, N - k));
            contract_download(s, part, out, (N - k) * sizeof(float));
            for (size_t i = k; i < N; i++)
                if (!same_bits(part[i - k], whole[i]))
                    fail_msg("map %d of %a: %a at offset %zu, %a at 0", op, (double)h[i],
                             (double)part[i - k], k, (double)whole[i]);
        }
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* softmax (log_softmax when is_log) of rows of d values, contiguous
 * (inner 1), into got. */
static void softmax_rows(rill_stream *s, bool is_log, const float *h, float *got, size_t rows,
                         size_t d) {
    float *a = contract_floats(s, h, rows * d), *out = contract_floats(s, NULL, rows * d);
    if (is_log)
        RT_OK(rill_op_log_softmax_f32(s, out, a, rows, d, 1));
    else
        RT_OK(rill_op_softmax_f32(s, out, a, rows, d, 1));
    contract_download(s, got, out, rows * d * sizeof *got);
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
}

/* "As PyTorch's, a row holding a NaN or +inf, or only -inf, gives NaNs,
 * and -inf among numbers gives 0 (log_softmax -inf)"; a row of one
 * number repeated gives 1/d (log_softmax -log d), however large. */
static void test_softmax_special_rows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { ROWS = 6, D = 11 };
    float h[ROWS * D], got[ROWS * D];
    for (size_t i = 0; i < ROWS * D; i++)
        h[i] = spread(i, 3.0f);
    for (size_t d = 0; d < D; d++)
        h[0 * D + d] = -INFINITY;
    h[1 * D + 7] = NAN;
    h[2 * D + 3] = INFINITY;
    h[3 * D + 0] = -INFINITY;
    h[3 * D + 9] = -INFINITY;
    for (size_t d = 0; d < D; d++)
        h[4 * D + d] = 3e38f;
    h[5 * D + 2] = -FLT_MAX;
    for (int is_log = 0; is_log < 2; is_log++) {
        softmax_rows(s, is_log, h, got, ROWS, D);
        for (size_t row = 0; row < 3; row++)
            for (size_t d = 0; d < D; d++)
                if (!isnan(got[row * D + d]))
                    fail_msg("softmax row %zu [%zu] = %a, want NaN", row, d,
                             (double)got[row * D + d]);
        float at_minus_inf = is_log ? -INFINITY : 0.0f;
        assert_true(got[3 * D + 0] == at_minus_inf && got[3 * D + 9] == at_minus_inf);
        double sum = 0.0, m = -INFINITY;
        for (size_t d = 0; d < D; d++)
            m = fmax(m, h[3 * D + d]);
        for (size_t d = 0; d < D; d++)
            sum += exp(h[3 * D + d] - m);
        for (size_t d = 1; d < D; d++) {
            if (d == 9)
                continue;
            double z = h[3 * D + d] - m;
            contract_expect_close("row 3", d, got[3 * D + d], is_log ? z - log(sum) : exp(z) / sum,
                                  1e-6);
        }
        for (size_t d = 0; d < D; d++)
            contract_expect_close("row 4", d, got[4 * D + d], is_log ? -log((double)D) : 1.0 / D,
                                  1e-6);
        /* -FLT_MAX among small numbers: exp underflows to 0; its log
         * is about -FLT_MAX, still a number. */
        if (is_log)
            assert_true(isfinite(got[5 * D + 2]) && got[5 * D + 2] < -3e38f);
        else
            assert_true(got[5 * D + 2] == 0.0f);
    }
    RT_OK(rill_stream_destroy(s));
}

/* Long rows (past any vector width or chunk, with remainders) against
 * the formula in double precision; softmax's rows sum to 1. */
static void test_softmax_long_rows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    static const size_t dims[] = {1, 7, 64, 257, 1000, 4099};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        size_t d = dims[t], rows = 3;
        float *h = malloc(rows * d * sizeof *h), *got = malloc(rows * d * sizeof *got);
        for (size_t i = 0; i < rows * d; i++)
            h[i] = spread(i + t, 30.0f);
        for (int is_log = 0; is_log < 2; is_log++) {
            softmax_rows(s, is_log, h, got, rows, d);
            for (size_t r = 0; r < rows; r++) {
                const float *x = h + r * d;
                double m = -INFINITY, sum = 0.0, row = 0.0;
                for (size_t e = 0; e < d; e++)
                    m = fmax(m, x[e]);
                for (size_t e = 0; e < d; e++)
                    sum += exp(x[e] - m);
                for (size_t e = 0; e < d; e++) {
                    double z = x[e] - m;
                    double want = is_log ? z - log(sum) : exp(z) / sum;
                    contract_expect_close("softmax", r * d + e, got[r * d + e], want, 1e-5);
                    row += got[r * d + e];
                }
                if (!is_log)
                    contract_expect_close("row sum", r, row, 1.0, 1e-5);
            }
        }
        free(h);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* A row's result depends on that row alone: softmax along the last
 * dimension of rows 1.. of a tensor equals, bit for bit, the softmax of
 * those rows in a tensor without row 0; along a middle dimension, column
 * j of [1, d, w] equals column j + 1 of [1, d, w + 1] with one more
 * column in front. */
static void test_softmax_gives_the_same_bits_wherever_a_row_sits(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { ROWS = 37, D = 19, W = 150 };
    float *h = malloc(ROWS * D * sizeof *h), *whole = malloc(ROWS * D * sizeof *whole);
    float *part = malloc(ROWS * D * sizeof *part);
    for (size_t i = 0; i < ROWS * D; i++)
        h[i] = spread(i, 10.0f);
    for (int is_log = 0; is_log < 2; is_log++) {
        softmax_rows(s, is_log, h, whole, ROWS, D);
        softmax_rows(s, is_log, h + D, part, ROWS - 1, D);
        for (size_t i = D; i < ROWS * D; i++)
            if (!same_bits(part[i - D], whole[i]))
                fail_msg("softmax of row %zu: %a, %a a row earlier", i / D, (double)whole[i],
                         (double)part[i - D]);
    }
    /* Columns: [1, D, W + 1] and its columns 1.. as [1, D, W]. */
    float *wide = malloc(D * (W + 1) * sizeof *wide), *narrow = malloc(D * W * sizeof *narrow);
    float *got_wide = malloc(D * (W + 1) * sizeof *got_wide);
    float *got_narrow = malloc(D * W * sizeof *got_narrow);
    for (size_t d = 0; d < D; d++)
        for (size_t j = 0; j <= W; j++) {
            wide[d * (W + 1) + j] = spread(d * 1000 + j, 10.0f);
            if (j > 0)
                narrow[d * W + j - 1] = wide[d * (W + 1) + j];
        }
    float *a = contract_floats(s, wide, D * (W + 1)), *b = contract_floats(s, narrow, D * W);
    float *out_a = contract_floats(s, NULL, D * (W + 1)), *out_b = contract_floats(s, NULL, D * W);
    for (int is_log = 0; is_log < 2; is_log++) {
        if (is_log) {
            RT_OK(rill_op_log_softmax_f32(s, out_a, a, 1, D, W + 1));
            RT_OK(rill_op_log_softmax_f32(s, out_b, b, 1, D, W));
        } else {
            RT_OK(rill_op_softmax_f32(s, out_a, a, 1, D, W + 1));
            RT_OK(rill_op_softmax_f32(s, out_b, b, 1, D, W));
        }
        contract_download(s, got_wide, out_a, D * (W + 1) * sizeof(float));
        contract_download(s, got_narrow, out_b, D * W * sizeof(float));
        for (size_t d = 0; d < D; d++)
            for (size_t j = 0; j < W; j++)
                if (!same_bits(got_narrow[d * W + j], got_wide[d * (W + 1) + j + 1]))
                    fail_msg("softmax of column %zu [%zu]: %a, %a one column later", j, d,
                             (double)got_narrow[d * W + j], (double)got_wide[d * (W + 1) + j + 1]);
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out_a));
    RT_OK(rill_free(out_b));
    free(h);
    free(whole);
    free(part);
    free(wide);
    free(narrow);
    free(got_wide);
    free(got_narrow);
    RT_OK(rill_stream_destroy(s));
}

/* The sum and mean along the last dimension of long rows, and along a
 * middle one of many columns, against double precision: values that
 * cancel, so that a float accumulator would be far off. */
static void test_sums_along_a_dimension_keep_double_precision(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t shapes[3][3] = {{4, 5003, 1}, {3, 257, 131}, {2, 2, 1}};
    for (int t = 0; t < 3; t++) {
        size_t outer = shapes[t][0], dim = shapes[t][1], inner = shapes[t][2];
        size_t total = outer * dim * inner, outs = outer * inner;
        float *h = malloc(total * sizeof *h), *got = malloc(outs * sizeof *got);
        for (size_t i = 0; i < total; i++)
            h[i] = (i % 2 ? 1e7f : -1e7f) + spread(i, 1.0f);
        float *a = contract_floats(s, h, total), *out = contract_floats(s, NULL, outs);
        for (int op = RILL_REDUCE_DIM_SUM; op <= RILL_REDUCE_DIM_MEAN; op++) {
            RT_OK(
                rill_op_reduce_dim_f32(s, (rill_reduce_dim_op)op, out, NULL, a, outer, dim, inner));
            contract_download(s, got, out, outs * sizeof *got);
            for (size_t o = 0; o < outer; o++)
                for (size_t i = 0; i < inner; i++) {
                    double sum = 0.0;
                    for (size_t d = 0; d < dim; d++)
                        sum += h[(o * dim + d) * inner + i];
                    double want = op == RILL_REDUCE_DIM_MEAN ? sum / (double)dim : sum;
                    contract_expect_close("sum", o * inner + i, got[o * inner + i], (float)want,
                                          1e-6);
                }
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        free(h);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_special_values_are_the_c_librarys),
        cmocka_unit_test(test_maps_give_the_same_bits_at_any_offset),
        cmocka_unit_test(test_softmax_special_rows),
        cmocka_unit_test(test_softmax_long_rows),
        cmocka_unit_test(test_softmax_gives_the_same_bits_wherever_a_row_sits),
        cmocka_unit_test(test_sums_along_a_dimension_keep_double_precision),
    };
    return CONTRACT_RUN(tests);
}
