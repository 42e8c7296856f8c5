/* SPDX-License-Identifier: MIT */
/* librill_acl's error calls (aclrtGetLastError, aclrtPeekAtLastError,
 * aclrtGetErrorVerbose, aclrtSetExceptionInfoCallback) and
 * aclrtRandomNumAsync, with their refusals. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "acl_support.h"

/* "aclrtGetLastError takes it, aclrtPeekAtLastError leaves it"; per thread. */
static void *last_error_of_new_thread(void *arg) {
    *(aclError *)arg = aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL);
    return NULL;
}

static void test_acl_last_error_is_taken_or_peeked(void **state) {
    (void)state;
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    ACL_FAILS(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM, "aclrtGetDevice");
    ACL_OK(aclrtSynchronizeDevice()); /* a success leaves it */
    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    aclError other = -1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, last_error_of_new_thread, &other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(other, ACL_SUCCESS);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    /* A rill refusal's code too. */
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtDestroyStream(s));
    ACL_FAILS(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStream");
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_PARAM_INVALID);
    ACL_FAILS(aclrtGetLastError((aclrtLastErrLevel)1), ACL_ERROR_INVALID_PARAM,
              "ACL_RT_THREAD_LEVEL");
    ACL_FAILS(aclrtPeekAtLastError((aclrtLastErrLevel)7), ACL_ERROR_INVALID_PARAM, "level 7");
}

/* The diagnostics of one failure, read in the order of CANN's error
 * handling sample: the code peeked and taken, the message taken; read
 * again, all three are gone (ACL_SUCCESS, ACL_SUCCESS, NULL). The taken
 * message stays readable until the thread's next aclGetRecentErrMsg. */
static void test_acl_diagnostics_are_consumed_once(void **state) {
    (void)state;
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    (void)aclGetRecentErrMsg();
    assert_int_equal(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    const char *msg = aclGetRecentErrMsg();
    assert_non_null(msg);
    assert_string_equal(msg, "aclrtGetRunMode: runMode is NULL");
    /* A later failure does not touch the message already taken. */
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtDestroyStream(s));
    assert_int_equal(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    assert_string_equal(msg, "aclrtGetRunMode: runMode is NULL");
    const char *next = aclGetRecentErrMsg();
    assert_non_null(next);
    assert_non_null(strstr(next, "aclrtSynchronizeStream"));
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_PARAM_INVALID);

    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    assert_null(aclGetRecentErrMsg());
    assert_null(aclGetRecentErrMsg());
}

static void on_exception(aclrtExceptionInfo *info) {
    (void)info;
}

static void test_acl_npu_error_calls_are_refused(void **state) {
    (void)state;
    aclrtErrorInfo info;
    uint32_t count;
    ACL_OK(aclrtGetDeviceCount(&count));
    ACL_FAILS(aclrtGetErrorVerbose(0, &info), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "NPU");
    ACL_FAILS(aclrtGetErrorVerbose(0, NULL), ACL_ERROR_INVALID_PARAM, "errorInfo is NULL");
    ACL_FAILS(aclrtGetErrorVerbose((int32_t)count, &info), ACL_ERROR_RT_INVALID_DEVICEID,
              "aclrtGetErrorVerbose");
    ACL_FAILS(aclrtSetExceptionInfoCallback(on_exception), ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
              "aclrtSetExceptionInfoCallback");
    ACL_OK(aclrtSetExceptionInfoCallback(NULL));
}

static aclrtRandomNumTaskInfo normal_task(void *out, float mean, float stddev, uint64_t seed,
                                          uint64_t num) {
    aclrtRandomNumTaskInfo t;
    memset(&t, 0, sizeof t);
    t.dataType = ACL_FLOAT;
    t.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS;
    aclrtNormalDisInfo *n = &t.randomNumFuncParaInfo.paramInfo.normalDisInfo;
    memcpy(n->mean.valueOrAddr, &mean, sizeof mean);
    n->mean.size = sizeof mean;
    memcpy(n->stddev.valueOrAddr, &stddev, sizeof stddev);
    n->stddev.size = sizeof stddev;
    memcpy(t.randomSeed.valueOrAddr, &seed, sizeof seed);
    t.randomSeed.size = sizeof seed;
    memcpy(t.randomNum.valueOrAddr, &num, sizeof num);
    t.randomNum.size = sizeof num;
    t.randomResultAddr = out;
    return t;
}

/* "Normal distribution into float32 memory (rill_op_randn_f32)"; the
 * other tasks are test_acl_random's. */
static void test_acl_random_num_async(void **state) {
    (void)state;
    enum { N = 4096 };
    aclrtStream s;
    float *dev, *mine, *ref;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtMalloc((void **)&dev, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc((void **)&ref, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost((void **)&mine, N * sizeof(float)));
    aclrtRandomNumTaskInfo t = normal_task(dev, 2.0f, 0.5f, 1234, N);
    ACL_OK(aclrtRandomNumAsync(&t, s, NULL));
    RT_OK(rill_op_randn_f32((rill_stream *)s, ref, N, 2.0f, 0.5f, 1234));
    ACL_OK(aclrtSynchronizeStream(s));
    float *host_ref = malloc(N * sizeof(float));
    assert_non_null(host_ref);
    ACL_OK(aclrtMemcpy(mine, N * sizeof(float), dev, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    ACL_OK(aclrtMemcpy(host_ref, N * sizeof(float), ref, N * sizeof(float),
                       ACL_MEMCPY_DEVICE_TO_HOST));
    double sum = 0;
    for (int i = 0; i < N; i++) {
        assert_true(mine[i] == host_ref[i]);
        sum += mine[i];
    }
    assert_true(fabs(sum / N - 2.0) < 0.05);
    free(host_ref);

    /* A 4-byte seed and count are read as such. */
    aclrtRandomNumTaskInfo small = t;
    uint32_t seed32 = 1234, num32 = 16;
    memcpy(small.randomSeed.valueOrAddr, &seed32, 4);
    small.randomSeed.size = 4;
    memcpy(small.randomNum.valueOrAddr, &num32, 4);
    small.randomNum.size = 4;
    ACL_OK(aclrtRandomNumAsync(&small, s, NULL));

    aclrtRandomNumTaskInfo bad = t;
    bad.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS;
    bad.dataType = ACL_INT32;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "normal");
    bad = t;
    bad.randomNumFuncParaInfo.funcType = (aclrtRandomNumFuncType)9;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_INVALID_PARAM, "funcType 9");
    bad = t;
    bad.dataType = ACL_INT8;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "ACL_FLOAT");
    bad = t;
    bad.dataType = ACL_FLOAT16; /* with float32 parameters */
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_INVALID_PARAM, "mean has size 4");
    bad = t;
    bad.randomNumFuncParaInfo.paramInfo.normalDisInfo.mean.isAddr = 1;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
              "mean is given by address");
    bad = t;
    bad.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev.size = 2;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_INVALID_PARAM, "stddev has size 2");
    bad = t;
    bad.randomNum.size = 3;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_INVALID_PARAM, "randomNum has size 3");
    bad = t;
    bad.randomResultAddr = NULL;
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_INVALID_PARAM, "randomResultAddr");
    bad = normal_task(dev, 0.0f, -1.0f, 1, N);
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtRandomNumAsync");
    bad = normal_task(dev, 0.0f, 1.0f, 1, (uint64_t)N * 4); /* past the allocation */
    ACL_FAILS(aclrtRandomNumAsync(&bad, s, NULL), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtRandomNumAsync");
    int reserve;
    ACL_FAILS(aclrtRandomNumAsync(&t, s, &reserve), ACL_ERROR_INVALID_PARAM, "reserve");
    ACL_FAILS(aclrtRandomNumAsync(NULL, s, NULL), ACL_ERROR_INVALID_PARAM, "taskInfo is NULL");
    ACL_OK(aclrtSynchronizeStream(s));
    ACL_OK(aclrtDestroyStream(s));
    ACL_FAILS(aclrtRandomNumAsync(&t, s, NULL), ACL_ERROR_RT_PARAM_INVALID, "aclrtRandomNumAsync");
    ACL_OK(aclrtFree(dev));
    ACL_OK(aclrtFree(ref));
    ACL_OK(aclrtFreeHost(mine));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_last_error_is_taken_or_peeked),
        ACL_TEST(test_acl_diagnostics_are_consumed_once),
        ACL_TEST(test_acl_npu_error_calls_are_refused),
        ACL_TEST(test_acl_random_num_async),
    };
    return RT_RUN(tests);
}
