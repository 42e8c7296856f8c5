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

/* rill__cpu_sgemm with a and b read through row and column strides (in
 * elements): element (i, p) of a at a[i * rs_a + p * cs_a], element (p, j)
 * of b at b[p * rs_b + j * cs_b]; a transposed operand is a column stride
 * of 1. */
void rill__cpu_sgemm_strided(size_t m, size_t n, size_t k, const float *a, size_t rs_a, size_t cs_a,
                             const float *b, size_t rs_b, size_t cs_b, float beta, float *c,
                             size_t ldc);

/* The micro-kernel the products use: "blis" (BLIS's own for the processor
 * it detected), "avx512" or "avx2" (rill's, when BLIS runs its generic
 * reference kernels on a processor that has those instructions). */
const char *rill__cpu_sgemm_kernel_name(void);

#endif
