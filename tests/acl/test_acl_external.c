/* SPDX-License-Identifier: MIT */
/* External waits and records in a capture (ACL_EVENT_WAIT_EXTERNAL,
 * ACL_EVENT_RECORD_EXTERNAL): a model that waits at each execution for an
 * event recorded outside it, a model whose record an outside stream waits
 * for, a model waiting for another's record, and the refusals. A host
 * function held at a gate shows that the waits wait. */
#include <stdatomic.h>
#include <unistd.h>

#include "acl_support.h"

enum { N = 64 };

static atomic_int gate;

/* Holds its stream until the gate opens (10 s at most). */
static void held(void *arg) {
    (void)arg;
    for (int i = 0; i < 10000 && !atomic_load(&gate); i++)
        usleep(1000);
}

struct env {
    aclrtStream model_stream, other;
    aclrtEvent e;
    float *src, *dst, *host;
};

static void env_setup(struct env *v) {
    ACL_OK(aclrtCreateStream(&v->model_stream));
    ACL_OK(aclrtCreateStream(&v->other));
    ACL_OK(aclrtCreateEventExWithFlag(&v->e, ACL_EVENT_SYNC));
    ACL_OK(aclrtMalloc((void **)&v->src, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc((void **)&v->dst, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost((void **)&v->host, N * sizeof(float)));
    ACL_OK(aclrtMemset(v->src, N * sizeof(float), 0, N * sizeof(float)));
    ACL_OK(aclrtMemset(v->dst, N * sizeof(float), 0, N * sizeof(float)));
    atomic_store(&gate, 0);
}

static void env_teardown(struct env *v) {
    ACL_OK(aclrtSynchronizeStream(v->model_stream));
    ACL_OK(aclrtSynchronizeStream(v->other));
    ACL_OK(aclrtDestroyEvent(v->e));
    ACL_OK(aclrtDestroyStream(v->model_stream));
    ACL_OK(aclrtDestroyStream(v->other));
    ACL_OK(aclrtFree(v->src));
    ACL_OK(aclrtFree(v->dst));
    ACL_OK(aclrtFreeHost(v->host));
}

static void fill_host(struct env *v, float x) {
    for (int i = 0; i < N; i++)
        v->host[i] = x;
}

static void assert_dst(struct env *v, float want) {
    float out[N];
    ACL_OK(aclrtMemcpy(out, sizeof out, v->dst, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++)
        if (out[i] != want)
            fail_msg("dst[%d] = %g, want %g", i, (double)out[i], (double)want);
}

/* The model waits, at each execution, for the event's latest record on
 * the other stream, made before the execution is submitted: that stream
 * is held at a gate before it writes src, and the model's copy of src to
 * dst still sees what it wrote. */
static void test_acl_external_wait_in_a_model(void **state) {
    (void)state;
    struct env v;
    env_setup(&v);
    aclmdlRI model = NULL;
    size_t bytes = N * sizeof(float);
    ACL_OK(aclmdlRICaptureBegin(v.model_stream, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(aclrtStreamWaitEventWithFlag(v.model_stream, v.e, 0, ACL_EVENT_WAIT_EXTERNAL));
    ACL_OK(
        aclrtMemcpyAsync(v.dst, bytes, v.src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, v.model_stream));
    ACL_OK(aclmdlRICaptureEnd(v.model_stream, &model));
    for (int run = 1; run <= 3; run++) {
        atomic_store(&gate, 0);
        fill_host(&v, (float)run);
        ACL_OK(aclrtLaunchHostFunc(v.other, held, NULL));
        ACL_OK(aclrtMemcpyAsync(v.src, bytes, v.host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, v.other));
        ACL_OK(aclrtRecordEvent(v.e, v.other));
        ACL_OK(aclmdlRIExecuteAsync(model, v.model_stream));
        usleep(20000);
        aclrtStreamStatus status;
        ACL_OK(aclrtStreamQuery(v.model_stream, &status));
        assert_int_equal(status, ACL_STREAM_STATUS_NOT_READY); /* held by the wait */
        atomic_store(&gate, 1);
        ACL_OK(aclrtSynchronizeStream(v.model_stream));
        assert_dst(&v, (float)run);
    }
    ACL_OK(aclmdlRIDestroy(model));
    env_teardown(&v);
}

/* The model records the event at the end of each execution: an outside
 * stream that waits for it copies dst only after the model's copy, though
 * the model's stream is held at a gate before the execution. */
static void test_acl_external_record_in_a_model(void **state) {
    (void)state;
    struct env v;
    env_setup(&v);
    size_t bytes = N * sizeof(float);
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureBegin(v.model_stream, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(
        aclrtMemcpyAsync(v.dst, bytes, v.src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, v.model_stream));
    ACL_OK(aclrtRecordEventWithFlag(v.e, v.model_stream, ACL_EVENT_RECORD_EXTERNAL));
    ACL_OK(aclmdlRICaptureEnd(v.model_stream, &model));
    for (int run = 1; run <= 2; run++) {
        atomic_store(&gate, 0);
        fill_host(&v, (float)(10 * run));
        ACL_OK(aclrtMemcpy(v.src, bytes, v.host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
        ACL_OK(aclrtLaunchHostFunc(v.model_stream, held, NULL));
        ACL_OK(aclmdlRIExecuteAsync(model, v.model_stream));
        ACL_OK(aclrtStreamWaitEvent(v.other, v.e));
        fill_host(&v, -1.0f);
        ACL_OK(aclrtMemcpyAsync(v.host, bytes, v.dst, bytes, ACL_MEMCPY_DEVICE_TO_HOST, v.other));
        usleep(20000);
        assert_true(v.host[0] == -1.0f); /* the outside copy waits */
        atomic_store(&gate, 1);
        ACL_OK(aclrtSynchronizeStream(v.other));
        for (int i = 0; i < N; i++)
            assert_true(v.host[i] == (float)(10 * run));
    }
    ACL_OK(aclmdlRIDestroy(model));
    env_teardown(&v);
}

/* One model records the event, another waits for it: the second's copy
 * follows the first's, whose stream is held at a gate. */
static void test_acl_external_record_and_wait_between_models(void **state) {
    (void)state;
    struct env v;
    env_setup(&v);
    size_t bytes = N * sizeof(float);
    float *mid;
    ACL_OK(aclrtMalloc((void **)&mid, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMemset(mid, bytes, 0, bytes));
    fill_host(&v, 5.0f);
    ACL_OK(aclrtMemcpy(v.src, bytes, v.host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    aclmdlRI first = NULL, second = NULL;
    ACL_OK(aclmdlRICaptureBegin(v.model_stream, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(aclrtMemcpyAsync(mid, bytes, v.src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, v.model_stream));
    ACL_OK(aclrtRecordEventWithFlag(v.e, v.model_stream, ACL_EVENT_RECORD_EXTERNAL));
    ACL_OK(aclmdlRICaptureEnd(v.model_stream, &first));
    ACL_OK(aclmdlRICaptureBegin(v.other, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_OK(aclrtStreamWaitEventWithFlag(v.other, v.e, 0, ACL_EVENT_WAIT_EXTERNAL));
    ACL_OK(aclrtMemcpyAsync(v.dst, bytes, mid, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, v.other));
    ACL_OK(aclmdlRICaptureEnd(v.other, &second));
    ACL_OK(aclrtLaunchHostFunc(v.model_stream, held, NULL));
    ACL_OK(aclmdlRIExecuteAsync(first, v.model_stream));
    ACL_OK(aclmdlRIExecuteAsync(second, v.other));
    usleep(20000);
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeStream(v.other));
    assert_dst(&v, 5.0f);
    ACL_OK(aclmdlRIDestroy(first));
    ACL_OK(aclmdlRIDestroy(second));
    ACL_OK(aclrtFree(mid));
    env_teardown(&v);
}

static void test_acl_external_refusals(void **state) {
    (void)state;
    struct env v;
    env_setup(&v);
    aclrtEvent fork, join;
    ACL_OK(aclrtCreateEvent(&fork));
    ACL_OK(aclrtCreateEvent(&join));
    /* Outside a capture. */
    ACL_FAILS(aclrtStreamWaitEventWithFlag(v.other, v.e, 0, ACL_EVENT_WAIT_EXTERNAL),
              ACL_ERROR_RT_STREAM_NOT_CAPTURED, "not capturing");
    ACL_FAILS(aclrtRecordEventWithFlag(v.e, v.other, ACL_EVENT_RECORD_EXTERNAL),
              ACL_ERROR_RT_STREAM_NOT_CAPTURED, "not capturing");
    /* On a stream forked into the capture, and in an open task group. */
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureBegin(v.model_stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclrtRecordEvent(fork, v.model_stream));
    ACL_OK(aclrtStreamWaitEvent(v.other, fork));
    ACL_FAILS(aclrtStreamWaitEventWithFlag(v.other, v.e, 0, ACL_EVENT_WAIT_EXTERNAL),
              ACL_ERROR_INVALID_PARAM, "began the capture");
    ACL_OK(aclrtRecordEvent(join, v.other));
    ACL_OK(aclrtStreamWaitEvent(v.model_stream, join));
    ACL_OK(aclmdlRICaptureTaskGrpBegin(v.model_stream));
    ACL_FAILS(aclrtRecordEventWithFlag(v.e, v.model_stream, ACL_EVENT_RECORD_EXTERNAL),
              ACL_ERROR_INVALID_PARAM, "task group is open");
    aclrtTaskGrp group;
    ACL_OK(aclmdlRICaptureTaskGrpEnd(v.model_stream, &group));
    ACL_OK(aclrtStreamWaitEventWithFlag(v.model_stream, v.e, 0, ACL_EVENT_WAIT_EXTERNAL));
    ACL_OK(aclmdlRICaptureEnd(v.model_stream, &model));
    ACL_OK(aclmdlRIExecuteAsync(model, v.model_stream)); /* e never recorded: no wait */
    ACL_OK(aclrtSynchronizeStream(v.model_stream));
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtDestroyEvent(fork));
    ACL_OK(aclrtDestroyEvent(join));
    env_teardown(&v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_external_wait_in_a_model),
        ACL_TEST(test_acl_external_record_in_a_model),
        ACL_TEST(test_acl_external_record_and_wait_between_models),
        ACL_TEST(test_acl_external_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
