/* SPDX-License-Identifier: MIT */
/* librill_acl's device resets: aclrtSetDevice counts, aclrtResetDevice
 * counts down and, at 0, waits for the device's work and releases the
 * streams, events and aclrtMalloc memory made through ACL on the device;
 * aclrtResetDeviceForce does so at once. What a reset released is refused
 * afterwards with ACL's parameter errors, never used; what it does not own
 * (rill's own streams, aclrtMallocHost memory, another device's objects)
 * stays. */
#include <stdatomic.h>
#include <time.h>

#include "acl_support.h"

static atomic_int done;

static void slow_then_done(void *arg) {
    (void)arg;
    struct timespec ts = {0, 30 * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&done, 1);
}

/* Two aclrtSetDevice calls: the first reset releases nothing, the second
 * everything ACL made on the device, and a third is refused. */
static void test_acl_reset_device_counts_and_releases(void **state) {
    (void)state;
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtSetDevice(0));
    aclrtStream s;
    aclrtEvent e, never_recorded;
    void *dev, *host;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEvent(&e));
    ACL_OK(aclrtCreateEvent(&never_recorded));
    ACL_OK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMallocHost(&host, 256));
    rill_stream *own;
    RT_OK(rill_stream_create(NULL, 0, &own));

    ACL_OK(aclrtResetDevice(0)); /* 2 -> 1: nothing released */
    ACL_OK(aclrtMemset(dev, 256, 7, 256));
    ACL_OK(aclrtRecordEvent(e, s));
    ACL_OK(aclrtSynchronizeStream(s));

    atomic_store(&done, 0);
    ACL_OK(aclrtLaunchHostFunc(s, slow_then_done, NULL));
    ACL_OK(aclrtResetDevice(0)); /* 1 -> 0: waits, then releases */
    assert_int_equal(atomic_load(&done), 1);
    ACL_FAILS(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStream");
    ACL_FAILS(aclrtLaunchHostFunc(s, slow_then_done, NULL), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtLaunchHostFunc");
    ACL_FAILS(aclrtDestroyStream(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStream");
    ACL_FAILS(aclrtRecordEvent(e, NULL), ACL_ERROR_RT_PARAM_INVALID, "aclrtRecordEvent");
    ACL_FAILS(aclrtDestroyEvent(e), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyEvent");
    ACL_FAILS(aclrtDestroyEvent(never_recorded), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyEvent");
    ACL_FAILS(aclrtMemset(dev, 256, 0, 256), ACL_ERROR_INVALID_PARAM, "aclrtMemset");
    char bytes[256];
    ACL_FAILS(aclrtMemcpy(bytes, sizeof bytes, dev, 256, ACL_MEMCPY_DEVICE_TO_HOST),
              ACL_ERROR_INVALID_PARAM, "aclrtMemcpy");
    ACL_FAILS(aclrtFree(dev), ACL_ERROR_RT_PARAM_INVALID, "aclrtFree");
    /* Not ACL's device objects: they stay. */
    RT_OK(rill_stream_synchronize(own));
    RT_OK(rill_stream_destroy(own));
    ACL_OK(aclrtMemset(host, 256, 1, 256));
    ACL_OK(aclrtFreeHost(host));
    /* The count is 0 now. */
    ACL_FAILS(aclrtResetDevice(0), ACL_ERROR_INVALID_PARAM, "device 0 is not set");
    ACL_FAILS(aclrtResetDeviceForce(0), ACL_ERROR_INVALID_PARAM, "aclrtSetDevice(0)");
    /* The device may be set and used again. */
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtSynchronizeStream(s));
    ACL_OK(aclrtResetDeviceForce(0));
    ACL_FAILS(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStream");
}

/* aclrtResetDeviceForce releases at once, whatever the count; streams from
 * aclrtCreateStreamWithConfig go too, and their flags with them. */
static void test_acl_reset_device_force(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        ACL_OK(aclrtSetDevice(0));
    aclrtStream s;
    ACL_OK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_FAST_LAUNCH));
    uint32_t flags = 0;
    ACL_OK(aclrtStreamGetFlags(s, &flags));
    assert_int_equal(flags, ACL_STREAM_FAST_LAUNCH);
    atomic_store(&done, 0);
    ACL_OK(aclrtLaunchHostFunc(s, slow_then_done, NULL));
    ACL_OK(aclrtResetDeviceForce(0));
    assert_int_equal(atomic_load(&done), 1);
    ACL_FAILS(aclrtStreamGetFlags(s, &flags), ACL_ERROR_RT_PARAM_INVALID, "aclrtStreamGetFlags");
    ACL_FAILS(aclrtDestroyStreamForce(s), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStreamForce");
    ACL_FAILS(aclrtResetDevice(0), ACL_ERROR_INVALID_PARAM, "not set");
}

/* A reset releases its own device's objects only. */
static void test_acl_reset_keeps_other_devices(void **state) {
    (void)state;
    uint32_t count;
    ACL_OK(aclrtGetDeviceCount(&count));
    if (count < 2)
        skip();
    ACL_OK(aclrtSetDevice(1));
    aclrtStream other;
    void *other_mem;
    ACL_OK(aclrtCreateStream(&other));
    ACL_OK(aclrtMalloc(&other_mem, 64, ACL_MEM_MALLOC_NORMAL_ONLY));
    ACL_OK(aclrtSetDevice(0));
    aclrtStream mine;
    ACL_OK(aclrtCreateStream(&mine));
    ACL_OK(aclrtResetDevice(0));
    ACL_FAILS(aclrtSynchronizeStream(mine), ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStream");
    ACL_OK(aclrtSynchronizeStream(other));
    ACL_OK(aclrtMemset(other_mem, 64, 0, 64));
    ACL_OK(aclrtFree(other_mem));
    ACL_OK(aclrtDestroyStream(other));
    ACL_OK(aclrtResetDevice(1));
}

/* Streams and events destroyed through ACL before the reset are not
 * destroyed again, and a stream destroyed through rill is left alone. */
static void test_acl_reset_after_destroys(void **state) {
    (void)state;
    ACL_OK(aclrtSetDevice(0));
    aclrtStream a, b;
    aclrtEvent e;
    ACL_OK(aclrtCreateStream(&a));
    ACL_OK(aclrtCreateStream(&b));
    ACL_OK(aclrtCreateEvent(&e));
    ACL_OK(aclrtDestroyStream(a));
    ACL_OK(aclrtDestroyEvent(e));
    RT_OK(rill_stream_destroy((rill_stream *)b));
    ACL_OK(aclrtResetDevice(0));
    ACL_FAILS(aclrtDestroyStream(b), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStream");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_reset_device_counts_and_releases),
        ACL_TEST(test_acl_reset_device_force),
        ACL_TEST(test_acl_reset_keeps_other_devices),
        ACL_TEST(test_acl_reset_after_destroys),
    };
    return RT_RUN(tests);
}
