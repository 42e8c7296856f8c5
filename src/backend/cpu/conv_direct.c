/* SPDX-License-Identifier: MIT */
/* conv2d at stride 1 without an im2col matrix. Layer: CPU backend, beside
 * the op bodies. The band's input rows are copied once with their padding
 * (c planes of (rows + r - 1) by w + 2 pad_w floats); on that padded grid,
 * filter tap (ci, ri, si) of the output at position q (row y, column x,
 * q = y * pw + x) reads position q + ri * pw + si of plane ci. So 32
 * consecutive positions read 32 consecutive floats for every tap, and a
 * tile of 12 filters by 32 positions runs the sgemm's rows tile
 * (tile512.h): a packed column of 12 weights broadcast against two
 * vectors of the padded input, the next tap's vectors found through a
 * table of offsets. Positions past the output's width (the last s - 1 of each
 * padded row) are masked out of the loads and the stores. Taps run in
 * order, RILL__TILE_KC at a time (the packed weights stay in the first-level
 * cache), each run added to the output. docs/cpu.md, "The built-in ops". */
#include "backend/cpu/conv_direct.h"

#include <stdint.h>
#include <string.h>

#include "backend/cpu/tile512.h"

#if RILL__TILE512

/* The band's padded input: plane ci, row yy of (rows + r - 1) holds input
 * row oy0 + yy - pad_h (zeros outside the image) between pad_w zeros. */
static void pad_band(const rill__op_conv2d_ex_args *p, const float *img, size_t oy0, size_t prows,
                     size_t pw, float *dst) {
    for (size_t ci = 0; ci < p->c; ci++) {
        const float *plane = img + ci * p->h * p->w;
        for (size_t yy = 0; yy < prows; yy++, dst += pw) {
            size_t iy = oy0 + yy; /* + pad_h: unsigned */
            if (iy < p->pad_h || iy - p->pad_h >= p->h) {
                memset(dst, 0, pw * sizeof *dst);
                continue;
            }
            memset(dst, 0, p->pad_w * sizeof *dst);
            memcpy(dst + p->pad_w, plane + (iy - p->pad_h) * p->w, p->w * sizeof *dst);
            memset(dst + p->pad_w + p->w, 0, p->pad_w * sizeof *dst);
        }
    }
}

/* The positions of [q0, q0 + 32) that are outputs: below count, and at a
 * column under ow of rows pw wide. */
static uint32_t tile_mask(size_t q0, size_t count, size_t pw, size_t ow) {
    uint32_t mask = 0;
    size_t x = q0 % pw;
    for (size_t l = 0; l < RILL__TILE_NR && q0 + l < count; l++, x = x + 1 == pw ? 0 : x + 1)
        if (x < ow)
            mask |= (uint32_t)1 << l;
    return mask;
}

/* Adds (or, first, stores) one row of the tile: the masked lanes of t0 and
 * t1 in order to consecutive floats at dst. Compressed and expanded in
 * registers, with contiguous masked loads and stores: the memory forms of
 * compress and expand are microcoded on AMD's Zen 4. */
__attribute__((target("avx512f"), always_inline)) static inline void
tile_row_out(float *dst, __m512 t0, __m512 t1, __mmask16 m0, __mmask16 m1, int first) {
    int n0 = __builtin_popcount(m0), n1 = __builtin_popcount(m1);
    __mmask16 c0 = (__mmask16)((1u << n0) - 1), c1 = (__mmask16)((1u << n1) - 1);
    float *dst1 = dst + n0;
    t0 = _mm512_maskz_compress_ps(m0, t0);
    t1 = _mm512_maskz_compress_ps(m1, t1);
    if (!first) {
        t0 = _mm512_add_ps(t0, _mm512_maskz_loadu_ps(c0, dst));
        t1 = _mm512_add_ps(t1, _mm512_maskz_loadu_ps(c1, dst1));
    }
    _mm512_mask_storeu_ps(dst, c0, t0);
    _mm512_mask_storeu_ps(dst1, c1, t1);
}

/* One tile: `filters` (a constant where inlined) rows of the packed
 * weights against kc taps at the offsets off[] from b; its outputs go to
 * out (filter i at out + i * plane). */
__attribute__((target("avx512f"), always_inline)) static inline void
direct_tile(const int filters, size_t kc, const float *wp, const float *b, const size_t *off,
            __mmask16 m0, __mmask16 m1, float *out, size_t plane, int first) {
    __m512 lo[RILL__TILE_MR], hi[RILL__TILE_MR];
    rill__tile_sum(filters, kc, wp, b, off, m0, m1, lo, hi);
#pragma GCC unroll 12
    for (int i = 0; i < filters; i++)
        tile_row_out(out + (size_t)i * plane, lo[i], hi[i], m0, m1, first);
}

/* The tiles of `filters` filters across the band's positions. */
__attribute__((target("avx512f"), always_inline)) static inline void
direct_panel(const int filters, const rill__op_conv2d_ex_args *p, size_t kc, const float *wp,
             const float *band, const size_t *off, size_t count, size_t pw, float *out, int first) {
    size_t plane = p->oh * p->ow;
    for (size_t q0 = 0; q0 < count; q0 += RILL__TILE_NR) {
        uint32_t mask = tile_mask(q0, count, pw, p->ow);
        if (mask == 0)
            continue;
        /* The first output lane's row and column give its place in out. */
        size_t q = q0 + (size_t)__builtin_ctz(mask);
        float *dst = out + (q / pw) * p->ow + q % pw;
        direct_tile(filters, kc, wp, band + q0, off, (__mmask16)mask, (__mmask16)(mask >> 16), dst,
                    plane, first);
    }
}

/* Images [img0, img0 + count) of p, output rows [oy0, oy0 + rows) of
 * each, from their padded bands (band floats apart from band0): each run
 * of taps and panel of filters packed once for all of them. */
__attribute__((target("avx512f"))) static void direct_bands(const rill__op_conv2d_ex_args *p,
                                                            size_t img0, size_t count, size_t oy0,
                                                            size_t rows, const float *band0,
                                                            size_t band, size_t prows, size_t pw) {
    size_t crs = p->c * p->r * p->s, positions = rows * pw;
    float packed[RILL__TILE_KC * RILL__TILE_MR];
    size_t off[RILL__TILE_KC];
    for (size_t t0 = 0; t0 < crs; t0 += RILL__TILE_KC) {
        size_t kc = crs - t0 < RILL__TILE_KC ? crs - t0 : RILL__TILE_KC;
        for (size_t t = 0; t < kc; t++) { /* tap (ci, ri, si) */
            size_t tap = t0 + t, ci = tap / (p->r * p->s), rs = tap % (p->r * p->s);
            off[t] = (ci * prows + rs / p->s) * pw + rs % p->s;
        }
        for (size_t k0 = 0; k0 < p->k; k0 += RILL__TILE_MR) {
            int filters = p->k - k0 < RILL__TILE_MR ? (int)(p->k - k0) : RILL__TILE_MR;
            for (int i = 0; i < filters; i++) {
                const float *wi = p->weight + (k0 + (size_t)i) * crs + t0;
                for (size_t t = 0; t < kc; t++)
                    packed[t * RILL__TILE_MR + i] = wi[t];
            }
            int first = t0 == 0;
            for (size_t i = 0; i < count; i++) {
                const float *b = band0 + i * band;
                float *out = p->out + (((img0 + i) * p->k + k0) * p->oh + oy0) * p->ow;
                /* Each filter count its own unrolled copy. */
                switch (filters) {
#define DIRECT_CASE(f)                                                                             \
    case f:                                                                                        \
        direct_panel(f, p, kc, packed, b, off, positions, pw, out, first);                         \
        break
                    DIRECT_CASE(12);
                    DIRECT_CASE(11);
                    DIRECT_CASE(10);
                    DIRECT_CASE(9);
                    DIRECT_CASE(8);
                    DIRECT_CASE(7);
                    DIRECT_CASE(6);
                    DIRECT_CASE(5);
                    DIRECT_CASE(4);
                    DIRECT_CASE(3);
                    DIRECT_CASE(2);
                    DIRECT_CASE(1);
#undef DIRECT_CASE
                }
            }
        }
    }
}

#endif

bool rill__cpu_conv2d_direct_pays(const rill__op_conv2d_ex_args *p) {
    return p->ow >= 14;
}

/* One image's padded band. */
static size_t band_floats(const rill__op_conv2d_ex_args *p, size_t rows) {
    return p->c * (rows + p->r - 1) * (p->w + 2 * p->pad_w);
}

/* The bands, and room for the loads' addresses past the last one's end,
 * whose lanes are masked off. */
size_t rill__cpu_conv2d_direct_floats(const rill__op_conv2d_ex_args *p, size_t count, size_t rows) {
    return count * band_floats(p, rows) + RILL__TILE_NR + p->s;
}

bool rill__cpu_conv2d_direct(const rill__op_conv2d_ex_args *p, size_t img0, size_t count,
                             size_t oy0, size_t rows, float *scratch, size_t scratch_floats) {
#if RILL__TILE512
    if (!rill__tile_supported() || p->groups != 1 || p->stride_h != 1 || p->stride_w != 1 ||
        p->dil_h != 1 || p->dil_w != 1 ||
        rill__cpu_conv2d_direct_floats(p, count, rows) > scratch_floats)
        return false;
    size_t prows = rows + p->r - 1, pw = p->w + 2 * p->pad_w, band = band_floats(p, rows);
    for (size_t i = 0; i < count; i++)
        pad_band(p, p->in + (img0 + i) * p->c * p->h * p->w, oy0, prows, pw, scratch + i * band);
    direct_bands(p, img0, count, oy0, rows, scratch, band, prows, pw);
    return true;
#else
    (void)p, (void)img0, (void)count, (void)oy0, (void)rows, (void)scratch, (void)scratch_floats;
    return false;
#endif
}
