/* SPDX-License-Identifier: MIT */
/* The CPU ops' matrix product: BLIS's sgemm on the calling thread, with
 * rill's own micro-kernels where BLIS does not know the processor. */
#ifndef RILL_CPU_SGEMM_H
#define RILL_CPU_SGEMM_H

#include <stddef.h>

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

/* The micro-kernel the products use: "blis" (BLIS's own for the processor
 * it detected), "avx512" or "avx2" (rill's, when BLIS runs its generic
 * reference kernels on a processor that has those instructions). */
const char *rill__cpu_sgemm_kernel_name(void);

#endif
