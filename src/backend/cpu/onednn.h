/* SPDX-License-Identifier: MIT */
/* What the CPU ops share of oneDNN (onednn.c), where rill was built with
 * it (RILL_HAVE_ONEDNN): whether they use it, the calling thread's OpenMP
 * team cut to one around each call (the grid's blocks are the
 * parallelism), and its matrix product. Built without oneDNN, the
 * functions say no and the ops run rill's own code. */
#ifndef RILL_CPU_ONEDNN_H
#define RILL_CPU_ONEDNN_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the CPU ops hand convolutions and matrix products to oneDNN:
 * built with it, RILL_CPU_ONEDNN not 0 in the environment (read once),
 * and a processor with AVX2 (below it oneDNN runs reference loops, slower
 * than rill's). The same answer for every call of the process. */
bool rill__cpu_onednn_enabled(void);

/* Cuts the calling thread's OpenMP team, which oneDNN reads when it
 * compiles and runs, to one thread; returns the team size it had, for
 * rill__cpu_onednn_team to put back after the call. */
int rill__cpu_onednn_solo(void);
void rill__cpu_onednn_team(int team);

/* c = a b + beta c on the calling thread alone, with a's element (i, j)
 * at a[i*rsa + j*csa], b's at b[i*rsb + j*csb] and c row-major with
 * leading dimension ldc, as rill__cpu_sgemm_strided takes them (beta 0
 * ignores c's contents). False, having written nothing, where oneDNN does
 * not take it: not enabled, a dimension of 0, or an operand with neither
 * its rows nor its columns contiguous. oneDNN checks its arguments and
 * allocates its packing buffers before it writes c, so a product it
 * refuses (the host out of memory) has written nothing either. */
bool rill__cpu_onednn_sgemm(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                            const float *b, size_t rsb, size_t csb, float beta, float *c,
                            size_t ldc);

#endif
