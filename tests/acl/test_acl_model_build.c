/* SPDX-License-Identifier: MIT */
/* librill_acl's models built by hand: aclmdlRIBuildBegin, streams bound
 * with aclmdlRIBindStream whose work is recorded, aclmdlRIEndTask,
 * aclmdlRIBuildEnd, aclmdlRIUnbindStream, and aclmdlRIExecute(Async) of
 * the result; every refusal's code and message. Host functions count
 * their runs in an atomic; copies move device memory. */
#include <stdatomic.h>
#include <time.h>

#include "acl_support.h"

static atomic_int runs;
static atomic_int gate;

static void count(void *arg) {
    (void)arg;
    atomic_fetch_add(&runs, 1);
}

static void held(void *arg) {
    (void)arg;
    struct timespec ts = {0, 1000000L};
    while (!atomic_load(&gate))
        nanosleep(&ts, NULL);
}

enum { N = 16 };

static void fill(float *host, float v) {
    for (int i = 0; i < N; i++)
        host[i] = v + (float)i;
}

/* Work on two bound streams, ordered by an event, is recorded, not run;
 * the built model runs it at every execution, on the calling thread's
 * stream (aclmdlRIExecute) or any stream (aclmdlRIExecuteAsync). */
static void test_acl_model_built_by_hand_runs_its_streams_work(void **state) {
    (void)state;
    aclrtStream head, side, other;
    aclrtEvent ev;
    ACL_OK(aclrtCreateStream(&head));
    ACL_OK(aclrtCreateStream(&side));
    ACL_OK(aclrtCreateStream(&other));
    ACL_OK(aclrtCreateEvent(&ev));
    void *src, *dst;
    size_t bytes = N * sizeof(float);
    ACL_OK(aclrtMalloc(&src, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&dst, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    float host[N], back[N];
    fill(host, 1.0f);
    ACL_OK(aclrtMemcpy(src, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    fill(host, -100.0f);
    ACL_OK(aclrtMemcpy(dst, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    atomic_store(&runs, 0);

    aclmdlRI model = NULL;
    ACL_OK(aclmdlRIBuildBegin(&model, 0));
    assert_non_null(model);
    ACL_OK(aclmdlRIBindStream(model, head, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclmdlRIBindStream(model, side, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclrtLaunchHostFunc(head, count, NULL));
    ACL_OK(aclrtRecordEvent(ev, head));
    ACL_OK(aclrtStreamWaitEvent(side, ev));
    ACL_OK(aclrtMemcpyAsync(dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, side));
    ACL_OK(aclrtLaunchHostFunc(side, count, NULL));
    ACL_OK(aclmdlRIEndTask(model, side));
    ACL_OK(aclmdlRIBuildEnd(model, NULL));
    /* Nothing ran while it was recorded. */
    ACL_OK(aclrtSynchronizeDevice());
    assert_int_equal(atomic_load(&runs), 0);
    ACL_OK(aclrtMemcpy(back, bytes, dst, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    assert_true(back[3] == -97.0f);

    ACL_OK(aclmdlRIExecute(model, -1));
    assert_int_equal(atomic_load(&runs), 2);
    ACL_OK(aclrtMemcpy(back, bytes, dst, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++)
        assert_true(back[i] == 1.0f + (float)i);
    fill(host, 50.0f);
    ACL_OK(aclrtMemcpy(src, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclmdlRIExecuteAsync(model, other));
    ACL_OK(aclmdlRIExecuteAsync(model, other));
    ACL_OK(aclrtSynchronizeStream(other));
    assert_int_equal(atomic_load(&runs), 6);
    ACL_OK(aclrtMemcpy(back, bytes, dst, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < N; i++)
        assert_true(back[i] == 50.0f + (float)i);
    /* The bound streams run their own work again. */
    ACL_OK(aclrtLaunchHostFunc(head, count, NULL));
    ACL_OK(aclrtSynchronizeStream(head));
    assert_int_equal(atomic_load(&runs), 7);
    ACL_OK(aclmdlRIUnbindStream(model, side));
    ACL_OK(aclmdlRIUnbindStream(model, head));
    ACL_FAILS(aclmdlRIUnbindStream(model, head), ACL_ERROR_INVALID_PARAM, "not bound");
    /* An unbound stream may be bound to another model. */
    aclmdlRI second;
    ACL_OK(aclmdlRIBuildBegin(&second, 0));
    ACL_OK(aclmdlRIBindStream(second, head, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclmdlRIEndTask(second, head));
    ACL_OK(aclmdlRIBuildEnd(second, NULL));
    ACL_OK(aclmdlRIExecute(second, 1000));
    ACL_OK(aclmdlRIDestroy(second));
    ACL_OK(aclmdlRIExecute(model, 5000));
    assert_int_equal(atomic_load(&runs), 9);
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtFree(src));
    ACL_OK(aclrtFree(dst));
    ACL_OK(aclrtDestroyEvent(ev));
    ACL_OK(aclrtDestroyStream(head));
    ACL_OK(aclrtDestroyStream(side));
    ACL_OK(aclrtDestroyStream(other));
}

/* A model destroyed while it is built runs nothing, and its streams run
 * their work again; a captured model goes through the same calls. */
static void test_acl_model_destroyed_while_building(void **state) {
    (void)state;
    aclrtStream a, b;
    ACL_OK(aclrtCreateStream(&a));
    ACL_OK(aclrtCreateStream(&b));
    atomic_store(&runs, 0);
    aclmdlRI model;
    ACL_OK(aclmdlRIBuildBegin(&model, 0));
    ACL_OK(aclmdlRIBindStream(model, a, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclmdlRIBindStream(model, b, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclrtLaunchHostFunc(a, count, NULL));
    ACL_OK(aclrtLaunchHostFunc(b, count, NULL));
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtLaunchHostFunc(a, count, NULL));
    ACL_OK(aclrtLaunchHostFunc(b, count, NULL));
    ACL_OK(aclrtSynchronizeStream(a));
    ACL_OK(aclrtSynchronizeStream(b));
    assert_int_equal(atomic_load(&runs), 2);
    /* A captured model: aclmdlRIExecute runs it too. */
    ACL_OK(aclmdlRICaptureBegin(a, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclrtLaunchHostFunc(a, count, NULL));
    ACL_OK(aclmdlRICaptureEnd(a, &model));
    ACL_OK(aclmdlRIExecute(model, -1));
    assert_int_equal(atomic_load(&runs), 3);
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtDestroyStream(a));
    ACL_OK(aclrtDestroyStream(b));
}

/* aclmdlRIExecute's time limit: the model runs on after it. */
static void test_acl_model_execute_times_out(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&runs, 0);
    atomic_store(&gate, 0);
    aclmdlRI model;
    ACL_OK(aclmdlRIBuildBegin(&model, 0));
    ACL_OK(aclmdlRIBindStream(model, s, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclrtLaunchHostFunc(s, held, NULL));
    ACL_OK(aclrtLaunchHostFunc(s, count, NULL));
    ACL_OK(aclmdlRIEndTask(model, s));
    ACL_OK(aclmdlRIBuildEnd(model, NULL));
    ACL_FAILS(aclmdlRIExecute(model, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "within 20 ms");
    assert_int_equal(atomic_load(&runs), 0);
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeDevice());
    assert_int_equal(atomic_load(&runs), 1);
    ACL_FAILS(aclmdlRIExecute(model, -2), ACL_ERROR_RT_PARAM_INVALID, "below -1");
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtDestroyStream(s));
}

static void test_acl_model_build_refusals(void **state) {
    (void)state;
    aclrtStream s, t, u;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&t));
    ACL_OK(aclrtCreateStream(&u));
    aclmdlRI model, other;
    ACL_FAILS(aclmdlRIBuildBegin(NULL, 0), ACL_ERROR_INVALID_PARAM, "modelRI is NULL");
    ACL_FAILS(aclmdlRIBuildBegin(&model, 1), ACL_ERROR_INVALID_PARAM, "must be 0");
    assert_null(model);
    ACL_OK(aclmdlRIBuildBegin(&model, 0));
    ACL_OK(aclmdlRIBuildBegin(&other, 0));
    ACL_FAILS(aclmdlRIBindStream(model, s, ACL_MODEL_STREAM_FLAG_DEFAULT),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclrtActiveStream");
    ACL_FAILS(aclmdlRIBindStream(model, s, 5), ACL_ERROR_INVALID_PARAM, "flag 0x5");
    ACL_FAILS(aclmdlRIBindStream(model, NULL, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "stream is NULL");
    ACL_FAILS(aclmdlRIBindStream(NULL, s, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "modelRI is NULL");
    ACL_FAILS(aclmdlRIBindStream(s, s, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "no model from aclmdlRIBuildBegin");
    ACL_FAILS(aclmdlRIBuildEnd(model, NULL), ACL_ERROR_INVALID_PARAM, "no stream");
    ACL_OK(aclmdlRIBindStream(model, s, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_FAILS(aclmdlRIBindStream(model, s, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "already bound to this model");
    ACL_FAILS(aclmdlRIBindStream(other, s, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "bound to another model");
    ACL_OK(aclmdlRICaptureBegin(u, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ACL_FAILS(aclmdlRIBindStream(model, u, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "being captured");
    aclmdlRI captured;
    ACL_OK(aclmdlRICaptureEnd(u, &captured));
    ACL_FAILS(aclmdlRIEndTask(model, t), ACL_ERROR_INVALID_PARAM, "not bound");
    ACL_FAILS(aclmdlRIEndTask(model, NULL), ACL_ERROR_INVALID_PARAM, "not bound");
    ACL_FAILS(aclmdlRIBuildEnd(model, NULL), ACL_ERROR_INVALID_PARAM, "no end task");
    ACL_FAILS(aclmdlRIUnbindStream(model, s), ACL_ERROR_INVALID_PARAM, "still being built");
    ACL_FAILS(aclmdlRIExecuteAsync(model, t), ACL_ERROR_INVALID_PARAM, "aclmdlRIBuildEnd first");
    ACL_FAILS(aclmdlRIExecute(model, -1), ACL_ERROR_INVALID_PARAM, "aclmdlRIBuildEnd first");
    ACL_OK(aclmdlRIEndTask(model, s));
    ACL_FAILS(aclmdlRIEndTask(model, s), ACL_ERROR_INVALID_PARAM, "has one");
    ACL_FAILS(aclmdlRIBuildEnd(model, &t), ACL_ERROR_INVALID_PARAM, "must be NULL");
    ACL_OK(aclmdlRIBuildEnd(model, NULL));
    ACL_FAILS(aclmdlRIBuildEnd(model, NULL), ACL_ERROR_INVALID_PARAM, "already built");
    ACL_FAILS(aclmdlRIBindStream(model, t, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "is built");
    ACL_FAILS(aclmdlRIEndTask(model, s), ACL_ERROR_INVALID_PARAM, "already built");
    /* Destroyed, foreign and other-kind handles. */
    ACL_OK(aclmdlRIDestroy(model));
    ACL_FAILS(aclmdlRIDestroy(model), ACL_ERROR_INVALID_PARAM, "destroyed by aclmdlRIDestroy");
    ACL_FAILS(aclmdlRIExecuteAsync(model, t), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_FAILS(aclmdlRIExecute(model, -1), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_FAILS(aclmdlRIBindStream(model, t, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM,
              "destroyed");
    ACL_FAILS(aclmdlRIEndTask(model, s), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_FAILS(aclmdlRIBuildEnd(model, NULL), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_FAILS(aclmdlRIUnbindStream(model, s), ACL_ERROR_INVALID_PARAM, "destroyed");
    int64_t shape[1] = {1}, strides[1] = {1};
    float x = 0;
    aclTensor *tensor =
        aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, &x);
    assert_non_null(tensor);
    ACL_FAILS(aclmdlRIExecute((aclmdlRI)tensor, -1), ACL_ERROR_INVALID_PARAM,
              "tensor from aclCreateTensor");
    ACL_FAILS(aclmdlRIDestroy((aclmdlRI)tensor), ACL_ERROR_INVALID_PARAM,
              "tensor from aclCreateTensor");
    ACL_OK(aclDestroyTensor(tensor));
    /* A stream, passed as a model, is refused by rill. */
    ACL_FAILS(aclmdlRIExecuteAsync((aclmdlRI)s, t), ACL_ERROR_RT_PARAM_INVALID,
              "aclmdlRIExecuteAsync");
    /* A destroyed stream is not bound. */
    ACL_OK(aclrtDestroyStream(t));
    ACL_FAILS(aclmdlRIBindStream(other, t, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID,
              "aclmdlRIBindStream");
    ACL_OK(aclmdlRIDestroy(captured));
    ACL_OK(aclmdlRIDestroy(other));
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtDestroyStream(u));
}

/* aclFinalize releases models being built and built ones (the ASan build
 * finds anything left behind), and ACL starts again. */
static void test_acl_finalize_releases_models(void **state) {
    (void)state;
    aclrtStream a, b;
    ACL_OK(aclrtCreateStream(&a));
    ACL_OK(aclrtCreateStream(&b));
    aclmdlRI building, built;
    ACL_OK(aclmdlRIBuildBegin(&building, 0));
    ACL_OK(aclmdlRIBindStream(building, a, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclrtLaunchHostFunc(a, count, NULL));
    ACL_OK(aclmdlRIBuildBegin(&built, 0));
    ACL_OK(aclmdlRIBindStream(built, b, ACL_MODEL_STREAM_FLAG_HEAD));
    ACL_OK(aclmdlRIEndTask(built, b));
    ACL_OK(aclmdlRIBuildEnd(built, NULL));
    ACL_OK(aclFinalize());
    ACL_OK(aclInit(NULL));
    ACL_FAILS(aclmdlRIDestroy(built), ACL_ERROR_INVALID_PARAM, "destroyed");
    ACL_FAILS(aclmdlRIDestroy(building), ACL_ERROR_INVALID_PARAM, "destroyed");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_model_built_by_hand_runs_its_streams_work),
        ACL_TEST(test_acl_model_destroyed_while_building),
        ACL_TEST(test_acl_model_execute_times_out),
        ACL_TEST(test_acl_model_build_refusals),
        ACL_TEST(test_acl_finalize_releases_models),
    };
    return RT_RUN(tests);
}
