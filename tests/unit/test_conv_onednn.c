/* SPDX-License-Identifier: MIT */
/* conv2d and its gradients on oneDNN (src/backend/cpu/conv_onednn.h): for
 * grids of 1 to 5 blocks, every block run on its own, over geometries with
 * strides, dilations, padding, channel counts that fill no whole block of
 * 16, and fewer images than blocks (slices of channels); each output
 * element written by exactly one block, and equal to a double-precision
 * sum. Grouped convolutions are refused with nothing written. Where rill
 * was built without oneDNN (RILL_TEST_ONEDNN unset) or the processor has
 * no AVX2, every call is refused. */
#include "fixture.h"

#include "backend/cpu/conv_onednn.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

typedef struct geometry {
    size_t n, c, h, w, k, r, s, stride, pad, dil;
} geometry;

static const geometry geometries[] = {
    {1, 3, 9, 9, 5, 3, 3, 1, 1, 1},     {3, 20, 8, 7, 40, 3, 3, 1, 1, 1},
    {2, 17, 11, 10, 33, 3, 3, 2, 1, 1}, {1, 40, 9, 9, 24, 1, 1, 2, 0, 1},
    {2, 3, 16, 15, 18, 7, 7, 2, 3, 1},  {4, 8, 10, 12, 16, 3, 3, 1, 2, 2},
    {5, 32, 6, 6, 48, 3, 3, 1, 0, 1},
};

static bool taken(void) {
#if defined(RILL_TEST_ONEDNN) && defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

enum kind { FORWARD, DATA, FILTER };

/* The tensors of one geometry, in floats: in [n,c,h,w], weight [k,c,r,s],
 * out [n,k,oh,ow]. */
typedef struct tensors {
    size_t oh, ow, in_n, w_n, out_n;
    float *in, *weight, *out;
} tensors;

static tensors make(const geometry *g) {
    tensors t;
    t.oh = (g->h + 2 * g->pad - (g->r - 1) * g->dil - 1) / g->stride + 1;
    t.ow = (g->w + 2 * g->pad - (g->s - 1) * g->dil - 1) / g->stride + 1;
    t.in_n = g->n * g->c * g->h * g->w;
    t.w_n = g->k * g->c * g->r * g->s;
    t.out_n = g->n * g->k * t.oh * t.ow;
    t.in = rt_floats(t.in_n);
    t.weight = rt_floats(t.w_n);
    t.out = rt_floats(t.out_n);
    rt_fill_uniform(t.in, t.in_n, 1 + g->c);
    rt_fill_uniform(t.weight, t.w_n, 2 + g->k);
    rt_fill_uniform(t.out, t.out_n, 3 + g->n);
    return t;
}

static void release(tensors *t) {
    free(t->in);
    free(t->weight);
    free(t->out);
}

/* Where tap (i, j) of output (y, x) reads the input, or false outside it. */
static bool source(const geometry *g, size_t y, size_t x, size_t i, size_t j, size_t *iy,
                   size_t *ix) {
    size_t yy = y * g->stride + i * g->dil, xx = x * g->stride + j * g->dil; /* + pad */
    if (yy < g->pad || yy - g->pad >= g->h || xx < g->pad || xx - g->pad >= g->w)
        return false;
    *iy = yy - g->pad;
    *ix = xx - g->pad;
    return true;
}

/* The kind's result in double (its sums of magnitudes in mag), and the
 * number of terms of the longest sum. */
static size_t reference(const geometry *g, const tensors *t, enum kind kind, double *want,
                        double *mag, size_t count) {
    for (size_t i = 0; i < count; i++)
        want[i] = mag[i] = 0.0;
    for (size_t img = 0; img < g->n; img++)
        for (size_t f = 0; f < g->k; f++)
            for (size_t y = 0; y < t->oh; y++)
                for (size_t x = 0; x < t->ow; x++)
                    for (size_t ci = 0; ci < g->c; ci++)
                        for (size_t i = 0; i < g->r; i++)
                            for (size_t j = 0; j < g->s; j++) {
                                size_t iy, ix;
                                if (!source(g, y, x, i, j, &iy, &ix))
                                    continue;
                                size_t in_at = ((img * g->c + ci) * g->h + iy) * g->w + ix;
                                size_t w_at = ((f * g->c + ci) * g->r + i) * g->s + j;
                                size_t out_at = ((img * g->k + f) * t->oh + y) * t->ow + x;
                                double v;
                                size_t at;
                                if (kind == FORWARD)
                                    v = (double)t->in[in_at] * t->weight[w_at], at = out_at;
                                else if (kind == DATA)
                                    v = (double)t->out[out_at] * t->weight[w_at], at = in_at;
                                else
                                    v = (double)t->out[out_at] * t->in[in_at], at = w_at;
                                want[at] += v;
                                mag[at] += fabs(v);
                            }
    if (kind == FORWARD)
        return g->c * g->r * g->s;
    if (kind == DATA)
        return g->k * g->r * g->s;
    return g->n * t->oh * t->ow;
}

/* Runs block b of a grid of `blocks` of kind on g's tensors, in `groups`
 * convolution groups, the result into dst. */
static bool run_block(const geometry *g, tensors *t, enum kind kind, size_t groups, size_t blocks,
                      size_t b, float *dst) {
    rill_block_ctx ctx = {.block_idx = {(unsigned)b, 0, 0}, .grid_dim = {(unsigned)blocks, 1, 1}};
    if (kind == FORWARD) {
        rill__op_conv2d_ex_args p = {.out = dst,
                                     .in = t->in,
                                     .weight = t->weight,
                                     .n = g->n,
                                     .c = g->c,
                                     .h = g->h,
                                     .w = g->w,
                                     .k = g->k,
                                     .r = g->r,
                                     .s = g->s,
                                     .stride_h = g->stride,
                                     .stride_w = g->stride,
                                     .pad_h = g->pad,
                                     .pad_w = g->pad,
                                     .oh = t->oh,
                                     .ow = t->ow,
                                     .band_rows = t->oh,
                                     .dil_h = g->dil,
                                     .dil_w = g->dil,
                                     .groups = groups,
                                     .images = 1};
        return rill__cpu_onednn_conv2d(&ctx, &p);
    }
    rill__op_conv2d_backward_args p = {.grad_in = kind == DATA ? dst : NULL,
                                       .grad_weight = kind == FILTER ? dst : NULL,
                                       .grad_out = t->out,
                                       .in = t->in,
                                       .weight = t->weight,
                                       .n = g->n,
                                       .c = g->c,
                                       .h = g->h,
                                       .w = g->w,
                                       .k = g->k,
                                       .r = g->r,
                                       .s = g->s,
                                       .stride_h = g->stride,
                                       .stride_w = g->stride,
                                       .pad_h = g->pad,
                                       .pad_w = g->pad,
                                       .oh = t->oh,
                                       .ow = t->ow,
                                       .band_rows = t->oh,
                                       .groups = 1,
                                       .images = 1,
                                       .dil_h = g->dil,
                                       .dil_w = g->dil,
                                       .conv_groups = groups};
    return kind == DATA ? rill__cpu_onednn_conv2d_backward_data(&ctx, &p)
                        : rill__cpu_onednn_conv2d_backward_filter(&ctx, &p);
}

static void check(const geometry *g, enum kind kind, size_t blocks) {
    static const char *names[] = {"forward", "data gradient", "weight gradient"};
    tensors t = make(g);
    size_t count = kind == FORWARD ? t.out_n : kind == DATA ? t.in_n : t.w_n;
    double *want = malloc(count * sizeof *want), *mag = malloc(count * sizeof *mag);
    float *got = rt_floats(count), *dst = rt_floats(count);
    assert_non_null(want);
    assert_non_null(mag);
    size_t terms = reference(g, &t, kind, want, mag, count);
    unsigned char *writers = calloc(count, 1);
    assert_non_null(writers);
    for (size_t b = 0; b < blocks; b++) {
        for (size_t i = 0; i < count; i++)
            dst[i] = NAN;
        assert_int_equal(run_block(g, &t, kind, 1, blocks, b, dst), taken());
        if (!taken())
            break;
        for (size_t i = 0; i < count; i++)
            if (!isnan(dst[i])) {
                writers[i]++;
                got[i] = dst[i];
            }
    }
    for (size_t i = 0; taken() && i < count; i++) {
        if (writers[i] != 1)
            fail_msg("%s of %zux%zux%zux%zu * %zux%zux%zu stride %zu pad %zu dil %zu, %zu blocks: "
                     "element %zu written by %u blocks",
                     names[kind], g->n, g->c, g->h, g->w, g->k, g->r, g->s, g->stride, g->pad,
                     g->dil, blocks, i, writers[i]);
        if (!(fabs(got[i] - want[i]) <= (double)(terms + 2) * FLT_EPSILON * mag[i]))
            fail_msg("%s of %zux%zux%zux%zu * %zux%zux%zu stride %zu pad %zu dil %zu, %zu blocks: "
                     "element %zu is %.9g, want %.9g",
                     names[kind], g->n, g->c, g->h, g->w, g->k, g->r, g->s, g->stride, g->pad,
                     g->dil, blocks, i, got[i], want[i]);
    }
    free(writers);
    free(want);
    free(mag);
    free(got);
    free(dst);
    release(&t);
}

static void test_onednn_matches_the_sum(void **state, enum kind kind) {
    (void)state;
    for (size_t i = 0; i < sizeof geometries / sizeof geometries[0]; i++)
        for (size_t blocks = 1; blocks <= 5; blocks++)
            check(&geometries[i], kind, blocks);
}

static void test_onednn_forward(void **state) {
    test_onednn_matches_the_sum(state, FORWARD);
}

static void test_onednn_data_gradient(void **state) {
    test_onednn_matches_the_sum(state, DATA);
}

static void test_onednn_weight_gradient(void **state) {
    test_onednn_matches_the_sum(state, FILTER);
}

/* Grouped convolutions stay with rill's own bodies, untouched here. */
static void test_onednn_refuses_groups(void **state) {
    (void)state;
    geometry g = {2, 4, 5, 5, 4, 3, 3, 1, 1, 1};
    tensors t = make(&g);
    size_t count = t.in_n > t.out_n ? t.in_n : t.out_n;
    float *dst = rt_floats(count);
    for (enum kind kind = FORWARD; kind <= FILTER; kind++) {
        for (size_t i = 0; i < count; i++)
            dst[i] = NAN;
        assert_false(run_block(&g, &t, kind, 2, 1, 0, dst));
        for (size_t i = 0; i < count; i++)
            assert_true(isnan(dst[i]));
    }
    free(dst);
    release(&t);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onednn_forward),
        cmocka_unit_test(test_onednn_data_gradient),
        cmocka_unit_test(test_onednn_weight_gradient),
        cmocka_unit_test(test_onednn_refuses_groups),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
