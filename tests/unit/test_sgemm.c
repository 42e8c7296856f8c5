/* SPDX-License-Identifier: MIT */
/* The CPU ops' sgemm (src/backend/cpu/sgemm.h) with each kernel the
 * processor has instructions for (oneDNN's where rill was built with it),
 * and the AVX-512F loops that read b in place: products small enough for
 * BLIS's small-matrix path and large enough to pack, edges that fill no
 * whole tile, transposed operands, leading dimensions past the row,
 * operands with neither rows nor columns contiguous, beta 0 over NaN and
 * beta 1, against a double-precision product; the bits of a product
 * repeated; and which kernel the products run by default. */
#include "fixture.h"

#include "backend/cpu/sgemm.h"

#include <blis.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape {
    size_t m, n, k;
} shape;

static const shape shapes[] = {
    {1, 1, 1},     {7, 5, 3},       {8, 128, 64},    {33, 13, 7},    {64, 64, 64},
    {130, 131, 5}, {130, 131, 129}, {250, 230, 260}, {300, 47, 520}, {45, 700, 90},
    {12, 33, 400}, {13, 7, 17},     {32, 70, 785},   {5, 100, 1000}, {32, 256, 784},
};

/* Whether oneDNN takes products: built with it (RILL_TEST_ONEDNN, from
 * CMake), not turned off, on a processor with AVX2. */
static bool onednn_on(void) {
#if defined(RILL_TEST_ONEDNN) && defined(__x86_64__)
    const char *env = getenv("RILL_CPU_ONEDNN");
    __builtin_cpu_init();
    return !(env != NULL && strcmp(env, "0") == 0) && __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

static bool cpu_has(rill__sgemm_kernel kernel) {
    if (kernel == RILL__SGEMM_ONEDNN)
        return onednn_on();
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (kernel == RILL__SGEMM_AVX512)
        return __builtin_cpu_supports("avx512f");
    if (kernel == RILL__SGEMM_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return kernel == RILL__SGEMM_BLIS;
}

/* c = a b + beta c0 with `kernel` (through rill__cpu_sgemm_direct when
 * direct), a [m, k] (transposed in memory when at), b [k, n] (likewise),
 * both with every stride times spread (2: neither rows nor columns
 * contiguous), c row-major with ldc = n + 3, checked against the product
 * in double: each element within (k + 2) float epsilons of the sum of its
 * terms' magnitudes. Returns false when the call refuses: the processor
 * lacks the kernel's instructions, or the direct loops the layout. */
static bool check_spread(rill__sgemm_kernel kernel, bool direct, shape sh, bool at, bool bt,
                         float beta, size_t spread) {
    size_t m = sh.m, n = sh.n, k = sh.k, ldc = n + 3;
    float *a = rt_floats(m * k * spread), *b = rt_floats(k * n * spread), *c0 = rt_floats(m * ldc),
          *c = rt_floats(m * ldc);
    rt_fill_uniform(a, m * k * spread, 1 + m);
    rt_fill_uniform(b, k * n * spread, 2 + n);
    rt_fill_uniform(c0, m * ldc, 3 + k);
    for (size_t i = 0; i < m * ldc; i++)
        c[i] = beta == 0.0f ? NAN : c0[i]; /* beta 0 never reads c */
    size_t rsa = (at ? 1 : k) * spread, csa = (at ? m : 1) * spread;
    size_t rsb = (bt ? 1 : n) * spread, csb = (bt ? k : 1) * spread;
    if (!(direct ? rill__cpu_sgemm_direct(m, n, k, a, rsa, csa, b, rsb, csb, beta, c, ldc)
                 : rill__cpu_sgemm_with(kernel, m, n, k, a, rsa, csa, b, rsb, csb, beta, c, ldc))) {
        free(a);
        free(b);
        free(c0);
        free(c);
        return false;
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double want = beta == 0.0f ? 0.0 : (double)beta * c0[i * ldc + j];
            double mag = fabs(want);
            for (size_t p = 0; p < k; p++) {
                double t = (double)a[i * rsa + p * csa] * b[p * rsb + j * csb];
                want += t;
                mag += fabs(t);
            }
            double got = c[i * ldc + j];
            if (!(fabs(got - want) <= (double)(k + 2) * FLT_EPSILON * mag))
                fail_msg("%s: %zux%zux%zu (a%s, b%s, beta %g): c[%zu][%zu] is %.9g, want %.9g",
                         direct ? "direct" : rill__cpu_sgemm_kernel_name(kernel), m, n, k,
                         at ? "^T" : "", bt ? "^T" : "", (double)beta, i, j, got, want);
        }
    for (size_t i = 0; i < m; i++) /* the padding past each row is untouched */
        for (size_t j = n; j < ldc; j++)
            assert_true(beta == 0.0f ? isnan(c[i * ldc + j]) : c[i * ldc + j] == c0[i * ldc + j]);
    free(a);
    free(b);
    free(c0);
    free(c);
    return true;
}

static bool check_product(rill__sgemm_kernel kernel, bool direct, shape sh, bool at, bool bt,
                          float beta) {
    return check_spread(kernel, direct, sh, at, bt, beta, 1);
}

static void every_shape(rill__sgemm_kernel kernel) {
    if (!cpu_has(kernel)) {
        assert_false(check_product(kernel, false, shapes[1], false, false, 0.0f));
        skip();
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            assert_true(check_product(kernel, false, shapes[s], t & 1, t & 2, 0.0f));
            assert_true(check_product(kernel, false, shapes[s], t & 2, t & 1, 1.0f));
        }
}

/* The AVX-512F loops that read b in place take b with contiguous rows, or
 * a with contiguous rows and b with contiguous columns; they refuse other
 * layouts (two transposed operands), and every layout without AVX-512F. */
static void test_sgemm_direct_products(void **state) {
    (void)state;
    if (!cpu_has(RILL__SGEMM_AVX512)) {
        assert_false(check_product(RILL__SGEMM_AVX512, true, shapes[1], false, false, 0.0f));
        skip();
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            bool at = t & 1, bt = t & 2;
            shape sh = shapes[s]; /* a side of 1 makes both layouts contiguous */
            size_t csa = at ? sh.m : 1, rsb = bt ? 1 : sh.n, csb = bt ? sh.k : 1;
            bool takes = csb == 1 || (csa == 1 && rsb == 1);
            assert_int_equal(check_product(RILL__SGEMM_AVX512, true, shapes[s], at, bt, 0.0f),
                             takes);
            assert_int_equal(check_product(RILL__SGEMM_AVX512, true, shapes[s], at, bt, 1.0f),
                             takes);
        }
}

static void test_sgemm_blis_kernel_products(void **state) {
    (void)state;
    every_shape(RILL__SGEMM_BLIS);
}

static void test_sgemm_avx512_kernel_products(void **state) {
    (void)state;
    every_shape(RILL__SGEMM_AVX512);
}

static void test_sgemm_avx2_kernel_products(void **state) {
    (void)state;
    every_shape(RILL__SGEMM_AVX2);
}

static void test_sgemm_onednn_products(void **state) {
    (void)state;
    every_shape(RILL__SGEMM_ONEDNN);
}

/* Operands whose rows and columns are both strided: oneDNN does not read
 * them, and its kernel hands the product to BLIS's; every kernel gives the
 * product. */
static void test_sgemm_spread_operands(void **state) {
    (void)state;
    /* Small ones and one BLIS packs: the layout, not the size, is tested. */
    static const shape spread[] = {{1, 1, 1}, {7, 5, 3}, {33, 13, 7}, {13, 7, 17}, {130, 131, 129}};
    for (int kernel = 0; kernel < RILL__SGEMM_KERNELS; kernel++) {
        if (!cpu_has((rill__sgemm_kernel)kernel))
            continue;
        for (size_t s = 0; s < sizeof spread / sizeof spread[0]; s++)
            for (int t = 0; t < 4; t++) {
                assert_true(check_spread((rill__sgemm_kernel)kernel, false, spread[s], t & 1, t & 2,
                                         0.0f, 2));
                assert_true(check_spread((rill__sgemm_kernel)kernel, false, spread[s], t & 1, t & 2,
                                         1.0f, 2));
            }
    }
}

/* The same product twice gives the same bits (each micro-kernel adds its k
 * steps in order), on every kernel the processor has. */
static void test_sgemm_repeats_bit_for_bit(void **state) {
    (void)state;
    size_t m = 250, n = 230, k = 260;
    float *a = rt_floats(m * k), *b = rt_floats(k * n), *c1 = rt_floats(m * n),
          *c2 = rt_floats(m * n);
    rt_fill_uniform(a, m * k, 7);
    rt_fill_uniform(b, k * n, 8);
    for (int kernel = 0; kernel < RILL__SGEMM_KERNELS; kernel++) {
        if (!cpu_has((rill__sgemm_kernel)kernel))
            continue;
        assert_true(rill__cpu_sgemm_with((rill__sgemm_kernel)kernel, m, n, k, a, k, 1, b, n, 1,
                                         0.0f, c1, n));
        assert_true(rill__cpu_sgemm_with((rill__sgemm_kernel)kernel, m, n, k, a, k, 1, b, n, 1,
                                         0.0f, c2, n));
        assert_memory_equal(c1, c2, m * n * sizeof *c1);
    }
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* The products run oneDNN's kernel where it takes them; else rill's
 * AVX-512 kernel on a processor with AVX-512F unless BLIS chose a
 * configuration with AVX-512 kernels of its own; never a kernel the
 * processor lacks. */
static void test_sgemm_default_kernel(void **state) {
    (void)state;
    rill__sgemm_kernel kernel = rill__cpu_sgemm_kernel();
    arch_t arch = bli_arch_query_id();
    print_message("BLIS configuration %s, kernel %s\n", bli_arch_string(arch),
                  rill__cpu_sgemm_kernel_name(kernel));
    assert_true(cpu_has(kernel));
    if (onednn_on()) {
        assert_int_equal(kernel, RILL__SGEMM_ONEDNN);
        return;
    }
    if (cpu_has(RILL__SGEMM_AVX512) && arch != BLIS_ARCH_SKX && arch != BLIS_ARCH_KNL)
        assert_int_equal(kernel, RILL__SGEMM_AVX512);
    if (arch == BLIS_ARCH_GENERIC && cpu_has(RILL__SGEMM_AVX2))
        assert_int_not_equal(kernel, RILL__SGEMM_BLIS);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_blis_kernel_products),
        cmocka_unit_test(test_sgemm_avx512_kernel_products),
        cmocka_unit_test(test_sgemm_avx2_kernel_products),
        cmocka_unit_test(test_sgemm_onednn_products),
        cmocka_unit_test(test_sgemm_spread_operands),
        cmocka_unit_test(test_sgemm_direct_products),
        cmocka_unit_test(test_sgemm_repeats_bit_for_bit),
        cmocka_unit_test(test_sgemm_default_kernel),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
