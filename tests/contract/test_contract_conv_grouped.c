/* SPDX-License-Identifier: MIT */
/* Grouped and dilated conv2d (rill_op_conv2d_ex2_f32) and its backward
 * (rill_op_conv2d_backward_ex2_f32) on the device under test (contract.h):
 * the output and both gradients against direct sums computed here in
 * double precision, over groups (depthwise among them), dilations, strides
 * and padding; and the refusals of the new parameters, each with its
 * sentence. */
#include "contract.h"

#include <stdlib.h>
#include <string.h>

static float *host_values(size_t n, size_t mul, size_t mod, float scale, float shift) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * mul) % mod) * scale - shift;
    return h;
}

/* A convolution: n, c, h, w, k, r, q (the filter's width) and its params. */
typedef struct conv_case {
    size_t n, c, h, w, k, r, q;
    rill_conv2d_params p;
} conv_case;

static size_t out_h(const conv_case *g) {
    return (g->h + 2 * g->p.pad_h - g->p.dilation_h * (g->r - 1) - 1) / g->p.stride_h + 1;
}
static size_t out_w(const conv_case *g) {
    return (g->w + 2 * g->p.pad_w - g->p.dilation_w * (g->q - 1) - 1) / g->p.stride_w + 1;
}

/* The output and the gradients by direct sums over every (input, filter,
 * output) triple, in double precision. */
static void reference(const conv_case *g, const float *gout, const float *in, const float *wt,
                      double *out, double *gin, double *gwt) {
    size_t oh = out_h(g), ow = out_w(g), cg = g->c / g->p.groups, kg = g->k / g->p.groups;
    memset(out, 0, g->n * g->k * oh * ow * sizeof *out);
    memset(gin, 0, g->n * g->c * g->h * g->w * sizeof *gin);
    memset(gwt, 0, g->k * cg * g->r * g->q * sizeof *gwt);
    for (size_t b = 0; b < g->n; b++)
        for (size_t o = 0; o < g->k; o++)
            for (size_t y = 0; y < oh; y++)
                for (size_t x = 0; x < ow; x++) {
                    size_t oi = ((b * g->k + o) * oh + y) * ow + x;
                    double d = gout[oi];
                    for (size_t ci = 0; ci < cg; ci++)
                        for (size_t dy = 0; dy < g->r; dy++)
                            for (size_t dx = 0; dx < g->q; dx++) {
                                long iy = (long)(y * g->p.stride_h + dy * g->p.dilation_h) -
                                          (long)g->p.pad_h;
                                long ix = (long)(x * g->p.stride_w + dx * g->p.dilation_w) -
                                          (long)g->p.pad_w;
                                if (iy < 0 || ix < 0 || iy >= (long)g->h || ix >= (long)g->w)
                                    continue;
                                size_t c = o / kg * cg + ci;
                                size_t ii =
                                    ((b * g->c + c) * g->h + (size_t)iy) * g->w + (size_t)ix;
                                size_t wi = ((o * cg + ci) * g->r + dy) * g->q + dx;
                                out[oi] += (double)in[ii] * wt[wi];
                                gin[ii] += d * wt[wi];
                                gwt[wi] += d * in[ii];
                            }
                }
}

/* rill_op_conv2d_ex2_f32: "out[i, f, y, x] = the sum over the channels ci
 * of f's group and the taps (ri, si) of weight[f, ci, ri, si] * in[i,
 * g*c/groups + ci, y*stride_h + ri*dilation_h - pad_h, x*stride_w +
 * si*dilation_w - pad_w]"; its backward overwrites grad_in and
 * grad_weight with the gradients of that sum. */
static void test_conv2d_grouped_dilated_matches_direct_sums(void **state) {
    (void)state;
    const conv_case cases[] = {
        {2, 4, 9, 8, 6, 3, 3, {1, 1, 1, 1, 1, 1, 2}},      /* two groups */
        {2, 6, 10, 9, 6, 3, 3, {1, 1, 1, 1, 1, 1, 6}},     /* depthwise */
        {1, 4, 12, 11, 8, 3, 3, {2, 2, 1, 1, 1, 1, 4}},    /* depthwise, 2 filters each */
        {2, 3, 11, 12, 4, 3, 2, {1, 1, 2, 2, 2, 3, 1}},    /* dilated */
        {2, 8, 13, 12, 4, 3, 3, {2, 1, 2, 1, 2, 2, 4}},    /* dilated and grouped */
        {1, 32, 24, 24, 32, 3, 3, {1, 1, 1, 1, 1, 1, 32}}, /* depthwise over blocks */
        {3, 16, 20, 18, 8, 3, 3, {1, 2, 2, 2, 2, 1, 2}},   /* groups split over blocks */
        {1, 2, 7, 7, 2, 1, 1, {1, 1, 0, 0, 3, 3, 2}},      /* pointwise, dilation moot */
    };
    rill_stream *s = contract_stream();
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const conv_case *g = &cases[t];
        size_t oh = out_h(g), ow = out_w(g);
        size_t in_n = g->n * g->c * g->h * g->w, wt_n = g->k * g->c / g->p.groups * g->r * g->q;
        size_t out_n = g->n * g->k * oh * ow;
        float *hin = host_values(in_n, 37, 23, 0.25f, 2.5f);
        float *hwt = host_values(wt_n, 11, 7, 0.3f, 0.9f);
        float *hgo = host_values(out_n, 13, 17, 0.125f, 1.0f);
        double *want_out = malloc(out_n * sizeof *want_out);
        double *want_in = malloc(in_n * sizeof *want_in), *want_wt = malloc(wt_n * sizeof *want_wt);
        reference(g, hgo, hin, hwt, want_out, want_in, want_wt);
        float *in = contract_floats(s, hin, in_n), *wt = contract_floats(s, hwt, wt_n),
              *go = contract_floats(s, hgo, out_n);
        float *out = contract_floats(s, NULL, out_n), *gin = contract_floats(s, NULL, in_n);
        float *gwt = contract_floats(s, NULL, wt_n);
        RT_OK(rill_op_conv2d_ex2_f32(s, out, in, wt, g->n, g->c, g->h, g->w, g->k, g->r, g->q,
                                     &g->p));
        RT_OK(rill_op_conv2d_backward_ex2_f32(s, gin, gwt, go, in, wt, g->n, g->c, g->h, g->w, g->k,
                                              g->r, g->q, &g->p));
        size_t most = in_n > wt_n ? in_n : wt_n;
        float *got = malloc((most > out_n ? most : out_n) * sizeof *got);
        contract_download(s, got, out, out_n * sizeof *got);
        for (size_t i = 0; i < out_n; i++)
            contract_expect_close("out", i, got[i], want_out[i], 1e-4);
        contract_download(s, got, gin, in_n * sizeof *got);
        for (size_t i = 0; i < in_n; i++)
            contract_expect_close("grad_in", i, got[i], want_in[i], 1e-4);
        contract_download(s, got, gwt, wt_n * sizeof *got);
        for (size_t i = 0; i < wt_n; i++)
            contract_expect_close("grad_weight", i, got[i], want_wt[i], 1e-4);
        RT_OK(rill_free(in));
        RT_OK(rill_free(wt));
        RT_OK(rill_free(go));
        RT_OK(rill_free(out));
        RT_OK(rill_free(gin));
        RT_OK(rill_free(gwt));
        free(hin);
        free(hwt);
        free(hgo);
        free(want_out);
        free(want_in);
        free(want_wt);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

static void expect_error(const char *fn, rill_status got, const char *words) {
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, got, fn, words);
}

/* "params NULL, a dilation or groups of 0, or groups dividing c or k
 * unevenly is RILL_ERROR_INVALID_ARGUMENT with a sentence naming it"; the
 * dilated filter must fit the padded input; the weight is k*(c/groups)*r*sz
 * floats. */
static void test_conv2d_grouped_refuses_bad_parameters(void **state) {
    (void)state;
    static const char fwd[] = "rill_op_conv2d_ex2_f32", bwd[] = "rill_op_conv2d_backward_ex2_f32";
    rill_stream *s = contract_stream();
    float *a = contract_floats(s, NULL, 256), *b = contract_floats(s, NULL, 256),
          *c = contract_floats(s, NULL, 256);
    const rill_conv2d_params ok = {1, 1, 0, 0, 1, 1, 2};
    rill_conv2d_params p = ok;
    /* in [1,4,8,8] = 256 floats, weight [4,2,3,3] = 72, out [1,4,6,6] = 144. */
    RT_OK(rill_op_conv2d_ex2_f32(s, c, a, b, 1, 4, 8, 8, 4, 3, 3, &p));
    expect_error(fwd, rill_op_conv2d_ex2_f32(s, c, a, b, 1, 4, 8, 8, 4, 3, 3, NULL),
                 "params is NULL");
    p.groups = 0;
    expect_error(fwd, rill_op_conv2d_ex2_f32(s, c, a, b, 1, 4, 8, 8, 4, 3, 3, &p), "groups is 0");
    p.groups = 3;
    expect_error(fwd, rill_op_conv2d_ex2_f32(s, c, a, b, 1, 4, 8, 8, 4, 3, 3, &p),
                 "divides neither");
    p = ok;
    p.dilation_w = 0;
    expect_error(bwd,
                 rill_op_conv2d_backward_ex2_f32(s, c, NULL, a, NULL, b, 1, 4, 8, 8, 4, 3, 3, &p),
                 "dilation_w is 0");
    p = ok;
    p.dilation_h = 4; /* 3 taps 4 apart span 9 rows of the 8 */
    expect_error(bwd,
                 rill_op_conv2d_backward_ex2_f32(s, c, NULL, a, NULL, b, 1, 4, 8, 8, 4, 3, 3, &p),
                 "larger than the padded input");
    /* groups 1: the weight would be [4,4,3,3] = 144 floats, past b + 200's 56. */
    p = ok;
    p.groups = 1;
    expect_error(fwd, rill_op_conv2d_ex2_f32(s, c, a, b + 200, 1, 4, 8, 8, 4, 3, 3, &p), "weight");
    p.groups = 2;
    RT_OK(rill_op_conv2d_ex2_f32(s, c, a, b + 184, 1, 4, 8, 8, 4, 3, 3, &p));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_grouped_dilated_matches_direct_sums),
        cmocka_unit_test(test_conv2d_grouped_refuses_bad_parameters),
    };
    return CONTRACT_RUN(tests);
}
