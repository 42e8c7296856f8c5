/* SPDX-License-Identifier: MIT */
/* Events and devices (two CPU devices): an interprocess event of device 0,
 * opened from its handle, is recorded on a stream of device 1, as CANN's
 * process on device 1 records an event it opened; its record follows that
 * stream's work (held at a gate), for the opened event and the exporter's
 * alike. Any other event of device 0 is refused on a device-1 stream. */
#include <stdatomic.h>
#include <unistd.h>

#include "acl_support.h"

static atomic_int gate;

/* Holds its stream until the gate opens (10 s at most). */
static void held(void *arg) {
    (void)arg;
    for (int i = 0; i < 10000 && !atomic_load(&gate); i++)
        usleep(1000);
}

static void test_acl_interprocess_event_recorded_on_another_device(void **state) {
    (void)state;
    uint32_t count = 0;
    ACL_OK(aclrtGetDeviceCount(&count));
    assert_true(count >= 2);
    ACL_OK(aclrtSetDevice(0));
    aclrtStream s0;
    ACL_OK(aclrtCreateStream(&s0));
    aclrtEvent exported, opened;
    ACL_OK(aclrtCreateEventExWithFlag(&exported, ACL_EVENT_IPC));
    ACL_OK(aclrtRecordEvent(exported, s0));
    ACL_OK(aclrtSynchronizeEvent(exported));
    aclrtIpcEventHandle handle;
    ACL_OK(aclrtIpcGetEventHandle(exported, &handle));
    ACL_OK(aclrtIpcOpenEventHandle(handle, &opened));

    ACL_OK(aclrtSetDevice(1));
    aclrtStream s1;
    ACL_OK(aclrtCreateStream(&s1));
    for (int round = 0; round < 2; round++) {
        atomic_store(&gate, 0);
        ACL_OK(aclrtLaunchHostFunc(s1, held, NULL));
        ACL_OK(aclrtRecordEvent(opened, s1));
        aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;
        usleep(20000);
        ACL_OK(aclrtQueryEventStatus(opened, &st));
        assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
        ACL_OK(aclrtQueryEventStatus(exported, &st));
        assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
        atomic_store(&gate, 1);
        ACL_OK(aclrtSynchronizeEvent(exported));
        ACL_OK(aclrtQueryEventStatus(opened, &st));
        assert_int_equal(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    }
    /* The flag variant relays too; an event of device 0 that is not
     * interprocess is refused on device 1's stream. */
    ACL_OK(aclrtRecordEventWithFlag(opened, s1, ACL_EVENT_RECORD_DEFAULT));
    ACL_OK(aclrtSynchronizeEvent(opened));
    ACL_OK(aclrtSetDevice(0));
    aclrtEvent plain;
    ACL_OK(aclrtCreateEvent(&plain));
    ACL_OK(aclrtRecordEvent(plain, s0));
    ACL_FAILS(aclrtRecordEvent(plain, s1), ACL_ERROR_RT_STREAM_CONTEXT, "another device");

    ACL_OK(aclrtDestroyEvent(plain));
    ACL_OK(aclrtDestroyEvent(opened));
    ACL_OK(aclrtDestroyEvent(exported));
    ACL_OK(aclrtDestroyStream(s1));
    ACL_OK(aclrtDestroyStream(s0));
    ACL_OK(aclrtResetDevice(1));
    ACL_OK(aclrtResetDevice(0));
    ACL_OK(aclrtResetDevice(0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_interprocess_event_recorded_on_another_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
