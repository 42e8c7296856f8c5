/* SPDX-License-Identifier: MIT */
/* The backward of 2-D pooling on the device under test (contract.h): max
 * pooling's scatter by the forward's positions and average pooling's
 * gather, each against a naive scatter computed here on the host in the
 * same order (so bit for bit), over shapes, strides and paddings in one
 * block and over several; an index out of range failing the launch; and
 * the refusals, each with its sentence. */
#include "contract.h"

#include <stdlib.h>
#include <string.h>

/* Values that round when summed: sums in another order would differ. */
static float *host_values(size_t n, size_t seed) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] =
            ((float)(((i + seed) * 37) % 23) * 0.25f - 2.5f) * (1.0f + (float)(i % 13) * 0.0625f);
    return h;
}

/* A pooling's geometry: planes images [h, w], window r x q, strides and
 * padding. */
typedef struct geometry {
    size_t planes, h, w, r, q, sh, sw, ph, pw;
} geometry;

/* Small images in one block; overlapping windows (positions named by
 * several outputs); rectangular windows and strides; padding; and enough
 * planes for several blocks. */
static const geometry shapes[] = {{3, 4, 4, 2, 2, 2, 2, 0, 0},    {2, 7, 6, 3, 3, 1, 1, 1, 1},
                                  {4, 9, 8, 3, 3, 2, 2, 1, 1},    {3, 8, 9, 3, 2, 1, 2, 1, 0},
                                  {2, 5, 5, 5, 5, 1, 1, 2, 2},    {1, 6, 11, 1, 3, 3, 1, 0, 1},
                                  {600, 16, 15, 3, 3, 2, 2, 1, 1}};

static size_t out_size(size_t n, size_t k, size_t stride, size_t pad) {
    return (n + 2 * pad - k) / stride + 1;
}

/* "grad_in [planes, h, w] is overwritten with 0 plus, at each position
 * that indices names within its image, the sum of the grad_out elements
 * that name it, added in order of (y, x)": with the indices of
 * rill_op_max_pool2d_f32 on the device, against the scatter on the host;
 * grad_in starts as garbage. */
static void test_max_pool2d_backward_scatters_by_indices(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        geometry g = shapes[t];
        size_t oh = out_size(g.h, g.r, g.sh, g.ph), ow = out_size(g.w, g.q, g.sw, g.pw);
        size_t in_n = g.planes * g.h * g.w, out_n = g.planes * oh * ow;
        /* Few distinct values: ties, so the first largest matters. */
        float *hx = host_values(in_n, t), *hg = host_values(out_n, 7 * t + 1);
        for (size_t i = 0; i < in_n; i++)
            hx[i] = (float)((i * 7919) % 11);
        float *x = contract_floats(s, hx, in_n), *go = contract_floats(s, hg, out_n);
        float *y = contract_floats(s, NULL, out_n), *gi = contract_floats(s, NULL, in_n);
        int64_t *idx = contract_alloc(s, out_n * sizeof(int64_t));
        RT_OK(rill_op_max_pool2d_f32(s, y, idx, x, g.planes, g.h, g.w, g.r, g.q, g.sh, g.sw, g.ph,
                                     g.pw));
        RT_OK(rill_memset_async(gi, 0xff, in_n * sizeof(float), s));
        RT_OK(rill_op_max_pool2d_backward_f32(s, gi, go, idx, g.planes, g.h, g.w, oh, ow));
        int64_t *hi = malloc(out_n * sizeof *hi);
        float *want = calloc(in_n, sizeof *want), *got = malloc(in_n * sizeof *got);
        contract_download(s, hi, idx, out_n * sizeof *hi);
        contract_download(s, got, gi, in_n * sizeof *got);
        for (size_t p = 0; p < g.planes; p++)
            for (size_t i = 0; i < oh * ow; i++) {
                int64_t at = hi[p * oh * ow + i];
                assert_true(at >= 0 && (size_t)at < g.h * g.w);
                want[p * g.h * g.w + (size_t)at] += hg[p * oh * ow + i];
            }
        for (size_t i = 0; i < in_n; i++)
            if (got[i] != want[i])
                fail_msg("shape %zu: grad_in[%zu] = %.9g, want %.9g", t, i, got[i], want[i]);
        RT_OK(rill_free(x));
        RT_OK(rill_free(go));
        RT_OK(rill_free(y));
        RT_OK(rill_free(gi));
        RT_OK(rill_free(idx));
        free(hx);
        free(hg);
        free(hi);
        free(want);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "grad_in[p, yy, xx] = the sum, in order of (y, x), of grad_out[p, y, x] /
 * (r*sz) over the outputs whose window holds (yy, xx), and 0 where none
 * does": against the forward's definition turned into a scatter on the
 * host (padding counted in the divisor); grad_in starts as garbage. */
static void test_avg_pool2d_backward_spreads_over_windows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        geometry g = shapes[t];
        size_t oh = out_size(g.h, g.r, g.sh, g.ph), ow = out_size(g.w, g.q, g.sw, g.pw);
        size_t in_n = g.planes * g.h * g.w, out_n = g.planes * oh * ow;
        float *hg = host_values(out_n, t);
        float *go = contract_floats(s, hg, out_n), *gi = contract_floats(s, NULL, in_n);
        RT_OK(rill_memset_async(gi, 0xff, in_n * sizeof(float), s));
        RT_OK(rill_op_avg_pool2d_backward_f32(s, gi, go, g.planes, g.h, g.w, g.r, g.q, g.sh, g.sw,
                                              g.ph, g.pw));
        float *want = calloc(in_n, sizeof *want), *got = malloc(in_n * sizeof *got);
        float divisor = (float)(g.r * g.q);
        for (size_t p = 0; p < g.planes; p++)
            for (size_t y = 0; y < oh; y++)
                for (size_t x = 0; x < ow; x++)
                    for (size_t dy = 0; dy < g.r; dy++)
                        for (size_t dx = 0; dx < g.q; dx++) {
                            long iy = (long)(y * g.sh + dy) - (long)g.ph;
                            long ix = (long)(x * g.sw + dx) - (long)g.pw;
                            if (iy < 0 || ix < 0 || iy >= (long)g.h || ix >= (long)g.w)
                                continue;
                            want[(p * g.h + (size_t)iy) * g.w + (size_t)ix] +=
                                hg[(p * oh + y) * ow + x] / divisor;
                        }
        contract_download(s, got, gi, in_n * sizeof *got);
        for (size_t i = 0; i < in_n; i++)
            if (got[i] != want[i])
                fail_msg("shape %zu: grad_in[%zu] = %.9g, want %.9g", t, i, got[i], want[i]);
        RT_OK(rill_free(go));
        RT_OK(rill_free(gi));
        free(hg);
        free(want);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "An index below 0 or at least h*w fails the launch as
 * rill_op_embedding_f32's do (the sentence names the index, its position
 * and its plane)": a too large and a negative index, on a CPU device (a
 * CUDA device traps, which ends its context). */
static void test_max_pool2d_backward_index_out_of_range_fails_the_launch(void **state) {
    (void)state;
    if (contract_kind(contract_device()) != RILL_DEVICE_CPU)
        skip(); /* a trap would end the device */
    rill_stream *s = contract_stream();
    size_t planes = 2, h = 4, w = 4, oh = 2, ow = 2;
    float *hg = host_values(planes * oh * ow, 0);
    float *go = contract_floats(s, hg, planes * oh * ow),
          *gi = contract_floats(s, NULL, planes * h * w);
    int64_t bad[2][8] = {{0, 1, 2, 3, 4, 5, 16, 7}, {-1, 0, 0, 0, 0, 0, 0, 0}};
    const char *words[2] = {
        "index 16 at position 2 of plane 1 is out of range for an image of 16 elements",
        "index -1 at position 0 of plane 0 is out of range for an image of 16 elements"};
    for (int k = 0; k < 2; k++) {
        int64_t *idx = contract_alloc(s, sizeof bad[k]);
        contract_upload(s, idx, bad[k], sizeof bad[k]);
        RT_OK(rill_op_max_pool2d_backward_f32(s, gi, go, idx, planes, h, w, oh, ow));
        contract_expect_error(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s),
                              "max_pool2d_backward_f32", words[k]);
        RT_OK(rill_stream_clear_error(s));
        RT_OK(rill_free(idx));
    }
    RT_OK(rill_free(go));
    RT_OK(rill_free(gi));
    free(hg);
    RT_OK(rill_stream_destroy(s));
}

/* Each checks its arguments first (RILL_ERROR_INVALID_ARGUMENT with a
 * sentence naming the argument; nothing runs). a and b hold 64 floats
 * each; b's last 32 floats (16 int64s) serve as indices. */
static void test_pool2d_backward_refuses_bad_arguments(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    float *a = contract_floats(s, NULL, 64), *b = contract_floats(s, NULL, 64);
    int64_t *idx = (int64_t *)(b + 32);
    static const char max[] = "rill_op_max_pool2d_backward_f32";
    static const char avg[] = "rill_op_avg_pool2d_backward_f32";
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, NULL, b, idx, 1, 8, 8, 4, 4), max,
                          "grad_in is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, NULL, idx, 1, 8, 8, 4, 4), max,
                          "grad_out is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, b, NULL, 1, 8, 8, 4, 4), max,
                          "indices is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, b, idx, 0, 8, 8, 4, 4), max,
                          "planes is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, b, idx, 1, 8, 8, 0, 4), max,
                          "oh is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, b, idx, 1, 8, 9, 4, 4), max,
                          "grad_in"); /* 72 floats: past a's 64 */
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, b, idx, 1, 8, 8, 4, 5), max,
                          "indices"); /* 20 int64s: past b's end */
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_max_pool2d_backward_f32(s, a, b, idx, 1, 8, 8, (size_t)1 << 40, (size_t)1 << 40),
        max, "fit in memory");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_max_pool2d_backward_f32(s, b, a, (int64_t *)(b + 8), 1, 4, 4, 2, 2), max,
        "overlaps indices");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_max_pool2d_backward_f32(s, a, a + 8, idx, 1, 4, 4, 2, 2), max,
                          "overlaps grad_out");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, NULL, b, 1, 8, 8, 2, 2, 2, 2, 0, 0),
                          avg, "grad_in is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, b, 0, 8, 8, 2, 2, 2, 2, 0, 0), avg,
                          "planes is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, b, 1, 8, 8, 2, 2, 0, 2, 0, 0), avg,
                          "stride_h");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, b, 1, 8, 8, 2, 2, 2, 2, 2, 0), avg,
                          "half the window");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, b, 1, 2, 2, 5, 5, 1, 1, 1, 1), avg,
                          "larger than the padded input");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, b, 1, 8, 8, 0, 2, 2, 2, 0, 0), avg,
                          "r is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, b, 2, 8, 8, 2, 2, 2, 2, 0, 0), avg,
                          "grad_in"); /* 128 floats: past a's 64 */
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_avg_pool2d_backward_f32(s, a, a + 8, 1, 4, 4, 2, 2, 2, 2, 0, 0),
                          avg, "overlaps grad_out");
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_pool2d_backward_scatters_by_indices),
        cmocka_unit_test(test_avg_pool2d_backward_spreads_over_windows),
        cmocka_unit_test(test_max_pool2d_backward_index_out_of_range_fails_the_launch),
        cmocka_unit_test(test_pool2d_backward_refuses_bad_arguments),
    };
    return CONTRACT_RUN(tests);
}
