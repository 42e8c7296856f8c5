/* SPDX-License-Identifier: MIT */
/* librill_acl's capture (acl/acl_mdl.h): models captured across streams and
 * executed many times, the capture statuses and modes, and the refusals
 * with ACL's runtime codes. */
#include <pthread.h>

#include "acl_support.h"

enum { N = 8 };

struct pair {
    aclrtStream s1, s2;
    aclrtEvent e1, e2;
};

static void make_pair(struct pair *p) {
    ACL_OK(aclrtCreateStream(&p->s1));
    ACL_OK(aclrtCreateStream(&p->s2));
    ACL_OK(aclrtCreateEvent(&p->e1));
    ACL_OK(aclrtCreateEvent(&p->e2));
}

static void free_pair(struct pair *p) {
    ACL_OK(aclrtDestroyEvent(p->e1));
    ACL_OK(aclrtDestroyEvent(p->e2));
    ACL_OK(aclrtDestroyStream(p->s1));
    ACL_OK(aclrtDestroyStream(p->s2));
}

/* Seed 004's rule: s2 joins the capture through e1 and joins back through
 * e2; each execution runs the captured work again (here: x = 2x + 1 on
 * s2, and a copy of x on s1). */
static void test_acl_capture_across_streams_and_execute_many_times(void **state) {
    (void)state;
    struct pair p;
    make_pair(&p);
    float *host, *x, *y;
    ACL_OK(aclrtMallocHost((void **)&host, N * sizeof(float)));
    ACL_OK(aclrtMalloc((void **)&x, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc((void **)&y, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < N; i++)
        host[i] = 1.0f;
    size_t bytes = N * sizeof(float);
    ACL_OK(aclrtMemcpy(x, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclrtMemcpy(y, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    aclmdlRI seen = (aclmdlRI)1;
    ACL_OK(aclmdlRICaptureGetInfo(p.s1, &status, &seen));
    assert_int_equal(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    assert_null(seen);
    ACL_OK(aclmdlRICaptureBegin(p.s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclmdlRICaptureGetInfo(p.s1, &status, NULL));
    assert_int_equal(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    ACL_OK(aclrtRecordEvent(p.e1, p.s1));
    ACL_OK(aclrtStreamWaitEvent(p.s2, p.e1));
    ACL_OK(aclmdlRICaptureGetInfo(p.s2, &status, NULL));
    assert_int_equal(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    RT_OK(rill_op_add_f32((rill_stream *)p.s2, x, x, y, 1.0f, N)); /* x += y */
    RT_OK(rill_op_add_f32((rill_stream *)p.s2, y, x, x, 0.0f, N)); /* y = x */
    ACL_OK(aclrtRecordEvent(p.e2, p.s2));
    ACL_OK(aclrtStreamWaitEvent(p.s1, p.e2));
    ACL_OK(aclrtMemcpyAsync(host, bytes, x, bytes, ACL_MEMCPY_DEVICE_TO_HOST, p.s1));
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureEnd(p.s1, &model));
    assert_non_null(model);
    ACL_OK(aclmdlRICaptureGetInfo(p.s1, &status, NULL));
    assert_int_equal(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    /* Nothing ran during the capture. */
    assert_true(host[0] == 1.0f);
    float want = 1.0f;
    for (int run = 0; run < 4; run++) {
        ACL_OK(aclmdlRIExecuteAsync(model, p.s1));
        ACL_OK(aclrtSynchronizeStream(p.s1));
        want *= 2.0f;
        assert_true(host[0] == want && host[N - 1] == want);
    }
    ACL_OK(aclmdlRIDestroy(model));
    ACL_FAILS(aclmdlRIDestroy(model), ACL_ERROR_RT_PARAM_INVALID, "aclmdlRIDestroy");
    ACL_FAILS(aclmdlRIExecuteAsync(model, p.s1), ACL_ERROR_RT_PARAM_INVALID,
              "aclmdlRIExecuteAsync");
    ACL_OK(aclrtFree(x));
    ACL_OK(aclrtFree(y));
    ACL_OK(aclrtFreeHost(host));
    free_pair(&p);
}

static void test_acl_capture_bad_input(void **state) {
    (void)state;
    struct pair p;
    make_pair(&p);
    aclmdlRI model = (aclmdlRI)1;
    aclmdlRICaptureStatus status;
    ACL_FAILS(aclmdlRICaptureBegin(NULL, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
              ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "aclmdlRICaptureBegin");
    ACL_FAILS(aclmdlRICaptureBegin(p.s1, (aclmdlRICaptureMode)3), ACL_ERROR_INVALID_PARAM, "mode");
    ACL_FAILS(aclmdlRICaptureEnd(p.s1, NULL), ACL_ERROR_INVALID_PARAM, "modelRI");
    ACL_FAILS(aclmdlRICaptureEnd(NULL, &model), ACL_ERROR_RT_STREAM_NOT_CAPTURED,
              "aclmdlRICaptureEnd");
    assert_null(model);
    ACL_FAILS(aclmdlRICaptureGetInfo(p.s1, NULL, NULL), ACL_ERROR_INVALID_PARAM, "status");
    ACL_FAILS(aclmdlRIExecuteAsync(NULL, p.s1), ACL_ERROR_INVALID_PARAM, "aclmdlRIExecuteAsync");
    ACL_FAILS(aclmdlRIDestroy(NULL), ACL_ERROR_INVALID_PARAM, "aclmdlRIDestroy");
    ACL_OK(aclrtDestroyStream(p.s2));
    ACL_FAILS(aclmdlRICaptureGetInfo(p.s2, &status, NULL), ACL_ERROR_RT_PARAM_INVALID,
              "aclmdlRICaptureGetInfo");
    ACL_OK(aclrtCreateStream(&p.s2));

    /* A stream pulled in that never joins back: ACL_ERROR_RT_STREAM_UNJOINED. */
    void *d;
    ACL_OK(aclrtMalloc(&d, 32, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclmdlRICaptureBegin(p.s1, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL));
    ACL_OK(aclrtRecordEvent(p.e1, p.s1));
    ACL_OK(aclrtStreamWaitEvent(p.s2, p.e1));
    ACL_OK(aclrtMemsetAsync(d, 32, 0, 32, p.s2));
    ACL_FAILS(aclmdlRICaptureEnd(p.s1, &model), ACL_ERROR_RT_STREAM_UNJOINED, "aclmdlRICaptureEnd");
    assert_null(model);
    ACL_OK(aclrtFree(d));
    free_pair(&p);
}

/* A forbidden call invalidates the capture: ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
 * for the call, the INVALIDATED status, and
 * ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED with no model at the end. */
static void test_acl_forbidden_call_invalidates_capture(void **state) {
    (void)state;
    struct pair p;
    make_pair(&p);
    aclmdlRICaptureStatus status;
    aclmdlRI model = (aclmdlRI)1;
    ACL_OK(aclmdlRICaptureBegin(p.s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_FAILS(aclrtSynchronizeStream(p.s1), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
              "aclrtSynchronizeStream");
    ACL_OK(aclmdlRICaptureGetInfo(p.s1, &status, NULL));
    assert_int_equal(status, ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
    ACL_FAILS(aclmdlRICaptureEnd(p.s1, &model), ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
              "aclmdlRICaptureEnd");
    assert_null(model);
    ACL_OK(aclrtSynchronizeStream(p.s1)); /* usable again */
    free_pair(&p);
}

/* aclrtMemcpy is unsafe: refused under GLOBAL during a capture (which it
 * invalidates), run at once, uncaptured, after switching to RELAXED. */
static void test_acl_exchange_mode_allows_unsafe_calls(void **state) {
    (void)state;
    struct pair p;
    make_pair(&p);
    float host[N], back[N];
    void *d;
    for (int i = 0; i < N; i++)
        host[i] = 3.0f;
    ACL_OK(aclrtMalloc(&d, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclmdlRICaptureBegin(p.s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclrtMemsetAsync(d, sizeof host, 0, sizeof host, p.s1));
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    ACL_OK(aclmdlRICaptureThreadExchangeMode(&mode));
    assert_int_equal(mode, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    ACL_OK(aclrtMemcpy(d, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclmdlRICaptureThreadExchangeMode(&mode));
    assert_int_equal(mode, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    aclmdlRI model;
    ACL_OK(aclmdlRICaptureEnd(p.s1, &model));
    /* The copy ran once, now; the captured fill runs at each execution. */
    ACL_OK(aclrtMemcpy(back, sizeof back, d, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    assert_true(back[0] == 3.0f);
    ACL_OK(aclmdlRIExecuteAsync(model, p.s1));
    ACL_OK(aclrtSynchronizeStream(p.s1));
    ACL_OK(aclrtMemcpy(back, sizeof back, d, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    assert_true(back[0] == 0.0f);
    ACL_OK(aclmdlRIDestroy(model));

    ACL_OK(aclmdlRICaptureBegin(p.s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_FAILS(aclrtMemcpy(d, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, "aclrtMemcpy");
    ACL_FAILS(aclmdlRICaptureEnd(p.s1, &model), ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
              "aclmdlRICaptureEnd");

    ACL_FAILS(aclmdlRICaptureThreadExchangeMode(NULL), ACL_ERROR_INVALID_PARAM,
              "aclmdlRICaptureThreadExchangeMode");
    mode = (aclmdlRICaptureMode)5;
    ACL_FAILS(aclmdlRICaptureThreadExchangeMode(&mode), ACL_ERROR_INVALID_PARAM, "*mode 5");
    ACL_OK(aclrtFree(d));
    free_pair(&p);
}

struct end_args {
    aclrtStream s;
    atomic_int code;
};

static void *end_from_other_thread(void *arg) {
    struct end_args *a = arg;
    aclmdlRI model;
    atomic_store(&a->code, aclmdlRICaptureEnd(a->s, &model));
    return NULL;
}

/* Not RELAXED: ended by another thread is ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
 * and the beginning thread can still end it. */
static void test_acl_capture_end_from_other_thread_is_wrong_thread(void **state) {
    (void)state;
    struct pair p;
    make_pair(&p);
    ACL_OK(aclmdlRICaptureBegin(p.s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    struct end_args a = {.s = p.s1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, end_from_other_thread, &a), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&a.code), ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD);
    aclmdlRI model;
    ACL_OK(aclmdlRICaptureEnd(p.s1, &model));
    ACL_OK(aclmdlRIDestroy(model));
    free_pair(&p);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_capture_across_streams_and_execute_many_times),
        ACL_TEST(test_acl_capture_bad_input),
        ACL_TEST(test_acl_forbidden_call_invalidates_capture),
        ACL_TEST(test_acl_exchange_mode_allows_unsafe_calls),
        ACL_TEST(test_acl_capture_end_from_other_thread_is_wrong_thread),
    };
    return RT_RUN(tests);
}
