/* SPDX-License-Identifier: MIT */
/* librill_acl's contexts (aclrtCreateContext, aclrtDestroyContext,
 * aclrtSetCurrentContext, aclrtGetCurrentContext), aclrtGetRunMode and
 * aclrtResetDeviceForce: a context stands for one device; destroyed,
 * foreign and default contexts are refused with a message. */
#include <pthread.h>

#include "acl_support.h"

static int32_t current_device(void) {
    int32_t id = -1;
    ACL_OK(aclrtGetDevice(&id));
    return id;
}

/* "A context of device deviceId, made current for the calling thread." */
static void test_acl_context_create_makes_it_current(void **state) {
    (void)state;
    uint32_t count;
    ACL_OK(aclrtGetDeviceCount(&count));
    int32_t last = (int32_t)count - 1;
    aclrtContext def = NULL, ctx = NULL, got = NULL;
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtGetCurrentContext(&def));
    assert_non_null(def);
    ACL_OK(aclrtGetCurrentContext(&got));
    assert_ptr_equal(got, def); /* one default context per device */
    ACL_OK(aclrtCreateContext(&ctx, last));
    assert_non_null(ctx);
    assert_ptr_not_equal(ctx, def);
    assert_int_equal(current_device(), last);
    ACL_OK(aclrtGetCurrentContext(&got));
    assert_ptr_equal(got, ctx);
    /* aclrtSetCurrentContext makes the context's device current again. */
    ACL_OK(aclrtSetCurrentContext(def));
    assert_int_equal(current_device(), 0);
    ACL_OK(aclrtGetCurrentContext(&got));
    assert_ptr_equal(got, def);
    ACL_OK(aclrtSetCurrentContext(ctx));
    assert_int_equal(current_device(), last);
    /* Streams made in a context are on its device. */
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    rill_device *dev;
    rill_device_info info;
    RT_OK(rill_stream_get_device((rill_stream *)s, &dev));
    RT_OK(rill_device_get_info(dev, &info));
    assert_int_equal(info.ordinal, last);
    /* Destroying the current context gives the device's default again. */
    ACL_OK(aclrtDestroyContext(ctx));
    ACL_OK(aclrtGetCurrentContext(&got));
    assert_non_null(got);
    assert_ptr_not_equal(got, ctx);
    ACL_OK(aclrtSynchronizeStream(s)); /* the stream stays */
    ACL_OK(aclrtDestroyStream(s));
}

/* "a thread whose current context it was has its device's default context
 * again"; another thread's aclrtSetDevice switches that thread only. */
static void *set_device_then_get_context(void *arg) {
    aclrtContext *out = arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtGetCurrentContext(out) != ACL_SUCCESS)
        *out = NULL;
    return NULL;
}

static void test_acl_context_is_per_thread(void **state) {
    (void)state;
    aclrtContext ctx, def, other = NULL, got;
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtGetCurrentContext(&def));
    ACL_OK(aclrtCreateContext(&ctx, 0));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, set_device_then_get_context, &other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_ptr_equal(other, def);
    ACL_OK(aclrtGetCurrentContext(&got));
    assert_ptr_equal(got, ctx);
    ACL_OK(aclrtDestroyContext(ctx));
}

static void test_acl_context_refusals(void **state) {
    (void)state;
    uint32_t count;
    ACL_OK(aclrtGetDeviceCount(&count));
    aclrtContext ctx = (aclrtContext)0x1, def;
    ACL_FAILS(aclrtCreateContext(NULL, 0), ACL_ERROR_INVALID_PARAM, "aclrtCreateContext");
    ACL_FAILS(aclrtCreateContext(&ctx, (int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID,
              "aclrtCreateContext");
    assert_null(ctx);
    ACL_FAILS(aclrtCreateContext(&ctx, -1), ACL_ERROR_RT_INVALID_DEVICEID, "deviceId -1");
    ACL_FAILS(aclrtGetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext");
    ACL_FAILS(aclrtSetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM, "context is NULL");
    ACL_FAILS(aclrtDestroyContext(NULL), ACL_ERROR_INVALID_PARAM, "context is NULL");
    /* The default context is not destroyed. */
    ACL_OK(aclrtGetCurrentContext(&def));
    ACL_FAILS(aclrtDestroyContext(def), ACL_ERROR_INVALID_PARAM, "default context");
    ACL_OK(aclrtSetCurrentContext(def));
    /* A destroyed context: refused, never used. */
    ACL_OK(aclrtCreateContext(&ctx, 0));
    ACL_OK(aclrtDestroyContext(ctx));
    ACL_FAILS(aclrtDestroyContext(ctx), ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext");
    ACL_FAILS(aclrtSetCurrentContext(ctx), ACL_ERROR_INVALID_PARAM, "was destroyed");
    /* A stream, an event or any pointer in its place. */
    aclrtStream s;
    aclrtEvent e;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateEvent(&e));
    ACL_FAILS(aclrtSetCurrentContext(s), ACL_ERROR_INVALID_PARAM, "no context");
    ACL_FAILS(aclrtDestroyContext(e), ACL_ERROR_INVALID_PARAM, "no context");
    int local;
    ACL_FAILS(aclrtSetCurrentContext(&local), ACL_ERROR_INVALID_PARAM, "no context");
    /* And a context where rill expects a stream or an event: rill's refusal. */
    ACL_OK(aclrtCreateContext(&ctx, 0));
    aclrtStreamStatus st;
    uint64_t ts;
    ACL_FAILS(aclrtStreamQuery(ctx, &st), ACL_ERROR_RT_PARAM_INVALID, "aclrtStreamQuery");
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(ctx, 10), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtSynchronizeStreamWithTimeout");
    ACL_FAILS(aclrtSubscribeReport(1, ctx), ACL_ERROR_RT_PARAM_INVALID, "aclrtSubscribeReport");
    ACL_FAILS(aclrtEventGetTimestamp(ctx, &ts), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtEventGetTimestamp");
    ACL_FAILS(aclrtResetEvent(ctx, s), ACL_ERROR_RT_PARAM_INVALID, "aclrtResetEvent");
    ACL_OK(aclrtDestroyContext(ctx));
    ACL_OK(aclrtDestroyEvent(e));
    ACL_OK(aclrtDestroyStream(s));
}

static void test_acl_run_mode_and_reset_force(void **state) {
    (void)state;
    aclrtRunMode mode = ACL_DEVICE;
    ACL_OK(aclrtGetRunMode(&mode));
    assert_int_equal(mode, ACL_HOST);
    ACL_FAILS(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode");
    uint32_t count;
    ACL_OK(aclrtGetDeviceCount(&count));
    /* aclrtResetDeviceForce releases what ACL made on the device, whatever
     * the count of aclrtSetDevice calls (tests/acl/test_acl_reset.c). */
    aclrtStream s;
    float *x;
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtSetDevice(0));
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtMalloc((void **)&x, 1024 * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    RT_OK(rill_op_fill_f32((rill_stream *)s, x, 3.0f, 1024));
    ACL_OK(aclrtResetDeviceForce(0));
    aclrtStreamStatus st = ACL_STREAM_STATUS_NOT_READY;
    ACL_FAILS(aclrtStreamQuery(s, &st), ACL_ERROR_RT_PARAM_INVALID, "aclrtStreamQuery");
    ACL_FAILS(aclrtResetDeviceForce(0), ACL_ERROR_INVALID_PARAM, "not set");
    ACL_FAILS(aclrtResetDeviceForce((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID,
              "aclrtResetDeviceForce");
    ACL_FAILS(aclrtResetDeviceForce(-1), ACL_ERROR_RT_INVALID_DEVICEID, "deviceId -1");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_context_create_makes_it_current),
        ACL_TEST(test_acl_context_is_per_thread),
        ACL_TEST(test_acl_context_refusals),
        ACL_TEST(test_acl_run_mode_and_reset_force),
    };
    return RT_RUN(tests);
}
