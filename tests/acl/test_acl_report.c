/* SPDX-License-Identifier: MIT */
/* librill_acl's callbacks: aclrtSubscribeReport binds a stream to a
 * thread, aclrtLaunchCallback queues a callback that the stream hands to
 * that thread, which runs it in aclrtProcessReport; ACL_CALLBACK_BLOCK
 * holds the stream until it has run, ACL_CALLBACK_NO_BLOCK does not. And
 * aclrtLaunchHostFunc. Callbacks write atomics; the main thread asserts. */
#include "acl_support.h"
#include "acl_threads.h"

/* The subscribed thread: processes reports until told to stop. */
static void *report_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop))
        (void)aclrtProcessReport(20);
    return NULL;
}

/* "ACL_CALLBACK_BLOCK holds the stream's later work until fn has
 * returned"; it runs on the subscribed thread. */
static void test_acl_callback_runs_on_subscribed_thread_in_order(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    pthread_t t = start_thread(report_loop);
    ACL_OK(aclrtSubscribeReport((uint64_t)t, s));
    struct record before = {0}, cb[3] = {{0}}, after = {0};
    ACL_OK(aclrtLaunchHostFunc(s, note, &before));
    for (int i = 0; i < 3; i++)
        ACL_OK(aclrtLaunchCallback(note, &cb[i], ACL_CALLBACK_BLOCK, s));
    ACL_OK(aclrtLaunchHostFunc(s, note, &after));
    ACL_OK(aclrtSynchronizeStream(s));
    assert_int_equal(atomic_load(&before.at), 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&cb[i].at), 2 + i);
        assert_true(ran_on(&cb[i], t));
    }
    assert_int_equal(atomic_load(&after.at), 5);
    assert_false(ran_on(&after, t));
    stop_thread(t);
    ACL_OK(aclrtUnSubscribeReport((uint64_t)t, s));
    ACL_OK(aclrtDestroyStream(s));
}

/* "ACL_CALLBACK_NO_BLOCK lets it run on": the stream completes before the
 * subscribed thread (here the main thread) has processed the callback. */
static void test_acl_callback_no_block_lets_stream_run_on(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&order, 0);
    ACL_OK(aclrtSubscribeReport((uint64_t)pthread_self(), s));
    struct record cb = {0}, after = {0};
    ACL_OK(aclrtLaunchCallback(note, &cb, ACL_CALLBACK_NO_BLOCK, s));
    ACL_OK(aclrtLaunchHostFunc(s, note, &after));
    /* The stream's work is done, though the callback has not run... (seen
     * by queries: a synchronize of this subscribed thread would run it) */
    aclrtStreamStatus done = ACL_STREAM_STATUS_NOT_READY;
    for (int i = 0; i < 5000 && done != ACL_STREAM_STATUS_COMPLETE; i++) {
        ACL_OK(aclrtStreamQuery(s, &done));
        if (done != ACL_STREAM_STATUS_COMPLETE)
            sleep_ms(1);
    }
    assert_int_equal(done, ACL_STREAM_STATUS_COMPLETE);
    assert_int_equal(atomic_load(&after.at), 1);
    assert_int_equal(atomic_load(&cb.at), 0);
    /* ...until this thread processes it. */
    ACL_OK(aclrtProcessReport(1000));
    assert_int_equal(atomic_load(&cb.at), 2);
    assert_true(ran_on(&cb, pthread_self()));
    ACL_FAILS(aclrtProcessReport(0), ACL_ERROR_RT_REPORT_TIMEOUT, "within 0 ms");
    ACL_FAILS(aclrtProcessReport(10), ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport");
    /* A BLOCK callback holds the stream until this thread processes it. */
    struct record own = {0};
    ACL_OK(aclrtLaunchCallback(note, &own, ACL_CALLBACK_BLOCK, s));
    ACL_OK(aclrtLaunchHostFunc(s, note, &after));
    sleep_ms(20);
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    ACL_OK(aclrtStreamQuery(s, &st));
    assert_int_equal(st, ACL_STREAM_STATUS_NOT_READY);
    assert_int_equal(atomic_load(&own.at), 0);
    /* A subscribed thread that synchronizes runs its callbacks meanwhile. */
    ACL_OK(aclrtSynchronizeStream(s));
    assert_int_equal(atomic_load(&own.at), 3);
    assert_true(ran_on(&own, pthread_self()));
    assert_int_equal(atomic_load(&after.at), 4);
    ACL_OK(aclrtUnSubscribeReport((uint64_t)pthread_self(), s));
    ACL_OK(aclrtDestroyStream(s));
}

/* "A subscribed thread that synchronizes runs the callbacks handed to it
 * while it waits": it never waits for itself. The thread below subscribes
 * itself, queues a BLOCK callback behind a held host function (so that
 * one of rill's workers, not the waiting thread, reaches the callback) and
 * synchronizes; the main thread opens the gate and gives it 5 s. */
static atomic_int gate, self_sync_done;
static struct record self_cb;

static void held(void *arg) {
    (void)arg;
    while (!atomic_load(&gate))
        sleep_ms(1);
}

enum {
    SYNC_STREAM,
    SYNC_EVENT,
    SYNC_DEVICE,
    SYNC_STREAM_TIMEOUT,
    SYNC_EVENT_TIMEOUT,
    SYNC_DEVICE_TIMEOUT
};

static void *subscribe_self_and_synchronize(void *arg) {
    int how = *(int *)arg;
    aclrtStream s;
    aclrtEvent e;
    if (aclrtCreateStream(&s) != ACL_SUCCESS || aclrtCreateEvent(&e) != ACL_SUCCESS ||
        aclrtSubscribeReport((uint64_t)pthread_self(), s) != ACL_SUCCESS ||
        aclrtLaunchHostFunc(s, held, NULL) != ACL_SUCCESS ||
        aclrtLaunchCallback(note, &self_cb, ACL_CALLBACK_BLOCK, s) != ACL_SUCCESS ||
        aclrtRecordEvent(e, s) != ACL_SUCCESS) {
        atomic_store(&self_sync_done, -1);
        return NULL;
    }
    aclError err = how == SYNC_STREAM           ? aclrtSynchronizeStream(s)
                   : how == SYNC_EVENT          ? aclrtSynchronizeEvent(e)
                   : how == SYNC_DEVICE         ? aclrtSynchronizeDevice()
                   : how == SYNC_STREAM_TIMEOUT ? aclrtSynchronizeStreamWithTimeout(s, 10000)
                   : how == SYNC_EVENT_TIMEOUT  ? aclrtSynchronizeEventWithTimeout(e, 10000)
                                                : aclrtSynchronizeDeviceWithTimeout(10000);
    atomic_store(&self_sync_done, err == ACL_SUCCESS ? 1 : -2);
    (void)aclrtUnSubscribeReport((uint64_t)pthread_self(), s);
    (void)aclrtDestroyEvent(e);
    (void)aclrtDestroyStream(s);
    return NULL;
}

static void test_acl_subscribed_thread_synchronizing_runs_its_callbacks(void **state) {
    (void)state;
    for (int how = SYNC_STREAM; how <= SYNC_DEVICE_TIMEOUT; how++) {
        atomic_store(&order, 0);
        atomic_store(&gate, 0);
        atomic_store(&self_sync_done, 0);
        atomic_store(&self_cb.at, 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, subscribe_self_and_synchronize, &how), 0);
        sleep_ms(20);
        atomic_store(&gate, 1);
        for (int i = 0; i < 5000 && atomic_load(&self_sync_done) == 0; i++)
            sleep_ms(1);
        int done = atomic_load(&self_sync_done);
        if (done != 1) {
            /* aclFinalize (the teardown) ends the subscription, which lets
             * the thread go; join it first so that nothing outlives the test. */
            (void)aclFinalize();
            assert_int_equal(pthread_join(t, NULL), 0);
            (void)aclInit(NULL);
            fail_msg("synchronize %d of a subscribed thread: %s", how,
                     done == 0 ? "still waiting after 5 s" : "failed");
        }
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(atomic_load(&self_cb.at), 1);
        assert_true(ran_on(&self_cb, t));
    }
}

/* "Ends the binding; callbacks already queued for it run at once, on the
 * calling thread (NO_BLOCK) or on the stream's own (BLOCK)." */
static void test_acl_unsubscribe_runs_queued_callbacks(void **state) {
    (void)state;
    aclrtStream a, b;
    ACL_OK(aclrtCreateStream(&a));
    ACL_OK(aclrtCreateStream(&b));
    atomic_store(&order, 0);
    uint64_t nobody = (uint64_t)pthread_self() + 1; /* a thread that never processes */
    ACL_OK(aclrtSubscribeReport(nobody, a));
    ACL_OK(aclrtSubscribeReport(nobody, b));
    struct record queued = {0}, blocking = {0}, after = {0};
    ACL_OK(aclrtLaunchCallback(note, &queued, ACL_CALLBACK_NO_BLOCK, a));
    ACL_OK(aclrtLaunchCallback(note, &blocking, ACL_CALLBACK_BLOCK, b));
    ACL_OK(aclrtLaunchHostFunc(b, note, &after));
    ACL_OK(aclrtSynchronizeStreamWithTimeout(a, 5000));
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(b, 50), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
              "aclrtSynchronizeStreamWithTimeout");
    assert_int_equal(atomic_load(&queued.at), 0);
    assert_int_equal(atomic_load(&blocking.at), 0);
    ACL_OK(aclrtUnSubscribeReport(nobody, a));
    assert_int_equal(atomic_load(&queued.at), 1);
    assert_true(ran_on(&queued, pthread_self()));
    ACL_OK(aclrtUnSubscribeReport(nobody, b));
    ACL_OK(aclrtSynchronizeStreamWithTimeout(b, 5000));
    assert_int_equal(atomic_load(&blocking.at), 2);
    assert_int_equal(atomic_load(&after.at), 3);
    ACL_OK(aclrtDestroyStream(a));
    ACL_OK(aclrtDestroyStream(b));
}

/* aclFinalize ends every subscription first, so a BLOCK callback that no
 * thread processes does not hold rill_shutdown's wait forever. */
static void test_acl_finalize_releases_pending_callbacks(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&order, 0);
    ACL_OK(aclrtSubscribeReport((uint64_t)pthread_self() + 1, s));
    struct record cb = {0};
    ACL_OK(aclrtLaunchCallback(note, &cb, ACL_CALLBACK_BLOCK, s));
    sleep_ms(10);
    ACL_OK(aclFinalize());
    assert_int_equal(atomic_load(&cb.at), 1);
    ACL_OK(aclInit(NULL));
    /* The subscription is gone with it. */
    ACL_FAILS(aclrtProcessReport(0), ACL_ERROR_RT_THREAD_SUBSCRIBE, "subscribed to no stream");
}

static void fail_task(void *arg) {
    (void)arg;
    rill_host_func_fail("the task before the callbacks failed");
}

/* A failed stream skips its later work, its callbacks among them: they
 * never run, and aclFinalize releases them (the ASan build finds any left
 * behind). */
static void test_acl_callbacks_of_a_failed_stream_are_skipped_and_released(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&order, 0);
    ACL_OK(aclrtSubscribeReport((uint64_t)pthread_self(), s));
    struct record blocking = {0}, queued = {0};
    ACL_OK(aclrtLaunchHostFunc(s, fail_task, NULL));
    ACL_OK(aclrtLaunchCallback(note, &blocking, ACL_CALLBACK_BLOCK, s));
    ACL_OK(aclrtLaunchCallback(note, &queued, ACL_CALLBACK_NO_BLOCK, s));
    ACL_FAILS(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION, "failed");
    ACL_FAILS(aclrtProcessReport(10), ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport");
    assert_int_equal(atomic_load(&blocking.at), 0);
    assert_int_equal(atomic_load(&queued.at), 0);
    ACL_OK(aclrtUnSubscribeReport((uint64_t)pthread_self(), s));
    ACL_OK(aclrtDestroyStream(s));
}

static void test_acl_callback_refusals(void **state) {
    (void)state;
    aclrtStream s, t;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&t));
    uint64_t me = (uint64_t)pthread_self();
    struct record r = {0};
    ACL_FAILS(aclrtProcessReport(0), ACL_ERROR_RT_THREAD_SUBSCRIBE, "aclrtProcessReport");
    ACL_FAILS(aclrtProcessReport(-2), ACL_ERROR_INVALID_PARAM, "below -1");
    ACL_FAILS(aclrtLaunchCallback(note, &r, ACL_CALLBACK_BLOCK, s), ACL_ERROR_RT_STREAM_NO_CB_REG,
              "aclrtSubscribeReport");
    ACL_OK(aclrtSubscribeReport(me, s));
    ACL_FAILS(aclrtSubscribeReport(me + 1, s), ACL_ERROR_RT_STREAM_SUBSCRIBE, "already");
    ACL_FAILS(aclrtLaunchCallback(NULL, &r, ACL_CALLBACK_BLOCK, s), ACL_ERROR_INVALID_PARAM,
              "fn is NULL");
    ACL_FAILS(aclrtLaunchCallback(note, &r, (aclrtCallbackBlockType)2, s), ACL_ERROR_INVALID_PARAM,
              "blockType 2");
    ACL_FAILS(aclrtUnSubscribeReport(me + 1, s), ACL_ERROR_RT_STREAM_SUBSCRIBE, "not by thread");
    ACL_FAILS(aclrtUnSubscribeReport(me, t), ACL_ERROR_RT_STREAM_SUBSCRIBE, "not subscribed");
    /* During a capture: refused, the capture goes on. */
    ACL_OK(aclrtSubscribeReport(me, t));
    ACL_OK(aclmdlRICaptureBegin(t, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_FAILS(aclrtLaunchCallback(note, &r, ACL_CALLBACK_BLOCK, t),
              ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, "captured");
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureEnd(t, &model));
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtUnSubscribeReport(me, t));
    /* Destroyed and foreign streams. */
    ACL_OK(aclrtDestroyStream(t));
    ACL_FAILS(aclrtSubscribeReport(me, t), ACL_ERROR_RT_PARAM_INVALID, "aclrtSubscribeReport");
    ACL_FAILS(aclrtLaunchCallback(note, &r, ACL_CALLBACK_BLOCK, t), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtLaunchCallback");
    aclrtEvent e;
    ACL_OK(aclrtCreateEvent(&e));
    ACL_FAILS(aclrtSubscribeReport(me, e), ACL_ERROR_RT_PARAM_INVALID, "aclrtSubscribeReport");
    ACL_OK(aclrtDestroyEvent(e));
    /* A stream destroyed while subscribed is still unsubscribed. */
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtUnSubscribeReport(me, s));
    assert_int_equal(atomic_load(&r.at), 0);
}

static void test_acl_launch_host_func(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&order, 0);
    struct record r = {0};
    ACL_OK(aclrtLaunchHostFunc(s, note, &r));
    ACL_OK(aclrtSynchronizeStream(s));
    assert_int_equal(atomic_load(&r.at), 1);
    ACL_FAILS(aclrtLaunchHostFunc(s, NULL, &r), ACL_ERROR_INVALID_PARAM, "fn is NULL");
    ACL_OK(aclrtDestroyStream(s));
    ACL_FAILS(aclrtLaunchHostFunc(s, note, &r), ACL_ERROR_RT_PARAM_INVALID, "aclrtLaunchHostFunc");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_callback_runs_on_subscribed_thread_in_order),
        ACL_TEST(test_acl_callback_no_block_lets_stream_run_on),
        ACL_TEST(test_acl_subscribed_thread_synchronizing_runs_its_callbacks),
        ACL_TEST(test_acl_unsubscribe_runs_queued_callbacks),
        ACL_TEST(test_acl_finalize_releases_pending_callbacks),
        ACL_TEST(test_acl_callbacks_of_a_failed_stream_are_skipped_and_released),
        ACL_TEST(test_acl_callback_refusals),
        ACL_TEST(test_acl_launch_host_func),
    };
    return RT_RUN(tests);
}
