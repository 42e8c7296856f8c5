/* SPDX-License-Identifier: MIT */
/* The element math that the CPU and CUDA op bodies share, written once so
 * both give the same results: the random normal fill's value of element i,
 * and the maps and binary ops of f32 tensors. Compiled as C by the CPU
 * backend (op_kernels.c, tensor_kernels.c) and as CUDA C++ by the CUDA op
 * kernels (op_kernels.cu), where RILL__OP_MATH makes them device
 * functions. Sums, differences, products, quotients and square roots
 * go through rill__op_fadd and its siblings: on CUDA the round-to-nearest
 * intrinsics, which nvcc never contracts into a fused multiply-add, as the
 * CPU's C does not. */
#ifndef RILL_BACKEND_OP_MATH_H
#define RILL_BACKEND_OP_MATH_H

#include <math.h>
#include <stdint.h>

#include "rill.h"

/* ---- rounded arithmetic ---- */

#ifdef __CUDACC__
static inline __device__ float rill__op_fadd(float x, float y) {
    return __fadd_rn(x, y);
}
static inline __device__ float rill__op_fsub(float x, float y) {
    return __fsub_rn(x, y);
}
static inline __device__ float rill__op_fmul(float x, float y) {
    return __fmul_rn(x, y);
}
static inline __device__ float rill__op_fdiv(float x, float y) {
    return __fdiv_rn(x, y);
}
static inline __device__ float rill__op_fsqrt(float x) {
    return __fsqrt_rn(x);
}
static inline __device__ double rill__op_dadd(double x, double y) {
    return __dadd_rn(x, y);
}
static inline __device__ double rill__op_dmul(double x, double y) {
    return __dmul_rn(x, y);
}
#define RILL__OP_MATH __device__
#else
static inline float rill__op_fadd(float x, float y) {
    return x + y;
}
static inline float rill__op_fsub(float x, float y) {
    return x - y;
}
static inline float rill__op_fmul(float x, float y) {
    return x * y;
}
static inline float rill__op_fdiv(float x, float y) {
    return x / y;
}
static inline float rill__op_fsqrt(float x) {
    return sqrtf(x);
}
static inline double rill__op_dadd(double x, double y) {
    return x + y;
}
static inline double rill__op_dmul(double x, double y) {
    return x * y;
}
#define RILL__OP_MATH
#endif

/* ---- random normal fill ---- */

static inline RILL__OP_MATH uint64_t rill__op_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* The i-th standard normal sample of seed: pair i/2 of uniforms (u1 in
 * (0, 1], u2 in [0, 1)) from two rounds of splitmix64 on seed and the pair,
 * then Box-Muller: sqrt(-2 ln u1) times cos (even i) or sin (odd i) of
 * 2 pi u2. A pure function of (seed, i), so any grid gives the same bits;
 * a GPU's libm differs from the host's in the last bits of a double,
 * below float's resolution. */
static inline RILL__OP_MATH double rill__op_randn_value(uint64_t seed, size_t i) {
    uint64_t pair = (uint64_t)(i / 2);
    uint64_t h1 = rill__op_splitmix64(rill__op_splitmix64(seed) ^ pair);
    uint64_t h2 = rill__op_splitmix64(h1);
    double u1 = ((double)(h1 >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = (double)(h2 >> 11) * 0x1.0p-53;         /* [0, 1) */
    double r = sqrt(-2.0 * log(u1));
    double theta = 6.283185307179586476925 * u2;
    return (i & 1u) == 0 ? r * cos(theta) : r * sin(theta);
}

/* Element i of rill__op_randn_args: mean + std * the i-th sample. */
static inline RILL__OP_MATH float rill__op_randn_element(double mean, double std, uint64_t seed,
                                                         size_t i) {
    return (float)rill__op_dadd(mean, rill__op_dmul(std, rill__op_randn_value(seed, i)));
}

/* ---- embeddings ---- */

/* indices[i] of an embedding's indices of index_bytes (4 or 8) each. */
static inline RILL__OP_MATH int64_t rill__op_index_at(const void *indices, size_t index_bytes,
                                                      size_t i) {
    return index_bytes == 4 ? (int64_t)((const int32_t *)indices)[i]
                            : ((const int64_t *)indices)[i];
}

/* ---- the negative log likelihood loss ---- */

/* The reduced loss of rill__op_nll_loss_args's n*inner rows as torch's
 * CPU kernels (nll_loss, nll_loss2d) add it: each row r not ignored adds
 * its loss (-input[b, t, e] * w[t], or -input[b, t, e] without a weight)
 * and weight into the first of 8 partial sums; after row r, sum j is
 * carried into sum j+1 (and zeroed) for j = 0, 1, ... while the j-th group
 * of `power` bits of r is 0, power = max(4, ceil(log2 rows) / 8); the sums
 * are then added from the first up. *loss receives the losses' sum, *total
 * the weights' (the count of the rows not ignored without a weight).
 * Returns the number of rows, or the position of the first target out of
 * range. */
static inline RILL__OP_MATH size_t rill__op_nll_loss_reduce(const float *input, const void *targets,
                                                            size_t index_bytes, const float *weight,
                                                            size_t n, size_t classes, size_t inner,
                                                            int64_t ignore_index, float *loss,
                                                            float *total) {
    size_t rows = n * inner;
    unsigned bits = 1, power = 4;
    for (uint64_t x = rows > 2 ? (uint64_t)rows - 1 : 0; x > 1; x >>= 1)
        bits++;
    if (rows > 2 && bits / 8 > power)
        power = bits / 8;
    const uint64_t mask = ((uint64_t)1 << power) - 1;
    float losses[8] = {0}, weights[8] = {0};
    size_t ignored = 0;
    for (size_t r = 0; r < rows; r++) {
        int64_t t = rill__op_index_at(targets, index_bytes, r);
        if (t == ignore_index) {
            ignored++;
            continue;
        }
        if (t < 0 || (uint64_t)t >= classes)
            return r;
        size_t b = r / inner, e = r - b * inner;
        float x = input[(b * classes + (size_t)t) * inner + e];
        if (weight != NULL) {
            losses[0] = rill__op_fsub(losses[0], rill__op_fmul(x, weight[t]));
            weights[0] = rill__op_fadd(weights[0], weight[t]);
        } else {
            losses[0] = rill__op_fsub(losses[0], x);
        }
        for (unsigned j = 0; j + 1 < 8 && ((uint64_t)r & (mask << (j * power))) == 0; j++) {
            losses[j + 1] = rill__op_fadd(losses[j + 1], losses[j]);
            weights[j + 1] = rill__op_fadd(weights[j + 1], weights[j]);
            losses[j] = 0.0f;
            weights[j] = 0.0f;
        }
    }
    float sum = 0.0f, weight_sum = 0.0f;
    for (unsigned j = 0; j < 8; j++) {
        sum = rill__op_fadd(sum, losses[j]);
        weight_sum = rill__op_fadd(weight_sum, weights[j]);
    }
    *loss = sum;
    *total = weight != NULL ? weight_sum : (float)(int64_t)(rows - ignored);
    return rows;
}

/* ---- pooling ---- */

/* [*first, *last): the outputs along one dimension whose window, of size
 * k at stride from -pad, holds input position i; empty when none does. */
static inline RILL__OP_MATH void rill__op_pool_outputs_of(size_t i, size_t k, size_t stride,
                                                          size_t pad, size_t outputs, size_t *first,
                                                          size_t *last) {
    /* Output o holds i when o*stride <= i + pad < o*stride + k. */
    size_t at = i + pad;
    size_t lo = at + 1 > k ? (at + 1 - k + stride - 1) / stride : 0;
    size_t hi = at / stride + 1;
    *first = lo;
    *last = hi < outputs ? hi : outputs;
    if (*last < *first)
        *last = *first;
}

/* Along one dimension of n inputs, the window of output o of an average
 * pooling (size k at stride from -pad) as PyTorch's avg_pool2d cuts it:
 * its end at most n + pad, *span its length with padding, [*lo, *hi) its
 * inputs inside [0, n) (empty when it holds none). */
static inline RILL__OP_MATH void rill__op_avg_pool_span(size_t o, size_t k, size_t stride,
                                                        size_t pad, size_t n, size_t *lo,
                                                        size_t *hi, size_t *span) {
    /* Positions shifted by pad, so none is negative. */
    size_t start = o * stride;
    size_t end = start + k < n + 2 * pad ? start + k : n + 2 * pad;
    *span = end > start ? end - start : 0;
    *lo = start > pad ? start - pad : 0;
    *hi = end > pad ? (end - pad < n ? end - pad : n) : 0;
    if (*hi < *lo)
        *hi = *lo;
}

/* The divisor of output (y, x) of an average pooling: divisor when not 0,
 * else the window's inputs inside the image (exclude_pad) or its span with
 * padding; 0 for a window with no input. *y0..*x1 get the window's inputs. */
static inline RILL__OP_MATH size_t rill__op_avg_pool_window(size_t y, size_t x, size_t h, size_t w,
                                                            size_t r, size_t s, size_t stride_h,
                                                            size_t stride_w, size_t pad_h,
                                                            size_t pad_w, size_t divisor,
                                                            unsigned exclude_pad, size_t *y0,
                                                            size_t *y1, size_t *x0, size_t *x1) {
    size_t span_h, span_w;
    rill__op_avg_pool_span(y, r, stride_h, pad_h, h, y0, y1, &span_h);
    rill__op_avg_pool_span(x, s, stride_w, pad_w, w, x0, x1, &span_w);
    if (*y0 == *y1 || *x0 == *x1)
        return 0;
    if (divisor != 0)
        return divisor;
    return exclude_pad ? (*y1 - *y0) * (*x1 - *x0) : span_h * span_w;
}

/* ---- maps and binary ops of f32 tensors ---- */

/* GELU's gradient dy at its input x: dy (Phi(x) + x phi(x)), as
 * PyTorch's CPU kernel computes it. */
static inline RILL__OP_MATH float rill__op_gelu_backward(float dy, float x) {
    const float alpha = 0.70710678118654752440f; /* 1 / sqrt(2) */
    const float beta = 0.39894228040143267794f;  /* 1 / sqrt(2 pi) */
    float cdf = 0.5f * (1.0f + erff(x * alpha));
    float pdf = beta * expf(x * x * -0.5f);
    return dy * (cdf + x * pdf);
}

/* The tanh approximation's argument: sqrt(2 / pi) (x + 0.044715 x^3),
 * multiplied in PyTorch's forward's order. */
static inline RILL__OP_MATH float rill__op_gelu_tanh_inner(float x) {
    return 0.79788456080286535588f * (x + 0.044715f * x * x * x);
}

/* The tanh approximation's gradient dy at its input x, t the tanh of
 * rill__op_gelu_tanh_inner(x), after PyTorch's formula: the product rule
 * on x/2 (1 + t). */
static inline RILL__OP_MATH float rill__op_gelu_tanh_gradient(float dy, float x, float t) {
    const float beta = 0.79788456080286535588f; /* sqrt(2 / pi) */
    const float kappa = 0.044715f;
    float x_sq = x * x;
    float left = 0.5f * x;
    float right = 1.0f + t;
    float left_derivative = 0.5f * right;
    float right_derivative = left * (1.0f - t * t);
    float inner_derivative = beta * (1.0f + 3.0f * kappa * x_sq);
    return dy * (left_derivative + right_derivative * inner_derivative);
}

static inline RILL__OP_MATH float rill__op_gelu_tanh_backward(float dy, float x) {
    return rill__op_gelu_tanh_gradient(dy, x, tanhf(rill__op_gelu_tanh_inner(x)));
}

/* x (op) y for a rill_binary_op; NaN for a number that names none. */
static inline RILL__OP_MATH float rill__op_binary_value(uint32_t op, float x, float y) {
    switch ((rill_binary_op)op) {
    case RILL_BINARY_ADD:
        return rill__op_fadd(x, y);
    case RILL_BINARY_SUB:
        return rill__op_fsub(x, y);
    case RILL_BINARY_MUL:
        return rill__op_fmul(x, y);
    case RILL_BINARY_DIV:
        return rill__op_fdiv(x, y);
    case RILL_BINARY_MAX:
        return isnan(x) || x > y ? x : y;
    case RILL_BINARY_MIN:
        return isnan(x) || x < y ? x : y;
    case RILL_BINARY_POW:
        return powf(x, y);
    case RILL_BINARY_RELU_BACKWARD:
        return y <= 0.0f ? 0.0f : x;
    case RILL_BINARY_GELU_BACKWARD:
        return rill__op_gelu_backward(x, y);
    case RILL_BINARY_GELU_TANH_BACKWARD:
        return rill__op_gelu_tanh_backward(x, y);
    }
    return NAN;
}

static inline RILL__OP_MATH float rill__op_sigmoid(float x) {
    return rill__op_fdiv(1.0f, rill__op_fadd(1.0f, expf(-x)));
}

/* A rill_map_op of x, with its scalar alpha; NaN for a number that names
 * none. */
static inline RILL__OP_MATH float rill__op_map_value(uint32_t op, float x, float alpha) {
    switch ((rill_map_op)op) {
    case RILL_MAP_NEG:
        return -x;
    case RILL_MAP_SCALE:
        return rill__op_fmul(x, alpha);
    case RILL_MAP_DIV:
        return rill__op_fdiv(x, alpha);
    case RILL_MAP_RDIV:
        return rill__op_fdiv(alpha, x);
    case RILL_MAP_RSUB:
        return rill__op_fsub(alpha, x);
    case RILL_MAP_POW:
        return powf(x, alpha);
    case RILL_MAP_MAX:
        return isnan(x) || x > alpha ? x : alpha;
    case RILL_MAP_MIN:
        return isnan(x) || x < alpha ? x : alpha;
    case RILL_MAP_RELU:
        return isnan(x) || x > 0.0f ? x : 0.0f;
    case RILL_MAP_LEAKY_RELU:
        return x > 0.0f ? x : rill__op_fmul(x, alpha);
    case RILL_MAP_GELU:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case RILL_MAP_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(rill__op_gelu_tanh_inner(x)));
    case RILL_MAP_SIGMOID:
        return rill__op_sigmoid(x);
    case RILL_MAP_TANH:
        return tanhf(x);
    case RILL_MAP_SILU:
        return rill__op_fmul(x, rill__op_sigmoid(x));
    case RILL_MAP_EXP:
        return expf(x);
    case RILL_MAP_LOG:
        return logf(x);
    case RILL_MAP_SQRT:
        return rill__op_fsqrt(x);
    case RILL_MAP_ABS:
        return fabsf(x);
    }
    return NAN;
}

#endif
