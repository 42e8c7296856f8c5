/* SPDX-License-Identifier: MIT */
/* The tensor ops on the device under test (contract.h): strided copies,
 * broadcasting binary ops, maps, dropout's masked scale, reductions and
 * softmax along a dimension, conv2d with strides and padding, pooling and
 * embeddings, each against a result computed here on the host; and their
 * refusals, each with its sentence. */
#include "contract.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float value_at(size_t i) {
    return (float)((i * 37) % 23) * 0.25f - 2.5f;
}

static float *host_values(size_t n) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = value_at(i);
    return h;
}

/* "out at i = in at i for every index i of shape": a transpose gathered
 * into contiguous memory, then scattered into a column band of a wider
 * matrix (cat along the last dimension). */
static void test_copy_strided_transposes_and_scatters(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t rows = 37, cols = 300;
    float *h = host_values(rows * cols);
    float *a = contract_floats(s, h, rows * cols), *t = contract_floats(s, NULL, rows * cols);
    float *wide = contract_floats(s, NULL, cols * (rows + 5));
    size_t shape[2] = {cols, rows}, in_strides[2] = {1, cols}, out_strides[2] = {rows, 1};
    RT_OK(rill_op_copy_strided_f32(s, t, out_strides, a, in_strides, shape, 2));
    size_t wide_strides[2] = {rows + 5, 1};
    RT_OK(rill_op_copy_strided_f32(s, wide + 5, wide_strides, t, out_strides, shape, 2));
    float *got = malloc(cols * (rows + 5) * sizeof *got);
    contract_download(s, got, t, rows * cols * sizeof *got);
    for (size_t j = 0; j < cols; j++)
        for (size_t i = 0; i < rows; i++)
            assert_true(got[j * rows + i] == h[i * cols + j]);
    contract_download(s, got, wide, cols * (rows + 5) * sizeof *got);
    for (size_t j = 0; j < cols; j++)
        for (size_t i = 0; i < rows; i++)
            assert_true(got[j * (rows + 5) + 5 + i] == h[i * cols + j]);
    RT_OK(rill_free(a));
    RT_OK(rill_free(t));
    RT_OK(rill_free(wide));
    free(h);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

static float host_binary(rill_binary_op op, float x, float y) {
    switch (op) {
    case RILL_BINARY_ADD:
        return x + y;
    case RILL_BINARY_SUB:
        return x - y;
    case RILL_BINARY_MUL:
        return x * y;
    case RILL_BINARY_DIV:
        return x / y;
    case RILL_BINARY_MAX:
        return x > y ? x : y;
    case RILL_BINARY_MIN:
        return x < y ? x : y;
    case RILL_BINARY_POW:
        return powf(x, y);
    case RILL_BINARY_RELU_BACKWARD:
        return y <= 0.0f ? 0.0f : x;
    case RILL_BINARY_GELU_BACKWARD: {
        double cdf = 0.5 * (1.0 + erf(y / sqrt(2.0)));
        double pdf = exp(-0.5 * (double)y * y) / sqrt(2.0 * M_PI);
        return (float)(x * (cdf + y * pdf));
    }
    case RILL_BINARY_GELU_TANH_BACKWARD: {
        double k = sqrt(2.0 / M_PI), t = tanh(k * (y + 0.044715 * (double)y * y * y));
        double d = 0.5 * (1.0 + t) + 0.5 * y * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * y * y);
        return (float)(x * d);
    }
    }
    return NAN;
}

/* "with strides 0 this is broadcasting": a [n, 1, k] with b [1, m, k]
 * into [n, m, k], for every op, over sizes of one block and several. */
static void test_binary_broadcasts(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t dims[2][3] = {{3, 4, 5}, {64, 96, 33}};
    for (int t = 0; t < 2; t++) {
        size_t n = dims[t][0], m = dims[t][1], k = dims[t][2], total = n * m * k;
        float *ha = host_values(n * k), *hb = malloc(m * k * sizeof *hb);
        for (size_t i = 0; i < m * k; i++)
            hb[i] = (float)(i % 7) * 0.5f + 0.25f;
        float *a = contract_floats(s, ha, n * k), *b = contract_floats(s, hb, m * k),
              *out = contract_floats(s, NULL, total);
        float *got = malloc(total * sizeof *got);
        size_t shape[3] = {n, m, k}, as[3] = {k, 0, 1}, bs[3] = {0, k, 1};
        for (int op = RILL_BINARY_ADD; op <= RILL_BINARY_GELU_TANH_BACKWARD; op++) {
            RT_OK(rill_op_binary_f32(s, (rill_binary_op)op, out, a, as, b, bs, shape, 3));
            contract_download(s, got, out, total * sizeof *got);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < m; j++)
                    for (size_t q = 0; q < k; q++) {
                        size_t at = (i * m + j) * k + q;
                        float want = host_binary((rill_binary_op)op, ha[i * k + q], hb[j * k + q]);
                        contract_expect_close("out", at, got[at], want, 1e-6);
                    }
        }
        /* In place: out == a with a's contiguous strides. */
        size_t cs[3] = {m * k, k, 1};
        RT_OK(rill_op_binary_f32(s, RILL_BINARY_SUB, out, out, cs, b, bs, shape, 3));
        contract_download(s, got, out, total * sizeof *got);
        for (size_t i = 0; i < n * m * k; i++) {
            size_t j = (i / k) % m, q = i % k;
            /* out held the last op's result. */
            float want = host_binary(RILL_BINARY_GELU_TANH_BACKWARD, ha[(i / (m * k)) * k + q],
                                     hb[j * k + q]) -
                         hb[j * k + q];
            contract_expect_close("in place", i, got[i], want, 1e-5);
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(out));
        free(ha);
        free(hb);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

static float host_map(rill_map_op op, float x, float alpha) {
    switch (op) {
    case RILL_MAP_NEG:
        return -x;
    case RILL_MAP_SCALE:
        return x * alpha;
    case RILL_MAP_DIV:
        return x / alpha;
    case RILL_MAP_RDIV:
        return alpha / x;
    case RILL_MAP_RSUB:
        return alpha - x;
    case RILL_MAP_POW:
        return powf(x, alpha);
    case RILL_MAP_MAX:
        return x > alpha ? x : alpha;
    case RILL_MAP_MIN:
        return x < alpha ? x : alpha;
    case RILL_MAP_RELU:
        return x > 0 ? x : 0;
    case RILL_MAP_LEAKY_RELU:
        return x > 0 ? x : x * alpha;
    case RILL_MAP_GELU:
        return (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0))));
    case RILL_MAP_GELU_TANH:
        return (float)(0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))));
    case RILL_MAP_SIGMOID:
        return (float)(1.0 / (1.0 + exp(-x)));
    case RILL_MAP_TANH:
        return (float)tanh(x);
    case RILL_MAP_SILU:
        return (float)(x / (1.0 + exp(-x)));
    case RILL_MAP_EXP:
        return (float)exp(x);
    case RILL_MAP_LOG:
        return (float)log(x);
    case RILL_MAP_SQRT:
        return (float)sqrt(x);
    case RILL_MAP_ABS:
        return fabsf(x);
    }
    return NAN;
}

/* Every map against the double-precision formula, within float rounding;
 * in place (out == a) as well. */
static void test_map_ops(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t n = 70001;
    float *h = host_values(n), *got = malloc(n * sizeof *got);
    float *a = contract_floats(s, h, n), *out = contract_floats(s, NULL, n);
    for (int op = RILL_MAP_NEG; op <= RILL_MAP_ABS; op++) {
        float alpha = op == RILL_MAP_POW ? 2.0f : 0.75f;
        bool positive = op == RILL_MAP_LOG || op == RILL_MAP_SQRT || op == RILL_MAP_POW;
        RT_OK(rill_op_map_f32(s, RILL_MAP_ABS, out, a, 0.0f, n));
        RT_OK(rill_op_map_f32(s, (rill_map_op)op, out, positive ? out : a, alpha, n));
        contract_download(s, got, out, n * sizeof *got);
        for (size_t i = 0; i < n; i++) {
            float x = positive ? fabsf(h[i]) : h[i];
            if ((op == RILL_MAP_RDIV || op == RILL_MAP_LOG) && x == 0.0f)
                continue;
            contract_expect_close("map", i, got[i], host_map((rill_map_op)op, x, alpha), 1e-5);
        }
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    free(h);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* rill.h's NaN rules: relu is "max(x, 0); NaN stays NaN", RILL_MAP_MAX
 * "max(x, alpha): clamp from below; NaN stays NaN" (MIN alike), and the
 * binary ops' "the larger; NaN when either is NaN" (MIN alike). */
static float nan_rule(bool is_max, float x, float y) {
    if (isnan(x) || isnan(y))
        return NAN;
    return is_max ? (x > y ? x : y) : (x < y ? x : y);
}

/* The NaN rules of relu, the maps' max and min and the binary max and
 * min, with NaNs among the elements (a length that is no multiple of a
 * vector's width), and for the binary ops with both inputs along the
 * run, b broadcast (a NaN and a number) and a broadcast. */
static void test_nan_rules_of_maps_and_binary_ops(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t n = 1003;
    float *ha = host_values(n), *hb = malloc(n * sizeof *hb), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) {
        hb[i] = value_at(n - i);
        if (i % 7 == 3)
            ha[i] = NAN;
        if (i % 11 == 5)
            hb[i] = NAN;
    }
    float *a = contract_floats(s, ha, n), *b = contract_floats(s, hb, n),
          *out = contract_floats(s, NULL, n);
    const rill_map_op maps[3] = {RILL_MAP_RELU, RILL_MAP_MAX, RILL_MAP_MIN};
    for (int m = 0; m < 3; m++) {
        float alpha = maps[m] == RILL_MAP_RELU ? 0.0f : 0.5f;
        RT_OK(rill_op_map_f32(s, maps[m], out, a, alpha, n));
        contract_download(s, got, out, n * sizeof *got);
        for (size_t i = 0; i < n; i++)
            contract_expect_close("map", i, got[i], nan_rule(maps[m] != RILL_MAP_MIN, ha[i], alpha),
                                  0.0);
    }
    size_t shape[1] = {n}, along[1] = {1}, broadcast[1] = {0};
    for (int is_max = 0; is_max < 2; is_max++) {
        rill_binary_op op = is_max ? RILL_BINARY_MAX : RILL_BINARY_MIN;
        /* layout 0: both along; 1, 2: b broadcast (hb[5] NaN, hb[0] not); 3: a broadcast (NaN) */
        for (int layout = 0; layout < 4; layout++) {
            size_t bi = layout == 1 ? 5 : 0;
            const float *bp = layout == 1 || layout == 2 ? b + bi : b;
            const float *ap = layout == 3 ? a + 3 : a;
            RT_OK(rill_op_binary_f32(s, op, out, ap, layout == 3 ? broadcast : along, bp,
                                     layout == 1 || layout == 2 ? broadcast : along, shape, 1));
            contract_download(s, got, out, n * sizeof *got);
            for (size_t i = 0; i < n; i++) {
                float x = layout == 3 ? ha[3] : ha[i];
                float y = layout == 1 || layout == 2 ? hb[bi] : hb[i];
                contract_expect_close("binary", i, got[i], nan_rule(is_max, x, y), 0.0);
            }
        }
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out));
    free(ha);
    free(hb);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* "out[o, i] = op over d < dim of a[o, d, i]", with the positions of max
 * and min, for a middle dimension (inner > 1) and the last (inner 1). */
static void test_reduce_dim(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t shapes[2][3] = {{5, 17, 9}, {300, 129, 1}};
    for (int t = 0; t < 2; t++) {
        size_t outer = shapes[t][0], dim = shapes[t][1], inner = shapes[t][2];
        size_t total = outer * dim * inner, outs = outer * inner;
        float *h = host_values(total), *got = malloc(outs * sizeof *got);
        int64_t *idx = malloc(outs * sizeof *idx), *didx = NULL;
        float *a = contract_floats(s, h, total), *out = contract_floats(s, NULL, outs);
        RT_OK(rill_malloc_async(outs * sizeof *didx, s, (void **)&didx));
        for (int op = RILL_REDUCE_DIM_SUM; op <= RILL_REDUCE_DIM_MIN; op++) {
            bool positional = op == RILL_REDUCE_DIM_MAX || op == RILL_REDUCE_DIM_MIN;
            RT_OK(rill_op_reduce_dim_f32(s, (rill_reduce_dim_op)op, out, positional ? didx : NULL,
                                         a, outer, dim, inner));
            contract_download(s, got, out, outs * sizeof *got);
            if (positional)
                contract_download(s, idx, didx, outs * sizeof *idx);
            for (size_t o = 0; o < outer; o++)
                for (size_t i = 0; i < inner; i++) {
                    double sum = 0;
                    float best = h[o * dim * inner + i];
                    int64_t at = 0;
                    for (size_t d = 0; d < dim; d++) {
                        float v = h[(o * dim + d) * inner + i];
                        sum += v;
                        if (op == RILL_REDUCE_DIM_MAX ? v > best : v < best) {
                            best = v;
                            at = (int64_t)d;
                        }
                    }
                    double want = op == RILL_REDUCE_DIM_SUM    ? sum
                                  : op == RILL_REDUCE_DIM_MEAN ? sum / (double)dim
                                                               : best;
                    contract_expect_close("reduce", o * inner + i, got[o * inner + i], want, 1e-6);
                    if (positional)
                        assert_int_equal(idx[o * inner + i], at);
                }
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        RT_OK(rill_free(didx));
        free(h);
        free(got);
        free(idx);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "RILL_REDUCE_DIM_MAX: the largest; NaN when any is NaN" (and MIN) along
 * the last dimension without positions: rows of 1, 7, 8 and 129 values,
 * with a NaN first, inside, or in the tail past the last 8, and with
 * infinities. */
static void test_reduce_dim_extremes_of_rows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t dims[] = {1, 7, 8, 129};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        size_t dim = dims[t], outer = 6, total = outer * dim;
        float *h = host_values(total), got[6];
        for (size_t d = 0; d < dim; d++) /* row 1: infinities */
            h[dim + d] = d % 2 ? INFINITY : -INFINITY;
        h[2 * dim] = NAN;                       /* row 2: first */
        h[3 * dim + dim / 2] = NAN;             /* row 3: inside */
        h[4 * dim + dim - 1] = NAN;             /* row 4: last (the tail when dim % 8) */
        h[5 * dim + (dim > 3 ? 3 : 0)] = -0.0f; /* row 5: an ordinary row */
        float *a = contract_floats(s, h, total), *out = contract_floats(s, NULL, outer);
        for (int op = RILL_REDUCE_DIM_MAX; op <= RILL_REDUCE_DIM_MIN; op++) {
            RT_OK(rill_op_reduce_dim_f32(s, (rill_reduce_dim_op)op, out, NULL, a, outer, dim, 1));
            contract_download(s, got, out, sizeof got);
            for (size_t o = 0; o < outer; o++) {
                float want = h[o * dim];
                for (size_t d = 0; d < dim; d++) {
                    float v = h[o * dim + d];
                    if (isnan(v) ||
                        (!isnan(want) && (op == RILL_REDUCE_DIM_MAX ? v > want : v < want)))
                        want = v;
                }
                bool same = isnan(want) ? isnan(got[o]) : got[o] == want;
                if (!same)
                    fail_msg("%s of row %zu of %zu values is %g, want %g",
                             op == RILL_REDUCE_DIM_MAX ? "max" : "min", o, dim, (double)got[o],
                             (double)want);
            }
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        free(h);
    }
    RT_OK(rill_stream_destroy(s));
}

/* log_softmax is (a - m) - log(sum) with m the row's maximum, as rill.h
 * says: a row of two equal values gives -log 2 at every magnitude, and a
 * row of large, close values its differences to the maximum exactly
 * (adding m back first rounds the result to m's precision). */
static void test_log_softmax_keeps_precision(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    static const float xs[] = {0.0f, 1.0f, -7.5f, 1e3f, 1e5f, -1e5f, 1e8f, -1e8f, 3e38f};
    size_t rows = sizeof xs / sizeof xs[0];
    float h[2 * (sizeof xs / sizeof xs[0])], got[2 * (sizeof xs / sizeof xs[0])];
    for (size_t r = 0; r < rows; r++)
        h[2 * r] = h[2 * r + 1] = xs[r];
    float *a = contract_floats(s, h, 2 * rows), *out = contract_floats(s, NULL, 2 * rows);
    RT_OK(rill_op_log_softmax_f32(s, out, a, rows, 2, 1));
    contract_download(s, got, out, sizeof got);
    for (size_t i = 0; i < 2 * rows; i++)
        if (got[i] != -0.6931472f)
            fail_msg("log_softmax([%g, %g])[%zu] = %.9g, want -0.6931472", (double)xs[i / 2],
                     (double)xs[i / 2], i % 2, (double)got[i]);
    /* A mixed row near 1e5 (float spacing 1/128 there): each result is the
     * exact difference minus log(sum), to float's precision of that. */
    float mixed[4] = {1e5f, 1e5f - 1.0f, 1e5f - 3.5f, 1e5f + 0.5f};
    float *b = contract_floats(s, mixed, 4), mixed_got[4];
    RT_OK(rill_op_log_softmax_f32(s, b, b, 1, 4, 1));
    contract_download(s, mixed_got, b, sizeof mixed_got);
    double sum = 0;
    for (int d = 0; d < 4; d++)
        sum += exp((double)mixed[d] - (double)mixed[3]);
    for (size_t d = 0; d < 4; d++)
        contract_expect_close("mixed", d, mixed_got[d], (double)mixed[d] - mixed[3] - log(sum),
                              1e-6);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* softmax and log_softmax along a middle dimension, against the formula
 * in double precision; softmax's rows sum to 1. */
static void test_softmax(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t outer = 7, dim = 33, inner = 5, total = outer * dim * inner;
    float *h = host_values(total), *got = malloc(total * sizeof *got);
    float *a = contract_floats(s, h, total), *out = contract_floats(s, NULL, total);
    for (int is_log = 0; is_log < 2; is_log++) {
        if (is_log)
            RT_OK(rill_op_log_softmax_f32(s, out, a, outer, dim, inner));
        else
            RT_OK(rill_op_softmax_f32(s, out, a, outer, dim, inner));
        contract_download(s, got, out, total * sizeof *got);
        for (size_t o = 0; o < outer; o++)
            for (size_t i = 0; i < inner; i++) {
                double sum = 0;
                for (size_t d = 0; d < dim; d++)
                    sum += exp(h[(o * dim + d) * inner + i]);
                for (size_t d = 0; d < dim; d++) {
                    size_t at = (o * dim + d) * inner + i;
                    double want = is_log ? h[at] - log(sum) : exp(h[at]) / sum;
                    contract_expect_close("softmax", at, got[at], want, 1e-5);
                }
            }
    }
    RT_OK(rill_op_softmax_f32(s, a, a, outer, dim, inner)); /* in place */
    contract_download(s, got, a, total * sizeof *got);
    for (size_t o = 0; o < outer; o++) {
        double row = 0;
        for (size_t d = 0; d < dim; d++)
            row += got[(o * dim + d) * inner];
        contract_expect_close("row sum", o, row, 1.0, 1e-5);
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    free(h);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* conv2d of n images [c, h, w] by k 3x3 filters at each geometry (stride_h,
 * stride_w, pad_h, pad_w) of geoms against a direct convolution. */
static void check_conv2d_ex(size_t n, size_t c, size_t h, size_t w, size_t k,
                            const size_t (*geoms)[4], int count) {
    rill_stream *s = contract_stream();
    size_t r = 3, q = 3;
    size_t in_n = n * c * h * w, wt_n = k * c * r * q;
    float *hin = host_values(in_n), *hwt = malloc(wt_n * sizeof *hwt);
    for (size_t i = 0; i < wt_n; i++)
        hwt[i] = (float)((i * 11) % 7) * 0.3f - 0.9f;
    float *in = contract_floats(s, hin, in_n), *wt = contract_floats(s, hwt, wt_n);
    for (int g = 0; g < count; g++) {
        size_t sh = geoms[g][0], sw = geoms[g][1], ph = geoms[g][2], pw = geoms[g][3];
        size_t oh = (h + 2 * ph - r) / sh + 1, ow = (w + 2 * pw - q) / sw + 1;
        size_t out_n = n * k * oh * ow;
        float *out = contract_floats(s, NULL, out_n), *got = malloc(out_n * sizeof *got);
        RT_OK(rill_op_conv2d_ex_f32(s, out, in, wt, n, c, h, w, k, r, q, sh, sw, ph, pw));
        contract_download(s, got, out, out_n * sizeof *got);
        for (size_t b = 0; b < n; b++)
            for (size_t o = 0; o < k; o++)
                for (size_t y = 0; y < oh; y++)
                    for (size_t x = 0; x < ow; x++) {
                        double want = 0;
                        for (size_t ci = 0; ci < c; ci++)
                            for (size_t dy = 0; dy < r; dy++)
                                for (size_t dx = 0; dx < q; dx++) {
                                    long iy = (long)(y * sh + dy) - (long)ph;
                                    long ix = (long)(x * sw + dx) - (long)pw;
                                    if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w)
                                        continue;
                                    want +=
                                        (double)
                                            hin[((b * c + ci) * h + (size_t)iy) * w + (size_t)ix] *
                                        hwt[((o * c + ci) * r + dy) * q + dx];
                                }
                        size_t i = ((b * k + o) * oh + y) * ow + x;
                        contract_expect_close("conv", i, got[i], want, 1e-4);
                    }
        RT_OK(rill_free(out));
        free(got);
    }
    RT_OK(rill_free(in));
    RT_OK(rill_free(wt));
    free(hin);
    free(hwt);
    RT_OK(rill_stream_destroy(s));
}

/* conv2d with strides and zero padding; with stride 1 and no padding it
 * equals rill_op_conv2d_f32's result. Stride 1 with padding on outputs 20
 * and 30 wide, in small images several to a block and in bands of a larger
 * one: where the CPU's convolution reads the image in place
 * (src/backend/cpu/conv_direct.c). */
static void test_conv2d_ex(void **state) {
    (void)state;
    const size_t small[3][4] = {{2, 2, 1, 1}, {1, 3, 2, 0}, {1, 1, 0, 0}};
    const size_t same[2][4] = {{1, 1, 1, 1}, {1, 1, 0, 1}};
    check_conv2d_ex(2, 3, 11, 10, 5, small, 3);
    check_conv2d_ex(3, 5, 17, 20, 13, same, 2);
    check_conv2d_ex(2, 4, 40, 30, 14, same, 2);
}

/* max and average pooling, with strides and padding. */
static void test_pool2d(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t planes = 6, h = 9, w = 8;
    size_t geoms[2][6] = {{2, 2, 2, 2, 0, 0}, {3, 3, 2, 1, 1, 1}};
    float *hin = host_values(planes * h * w);
    float *in = contract_floats(s, hin, planes * h * w);
    for (int g = 0; g < 2; g++)
        for (int op = RILL_POOL_MAX; op <= RILL_POOL_AVG; op++) {
            size_t r = geoms[g][0], q = geoms[g][1], sh = geoms[g][2], sw = geoms[g][3];
            size_t ph = geoms[g][4], pw = geoms[g][5];
            size_t oh = (h + 2 * ph - r) / sh + 1, ow = (w + 2 * pw - q) / sw + 1;
            float *out = contract_floats(s, NULL, planes * oh * ow);
            float *got = malloc(planes * oh * ow * sizeof *got);
            RT_OK(rill_op_pool2d_f32(s, (rill_pool_op)op, out, in, planes, h, w, r, q, sh, sw, ph,
                                     pw));
            contract_download(s, got, out, planes * oh * ow * sizeof *got);
            for (size_t p = 0; p < planes; p++)
                for (size_t y = 0; y < oh; y++)
                    for (size_t x = 0; x < ow; x++) {
                        double best = -INFINITY, sum = 0;
                        for (size_t dy = 0; dy < r; dy++)
                            for (size_t dx = 0; dx < q; dx++) {
                                long iy = (long)(y * sh + dy) - (long)ph;
                                long ix = (long)(x * sw + dx) - (long)pw;
                                if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w)
                                    continue;
                                float v = hin[(p * h + (size_t)iy) * w + (size_t)ix];
                                best = v > best ? v : best;
                                sum += v;
                            }
                        double want = op == RILL_POOL_MAX ? best : sum / (double)(r * q);
                        size_t i = (p * oh + y) * ow + x;
                        contract_expect_close("pool", i, got[i], want, 1e-6);
                    }
            RT_OK(rill_free(out));
            free(got);
        }
    RT_OK(rill_free(in));
    free(hin);
    RT_OK(rill_stream_destroy(s));
}

/* "RILL_BINARY_RELU_BACKWARD: b <= 0 ? 0 : a ... a where b is NaN": the
 * mask at negative, zero (both signs), positive and NaN b, with a NaN and
 * an infinite a masked to 0. */
static void test_binary_relu_backward_masks(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    float ha[8] = {1.5f, -2.0f, 3.0f, NAN, INFINITY, 4.0f, -5.0f, 6.0f};
    float hb[8] = {-1.0f, 0.0f, -0.0f, -3.0f, -INFINITY, NAN, 2.0f, 1e-30f};
    float want[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 4.0f, -5.0f, 6.0f};
    float *a = contract_floats(s, ha, 8), *b = contract_floats(s, hb, 8),
          *out = contract_floats(s, NULL, 8), got[8];
    size_t shape[1] = {8}, contig[1] = {1};
    RT_OK(rill_op_binary_f32(s, RILL_BINARY_RELU_BACKWARD, out, a, contig, b, contig, shape, 1));
    contract_download(s, got, out, sizeof got);
    for (size_t i = 0; i < 8; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            fail_msg("element %zu: %g, want %g", i, (double)got[i], (double)want[i]);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* masked_scale: "out[i] = (a[i] * m) * scale ..., each product rounded to
 * float": a dropped element is a[i] * 0 (a signed zero, NaN for NaN and
 * infinities), a kept one a[i] * scale rounded once (to infinity where it
 * overflows), any nonzero byte keeps; in place and into another buffer,
 * over one block and several; and its refusals. */
static void test_masked_scale(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const float scale = 1.0f / 0.9f;
    float ha[10] = {1.5f, -2.0f, NAN, INFINITY, -INFINITY, 3.2e38f, -0.0f, 1e-40f, 7.25f, -3.0f};
    uint8_t hm[10] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 255};
    float *a = contract_floats(s, ha, 10), *out = contract_floats(s, NULL, 10), got[10];
    uint8_t *m = contract_alloc(s, 10);
    contract_upload(s, m, hm, 10);
    RT_OK(rill_op_masked_scale_f32(s, out, a, m, scale, 10));
    contract_download(s, got, out, sizeof got);
    for (size_t i = 0; i < 10; i++) {
        volatile float kept = ha[i] * (hm[i] != 0 ? 1.0f : 0.0f);
        volatile float want = kept * scale;
        if (memcmp(&got[i], (const float *)&want, sizeof got[i]) != 0)
            fail_msg("element %zu: %g, want %g", i, (double)got[i], (double)want);
    }
    assert_true(signbit(got[1]) && got[1] == 0.0f); /* -2 dropped: -0 */
    assert_true(isnan(got[2]) && isnan(got[3]));    /* NaN, inf dropped: NaN */
    assert_true(isinf(got[5]));                     /* 3.2e38 / 0.9 overflows */
    size_t n = (size_t)1 << 20;
    float *hb = host_values(n), *gb = malloc(n * sizeof *gb);
    uint8_t *hbm = malloc(n);
    for (size_t i = 0; i < n; i++)
        hbm[i] = (uint8_t)((i * 7) % 10 < 3 ? 0 : 1);
    float *b = contract_floats(s, hb, n);
    uint8_t *bm = contract_alloc(s, n);
    contract_upload(s, bm, hbm, n);
    RT_OK(rill_op_masked_scale_f32(s, b, b, bm, 2.5f, n)); /* in place */
    contract_download(s, gb, b, n * sizeof *gb);
    for (size_t i = 0; i < n; i++) {
        volatile float want = (hb[i] * (hbm[i] ? 1.0f : 0.0f)) * 2.5f;
        if (memcmp(&gb[i], (const float *)&want, sizeof gb[i]) != 0)
            fail_msg("element %zu of %zu: %g, want %g", i, n, (double)gb[i], (double)want);
    }
    assert_int_equal(rill_op_masked_scale_f32(s, out, a, NULL, scale, 10),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "mask is NULL"));
    assert_int_equal(rill_op_masked_scale_f32(s, b, b, m, scale, 11), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "n bytes")); /* m holds 10 */
    assert_int_equal(rill_op_masked_scale_f32(s, out + 1, out, m, scale, 4),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "out overlaps a without being equal to it"));
    assert_int_equal(rill_op_masked_scale_f32(s, out, a, (const uint8_t *)(out + 2), scale, 4),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "out overlaps mask"));
    assert_int_equal(rill_op_masked_scale_f32(s, out, a, m, scale, 0), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_op_masked_scale_f32: n is 0"));
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    RT_OK(rill_free(m));
    RT_OK(rill_free(b));
    RT_OK(rill_free(bm));
    free(hb);
    free(gb);
    free(hbm);
    RT_OK(rill_stream_destroy(s));
}

/* "indices [planes, oh, ow] int64 receives the position yy*w + xx within
 * its image of the element out took, the first largest in the window (row
 * by row), or the last NaN when the window holds NaN": windows with ties
 * (values repeat every 23 elements) and with two NaNs, with padding. */
static void test_max_pool2d_gives_positions(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t planes = 3, h = 7, w = 9, r = 3, q = 3, sh = 2, sw = 2, ph = 1, pw = 1;
    size_t oh = (h + 2 * ph - r) / sh + 1, ow = (w + 2 * pw - q) / sw + 1;
    float *hin = host_values(planes * h * w);
    for (size_t i = 0; i < planes * h * w; i++)
        hin[i] = (float)((i * 7) % 5); /* many ties */
    hin[1 * h * w + 2 * w + 3] = NAN;  /* two NaNs in one window of plane 1 */
    hin[1 * h * w + 3 * w + 4] = NAN;
    float *in = contract_floats(s, hin, planes * h * w),
          *out = contract_floats(s, NULL, planes * oh * ow);
    int64_t *idx = contract_alloc(s, planes * oh * ow * sizeof(int64_t));
    RT_OK(rill_op_max_pool2d_f32(s, out, idx, in, planes, h, w, r, q, sh, sw, ph, pw));
    float *got = malloc(planes * oh * ow * sizeof *got);
    int64_t *got_idx = malloc(planes * oh * ow * sizeof *got_idx);
    contract_download(s, got, out, planes * oh * ow * sizeof *got);
    contract_download(s, got_idx, idx, planes * oh * ow * sizeof *got_idx);
    size_t nan_windows = 0;
    for (size_t p = 0; p < planes; p++)
        for (size_t y = 0; y < oh; y++)
            for (size_t x = 0; x < ow; x++) {
                float best = -INFINITY;
                long at = -1;
                for (size_t dy = 0; dy < r; dy++)
                    for (size_t dx = 0; dx < q; dx++) {
                        long iy = (long)(y * sh + dy) - (long)ph;
                        long ix = (long)(x * sw + dx) - (long)pw;
                        if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w)
                            continue;
                        float v = hin[(p * h + (size_t)iy) * w + (size_t)ix];
                        if (at < 0 || (!isnan(best) && v > best) || isnan(v)) {
                            best = v;
                            at = iy * (long)w + ix;
                        }
                    }
                size_t i = (p * oh + y) * ow + x;
                nan_windows += isnan(best);
                if (isnan(best))
                    assert_true(isnan(got[i]));
                else
                    assert_true(got[i] == best);
                if (got_idx[i] != at)
                    fail_msg("plane %zu (%zu, %zu): position %lld, want %ld", p, y, x,
                             (long long)got_idx[i], at);
            }
    assert_true(nan_windows > 0);
    /* The same maxima as rill_op_pool2d_f32's. */
    float *plain = contract_floats(s, NULL, planes * oh * ow);
    float *got_plain = malloc(planes * oh * ow * sizeof *got_plain);
    RT_OK(rill_op_pool2d_f32(s, RILL_POOL_MAX, plain, in, planes, h, w, r, q, sh, sw, ph, pw));
    contract_download(s, got_plain, plain, planes * oh * ow * sizeof *got_plain);
    for (size_t i = 0; i < planes * oh * ow; i++)
        assert_true(got_plain[i] == got[i] || (isnan(got_plain[i]) && isnan(got[i])));
    RT_OK(rill_free(in));
    RT_OK(rill_free(out));
    RT_OK(rill_free(idx));
    RT_OK(rill_free(plain));
    free(hin);
    free(got);
    free(got_idx);
    free(got_plain);
    RT_OK(rill_stream_destroy(s));
}

/* "RILL_BINARY_GELU_BACKWARD: a (Phi(b) + b phi(b))" and the tanh form,
 * against the formulas in double precision over b in [-8, 8] and at the
 * edges: 0 and 1 far out, NaN through, a 0 gradient giving 0. */
static void test_binary_gelu_backward(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { N = 1031 };
    float *ha = malloc(N * sizeof *ha), *hb = malloc(N * sizeof *hb),
          *got = malloc(N * sizeof *got);
    for (size_t i = 0; i < N; i++) {
        ha[i] = value_at(i);
        hb[i] = -8.0f + 16.0f * (float)i / (float)(N - 1);
    }
    hb[0] = -30.0f;
    hb[1] = 30.0f;
    hb[2] = NAN;
    ha[3] = 0.0f;
    float *a = contract_floats(s, ha, N), *b = contract_floats(s, hb, N),
          *out = contract_floats(s, NULL, N);
    size_t shape[1] = {N}, contig[1] = {1};
    rill_binary_op ops[2] = {RILL_BINARY_GELU_BACKWARD, RILL_BINARY_GELU_TANH_BACKWARD};
    for (int k = 0; k < 2; k++) {
        RT_OK(rill_op_binary_f32(s, ops[k], out, a, contig, b, contig, shape, 1));
        contract_download(s, got, out, N * sizeof *got);
        assert_true(got[0] == 0.0f * ha[0] && got[1] == ha[1] && isnan(got[2]) && got[3] == 0.0f);
        for (size_t i = 3; i < N; i++) {
            float want = host_binary(ops[k], ha[i], hb[i]);
            contract_expect_close(k == 0 ? "gelu backward" : "gelu tanh backward", i, got[i], want,
                                  1e-5);
        }
    }
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out));
    free(ha);
    free(hb);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* "out[i, :] = weight[indices[i], :]": every row, for both index widths,
 * in one block and over several (n * dim well above a block's share). */
static void test_embedding_gathers_rows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t sizes[2][3] = {{6, 7, 5}, {2000, 301, 130}}; /* n, rows, dim */
    for (int t = 0; t < 2; t++) {
        size_t n = sizes[t][0], rows = sizes[t][1], dim = sizes[t][2];
        float *hw = host_values(rows * dim), *got = malloc(n * dim * sizeof *got);
        int64_t *hi = malloc(n * sizeof *hi);
        for (size_t i = 0; i < n; i++)
            hi[i] = (int64_t)((i * 7919 + 3) % rows);
        hi[n - 1] = (int64_t)rows - 1;
        float *w = contract_floats(s, hw, rows * dim), *out = contract_floats(s, NULL, n * dim);
        for (size_t bytes = 4; bytes <= 8; bytes += 4) {
            void *idx = contract_indices(s, hi, n, bytes);
            RT_OK(rill_memset_async(out, 0xff, n * dim * sizeof(float), s));
            RT_OK(rill_op_embedding_f32(s, out, w, idx, bytes, n, rows, dim));
            contract_download(s, got, out, n * dim * sizeof *got);
            for (size_t i = 0; i < n; i++)
                for (size_t d = 0; d < dim; d++)
                    if (got[i * dim + d] != hw[(size_t)hi[i] * dim + d])
                        fail_msg("index bytes %zu, out[%zu, %zu] = %g, want weight[%lld, %zu] = %g",
                                 bytes, i, d, got[i * dim + d], (long long)hi[i], d,
                                 hw[(size_t)hi[i] * dim + d]);
            RT_OK(rill_free(idx));
        }
        RT_OK(rill_free(w));
        RT_OK(rill_free(out));
        free(hw);
        free(hi);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "grad_weight[r, :] = the sum, in order of i, of grad[i, :] over the i
 * with indices[i] == r, and 0 for the rows no index names and for row
 * padding_idx": against the same sums in the same order on the host
 * (so bit for bit), with and without a padding row, both index widths, in
 * one block and over several; "the same for every grid". */
static void test_embedding_backward_sums_rows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t sizes[2][3] = {{9, 5, 3}, {5000, 200, 48}}; /* n, rows, dim */
    for (int t = 0; t < 2; t++) {
        size_t n = sizes[t][0], rows = sizes[t][1], dim = sizes[t][2];
        float *hg = host_values(n * dim), *want = malloc(rows * dim * sizeof *want);
        float *got = malloc(rows * dim * sizeof *got);
        int64_t *hi = malloc(n * sizeof *hi);
        for (size_t i = 0; i < n; i++)
            hi[i] = (int64_t)((i * i * 31 + i) % (rows - 1)); /* the last row unnamed */
        for (size_t i = 0; i < n * dim; i++)
            hg[i] *= 1.0f + (float)(i % 13) * 0.0625f; /* values that round when summed */
        float *g = contract_floats(s, hg, n * dim), *gw = contract_floats(s, NULL, rows * dim);
        int64_t pads[3] = {-1, 3, (int64_t)rows};
        for (int k = 0; k < 3; k++) {
            memset(want, 0, rows * dim * sizeof *want);
            for (size_t i = 0; i < n; i++)
                if (hi[i] != pads[k])
                    for (size_t d = 0; d < dim; d++)
                        want[(size_t)hi[i] * dim + d] += hg[i * dim + d];
            for (size_t bytes = 4; bytes <= 8; bytes += 4) {
                void *idx = contract_indices(s, hi, n, bytes);
                RT_OK(rill_memset_async(gw, 0xff, rows * dim * sizeof(float), s));
                RT_OK(rill_op_embedding_backward_f32(s, gw, g, idx, bytes, n, rows, dim, pads[k]));
                contract_download(s, got, gw, rows * dim * sizeof *got);
                for (size_t i = 0; i < rows * dim; i++)
                    if (got[i] != want[i])
                        fail_msg("padding_idx %lld, index bytes %zu: grad_weight[%zu, %zu] = %.9g, "
                                 "want %.9g",
                                 (long long)pads[k], bytes, i / dim, i % dim, got[i], want[i]);
                RT_OK(rill_free(idx));
            }
        }
        RT_OK(rill_free(g));
        RT_OK(rill_free(gw));
        free(hg);
        free(hi);
        free(want);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "An index below 0 or at least rows ... the launch fails when it runs,
 * the stream's error sticky and its sentence naming the op, the index and
 * its position": forward and backward, a negative and a too large index,
 * on a CPU device (a CUDA device traps, which ends its context). */
static void test_embedding_index_out_of_range_fails_the_stream(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    if (contract_kind(dev) != RILL_DEVICE_CPU)
        skip(); /* a trap would end the device */
    rill_stream *s = contract_stream();
    size_t rows = 5, dim = 3, n = 4;
    float *hw = host_values(rows * dim);
    float *w = contract_floats(s, hw, rows * dim), *out = contract_floats(s, NULL, n * dim);
    int64_t bad[2][4] = {{0, 4, 9, 1}, {2, -1, 0, 0}};
    const char *words[2] = {"index 9 at position 2 is out of range for 5 rows",
                            "index -1 at position 1 is out of range for 5 rows"};
    for (int k = 0; k < 2; k++)
        for (int backward = 0; backward < 2; backward++) {
            void *idx = contract_indices(s, bad[k], n, 8);
            RT_OK(rill_stream_synchronize(s));
            if (backward)
                RT_OK(rill_op_embedding_backward_f32(s, w, out, idx, 8, n, rows, dim, -1));
            else
                RT_OK(rill_op_embedding_f32(s, out, w, idx, 8, n, rows, dim));
            contract_expect_error(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s),
                                  backward ? "embedding_backward_f32" : "embedding_f32", words[k]);
            RT_OK(rill_stream_clear_error(s));
            RT_OK(rill_free(idx));
        }
    RT_OK(rill_free(w));
    RT_OK(rill_free(out));
    free(hw);
    RT_OK(rill_stream_destroy(s));
}

/* "out[r, j] = (x[r, j] - mean_r) * rstd_r * weight[j] + bias[j], where
 * mean_r and the variance var_r ... are summed in double precision":
 * rows of 1 to 1,000 floats, with and without weight, bias and the
 * statistics, in place, against the formula in double precision. */
static void test_layer_norm(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t shapes[][2] = {{1, 1}, {3, 7}, {5, 64}, {257, 33}, {4, 1000}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        size_t rows = shapes[t][0], n = shapes[t][1], total = rows * n;
        float *h = host_values(total), *hw = host_values(n + 3), *hb = host_values(n + 5);
        for (size_t i = 0; i < total; i++)
            h[i] = h[i] * 3.0f + (float)(i / n); /* rows apart in mean */
        float *x = contract_floats(s, h, total), *out = contract_floats(s, NULL, total);
        float *w = contract_floats(s, hw + 3, n), *b = contract_floats(s, hb + 5, n);
        float *mean = contract_floats(s, NULL, rows), *rstd = contract_floats(s, NULL, rows);
        float *got = malloc(total * sizeof *got), *got_mean = malloc(rows * sizeof *got_mean),
              *got_rstd = malloc(rows * sizeof *got_rstd);
        for (int affine = 0; affine < 4; affine++) {
            const float *wp = affine & 1 ? w : NULL, *bp = affine & 2 ? b : NULL;
            RT_OK(rill_op_layer_norm_f32(s, out, affine == 3 ? mean : NULL,
                                         affine == 3 ? rstd : NULL, x, wp, bp, rows, n, 1e-5f));
            contract_download(s, got, out, total * sizeof *got);
            if (affine == 3) {
                contract_download(s, got_mean, mean, rows * sizeof *got_mean);
                contract_download(s, got_rstd, rstd, rows * sizeof *got_rstd);
            }
            for (size_t r = 0; r < rows; r++) {
                const float *row = h + r * n;
                double mu = 0.0, var = 0.0;
                for (size_t j = 0; j < n; j++)
                    mu += row[j];
                mu /= (double)n;
                for (size_t j = 0; j < n; j++)
                    var += (row[j] - mu) * (row[j] - mu);
                double rs = 1.0 / sqrt(var / (double)n + 1e-5);
                if (affine == 3) {
                    contract_expect_close("mean", r, got_mean[r], mu, 1e-6);
                    contract_expect_close("rstd", r, got_rstd[r], rs, 1e-6);
                }
                for (size_t j = 0; j < n; j++) {
                    double want =
                        (row[j] - mu) * rs * (wp ? hw[3 + j] : 1.0) + (bp ? hb[5 + j] : 0.0);
                    contract_expect_close("layer norm", r * n + j, got[r * n + j], want, 1e-5);
                }
            }
        }
        /* In place: the same bits as into out. */
        RT_OK(rill_op_layer_norm_f32(s, out, NULL, NULL, x, w, b, rows, n, 1e-5f));
        RT_OK(rill_op_layer_norm_f32(s, x, NULL, NULL, x, w, b, rows, n, 1e-5f));
        float *again = malloc(total * sizeof *again);
        contract_download(s, got, out, total * sizeof *got);
        contract_download(s, again, x, total * sizeof *again);
        assert_memory_equal(got, again, total * sizeof *got);
        free(again);
        free(got);
        free(got_mean);
        free(got_rstd);
        free(h);
        free(hw);
        free(hb);
        RT_OK(rill_free(x));
        RT_OK(rill_free(out));
        RT_OK(rill_free(w));
        RT_OK(rill_free(b));
        RT_OK(rill_free(mean));
        RT_OK(rill_free(rstd));
    }
    RT_OK(rill_stream_destroy(s));
}

/* got against a sum (want[0]) whose terms' magnitudes sum to want[1]:
 * float terms summed in another order than the reference's. */
static void expect_sum_close(const char *what, size_t i, float got, const double want[2]) {
    if (!(fabs(got - want[0]) <= 1e-5 * (1.0 + fabs(want[0])) + 1e-6 * want[1]))
        fail_msg("%s[%zu] = %.9g, want %.9g (its terms' magnitudes sum to %.9g)", what, i, got,
                 want[0], want[1]);
}

/* "dx[r, j] = rstd_r * ((g - mean_r(g)) - xhat * mean_r(g * xhat)) ...
 * dweight[j] = the sum over the rows of dy * xhat, dbias[j] the sum of
 * dy": each output alone and all three, with and without weight, from the
 * forward's mean and rstd, against the formulas in double precision. */
static void test_layer_norm_backward(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t shapes[][2] = {{1, 1}, {3, 7}, {5, 64}, {257, 33}, {4, 1000}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        size_t rows = shapes[t][0], n = shapes[t][1], total = rows * n;
        float *hx = host_values(total), *hdy = host_values(total + 11), *hw = host_values(n + 3);
        for (size_t i = 0; i < total; i++)
            hx[i] = hx[i] * 3.0f + (float)(i / n);
        float *x = contract_floats(s, hx, total), *dy = contract_floats(s, hdy + 11, total);
        float *w = contract_floats(s, hw + 3, n), *out = contract_floats(s, NULL, total);
        float *mean = contract_floats(s, NULL, rows), *rstd = contract_floats(s, NULL, rows);
        RT_OK(rill_op_layer_norm_f32(s, out, mean, rstd, x, w, NULL, rows, n, 1e-5f));
        float *hm = malloc(rows * sizeof *hm), *hr = malloc(rows * sizeof *hr);
        contract_download(s, hm, mean, rows * sizeof *hm);
        contract_download(s, hr, rstd, rows * sizeof *hr);
        float *dx = contract_floats(s, NULL, total), *dw = contract_floats(s, NULL, n),
              *db = contract_floats(s, NULL, n);
        float *got = malloc(total * sizeof *got), *got_w = malloc(n * sizeof *got_w),
              *got_b = malloc(n * sizeof *got_b);
        double *want_dx = malloc(total * sizeof *want_dx);
        double(*want_w)[2] = malloc(n * sizeof *want_w), (*want_b)[2] = malloc(n * sizeof *want_b);
        for (int with_w = 0; with_w < 2; with_w++) {
            const float *wp = with_w ? w : NULL;
            for (size_t j = 0; j < n; j++)
                want_w[j][0] = want_w[j][1] = want_b[j][0] = want_b[j][1] = 0.0;
            for (size_t r = 0; r < rows; r++) {
                double mg = 0.0, mgx = 0.0;
                for (size_t j = 0; j < n; j++) {
                    double g = (double)hdy[11 + r * n + j] * (with_w ? hw[3 + j] : 1.0f);
                    double xhat = ((double)hx[r * n + j] - hm[r]) * hr[r];
                    mg += g;
                    mgx += g * xhat;
                    want_w[j][0] += hdy[11 + r * n + j] * xhat;
                    want_w[j][1] += fabs(hdy[11 + r * n + j] * xhat);
                    want_b[j][0] += hdy[11 + r * n + j];
                    want_b[j][1] += fabs(hdy[11 + r * n + j]);
                }
                mg /= (double)n;
                mgx /= (double)n;
                for (size_t j = 0; j < n; j++) {
                    double g = (double)hdy[11 + r * n + j] * (with_w ? hw[3 + j] : 1.0f);
                    double xhat = ((double)hx[r * n + j] - hm[r]) * hr[r];
                    want_dx[r * n + j] = hr[r] * ((g - mg) - xhat * mgx);
                }
            }
            for (int mask = 1; mask < 8; mask++) {
                RT_OK(rill_op_layer_norm_backward_f32(s, mask & 1 ? dx : NULL, mask & 2 ? dw : NULL,
                                                      mask & 4 ? db : NULL, dy, x, mean, rstd, wp,
                                                      rows, n));
                if (mask & 1) {
                    contract_download(s, got, dx, total * sizeof *got);
                    for (size_t i = 0; i < total; i++)
                        contract_expect_close("dx", i, got[i], want_dx[i], 1e-5);
                }
                if (mask & 2) {
                    contract_download(s, got_w, dw, n * sizeof *got_w);
                    for (size_t j = 0; j < n; j++)
                        expect_sum_close("dweight", j, got_w[j], want_w[j]);
                }
                if (mask & 4) {
                    contract_download(s, got_b, db, n * sizeof *got_b);
                    for (size_t j = 0; j < n; j++)
                        expect_sum_close("dbias", j, got_b[j], want_b[j]);
                }
            }
        }
        free(hx);
        free(hdy);
        free(hw);
        free(hm);
        free(hr);
        free(got);
        free(got_w);
        free(got_b);
        free(want_dx);
        free(want_w);
        free(want_b);
        float *bufs[] = {x, dy, w, out, mean, rstd, dx, dw, db};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            RT_OK(rill_free(bufs[i]));
    }
    RT_OK(rill_stream_destroy(s));
}

/* The layer norm's refusals leave every output untouched. */
static void test_layer_norm_refuses_bad_arguments(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { ROWS = 4, N = 8 };
    float *h = host_values(ROWS * N), *got = malloc(64 * sizeof *got), fill[64];
    for (int i = 0; i < 64; i++)
        fill[i] = -7.0f;
    float *x = contract_floats(s, h, ROWS * N), *out = contract_floats(s, fill, 64);
    float *w = contract_floats(s, h, N);
    const char fn[] = "rill_op_layer_norm_f32";
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_f32(s, NULL, NULL, NULL, x, NULL, NULL, ROWS, N, 1e-5f), fn, "out");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_layer_norm_f32(s, out, NULL, NULL, x, NULL, NULL, 0, N, 1e-5f),
                          fn, "rows is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_layer_norm_f32(s, out, NULL, NULL, x, NULL, NULL, ROWS, 0, 1e-5f),
                          fn, "n is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_layer_norm_f32(s, out, NULL, NULL, x, NULL, NULL, ROWS, N, NAN),
                          fn, "eps");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_layer_norm_f32(s, out, NULL, NULL, x, NULL, NULL, ROWS, N, -1.0f),
                          fn, "eps");
    /* a weight of n floats past its allocation */
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_f32(s, out, NULL, NULL, x, w + 1, NULL, ROWS, N, 1e-5f), fn, "weight");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_layer_norm_f32(s, x + 1, NULL, NULL, x, NULL, NULL, 2, N, 1e-5f),
                          fn, "overlaps x");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_layer_norm_f32(s, out, x, NULL, x, NULL, NULL, ROWS, N, 1e-5f),
                          fn, "mean overlaps x");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_f32(s, out, out + 40, out + 42, x, NULL, NULL, ROWS, N, 1e-5f), fn,
        "mean overlaps rstd");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_f32(s, out, out + 8, NULL, x, NULL, NULL, ROWS, N, 1e-5f), fn,
        "out overlaps mean");
    const char bfn[] = "rill_op_layer_norm_backward_f32";
    float *st = out + 48; /* mean and rstd stand-ins: 4 floats each */
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_backward_f32(s, NULL, NULL, NULL, x, x, st, st + 4, NULL, ROWS, N), bfn,
        "all NULL");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_backward_f32(s, out, NULL, NULL, x, x, NULL, st + 4, NULL, ROWS, N), bfn,
        "mean");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_backward_f32(s, out, NULL, NULL, x, x, st, st + 4, NULL, 0, N), bfn,
        "rows is 0");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_backward_f32(s, x, NULL, NULL, x, out, st, st + 4, NULL, ROWS, N), bfn,
        "dx overlaps dy");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_backward_f32(s, NULL, out, out + 4, x, x, st, st + 4, NULL, ROWS, N),
        bfn, "dweight overlaps dbias");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_layer_norm_backward_f32(s, NULL, out, NULL, x, x, st, st + 4, w + 1, ROWS, N), bfn,
        "weight");
    contract_download(s, got, out, 64 * sizeof *got);
    assert_memory_equal(got, fill, sizeof fill);
    RT_OK(rill_free(x));
    RT_OK(rill_free(out));
    RT_OK(rill_free(w));
    free(h);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* "Each checks every argument first (RILL_ERROR_INVALID_ARGUMENT, with a
 * sentence naming the argument; nothing runs)". */
static void test_tensor_ops_refuse_bad_arguments(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    float *a = contract_floats(s, NULL, 64), *b = contract_floats(s, NULL, 64);
    size_t shape[2] = {4, 4}, contig[2] = {4, 1}, zero[2] = {0, 1}, big[2] = {64, 1};
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_copy_strided_f32(s, b, zero, a, contig, shape, 2),
                          "rill_op_copy_strided_f32", "more than once");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_copy_strided_f32(s, b, contig, a, big, shape, 2),
                          "rill_op_copy_strided_f32", "in");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_copy_strided_f32(s, a + 2, contig, a, contig, shape, 2),
                          "rill_op_copy_strided_f32", "overlaps");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_copy_strided_f32(s, b, contig, a, contig, shape, 7),
                          "rill_op_copy_strided_f32", "RILL_OP_MAX_DIMS");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_binary_f32(s, (rill_binary_op)99, b, a, contig, a, contig, shape, 2),
        "rill_op_binary_f32", "not a rill_binary_op");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_binary_f32(s, RILL_BINARY_ADD, a, a, zero, b, contig, shape, 2),
                          "rill_op_binary_f32", "overlaps a");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_map_f32(s, RILL_MAP_RELU, b, a, 0.0f, 0), "rill_op_map_f32",
                          "n is 0");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_reduce_dim_f32(s, RILL_REDUCE_DIM_SUM, b, (int64_t *)(b + 32), a, 4, 4, 1),
        "rill_op_reduce_dim_f32", "indices");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, rill_op_softmax_f32(s, b, a, 4, 0, 4),
                          "rill_op_softmax_f32", "dim is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_conv2d_ex_f32(s, b, a, a, 1, 1, 8, 8, 1, 3, 3, 0, 1, 0, 0),
                          "rill_op_conv2d_ex_f32", "stride_h");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_conv2d_ex_f32(s, b, a, a, 1, 1, 2, 2, 1, 5, 5, 1, 1, 1, 1),
                          "rill_op_conv2d_ex_f32", "larger than the padded input");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_pool2d_f32(s, RILL_POOL_MAX, b, a, 1, 8, 8, 2, 2, 2, 2, 2, 0),
                          "rill_op_pool2d_f32", "half the window");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_pool2d_f32(s, (rill_pool_op)7, b, a, 1, 8, 8, 2, 2, 2, 2, 0, 0),
                          "rill_op_pool2d_f32", "not a rill_pool_op");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_f32(s, b, NULL, a, 1, 8, 8, 2, 2, 2, 2, 0, 0),
                          "rill_op_max_pool2d_f32", "indices is NULL");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_max_pool2d_f32(s, b, (int64_t *)(a + 8), a, 1, 8, 8, 2, 2, 2, 2, 0, 0),
        "rill_op_max_pool2d_f32", "indices");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_max_pool2d_f32(s, b, (int64_t *)(b + 8), a, 1, 8, 8, 2, 2, 2, 2, 0, 0),
        "rill_op_max_pool2d_f32", "out");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_max_pool2d_f32(s, b, (int64_t *)(b + 40), a, 1, 8, 8, 2, 2, 2, 2, 0, 0),
        "rill_op_max_pool2d_f32", "indices");
    /* Embeddings: a [8, 8] weight, b's first 32 floats out [4, 8], the
     * indices 4 int64s at b + 48. */
    int64_t *idx = (int64_t *)(b + 48);
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, b, a, NULL, 8, 4, 8, 8), "rill_op_embedding_f32",
                          "indices is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, NULL, a, idx, 8, 4, 8, 8),
                          "rill_op_embedding_f32", "out is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, b, a, idx, 2, 4, 8, 8), "rill_op_embedding_f32",
                          "index_bytes is 2");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, b, a, idx, 8, 0, 8, 8), "rill_op_embedding_f32",
                          "n is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, b, a, idx, 8, 4, 8, 0), "rill_op_embedding_f32",
                          "dim 0");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_embedding_f32(s, b, a, idx, 8, 4, 9, 8), /* 72 floats: past a's 64 */
        "rill_op_embedding_f32", "weight");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_embedding_f32(s, b, a, idx, 8, 8, 8, 8), /* out reaches the indices */
        "rill_op_embedding_f32", "overlaps indices");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, a + 8, a, idx, 8, 4, 4, 8),
                          "rill_op_embedding_f32", "overlaps weight");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_f32(s, b, a, idx, 8, (size_t)1 << 62, 8, 8),
                          "rill_op_embedding_f32", "fit in memory");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_backward_f32(s, b, a, idx, 8, 4, 8, 8, -1),
                          "rill_op_embedding_backward_f32", "overlaps indices");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_backward_f32(s, a, a + 8, idx, 8, 4, 4, 8, -1),
                          "rill_op_embedding_backward_f32", "overlaps grad");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_embedding_backward_f32(s, a, b, idx, 4, 9, 4, 8, -1), /* 72 floats */
        "rill_op_embedding_backward_f32", "grad");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_embedding_backward_f32(s, a, b, NULL, 8, 4, 4, 8, -1),
                          "rill_op_embedding_backward_f32", "indices is NULL");
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_strided_transposes_and_scatters),
        cmocka_unit_test(test_binary_broadcasts),
        cmocka_unit_test(test_binary_relu_backward_masks),
        cmocka_unit_test(test_masked_scale),
        cmocka_unit_test(test_map_ops),
        cmocka_unit_test(test_nan_rules_of_maps_and_binary_ops),
        cmocka_unit_test(test_reduce_dim),
        cmocka_unit_test(test_reduce_dim_extremes_of_rows),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_log_softmax_keeps_precision),
        cmocka_unit_test(test_conv2d_ex),
        cmocka_unit_test(test_pool2d),
        cmocka_unit_test(test_max_pool2d_gives_positions),
        cmocka_unit_test(test_binary_gelu_backward),
        cmocka_unit_test(test_embedding_gathers_rows),
        cmocka_unit_test(test_embedding_backward_sums_rows),
        cmocka_unit_test(test_embedding_index_out_of_range_fails_the_stream),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_layer_norm_backward),
        cmocka_unit_test(test_layer_norm_refuses_bad_arguments),
        cmocka_unit_test(test_tensor_ops_refuse_bad_arguments),
    };
    return CONTRACT_RUN(tests);
}
