/* SPDX-License-Identifier: MIT */
/* The CPU conv2d without im2col (src/backend/cpu/conv_direct.h): padded
 * and unpadded filters of several sizes, filter counts that fill no whole
 * tile, more taps than one run, rows whose tiles straddle two output rows,
 * bands of an image and several images at once, against a double-precision
 * convolution; outputs outside the band untouched; and the cases it
 * refuses (strides, dilations, groups, too little scratch, no AVX-512F). */
#include "fixture.h"

#include "backend/cpu/conv_direct.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

typedef struct geometry {
    size_t n, c, h, w, k, r, s, pad_h, pad_w;
} geometry;

static const geometry geometries[] = {
    {1, 1, 1, 1, 1, 1, 1, 0, 0},     {2, 3, 5, 7, 4, 3, 3, 1, 1},
    {1, 5, 9, 40, 13, 2, 3, 0, 1},   {3, 16, 14, 14, 25, 3, 3, 1, 1},
    {1, 50, 12, 33, 12, 3, 3, 1, 1}, {2, 7, 11, 13, 29, 5, 5, 2, 2},
    {1, 2, 3, 3, 1, 3, 3, 0, 0},     {1, 1, 1, 40, 3, 1, 3, 0, 1},
    {2, 9, 8, 20, 17, 1, 1, 0, 0},
};

static bool has_avx512(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

static rill__op_conv2d_ex_args args_of(const geometry *g) {
    rill__op_conv2d_ex_args p = {.n = g->n,
                                 .c = g->c,
                                 .h = g->h,
                                 .w = g->w,
                                 .k = g->k,
                                 .r = g->r,
                                 .s = g->s,
                                 .stride_h = 1,
                                 .stride_w = 1,
                                 .pad_h = g->pad_h,
                                 .pad_w = g->pad_w,
                                 .oh = g->h + 2 * g->pad_h - g->r + 1,
                                 .ow = g->w + 2 * g->pad_w - g->s + 1,
                                 .band_rows = 1,
                                 .dil_h = 1,
                                 .dil_w = 1,
                                 .groups = 1,
                                 .images = 1};
    return p;
}

/* Runs the direct conv over p's images in bands of `band` rows, or all
 * images at once when band is 0, and checks every output against the sum
 * in double: within (taps + 2) float epsilons of the sum of its terms'
 * magnitudes. */
static void check_geometry(const geometry *g, size_t band) {
    rill__op_conv2d_ex_args p = args_of(g);
    size_t in_n = p.n * p.c * p.h * p.w, w_n = p.k * p.c * p.r * p.s;
    size_t out_n = p.n * p.k * p.oh * p.ow, taps = p.c * p.r * p.s;
    float *in = rt_floats(in_n), *weight = rt_floats(w_n), *out = rt_floats(out_n);
    rt_fill_uniform(in, in_n, 1 + g->c);
    rt_fill_uniform(weight, w_n, 2 + g->k);
    for (size_t i = 0; i < out_n; i++)
        out[i] = NAN;
    p.in = in;
    p.weight = weight;
    p.out = out;
    size_t rows = band == 0 ? p.oh : band;
    size_t count = band == 0 ? p.n : 1;
    size_t scratch_n = rill__cpu_conv2d_direct_floats(&p, count, rows);
    float *scratch = rt_floats(scratch_n);
    if (band == 0) {
        assert_true(rill__cpu_conv2d_direct(&p, 0, p.n, 0, p.oh, scratch, scratch_n));
    } else {
        for (size_t img = 0; img < p.n; img++)
            for (size_t y = 0; y < p.oh; y += band) {
                size_t b = p.oh - y < band ? p.oh - y : band;
                assert_true(rill__cpu_conv2d_direct(&p, img, 1, y, b, scratch, scratch_n));
            }
    }
    for (size_t img = 0; img < p.n; img++)
        for (size_t f = 0; f < p.k; f++)
            for (size_t y = 0; y < p.oh; y++)
                for (size_t x = 0; x < p.ow; x++) {
                    double want = 0.0, mag = 0.0;
                    for (size_t ci = 0; ci < p.c; ci++)
                        for (size_t i = 0; i < p.r; i++)
                            for (size_t j = 0; j < p.s; j++) {
                                size_t iy = y + i, ix = x + j; /* + pad: unsigned */
                                if (iy < p.pad_h || iy - p.pad_h >= p.h || ix < p.pad_w ||
                                    ix - p.pad_w >= p.w)
                                    continue;
                                double t =
                                    (double)in[((img * p.c + ci) * p.h + iy - p.pad_h) * p.w + ix -
                                               p.pad_w] *
                                    weight[((f * p.c + ci) * p.r + i) * p.s + j];
                                want += t;
                                mag += fabs(t);
                            }
                    double got = out[((img * p.k + f) * p.oh + y) * p.ow + x];
                    if (!(fabs(got - want) <= (double)(taps + 2) * FLT_EPSILON * mag))
                        fail_msg("%zux%zux%zux%zu * %zux%zux%zu pad %zu,%zu (band %zu): "
                                 "out[%zu][%zu][%zu][%zu] is %.9g, want %.9g",
                                 p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.pad_h, p.pad_w, band, img, f,
                                 y, x, got, want);
                }
    free(in);
    free(weight);
    free(out);
    free(scratch);
}

static void test_conv_direct_matches_the_sum(void **state) {
    (void)state;
    if (!has_avx512())
        skip();
    for (size_t i = 0; i < sizeof geometries / sizeof geometries[0]; i++) {
        check_geometry(&geometries[i], 0); /* every image at once */
        check_geometry(&geometries[i], 1); /* a row a band */
        check_geometry(&geometries[i], 3);
    }
}

/* A band writes its rows and no others. */
static void test_conv_direct_writes_only_its_band(void **state) {
    (void)state;
    if (!has_avx512())
        skip();
    geometry g = {2, 4, 10, 21, 5, 3, 3, 1, 1};
    rill__op_conv2d_ex_args p = args_of(&g);
    size_t in_n = p.n * p.c * p.h * p.w, w_n = p.k * p.c * p.r * p.s;
    size_t out_n = p.n * p.k * p.oh * p.ow;
    float *in = rt_floats(in_n), *weight = rt_floats(w_n), *out = rt_floats(out_n);
    rt_fill_uniform(in, in_n, 5);
    rt_fill_uniform(weight, w_n, 6);
    for (size_t i = 0; i < out_n; i++)
        out[i] = NAN;
    p.in = in;
    p.weight = weight;
    p.out = out;
    size_t scratch_n = rill__cpu_conv2d_direct_floats(&p, 1, 4);
    float *scratch = rt_floats(scratch_n);
    assert_true(rill__cpu_conv2d_direct(&p, 1, 1, 3, 4, scratch, scratch_n));
    for (size_t img = 0; img < p.n; img++)
        for (size_t f = 0; f < p.k; f++)
            for (size_t y = 0; y < p.oh; y++)
                for (size_t x = 0; x < p.ow; x++) {
                    bool inside = img == 1 && y >= 3 && y < 7;
                    assert_int_equal(isnan(out[((img * p.k + f) * p.oh + y) * p.ow + x]), !inside);
                }
    free(in);
    free(weight);
    free(out);
    free(scratch);
}

/* Strides, dilations, groups and short scratch are the im2col path's; so
 * is every conv on a processor without AVX-512F. Nothing is written. */
static void test_conv_direct_refuses_what_it_does_not_take(void **state) {
    (void)state;
    geometry g = {1, 4, 9, 9, 4, 3, 3, 1, 1};
    rill__op_conv2d_ex_args base = args_of(&g);
    float in[4 * 81], weight[4 * 4 * 9], out[4 * 81];
    rt_fill_uniform(in, 4 * 81, 1);
    rt_fill_uniform(weight, 4 * 4 * 9, 2);
    base.in = in;
    base.weight = weight;
    base.out = out;
    size_t scratch_n = rill__cpu_conv2d_direct_floats(&base, 1, base.oh);
    float *scratch = rt_floats(scratch_n);
    rill__op_conv2d_ex_args bad[5];
    for (int i = 0; i < 5; i++)
        bad[i] = base;
    bad[0].stride_h = 2;
    bad[1].stride_w = 2;
    bad[2].dil_h = 2;
    bad[3].dil_w = 2;
    bad[4].groups = 2;
    for (int i = 0; i < 5; i++) {
        for (size_t j = 0; j < 4 * 81; j++)
            out[j] = NAN;
        assert_false(rill__cpu_conv2d_direct(&bad[i], 0, 1, 0, base.oh, scratch, scratch_n));
        for (size_t j = 0; j < 4 * 81; j++)
            assert_true(isnan(out[j]));
    }
    assert_false(rill__cpu_conv2d_direct(&base, 0, 1, 0, base.oh, scratch, scratch_n - 1));
    assert_int_equal(rill__cpu_conv2d_direct(&base, 0, 1, 0, base.oh, scratch, scratch_n),
                     has_avx512());
    free(scratch);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_direct_matches_the_sum),
        cmocka_unit_test(test_conv_direct_writes_only_its_band),
        cmocka_unit_test(test_conv_direct_refuses_what_it_does_not_take),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
