/* SPDX-License-Identifier: MIT */
/* Float exp, tanh, sigmoid and the normal CDF that the CPU op bodies'
 * loops vectorize, and the double-precision sum of a run of floats that
 * their sums share: a polynomial after range reduction, straight-line
 * code of IEEE additions, multiplications, fused multiply-adds, divisions
 * and bit operations, with no branch (both sides of a choice are
 * computed, then one is selected) and no call but fmaf where the code is
 * compiled without FMA instructions. So a vector lane and the scalar loop
 * that ends a run give the same bits, and a result does not depend on how
 * a launch splits its elements; the files that use them are compiled with
 * -ffp-contract=off, so the only fused multiply-adds are the written ones
 * (rill__vec_fma), which round once wherever they run.
 * rill__vec_expf is within 2 ulp of exp over float's whole range
 * (test_vec_math.c sweeps every exponent) and gives expf's special values:
 * 0 below about -103.97 (and at -inf), +inf above about 88.72 (and at
 * +inf), NaN for NaN, and subnormal results rounded once. */
#ifndef RILL_CPU_VEC_MATH_H
#define RILL_CPU_VEC_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Inlined always, so that each vector clone of a caller (tensor_kernels.c)
 * compiles them for its instructions and vectorizes its loop through them. */
#define RILL_VEC_INLINE static inline __attribute__((always_inline))

RILL_VEC_INLINE uint32_t rill__vec_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

RILL_VEC_INLINE float rill__vec_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* a * b + c, rounded once: an FMA instruction where the caller is
 * compiled for one (tensor_kernels.c's AVX2 and AVX-512 clones), else the
 * C library's fmaf, which gives the same bits. */
RILL_VEC_INLINE float rill__vec_fma(float a, float b, float c) {
    return __builtin_fmaf(a, b, c);
}

/* 2^e for e in [-126, 127], from its exponent bits. */
RILL_VEC_INLINE float rill__vec_pow2(int32_t e) {
    return rill__vec_float((uint32_t)(e + 127) << 23);
}

/* e^(x + lo) for |lo| < 2, without rounding x + lo (e^x: lo = 0): x + lo =
 * n ln2 + r with n = round((x + lo) / ln2) and |r| <= ln2 / 2 (ln2 in two
 * parts, the first with trailing zeros so that n * its part is exact; lo
 * joins r after x's reduction), e^r by a degree-7 polynomial
 * (SLEEF's expf coefficients), then times 2^n as 2^(n/2) 2^(n - n/2): the
 * first product is exact, the second rounds once, also where the result
 * is subnormal or overflows. x is first clamped to [-104, 89], where e^x
 * already rounds to 0 and to +inf; a NaN passes the clamp and every step
 * after it. */
RILL_VEC_INLINE float rill__vec_exp_split(float x, float lo) {
    const float magic = 0x1.8p23f; /* adding it rounds |v| < 2^22 to an integer */
    float c = x < -104.0f ? -104.0f : x;
    c = c > 89.0f ? 89.0f : c;
    float k = rill__vec_fma(c + lo, 1.44269504088896341f, magic);
    /* n sits in k's low mantissa bits: k's bits minus magic's are n in
     * two's complement. */
    int32_t n = (int32_t)(rill__vec_bits(k) - rill__vec_bits(magic));
    float kf = k - magic;
    float r = rill__vec_fma(kf, -0.693145751953125f, c);
    r = rill__vec_fma(kf, -1.428606765330187045e-6f, r) + lo;
    float p = 0.000198527617612853646278381f;
    p = rill__vec_fma(p, r, 0.00139304355252534151077271f);
    p = rill__vec_fma(p, r, 0.00833336077630519866943359f);
    p = rill__vec_fma(p, r, 0.0416664853692054748535156f);
    p = rill__vec_fma(p, r, 0.166666671633720397949219f);
    p = rill__vec_fma(p, r, 0.5f);
    float y = rill__vec_fma(r * r, p, r) + 1.0f;
    int32_t n1 = n / 2;
    return y * rill__vec_pow2(n1) * rill__vec_pow2(n - n1);
}

/* e^x. */
RILL_VEC_INLINE float rill__vec_expf(float x) {
    return rill__vec_exp_split(x, 0.0f);
}

/* -x^2 / 2 exactly, as the rounded product (returned) and its rounding
 * error (*lo, from a fused multiply-add), for rill__vec_exp_split: a
 * rounding of x^2 in an exponent would cost x^2 times its relative error
 * (1e-5 at x = 12.5). Exact unless x^2 / 2 is subnormal. */
RILL_VEC_INLINE float rill__vec_neg_half_square(float x, float *lo) {
    float half = -0.5f * x;
    float hi = half * x;
    *lo = rill__vec_fma(half, x, -hi);
    return hi;
}

/* tanh x: for |x| < 0.625 x + x^3 P(x^2) (Cephes's tanhf), where the
 * other form would cancel; else 1 - 2 / (e^(2|x|) + 1), 1 once e^(2|x|)
 * overflows; either with x's sign (so tanh -0 is -0). */
RILL_VEC_INLINE float rill__vec_tanhf(float x) {
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = rill__vec_fma(p, z, 2.06390887954e-2f);
    p = rill__vec_fma(p, z, -5.37397155531e-2f);
    p = rill__vec_fma(p, z, 1.33314422036e-1f);
    p = rill__vec_fma(p, z, -3.33332819422e-1f);
    float small = rill__vec_fma(x * z, p, x);
    uint32_t sign = rill__vec_bits(x) & 0x80000000u;
    float ax = rill__vec_float(rill__vec_bits(x) & 0x7fffffffu);
    float big = 1.0f - 2.0f / (rill__vec_expf(ax + ax) + 1.0f);
    float t = ax < 0.625f ? small : big;
    return rill__vec_float((rill__vec_bits(t) & 0x7fffffffu) | sign);
}

/* 1 / (1 + e^-x), as rill__op_sigmoid with rill__vec_expf. */
RILL_VEC_INLINE float rill__vec_sigmoidf(float x) {
    return 1.0f / (1.0f + rill__vec_expf(-x));
}

/* Phi(x), the standard normal distribution's P(X <= x), as 0.5 erfc(u)
 * with u = -x / sqrt 2: erfc(|u|) = t e^(-u^2 + P(t)), t = 1 / (1 + |u| / 2),
 * P of degree 9 (Numerical Recipes' erfcc, within 1.2e-7 of erfc relative
 * to it everywhere), and erfc(u) = 2 - erfc(|u|) for u < 0. -u^2 = -x^2 / 2
 * is taken from x exactly as hi + lo (rill__vec_neg_half_square), and lo
 * joins P in the exponential's correction. |x| is clamped to 22.5, past
 * which Phi rounds to 0 or 1. GELU is x Phi(x); a NaN passes every step. */
RILL_VEC_INLINE float rill__vec_normal_cdf(float x) {
    float ax = rill__vec_float(rill__vec_bits(x) & 0x7fffffffu);
    ax = ax > 22.5f ? 22.5f : ax;
    float t = 1.0f / (1.0f + 0.5f * (ax * 0.70710678118654752440f));
    float p = 0.17087277f;
    p = rill__vec_fma(p, t, -0.82215223f);
    p = rill__vec_fma(p, t, 1.48851587f);
    p = rill__vec_fma(p, t, -1.13520398f);
    p = rill__vec_fma(p, t, 0.27886807f);
    p = rill__vec_fma(p, t, -0.18628806f);
    p = rill__vec_fma(p, t, 0.09678418f);
    p = rill__vec_fma(p, t, 0.37409196f);
    p = rill__vec_fma(p, t, 1.00002368f);
    p = rill__vec_fma(p, t, -1.26551223f);
    float lo;
    float hi = rill__vec_neg_half_square(ax, &lo);
    float e = t * rill__vec_exp_split(hi, p + lo);
    float r = x > 0.0f ? 2.0f - e : e;
    return 0.5f * r;
}

/* Four doubles, the unit of rill__vec_sum's accumulators. */
typedef double rill__vec_d4 __attribute__((vector_size(4 * sizeof(double))));

/* *s += a[0..4) in double precision. */
RILL_VEC_INLINE void rill__vec_add4(rill__vec_d4 *s, const float *a) {
    *s += (rill__vec_d4){(double)a[0], (double)a[1], (double)a[2], (double)a[3]};
}

/* The sum of a[0..n) in double precision. 32 independent accumulators
 * (eight of four lanes) keep the adds pipelined: an AVX2 or AVX-512 clone
 * runs them as eight independent chains of 256-bit adds. They are combined
 * in a fixed order, so the result depends only on the data. The error is
 * about n * 2^-53 of the sum of |a[i]|, far below float's resolution for
 * any n that fits in memory. */
RILL_VEC_INLINE double rill__vec_sum(const float *a, size_t n) {
    rill__vec_d4 s0 = {0.0}, s1 = {0.0}, s2 = {0.0}, s3 = {0.0};
    rill__vec_d4 s4 = {0.0}, s5 = {0.0}, s6 = {0.0}, s7 = {0.0};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        rill__vec_add4(&s0, a + i);
        rill__vec_add4(&s1, a + i + 4);
        rill__vec_add4(&s2, a + i + 8);
        rill__vec_add4(&s3, a + i + 12);
        rill__vec_add4(&s4, a + i + 16);
        rill__vec_add4(&s5, a + i + 20);
        rill__vec_add4(&s6, a + i + 24);
        rill__vec_add4(&s7, a + i + 28);
    }
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)a[i];
    rill__vec_d4 s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    return ((s[0] + s[1]) + (s[2] + s[3])) + tail;
}

#endif
