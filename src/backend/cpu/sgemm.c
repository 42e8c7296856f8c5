/* SPDX-License-Identifier: MIT */
/* The CPU ops' sgemm. Layer: CPU backend, beside the op bodies. Where the
 * installed BLIS falls back to its generic (reference C) kernels and the
 * processor has AVX-512F (or AVX2 and FMA), products run in a BLIS context
 * of rill's own with the micro-kernels below (docs/cpu.md, "The built-in
 * ops"). Each micro-kernel adds k steps in order, so a product's bits depend
 * only on its inputs. */
#include "backend/cpu/sgemm.h"

#include <assert.h>
#include <blis.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <threads.h>

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

#endif

/* ---- the context ---- */

static once_flag ctx_once = ONCE_FLAG_INIT;
static cntx_t own_ctx; /* written once, by build_ctx under ctx_once */
static const char *kernel_name = "blis";
/* build_ctx's outcome, stored last (release): 1 BLIS's context, 2 own_ctx.
 * C11's call_once orders build_ctx before its callers' returns, but glibc
 * implements it inside libc, where ThreadSanitizer cannot see that order;
 * the acquire load in ctx_get shows it. */
static _Atomic int ctx_built;

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

/* The block sizes are those of BLIS's skx and haswell configurations for
 * the kernels of the same shapes. */
static void build_ctx(void) {
    int built = 1;
    if (bli_arch_query_id() != BLIS_ARCH_GENERIC)
        goto out;
#if HAVE_X86_KERNELS
    sgemm_ukr_ft ukr;
    dim_t mr, nr, mc, kc, nc;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        ukr = ukr_avx512;
        mr = MR512, nr = NR512, mc = 480, kc = 384, nc = 3072;
        kernel_name = "avx512";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        ukr = ukr_avx2;
        mr = MR256, nr = NR256, mc = 144, kc = 256, nc = 4080;
        kernel_name = "avx2";
    } else {
        goto out;
    }
    own_ctx = *bli_gks_query_nat_cntx();
    set_blksz(&own_ctx, BLIS_MR, mr);
    set_blksz(&own_ctx, BLIS_NR, nr);
    set_blksz(&own_ctx, BLIS_MC, mc);
    set_blksz(&own_ctx, BLIS_KC, kc);
    set_blksz(&own_ctx, BLIS_NC, nc);
    set_ukr(&own_ctx, ukr);
    bli_mbool_set_dt(false, BLIS_FLOAT, &own_ctx.l3_nat_ukrs_prefs[BLIS_GEMM_UKR]);
    /* No small-matrix path: its kernels are the generic ones. */
    for (int t = 0; t < BLIS_NUM_THRESH; t++)
        bli_blksz_set_def(0, BLIS_FLOAT, &own_ctx.l3_sup_thresh[t]);
    built = 2;
#endif
out:
    atomic_store_explicit(&ctx_built, built, memory_order_release);
}

static cntx_t *ctx_get(void) {
    call_once(&ctx_once, build_ctx);
    return atomic_load_explicit(&ctx_built, memory_order_acquire) == 2 ? &own_ctx : NULL;
}

void rill__cpu_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                     size_t ldb, float beta, float *c, size_t ldc) {
    float one = 1.0f;
    /* BLIS takes its inputs through non-const pointers and does not write
     * them; NULL as the context is BLIS's own. */
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, (dim_t)m, (dim_t)n, (dim_t)k, &one,
                 (float *)a, (inc_t)lda, 1, (float *)b, (inc_t)ldb, 1, &beta, c, (inc_t)ldc, 1,
                 ctx_get(), NULL);
}

void rill__cpu_sgemm_strided(size_t m, size_t n, size_t k, const float *a, size_t rs_a, size_t cs_a,
                             const float *b, size_t rs_b, size_t cs_b, float beta, float *c,
                             size_t ldc) {
    float one = 1.0f;
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, (dim_t)m, (dim_t)n, (dim_t)k, &one,
                 (float *)a, (inc_t)rs_a, (inc_t)cs_a, (float *)b, (inc_t)rs_b, (inc_t)cs_b, &beta,
                 c, (inc_t)ldc, 1, ctx_get(), NULL);
}

const char *rill__cpu_sgemm_kernel_name(void) {
    ctx_get();
    return kernel_name;
}
