/* SPDX-License-Identifier: MIT */
/* 2-D pooling with torch's options (rill_op_pool2d_ex_f32,
 * rill_op_avg_pool2d_backward_ex_f32) on the device under test
 * (contract.h): ceil mode, a max's dilation and indices, an average's
 * count_include_pad=False and divisor, forward and backward, against direct
 * sums computed here in double precision; and the refusals, each with its
 * sentence. */
#include "contract.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *host_values(size_t n, size_t seed) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] =
            ((float)(((i + seed) * 37) % 23) * 0.25f - 2.5f) * (1.0f + (float)(i % 13) * 0.0625f);
    return h;
}

/* torch's pooling_output_shape, in signed arithmetic. */
static size_t out_size(size_t n, size_t k, size_t stride, size_t pad, size_t dil, bool ceil_mode) {
    long num = (long)n + 2 * (long)pad - (long)dil * ((long)k - 1) - 1;
    long o = (num + (ceil_mode ? (long)stride - 1 : 0)) / (long)stride + 1;
    if (ceil_mode && (o - 1) * (long)stride >= (long)n + (long)pad)
        o--;
    return (size_t)o;
}

typedef struct pool_case {
    rill_pool_op op;
    size_t planes, h, w;
    rill_pool2d_params p;
} pool_case;

/* Output (y, x)'s window as torch's avg_pool2d takes it: [y0, y1) x [x0,
 * x1) inside the image, and its divisor. */
static double avg_window(const pool_case *g, long y, long x, long *y0, long *y1, long *x0,
                         long *x1) {
    const rill_pool2d_params *p = &g->p;
    long hs = y * (long)p->stride_h - (long)p->pad_h, ws = x * (long)p->stride_w - (long)p->pad_w;
    long he = fminl(hs + (long)p->r, (long)(g->h + p->pad_h));
    long we = fminl(ws + (long)p->sz, (long)(g->w + p->pad_w));
    long span = (he - hs) * (we - ws);
    *y0 = hs < 0 ? 0 : hs;
    *x0 = ws < 0 ? 0 : ws;
    *y1 = he > (long)g->h ? (long)g->h : he;
    *x1 = we > (long)g->w ? (long)g->w : we;
    if (p->divisor != 0)
        return (double)p->divisor;
    if (p->flags & RILL_POOL_EXCLUDE_PAD)
        return (double)((*y1 - *y0) * (*x1 - *x0));
    return (double)span;
}

/* "oh = (h + 2*pad_h - dilation_h*(r-1) - 1 (+ stride_h - 1 in ceil mode))
 * / stride_h + 1, less one in ceil mode when the last window would start
 * at or past h + pad_h"; a max over the taps inside the image with the
 * first largest's position; an average divided as torch divides it; the
 * average's backward the sum of each window's share. */
static void test_pool2d_ex_matches_direct_sums(void **state) {
    (void)state;
    const unsigned ceil = RILL_POOL_CEIL_MODE, excl = RILL_POOL_EXCLUDE_PAD;
    const pool_case cases[] = {
        {RILL_POOL_MAX, 3, 5, 5, {2, 2, 2, 2, 0, 0, 1, 1, 0, ceil}},
        {RILL_POOL_MAX, 2, 9, 8, {3, 3, 2, 2, 1, 1, 1, 1, 0, ceil}},
        {RILL_POOL_MAX, 2, 11, 10, {3, 2, 1, 2, 2, 1, 2, 3, 0, 0}},
        {RILL_POOL_MAX, 2, 12, 13, {3, 3, 2, 3, 1, 1, 2, 2, 0, ceil}},
        {RILL_POOL_AVG, 3, 5, 5, {2, 2, 2, 2, 0, 0, 1, 1, 0, ceil}},
        {RILL_POOL_AVG, 2, 9, 8, {3, 3, 2, 2, 1, 1, 1, 1, 0, excl}},
        {RILL_POOL_AVG, 2, 10, 7, {3, 3, 2, 2, 1, 1, 1, 1, 0, excl | ceil}},
        {RILL_POOL_AVG, 2, 10, 7, {3, 2, 2, 3, 1, 1, 1, 1, 0, ceil}},
        {RILL_POOL_AVG, 2, 8, 9, {3, 3, 2, 2, 1, 1, 1, 1, 5, ceil}},
        {RILL_POOL_AVG, 300, 14, 15, {3, 3, 2, 2, 1, 1, 1, 1, 0, excl | ceil}},
    };
    /* A hand count: 5 inputs, windows of 2 at stride 2, ceil mode: 3. */
    assert_int_equal(out_size(5, 2, 2, 0, 1, true), 3);
    rill_stream *s = contract_stream();
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const pool_case *g = &cases[t];
        const rill_pool2d_params *p = &g->p;
        bool cm = (p->flags & RILL_POOL_CEIL_MODE) != 0;
        size_t oh = out_size(g->h, p->r, p->stride_h, p->pad_h, p->dilation_h, cm);
        size_t ow = out_size(g->w, p->sz, p->stride_w, p->pad_w, p->dilation_w, cm);
        size_t in_n = g->planes * g->h * g->w, out_n = g->planes * oh * ow;
        float *hin = host_values(in_n, t), *hgo = host_values(out_n, t + 5);
        float *in = contract_floats(s, hin, in_n), *out = contract_floats(s, NULL, out_n);
        int64_t *idx = NULL;
        if (g->op == RILL_POOL_MAX)
            idx = contract_alloc(s, out_n * sizeof *idx);
        RT_OK(rill_op_pool2d_ex_f32(s, g->op, out, idx, in, g->planes, g->h, g->w, p));
        float *got = malloc((in_n > out_n ? in_n : out_n) * sizeof *got);
        int64_t *got_idx = malloc(out_n * sizeof *got_idx);
        contract_download(s, got, out, out_n * sizeof *got);
        if (idx != NULL)
            contract_download(s, got_idx, idx, out_n * sizeof *got_idx);
        double *want_gin = calloc(in_n, sizeof *want_gin);
        for (size_t pl = 0; pl < g->planes; pl++)
            for (long y = 0; y < (long)oh; y++)
                for (long x = 0; x < (long)ow; x++) {
                    size_t oi = (pl * oh + (size_t)y) * ow + (size_t)x;
                    const float *img = hin + pl * g->h * g->w;
                    if (g->op == RILL_POOL_MAX) {
                        double best = -INFINITY;
                        long at = -1;
                        for (long i = 0; i < (long)p->r; i++)
                            for (long j = 0; j < (long)p->sz; j++) {
                                long iy = y * (long)p->stride_h - (long)p->pad_h +
                                          i * (long)p->dilation_h;
                                long ix = x * (long)p->stride_w - (long)p->pad_w +
                                          j * (long)p->dilation_w;
                                if (iy < 0 || ix < 0 || iy >= (long)g->h || ix >= (long)g->w)
                                    continue;
                                if (at < 0 || img[iy * (long)g->w + ix] > best) {
                                    best = img[iy * (long)g->w + ix];
                                    at = iy * (long)g->w + ix;
                                }
                            }
                        contract_expect_close("max", oi, got[oi], best, 0);
                        assert_int_equal(got_idx[oi], at);
                        continue;
                    }
                    long y0, y1, x0, x1;
                    double div = avg_window(g, y, x, &y0, &y1, &x0, &x1);
                    double total = 0;
                    for (long yy = y0; yy < y1; yy++)
                        for (long xx = x0; xx < x1; xx++) {
                            total += img[yy * (long)g->w + xx];
                            want_gin[(pl * g->h + (size_t)yy) * g->w + (size_t)xx] += hgo[oi] / div;
                        }
                    contract_expect_close("avg", oi, got[oi], total / div, 1e-5);
                }
        if (g->op == RILL_POOL_AVG) {
            float *go = contract_floats(s, hgo, out_n), *gin = contract_floats(s, NULL, in_n);
            RT_OK(rill_op_avg_pool2d_backward_ex_f32(s, gin, go, g->planes, g->h, g->w, p));
            contract_download(s, got, gin, in_n * sizeof *got);
            for (size_t i = 0; i < in_n; i++)
                contract_expect_close("grad_in", i, got[i], want_gin[i], 1e-5);
            RT_OK(rill_free(go));
            RT_OK(rill_free(gin));
        } else {
            RT_OK(rill_free(idx));
        }
        RT_OK(rill_free(in));
        RT_OK(rill_free(out));
        free(hin);
        free(hgo);
        free(got);
        free(got_idx);
        free(want_gin);
    }
    RT_OK(rill_stream_destroy(s));
}

static void expect_error(const char *fn, rill_status got, const char *words) {
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, got, fn, words);
}

/* "An option of the other op (dilation other than 1 for RILL_POOL_AVG,
 * divisor, the exclude flag or a NULL params for either, unknown flags) is
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming it." */
static void test_pool2d_ex_refuses_bad_parameters(void **state) {
    (void)state;
    static const char fwd[] = "rill_op_pool2d_ex_f32", bwd[] = "rill_op_avg_pool2d_backward_ex_f32";
    rill_stream *s = contract_stream();
    float *a = contract_floats(s, NULL, 64), *b = contract_floats(s, NULL, 64);
    const rill_pool2d_params ok = {2, 2, 2, 2, 0, 0, 1, 1, 0, RILL_POOL_CEIL_MODE};
    rill_pool2d_params p = ok;
    RT_OK(rill_op_pool2d_ex_f32(s, RILL_POOL_AVG, b, NULL, a, 1, 8, 8, &p));
    expect_error(fwd, rill_op_pool2d_ex_f32(s, RILL_POOL_AVG, b, NULL, a, 1, 8, 8, NULL),
                 "params is NULL");
    p.dilation_h = 2;
    expect_error(fwd, rill_op_pool2d_ex_f32(s, RILL_POOL_AVG, b, NULL, a, 1, 8, 8, &p),
                 "no dilation");
    p = ok;
    p.divisor = 3;
    expect_error(fwd, rill_op_pool2d_ex_f32(s, RILL_POOL_MAX, b, NULL, a, 1, 8, 8, &p),
                 "for average pooling");
    p = ok;
    p.flags = 4;
    expect_error(bwd, rill_op_avg_pool2d_backward_ex_f32(s, a, b, 1, 8, 8, &p), "flags 0x4");
    p = ok;
    p.pad_h = 2;
    expect_error(bwd, rill_op_avg_pool2d_backward_ex_f32(s, a, b, 1, 8, 8, &p), "half the window");
    p = ok;
    p.stride_w = 0;
    expect_error(fwd, rill_op_pool2d_ex_f32(s, RILL_POOL_MAX, b, NULL, a, 1, 8, 8, &p),
                 "stride_w is 0");
    p = ok;
    expect_error(fwd,
                 rill_op_pool2d_ex_f32(s, RILL_POOL_AVG, b, (int64_t *)(void *)b, a, 1, 8, 8, &p),
                 "indices");
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool2d_ex_matches_direct_sums),
        cmocka_unit_test(test_pool2d_ex_refuses_bad_parameters),
    };
    return CONTRACT_RUN(tests);
}
