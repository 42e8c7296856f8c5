/* SPDX-License-Identifier: MIT */
/* CPU bodies of the tensor ops. Layer: CPU backend; the launches are built
 * in src/ops/ops_tensor.c, ops_nn.c, ops_embedding.c and ops_loss.c.
 * Invariants, as in op_kernels.c: block b of G writes only the outputs of
 * its own slice (a range of the strided ops' indices, of the reductions'
 * outputs, of softmax's rows, of pooling's output rows, of an embedding's
 * or a loss's rows), so blocks never race, and every result is a pure
 * function of the inputs: sums add in double precision in an order fixed
 * by the shape (an embedding's backward in float, as PyTorch's, in order
 * of the indices; a reduced loss in float, in PyTorch's order), and exp,
 * tanh, sigmoid and the normal CDF are vec_math.h's, which give the same
 * bits in a vector lane as in the scalar loop that ends a run. */
#include "backend/cpu/tensor_kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/vec_clones.h"
#include "backend/cpu/vec_math.h"
#include "backend/op_math.h"

/* [*begin, *end): block b's share of count items among blocks, in equal
 * runs (the last runs may be shorter or empty). */
static void slice_among(size_t b, size_t blocks, size_t count, size_t *begin, size_t *end) {
    size_t per = (count + blocks - 1) / blocks;
    *begin = b * per < count ? b * per : count;
    *end = count - *begin > per ? *begin + per : count;
}

/* block ctx's share of count items (slice_among over the grid). */
static void slice_of(const rill_block_ctx *ctx, size_t count, size_t *begin, size_t *end) {
    slice_among(ctx->block_idx.x, ctx->grid_dim.x, count, begin, end);
}

/* ---- element loops ---- */

/* The element loops take op as a constant: each call, made from a switch on
 * the op, inlines into a loop of its own with no switch inside, which the
 * compiler vectorizes where the op's math allows (arithmetic, comparisons,
 * fabsf, sqrtf and vec_math.h's functions; not powf and logf).
 * This file is compiled with GCC's dynamic vectorizer cost model
 * (CMakeLists.txt), as -O2's very-cheap one vectorizes no loop whose
 * count is not known. The pointers are not restrict: rill.h lets out
 * equal an input (in place), and the compiler's run-time overlap check
 * keeps that case vectorized too (only a partial overlap, which rill.h
 * refuses, takes the scalar loop). */
#define ELEMENT_LOOP static inline __attribute__((always_inline)) void

/* rill__op_map_value, with vec_math.h's exp, tanh and normal CDF in place
 * of the C library's exp, tanh and erf, which no loop vectorizes. */
INLINED float map_value(uint32_t op, float x, float alpha) {
    switch (op) {
    case RILL_MAP_EXP:
        return rill__vec_expf(x);
    case RILL_MAP_SIGMOID:
        return rill__vec_sigmoidf(x);
    case RILL_MAP_SILU:
        return x * rill__vec_sigmoidf(x);
    case RILL_MAP_TANH:
        return rill__vec_tanhf(x);
    case RILL_MAP_GELU:
        return x * rill__vec_normal_cdf(x);
    case RILL_MAP_GELU_TANH:
        return 0.5f * x * (1.0f + rill__vec_tanhf(rill__op_gelu_tanh_inner(x)));
    default:
        return rill__op_map_value(op, x, alpha);
    }
}

/* rill__op_binary_value, with vec_math.h's functions in GELU's gradients
 * in place of the C library's erf, exp and tanh. */
INLINED float binary_value(uint32_t op, float dy, float x) {
    if (op == RILL_BINARY_GELU_BACKWARD) {
        /* dy (Phi(x) + x phi(x)), phi(x) = e^(-x^2 / 2) / sqrt(2 pi), its
         * exponent taken exactly as rill__vec_normal_cdf's */
        float lo;
        float hi = rill__vec_neg_half_square(x, &lo);
        float pdf = 0.39894228040143267794f * rill__vec_exp_split(hi, lo);
        return dy * (rill__vec_normal_cdf(x) + x * pdf);
    }
    if (op == RILL_BINARY_GELU_TANH_BACKWARD)
        return rill__op_gelu_tanh_gradient(dy, x, rill__vec_tanhf(rill__op_gelu_tanh_inner(x)));
    return rill__op_binary_value(op, dy, x);
}

ELEMENT_LOOP map_loop(uint32_t op, float *out, const float *a, float alpha, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = map_value(op, a[i], alpha);
}

/* out[i] = a[i] (op) b[i]. */
ELEMENT_LOOP binary_loop(uint32_t op, float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = binary_value(op, a[i], b[i]);
}

/* out[i] = a[i] (op) y: b broadcast along the run. */
ELEMENT_LOOP binary_loop_b_scalar(uint32_t op, float *out, const float *a, float y, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = binary_value(op, a[i], y);
}

/* out[i] = x (op) b[i]: a broadcast along the run. */
ELEMENT_LOOP binary_loop_a_scalar(uint32_t op, float *out, float x, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = binary_value(op, x, b[i]);
}

/* The run's loop for its shape: 0 both inputs along the run, 1 b
 * broadcast, 2 a broadcast. */
ELEMENT_LOOP binary_shaped(uint32_t op, int shape, float *out, const float *a, const float *b,
                           size_t n) {
    if (shape == 0)
        binary_loop(op, out, a, b, n);
    else if (shape == 1)
        binary_loop_b_scalar(op, out, a, b[0], n);
    else
        binary_loop_a_scalar(op, out, a[0], b, n);
}

/* A run of a binary op whose output is contiguous: as, bs the inputs'
 * strides along it, each 1 or 0 (broadcast), not both 0. One case per op,
 * so that each loop has its op as a constant. */
INLINED void binary_run(uint32_t op, float *out, const float *a, size_t as, const float *b,
                        size_t bs, size_t n) {
    int shape = as == 1 && bs == 1 ? 0 : as == 1 ? 1 : 2;
    switch ((rill_binary_op)op) {
    case RILL_BINARY_ADD:
        binary_shaped(RILL_BINARY_ADD, shape, out, a, b, n);
        return;
    case RILL_BINARY_SUB:
        binary_shaped(RILL_BINARY_SUB, shape, out, a, b, n);
        return;
    case RILL_BINARY_MUL:
        binary_shaped(RILL_BINARY_MUL, shape, out, a, b, n);
        return;
    case RILL_BINARY_DIV:
        binary_shaped(RILL_BINARY_DIV, shape, out, a, b, n);
        return;
    case RILL_BINARY_MAX:
        binary_shaped(RILL_BINARY_MAX, shape, out, a, b, n);
        return;
    case RILL_BINARY_MIN:
        binary_shaped(RILL_BINARY_MIN, shape, out, a, b, n);
        return;
    case RILL_BINARY_RELU_BACKWARD:
        binary_shaped(RILL_BINARY_RELU_BACKWARD, shape, out, a, b, n);
        return;
    case RILL_BINARY_GELU_BACKWARD:
        binary_shaped(RILL_BINARY_GELU_BACKWARD, shape, out, a, b, n);
        return;
    case RILL_BINARY_GELU_TANH_BACKWARD:
        binary_shaped(RILL_BINARY_GELU_TANH_BACKWARD, shape, out, a, b, n);
        return;
    case RILL_BINARY_POW: /* powf has no vector form */
        break;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = binary_value(op, a[i * as], b[i * bs]);
}

/* ---- strided copies and binary ops ---- */

/* Runs the indices [begin, end) of p's shape in row-major order: along the
 * last dimension in runs, the others as an odometer. copy true: out = a,
 * else out = a (op) b. */
INLINED void strided_run(const rill__op_strided_args *p, size_t begin, size_t end, bool copy) {
    size_t nd = p->ndim, last = nd - 1;
    size_t idx[RILL__OP_MAX_DIMS];
    size_t rest = begin;
    for (size_t d = nd; d-- > 0;) {
        idx[d] = rest % p->shape[d];
        rest /= p->shape[d];
    }
    size_t oo = 0, ao = 0, bo = 0;
    for (size_t d = 0; d < nd; d++) {
        oo += idx[d] * p->out_strides[d];
        ao += idx[d] * p->a_strides[d];
        bo += idx[d] * p->b_strides[d];
    }
    size_t os = p->out_strides[last], as = p->a_strides[last], bs = p->b_strides[last];
    for (size_t i = begin; i < end;) {
        size_t run = p->shape[last] - idx[last];
        if (run > end - i)
            run = end - i;
        float *out = p->out + oo;
        const float *a = p->a + ao;
        if (copy && os == 1 && as == 1) {
            memcpy(out, a, run * sizeof *out); /* out may not overlap a */
        } else if (copy) {
            for (size_t j = 0; j < run; j++)
                out[j * os] = a[j * as];
        } else {
            const float *b = p->b + bo;
            if (os == 1 && as <= 1 && bs <= 1 && as + bs > 0) {
                binary_run(p->op, out, a, as, b, bs, run);
            } else {
                for (size_t j = 0; j < run; j++)
                    out[j * os] = binary_value(p->op, a[j * as], b[j * bs]);
            }
        }
        i += run;
        /* Step the odometer past the run. */
        oo += run * os;
        ao += run * as;
        bo += run * bs;
        idx[last] += run;
        for (size_t d = last; d > 0 && idx[d] == p->shape[d]; d--) {
            oo += p->out_strides[d - 1] - p->shape[d] * p->out_strides[d];
            ao += p->a_strides[d - 1] - p->shape[d] * p->a_strides[d];
            bo += p->b_strides[d - 1] - p->shape[d] * p->b_strides[d];
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

void rill__cpu_op_copy_strided_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_strided_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->n, &begin, &end);
    if (begin < end)
        strided_run(p, begin, end, true);
}

VECTOR_BODY(rill__cpu_op_binary_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_strided_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->n, &begin, &end);
    if (begin < end)
        strided_run(p, begin, end, false);
}

/* ---- maps ---- */

VECTOR_BODY(rill__cpu_op_map_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_map_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->n, &begin, &end);
    float *out = p->out + begin;
    const float *a = p->a + begin;
    float alpha = p->alpha;
    size_t n = end - begin;
    /* One case per op, so that each loop has its op as a constant. */
    switch ((rill_map_op)p->op) {
    case RILL_MAP_NEG:
        map_loop(RILL_MAP_NEG, out, a, alpha, n);
        return;
    case RILL_MAP_SCALE:
        map_loop(RILL_MAP_SCALE, out, a, alpha, n);
        return;
    case RILL_MAP_DIV:
        map_loop(RILL_MAP_DIV, out, a, alpha, n);
        return;
    case RILL_MAP_RDIV:
        map_loop(RILL_MAP_RDIV, out, a, alpha, n);
        return;
    case RILL_MAP_RSUB:
        map_loop(RILL_MAP_RSUB, out, a, alpha, n);
        return;
    case RILL_MAP_POW:
        map_loop(RILL_MAP_POW, out, a, alpha, n);
        return;
    case RILL_MAP_MAX:
        map_loop(RILL_MAP_MAX, out, a, alpha, n);
        return;
    case RILL_MAP_MIN:
        map_loop(RILL_MAP_MIN, out, a, alpha, n);
        return;
    case RILL_MAP_RELU:
        map_loop(RILL_MAP_RELU, out, a, alpha, n);
        return;
    case RILL_MAP_LEAKY_RELU:
        map_loop(RILL_MAP_LEAKY_RELU, out, a, alpha, n);
        return;
    case RILL_MAP_GELU:
        map_loop(RILL_MAP_GELU, out, a, alpha, n);
        return;
    case RILL_MAP_GELU_TANH:
        map_loop(RILL_MAP_GELU_TANH, out, a, alpha, n);
        return;
    case RILL_MAP_SIGMOID:
        map_loop(RILL_MAP_SIGMOID, out, a, alpha, n);
        return;
    case RILL_MAP_TANH:
        map_loop(RILL_MAP_TANH, out, a, alpha, n);
        return;
    case RILL_MAP_SILU:
        map_loop(RILL_MAP_SILU, out, a, alpha, n);
        return;
    case RILL_MAP_EXP:
        map_loop(RILL_MAP_EXP, out, a, alpha, n);
        return;
    case RILL_MAP_LOG:
        map_loop(RILL_MAP_LOG, out, a, alpha, n);
        return;
    case RILL_MAP_SQRT:
        map_loop(RILL_MAP_SQRT, out, a, alpha, n);
        return;
    case RILL_MAP_ABS:
        map_loop(RILL_MAP_ABS, out, a, alpha, n);
        return;
    }
    /* An op outside rill_map_op: the launch refused it. */
    map_loop(p->op, out, a, alpha, n);
}

/* Both products rounded, as PyTorch's grad * mask * scale: a dropped
 * element is a * 0, not 0. */
VECTOR_BODY(rill__cpu_op_masked_scale_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_masked_scale_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->n, &begin, &end);
    float *out = p->out;
    const float *a = p->a;
    const uint8_t *mask = p->mask;
    float scale = p->scale;
    for (size_t i = begin; i < end; i++)
        out[i] = (a[i] * (mask[i] != 0 ? 1.0f : 0.0f)) * scale;
}

/* ---- along one dimension ---- */

/* Items along the last dimension that the strided reductions and
 * softmaxes take at once: a[o, d, i..i+COLS) is contiguous for each d, so
 * each step over d is a vector loop over the columns. */
#define COLS 64

/* The sums of COLS columns (or fewer: cols) of a, dim rows inner apart,
 * each in double precision in order of d. */
INLINED void column_sums(double *total, const float *a, size_t dim, size_t inner, size_t cols) {
    for (size_t j = 0; j < cols; j++)
        total[j] = 0.0;
    for (size_t d = 0; d < dim; d++) {
        const float *row = a + d * inner;
        for (size_t j = 0; j < cols; j++)
            total[j] += (double)row[j];
    }
}

/* The largest (is_max) or smallest of a[0..n), n > 0, NaN when one is:
 * eight lanes, each keeping a NaN once it meets one. Equal values are one
 * value, save for the sign of a zero, which may come from either. */
INLINED float row_extreme(const float *a, size_t n, bool is_max) {
    float lane[8];
    for (size_t j = 0; j < 8; j++)
        lane[j] = a[0];
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t j = 0; j < 8; j++) {
            float v = a[i + j];
            bool take = v != v || (is_max ? v > lane[j] : v < lane[j]);
            lane[j] = take ? v : lane[j];
        }
    for (; i < n; i++) {
        float v = a[i];
        bool take = v != v || (is_max ? v > lane[0] : v < lane[0]);
        lane[0] = take ? v : lane[0];
    }
    float m = lane[0];
    for (size_t j = 1; j < 8; j++) {
        bool take = lane[j] != lane[j] || (is_max ? lane[j] > m : lane[j] < m);
        m = m != m ? m : (take ? lane[j] : m);
    }
    return m;
}

VECTOR_BODY(rill__cpu_op_reduce_dim_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_reduce_dim_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->outer * p->inner, &begin, &end);
    bool is_sum = p->op == RILL_REDUCE_DIM_SUM || p->op == RILL_REDUCE_DIM_MEAN;
    bool is_max = p->op == RILL_REDUCE_DIM_MAX;
    double divisor = p->op == RILL_REDUCE_DIM_MEAN ? (double)p->dim : 1.0;
    if (is_sum && p->inner == 1) { /* contiguous rows */
        for (size_t item = begin; item < end; item++)
            p->out[item] = (float)(rill__vec_sum(p->a + item * p->dim, p->dim) / divisor);
        return;
    }
    if (!is_sum && p->inner == 1 && p->indices == NULL) { /* contiguous rows, no index */
        for (size_t item = begin; item < end; item++)
            p->out[item] = is_max ? row_extreme(p->a + item * p->dim, p->dim, true)
                                  : row_extreme(p->a + item * p->dim, p->dim, false);
        return;
    }
    if (is_sum) { /* runs of columns of one o */
        double total[COLS];
        for (size_t item = begin; item < end;) {
            size_t o = item / p->inner, i = item % p->inner;
            size_t cols = rill__op_min_size(rill__op_min_size(p->inner - i, end - item), COLS);
            column_sums(total, p->a + o * p->dim * p->inner + i, p->dim, p->inner, cols);
            for (size_t j = 0; j < cols; j++)
                p->out[item + j] = (float)(total[j] / divisor);
            item += cols;
        }
        return;
    }
    for (size_t item = begin; item < end; item++) {
        size_t o = item / p->inner, i = item % p->inner;
        const float *a = p->a + o * p->dim * p->inner + i;
        float best = a[0];
        size_t at = 0;
        for (size_t d = 1; d < p->dim && !isnan(best); d++) {
            float v = a[d * p->inner];
            if (isnan(v) || (is_max ? v > best : v < best)) {
                best = v;
                at = d;
            }
        }
        p->out[item] = best;
        if (p->indices != NULL)
            p->indices[item] = (int64_t)at;
    }
}

/* The softmaxes below take m, the largest of a row, ignoring NaNs: a NaN
 * makes its exp and so the row's sum NaN, and with it every output of the
 * row, as PyTorch's. A row of -inf (or one holding +inf) gives NaNs, as
 * PyTorch's does: inf - inf is NaN. Each exp is computed once. */

/* The largest of a[0..n), n > 0, NaNs aside (unless a[0] is one). */
INLINED float row_max(const float *a, size_t n) {
    float lane[8];
    for (size_t j = 0; j < 8; j++)
        lane[j] = a[0];
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t j = 0; j < 8; j++)
            lane[j] = a[i + j] > lane[j] ? a[i + j] : lane[j];
    float m = a[0];
    for (; i < n; i++)
        m = a[i] > m ? a[i] : m;
    for (size_t j = 0; j < 8; j++)
        m = lane[j] > m ? lane[j] : m;
    return m;
}

/* e[i] = exp(a[i] - m); e may equal a. */
INLINED void exp_shifted(float *e, const float *a, float m, size_t n) {
    for (size_t i = 0; i < n; i++)
        e[i] = rill__vec_expf(a[i] - m);
}

/* e[j] = exp(a[j] - m[j]). */
INLINED void exp_shifted_columns(float *e, const float *a, const float *m, size_t n) {
    for (size_t j = 0; j < n; j++)
        e[j] = rill__vec_expf(a[j] - m[j]);
}

/* Exps of a log_softmax's row at a time, on the stack: the row's own
 * exps are not stored. */
#define EXP_CHUNK 256

/* A row along the last dimension: out[0..dim) from a[0..dim). */
INLINED void softmax_row(float *out, const float *a, size_t dim, bool is_log) {
    float m = row_max(a, dim);
    if (!is_log) {
        exp_shifted(out, a, m, dim);
        float scale = (float)(1.0 / rill__vec_sum(out, dim));
        for (size_t d = 0; d < dim; d++)
            out[d] *= scale;
        return;
    }
    float e[EXP_CHUNK];
    double total = 0.0;
    for (size_t d = 0; d < dim; d += EXP_CHUNK) {
        size_t n = rill__op_min_size(dim - d, EXP_CHUNK);
        exp_shifted(e, a + d, m, n);
        total += rill__vec_sum(e, n);
    }
    /* (a - m) - log(sum) as written, as PyTorch computes it: folding m
     * into the log first rounds it to m's precision, which loses the
     * whole result once |m| passes 2^24 times it. */
    float log_total = (float)log(total);
    for (size_t d = 0; d < dim; d++)
        out[d] = (a[d] - m) - log_total;
}

/* cols (at most COLS) rows along a middle dimension, side by side: out[d *
 * inner + j] from a[d * inner + j], for d < dim, j < cols. */
INLINED void softmax_columns(float *out, const float *a, size_t dim, size_t inner, size_t cols,
                             bool is_log) {
    float m[COLS];
    double total[COLS];
    for (size_t j = 0; j < cols; j++) {
        m[j] = a[j];
        total[j] = 0.0;
    }
    for (size_t d = 1; d < dim; d++) {
        const float *row = a + d * inner;
        for (size_t j = 0; j < cols; j++)
            m[j] = row[j] > m[j] ? row[j] : m[j];
    }
    float f[COLS];
    for (size_t d = 0; d < dim; d++) {
        const float *row = a + d * inner;
        exp_shifted_columns(f, row, m, cols);
        for (size_t j = 0; j < cols; j++)
            total[j] += (double)f[j];
        if (!is_log) /* log_softmax reads a again below, and out may equal it */
            memcpy(out + d * inner, f, cols * sizeof *f);
    }
    if (is_log) {
        for (size_t j = 0; j < cols; j++)
            f[j] = (float)log(total[j]);
        for (size_t d = 0; d < dim; d++) { /* (a - m) - log(sum), as softmax_row's */
            const float *row = a + d * inner;
            float *dst = out + d * inner;
            for (size_t j = 0; j < cols; j++)
                dst[j] = (row[j] - m[j]) - f[j];
        }
        return;
    }
    for (size_t j = 0; j < cols; j++)
        f[j] = (float)(1.0 / total[j]);
    for (size_t d = 0; d < dim; d++) {
        float *dst = out + d * inner;
        for (size_t j = 0; j < cols; j++)
            dst[j] *= f[j];
    }
}

VECTOR_BODY(rill__cpu_op_softmax_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_softmax_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->outer * p->inner, &begin, &end);
    bool is_log = p->is_log != 0;
    if (p->inner == 1) {
        for (size_t row = begin; row < end; row++)
            softmax_row(p->out + row * p->dim, p->a + row * p->dim, p->dim, is_log);
        return;
    }
    for (size_t row = begin; row < end;) {
        size_t o = row / p->inner, i = row % p->inner;
        size_t cols = rill__op_min_size(rill__op_min_size(p->inner - i, end - row), COLS);
        size_t at = o * p->dim * p->inner + i;
        softmax_columns(p->out + at, p->a + at, p->dim, p->inner, cols, is_log);
        row += cols;
    }
}

/* ---- layer norm ---- */

/* Eight accumulators and a tail's, added in a fixed order. */
INLINED double lanes_total(const double s[8], double tail) {
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

/* The sum of (a[i] - m)^2 over a[0..n) in double precision, with
 * eight accumulators, added by lanes_total. */
INLINED double squares_about(const float *a, size_t n, double m) {
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t j = 0; j < 8; j++) {
            double d = (double)a[i + j] - m;
            s[j] += d * d;
        }
    double tail = 0.0;
    for (; i < n; i++) {
        double d = (double)a[i] - m;
        tail += d * d;
    }
    return lanes_total(s, tail);
}

VECTOR_BODY(rill__cpu_op_layer_norm_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_layer_norm_args *p = args;
    size_t begin, end, n = p->n;
    slice_of(ctx, p->rows, &begin, &end);
    const float *w = p->weight, *b = p->bias;
    for (size_t row = begin; row < end; row++) {
        const float *x = p->x + row * n;
        float *out = p->out + row * n;
        double mean = rill__vec_sum(x, n) / (double)n;
        double var = squares_about(x, n, mean) / (double)n;
        float m = (float)mean, r = (float)(1.0 / sqrt(var + (double)p->eps));
        if (p->mean != NULL)
            p->mean[row] = m;
        if (p->rstd != NULL)
            p->rstd[row] = r;
        /* One loop per case, each a plain vector loop. */
        if (w != NULL && b != NULL)
            for (size_t j = 0; j < n; j++)
                out[j] = (x[j] - m) * r * w[j] + b[j];
        else if (w != NULL)
            for (size_t j = 0; j < n; j++)
                out[j] = (x[j] - m) * r * w[j];
        else if (b != NULL)
            for (size_t j = 0; j < n; j++)
                out[j] = (x[j] - m) * r + b[j];
        else
            for (size_t j = 0; j < n; j++)
                out[j] = (x[j] - m) * r;
    }
}

/* The gradients of rows [begin, end) of the layer norm (dx). */
INLINED void layer_norm_dx(const rill__op_layer_norm_backward_args *p, size_t begin, size_t end) {
    size_t n = p->n;
    const float *w = p->weight;
    for (size_t r = begin; r < end; r++) {
        const float *x = p->x + r * n, *dy = p->dy + r * n;
        float *dx = p->dx + r * n;
        float m = p->mean[r], rs = p->rstd[r];
        double sum_g[8] = {0}, sum_gx[8] = {0};
        size_t j = 0;
        for (; j + 8 <= n; j += 8)
            for (size_t k = 0; k < 8; k++) {
                float g = w != NULL ? dy[j + k] * w[j + k] : dy[j + k];
                float xhat = (x[j + k] - m) * rs;
                sum_g[k] += (double)g;
                sum_gx[k] += (double)(g * xhat);
            }
        double tail_g = 0.0, tail_gx = 0.0;
        for (; j < n; j++) {
            float g = w != NULL ? dy[j] * w[j] : dy[j];
            float xhat = (x[j] - m) * rs;
            tail_g += (double)g;
            tail_gx += (double)(g * xhat);
        }
        float mg = (float)(lanes_total(sum_g, tail_g) / (double)n);
        float mgx = (float)(lanes_total(sum_gx, tail_gx) / (double)n);
        if (w != NULL)
            for (j = 0; j < n; j++)
                dx[j] = rs * ((dy[j] * w[j] - mg) - ((x[j] - m) * rs) * mgx);
        else
            for (j = 0; j < n; j++)
                dx[j] = rs * ((dy[j] - mg) - ((x[j] - m) * rs) * mgx);
    }
}

/* Columns at once of the weight's and bias's gradients: each step over the
 * rows is a vector loop over them. */
#define NORM_COLS 64

/* dweight and dbias of columns [begin, end), each summed over the rows in
 * order, in double precision. */
INLINED void layer_norm_dweight(const rill__op_layer_norm_backward_args *p, size_t begin,
                                size_t end) {
    size_t n = p->n;
    for (size_t j0 = begin; j0 < end; j0 += NORM_COLS) {
        size_t cols = rill__op_min_size(end - j0, NORM_COLS);
        double dw[NORM_COLS], db[NORM_COLS];
        for (size_t k = 0; k < cols; k++)
            dw[k] = db[k] = 0.0;
        for (size_t r = 0; r < p->rows; r++) {
            const float *x = p->x + r * n + j0, *dy = p->dy + r * n + j0;
            float m = p->mean[r], rs = p->rstd[r];
            for (size_t k = 0; k < cols; k++) {
                dw[k] += (double)(dy[k] * ((x[k] - m) * rs));
                db[k] += (double)dy[k];
            }
        }
        for (size_t k = 0; k < cols; k++) {
            if (p->dweight != NULL)
                p->dweight[j0 + k] = (float)dw[k];
            if (p->dbias != NULL)
                p->dbias[j0 + k] = (float)db[k];
        }
    }
}

VECTOR_BODY(rill__cpu_op_layer_norm_backward_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_layer_norm_backward_args *p = args;
    size_t b = ctx->block_idx.x, begin, end;
    if (b < p->row_blocks) {
        slice_among(b, p->row_blocks, p->rows, &begin, &end);
        layer_norm_dx(p, begin, end);
        return;
    }
    slice_among(b - p->row_blocks, ctx->grid_dim.x - p->row_blocks, p->n, &begin, &end);
    layer_norm_dweight(p, begin, end);
}

/* ---- pooling ---- */

void rill__cpu_op_pool2d_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_pool2d_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->planes * p->oh, &begin, &end);
    bool is_max = p->op == RILL_POOL_MAX;
    float divisor = (float)(p->r * p->s);
    for (size_t row = begin; row < end; row++) {
        size_t plane = row / p->oh, y = row % p->oh;
        const float *img = p->in + plane * p->h * p->w;
        float *out = p->out + row * p->ow;
        /* The window's rows inside the image: [y0, y1). */
        size_t top = y * p->stride_h;
        size_t y0 = top > p->pad_h ? top - p->pad_h : 0;
        size_t y1 = top + p->r - p->pad_h < p->h ? top + p->r - p->pad_h : p->h;
        for (size_t x = 0; x < p->ow; x++) {
            size_t left = x * p->stride_w;
            size_t x0 = left > p->pad_w ? left - p->pad_w : 0;
            size_t x1 = left + p->s - p->pad_w < p->w ? left + p->s - p->pad_w : p->w;
            if (is_max && p->indices != NULL) {
                /* The first largest, the last NaN: PyTorch's choice. */
                float best = -INFINITY;
                size_t at = y0 * p->w + x0;
                for (size_t yy = y0; yy < y1; yy++)
                    for (size_t xx = x0; xx < x1; xx++) {
                        float v = img[yy * p->w + xx];
                        if (v > best || isnan(v)) {
                            best = v;
                            at = yy * p->w + xx;
                        }
                    }
                out[x] = best;
                p->indices[row * p->ow + x] = (int64_t)at;
            } else if (is_max) {
                float best = -INFINITY;
                for (size_t yy = y0; yy < y1; yy++)
                    for (size_t xx = x0; xx < x1; xx++) {
                        float v = img[yy * p->w + xx];
                        if (v > best || isnan(v))
                            best = v;
                        if (isnan(best))
                            break;
                    }
                out[x] = best;
            } else {
                float total = 0.0f;
                for (size_t yy = y0; yy < y1; yy++)
                    for (size_t xx = x0; xx < x1; xx++)
                        total += img[yy * p->w + xx];
                out[x] = total / divisor;
            }
        }
    }
}

/* ---- embeddings ---- */

/* Fails ctx's launch for value, at position i of an op's indices (what:
 * "index", "target"; plural: "indices", "targets"), out of [0, count)
 * (count units: "rows", "classes"); also names what else may be passed. */
static void fail_out_of_range(const rill_block_ctx *ctx, const char *what, const char *plural,
                              int64_t value, size_t i, size_t count, const char *units,
                              const char *also) {
    char msg[192];
    snprintf(msg, sizeof msg,
             "%s %" PRId64 " at position %zu is out of range for %zu %s; pass %s in [0, %zu)%s",
             what, value, i, count, units, plural, count, also);
    rill__kernel_fail(ctx, msg);
}

/* Fails ctx's launch for index at position i of an embedding's indices. */
static void fail_index(const rill_block_ctx *ctx, int64_t index, size_t i, size_t rows) {
    fail_out_of_range(ctx, "index", "indices", index, i, rows, "rows", "");
}

void rill__cpu_op_embedding_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_embedding_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->n, &begin, &end);
    for (size_t i = begin; i < end; i++) {
        int64_t r = rill__op_index_at(p->indices, p->index_bytes, i);
        if (r < 0 || (uint64_t)r >= p->rows) {
            fail_index(ctx, r, i, p->rows);
            continue;
        }
        memcpy(p->out + i * p->dim, p->weight + (size_t)r * p->dim, p->dim * sizeof(float));
    }
}

void rill__cpu_op_embedding_backward_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_embedding_backward_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->rows, &begin, &end);
    if (begin == end)
        return;
    memset(p->grad_weight + begin * p->dim, 0, (end - begin) * p->dim * sizeof(float));
    for (size_t i = 0; i < p->n; i++) {
        int64_t r = rill__op_index_at(p->indices, p->index_bytes, i);
        if (r < 0 || (uint64_t)r >= p->rows) {
            fail_index(ctx, r, i, p->rows);
            return;
        }
        if ((uint64_t)r < begin || (uint64_t)r >= end || r == p->padding_idx)
            continue;
        float *dst = p->grad_weight + (size_t)r * p->dim;
        const float *src = p->grad + i * p->dim;
        for (size_t d = 0; d < p->dim; d++)
            dst[d] += src[d];
    }
}

/* ---- the negative log likelihood loss ---- */

/* Fails ctx's launch for target at position i of a loss's targets. */
static void fail_target(const rill_block_ctx *ctx, int64_t target, size_t i, size_t classes) {
    fail_out_of_range(ctx, "target", "targets", target, i, classes, "classes", " or ignore_index");
}

void rill__cpu_op_nll_loss_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_nll_loss_args *p = args;
    size_t rows = p->n * p->inner;
    if (p->reduction != RILL_LOSS_NONE) {
        float loss = 0.0f, total = 0.0f;
        size_t bad = rill__op_nll_loss_reduce(p->input, p->targets, p->index_bytes, p->weight, p->n,
                                              p->classes, p->inner, p->ignore_index, &loss, &total);
        if (bad < rows) {
            fail_target(ctx, rill__op_index_at(p->targets, p->index_bytes, bad), bad, p->classes);
            return;
        }
        p->out[0] = p->reduction == RILL_LOSS_MEAN ? loss / total : loss;
        if (p->total_weight != NULL)
            p->total_weight[0] = total;
        return;
    }
    if (ctx->block_idx.x == 0 && p->total_weight != NULL)
        p->total_weight[0] = 0.0f;
    size_t begin, end;
    slice_of(ctx, rows, &begin, &end);
    for (size_t r = begin; r < end; r++) {
        int64_t t = rill__op_index_at(p->targets, p->index_bytes, r);
        if (t == p->ignore_index) {
            p->out[r] = 0.0f;
        } else if (t < 0 || (uint64_t)t >= p->classes) {
            fail_target(ctx, t, r, p->classes);
        } else {
            size_t b = r / p->inner, e = r - b * p->inner;
            float w = p->weight != NULL ? p->weight[t] : 1.0f;
            p->out[r] = -p->input[(b * p->classes + (size_t)t) * p->inner + e] * w;
        }
    }
}

/* Zeroes the gradient of rows [begin, end) of an [n, classes, inner]
 * input: whole images with one memset, parts of one with one per class. */
static void zero_loss_rows(float *grad, size_t classes, size_t inner, size_t begin, size_t end) {
    while (begin < end) {
        size_t b = begin / inner, lo = begin - b * inner;
        if (lo == 0 && end - begin >= inner) {
            size_t images = (end - begin) / inner;
            memset(grad + b * classes * inner, 0, images * classes * inner * sizeof(float));
            begin += images * inner;
            continue;
        }
        size_t hi = end - b * inner < inner ? end - b * inner : inner;
        for (size_t c = 0; c < classes; c++)
            memset(grad + (b * classes + c) * inner + lo, 0, (hi - lo) * sizeof(float));
        begin = b * inner + hi;
    }
}

void rill__cpu_op_nll_loss_backward_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_nll_loss_backward_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->n * p->inner, &begin, &end);
    if (begin == end)
        return;
    zero_loss_rows(p->grad_input, p->classes, p->inner, begin, end);
    float g = 0.0f;
    if (p->reduction != RILL_LOSS_NONE)
        g = -(p->reduction == RILL_LOSS_MEAN ? p->grad_out[0] / p->total_weight[0]
                                             : p->grad_out[0]);
    for (size_t r = begin; r < end; r++) {
        int64_t t = rill__op_index_at(p->targets, p->index_bytes, r);
        if (t == p->ignore_index)
            continue;
        if (t < 0 || (uint64_t)t >= p->classes) {
            fail_target(ctx, t, r, p->classes);
            continue;
        }
        size_t b = r / p->inner, e = r - b * p->inner;
        float w = p->weight != NULL ? p->weight[t] : 1.0f;
        p->grad_input[(b * p->classes + (size_t)t) * p->inner + e] =
            p->reduction == RILL_LOSS_NONE ? -w * p->grad_out[r] : w * g;
    }
}
