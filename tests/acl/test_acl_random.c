/* SPDX-License-Identifier: MIT */
/* aclrtRandomNumAsync's tasks beyond float32 normal values: uniform values
 * of every floating and integer type, normal and truncated normal values
 * of float16 and bfloat16, truncated float32 values, and dropout bitmasks;
 * their ranges and moments, the same values for the same seed, and the
 * refusals. */
#include <math.h>

#include "acl_support.h"

enum { N = 8192 };

static uint16_t to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)(bits >> 16); /* the test's values are exact in bfloat16 */
}

static float from_bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* A task of type `func` into out with the two parameters' first `size`
 * bytes taken from p0 and p1. */
static aclrtRandomNumTaskInfo task(aclrtRandomNumFuncType func, aclDataType type, void *out,
                                   const void *p0, const void *p1, uint8_t size, uint64_t seed,
                                   uint64_t num) {
    aclrtRandomNumTaskInfo t;
    memset(&t, 0, sizeof t);
    t.dataType = type;
    t.randomNumFuncParaInfo.funcType = func;
    aclrtUniformDisInfo *u = &t.randomNumFuncParaInfo.paramInfo.uniformDisInfo;
    memcpy(u->min.valueOrAddr, p0, size);
    u->min.size = size;
    if (p1) {
        memcpy(u->max.valueOrAddr, p1, size);
        u->max.size = size;
    }
    memcpy(t.randomSeed.valueOrAddr, &seed, sizeof seed);
    t.randomSeed.size = sizeof seed;
    memcpy(t.randomNum.valueOrAddr, &num, sizeof num);
    t.randomNum.size = sizeof num;
    t.randomResultAddr = out;
    return t;
}

struct bufs {
    aclrtStream s;
    void *dev;
    unsigned char *host;
};

static void bufs_setup(struct bufs *b) {
    ACL_OK(aclrtCreateStream(&b->s));
    ACL_OK(aclrtMalloc(&b->dev, N * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost((void **)&b->host, N * 8));
}

static void bufs_teardown(struct bufs *b) {
    ACL_OK(aclrtFree(b->dev));
    ACL_OK(aclrtFreeHost(b->host));
    ACL_OK(aclrtDestroyStream(b->s));
}

/* Runs t and copies its n bytes of output to b->host. */
static void run(struct bufs *b, const aclrtRandomNumTaskInfo *t, size_t bytes) {
    memset(b->host, 0xAB, N * 8);
    ACL_OK(aclrtMemset(b->dev, N * 8, 0xAB, N * 8));
    ACL_OK(aclrtRandomNumAsync(t, b->s, NULL));
    ACL_OK(aclrtSynchronizeStream(b->s));
    ACL_OK(aclrtMemcpy(b->host, bytes, b->dev, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
}

static float value_at(const struct bufs *b, aclDataType type, int i) {
    if (type == ACL_FLOAT) {
        float f;
        memcpy(&f, b->host + i * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, b->host + i * 2, 2);
    return type == ACL_FLOAT16 ? aclFloat16ToFloat(h) : from_bf16(h);
}

/* The parameter v in type's encoding, in p; its size. */
static uint8_t encode(aclDataType type, float v, unsigned char *p) {
    if (type == ACL_FLOAT) {
        memcpy(p, &v, 4);
        return 4;
    }
    uint16_t h = type == ACL_FLOAT16 ? aclFloatToFloat16(v) : to_bf16(v);
    memcpy(p, &h, 2);
    return 2;
}

/* Normal and truncated normal values of mean 1 and standard deviation 2:
 * their sample mean and deviation, truncated ones within two deviations
 * of the mean (bfloat16's rounding allowed), the same for the same seed
 * and others for another seed. */
static void test_acl_random_normal_and_truncated_of_each_float_type(void **state) {
    (void)state;
    struct bufs b;
    bufs_setup(&b);
    const aclDataType types[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
    for (int ti = 0; ti < 3; ti++) {
        aclDataType type = types[ti];
        unsigned char mean[4], sd[4];
        uint8_t size = encode(type, 1.0f, mean);
        encode(type, 2.0f, sd);
        size_t elem = size;
        for (int truncated = 0; truncated < 2; truncated++) {
            aclrtRandomNumFuncType func = truncated
                                              ? ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS
                                              : ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS;
            aclrtRandomNumTaskInfo t = task(func, type, b.dev, mean, sd, size, 7, N);
            run(&b, &t, N * elem);
            double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < N; i++) {
                double x = value_at(&b, type, i);
                assert_true(isfinite(x));
                sum += x;
                sq += x * x;
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
            double m = sum / N, sdev = sqrt(sq / N - m * m);
            if (fabs(m - 1.0) > 0.1)
                fail_msg("type %d truncated %d: mean %g, want 1", (int)type, truncated, m);
            /* A normal sample's deviation is 2; truncated at 2 deviations,
             * 2 * 0.8796. */
            double want = truncated ? 2.0 * 0.8796 : 2.0;
            if (fabs(sdev - want) > 0.1)
                fail_msg("type %d truncated %d: deviation %g, want %g", (int)type, truncated, sdev,
                         want);
            if (truncated) {
                assert_true(lo >= -3.0 - 0.02 && hi <= 5.0 + 0.02);
            } else {
                assert_true(lo < -3.0 && hi > 5.0); /* some of 8192 lie past 2 deviations */
            }
            unsigned char first[16];
            memcpy(first, b.host, sizeof first);
            run(&b, &t, N * elem);
            assert_memory_equal(first, b.host, sizeof first);
            t = task(func, type, b.dev, mean, sd, size, 8, N);
            run(&b, &t, N * elem);
            assert_memory_not_equal(first, b.host, sizeof first);
        }
    }
    bufs_teardown(&b);
}

/* Uniform values in [min, max): floats of each type in [1, 2) with their
 * mean near 1.5, integers of each type in [min, max) with both ends seen;
 * nothing written past randomNum elements. */
static void test_acl_random_uniform_of_each_type(void **state) {
    (void)state;
    struct bufs b;
    bufs_setup(&b);
    const aclDataType ftypes[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
    for (int ti = 0; ti < 3; ti++) {
        unsigned char lo[4], hi[4];
        uint8_t size = encode(ftypes[ti], 1.0f, lo);
        encode(ftypes[ti], 2.0f, hi);
        aclrtRandomNumTaskInfo t =
            task(ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, ftypes[ti], b.dev, lo, hi, size, 3, N);
        run(&b, &t, N * 8);
        double sum = 0;
        for (int i = 0; i < N; i++) {
            float x = value_at(&b, ftypes[ti], i);
            assert_true(x >= 1.0f && x <= 2.0f);
            sum += x;
        }
        assert_true(fabs(sum / N - 1.5) < 0.02);
        assert_int_equal(b.host[N * size], 0xAB);
    }
    /* N / 2 values each: int32 [-5, 5), int64 [-2^40, -2^40 + 3), uint32 [4e9, 4e9 + 3),
     * uint64 [2^63 + 1, 2^63 + 4). */
    int32_t i32[2] = {-5, 5};
    int64_t i64[2] = {-(1ll << 40), -(1ll << 40) + 3};
    uint32_t u32[2] = {4000000000u, 4000000003u};
    uint64_t u64[2] = {(1ull << 63) + 1, (1ull << 63) + 4};
    const struct {
        aclDataType type;
        const void *lo, *hi;
        uint8_t size;
    } itypes[4] = {{ACL_INT32, &i32[0], &i32[1], 4},
                   {ACL_INT64, &i64[0], &i64[1], 8},
                   {ACL_UINT32, &u32[0], &u32[1], 4},
                   {ACL_UINT64, &u64[0], &u64[1], 8}};
    for (int ti = 0; ti < 4; ti++) {
        aclrtRandomNumTaskInfo t =
            task(ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, itypes[ti].type, b.dev, itypes[ti].lo,
                 itypes[ti].hi, itypes[ti].size, 5, N / 2);
        run(&b, &t, N * 8);
        bool seen_lo = false, seen_last = false;
        for (int i = 0; i < N / 2; i++) {
            switch (itypes[ti].type) {
            case ACL_INT32: {
                int32_t v;
                memcpy(&v, b.host + i * 4, 4);
                assert_true(v >= i32[0] && v < i32[1]);
                seen_lo |= v == i32[0];
                seen_last |= v == i32[1] - 1;
                break;
            }
            case ACL_INT64: {
                int64_t v;
                memcpy(&v, b.host + i * 8, 8);
                assert_true(v >= i64[0] && v < i64[1]);
                seen_lo |= v == i64[0];
                seen_last |= v == i64[1] - 1;
                break;
            }
            case ACL_UINT32: {
                uint32_t v;
                memcpy(&v, b.host + i * 4, 4);
                assert_true(v >= u32[0] && v < u32[1]);
                seen_lo |= v == u32[0];
                seen_last |= v == u32[1] - 1;
                break;
            }
            default: {
                uint64_t v;
                memcpy(&v, b.host + i * 8, 8);
                assert_true(v >= u64[0] && v < u64[1]);
                seen_lo |= v == u64[0];
                seen_last |= v == u64[1] - 1;
                break;
            }
            }
        }
        assert_true(seen_lo && seen_last);
        assert_int_equal(b.host[N / 2 * itypes[ti].size], 0xAB);
    }
    bufs_teardown(&b);
}

/* A dropout bitmask of ratio 0.4: about 60% of the bits are 1 (kept), the
 * bits past randomNum in the last byte are 0, and nothing past that byte
 * is written. */
static void test_acl_random_dropout_bitmask(void **state) {
    (void)state;
    struct bufs b;
    bufs_setup(&b);
    float ratio = 0.4f;
    const uint64_t num = N * 4 + 3;
    aclrtRandomNumTaskInfo t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, ACL_FLOAT, b.dev,
                                    &ratio, NULL, 4, 11, num);
    run(&b, &t, N * 8);
    uint64_t ones = 0;
    for (uint64_t i = 0; i < num; i++)
        ones += (b.host[i / 8] >> (i % 8)) & 1u;
    double kept = (double)ones / (double)num;
    if (fabs(kept - 0.6) > 0.02)
        fail_msg("%.4f of the bits are 1, want about 0.6", kept);
    assert_int_equal(b.host[num / 8] >> 3, 0);
    assert_int_equal(b.host[num / 8 + 1], 0xAB);
    bufs_teardown(&b);
}

static void test_acl_random_refusals(void **state) {
    (void)state;
    struct bufs b;
    bufs_setup(&b);
    float one = 1.0f, two = 2.0f;
    aclrtRandomNumTaskInfo t =
        task(ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, ACL_FLOAT, b.dev, &two, &one, 4, 1, 16);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_INVALID_PARAM, "min 2 is above max 1");
    int32_t lo = 3, hi = 3;
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, ACL_INT32, b.dev, &lo, &hi, 4, 1, 16);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_INVALID_PARAM, "below max");
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, ACL_INT8, b.dev, &lo, &hi, 4, 1, 16);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "ACL_INT32");
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS, ACL_INT32, b.dev, &lo, &hi, 4, 1,
             16);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "truncated");
    uint16_t h1 = aclFloatToFloat16(1.0f);
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, ACL_FLOAT16, b.dev, &one, &one, 4, 1, 16);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_INVALID_PARAM, "size 2");
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, ACL_FLOAT16, b.dev, &h1, &h1, 2, 1, 16);
    t.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev.isAddr = 1;
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "by address");
    float ratio = 1.5f;
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, ACL_FLOAT, b.dev, &ratio, NULL, 4, 1, 16);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_INVALID_PARAM, "[0, 1]");
    /* Past the allocation, and memory that is not ACL's. */
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, ACL_FLOAT16, b.dev, &h1, &h1, 2, 1, N * 4 + 1);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_RT_PARAM_INVALID, "randomResultAddr");
    unsigned char mine[64];
    t = task(ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, ACL_FLOAT16, mine, &h1, &h1, 2, 1, 8);
    ACL_FAILS(aclrtRandomNumAsync(&t, b.s, NULL), ACL_ERROR_RT_PARAM_INVALID, "aclrtMalloc");
    ACL_OK(aclrtSynchronizeStream(b.s));
    bufs_teardown(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_random_normal_and_truncated_of_each_float_type),
        ACL_TEST(test_acl_random_uniform_of_each_type),
        ACL_TEST(test_acl_random_dropout_bitmask),
        ACL_TEST(test_acl_random_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
