/* SPDX-License-Identifier: MIT */
/* The AVX-512F tile that reads its right operand in place, shared by the
 * sgemm's loop over b's rows (sgemm.c) and the conv2d without im2col
 * (conv_direct.c): up to 12 rows of a packed left operand, each step a
 * column of 12 floats broadcast against two vectors of 16 floats of the
 * right one. The functions are x86-64 only (GCC or clang), for callers
 * that run them where the processor has AVX-512F. */
#ifndef RILL_CPU_TILE512_H
#define RILL_CPU_TILE512_H

#include <stddef.h>

#define RILL__TILE_MR 12  /* rows of the left operand a tile */
#define RILL__TILE_NR 32  /* columns of the right operand a tile */
#define RILL__TILE_KC 384 /* steps a run: the packed 12 x 384 floats stay in L1 */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RILL__TILE512 1 /* the functions below are compiled */
#include <immintrin.h>
#include <stdbool.h>

/* Whether the processor runs the tile: it has AVX-512F. */
static inline bool rill__tile_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

/* The first `count` of 16 lanes. */
static inline __mmask16 rill__tile_lanes(size_t count) {
    return count >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << count) - 1);
}

/* lo[i], hi[i] = the sums over steps t < kc of ap[t * RILL__TILE_MR + i]
 * times the 32 floats at b + off[t] (lanes m0, then m1; the others 0), for
 * i < rows (a constant where inlined, at most RILL__TILE_MR). Each step is
 * added in order. */
__attribute__((target("avx512f"), always_inline)) static inline void
rill__tile_sum(const int rows, size_t kc, const float *ap, const float *b, const size_t *off,
               __mmask16 m0, __mmask16 m1, __m512 *lo, __m512 *hi) {
#pragma GCC unroll 12
    for (int i = 0; i < rows; i++)
        lo[i] = hi[i] = _mm512_setzero_ps();
    for (size_t t = 0; t < kc; t++, ap += RILL__TILE_MR) {
        const float *bt = b + off[t];
        __m512 b0 = _mm512_maskz_loadu_ps(m0, bt), b1 = _mm512_maskz_loadu_ps(m1, bt + 16);
#pragma GCC unroll 12
        for (int i = 0; i < rows; i++) {
            __m512 ai = _mm512_set1_ps(ap[i]);
            lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
            hi[i] = _mm512_fmadd_ps(ai, b1, hi[i]);
        }
    }
}

#else
#define RILL__TILE512 0
#endif
#endif
