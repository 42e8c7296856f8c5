/* SPDX-License-Identifier: MIT */
/* librill_acl's event calls beyond create, record and synchronize: the
 * WithFlag variants, aclrtResetEvent, and interprocess events
 * (ACL_EVENT_IPC, aclrtIpcGetEventHandle, aclrtIpcOpenEventHandle), each
 * with its refusals. */
#include <stdatomic.h>
#include <time.h>

#include "acl_support.h"

static atomic_int gate, after_gate;

static void held(void *arg) {
    (void)arg;
    while (!atomic_load(&gate)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static void mark(void *arg) {
    (void)arg;
    atomic_store(&after_gate, atomic_load(&gate) ? 1 : -1);
}

static void test_acl_event_with_flag_variants(void **state) {
    (void)state;
    aclrtStream a, b;
    aclrtEvent e, x;
    ACL_OK(aclrtCreateStream(&a));
    ACL_OK(aclrtCreateStream(&b));
    ACL_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC));
    atomic_store(&gate, 0);
    atomic_store(&after_gate, 0);
    ACL_OK(aclrtLaunchHostFunc(a, held, NULL));
    ACL_OK(aclrtRecordEventWithFlag(e, a, ACL_EVENT_RECORD_DEFAULT));
    ACL_OK(aclrtStreamWaitEventWithFlag(b, e, 0, ACL_EVENT_WAIT_DEFAULT));
    ACL_OK(aclrtLaunchHostFunc(b, mark, NULL));
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(b, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
              "aclrtSynchronizeStreamWithTimeout");
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeStream(b));
    assert_int_equal(atomic_load(&after_gate), 1); /* b waited for a's record */
    /* Reset: the recorded work is done, so the event already acts reset. */
    ACL_OK(aclrtResetEvent(e, a));
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    ACL_OK(aclrtQueryEventStatus(e, &st));
    assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);

    /* External records and waits belong in captures (test_acl_external). */
    ACL_FAILS(aclrtRecordEventWithFlag(e, a, ACL_EVENT_RECORD_EXTERNAL),
              ACL_ERROR_RT_STREAM_NOT_CAPTURED, "ACL_EVENT_RECORD_EXTERNAL");
    ACL_FAILS(aclrtRecordEventWithFlag(e, a, 4), ACL_ERROR_INVALID_PARAM, "flag 0x4");
    ACL_FAILS(aclrtRecordEventWithFlag(NULL, a, 0), ACL_ERROR_INVALID_PARAM, "event is NULL");
    ACL_FAILS(aclrtStreamWaitEventWithFlag(b, e, 0, ACL_EVENT_WAIT_EXTERNAL),
              ACL_ERROR_RT_STREAM_NOT_CAPTURED, "ACL_EVENT_WAIT_EXTERNAL");
    ACL_FAILS(aclrtStreamWaitEventWithFlag(b, e, 0, 8), ACL_ERROR_INVALID_PARAM, "flag 0x8");
    ACL_FAILS(aclrtStreamWaitEventWithFlag(b, e, 100, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
              "timeout 100");
    ACL_FAILS(aclrtStreamWaitEventWithFlag(b, NULL, 0, 0), ACL_ERROR_INVALID_PARAM,
              "event is NULL");
    ACL_FAILS(aclrtCreateEventExWithFlag(&x, 0x80), ACL_ERROR_INVALID_PARAM, "flag 0x80");
    ACL_FAILS(aclrtCreateEventExWithFlag(NULL, 0), ACL_ERROR_INVALID_PARAM, "event is NULL");
    ACL_FAILS(aclrtResetEvent(NULL, a), ACL_ERROR_INVALID_PARAM, "event is NULL");
    ACL_OK(aclrtDestroyStream(a));
    ACL_FAILS(aclrtResetEvent(e, a), ACL_ERROR_RT_PARAM_INVALID, "aclrtResetEvent");
    ACL_OK(aclrtDestroyEvent(e));
    ACL_FAILS(aclrtResetEvent(e, b), ACL_ERROR_RT_PARAM_INVALID, "aclrtResetEvent");
    ACL_FAILS(aclrtRecordEventWithFlag(e, b, 0), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtRecordEventWithFlag");
    ACL_FAILS(aclrtStreamWaitEventWithFlag(b, e, 0, 0), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtStreamWaitEventWithFlag");
    ACL_OK(aclrtDestroyStream(b));
}

static uint64_t monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sleep_20ms(void *arg) {
    (void)arg;
    struct timespec ts = {0, 20000000L};
    nanosleep(&ts, NULL);
}

/* "When the event's recorded work completed, in nanoseconds of the host's
 * CLOCK_MONOTONIC": each timestamp lies between the test's clock before
 * the record (plus the 20 ms the stream sleeps before the second) and its
 * clock after the call. */
static void test_acl_event_timestamp(void **state) {
    (void)state;
    aclrtStream s;
    aclrtEvent first, second, untimed, unrecorded;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEvent(&first));
    ACL_OK(aclrtCreateEventWithFlag(&second, ACL_EVENT_TIME_LINE));
    uint64_t before = monotonic_ns();
    ACL_OK(aclrtRecordEvent(first, s));
    ACL_OK(aclrtLaunchHostFunc(s, sleep_20ms, NULL));
    ACL_OK(aclrtRecordEvent(second, s));
    ACL_OK(aclrtSynchronizeStream(s));
    uint64_t t1 = 0, t2 = 0;
    ACL_OK(aclrtEventGetTimestamp(first, &t1));
    ACL_OK(aclrtEventGetTimestamp(second, &t2));
    uint64_t after = monotonic_ns();
    assert_true(before <= t1 && t1 <= after);
    assert_true(before + 20000000u <= t2 && t2 <= after);

    ACL_OK(aclrtCreateEventWithFlag(&untimed, ACL_EVENT_SYNC));
    ACL_OK(aclrtCreateEvent(&unrecorded));
    ACL_OK(aclrtRecordEvent(untimed, s));
    ACL_OK(aclrtSynchronizeStream(s));
    ACL_FAILS(aclrtEventGetTimestamp(untimed, &t1), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
              "aclrtEventGetTimestamp");
    ACL_FAILS(aclrtEventGetTimestamp(unrecorded, &t1), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
              "never recorded");
    atomic_store(&gate, 0);
    ACL_OK(aclrtLaunchHostFunc(s, held, NULL));
    ACL_OK(aclrtRecordEvent(first, s));
    ACL_FAILS(aclrtEventGetTimestamp(first, &t1), ACL_ERROR_RT_EVENT_NOT_COMPLETE, "pending");
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeStream(s));
    ACL_FAILS(aclrtEventGetTimestamp(NULL, &t1), ACL_ERROR_INVALID_PARAM, "event is NULL");
    ACL_FAILS(aclrtEventGetTimestamp(first, NULL), ACL_ERROR_INVALID_PARAM, "timestamp is NULL");
    ACL_OK(aclrtDestroyEvent(first));
    ACL_FAILS(aclrtEventGetTimestamp(first, &t1), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtEventGetTimestamp");
    ACL_OK(aclrtDestroyEvent(second));
    ACL_OK(aclrtDestroyEvent(untimed));
    ACL_OK(aclrtDestroyEvent(unrecorded));
    ACL_OK(aclrtDestroyStream(s));
}

/* "An event made with ACL_EVENT_IPC, shared with another process": opened
 * here in the same process, it is a second event with the same records. */
static void test_acl_ipc_event(void **state) {
    (void)state;
    aclrtStream s;
    aclrtEvent e, opened = NULL, plain;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_IPC));
    aclrtIpcEventHandle h;
    ACL_OK(aclrtIpcGetEventHandle(e, &h));
    ACL_OK(aclrtIpcOpenEventHandle(h, &opened));
    assert_non_null(opened);
    assert_ptr_not_equal(opened, e);
    atomic_store(&gate, 0);
    ACL_OK(aclrtLaunchHostFunc(s, held, NULL));
    ACL_OK(aclrtRecordEvent(e, s));
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    ACL_OK(aclrtQueryEventStatus(opened, &st));
    assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    atomic_store(&gate, 1);
    ACL_OK(aclrtSynchronizeEvent(opened));
    ACL_OK(aclrtQueryEventStatus(e, &st));
    assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);

    /* Refusals: no IPC flag, NULLs, damaged bytes, IPC with timing. */
    ACL_OK(aclrtCreateEvent(&plain));
    ACL_FAILS(aclrtIpcGetEventHandle(plain, &h), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtIpcGetEventHandle");
    ACL_FAILS(aclrtIpcGetEventHandle(NULL, &h), ACL_ERROR_INVALID_PARAM, "event is NULL");
    ACL_FAILS(aclrtIpcGetEventHandle(e, NULL), ACL_ERROR_INVALID_PARAM, "handle is NULL");
    ACL_FAILS(aclrtIpcOpenEventHandle(h, NULL), ACL_ERROR_INVALID_PARAM, "event is NULL");
    aclrtIpcEventHandle bad = h;
    bad.reserved[20] ^= 0x5a;
    aclrtEvent none = (aclrtEvent)0x1;
    ACL_FAILS(aclrtIpcOpenEventHandle(bad, &none), ACL_ERROR_RT_IPC_ERROR,
              "aclrtIpcOpenEventHandle");
    assert_null(none);
    aclrtEvent both = NULL;
    ACL_FAILS(aclrtCreateEventWithFlag(&both, ACL_EVENT_IPC | ACL_EVENT_TIME_LINE),
              ACL_ERROR_RT_PARAM_INVALID, "aclrtCreateEvent");
    assert_null(both);
    ACL_OK(aclrtDestroyEvent(plain));
    ACL_OK(aclrtDestroyEvent(opened));
    ACL_OK(aclrtDestroyEvent(e));
    ACL_FAILS(aclrtIpcGetEventHandle(e, &h), ACL_ERROR_RT_PARAM_INVALID, "aclrtIpcGetEventHandle");
    ACL_OK(aclrtDestroyStream(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_event_with_flag_variants),
        ACL_TEST(test_acl_event_timestamp),
        ACL_TEST(test_acl_ipc_event),
    };
    return RT_RUN(tests);
}
