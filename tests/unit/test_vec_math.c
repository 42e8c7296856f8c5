/* SPDX-License-Identifier: MIT */
/* The CPU op bodies' vectorizable exp, tanh, sigmoid and normal CDF
 * (src/backend/cpu/vec_math.h), and GELU's gradients built on them,
 * against the C library's double-precision functions: the error in ulps
 * over every float exponent of both signs,
 * and the special values that expf gives (infinities, NaN, overflow, the
 * subnormal results and underflow to 0). */
#include "fixture.h"
#include "ops_support.h"

#include "backend/cpu/vec_math.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Mantissas tried per exponent and sign: both ends and a spread between. */
#define STEPS 2048

/* |got - want| in units of the last place of want's binade (2^-149 at
 * least, float's subnormal spacing); +inf counts as 2^128, the next
 * power of two past FLT_MAX, and so does any want beyond it. */
static double ulps(float got, double want) {
    const double two128 = 0x1p128;
    double g = isinf(got) ? copysign(two128, (double)got) : (double)got;
    double w = fabs(want) > two128 ? copysign(two128, want) : want;
    int e;
    frexp(w, &e); /* |w| in [2^(e-1), 2^e) */
    int lsb = e - 1 - 23 < -149 ? -149 : e - 1 - 23;
    return fabs(g - w) / ldexp(1.0, lsb);
}

/* The float with sign s, biased exponent be and mantissa m (23 bits). */
static float make_float(uint32_t s, uint32_t be, uint32_t m) {
    return rill__vec_float(s << 31 | be << 23 | m);
}

typedef float vec_fn(float);
typedef double ref_fn(double);

/* The largest error of fn against ref over every exponent and sign
 * (mantissas: STEPS spread out, both ends), at |x| < limit; *at gets the
 * x where it is. */
static double worst_ulps(vec_fn *fn, ref_fn *ref, double limit, float *at) {
    double worst = 0.0;
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t be = 0; be < 255; be++)
            for (uint32_t k = 0; k <= STEPS; k++) {
                uint32_t m = (uint32_t)(((uint64_t)0x7fffff * k) / STEPS);
                float x = make_float(s, be, m);
                if (fabs((double)x) >= limit)
                    continue;
                double err = ulps(fn(x), ref((double)x));
                if (err > worst) {
                    worst = err;
                    *at = x;
                }
            }
    return worst;
}

static double sigmoid_ref(double x) {
    return 1.0 / (1.0 + exp(-x));
}

static float vec_exp(float x) {
    return rill__vec_expf(x);
}

static float vec_tanh(float x) {
    return rill__vec_tanhf(x);
}

static float vec_sigmoid(float x) {
    return rill__vec_sigmoidf(x);
}

static double normal_cdf_ref(double x) {
    return 0.5 * erfc(-x / sqrt(2.0));
}

static float vec_normal_cdf(float x) {
    return rill__vec_normal_cdf(x);
}

/* "rill__vec_expf is within 2 ulp of exp over float's whole range": every
 * exponent of both signs, overflow and subnormal results included. */
static void test_vec_expf_is_within_2_ulp_everywhere(void **state) {
    (void)state;
    float at = 0.0f;
    double worst = worst_ulps(vec_exp, exp, INFINITY, &at);
    if (worst > 2.0)
        fail_msg("exp(%a) is %.2f ulp off", (double)at, worst);
}

/* "... and gives expf's special values": 0 at -inf and below about
 * -103.97, +inf at +inf and above about 88.72, NaN for NaN, 1 at 0. */
static void test_vec_expf_special_values_are_expfs(void **state) {
    (void)state;
    assert_true(rill__vec_expf(-INFINITY) == 0.0f);
    assert_true(isinf(rill__vec_expf(INFINITY)) && rill__vec_expf(INFINITY) > 0.0f);
    assert_true(isnan(rill__vec_expf(NAN)));
    assert_true(isnan(rill__vec_expf(-NAN)));
    assert_true(rill__vec_expf(0.0f) == 1.0f);
    assert_true(rill__vec_expf(-0.0f) == 1.0f);
    assert_true(rill__vec_expf(FLT_MIN) == 1.0f);
    assert_true(rill__vec_expf(-FLT_TRUE_MIN) == 1.0f);
    /* The largest x whose exp is finite, and the next float: inf. */
    float top = 0x1.62e42ep+6f;
    assert_true(rill__vec_expf(top) == expf(top));
    assert_true(isinf(rill__vec_expf(nextafterf(top, INFINITY))));
    assert_true(isinf(rill__vec_expf(FLT_MAX)));
    /* The smallest subnormal result, 0 below it, and a subnormal result
     * rounded once, as expf rounds it. */
    float low = -0x1.9fe368p+6f; /* exp rounds to 2^-149 */
    assert_true(rill__vec_expf(low) == FLT_TRUE_MIN);
    assert_true(rill__vec_expf(-104.0f) == 0.0f);
    assert_true(rill__vec_expf(-FLT_MAX) == 0.0f);
    for (float x = -103.5f; x < -87.0f; x += 0.37f)
        if (ulps(rill__vec_expf(x), exp((double)x)) > 1.0)
            fail_msg("exp(%a) = %a, want %a", (double)x, (double)rill__vec_expf(x),
                     (double)expf(x));
}

/* tanh within 2 ulp everywhere, odd, with tanh's special values. */
static void test_vec_tanhf_is_within_2_ulp_and_odd(void **state) {
    (void)state;
    float at = 0.0f;
    double worst = worst_ulps(vec_tanh, tanh, INFINITY, &at);
    if (worst > 2.0)
        fail_msg("tanh(%a) is %.2f ulp off", (double)at, worst);
    assert_true(rill__vec_tanhf(INFINITY) == 1.0f);
    assert_true(rill__vec_tanhf(-INFINITY) == -1.0f);
    assert_true(isnan(rill__vec_tanhf(NAN)));
    assert_true(rill__vec_tanhf(0.0f) == 0.0f && !signbit(rill__vec_tanhf(0.0f)));
    assert_true(rill__vec_tanhf(-0.0f) == 0.0f && signbit(rill__vec_tanhf(-0.0f)));
    assert_true(rill__vec_tanhf(-FLT_TRUE_MIN) == -FLT_TRUE_MIN);
    for (float x = 0.01f; x < 12.0f; x *= 1.37f)
        assert_true(rill__vec_tanhf(-x) == -rill__vec_tanhf(x));
}

/* sigmoid within 3 ulp where e^-x is finite (three roundings after the
 * exp), 0 and 1 at the infinities, NaN for NaN. */
static void test_vec_sigmoidf_is_within_3_ulp(void **state) {
    (void)state;
    float at = 0.0f;
    double worst = worst_ulps(vec_sigmoid, sigmoid_ref, 88.0, &at);
    if (worst > 3.0)
        fail_msg("sigmoid(%a) is %.2f ulp off", (double)at, worst);
    assert_true(rill__vec_sigmoidf(-INFINITY) == 0.0f);
    assert_true(rill__vec_sigmoidf(INFINITY) == 1.0f);
    assert_true(isnan(rill__vec_sigmoidf(NAN)));
}

/* The double sum of a run: exact for integers, whatever the length's
 * remainder by the 32 accumulators. */
static void test_vec_sum_adds_every_element(void **state) {
    (void)state;
    float a[101];
    for (size_t i = 0; i < 101; i++)
        a[i] = (float)(i + 1);
    for (size_t n = 0; n <= 101; n++)
        assert_true(rill__vec_sum(a, n) == (double)(n * (n + 1) / 2));
}

static void expect_phi_within_9_ulp(float x) {
    double err = ulps(rill__vec_normal_cdf(x), normal_cdf_ref((double)x));
    if (err > 9.0)
        fail_msg("Phi(%a) is %.2f ulp off", (double)x, err);
}

/* Phi within 9 ulp wherever it is a normal float (x above about -13), its
 * tail included, where 1 + erf(x / sqrt 2) would cancel; 0 and 1 at the
 * infinities, 1/2 at both zeros, NaN for NaN. The worst float, from a sweep
 * of every one from -13 to 8, is x = -11.2442541 at 7.25 ulp: it is checked
 * too, and so is x = -0.0812822282, where the float polynomial's terms
 * cancel. */
static void test_vec_normal_cdf_is_within_9_ulp_in_both_tails(void **state) {
    (void)state;
    float at = 0.0f;
    double worst = worst_ulps(vec_normal_cdf, normal_cdf_ref, 13.0, &at);
    if (worst > 9.0)
        fail_msg("Phi(%a) is %.2f ulp off", (double)at, worst);
    for (float x = -13.0f; x < 6.0f; x += 0.001953125f)
        expect_phi_within_9_ulp(x);
    expect_phi_within_9_ulp(-11.2442541f);
    expect_phi_within_9_ulp(-0.0812822282f);
    assert_true(rill__vec_normal_cdf(-INFINITY) == 0.0f);
    assert_true(rill__vec_normal_cdf(INFINITY) == 1.0f);
    assert_true(rill__vec_normal_cdf(0.0f) == 0.5f);
    assert_true(rill__vec_normal_cdf(-0.0f) == 0.5f);
    assert_true(isnan(rill__vec_normal_cdf(NAN)));
}

/* rill_op_map_f32's vector loops (compiled for the widest vectors the
 * processor has: tensor_kernels.c's VECTOR_BODY) give the bits of these
 * functions evaluated one element at a time, for every map built on them,
 * over a spread of values, the infinities and NaN (a NaN's sign is not
 * kept: C lets the compiler swap a product's operands). */
static void test_vec_map_op_gives_the_scalar_bits(void **state) {
    (void)state;
    enum { N = 20011 };
    float *x = malloc(N * sizeof *x), *want = malloc(N * sizeof *want);
    assert_non_null(x);
    assert_non_null(want);
    for (size_t i = 0; i < N; i++)
        x[i] = -24.0f + 48.0f * (float)i / (float)(N - 4);
    x[N - 3] = INFINITY;
    x[N - 2] = -INFINITY;
    x[N - 1] = NAN;
    float *dev_x = NULL, *dev_y = NULL;
    RT_OK(rill_malloc(cpu_device(), N * sizeof(float), (void **)&dev_x));
    RT_OK(rill_malloc(cpu_device(), N * sizeof(float), (void **)&dev_y));
    RT_OK(rill_memcpy(dev_x, x, N * sizeof(float)));
    const rill_map_op ops[] = {RILL_MAP_EXP,  RILL_MAP_SIGMOID,   RILL_MAP_SILU,
                               RILL_MAP_TANH, RILL_MAP_GELU_TANH, RILL_MAP_GELU};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (size_t i = 0; i < N; i++) {
            float v = x[i];
            switch (ops[o]) {
            case RILL_MAP_EXP:
                want[i] = rill__vec_expf(v);
                break;
            case RILL_MAP_SIGMOID:
                want[i] = rill__vec_sigmoidf(v);
                break;
            case RILL_MAP_SILU:
                want[i] = v * rill__vec_sigmoidf(v);
                break;
            case RILL_MAP_TANH:
                want[i] = rill__vec_tanhf(v);
                break;
            case RILL_MAP_GELU_TANH:
                want[i] =
                    0.5f * v *
                    (1.0f + rill__vec_tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
                break;
            default:
                want[i] = v * rill__vec_normal_cdf(v);
                break;
            }
        }
        RT_OK(rill_op_map_f32(NULL, ops[o], dev_y, dev_x, 0.0f, N));
        RT_OK(rill_device_synchronize(NULL));
        for (size_t i = 0; i < N; i++)
            if (memcmp(&dev_y[i], &want[i], sizeof(float)) != 0 &&
                !(isnan(dev_y[i]) && isnan(want[i])))
                fail_msg("map op %d at x = %.9g: %.9g, one at a time %.9g", (int)ops[o],
                         (double)x[i], (double)dev_y[i], (double)want[i]);
    }
    RT_OK(rill_free(dev_x));
    RT_OK(rill_free(dev_y));
    free(x);
    free(want);
}

/* GELU's gradient at x in double precision: Phi(x) + x phi(x), and the
 * magnitude of its terms. */
static double gelu_gradient_ref(double x, double *terms) {
    double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    *terms = fabs(normal_cdf_ref(x)) + fabs(x * pdf);
    return normal_cdf_ref(x) + x * pdf;
}

/* The tanh approximation's gradient at x in double precision, and the
 * magnitude of its terms before 1 + t and 1 - t^2 cancel. */
static double gelu_tanh_gradient_ref(double x, double *terms) {
    const double beta = sqrt(2.0 / M_PI), kappa = 0.044715;
    double t = tanh(beta * (x + kappa * x * x * x));
    double slope = 0.5 * x * beta * (1.0 + 3.0 * kappa * x * x);
    *terms = 0.5 * (1.0 + fabs(t)) + fabs(slope);
    return 0.5 * (1.0 + t) + (1.0 - t * t) * slope;
}

/* RILL_BINARY_GELU_BACKWARD and RILL_BINARY_GELU_TANH_BACKWARD (vector
 * loops of vec_math.h's functions) against double precision, within 1e-6
 * of the sum of their terms' magnitudes (they cancel: near x = -0.75, and
 * in the tanh form's 1 + t and 1 - t^2 far from 0) and
 * 16 of float's subnormal steps (below x = -14 the density's exponential
 * rounds to 0 before its product with x would bring it back, as in
 * PyTorch's float formula), with
 * the same bits whether the gradient a is a tensor or broadcast, and NaN
 * for NaN. */
static void test_gelu_gradients_are_close_and_the_same_broadcast(void **state) {
    (void)state;
    enum { N = 20011 };
    size_t n = N, one = 1, zero = 0;
    float *x = malloc(N * sizeof *x), *ones = malloc(N * sizeof *ones);
    assert_non_null(x);
    assert_non_null(ones);
    for (size_t i = 0; i < N; i++) {
        x[i] = -24.0f + 48.0f * (float)i / (float)(N - 2);
        ones[i] = 1.0f;
    }
    x[N - 1] = NAN;
    float *dev_x = NULL, *dev_ones = NULL, *dev_y = NULL, *dev_z = NULL;
    RT_OK(rill_malloc(cpu_device(), N * sizeof(float), (void **)&dev_x));
    RT_OK(rill_malloc(cpu_device(), N * sizeof(float), (void **)&dev_ones));
    RT_OK(rill_malloc(cpu_device(), N * sizeof(float), (void **)&dev_y));
    RT_OK(rill_malloc(cpu_device(), N * sizeof(float), (void **)&dev_z));
    RT_OK(rill_memcpy(dev_x, x, N * sizeof(float)));
    RT_OK(rill_memcpy(dev_ones, ones, N * sizeof(float)));
    const rill_binary_op ops[] = {RILL_BINARY_GELU_BACKWARD, RILL_BINARY_GELU_TANH_BACKWARD};
    for (size_t o = 0; o < 2; o++) {
        RT_OK(rill_op_binary_f32(NULL, ops[o], dev_y, dev_ones, &one, dev_x, &one, &n, 1));
        RT_OK(rill_op_binary_f32(NULL, ops[o], dev_z, dev_ones, &zero, dev_x, &one, &n, 1));
        RT_OK(rill_device_synchronize(NULL));
        assert_true(isnan(dev_y[N - 1]) && isnan(dev_z[N - 1]));
        for (size_t i = 0; i + 1 < N; i++) {
            double terms;
            double want =
                o == 0 ? gelu_gradient_ref(x[i], &terms) : gelu_tanh_gradient_ref(x[i], &terms);
            if (fabs((double)dev_y[i] - want) > 1e-6 * terms + 0x1p-145)
                fail_msg("op %d at x = %.9g: %.9g, want %.9g", (int)ops[o], (double)x[i],
                         (double)dev_y[i], want);
            if (memcmp(&dev_y[i], &dev_z[i], sizeof(float)) != 0)
                fail_msg("op %d at x = %.9g: %.9g, broadcast %.9g", (int)ops[o], (double)x[i],
                         (double)dev_y[i], (double)dev_z[i]);
        }
    }
    RT_OK(rill_free(dev_x));
    RT_OK(rill_free(dev_ones));
    RT_OK(rill_free(dev_y));
    RT_OK(rill_free(dev_z));
    free(x);
    free(ones);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vec_expf_is_within_2_ulp_everywhere),
        cmocka_unit_test(test_vec_expf_special_values_are_expfs),
        cmocka_unit_test(test_vec_tanhf_is_within_2_ulp_and_odd),
        cmocka_unit_test(test_vec_sigmoidf_is_within_3_ulp),
        cmocka_unit_test(test_vec_normal_cdf_is_within_9_ulp_in_both_tails),
        cmocka_unit_test(test_vec_sum_adds_every_element),
        cmocka_unit_test(test_vec_map_op_gives_the_scalar_bits),
        cmocka_unit_test(test_gelu_gradients_are_close_and_the_same_broadcast),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
