/* SPDX-License-Identifier: MIT */
/* aclrtReduceAsync (acl/acl_rt.h): dst combined with src element by
 * element on a stream, as CANN's built-in reduce task does, for sum, max
 * and min of float32 and sum of float16, in stream order with other work;
 * and its refusals. */
#include "acl_support.h"

enum { N = 5 };

static void put(void *dev, const void *host, size_t bytes) {
    ACL_OK(aclrtMemcpy(dev, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
}

static void get(void *host, const void *dev, size_t bytes) {
    ACL_OK(aclrtMemcpy(host, bytes, dev, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
}

static void test_acl_reduce_async_kinds_f32(void **state) {
    (void)state;
    aclrtStream stream;
    ACL_OK(aclrtCreateStream(&stream));
    const float acc[N] = {1.5f, -2.0f, 8.0f, 0.0f, -7.25f};
    const float in[N] = {0.5f, 3.0f, -9.0f, -0.5f, 100.0f};
    const aclrtReduceKind kinds[3] = {ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
                                      ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX,
                                      ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN};
    void *dst, *src;
    ACL_OK(aclrtMalloc(&dst, sizeof acc, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&src, sizeof in, ACL_MEM_MALLOC_HUGE_FIRST));
    put(src, in, sizeof in);
    for (int k = 0; k < 3; k++) {
        put(dst, acc, sizeof acc);
        ACL_OK(aclrtReduceAsync(dst, src, sizeof acc, kinds[k], ACL_FLOAT, stream, NULL));
        ACL_OK(aclrtSynchronizeStream(stream));
        float got[N];
        get(got, dst, sizeof got);
        for (int i = 0; i < N; i++) {
            float want = k == 0   ? acc[i] + in[i]
                         : k == 1 ? (acc[i] > in[i] ? acc[i] : in[i])
                                  : (acc[i] < in[i] ? acc[i] : in[i]);
            assert_float_equal(got[i], want, 0.0f);
        }
    }
    /* Twice in a row on the stream, then only the first two elements on
     * the default stream: each sees the one before. */
    put(dst, acc, sizeof acc);
    ACL_OK(aclrtReduceAsync(dst, src, sizeof acc, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT,
                            stream, NULL));
    ACL_OK(aclrtReduceAsync(dst, src, sizeof acc, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT,
                            stream, NULL));
    ACL_OK(aclrtSynchronizeStream(stream));
    ACL_OK(aclrtReduceAsync(dst, src, 2 * sizeof(float), ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
                            ACL_FLOAT, NULL, NULL));
    ACL_OK(aclrtSynchronizeDevice());
    float got[N];
    get(got, dst, sizeof got);
    for (int i = 0; i < N; i++)
        assert_float_equal(got[i], acc[i] + (i < 2 ? 3.0f : 2.0f) * in[i], 0.0f);
    /* A count of 0 does nothing. */
    ACL_OK(
        aclrtReduceAsync(dst, src, 0, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_FLOAT, stream, NULL));
    ACL_OK(aclrtFree(dst));
    ACL_OK(aclrtFree(src));
    ACL_OK(aclrtDestroyStream(stream));
}

static void test_acl_reduce_async_sum_f16(void **state) {
    (void)state;
    aclFloat16 acc[N], in[N], got[N];
    for (int i = 0; i < N; i++) {
        acc[i] = aclFloatToFloat16(0.5f * (float)i);
        in[i] = aclFloatToFloat16(2.0f - (float)i);
    }
    void *dst, *src;
    ACL_OK(aclrtMalloc(&dst, sizeof acc, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&src, sizeof in, ACL_MEM_MALLOC_HUGE_FIRST));
    put(dst, acc, sizeof acc);
    put(src, in, sizeof in);
    ACL_OK(aclrtReduceAsync(dst, src, sizeof acc, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16,
                            NULL, NULL));
    ACL_OK(aclrtSynchronizeDevice());
    get(got, dst, sizeof got);
    for (int i = 0; i < N; i++)
        assert_float_equal(aclFloat16ToFloat(got[i]), 0.5f * (float)i + 2.0f - (float)i, 0.0f);
    ACL_FAILS(aclrtReduceAsync(dst, src, sizeof acc, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_FLOAT16,
                               NULL, NULL),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "float16");
    ACL_OK(aclrtFree(dst));
    ACL_OK(aclrtFree(src));
}

static void test_acl_reduce_async_bad_input(void **state) {
    (void)state;
    void *dst, *src;
    ACL_OK(aclrtMalloc(&dst, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&src, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    const aclrtReduceKind sum = ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM;
    ACL_FAILS(aclrtReduceAsync(NULL, src, 16, sum, ACL_FLOAT, NULL, NULL), ACL_ERROR_INVALID_PARAM,
              "dst is NULL");
    ACL_FAILS(aclrtReduceAsync(dst, NULL, 16, sum, ACL_FLOAT, NULL, NULL), ACL_ERROR_INVALID_PARAM,
              "src is NULL");
    ACL_FAILS(aclrtReduceAsync(dst, src, 16, sum, ACL_FLOAT, NULL, dst), ACL_ERROR_INVALID_PARAM,
              "reserve");
    ACL_FAILS(aclrtReduceAsync(dst, src, 6, sum, ACL_FLOAT, NULL, NULL), ACL_ERROR_INVALID_PARAM,
              "count 6");
    ACL_FAILS(aclrtReduceAsync(dst, src, 16, (aclrtReduceKind)3, ACL_FLOAT, NULL, NULL),
              ACL_ERROR_INVALID_PARAM, "kind 3");
    ACL_FAILS(
        aclrtReduceAsync(dst, src, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL, ACL_FLOAT, NULL, NULL),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "EQUAL");
    ACL_FAILS(aclrtReduceAsync(dst, src, 16, sum, ACL_INT32, NULL, NULL),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "data type 3");
    /* Overlapping but not the same memory: rill's op refuses it. */
    ACL_FAILS(aclrtReduceAsync(dst, (char *)dst + 4, 16, sum, ACL_FLOAT, NULL, NULL),
              ACL_ERROR_RT_PARAM_INVALID, "aclrtReduceAsync");
    aclrtStream gone;
    ACL_OK(aclrtCreateStream(&gone));
    ACL_OK(aclrtDestroyStream(gone));
    ACL_FAILS(aclrtReduceAsync(dst, src, 16, sum, ACL_FLOAT, gone, NULL),
              ACL_ERROR_RT_PARAM_INVALID, "aclrtReduceAsync");
    ACL_OK(aclrtFree(dst));
    ACL_OK(aclrtFree(src));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_reduce_async_kinds_f32),
        ACL_TEST(test_acl_reduce_async_sum_f16),
        ACL_TEST(test_acl_reduce_async_bad_input),
    };
    return RT_RUN(tests);
}
