/* SPDX-License-Identifier: MIT */
/* The negative log likelihood loss and its backward on the device under
 * test (contract.h), of [n, classes] inputs and of [n, classes, inner]
 * ones: every reduction, with and without a class weight and ignored rows,
 * both target widths, in one block and over several, against
 * the formulas computed here on the host in rill.h's order (so bit for
 * bit); a mean of ignored rows only; a target out of range failing the
 * launch; and the refusals, each with its sentence. */
#include "contract.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Log-probability-like values that round when summed: a sum in another
 * order would differ. */
static float *host_values(size_t n, size_t seed) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] =
            -((float)(((i + seed) * 37) % 23) * 0.25f + 0.1f) * (1.0f + (float)(i % 13) * 0.0625f);
    return h;
}

static bool same_bits(float a, float b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The reduced loss as rill.h words it: row r's loss and weight go into the
 * partial sum of 1 row, which is carried into the sum of 16 rows after
 * each row r that is a multiple of 16, that into the sum of 256 rows when
 * r is also a multiple of 256, and so on (8 sums in all); the sums are
 * then added from the first up. Here for fewer than 2^32 rows, where the
 * groups are 4 bits. Row r = b*inner + e reads in[b, t, e]. */
static void host_reduce(const float *in, const int64_t *t, const float *w, size_t n, size_t c,
                        size_t inner, int64_t ignore, float *loss, float *total) {
    float sums[8] = {0}, weights[8] = {0};
    size_t kept = 0;
    for (size_t r = 0; r < n * inner; r++) {
        if (t[r] == ignore)
            continue;
        kept++;
        float x = in[(r / inner * c + (size_t)t[r]) * inner + r % inner];
        sums[0] = w ? sums[0] - x * w[t[r]] : sums[0] - x;
        weights[0] += w ? w[t[r]] : 0.0f;
        size_t group = 16;
        for (int j = 0; j < 7; j++, group *= 16) {
            if (r % group != 0)
                break;
            sums[j + 1] += sums[j];
            weights[j + 1] += weights[j];
            sums[j] = weights[j] = 0.0f;
        }
    }
    *loss = *total = 0.0f;
    for (int j = 0; j < 8; j++) {
        *loss += sums[j];
        *total += weights[j];
    }
    if (w == NULL)
        *total = (float)kept;
}

/* One case of the loss's tests: n images of c classes at inner positions
 * (inner 1: rows of rill_op_nll_loss_f32), the targets (some
 * ignore_index), an optional weight. */
typedef struct loss_case {
    size_t n, c, inner;
    float *in, *weight; /* host */
    int64_t *targets;   /* host, n*inner */
} loss_case;

static loss_case make_case(size_t n, size_t c, size_t inner, size_t seed, int64_t ignore) {
    loss_case k = {n, c, inner, host_values(n * c * inner, seed), malloc(c * sizeof(float)), NULL};
    k.targets = malloc(n * inner * sizeof *k.targets);
    for (size_t i = 0; i < n * inner; i++)
        k.targets[i] = i % 11 == 5 ? ignore : (int64_t)((i * 7919 + seed) % c);
    for (size_t j = 0; j < c; j++)
        k.weight[j] = 0.5f + (float)(j % 7) * 0.3f;
    return k;
}

/* rill_op_nll_loss_f32 for a case of inner 1, rill_op_nll_loss_nd_f32 for
 * the others. */
static rill_status forward(rill_stream *s, rill_loss_reduction r, float *out, float *tw,
                           const float *in, const void *t, size_t bytes, const float *w,
                           const loss_case *k, int64_t ignore) {
    return k->inner == 1 ? rill_op_nll_loss_f32(s, r, out, tw, in, t, bytes, w, k->n, k->c, ignore)
                         : rill_op_nll_loss_nd_f32(s, r, out, tw, in, t, bytes, w, k->n, k->c,
                                                   k->inner, ignore);
}

static rill_status backward(rill_stream *s, rill_loss_reduction r, float *gi, const float *go,
                            const float *tw, const void *t, size_t bytes, const float *w,
                            const loss_case *k, int64_t ignore) {
    return k->inner == 1
               ? rill_op_nll_loss_backward_f32(s, r, gi, go, tw, t, bytes, w, k->n, k->c, ignore)
               : rill_op_nll_loss_backward_nd_f32(s, r, gi, go, tw, t, bytes, w, k->n, k->c,
                                                  k->inner, ignore);
}

static void free_case(loss_case *k) {
    free(k->in);
    free(k->weight);
    free(k->targets);
}

static const char *reduction_name(rill_loss_reduction r) {
    return r == RILL_LOSS_NONE ? "none" : r == RILL_LOSS_SUM ? "sum" : "mean";
}

/* "Row i's loss is 0 where targets[i] == ignore_index, else -input[i, t] *
 * w[t] ... out[0] receives their sum, added as torch's CPU kernel adds it
 * ... which MEAN divides by the total weight ... total_weight receives
 * that total (0 with RILL_LOSS_NONE)": 7 rows in one block, 5,000 rows
 * (whose sum in plain order differs from the cascade's) and 70,000 rows of
 * 3 classes (per-row losses over several blocks); over positions ("the
 * loss of row r = b*inner + e ... -input[b, t, e] * w[t]"), 3 images of 77
 * positions, 4 of 1,500 (a cascade over 6,000 rows) and 1 of 70,000 (rows
 * over several blocks within one image); each reduction, with and without
 * a weight, both target widths. */
static void test_nll_loss_forward(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t shapes[][3] = {{7, 5, 1},  {5000, 37, 1}, {70000, 3, 1},
                                {3, 5, 77}, {4, 19, 1500}, {1, 3, 70000}};
    const int64_t ignore = -100;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        loss_case lc = make_case(shapes[k][0], shapes[k][1], shapes[k][2], k, ignore);
        size_t c = lc.c, inner = lc.inner, rows = lc.n * inner;
        float *in = contract_floats(s, lc.in, rows * c), *w = contract_floats(s, lc.weight, c);
        float *out = contract_floats(s, NULL, rows), *tw = contract_floats(s, NULL, 1);
        float *got = malloc(rows * sizeof *got), got_tw;
        if (k == 1 || k == 4) { /* the cascade matters: a plain sum of these rows differs */
            float plain = 0.0f, want, total;
            for (size_t i = 0; i < rows; i++)
                if (lc.targets[i] != ignore)
                    plain -= lc.in[(i / inner * c + (size_t)lc.targets[i]) * inner + i % inner];
            host_reduce(lc.in, lc.targets, NULL, lc.n, c, inner, ignore, &want, &total);
            assert_false(same_bits(plain, want));
        }
        for (size_t bytes = 4; bytes <= 8; bytes += 4) {
            void *t = contract_indices(s, lc.targets, rows, bytes);
            for (int weighted = 0; weighted < 2; weighted++)
                for (int r = RILL_LOSS_NONE; r <= RILL_LOSS_MEAN; r++) {
                    const float *hw = weighted ? lc.weight : NULL;
                    RT_OK(rill_memset_async(out, 0xff, rows * sizeof(float), s));
                    RT_OK(rill_memset_async(tw, 0xff, sizeof(float), s));
                    RT_OK(forward(s, (rill_loss_reduction)r, out, tw, in, t, bytes,
                                  weighted ? w : NULL, &lc, ignore));
                    size_t outs = r == RILL_LOSS_NONE ? rows : 1;
                    contract_download(s, got, out, outs * sizeof *got);
                    contract_download(s, &got_tw, tw, sizeof got_tw);
                    float want_tw = 0.0f;
                    if (r == RILL_LOSS_NONE) {
                        for (size_t i = 0; i < rows; i++) {
                            int64_t ti = lc.targets[i];
                            size_t at = (i / inner * c + (size_t)ti) * inner + i % inner;
                            float want = ti == ignore ? 0.0f : -lc.in[at] * (hw ? hw[ti] : 1);
                            if (!same_bits(got[i], want))
                                fail_msg("n %zu, inner %zu, %zu-byte targets, weight %d: "
                                         "out[%zu] = %.9g, want %.9g",
                                         lc.n, inner, bytes, weighted, i, got[i], want);
                        }
                    } else {
                        float want;
                        host_reduce(lc.in, lc.targets, hw, lc.n, c, inner, ignore, &want, &want_tw);
                        if (r == RILL_LOSS_MEAN)
                            want /= want_tw;
                        if (!same_bits(got[0], want))
                            fail_msg("n %zu, inner %zu, %zu-byte targets, weight %d, %s: out = "
                                     "%.9g, want %.9g",
                                     lc.n, inner, bytes, weighted,
                                     reduction_name((rill_loss_reduction)r), got[0], want);
                    }
                    if (!same_bits(got_tw, want_tw))
                        fail_msg("n %zu, inner %zu, weight %d, %s: total_weight = %.9g, want %.9g",
                                 lc.n, inner, weighted, reduction_name((rill_loss_reduction)r),
                                 got_tw, want_tw);
                }
            RT_OK(rill_free(t));
        }
        /* total_weight NULL: the loss alone. */
        void *t = contract_indices(s, lc.targets, rows, 8);
        RT_OK(forward(s, RILL_LOSS_SUM, out, NULL, in, t, 8, NULL, &lc, ignore));
        contract_download(s, got, out, sizeof *got);
        float want, total;
        host_reduce(lc.in, lc.targets, NULL, lc.n, c, inner, ignore, &want, &total);
        assert_true(same_bits(got[0], want));
        RT_OK(rill_free(t));
        RT_OK(rill_free(in));
        RT_OK(rill_free(w));
        RT_OK(rill_free(out));
        RT_OK(rill_free(tw));
        free(got);
        free_case(&lc);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "With inner 1 it is rill_op_nll_loss_f32": the same bits from both, per
 * row and summed. */
static void test_nll_loss_nd_of_inner_1_is_nll_loss(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    loss_case lc = make_case(300, 7, 1, 5, -100);
    float *in = contract_floats(s, lc.in, 300 * 7), *a = contract_floats(s, NULL, 300);
    float *b = contract_floats(s, NULL, 300), ha[300], hb[300];
    void *t = contract_indices(s, lc.targets, 300, 8);
    for (int r = RILL_LOSS_NONE; r <= RILL_LOSS_MEAN; r++) {
        RT_OK(
            rill_op_nll_loss_f32(s, (rill_loss_reduction)r, a, NULL, in, t, 8, NULL, 300, 7, -100));
        RT_OK(rill_op_nll_loss_nd_f32(s, (rill_loss_reduction)r, b, NULL, in, t, 8, NULL, 300, 7, 1,
                                      -100));
        size_t outs = r == RILL_LOSS_NONE ? 300 : 1;
        contract_download(s, ha, a, outs * sizeof(float));
        contract_download(s, hb, b, outs * sizeof(float));
        assert_memory_equal(ha, hb, outs * sizeof(float));
    }
    RT_OK(rill_free(in));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(t));
    free_case(&lc);
    RT_OK(rill_stream_destroy(s));
}

/* "A MEAN of only ignored rows is NaN" (0 / 0, as torch's), its total
 * weight 0, and their SUM 0; an ignore_index that is a valid class. */
static void test_nll_loss_of_ignored_rows(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    float hin[6] = {-1, -2, -3, -4, -5, -6};
    int64_t ht[2] = {1, 1};
    float *in = contract_floats(s, hin, 6), *out = contract_floats(s, NULL, 2);
    float *tw = contract_floats(s, NULL, 1), got[2], got_tw;
    void *t = contract_indices(s, ht, 2, 8);
    RT_OK(rill_op_nll_loss_f32(s, RILL_LOSS_MEAN, out, tw, in, t, 8, NULL, 2, 3, 1));
    contract_download(s, got, out, sizeof(float));
    contract_download(s, &got_tw, tw, sizeof got_tw);
    assert_true(isnan(got[0]));
    assert_true(got_tw == 0.0f);
    RT_OK(rill_op_nll_loss_f32(s, RILL_LOSS_SUM, out, tw, in, t, 8, NULL, 2, 3, 1));
    contract_download(s, got, out, sizeof(float));
    assert_true(got[0] == 0.0f);
    RT_OK(rill_op_nll_loss_f32(s, RILL_LOSS_NONE, out, tw, in, t, 8, NULL, 2, 3, 1));
    contract_download(s, got, out, sizeof got);
    assert_true(got[0] == 0.0f && got[1] == 0.0f);
    RT_OK(rill_free(in));
    RT_OK(rill_free(out));
    RT_OK(rill_free(tw));
    RT_OK(rill_free(t));
    RT_OK(rill_stream_destroy(s));
}

/* "grad_input [n, classes] is overwritten with 0 but at (i, t) for the
 * rows not ignored, where it is -w[t] * grad_out[i] with RILL_LOSS_NONE,
 * else w[t] * -g ... divided first by total_weight[0] with MEAN", and at
 * (b, t, e) over positions: the forward's shapes and more (5 images of
 * 1,000 positions, whose rows blocks cut inside images), each reduction,
 * with and without a weight, over a grad_input filled with garbage first. */
static void test_nll_loss_backward(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t shapes[][3] = {{7, 5, 1},  {3000, 37, 1}, {70000, 3, 1},
                                {3, 5, 77}, {5, 9, 1000},  {1, 3, 70000}};
    const int64_t ignore = 2;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        loss_case lc = make_case(shapes[k][0], shapes[k][1], shapes[k][2], k + 3, ignore);
        size_t c = lc.c, inner = lc.inner, rows = lc.n * inner, items = rows * c;
        float *hg = host_values(rows, 11), htw = 37.25f;
        float *w = contract_floats(s, lc.weight, c), *go = contract_floats(s, hg, rows);
        float *tw = contract_floats(s, &htw, 1), *gi = contract_floats(s, NULL, items);
        float *got = malloc(items * sizeof *got);
        for (size_t bytes = 4; bytes <= 8; bytes += 4) {
            void *t = contract_indices(s, lc.targets, rows, bytes);
            for (int weighted = 0; weighted < 2; weighted++)
                for (int r = RILL_LOSS_NONE; r <= RILL_LOSS_MEAN; r++) {
                    RT_OK(rill_memset_async(gi, 0xff, items * sizeof(float), s));
                    RT_OK(backward(s, (rill_loss_reduction)r, gi, go,
                                   r == RILL_LOSS_MEAN ? tw : NULL, t, bytes, weighted ? w : NULL,
                                   &lc, ignore));
                    contract_download(s, got, gi, items * sizeof *got);
                    float g = -(r == RILL_LOSS_MEAN ? hg[0] / htw : hg[0]);
                    for (size_t i = 0; i < items; i++) {
                        size_t e = i % inner, ci = i / inner % c, row = i / inner / c * inner + e;
                        int64_t ti = lc.targets[row];
                        float wt = weighted && ti >= 0 ? lc.weight[ti] : 1.0f, want = 0.0f;
                        if (ti != ignore && (size_t)ti == ci)
                            want = r == RILL_LOSS_NONE ? -wt * hg[row] : wt * g;
                        if (!same_bits(got[i], want))
                            fail_msg("n %zu, inner %zu, %zu-byte targets, weight %d, %s: "
                                     "grad_input[%zu, %zu, %zu] = %.9g, want %.9g",
                                     lc.n, inner, bytes, weighted,
                                     reduction_name((rill_loss_reduction)r), row / inner, ci, e,
                                     got[i], want);
                    }
                }
            RT_OK(rill_free(t));
        }
        RT_OK(rill_free(w));
        RT_OK(rill_free(go));
        RT_OK(rill_free(tw));
        RT_OK(rill_free(gi));
        free(hg);
        free(got);
        free_case(&lc);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "A target other than ignore_index below 0 or at least classes fails the
 * launch ... the sentence names the target and its position": the
 * forward per row and summed, and the backward, a target too large and a
 * negative one, on a CPU device (a CUDA device traps, ending its
 * context). */
static void test_nll_loss_target_out_of_range_fails_the_stream(void **state) {
    (void)state;
    if (contract_kind(contract_device()) != RILL_DEVICE_CPU)
        skip(); /* a trap would end the device */
    rill_stream *s = contract_stream();
    size_t n = 4, c = 5;
    float *in = contract_floats(s, NULL, n * c), *out = contract_floats(s, NULL, n * c);
    RT_OK(rill_memset_async(in, 0, n * c * sizeof(float), s));
    int64_t bad[2][4] = {{0, -100, 9, 1}, {2, -2, 0, 0}};
    const char *words[2] = {"target 9 at position 2 is out of range for 5 classes",
                            "target -2 at position 1 is out of range for 5 classes"};
    for (int k = 0; k < 2; k++)
        for (int which = 0; which < 6; which++) {
            /* which 3 to 5: 2 images of 2 positions; a target's position is its row's */
            loss_case lc = {.n = which < 3 ? n : 2, .c = c, .inner = which < 3 ? 1 : 2};
            rill_loss_reduction r = which % 3 == 0 ? RILL_LOSS_NONE : RILL_LOSS_MEAN;
            void *t = contract_indices(s, bad[k], n, 8);
            RT_OK(rill_stream_synchronize(s));
            if (which % 3 == 2)
                RT_OK(backward(s, RILL_LOSS_SUM, out, in, NULL, t, 8, NULL, &lc, -100));
            else
                RT_OK(forward(s, r, out, NULL, in, t, 8, NULL, &lc, -100));
            contract_expect_error(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s),
                                  which % 3 == 2 ? "nll_loss_backward_f32" : "nll_loss_f32",
                                  words[k]);
            RT_OK(rill_stream_clear_error(s));
            RT_OK(rill_free(t));
        }
    RT_OK(rill_free(in));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* Each refusal, with its sentence: a 64-float input a, b's first 32
 * floats the output, 4 int64 targets at b + 48. */
static void test_nll_loss_refuses_bad_arguments(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    float *a = contract_floats(s, NULL, 64), *b = contract_floats(s, NULL, 64);
    int64_t *t = (int64_t *)(b + 48);
    const char *fwd = "rill_op_nll_loss_f32", *bwd = "rill_op_nll_loss_backward_f32";
    rill_loss_reduction none = RILL_LOSS_NONE, mean = RILL_LOSS_MEAN;
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, b, NULL, a, NULL, 8, NULL, 4, 8, -100), fwd,
                          "targets is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, NULL, NULL, a, t, 8, NULL, 4, 8, -100), fwd,
                          "out is NULL");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, b, NULL, NULL, t, 8, NULL, 4, 8, -100), fwd,
                          "input is NULL");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_f32(s, (rill_loss_reduction)3, b, NULL, a, t, 8, NULL, 4, 8, -100), fwd,
        "reduction is 3");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, b, NULL, a, t, 2, NULL, 4, 8, -100), fwd,
                          "index_bytes is 2");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, b, NULL, a, t, 8, NULL, 0, 8, -100), fwd,
                          "n is 0");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, b, NULL, a, t, 8, NULL, 4, 0, -100), fwd,
                          "classes 0");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_f32(s, none, b, NULL, a, t, 8, NULL, (size_t)1 << 62, 8, -100), fwd,
        "fit in memory");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, /* 72 floats: past a's 64 */
                          rill_op_nll_loss_f32(s, none, b, NULL, a, t, 8, NULL, 4, 18, -100), fwd,
                          "input");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, /* 8 floats of weight at a + 60 */
                          rill_op_nll_loss_f32(s, none, b, NULL, a, t, 8, a + 60, 4, 8, -100), fwd,
                          "weight");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, a + 30, NULL, a, t, 8, NULL, 4, 8, -100),
                          fwd, "out overlaps input");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, none, b + 46, NULL, a, t, 8, NULL, 4, 8, -100),
                          fwd, "out overlaps targets");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, mean, b, b, a, t, 8, NULL, 4, 8, -100), fwd,
                          "out overlaps total_weight");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_f32(s, mean, b, a + 3, a, t, 8, NULL, 4, 8, -100), fwd,
                          "total_weight overlaps input");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_f32(s, mean, a, b, NULL, t, 8, NULL, 4, 8, -100), bwd,
        "total_weight is NULL");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_f32(s, none, NULL, b, NULL, t, 8, NULL, 4, 8, -100), bwd,
        "grad_input is NULL");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_f32(s, none, a, NULL, NULL, t, 8, NULL, 4, 8, -100), bwd,
        "grad_out is NULL");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_f32(s, none, a, a + 30, NULL, t, 8, NULL, 4, 8, -100), bwd,
        "grad_input overlaps grad_out");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_f32(s, mean, b, a, b + 20, t, 8, NULL, 4, 8, -100), bwd,
        "grad_input overlaps total_weight");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_f32(s, none, b, a, NULL, t, 8, NULL, 4, 16, -100), bwd,
        "grad_input overlaps targets");
    const char *fwd_nd = "rill_op_nll_loss_nd_f32", *bwd_nd = "rill_op_nll_loss_backward_nd_f32";
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT,
                          rill_op_nll_loss_nd_f32(s, none, b, NULL, a, t, 8, NULL, 2, 8, 0, -100),
                          fwd_nd, "inner 0");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_nd_f32(s, none, b, NULL, a, t, 8, NULL, 2, 8, (size_t)1 << 61, -100),
        fwd_nd, "fit in memory");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, /* 80 floats: past a's 64 */
                          rill_op_nll_loss_nd_f32(s, none, b, NULL, a, t, 8, NULL, 2, 8, 5, -100),
                          fwd_nd, "n*classes*inner floats");
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, /* 10 targets: past b's end */
                          rill_op_nll_loss_nd_f32(s, none, b, NULL, a, t, 8, NULL, 2, 1, 5, -100),
                          fwd_nd, "n*inner integers");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_nd_f32(s, none, b + 44, NULL, a, t, 8, NULL, 2, 1, 4, -100), fwd_nd,
        "out overlaps targets");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_nd_f32(s, none, a, a + 28, NULL, t, 8, NULL, 2, 4, 4, -100),
        bwd_nd, "grad_input overlaps grad_out");
    contract_expect_error(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_op_nll_loss_backward_nd_f32(s, mean, a, b, NULL, t, 8, NULL, 2, 4, 4, -100), bwd_nd,
        "total_weight is NULL");
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nll_loss_forward),
        cmocka_unit_test(test_nll_loss_nd_of_inner_1_is_nll_loss),
        cmocka_unit_test(test_nll_loss_of_ignored_rows),
        cmocka_unit_test(test_nll_loss_backward),
        cmocka_unit_test(test_nll_loss_target_out_of_range_fails_the_stream),
        cmocka_unit_test(test_nll_loss_refuses_bad_arguments),
    };
    return CONTRACT_RUN(tests);
}
