/* SPDX-License-Identifier: MIT */
/* librill_acl's runtime: aclInit/aclFinalize, devices, streams, events, the
 * recent-error message and float16 (acl/acl.h, acl/acl_rt.h, acl_base.h).
 * Every refusal returns ACL's code and leaves a message naming the call. */
#include <pthread.h>
#include <time.h>

#include "acl_support.h"

/* "ACL_ERROR_UNINITIALIZE before any aclInit": first in the table, without
 * the setup that starts ACL. */
static void test_acl_finalize_before_init_is_uninitialize(void **state) {
    (void)state;
    ACL_FAILS(aclFinalize(), ACL_ERROR_UNINITIALIZE, "aclFinalize");
    ACL_OK(aclInit(NULL));
}

static void test_acl_init_finalize_repeats_are_refused(void **state) {
    (void)state;
    ACL_FAILS(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE, "aclInit");
    ACL_OK(aclFinalize());
    ACL_FAILS(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE, "aclFinalize");
    ACL_FAILS(aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE, "/nonexistent/acl.json");
    ACL_OK(aclInit(NULL)); /* "aclInit may start ACL again afterwards" */
}

static void test_acl_devices(void **state) {
    (void)state;
    uint32_t count = 0;
    ACL_OK(aclrtGetDeviceCount(&count));
    int rill_count;
    RT_OK(rill_device_count(&rill_count));
    assert_int_equal(count, (uint32_t)rill_count);
    ACL_OK(aclrtSetDevice((int32_t)count - 1));
    int32_t id = -1;
    ACL_OK(aclrtGetDevice(&id));
    assert_int_equal(id, (int32_t)count - 1);
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtGetDevice(&id));
    assert_int_equal(id, 0);
    ACL_FAILS(aclrtSetDevice((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice");
    ACL_FAILS(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID, "deviceId -1");
    ACL_FAILS(aclrtResetDevice((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice");
    ACL_FAILS(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM, "aclrtGetDevice");
    ACL_FAILS(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount");
    ACL_OK(aclrtSynchronizeDevice());
    ACL_OK(aclrtResetDevice(0));
}

static void test_acl_streams(void **state) {
    (void)state;
    aclrtStream s = NULL, hi = NULL, lo = NULL;
    ACL_OK(aclrtCreateStream(&s));
    assert_non_null(s);
    ACL_OK(aclrtSynchronizeStream(s));
    ACL_OK(aclrtSynchronizeStream(NULL)); /* the default stream */
    /* ACL's priority 0 is the highest, as rill's greatest_priority is. */
    ACL_OK(aclrtCreateStreamWithConfig(&hi, 0, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC));
    ACL_OK(aclrtCreateStreamWithConfig(&lo, 1000, 0));
    rill_device *dev;
    rill_device_info info;
    RT_OK(rill_get_device(&dev));
    RT_OK(rill_device_get_info(dev, &info));
    int p;
    RT_OK(rill_stream_get_priority((rill_stream *)hi, &p));
    assert_int_equal(p, info.greatest_priority);
    RT_OK(rill_stream_get_priority((rill_stream *)lo, &p));
    assert_int_equal(p, info.least_priority);

    aclrtStream bad = s;
    ACL_FAILS(aclrtCreateStreamWithConfig(&bad, 0, 0x100), ACL_ERROR_INVALID_PARAM,
              "aclrtCreateStreamWithConfig");
    assert_null(bad);
    ACL_FAILS(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM, "aclrtCreateStream");
    ACL_FAILS(aclrtCreateStreamWithConfig(NULL, 0, 0), ACL_ERROR_INVALID_PARAM,
              "aclrtCreateStreamWithConfig");
    ACL_FAILS(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream");
    ACL_OK(aclrtDestroyStream(hi));
    ACL_OK(aclrtDestroyStream(lo));
    ACL_OK(aclrtDestroyStream(s));
    /* A destroyed stream is rill's refusal, passed on with rill's sentence. */
    assert_int_equal(aclrtDestroyStream(s), ACL_ERROR_RT_PARAM_INVALID);
    const char *msg = aclGetRecentErrMsg();
    assert_non_null(msg);
    assert_non_null(strstr(msg, "aclrtDestroyStream"));
    assert_non_null(strstr(msg, rill_last_error()));
    ACL_FAILS(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStream");
}

/* A host function that holds its stream until the test opens the gate. */
static atomic_int gate;
static atomic_int order;
static atomic_int held_ran_at, waiter_ran_at;

static void held(void *arg) {
    (void)arg;
    while (!atomic_load(&gate)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&held_ran_at, atomic_fetch_add(&order, 1) + 1);
}

static void waiter(void *arg) {
    (void)arg;
    atomic_store(&waiter_ran_at, atomic_fetch_add(&order, 1) + 1);
}

static void test_acl_events(void **state) {
    (void)state;
    aclrtStream s;
    aclrtEvent start, end, plain;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEvent(&start));
    ACL_OK(aclrtCreateEvent(&end));
    ACL_OK(aclrtCreateEventWithFlag(&plain, ACL_EVENT_SYNC));
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    ACL_OK(aclrtQueryEventStatus(start, &st)); /* never recorded: complete */
    assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);

    atomic_store(&gate, 0);
    ACL_OK(aclrtRecordEvent(start, s));
    RT_OK(rill_launch_host_func((rill_stream *)s, held, NULL));
    ACL_OK(aclrtRecordEvent(end, s));
    ACL_OK(aclrtRecordEvent(plain, s));
    ACL_OK(aclrtQueryEventStatus(end, &st));
    assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    float ms = -1.0f;
    ACL_FAILS(aclrtEventElapsedTime(&ms, start, end), ACL_ERROR_RT_EVENT_NOT_COMPLETE,
              "aclrtEventElapsedTime");
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeEvent(end));
    ACL_OK(aclrtQueryEventStatus(end, &st));
    assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    ACL_OK(aclrtEventElapsedTime(&ms, start, end));
    assert_true(ms >= 0.0f);
    /* Without ACL_EVENT_TIME_LINE an event has no timestamp. */
    ACL_OK(aclrtSynchronizeEvent(plain));
    ACL_FAILS(aclrtEventElapsedTime(&ms, start, plain), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
              "aclrtEventElapsedTime");

    aclrtEvent bad = start;
    ACL_FAILS(aclrtCreateEventWithFlag(&bad, 0x4), ACL_ERROR_INVALID_PARAM,
              "aclrtCreateEventWithFlag");
    assert_null(bad);
    ACL_FAILS(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent");
    ACL_FAILS(aclrtRecordEvent(NULL, s), ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent");
    ACL_FAILS(aclrtQueryEventStatus(start, NULL), ACL_ERROR_INVALID_PARAM, "status");
    ACL_FAILS(aclrtQueryEventStatus(NULL, &st), ACL_ERROR_INVALID_PARAM, "event");
    ACL_FAILS(aclrtSynchronizeEvent(NULL), ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent");
    ACL_FAILS(aclrtEventElapsedTime(NULL, start, end), ACL_ERROR_INVALID_PARAM, "ms");
    ACL_FAILS(aclrtEventElapsedTime(&ms, start, NULL), ACL_ERROR_INVALID_PARAM, "endEvent");
    ACL_FAILS(aclrtDestroyEvent(NULL), ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent");
    ACL_OK(aclrtDestroyEvent(plain));
    ACL_FAILS(aclrtDestroyEvent(plain), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyEvent");
    ACL_FAILS(aclrtRecordEvent(plain, s), ACL_ERROR_RT_PARAM_INVALID, "aclrtRecordEvent");
    ACL_OK(aclrtDestroyEvent(start));
    ACL_OK(aclrtDestroyEvent(end));
    ACL_OK(aclrtDestroyStream(s));
}

/* aclrtStreamWaitEvent: the waiting stream's later work runs after the
 * recorded work. */
static void test_acl_stream_wait_event_orders_streams(void **state) {
    (void)state;
    aclrtStream a, b;
    aclrtEvent e;
    ACL_OK(aclrtCreateStream(&a));
    ACL_OK(aclrtCreateStream(&b));
    ACL_OK(aclrtCreateEvent(&e));
    atomic_store(&gate, 0);
    atomic_store(&order, 0);
    RT_OK(rill_launch_host_func((rill_stream *)a, held, NULL));
    ACL_OK(aclrtRecordEvent(e, a));
    ACL_OK(aclrtStreamWaitEvent(b, e));
    RT_OK(rill_launch_host_func((rill_stream *)b, waiter, NULL));
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeStream(b));
    assert_int_equal(atomic_load(&held_ran_at), 1);
    assert_int_equal(atomic_load(&waiter_ran_at), 2);
    ACL_FAILS(aclrtStreamWaitEvent(b, NULL), ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent");
    ACL_OK(aclrtDestroyEvent(e));
    ACL_OK(aclrtDestroyStream(a));
    ACL_OK(aclrtDestroyStream(b));
}

static void *recent_message_of_new_thread(void *arg) {
    (void)arg;
    return (void *)aclGetRecentErrMsg();
}

/* "NULL while the thread has had no failure"; a success leaves the
 * message, and reading it takes it. */
static void test_acl_recent_message_is_per_thread(void **state) {
    (void)state;
    assert_int_equal(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    ACL_OK(aclrtSynchronizeDevice());
    const char *msg = aclGetRecentErrMsg();
    assert_non_null(msg);
    assert_non_null(strstr(msg, "aclrtGetDevice"));
    assert_null(aclGetRecentErrMsg());
    assert_int_equal(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    pthread_t t;
    void *other = (void *)1;
    assert_int_equal(pthread_create(&t, NULL, recent_message_of_new_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &other), 0);
    assert_null(other);
}

static void test_acl_float16_and_type_sizes(void **state) {
    (void)state;
    assert_int_equal(aclFloatToFloat16(1.0f), 0x3c00);
    assert_int_equal(aclFloatToFloat16(-2.0f), 0xc000);
    assert_int_equal(aclFloatToFloat16(65504.0f), 0x7bff);
    assert_int_equal(aclFloatToFloat16(65520.0f), 0x7c00);           /* rounds to infinity */
    assert_int_equal(aclFloatToFloat16(1.0f + 1.0f / 2048), 0x3c00); /* a tie: to even */
    assert_int_equal(aclFloatToFloat16(5.9604645e-8f), 0x0001);      /* the least subnormal */
    assert_true(aclFloat16ToFloat(0x0001) == 5.9604645e-8f);
    assert_true(aclFloat16ToFloat(0x3555) == 0.333251953125f);
    assert_true(aclFloat16ToFloat(aclFloatToFloat16(1.1f)) == 1.099609375f);
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite positive half round-trips */
        assert_int_equal(aclFloatToFloat16(aclFloat16ToFloat((aclFloat16)h)), h);
    assert_int_equal(aclDataTypeSize(ACL_FLOAT), 4);
    assert_int_equal(aclDataTypeSize(ACL_FLOAT16), 2);
    assert_int_equal(aclDataTypeSize(ACL_INT64), 8);
    assert_int_equal(aclDataTypeSize(ACL_STRING), 0);
    assert_int_equal(aclDataTypeSize(ACL_DT_UNDEFINED), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_acl_finalize_before_init_is_uninitialize, acl_teardown),
        ACL_TEST(test_acl_init_finalize_repeats_are_refused),
        ACL_TEST(test_acl_devices),
        ACL_TEST(test_acl_streams),
        ACL_TEST(test_acl_events),
        ACL_TEST(test_acl_stream_wait_event_orders_streams),
        ACL_TEST(test_acl_recent_message_is_per_thread),
        ACL_TEST(test_acl_float16_and_type_sizes),
    };
    return RT_RUN(tests);
}
