/* SPDX-License-Identifier: MIT */
/* The built-in ops on the device under test (contract.h): each result
 * against one computed here on the host, within float rounding. Matrix
 * products and convolutions run through cuBLAS and cuDNN on a CUDA device
 * (through the stand-ins of tests/cuda_fake on the stand-in driver). */
#include "contract.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* fill, add, mul and add_scalar in f32, over sizes that give one block
 * and several. */
static void test_elementwise_f32(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t sizes[] = {1, 1000, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *host = malloc(n * sizeof *host), *got = malloc(n * sizeof *got);
        for (size_t i = 0; i < n; i++)
            host[i] = (float)(i % 97) * 0.25f - 7.0f;
        float *a = contract_alloc(s, n * sizeof *a), *b = contract_alloc(s, n * sizeof *b);
        float *out = contract_alloc(s, n * sizeof *out);
        contract_upload(s, a, host, n * sizeof *a);
        RT_OK(rill_op_fill_f32(s, b, 1.5f, n));
        RT_OK(rill_op_add_f32(s, out, a, b, -2.0f, n)); /* a - 3 */
        RT_OK(rill_op_mul_f32(s, out, out, a, n));      /* (a - 3) a */
        RT_OK(rill_op_add_scalar_f32(s, out, out, 0.5f, n));
        contract_download(s, got, out, n * sizeof *got);
        for (size_t i = 0; i < n; i++) {
            float want = (host[i] + (-2.0f) * 1.5f) * host[i] + 0.5f;
            contract_expect_close("out", i, got[i], want, 1e-6);
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(out));
        free(host);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* fill_bits: "x[i] = bits for n elements of element_bytes each ..., each
 * stored as an unsigned integer of that width holding bits modulo
 * 2^(8 element_bytes)": every width, over one block and several, with
 * patterns of one repeated byte and of several; the elements around the
 * filled ones keep their bytes. */
static void test_fill_bits(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t widths[] = {1, 2, 4, 8};
    const size_t sizes[] = {1, 1000, (size_t)1 << 20};
    const uint64_t patterns[] = {0, UINT64_MAX, UINT64_C(0x0123456789abcdef),
                                 UINT64_C(0xfedcba9876543281)};
    for (size_t w = 0; w < 4; w++)
        for (size_t k = 0; k < 3; k++)
            for (size_t p = 0; p < 4; p++) {
                size_t width = widths[w], n = sizes[k], bytes = (n + 2) * width;
                unsigned char *got = malloc(bytes), *want = malloc(bytes);
                memset(want, 0x5a, bytes);
                unsigned char *x = contract_alloc(s, bytes);
                contract_upload(s, x, want, bytes);
                RT_OK(rill_op_fill_bits(s, x + width, patterns[p], width, n));
                for (size_t i = 1; i <= n; i++) {
                    uint8_t v8 = (uint8_t)patterns[p];
                    uint16_t v16 = (uint16_t)patterns[p];
                    uint32_t v32 = (uint32_t)patterns[p];
                    const void *v = width == 1   ? (const void *)&v8
                                    : width == 2 ? (const void *)&v16
                                    : width == 4 ? (const void *)&v32
                                                 : (const void *)&patterns[p];
                    memcpy(want + i * width, v, width);
                }
                contract_download(s, got, x, bytes);
                for (size_t i = 0; i < bytes; i++)
                    if (got[i] != want[i])
                        fail_msg("width %zu, n %zu, bits %#llx: byte %zu is %#x, want %#x", width,
                                 n, (unsigned long long)patterns[p], i, got[i], want[i]);
                RT_OK(rill_free(x));
                free(got);
                free(want);
            }
    RT_OK(rill_stream_destroy(s));
}

/* fill_bits refuses, and runs nothing: a width other than 1, 2, 4 or 8, an
 * x not aligned to its elements, n 0, NULL, and a fill past the end of its
 * allocation. */
static void test_fill_bits_refusals(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    uint32_t *x = contract_alloc(s, 8 * sizeof *x);
    RT_OK(rill_op_fill_bits(s, x, 7, 4, 8));
    assert_int_equal(rill_op_fill_bits(s, x, 1, 3, 4), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_op_fill_bits: element_bytes is 3"));
    assert_int_equal(rill_op_fill_bits(s, x, 1, 16, 1), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "1, 2, 4 or 8"));
    assert_int_equal(rill_op_fill_bits(s, (char *)x + 2, 1, 4, 2), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "is not aligned to its 4-byte elements"));
    assert_int_equal(rill_op_fill_bits(s, x, 1, 4, 0), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_op_fill_bits: n is 0"));
    assert_int_equal(rill_op_fill_bits(s, x, 1, 8, SIZE_MAX / 4), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "n is"));
    assert_int_equal(rill_op_fill_bits(s, NULL, 1, 4, 1), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "x is NULL"));
    assert_int_equal(rill_op_fill_bits(s, x, 1, 4, 9), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "n elements"));
    uint32_t got[8];
    contract_download(s, got, x, sizeof got);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(got[i], 7);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* add_scalar_i64: "out[i] = a[i] + value ..., wrapping modulo 2^64", in
 * place and into another buffer, over one block and several; and its
 * refusals. */
static void test_add_scalar_i64(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t sizes[] = {1, 1000, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        int64_t *host = malloc(n * sizeof *host), *got = malloc(n * sizeof *got);
        for (size_t i = 0; i < n; i++)
            host[i] = i % 3 == 0 ? INT64_MAX - (int64_t)(i % 5) : (int64_t)i * -7;
        int64_t *a = contract_alloc(s, n * sizeof *a), *out = contract_alloc(s, n * sizeof *out);
        contract_upload(s, a, host, n * sizeof *a);
        RT_OK(rill_op_add_scalar_i64(s, out, a, 3, n));
        RT_OK(rill_op_add_scalar_i64(s, a, a, -5, n));
        contract_download(s, got, out, n * sizeof *got);
        for (size_t i = 0; i < n; i++)
            if (got[i] != (int64_t)((uint64_t)host[i] + 3u))
                fail_msg("out[%zu] = %lld, want %lld + 3 wrapped", i, (long long)got[i],
                         (long long)host[i]);
        contract_download(s, got, a, n * sizeof *got);
        for (size_t i = 0; i < n; i++)
            assert_true(got[i] == host[i] - 5);
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        free(host);
        free(got);
    }
    int64_t *b = contract_alloc(s, 8 * sizeof *b);
    assert_int_equal(rill_op_add_scalar_i64(s, b + 1, b, 1, 4), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "out overlaps a without being equal to it"));
    assert_int_equal(rill_op_add_scalar_i64(s, b, b, 1, 0), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_op_add_scalar_i64: n is 0"));
    assert_int_equal(rill_op_add_scalar_i64(s, b, NULL, 1, 4), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "a is NULL"));
    assert_int_equal(rill_op_add_scalar_i64(s, b, b, 1, 9), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "n int64s"));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s));
}

/* sum in f32 of a sequence whose total is known. */
static void test_sum_f32(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t n = 3000001;
    float *host = malloc(n * sizeof *host);
    double want = 0;
    for (size_t i = 0; i < n; i++) {
        host[i] = (float)((i % 1000) * 0.001);
        want += host[i];
    }
    float *a = contract_alloc(s, n * sizeof *a), *out = contract_alloc(s, sizeof *out);
    contract_upload(s, a, host, n * sizeof *a);
    RT_OK(rill_op_sum_f32(s, out, a, n));
    float got;
    contract_download(s, &got, out, sizeof got);
    contract_expect_close("sum", 0, got, want, 1e-6);
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    free(host);
    RT_OK(rill_stream_destroy(s));
}

/* randn: the same values for the same seed, whatever the device, with
 * the mean and spread asked for. */
static void test_randn_is_a_function_of_the_seed(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t n = 1 << 18;
    float *x = contract_alloc(s, n * sizeof *x), *y = contract_alloc(s, n * sizeof *y);
    RT_OK(rill_op_randn_f32(s, x, n, 2.0f, 3.0f, 42));
    RT_OK(rill_op_randn_f32(s, y, n, 2.0f, 3.0f, 42));
    float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy);
    contract_download(s, hx, x, n * sizeof *hx);
    contract_download(s, hy, y, n * sizeof *hy);
    assert_memory_equal(hx, hy, n * sizeof *hx);
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++)
        mean += hx[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++)
        var += (hx[i] - mean) * (hx[i] - mean);
    var /= (double)n;
    contract_expect_close("mean", 0, mean, 2.0, 0.02);
    contract_expect_close("std", 0, sqrt(var), 3.0, 0.02);
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    free(hx);
    free(hy);
    RT_OK(rill_stream_destroy(s));
}

/* f16: casts both ways, element-wise ops and sum, against the float
 * results rounded once. */
static void test_f16_ops(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t n = 4099;
    float *host = malloc(n * sizeof *host), *back = malloc(n * sizeof *back);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)(i % 64) * 0.125f; /* exact in half */
    float *f = contract_alloc(s, n * sizeof *f), *g = contract_alloc(s, n * sizeof *g);
    rill_half *h = contract_alloc(s, n * sizeof *h), *k = contract_alloc(s, n * sizeof *k);
    rill_half *sum = contract_alloc(s, sizeof *sum);
    contract_upload(s, f, host, n * sizeof *f);
    RT_OK(rill_op_cast_f32_f16(s, h, f, n));
    RT_OK(rill_op_fill_f16(s, k, 2.0f, n));
    RT_OK(rill_op_mul_f16(s, k, k, h, n));           /* 2h */
    RT_OK(rill_op_add_f16(s, k, k, h, 1.0f, n));     /* 3h */
    RT_OK(rill_op_add_scalar_f16(s, k, k, 1.0f, n)); /* 3h + 1 */
    RT_OK(rill_op_cast_f16_f32(s, g, k, n));
    RT_OK(rill_op_sum_f16(s, sum, h, n));
    contract_download(s, back, g, n * sizeof *back);
    double want_sum = 0;
    for (size_t i = 0; i < n; i++) {
        contract_expect_close("3h+1", i, back[i], 3.0 * host[i] + 1.0, 1e-3);
        want_sum += host[i];
    }
    RT_OK(rill_op_cast_f16_f32(s, g, sum, 1));
    float got_sum;
    contract_download(s, &got_sum, g, sizeof got_sum);
    contract_expect_close("sum", 0, got_sum, want_sum, 1e-3);
    RT_OK(rill_free(f));
    RT_OK(rill_free(g));
    RT_OK(rill_free(h));
    RT_OK(rill_free(k));
    RT_OK(rill_free(sum));
    free(host);
    free(back);
    RT_OK(rill_stream_destroy(s));
}

/* matmul f32 against a product computed here. */
static void test_matmul_f32(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t m = 67, k = 129, n = 33;
    float *ha = malloc(m * k * sizeof *ha), *hb = malloc(k * n * sizeof *hb);
    float *hc = malloc(m * n * sizeof *hc);
    for (size_t i = 0; i < m * k; i++)
        ha[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
    for (size_t i = 0; i < k * n; i++)
        hb[i] = (float)((i * 5) % 11) * 0.2f - 1.0f;
    float *a = contract_alloc(s, m * k * sizeof *a), *b = contract_alloc(s, k * n * sizeof *b);
    float *c = contract_alloc(s, m * n * sizeof *c);
    contract_upload(s, a, ha, m * k * sizeof *a);
    contract_upload(s, b, hb, k * n * sizeof *b);
    RT_OK(rill_op_matmul_f32(s, c, a, b, m, k, n));
    contract_download(s, hc, c, m * n * sizeof *hc);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double want = 0;
            for (size_t p = 0; p < k; p++)
                want += (double)ha[i * k + p] * hb[p * n + j];
            contract_expect_close("c", i * n + j, hc[i * n + j], want, 1e-4);
        }
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
    free(ha);
    free(hb);
    free(hc);
    RT_OK(rill_stream_destroy(s));
}

/* matmul_ex f32 with a, b or both stored transposed, against a product
 * computed here; other flags are refused. */
static void test_matmul_ex_f32_transposed_operands(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t m = 37, k = 71, n = 45;
    float *ha = malloc(m * k * sizeof *ha), *hb = malloc(k * n * sizeof *hb);
    float *hc = malloc(m * n * sizeof *hc);
    for (size_t i = 0; i < m * k; i++)
        ha[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
    for (size_t i = 0; i < k * n; i++)
        hb[i] = (float)((i * 5) % 11) * 0.2f - 1.0f;
    float *a = contract_alloc(s, m * k * sizeof *a), *b = contract_alloc(s, k * n * sizeof *b);
    float *c = contract_alloc(s, m * n * sizeof *c);
    contract_upload(s, a, ha, m * k * sizeof *a);
    contract_upload(s, b, hb, k * n * sizeof *b);
    for (unsigned flags = 0; flags < 4; flags++) {
        bool at = (flags & RILL_MATMUL_A_T) != 0, bt = (flags & RILL_MATMUL_B_T) != 0;
        RT_OK(rill_op_matmul_ex_f32(s, c, a, b, m, k, n, flags));
        contract_download(s, hc, c, m * n * sizeof *hc);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double want = 0;
                for (size_t p = 0; p < k; p++)
                    want += (double)(at ? ha[p * m + i] : ha[i * k + p]) *
                            (bt ? hb[j * k + p] : hb[p * n + j]);
                contract_expect_close("c", i * n + j, hc[i * n + j], want, 1e-4);
            }
    }
    assert_int_equal(rill_op_matmul_ex_f32(s, c, a, b, m, k, n, 4), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "flags is 0x4"));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
    free(ha);
    free(hb);
    free(hc);
    RT_OK(rill_stream_destroy(s));
}

/* addmm f32: a product with a bias in each layout (per column, per row,
 * one float, a full matrix, a strided one), with either operand
 * transposed, over grids of one block and several: each result the same
 * bits as matmul_ex followed by the binary add of the bias, and within
 * rounding of a product computed here. Refused with nothing written: no
 * bias, a bias over c, a bias past its allocation, other flags. */
static void test_addmm_f32(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    static const size_t shapes[][3] = {{37, 71, 45}, {300, 64, 200}, {1, 9, 70}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        size_t m = shapes[sh][0], k = shapes[sh][1], n = shapes[sh][2];
        size_t layouts[][2] = {{0, 1}, {1, 0}, {0, 0}, {n, 1}, {2 * n + 1, 2}};
        size_t bias_floats = (m - 1) * (2 * n + 1) + (n - 1) * 2 + 1; /* the largest span */
        float *ha = malloc(m * k * sizeof *ha), *hb = malloc(k * n * sizeof *hb);
        float *hbias = malloc(bias_floats * sizeof *hbias);
        float *h1 = malloc(m * n * sizeof *h1), *h2 = malloc(m * n * sizeof *h2);
        for (size_t i = 0; i < m * k; i++)
            ha[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
        for (size_t i = 0; i < k * n; i++)
            hb[i] = (float)((i * 5) % 11) * 0.2f - 1.0f;
        for (size_t i = 0; i < bias_floats; i++)
            hbias[i] = (float)((i * 3) % 17) * 0.37f - 2.9f;
        float *a = contract_alloc(s, m * k * sizeof *a), *b = contract_alloc(s, k * n * sizeof *b);
        float *bias = contract_alloc(s, bias_floats * sizeof *bias);
        float *c1 = contract_alloc(s, m * n * sizeof *c1),
              *c2 = contract_alloc(s, m * n * sizeof *c2);
        contract_upload(s, a, ha, m * k * sizeof *a);
        contract_upload(s, b, hb, k * n * sizeof *b);
        contract_upload(s, bias, hbias, bias_floats * sizeof *bias);
        for (unsigned flags = 0; flags < 4; flags++)
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
                size_t rs = layouts[l][0], cs = layouts[l][1];
                bool at = (flags & RILL_MATMUL_A_T) != 0, bt = (flags & RILL_MATMUL_B_T) != 0;
                RT_OK(rill_op_addmm_f32(s, c1, a, b, bias, rs, cs, m, k, n, flags));
                RT_OK(rill_op_matmul_ex_f32(s, c2, a, b, m, k, n, flags));
                size_t shape[2] = {m, n}, c_strides[2] = {n, 1}, b_strides[2] = {rs, cs};
                RT_OK(rill_op_binary_f32(s, RILL_BINARY_ADD, c2, c2, c_strides, bias, b_strides,
                                         shape, 2));
                contract_download(s, h1, c1, m * n * sizeof *h1);
                contract_download(s, h2, c2, m * n * sizeof *h2);
                assert_memory_equal(h1, h2, m * n * sizeof *h1);
                for (size_t i = 0; i < m; i++)
                    for (size_t j = 0; j < n; j++) {
                        double want = hbias[i * rs + j * cs];
                        for (size_t p = 0; p < k; p++)
                            want += (double)(at ? ha[p * m + i] : ha[i * k + p]) *
                                    (bt ? hb[j * k + p] : hb[p * n + j]);
                        contract_expect_close("c", i * n + j, h1[i * n + j], want, 1e-4);
                    }
            }
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(bias));
        RT_OK(rill_free(c1));
        RT_OK(rill_free(c2));
        free(ha);
        free(hb);
        free(hbias);
        free(h1);
        free(h2);
    }

    size_t m = 8, k = 4, n = 16;
    float *a = contract_alloc(s, m * k * sizeof *a), *b = contract_alloc(s, k * n * sizeof *b);
    float *bias = contract_alloc(s, n * sizeof *bias), *c = contract_alloc(s, m * n * sizeof *c);
    RT_OK(rill_op_fill_f32(s, a, 1.0f, m * k));
    RT_OK(rill_op_fill_f32(s, b, 1.0f, k * n));
    RT_OK(rill_op_fill_f32(s, bias, 1.0f, n));
    RT_OK(rill_op_fill_f32(s, c, 5.0f, m * n));
    assert_int_equal(rill_op_addmm_f32(s, c, a, b, NULL, 0, 1, m, k, n, 0),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "bias"));
    assert_int_equal(rill_op_addmm_f32(s, c, a, b, c + n, 0, 1, m, k, n, 0),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "overlap"));
    assert_int_equal(rill_op_addmm_f32(s, c, a, b, bias, n, 1, m, k, n, 0),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "bias"));
    assert_int_equal(rill_op_addmm_f32(s, c, a, b, bias, 0, 1, m, k, n, 4),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "flags is 0x4"));
    float got[8 * 16];
    contract_download(s, got, c, sizeof got);
    for (size_t i = 0; i < m * n; i++)
        assert_true(got[i] == 5.0f);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(bias));
    RT_OK(rill_free(c));
    RT_OK(rill_stream_destroy(s));
}

/* a's element (i, p) of product h in the host copy, as the batch lays it
 * out (at: stored transposed). */
static float batched_at(const float *x, size_t h, size_t stride, size_t ld, bool t, size_t i,
                        size_t p) {
    return t ? x[h * stride + p * ld + i] : x[h * stride + i * ld + p];
}

/* matmul_batched f32 against products computed here: operands read in
 * place as the heads of an attention lay them out (each product's matrix
 * a column slice of a wider one: rows further apart than their length),
 * with each stored transposed or not, b shared by every product (stride
 * 0), and more products than blocks and fewer. */
static void test_matmul_batched_f32_strided_operands(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t counts[] = {1, 3, 40};
    size_t m = 37, k = 21, n = 45, pad = 3;
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t count = counts[ci];
        /* Stored rows of a: [m,k] or [k,m]; product h's matrix at column
         * h*(cols+pad) of rows count*(cols+pad) long. */
        size_t a_floats = count * (m + pad) * (k + pad) + 1, b_floats = (k + pad) * (n + pad);
        float *ha = malloc(a_floats * sizeof *ha), *hb = malloc(b_floats * sizeof *hb);
        float *hc = malloc(count * m * n * sizeof *hc);
        for (size_t i = 0; i < a_floats; i++)
            ha[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
        for (size_t i = 0; i < b_floats; i++)
            hb[i] = (float)((i * 5) % 11) * 0.2f - 1.0f;
        float *a = contract_alloc(s, a_floats * sizeof *a), *b = contract_alloc(s, b_floats * 4);
        float *c = contract_alloc(s, count * m * n * sizeof *c);
        contract_upload(s, a, ha, a_floats * sizeof *a);
        contract_upload(s, b, hb, b_floats * sizeof *b);
        for (unsigned flags = 0; flags < 4; flags++) {
            bool at = (flags & RILL_MATMUL_A_T) != 0, bt = (flags & RILL_MATMUL_B_T) != 0;
            size_t a_cols = at ? m : k, b_cols = bt ? k : n;
            rill_matmul_batch batch = {.count = count,
                                       .lda = count * (a_cols + pad),
                                       .ldb = b_cols + pad,
                                       .stride_a = a_cols + pad,
                                       .stride_b = 0};
            RT_OK(rill_op_matmul_batched_f32(s, c, a, b, m, k, n, flags, &batch));
            contract_download(s, hc, c, count * m * n * sizeof *hc);
            for (size_t h = 0; h < count; h++)
                for (size_t i = 0; i < m; i++)
                    for (size_t j = 0; j < n; j++) {
                        double want = 0;
                        for (size_t p = 0; p < k; p++)
                            want += (double)batched_at(ha, h, batch.stride_a, batch.lda, at, i, p) *
                                    batched_at(hb, 0, 0, batch.ldb, !bt, j, p);
                        size_t idx = (h * m + i) * n + j;
                        contract_expect_close("c", idx, hc[idx], want, 1e-4);
                    }
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(c));
        free(ha);
        free(hb);
        free(hc);
    }
    RT_OK(rill_stream_destroy(s));
}

/* matmul_batched refuses, with a sentence, what it cannot read: no batch,
 * no products, a row stride below its stored row's length, a batch
 * reaching past its operand's memory, unknown flags, c over a. */
static void test_matmul_batched_f32_refuses_bad_layouts(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t m = 4, k = 3, n = 5;
    float *a = contract_alloc(s, 2 * m * k * sizeof *a), *b = contract_alloc(s, k * n * 4);
    float *c = contract_alloc(s, 2 * m * n * sizeof *c);
    rill_matmul_batch ok = {.count = 2, .lda = k, .ldb = n, .stride_a = m * k, .stride_b = 0};
    RT_OK(rill_op_matmul_batched_f32(s, c, a, b, m, k, n, 0, &ok));
    struct {
        rill_matmul_batch batch;
        unsigned flags;
        const char *says;
    } bad[] = {
        {{.count = 0, .lda = k, .ldb = n}, 0, "batch->count is 0"},
        {{.count = 2, .lda = k - 1, .ldb = n, .stride_a = m * k}, 0, "batch->lda is 2, below 3"},
        {{.count = 2, .lda = m - 1, .ldb = n, .stride_a = m * k},
         RILL_MATMUL_A_T,
         "batch->lda is 3, below 4"},
        {{.count = 2, .lda = k, .ldb = k - 1, .stride_a = m * k},
         RILL_MATMUL_B_T,
         "batch->ldb is 2, below 3"},
        {{.count = 1000, .lda = k, .ldb = n, .stride_a = m * k}, 0, "its allocation has"},
        {{.count = 2, .lda = k, .ldb = n, .stride_a = m * k}, 4, "flags is 0x4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            rill_op_matmul_batched_f32(s, c, a, b, m, k, n, bad[i].flags, &bad[i].batch),
            RILL_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(rill_last_error(), bad[i].says));
    }
    assert_int_equal(rill_op_matmul_batched_f32(s, c, a, b, m, k, n, 0, NULL),
                     RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "batch is NULL"));
    assert_int_equal(rill_op_matmul_batched_f32(s, a, a, b, m, k, n, 0, &ok),
                     RILL_ERROR_INVALID_ARGUMENT);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
    RT_OK(rill_stream_destroy(s));
}

/* conv2d f32 against a direct convolution computed here. */
static void test_conv2d_f32(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    size_t n = 2, c = 3, h = 9, w = 8, k = 4, r = 3, q = 2;
    size_t oh = h - r + 1, ow = w - q + 1;
    size_t in_n = n * c * h * w, wt_n = k * c * r * q, out_n = n * k * oh * ow;
    float *hin = malloc(in_n * sizeof *hin), *hwt = malloc(wt_n * sizeof *hwt);
    float *hout = malloc(out_n * sizeof *hout);
    for (size_t i = 0; i < in_n; i++)
        hin[i] = (float)((i * 3) % 17) * 0.1f - 0.8f;
    for (size_t i = 0; i < wt_n; i++)
        hwt[i] = (float)((i * 11) % 7) * 0.3f - 0.9f;
    float *in = contract_alloc(s, in_n * sizeof *in), *wt = contract_alloc(s, wt_n * sizeof *wt);
    float *out = contract_alloc(s, out_n * sizeof *out);
    contract_upload(s, in, hin, in_n * sizeof *in);
    contract_upload(s, wt, hwt, wt_n * sizeof *wt);
    rill_status st = rill_op_conv2d_f32(s, out, in, wt, n, c, h, w, k, r, q);
    bool no_cudnn = st == RILL_ERROR_NOT_SUPPORTED && strstr(rill_last_error(), "has no cuDNN");
    if (no_cudnn) /* a CUDA build without cudnn.h refuses it, and says so */
        print_message("skipped: %s\n", rill_last_error());
    else
        RT_OK(st);
    contract_download(s, hout, out, out_n * sizeof *hout);
    for (size_t b = 0; b < n; b++)
        for (size_t o = 0; o < k; o++)
            for (size_t y = 0; y < oh; y++)
                for (size_t x = 0; x < ow; x++) {
                    double want = 0;
                    for (size_t ci = 0; ci < c; ci++)
                        for (size_t dy = 0; dy < r; dy++)
                            for (size_t dx = 0; dx < q; dx++)
                                want += (double)hin[((b * c + ci) * h + y + dy) * w + x + dx] *
                                        hwt[((o * c + ci) * r + dy) * q + dx];
                    size_t i = ((b * k + o) * oh + y) * ow + x;
                    if (!no_cudnn)
                        contract_expect_close("out", i, hout[i], want, 1e-4);
                }
    RT_OK(rill_free(in));
    RT_OK(rill_free(wt));
    RT_OK(rill_free(out));
    free(hin);
    free(hwt);
    free(hout);
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_f32),
        cmocka_unit_test(test_add_scalar_i64),
        cmocka_unit_test(test_fill_bits),
        cmocka_unit_test(test_fill_bits_refusals),
        cmocka_unit_test(test_sum_f32),
        cmocka_unit_test(test_randn_is_a_function_of_the_seed),
        cmocka_unit_test(test_f16_ops),
        cmocka_unit_test(test_matmul_f32),
        cmocka_unit_test(test_matmul_ex_f32_transposed_operands),
        cmocka_unit_test(test_addmm_f32),
        cmocka_unit_test(test_matmul_batched_f32_strided_operands),
        cmocka_unit_test(test_matmul_batched_f32_refuses_bad_layouts),
        cmocka_unit_test(test_conv2d_f32),
    };
    return CONTRACT_RUN(tests);
}
