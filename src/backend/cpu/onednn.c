/* SPDX-License-Identifier: MIT */
/* The CPU ops' shared use of oneDNN (onednn.h): the switch, the OpenMP
 * team, and dnnl_sgemm on rill's strided operands. Layer: CPU backend,
 * under the op bodies, sgemm.c and conv_onednn.c. */
#include "backend/cpu/onednn.h"

#if RILL_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The OpenMP calls of the libgomp that oneDNN runs on: the calling
 * thread's team size. */
extern int omp_get_max_threads(void);
extern void omp_set_num_threads(int n);

static atomic_int enabled = -1; /* -1: not decided yet */

bool rill__cpu_onednn_enabled(void) {
    int on = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (on < 0) {
        const char *env = getenv("RILL_CPU_ONEDNN");
        dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        on = !(env != NULL && strcmp(env, "0") == 0) &&
             (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2;
        atomic_store_explicit(&enabled, on, memory_order_relaxed);
    }
    return on;
}

int rill__cpu_onednn_solo(void) {
    int team = omp_get_max_threads();
    if (team != 1)
        omp_set_num_threads(1);
    return team;
}

void rill__cpu_onednn_team(int team) {
    if (team != 1)
        omp_set_num_threads(team);
}

/* How dnnl_sgemm (row-major) reads a [rows, cols] operand whose element
 * (i, j) is at i*rs + j*cs: 'N' with leading dimension rs where its rows
 * are contiguous, 'T' with cs where its columns are. False for other
 * layouts, and for strides past oneDNN's dimension type. */
static bool layout(size_t rows, size_t cols, size_t rs, size_t cs, char *trans, dnnl_dim_t *ld) {
    size_t l;
    if (cs == 1 || cols == 1) {
        l = rows > 1 ? rs : cols;
        if (l >= cols && l <= INT64_MAX) {
            *trans = 'N', *ld = (dnnl_dim_t)l;
            return true;
        }
    }
    if (rs == 1 || rows == 1) {
        l = cols > 1 ? cs : rows;
        if (l >= rows && l <= INT64_MAX) {
            *trans = 'T', *ld = (dnnl_dim_t)l;
            return true;
        }
    }
    return false;
}

bool rill__cpu_onednn_sgemm(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                            const float *b, size_t rsb, size_t csb, float beta, float *c,
                            size_t ldc) {
    char ta, tb;
    dnnl_dim_t lda, ldb;
    if (m == 0 || n == 0 || k == 0 || !rill__cpu_onednn_enabled() ||
        !layout(m, k, rsa, csa, &ta, &lda) || !layout(k, n, rsb, csb, &tb, &ldb))
        return false;
    int team = rill__cpu_onednn_solo();
    dnnl_status_t st = dnnl_sgemm(ta, tb, (dnnl_dim_t)m, (dnnl_dim_t)n, (dnnl_dim_t)k, 1.0f, a, lda,
                                  b, ldb, beta, c, (dnnl_dim_t)ldc);
    rill__cpu_onednn_team(team);
    return st == dnnl_success;
}

#else

bool rill__cpu_onednn_enabled(void) {
    return false;
}

int rill__cpu_onednn_solo(void) {
    return 1;
}

void rill__cpu_onednn_team(int team) {
    (void)team;
}

bool rill__cpu_onednn_sgemm(size_t m, size_t n, size_t k, const float *a, size_t rsa, size_t csa,
                            const float *b, size_t rsb, size_t csb, float beta, float *c,
                            size_t ldc) {
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb;
    (void)beta, (void)c, (void)ldc;
    return false;
}

#endif
