/* SPDX-License-Identifier: MIT */
/* conv2d's backward (rill_op_conv2d_backward_f32) on the device under test
 * (contract.h): both gradients against direct sums computed here in double
 * precision, over strides, padding, non-square filters and groups of
 * channels split over several blocks; each gradient alone; and its
 * refusals, each with its sentence. */
#include "contract.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *host_values(size_t n, size_t mul, size_t mod, float scale, float shift) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * mul) % mod) * scale - shift;
    return h;
}

static float *host_filled(size_t n, float value) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = value;
    return h;
}

static void expect_error(rill_status want, rill_status got, const char *words) {
    contract_expect_error(want, got, "rill_op_conv2d_backward_f32", words);
}

/* A convolution's shape: n, c, h, w, k, r, sz, stride_h, stride_w, pad_h,
 * pad_w. */
typedef struct conv_case {
    size_t n, c, h, w, k, r, q, sh, sw, ph, pw;
} conv_case;

static size_t out_h(const conv_case *g) {
    return (g->h + 2 * g->ph - g->r) / g->sh + 1;
}
static size_t out_w(const conv_case *g) {
    return (g->w + 2 * g->pw - g->q) / g->sw + 1;
}

/* The gradients by direct sums over every (input, filter, output) triple of
 * the forward, in double precision: gin[2 i] and gwt[2 i] are element i's,
 * gin[2 i + 1] and gwt[2 i + 1] the sums of its terms' magnitudes. */
static void reference(const conv_case *g, const float *gout, const float *in, const float *wt,
                      double *gin, double *gwt) {
    size_t oh = out_h(g), ow = out_w(g);
    memset(gin, 0, 2 * g->n * g->c * g->h * g->w * sizeof *gin);
    memset(gwt, 0, 2 * g->k * g->c * g->r * g->q * sizeof *gwt);
    for (size_t b = 0; b < g->n; b++)
        for (size_t o = 0; o < g->k; o++)
            for (size_t y = 0; y < oh; y++)
                for (size_t x = 0; x < ow; x++) {
                    double d = gout[((b * g->k + o) * oh + y) * ow + x];
                    for (size_t ci = 0; ci < g->c; ci++)
                        for (size_t dy = 0; dy < g->r; dy++)
                            for (size_t dx = 0; dx < g->q; dx++) {
                                long iy = (long)(y * g->sh + dy) - (long)g->ph;
                                long ix = (long)(x * g->sw + dx) - (long)g->pw;
                                if (iy < 0 || ix < 0 || iy >= (long)g->h || ix >= (long)g->w)
                                    continue;
                                size_t ii =
                                    ((b * g->c + ci) * g->h + (size_t)iy) * g->w + (size_t)ix;
                                size_t wi = ((o * g->c + ci) * g->r + dy) * g->q + dx;
                                gin[2 * ii] += d * wt[wi];
                                gin[2 * ii + 1] += fabs(d * wt[wi]);
                                gwt[2 * wi] += d * in[ii];
                                gwt[2 * wi + 1] += fabs(d * in[ii]);
                            }
                }
}

/* got against a sum of reference's (want[0], its magnitudes' sum want[1]):
 * float sums in any order (cuDNN's algorithms add in blocks, or through
 * transforms) are within a small multiple of the float epsilon of the
 * magnitudes' sum. */
static void expect_sum(const char *what, size_t i, float got, const double *want) {
    if (!(fabs(got - want[0]) <= 1e-4 * (1.0 + fabs(want[0])) + 1e-5 * want[1]))
        fail_msg("%s[%zu] = %.9g, want %.9g (its terms' magnitudes sum to %.9g)", what, i, got,
                 want[0], want[1]);
}

/* "grad_in [n,c,h,w] receives the gradient with respect to in ... and
 * grad_weight [k,c,r,sz] the gradient with respect to weight ... Each is
 * overwritten, not added to." "On a CPU device ... a call repeated on one
 * device gives the same bits" (cuDNN may choose an algorithm that does
 * not). */
static void test_conv2d_backward_matches_direct_sums(void **state) {
    (void)state;
    const conv_case cases[] = {
        {2, 3, 9, 8, 5, 3, 3, 1, 1, 1, 1},     /* stride 1, padding 1 */
        {2, 3, 11, 10, 4, 3, 2, 2, 2, 0, 0},   /* stride 2, a 3x2 filter */
        {1, 2, 7, 9, 3, 2, 3, 2, 1, 2, 1},     /* padding 2 */
        {2, 5, 13, 12, 6, 5, 3, 2, 3, 2, 1},   /* c != k, mixed strides */
        {3, 4, 6, 6, 2, 1, 1, 1, 1, 0, 0},     /* pointwise */
        {1, 10, 30, 30, 12, 3, 3, 1, 1, 1, 1}, /* groups of channels over blocks */
        {4, 8, 20, 20, 8, 3, 3, 2, 2, 1, 1},   /* several images over blocks */
        {3, 2, 16, 16, 3, 3, 3, 1, 1, 1, 1},   /* weight gradient: products of 2 and 1 images */
        {1, 16, 200, 200, 1, 3, 3, 1, 1, 1, 1} /* bands shorter than the output */
    };
    rill_stream *s = contract_stream();
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const conv_case *g = &cases[t];
        size_t oh = out_h(g), ow = out_w(g);
        size_t in_n = g->n * g->c * g->h * g->w, wt_n = g->k * g->c * g->r * g->q;
        size_t out_n = g->n * g->k * oh * ow;
        float *hin = host_values(in_n, 37, 23, 0.25f, 2.5f);
        float *hwt = host_values(wt_n, 11, 7, 0.3f, 0.9f);
        float *hgo = host_values(out_n, 13, 17, 0.125f, 1.0f);
        float *garbage_in = host_filled(in_n, 7.0f), *garbage_wt = host_filled(wt_n, -3.0f);
        double *want_in = malloc(2 * in_n * sizeof *want_in),
               *want_wt = malloc(2 * wt_n * sizeof *want_wt);
        reference(g, hgo, hin, hwt, want_in, want_wt);
        float *in = contract_floats(s, hin, in_n), *wt = contract_floats(s, hwt, wt_n),
              *go = contract_floats(s, hgo, out_n);
        float *gin = contract_floats(s, garbage_in, in_n),
              *gwt = contract_floats(s, garbage_wt, wt_n);
        float *got_in = malloc(in_n * sizeof *got_in), *got_wt = malloc(wt_n * sizeof *got_wt);
        RT_OK(rill_op_conv2d_backward_f32(s, gin, gwt, go, in, wt, g->n, g->c, g->h, g->w, g->k,
                                          g->r, g->q, g->sh, g->sw, g->ph, g->pw));
        contract_download(s, got_in, gin, in_n * sizeof *got_in);
        contract_download(s, got_wt, gwt, wt_n * sizeof *got_wt);
        for (size_t i = 0; i < in_n; i++)
            expect_sum("grad_in", i, got_in[i], &want_in[2 * i]);
        for (size_t i = 0; i < wt_n; i++)
            expect_sum("grad_weight", i, got_wt[i], &want_wt[2 * i]);

        /* Again, into the results of the first call: the same bits. */
        if (contract_kind(contract_device()) == RILL_DEVICE_CPU) {
            float *again_in = malloc(in_n * sizeof *again_in);
            float *again_wt = malloc(wt_n * sizeof *again_wt);
            RT_OK(rill_op_conv2d_backward_f32(s, gin, gwt, go, in, wt, g->n, g->c, g->h, g->w, g->k,
                                              g->r, g->q, g->sh, g->sw, g->ph, g->pw));
            contract_download(s, again_in, gin, in_n * sizeof *again_in);
            contract_download(s, again_wt, gwt, wt_n * sizeof *again_wt);
            assert_memory_equal(again_in, got_in, in_n * sizeof *got_in);
            assert_memory_equal(again_wt, got_wt, wt_n * sizeof *got_wt);
            free(again_in);
            free(again_wt);
        }
        RT_OK(rill_free(in));
        RT_OK(rill_free(wt));
        RT_OK(rill_free(go));
        RT_OK(rill_free(gin));
        RT_OK(rill_free(gwt));
        free(hin);
        free(hwt);
        free(hgo);
        free(garbage_in);
        free(garbage_wt);
        free(want_in);
        free(want_wt);
        free(got_in);
        free(got_wt);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "Either may be NULL to skip it, but not both; in may be NULL when
 * grad_weight is, weight when grad_in is." */
static void test_conv2d_backward_one_gradient_at_a_time(void **state) {
    (void)state;
    const conv_case g = {2, 3, 10, 9, 4, 3, 2, 2, 1, 1, 0};
    size_t oh = out_h(&g), ow = out_w(&g);
    size_t in_n = g.n * g.c * g.h * g.w, wt_n = g.k * g.c * g.r * g.q, out_n = g.n * g.k * oh * ow;
    float *hin = host_values(in_n, 37, 23, 0.25f, 2.5f);
    float *hwt = host_values(wt_n, 11, 7, 0.3f, 0.9f);
    float *hgo = host_values(out_n, 13, 17, 0.125f, 1.0f);
    float *untouched = host_filled(in_n > wt_n ? in_n : wt_n, 5.0f);
    double *want_in = malloc(2 * in_n * sizeof *want_in),
           *want_wt = malloc(2 * wt_n * sizeof *want_wt);
    reference(&g, hgo, hin, hwt, want_in, want_wt);
    rill_stream *s = contract_stream();
    float *in = contract_floats(s, hin, in_n), *wt = contract_floats(s, hwt, wt_n),
          *go = contract_floats(s, hgo, out_n);
    float *gin = contract_floats(s, untouched, in_n), *gwt = contract_floats(s, untouched, wt_n);
    float *got = malloc((in_n > wt_n ? in_n : wt_n) * sizeof *got);

    /* The input gradient alone, without in. */
    RT_OK(rill_op_conv2d_backward_f32(s, gin, NULL, go, NULL, wt, g.n, g.c, g.h, g.w, g.k, g.r, g.q,
                                      g.sh, g.sw, g.ph, g.pw));
    contract_download(s, got, gin, in_n * sizeof *got);
    for (size_t i = 0; i < in_n; i++)
        expect_sum("grad_in", i, got[i], &want_in[2 * i]);
    contract_download(s, got, gwt, wt_n * sizeof *got);
    assert_memory_equal(got, untouched, wt_n * sizeof *got);

    /* The weight gradient alone, without weight. */
    RT_OK(rill_op_conv2d_backward_f32(s, NULL, gwt, go, in, NULL, g.n, g.c, g.h, g.w, g.k, g.r, g.q,
                                      g.sh, g.sw, g.ph, g.pw));
    contract_download(s, got, gwt, wt_n * sizeof *got);
    for (size_t i = 0; i < wt_n; i++)
        expect_sum("grad_weight", i, got[i], &want_wt[2 * i]);

    RT_OK(rill_free(in));
    RT_OK(rill_free(wt));
    RT_OK(rill_free(go));
    RT_OK(rill_free(gin));
    RT_OK(rill_free(gwt));
    free(hin);
    free(hwt);
    free(hgo);
    free(untouched);
    free(want_in);
    free(want_wt);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* The forward's checks on the same shapes, and the gradients': each a
 * status and a sentence, with nothing run. */
static void test_conv2d_backward_refuses_bad_arguments(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    /* A 1x1x8x8 input, a 1x1x3x3 filter, stride 1, no padding: grad_out
     * 1x1x6x6. a holds 64 floats, b 64. */
    float *a = contract_floats(s, NULL, 64), *b = contract_floats(s, NULL, 64),
          *c = contract_floats(s, NULL, 64);
    float *d = contract_floats(s, NULL, 64);
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, NULL, NULL, a, b, c, 1, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0),
        "both NULL");
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, d, NULL, NULL, b, c, 1, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0),
        "grad_out is NULL");
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, d, NULL, a, b, NULL, 1, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0),
        "weight is NULL");
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, NULL, d, a, NULL, c, 1, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0),
        "in is NULL");
    expect_error(RILL_ERROR_INVALID_ARGUMENT,
                 rill_op_conv2d_backward_f32(s, d, NULL, a, b, c, 0, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0),
                 "n is 0");
    expect_error(RILL_ERROR_INVALID_ARGUMENT,
                 rill_op_conv2d_backward_f32(s, d, NULL, a, b, c, 1, 1, 8, 8, 1, 3, 3, 0, 1, 0, 0),
                 "stride_h");
    expect_error(RILL_ERROR_INVALID_ARGUMENT,
                 rill_op_conv2d_backward_f32(s, d, NULL, a, b, c, 1, 1, 2, 2, 1, 5, 5, 1, 1, 1, 1),
                 "larger than the padded input");
    expect_error(RILL_ERROR_INVALID_ARGUMENT,
                 rill_op_conv2d_backward_f32(s, d, NULL, a, b, c, (size_t)1 << 30, (size_t)1 << 30,
                                             8, 8, 1, 3, 3, 1, 1, 0, 0),
                 "fit in memory");
    /* 2 channels: grad_in (128 floats) runs past d's 64. */
    expect_error(RILL_ERROR_INVALID_ARGUMENT,
                 rill_op_conv2d_backward_f32(s, d, NULL, a, b, c, 1, 2, 8, 8, 1, 3, 3, 1, 1, 0, 0),
                 "grad_in");
    /* A 5x5 filter's 25 floats from a + 40 reach past a's 64 (2 filters: 50). */
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, NULL, a + 40, b, c, NULL, 1, 1, 8, 8, 2, 5, 5, 1, 1, 0, 0),
        "grad_weight");
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, a + 8, NULL, a, b, c, 1, 1, 6, 6, 1, 3, 3, 1, 1, 0, 0),
        "grad_in overlaps grad_out");
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, NULL, b + 4, a, b, c, 1, 1, 6, 6, 1, 3, 3, 1, 1, 0, 0),
        "grad_weight overlaps in");
    expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_conv2d_backward_f32(s, d, d + 30, a, b, c, 1, 1, 6, 6, 1, 3, 3, 1, 1, 0, 0),
        "grad_weight overlaps grad_in");
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
    RT_OK(rill_free(d));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_backward_matches_direct_sums),
        cmocka_unit_test(test_conv2d_backward_one_gradient_at_a_time),
        cmocka_unit_test(test_conv2d_backward_refuses_bad_arguments),
    };
    return CONTRACT_RUN(tests);
}
