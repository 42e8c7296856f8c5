/* SPDX-License-Identifier: MIT */
/* The CPU ops' matrix product on the calling thread: oneDNN's sgemm where
 * it is enabled (onednn.h), else BLIS's, with rill's own micro-kernels
 * where BLIS's are narrower than the processor. */
#ifndef RILL_CPU_SGEMM_H
#define RILL_CPU_SGEMM_H

#include <stdbool.h>
#include <stddef.h>

/* The kernels a product may run: BLIS's own for the processor it
 * detected, rill's (AVX-512F, 32x12; AVX2 and FMA, 16x6) in BLIS's
 * blocking and packing, or oneDNN's dnnl_sgemm (an operand with neither
 * its rows nor its columns contiguous then runs BLIS's, with the kernel
 * BLIS would run by default). */
typedef enum rill__sgemm_kernel {
    RILL__SGEMM_BLIS,
    RILL__SGEMM_AVX512,
    RILL__SGEMM_AVX2,
    RILL__SGEMM_ONEDNN,
    RILL__SGEMM_KERNELS
} rill__sgemm_kernel;

/* Row-major c = a b + beta c (leading dimensions lda, ldb, ldc), on the
 * calling thread; beta 0 ignores c's previous contents. Every dimension and
 * leading dimension is at most RILL__OP_MAX_DIM (the ops check). Reentrant:
 * blocks of one launch and launches on other streams call it at once. */
void rill__cpu_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                     size_t ldb, float beta, float *c, size_t ldc);

/* c = a b + beta c with a's element (i, j) at a[i*rsa + j*csa] and b's at
 * b[i*rsb + j*csb]: a transposed operand is one whose strides are swapped
 * (BLIS packs either layout). c is row-major with leading dimension ldc.
 * The same rules as rill__cpu_sgemm otherwise. */
void rill__cpu_sgemm_strided(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                             const float *b, size_t rsb, size_t csb, float beta, float *c,
                             size_t ldc);

/* The kernel the products above run, chosen once: oneDNN's where it is
 * enabled; else rill's AVX-512 one where the processor has AVX-512F and
 * BLIS's configuration for it has no AVX-512 kernels, rill's AVX2 one
 * where BLIS runs its generic reference kernels on a processor with AVX2
 * and FMA but not AVX-512F, else BLIS's. */
rill__sgemm_kernel rill__cpu_sgemm_kernel(void);

/* "blis", "avx512", "avx2" or "onednn". */
const char *rill__cpu_sgemm_kernel_name(rill__sgemm_kernel kernel);

/* rill__cpu_sgemm_strided with the kernel `kernel`; false, writing
 * nothing, where the processor lacks its instructions (for oneDNN's, where
 * it is not enabled). */
bool rill__cpu_sgemm_with(rill__sgemm_kernel kernel, size_t m, size_t n, size_t k, const float *a,
                          size_t rsa, size_t csa, const float *b, size_t rsb, size_t csb,
                          float beta, float *c, size_t ldc);

/* rill__cpu_sgemm_strided with rill's AVX-512F loops that read b in place
 * (sgemm.c): where b's rows are contiguous (csb 1), or a's rows and b's
 * columns are (csa 1, rsb 1). False, writing nothing, for other layouts or
 * where the processor lacks AVX-512F. */
bool rill__cpu_sgemm_direct(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                            const float *b, size_t rsb, size_t csb, float beta, float *c,
                            size_t ldc);

#endif
