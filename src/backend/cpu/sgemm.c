/* SPDX-License-Identifier: MIT */
/* The CPU ops' sgemm. Layer: CPU backend, beside the op bodies. Where rill
 * was built with oneDNN and it is enabled (onednn.h), products run its
 * dnnl_sgemm, as PyTorch's cpu device runs its own products on Intel's
 * libraries; products it cannot read in place, and every product without
 * it, run BLIS's. Where the installed BLIS runs kernels narrower than the
 * processor's (its generic reference C ones, or AVX2 ones on a processor
 * with AVX-512F), BLIS's products run in a context of rill's own with the
 * micro-kernels below, and with AVX-512F those of at most 32 rows in loops
 * of rill's that pack nothing of b (docs/cpu.md, "The built-in ops"). Each
 * adds k steps in a fixed order, so a product's bits depend only on its
 * inputs. */
#include "backend/cpu/sgemm.h"

#include <assert.h>
#include <blis.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <threads.h>

#include "backend/cpu/onednn.h"
#include "backend/cpu/tile512.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_KERNELS 1
#include <immintrin.h>
#else
#define HAVE_X86_KERNELS 0
#endif

/* Writes the m x n part of the tile t (column-major, mr rows) into c:
 * c = alpha t + beta c, without reading c when beta is 0. */
static void tile_store(dim_t m, dim_t n, const float *t, dim_t mr, float alpha, float beta,
                       float *c, inc_t rs_c, inc_t cs_c) {
    for (dim_t j = 0; j < n; j++) {
        for (dim_t i = 0; i < m; i++) {
            float *cij = c + i * rs_c + j * cs_c;
            float v = alpha * t[j * mr + i];
            *cij = beta == 0.0f ? v : v + beta * *cij;
        }
    }
}

#if HAVE_X86_KERNELS

/* ---- AVX-512F: 32 x 12, 24 accumulators of 16 floats ---- */

#define MR512 32
#define NR512 12

__attribute__((target("avx512f"))) static void
ukr_avx512(dim_t m, dim_t n, dim_t k, float *restrict alpha, float *restrict a, float *restrict b,
           float *restrict beta, float *restrict c, inc_t rs_c, inc_t cs_c,
           auxinfo_t *restrict data, cntx_t *restrict cntx) {
    (void)data;
    (void)cntx;
    __m512 lo[NR512], hi[NR512];
    for (int j = 0; j < NR512; j++)
        lo[j] = hi[j] = _mm512_setzero_ps();
    for (dim_t p = 0; p < k; p++, a += MR512, b += NR512) {
        __m512 a0 = _mm512_loadu_ps(a), a1 = _mm512_loadu_ps(a + 16);
#pragma GCC unroll 12
        for (int j = 0; j < NR512; j++) {
            __m512 bj = _mm512_set1_ps(b[j]);
            lo[j] = _mm512_fmadd_ps(a0, bj, lo[j]);
            hi[j] = _mm512_fmadd_ps(a1, bj, hi[j]);
        }
    }
    __m512 va = _mm512_set1_ps(*alpha);
    if (m == MR512 && n == NR512 && rs_c == 1) {
        __m512 vb = _mm512_set1_ps(*beta);
        for (int j = 0; j < NR512; j++) {
            float *col = c + j * cs_c;
            __m512 r0 = _mm512_mul_ps(va, lo[j]), r1 = _mm512_mul_ps(va, hi[j]);
            if (*beta != 0.0f) {
                r0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(col), r0);
                r1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(col + 16), r1);
            }
            _mm512_storeu_ps(col, r0);
            _mm512_storeu_ps(col + 16, r1);
        }
        return;
    }
    float t[MR512 * NR512];
    for (int j = 0; j < NR512; j++) {
        _mm512_storeu_ps(t + j * MR512, lo[j]);
        _mm512_storeu_ps(t + j * MR512 + 16, hi[j]);
    }
    tile_store(m, n, t, MR512, *alpha, *beta, c, rs_c, cs_c);
}

/* ---- AVX2 and FMA: 16 x 6, 12 accumulators of 8 floats ---- */

#define MR256 16
#define NR256 6

__attribute__((target("avx2,fma"))) static void
ukr_avx2(dim_t m, dim_t n, dim_t k, float *restrict alpha, float *restrict a, float *restrict b,
         float *restrict beta, float *restrict c, inc_t rs_c, inc_t cs_c, auxinfo_t *restrict data,
         cntx_t *restrict cntx) {
    (void)data;
    (void)cntx;
    __m256 lo[NR256], hi[NR256];
    for (int j = 0; j < NR256; j++)
        lo[j] = hi[j] = _mm256_setzero_ps();
    for (dim_t p = 0; p < k; p++, a += MR256, b += NR256) {
        __m256 a0 = _mm256_loadu_ps(a), a1 = _mm256_loadu_ps(a + 8);
#pragma GCC unroll 6
        for (int j = 0; j < NR256; j++) {
            __m256 bj = _mm256_broadcast_ss(b + j);
            lo[j] = _mm256_fmadd_ps(a0, bj, lo[j]);
            hi[j] = _mm256_fmadd_ps(a1, bj, hi[j]);
        }
    }
    float t[MR256 * NR256];
    for (int j = 0; j < NR256; j++) {
        _mm256_storeu_ps(t + j * MR256, lo[j]);
        _mm256_storeu_ps(t + j * MR256 + 8, hi[j]);
    }
    tile_store(m, n, t, MR256, *alpha, *beta, c, rs_c, cs_c);
}

/* ---- AVX-512F products that pack nothing of b ---- */

/* A small product costs BLIS most in packing: a 32x256x784 product packs
 * b's 200,000 floats to use each 32 times. These two read b in place.
 *
 * Rows: c's tile of up to 12 rows by 32 columns (tile512.h), b's rows read
 * as vectors, a's tile packed (a column of 12 floats per k step,
 * RILL__TILE_KC steps at a time, on the stack) and broadcast. Any a; b
 * with contiguous rows.
 *
 * Dots: c's tile of 4 rows by 6 columns as 24 dot products of a's rows
 * with b's columns, 16 k steps a vector, summed across the vector at the
 * end. a with contiguous rows, b with contiguous columns (a transposed
 * b, such as a linear layer's weight). */

#define DOTS_MR 4
#define DOTS_NR 6

/* c = t + beta c for one row of up to 32 columns (masks m0, m1). */
__attribute__((target("avx512f"), always_inline)) static inline void
row_store(float *c, __m512 t0, __m512 t1, __mmask16 m0, __mmask16 m1, float beta) {
    if (beta != 0.0f) {
        __m512 vb = _mm512_set1_ps(beta);
        t0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), t0);
        t1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), t1);
    }
    _mm512_mask_storeu_ps(c, m0, t0);
    _mm512_mask_storeu_ps(c + 16, m1, t1);
}

/* One rows tile: `rows` (a constant where inlined) rows of the packed a
 * by the columns of masks m0, m1, over kc steps, b's step p at b + off[p]. */
__attribute__((target("avx512f"), always_inline)) static inline void
rows_tile(const int rows, size_t kc, const float *ap, const float *b, const size_t *off,
          __mmask16 m0, __mmask16 m1, float beta, float *c, size_t ldc) {
    __m512 lo[RILL__TILE_MR], hi[RILL__TILE_MR];
    rill__tile_sum(rows, kc, ap, b, off, m0, m1, lo, hi);
#pragma GCC unroll 12
    for (int i = 0; i < rows; i++)
        row_store(c + (size_t)i * ldc, lo[i], hi[i], m0, m1, beta);
}

/* The rows tiles of one row panel (`rows` rows) across all n columns. */
__attribute__((target("avx512f"), always_inline)) static inline void
rows_panel(const int rows, size_t n, size_t kc, const float *ap, const float *b, const size_t *off,
           float beta, float *c, size_t ldc) {
    for (size_t j = 0; j < n; j += RILL__TILE_NR) {
        size_t w = n - j < RILL__TILE_NR ? n - j : RILL__TILE_NR;
        rows_tile(rows, kc, ap, b + j, off, rill__tile_lanes(w),
                  rill__tile_lanes(w > 16 ? w - 16 : 0), beta, c + j, ldc);
    }
}

__attribute__((target("avx512f"))) static void direct_rows(size_t m, size_t n, size_t k,
                                                           const float *a, size_t rsa, size_t csa,
                                                           const float *b, size_t ldb, float beta,
                                                           float *c, size_t ldc) {
    float packed[RILL__TILE_KC * RILL__TILE_MR];
    size_t off[RILL__TILE_KC]; /* b's rows, from each run's first */
    for (size_t p = 0; p < RILL__TILE_KC && p < k; p++)
        off[p] = p * ldb;
    for (size_t p0 = 0; p0 < k; p0 += RILL__TILE_KC) {
        size_t kc = k - p0 < RILL__TILE_KC ? k - p0 : RILL__TILE_KC;
        float bp = p0 == 0 ? beta : 1.0f;
        for (size_t i0 = 0; i0 < m; i0 += RILL__TILE_MR) {
            int rows = m - i0 < RILL__TILE_MR ? (int)(m - i0) : RILL__TILE_MR;
            const float *ai = a + i0 * rsa + p0 * csa;
            for (size_t p = 0; p < kc; p++)
#pragma GCC unroll 12
                for (int i = 0; i < rows; i++)
                    packed[p * RILL__TILE_MR + i] = ai[(size_t)i * rsa + p * csa];
            const float *bk = b + p0 * ldb;
            float *ci = c + i0 * ldc;
            /* Each row count its own unrolled copy. */
            switch (rows) {
#define ROWS_CASE(r)                                                                               \
    case r:                                                                                        \
        rows_panel(r, n, kc, packed, bk, off, bp, ci, ldc);                                        \
        break
                ROWS_CASE(12);
                ROWS_CASE(11);
                ROWS_CASE(10);
                ROWS_CASE(9);
                ROWS_CASE(8);
                ROWS_CASE(7);
                ROWS_CASE(6);
                ROWS_CASE(5);
                ROWS_CASE(4);
                ROWS_CASE(3);
                ROWS_CASE(2);
                ROWS_CASE(1);
#undef ROWS_CASE
            }
        }
    }
}

/* c = acc + beta c for one element. */
static inline void dot_store(float *c, float acc, float beta) {
    *c = beta == 0.0f ? acc : acc + beta * *c;
}

/* c[i, j] = a's row i . b's column j + beta c[i, j] for i < m, j < n; a's
 * rows at a + i*lda, b's columns at b + j*ldb, both contiguous. Tiles past
 * the edge compute with a's row 0 and b's column 0 in the missing places
 * and store only what is inside. */
__attribute__((target("avx512f"))) static void direct_dots(size_t m, size_t n, size_t k,
                                                           const float *a, size_t lda,
                                                           const float *b, size_t ldb, float beta,
                                                           float *c, size_t ldc) {
    size_t body = k / 16 * 16;
    __mmask16 tail = rill__tile_lanes(k - body);
    for (size_t j0 = 0; j0 < n; j0 += DOTS_NR) {
        const float *bj[DOTS_NR];
#pragma GCC unroll 6
        for (int j = 0; j < DOTS_NR; j++)
            bj[j] = b + (j0 + j < n ? j0 + j : j0) * ldb;
        for (size_t i0 = 0; i0 < m; i0 += DOTS_MR) {
            const float *ai[DOTS_MR];
#pragma GCC unroll 4
            for (int i = 0; i < DOTS_MR; i++)
                ai[i] = a + (i0 + i < m ? i0 + i : i0) * lda;
            __m512 acc[DOTS_MR][DOTS_NR];
#pragma GCC unroll 4
            for (int i = 0; i < DOTS_MR; i++)
#pragma GCC unroll 6
                for (int j = 0; j < DOTS_NR; j++)
                    acc[i][j] = _mm512_setzero_ps();
            for (size_t p = 0; p <= body; p += 16) {
                __mmask16 mk = p < body ? (__mmask16)0xFFFF : tail;
                if (mk == 0)
                    break;
                __m512 va[DOTS_MR];
#pragma GCC unroll 4
                for (int i = 0; i < DOTS_MR; i++)
                    va[i] = _mm512_maskz_loadu_ps(mk, ai[i] + p);
#pragma GCC unroll 6
                for (int j = 0; j < DOTS_NR; j++) {
                    __m512 vb = _mm512_maskz_loadu_ps(mk, bj[j] + p);
#pragma GCC unroll 4
                    for (int i = 0; i < DOTS_MR; i++)
                        acc[i][j] = _mm512_fmadd_ps(va[i], vb, acc[i][j]);
                }
            }
#pragma GCC unroll 4
            for (int i = 0; i < DOTS_MR; i++)
#pragma GCC unroll 6
                for (int j = 0; j < DOTS_NR; j++)
                    if (i0 + i < m && j0 + j < n)
                        dot_store(c + (i0 + i) * ldc + j0 + j, _mm512_reduce_add_ps(acc[i][j]),
                                  beta);
        }
    }
}

#endif

/* ---- the contexts ---- */

/* A BLIS context of rill's: BLIS's own for the detected processor with one
 * of the micro-kernels above in place of its single-precision one. */
typedef struct own_ctx {
    once_flag once;
    cntx_t ctx;      /* written once, by build_own under once */
    bool blis_small; /* BLIS's small-matrix path has kernels for the processor */
    _Atomic int ok;  /* 1 when ctx is built, 2 when the processor lacks the kernel's instructions */
} own_ctx;

static own_ctx own[RILL__SGEMM_KERNELS] = {
    [RILL__SGEMM_AVX512] = {.once = ONCE_FLAG_INIT},
    [RILL__SGEMM_AVX2] = {.once = ONCE_FLAG_INIT},
};

/* BLIS holds kernels as void * (void_fp): converted through memcpy, which
 * ISO C allows where a cast is not. */
static void set_ukr(cntx_t *ctx, sgemm_ukr_ft fn) {
    static_assert(sizeof(void_fp) == sizeof fn, "a kernel pointer fits BLIS's void_fp");
    void_fp p;
    memcpy(&p, &fn, sizeof p);
    bli_func_set_dt(p, BLIS_FLOAT, &ctx->l3_nat_ukrs[BLIS_GEMM_UKR]);
    bli_func_set_dt(p, BLIS_FLOAT, &ctx->l3_vir_ukrs[BLIS_GEMM_UKR]);
}

static void set_blksz(cntx_t *ctx, bszid_t id, dim_t value) {
    bli_blksz_set_def(value, BLIS_FLOAT, &ctx->blkszs[id]);
    bli_blksz_set_max(value, BLIS_FLOAT, &ctx->blkszs[id]);
}

static bool cpu_has(rill__sgemm_kernel k) {
    if (k == RILL__SGEMM_ONEDNN)
        return rill__cpu_onednn_enabled();
#if HAVE_X86_KERNELS
    if (k == RILL__SGEMM_AVX512)
        return rill__tile_supported();
    __builtin_cpu_init();
    if (k == RILL__SGEMM_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    (void)k;
    return false;
}

#if HAVE_X86_KERNELS
/* Each kernel's tile and BLIS's block sizes for it: those of BLIS's skx
 * and haswell configurations for kernels of the same shapes. */
static const struct {
    sgemm_ukr_ft ukr;
    dim_t mr, nr, mc, kc, nc;
} shapes[RILL__SGEMM_KERNELS] = {
    [RILL__SGEMM_AVX512] = {ukr_avx512, MR512, NR512, 480, 384, 3072},
    [RILL__SGEMM_AVX2] = {ukr_avx2, MR256, NR256, 144, 256, 4080},
};
#endif

/* The context has no small-matrix path (BLIS's, which packs nothing, runs
 * its own kernels): rill__cpu_sgemm_with sends the small products to
 * BLIS's context instead. */
static void build_own(rill__sgemm_kernel k) {
    int ok = 2;
#if HAVE_X86_KERNELS
    if (cpu_has(k)) {
        cntx_t *ctx = &own[k].ctx;
        *ctx = *bli_gks_query_nat_cntx();
        set_blksz(ctx, BLIS_MR, shapes[k].mr);
        set_blksz(ctx, BLIS_NR, shapes[k].nr);
        set_blksz(ctx, BLIS_MC, shapes[k].mc);
        set_blksz(ctx, BLIS_KC, shapes[k].kc);
        set_blksz(ctx, BLIS_NC, shapes[k].nc);
        set_ukr(ctx, shapes[k].ukr);
        bli_mbool_set_dt(false, BLIS_FLOAT, &ctx->l3_nat_ukrs_prefs[BLIS_GEMM_UKR]);
        for (int t = 0; t < BLIS_NUM_THRESH; t++)
            bli_blksz_set_def(0, BLIS_FLOAT, &ctx->l3_sup_thresh[t]);
        own[k].blis_small = bli_arch_query_id() != BLIS_ARCH_GENERIC;
        ok = 1;
    }
#endif
    atomic_store_explicit(&own[k].ok, ok, memory_order_release);
}

static void build_avx512(void) {
    build_own(RILL__SGEMM_AVX512);
}
static void build_avx2(void) {
    build_own(RILL__SGEMM_AVX2);
}

/* k's context; NULL for RILL__SGEMM_BLIS (BLIS's own), or where the
 * processor lacks k's instructions. C11's call_once orders build_own before
 * its callers' returns, but glibc implements it inside libc, where
 * ThreadSanitizer cannot see that order; the acquire load shows it. */
static own_ctx *own_get(rill__sgemm_kernel k) {
    if (k == RILL__SGEMM_BLIS)
        return NULL;
    call_once(&own[k].once, k == RILL__SGEMM_AVX512 ? build_avx512 : build_avx2);
    return atomic_load_explicit(&own[k].ok, memory_order_acquire) == 1 ? &own[k] : NULL;
}

/* The kernel of BLIS's products: BLIS's own where its configuration for
 * the processor has AVX-512 kernels or the processor lacks AVX-512F; else
 * rill's AVX-512 one (BLIS 0.9.0 takes a processor it cannot count the FMA
 * units of, such as Intel's newer Xeons under a hypervisor, for a Haswell,
 * and does not know AMD's Zen 5 at all); in BLIS's generic configuration
 * without AVX-512F, rill's AVX2 one where the processor has AVX2 and FMA. */
static rill__sgemm_kernel widest_own(void) {
    arch_t arch = bli_arch_query_id();
    if (arch == BLIS_ARCH_SKX || arch == BLIS_ARCH_KNL)
        return RILL__SGEMM_BLIS;
    if (cpu_has(RILL__SGEMM_AVX512))
        return RILL__SGEMM_AVX512;
    if (arch == BLIS_ARCH_GENERIC && cpu_has(RILL__SGEMM_AVX2))
        return RILL__SGEMM_AVX2;
    return RILL__SGEMM_BLIS;
}

static once_flag choice_once = ONCE_FLAG_INIT;
/* rill__sgemm_kernel values, stored once: the products' kernel, and the
 * one BLIS runs where oneDNN does not take a product. */
static _Atomic int default_kernel, blis_kernel;

static void choose(void) {
    rill__sgemm_kernel widest = widest_own();
    atomic_store_explicit(&blis_kernel, widest, memory_order_release);
    atomic_store_explicit(&default_kernel, rill__cpu_onednn_enabled() ? RILL__SGEMM_ONEDNN : widest,
                          memory_order_release);
}

rill__sgemm_kernel rill__cpu_sgemm_kernel(void) {
    call_once(&choice_once, choose);
    return atomic_load_explicit(&default_kernel, memory_order_acquire);
}

const char *rill__cpu_sgemm_kernel_name(rill__sgemm_kernel k) {
    switch (k) {
    case RILL__SGEMM_AVX512:
        return "avx512";
    case RILL__SGEMM_AVX2:
        return "avx2";
    case RILL__SGEMM_ONEDNN:
        return "onednn";
    default:
        return "blis";
    }
}

/* Whether BLIS's small-matrix path, where it has kernels of its own for
 * the processor, beats packing for rill's micro-kernel: with a side under
 * 32, or the product of the sides under 128 x 128 and the whole under 4M
 * multiply-adds (measured on Intel's Xeon, family 6 model 207, AVX-512:
 * 64x64x64 takes 10 us there and 14 us packed; 32x256x784 284 us there
 * and 240 us packed; conv2d's 64x3136x576 5.6 ms there and 3.8 ms packed). */
static bool small_product(size_t m, size_t n, size_t k) {
    if (m < 32 || n < 32)
        return true;
    return m * n < 128 * 128 && m * n * k <= (size_t)64 * 64 * 1024;
}

/* Whether the loops that read b in place beat packing it: with at most
 * 32 rows, and for dot products at least 128 k steps, whose sums across
 * the vector cost most below that (measured on Intel's Xeon, family 6
 * model 207, one thread: 32x256x784 with a transposed b in 130 us against
 * 227 us packed, 32x1024x256 with b in place in 129 us against 202 us;
 * with 64 rows or more, or dot products of 64 steps, packing was as fast
 * or faster). */
static bool direct_pays(size_t m, size_t k, size_t csa, size_t csb) {
    if (m > 32)
        return false;
    return csb == 1 || (csa == 1 && k >= 128);
}

bool rill__cpu_sgemm_direct(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                            const float *b, size_t rsb, size_t csb, float beta, float *c,
                            size_t ldc) {
#if HAVE_X86_KERNELS
    if (!cpu_has(RILL__SGEMM_AVX512))
        return false;
    if (csb == 1) {
        direct_rows(m, n, k, a, rsa, csa, b, rsb, beta, c, ldc);
        return true;
    }
    if (csa == 1 && rsb == 1) {
        direct_dots(m, n, k, a, rsa, b, csb, beta, c, ldc);
        return true;
    }
#endif
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb;
    (void)beta, (void)c, (void)ldc;
    return false;
}

bool rill__cpu_sgemm_with(rill__sgemm_kernel kernel, size_t m, size_t n, size_t k, const float *a,
                          size_t rsa, size_t csa, const float *b, size_t rsb, size_t csb,
                          float beta, float *c, size_t ldc) {
    if (kernel == RILL__SGEMM_ONEDNN) {
        if (!rill__cpu_onednn_enabled())
            return false;
        if (rill__cpu_onednn_sgemm(m, n, k, a, rsa, csa, b, rsb, csb, beta, c, ldc))
            return true;
        call_once(&choice_once, choose);
        kernel = atomic_load_explicit(&blis_kernel, memory_order_acquire);
    }
    own_ctx *o = own_get(kernel);
    if (kernel != RILL__SGEMM_BLIS && o == NULL)
        return false;
    if (kernel == RILL__SGEMM_AVX512 && direct_pays(m, k, csa, csb) &&
        rill__cpu_sgemm_direct(m, n, k, a, rsa, csa, b, rsb, csb, beta, c, ldc))
        return true;
    cntx_t *ctx = o == NULL || (o->blis_small && small_product(m, n, k)) ? NULL : &o->ctx;
    float one = 1.0f;
    /* BLIS takes its inputs through non-const pointers and does not write
     * them; NULL as the context is BLIS's own. */
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, (dim_t)m, (dim_t)n, (dim_t)k, &one,
                 (float *)a, (inc_t)rsa, (inc_t)csa, (float *)b, (inc_t)rsb, (inc_t)csb, &beta, c,
                 (inc_t)ldc, 1, ctx, NULL);
    return true;
}

void rill__cpu_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                     size_t ldb, float beta, float *c, size_t ldc) {
    rill__cpu_sgemm_with(rill__cpu_sgemm_kernel(), m, n, k, a, lda, 1, b, ldb, 1, beta, c, ldc);
}

void rill__cpu_sgemm_strided(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                             const float *b, size_t rsb, size_t csb, float beta, float *c,
                             size_t ldc) {
    rill__cpu_sgemm_with(rill__cpu_sgemm_kernel(), m, n, k, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}
