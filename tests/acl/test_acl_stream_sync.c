/* SPDX-License-Identifier: MIT */
/* librill_acl's stream calls beyond create and destroy: waits with a time
 * limit (stream, event, device), aclrtStreamQuery, priorities and flags,
 * aclrtSetStreamFailureMode and aclrtDestroyStreamForce, each with its
 * refusals. A host function held at a gate keeps work pending. */
#include <stdatomic.h>
#include <time.h>

#include "acl_support.h"

static atomic_int gate;

static void held(void *arg) {
    (void)arg;
    while (!atomic_load(&gate)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static void fails(void *arg) {
    (void)arg;
    rill_host_func_fail("a task failed on purpose");
}

static atomic_int ran_after_failure;

static void mark(void *arg) {
    (void)arg;
    atomic_store(&ran_after_failure, 1);
}

/* "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when the work is not done by then (it
 * runs on)"; the event's and the device's likewise. */
static void test_acl_synchronize_with_timeout(void **state) {
    (void)state;
    aclrtStream s;
    aclrtEvent e;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEvent(&e));
    atomic_store(&gate, 0);
    ACL_OK(aclrtLaunchHostFunc(s, held, NULL));
    ACL_OK(aclrtRecordEvent(e, s));
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    ACL_OK(aclrtStreamQuery(s, &st));
    assert_int_equal(st, ACL_STREAM_STATUS_NOT_READY);
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(s, 0), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
              "within 0 ms");
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(s, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
              "aclrtSynchronizeStreamWithTimeout");
    ACL_FAILS(aclrtSynchronizeEventWithTimeout(e, 20), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
              "aclrtSynchronizeEventWithTimeout");
    ACL_FAILS(aclrtSynchronizeDeviceWithTimeout(20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
              "aclrtSynchronizeDeviceWithTimeout");
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(s, -2), ACL_ERROR_RT_PARAM_INVALID, "below -1");
    ACL_FAILS(aclrtSynchronizeEventWithTimeout(e, -2), ACL_ERROR_RT_PARAM_INVALID, "below -1");
    ACL_FAILS(aclrtSynchronizeDeviceWithTimeout(-5), ACL_ERROR_RT_PARAM_INVALID, "below -1");
    ACL_FAILS(aclrtSynchronizeEventWithTimeout(NULL, 1), ACL_ERROR_INVALID_PARAM, "event is NULL");
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeStreamWithTimeout(s, -1));
    ACL_OK(aclrtSynchronizeStreamWithTimeout(s, 0));
    ACL_OK(aclrtSynchronizeEventWithTimeout(e, 1000));
    ACL_OK(aclrtSynchronizeDeviceWithTimeout(-1));
    ACL_OK(aclrtSynchronizeStreamWithTimeout(NULL, 1000)); /* the default stream */
    ACL_OK(aclrtStreamQuery(s, &st));
    assert_int_equal(st, ACL_STREAM_STATUS_COMPLETE);
    ACL_FAILS(aclrtStreamQuery(s, NULL), ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery");
    ACL_OK(aclrtDestroyEvent(e));
    ACL_OK(aclrtDestroyStream(s));
    /* Destroyed handles: rill's refusal with its sentence. */
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(s, 10), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtSynchronizeStreamWithTimeout");
    ACL_FAILS(aclrtSynchronizeEventWithTimeout(e, 10), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtSynchronizeEventWithTimeout");
    ACL_FAILS(aclrtStreamQuery(s, &st), ACL_ERROR_RT_PARAM_INVALID, "aclrtStreamQuery");
}

static void test_acl_stream_priority_and_flags(void **state) {
    (void)state;
    int32_t least = -1, greatest = -1;
    ACL_OK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    assert_int_equal(greatest, 0);
    assert_true(least >= 0);
    aclrtStream hi, lo, plain;
    ACL_OK(aclrtCreateStreamWithConfig(&hi, 0, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_HUGE));
    ACL_OK(aclrtCreateStreamWithConfig(&lo, (uint32_t)least + 7, 0));
    ACL_OK(aclrtCreateStream(&plain));
    uint32_t p = 99, f = 99;
    ACL_OK(aclrtStreamGetPriority(hi, &p));
    assert_int_equal(p, 0);
    ACL_OK(aclrtStreamGetPriority(lo, &p));
    assert_int_equal(p, (uint32_t)least); /* clamped as created */
    ACL_OK(aclrtStreamGetFlags(hi, &f));
    assert_int_equal(f, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_HUGE);
    ACL_OK(aclrtStreamGetFlags(lo, &f));
    assert_int_equal(f, 0);
    ACL_OK(aclrtStreamGetFlags(plain, &f));
    assert_int_equal(f, 0);
    ACL_OK(aclrtStreamGetFlags(NULL, &f));
    assert_int_equal(f, 0);
    ACL_OK(aclrtStreamGetPriority(NULL, &p));
    ACL_FAILS(aclrtStreamGetPriority(hi, NULL), ACL_ERROR_INVALID_PARAM, "priority is NULL");
    ACL_FAILS(aclrtStreamGetFlags(hi, NULL), ACL_ERROR_INVALID_PARAM, "flags is NULL");
    ACL_FAILS(aclrtDeviceGetStreamPriorityRange(NULL, &greatest), ACL_ERROR_INVALID_PARAM,
              "leastPriority is NULL");
    ACL_FAILS(aclrtDeviceGetStreamPriorityRange(&least, NULL), ACL_ERROR_INVALID_PARAM,
              "greatestPriority is NULL");
    ACL_OK(aclrtDestroyStream(hi));
    ACL_OK(aclrtDestroyStream(lo));
    ACL_OK(aclrtDestroyStream(plain));
    ACL_FAILS(aclrtStreamGetFlags(hi, &f), ACL_ERROR_RT_PARAM_INVALID, "aclrtStreamGetFlags");
    ACL_FAILS(aclrtStreamGetPriority(hi, &p), ACL_ERROR_RT_PARAM_INVALID, "aclrtStreamGetPriority");
    /* A stream made after hi was destroyed has its own flags, not hi's. */
    ACL_OK(aclrtCreateStreamWithConfig(&plain, 0, 0));
    ACL_OK(aclrtStreamGetFlags(plain, &f));
    assert_int_equal(f, 0);
    ACL_OK(aclrtDestroyStream(plain));
}

/* "ACL_STOP_ON_FAILURE is how every rill stream behaves (a failed task's
 * later work is skipped); ACL_CONTINUE_ON_FAILURE cannot be had." */
static void test_acl_stream_failure_mode(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE));
    ACL_OK(aclrtSetStreamFailureMode(NULL, ACL_STOP_ON_FAILURE));
    atomic_store(&ran_after_failure, 0);
    ACL_OK(aclrtLaunchHostFunc(s, fails, NULL));
    ACL_OK(aclrtLaunchHostFunc(s, mark, NULL));
    ACL_FAILS(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION, "failed on purpose");
    assert_int_equal(atomic_load(&ran_after_failure), 0);
    ACL_FAILS(aclrtSetStreamFailureMode(s, ACL_CONTINUE_ON_FAILURE),
              ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "ACL_CONTINUE_ON_FAILURE");
    ACL_FAILS(aclrtSetStreamFailureMode(s, 2), ACL_ERROR_INVALID_PARAM, "mode 2");
    ACL_OK(aclrtDestroyStream(s));
    ACL_FAILS(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtSetStreamFailureMode");
}

/* "aclrtDestroyStream: returns at once; the stream's queued work still runs." */
static void test_acl_destroy_stream_force(void **state) {
    (void)state;
    aclrtStream s;
    float *x;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtMallocHost((void **)&x, 256 * sizeof(float)));
    atomic_store(&gate, 0);
    ACL_OK(aclrtLaunchHostFunc(s, held, NULL));
    RT_OK(rill_op_fill_f32((rill_stream *)s, x, 5.0f, 256));
    ACL_OK(aclrtDestroyStreamForce(s)); /* returns with the gate shut */
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeDevice());
    for (int i = 0; i < 256; i++)
        assert_true(x[i] == 5.0f);
    ACL_FAILS(aclrtDestroyStreamForce(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStreamForce");
    ACL_FAILS(aclrtDestroyStreamForce(NULL), ACL_ERROR_INVALID_PARAM, "stream is NULL");
    ACL_OK(aclrtFreeHost(x));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_synchronize_with_timeout),
        ACL_TEST(test_acl_stream_priority_and_flags),
        ACL_TEST(test_acl_stream_failure_mode),
        ACL_TEST(test_acl_destroy_stream_force),
    };
    return RT_RUN(tests);
}
