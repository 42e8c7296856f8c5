/* SPDX-License-Identifier: MIT */
/* librill_acl's host functions on a thread of the program:
 * aclrtSubscribeHostFunc binds a stream to a thread, aclrtLaunchHostFunc
 * on that stream hands the function to it, and the thread runs it in
 * aclrtProcessHostFunc while the stream waits. Callbacks of
 * aclrtSubscribeReport are a separate subscription. Functions write
 * atomics; the main thread asserts. */
#include "acl_support.h"
#include "acl_threads.h"

static void *host_func_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop))
        (void)aclrtProcessHostFunc(20);
    return NULL;
}

/* Host functions of a subscribed stream run on its thread, in stream
 * order with the stream's other work; another stream's run on rill's. */
static void test_acl_host_func_runs_on_subscribed_thread_in_order(void **state) {
    (void)state;
    aclrtStream s, other;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&other));
    pthread_t t = start_thread(host_func_loop);
    ACL_OK(aclrtSubscribeHostFunc((uint64_t)t, s));
    struct record hf[3] = {{0}}, elsewhere = {0};
    for (int i = 0; i < 3; i++)
        ACL_OK(aclrtLaunchHostFunc(s, note, &hf[i]));
    ACL_OK(aclrtSynchronizeStream(s));
    ACL_OK(aclrtLaunchHostFunc(other, note, &elsewhere));
    ACL_OK(aclrtSynchronizeStream(other));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&hf[i].at), 1 + i);
        assert_true(ran_on(&hf[i], t));
    }
    assert_int_equal(atomic_load(&elsewhere.at), 4);
    assert_false(ran_on(&elsewhere, t));
    stop_thread(t);
    ACL_OK(aclrtUnSubscribeHostFunc((uint64_t)t, s));
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtDestroyStream(other));
}

/* The stream waits for the host function; aclrtProcessHostFunc runs host
 * functions only, aclrtProcessReport callbacks only. */
static void test_acl_host_func_holds_the_stream_and_is_its_own_kind(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&order, 0);
    uint64_t me = (uint64_t)pthread_self();
    ACL_OK(aclrtSubscribeHostFunc(me, s));
    ACL_OK(aclrtSubscribeReport(me, s));
    struct record cb = {0}, hf = {0};
    ACL_OK(aclrtLaunchCallback(note, &cb, ACL_CALLBACK_NO_BLOCK, s));
    ACL_OK(aclrtLaunchHostFunc(s, note, &hf));
    sleep_ms(20);
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    ACL_OK(aclrtStreamQuery(s, &st));
    assert_int_equal(st, ACL_STREAM_STATUS_NOT_READY);
    ACL_OK(aclrtProcessHostFunc(1000));
    assert_int_equal(atomic_load(&hf.at), 1);
    assert_true(ran_on(&hf, pthread_self()));
    assert_int_equal(atomic_load(&cb.at), 0);
    ACL_FAILS(aclrtProcessHostFunc(0), ACL_ERROR_RT_REPORT_TIMEOUT, "host function");
    ACL_OK(aclrtProcessReport(1000));
    assert_int_equal(atomic_load(&cb.at), 2);
    ACL_OK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    /* A subscribed thread that synchronizes runs its host functions too. */
    struct record own = {0};
    ACL_OK(aclrtLaunchHostFunc(s, note, &own));
    ACL_OK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    assert_int_equal(atomic_load(&own.at), 3);
    ACL_OK(aclrtUnSubscribeReport(me, s));
    ACL_FAILS(aclrtProcessReport(0), ACL_ERROR_RT_THREAD_SUBSCRIBE, "aclrtSubscribeReport");
    ACL_OK(aclrtUnSubscribeHostFunc(me, s));
    ACL_FAILS(aclrtProcessHostFunc(0), ACL_ERROR_RT_THREAD_SUBSCRIBE, "aclrtSubscribeHostFunc");
    ACL_OK(aclrtDestroyStream(s));
}

/* Unsubscribing hands a queued host function back: it runs on the
 * stream's thread, and the stream goes on. aclFinalize does the same. */
static void test_acl_unsubscribe_host_func_runs_queued_ones(void **state) {
    (void)state;
    aclrtStream s;
    ACL_OK(aclrtCreateStream(&s));
    atomic_store(&order, 0);
    uint64_t nobody = (uint64_t)pthread_self() + 1;
    ACL_OK(aclrtSubscribeHostFunc(nobody, s));
    struct record hf = {0}, last = {0};
    ACL_OK(aclrtLaunchHostFunc(s, note, &hf));
    ACL_FAILS(aclrtSynchronizeStreamWithTimeout(s, 50), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
              "aclrtSynchronizeStreamWithTimeout");
    assert_int_equal(atomic_load(&hf.at), 0);
    ACL_OK(aclrtUnSubscribeHostFunc(nobody, s));
    ACL_OK(aclrtSynchronizeStreamWithTimeout(s, 5000));
    assert_int_equal(atomic_load(&hf.at), 1);
    assert_false(ran_on(&hf, pthread_self()));
    ACL_OK(aclrtSubscribeHostFunc(nobody, s));
    ACL_OK(aclrtLaunchHostFunc(s, note, &last));
    sleep_ms(10);
    ACL_OK(aclFinalize());
    assert_int_equal(atomic_load(&last.at), 2);
    ACL_OK(aclInit(NULL));
    ACL_FAILS(aclrtProcessHostFunc(0), ACL_ERROR_RT_THREAD_SUBSCRIBE, "subscribed to no stream");
}

static void test_acl_host_func_refusals(void **state) {
    (void)state;
    aclrtStream s, t;
    ACL_OK(aclrtCreateStream(&s));
    ACL_OK(aclrtCreateStream(&t));
    uint64_t me = (uint64_t)pthread_self();
    struct record r = {0};
    ACL_FAILS(aclrtProcessHostFunc(0), ACL_ERROR_RT_THREAD_SUBSCRIBE, "aclrtProcessHostFunc");
    ACL_FAILS(aclrtProcessHostFunc(-2), ACL_ERROR_INVALID_PARAM, "below -1");
    ACL_OK(aclrtSubscribeHostFunc(me, s));
    ACL_FAILS(aclrtSubscribeHostFunc(me + 1, s), ACL_ERROR_RT_STREAM_SUBSCRIBE,
              "aclrtUnSubscribeHostFunc first");
    ACL_FAILS(aclrtLaunchHostFunc(s, NULL, &r), ACL_ERROR_INVALID_PARAM, "fn is NULL");
    ACL_FAILS(aclrtUnSubscribeHostFunc(me + 1, s), ACL_ERROR_RT_STREAM_SUBSCRIBE, "not by thread");
    ACL_FAILS(aclrtUnSubscribeHostFunc(me, t), ACL_ERROR_RT_STREAM_SUBSCRIBE, "not subscribed");
    /* A report subscription is not a host function one. */
    ACL_OK(aclrtSubscribeReport(me, t));
    ACL_FAILS(aclrtUnSubscribeHostFunc(me, t), ACL_ERROR_RT_STREAM_SUBSCRIBE, "not subscribed");
    ACL_OK(aclrtUnSubscribeReport(me, t));
    /* During a capture of a subscribed stream: refused, the capture goes
     * on; an unsubscribed stream's host function is captured. */
    ACL_OK(aclrtSubscribeHostFunc(me, t));
    ACL_OK(aclmdlRICaptureBegin(t, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_FAILS(aclrtLaunchHostFunc(t, note, &r), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, "captured");
    aclmdlRI model = NULL;
    ACL_OK(aclmdlRICaptureEnd(t, &model));
    ACL_OK(aclmdlRIDestroy(model));
    ACL_OK(aclrtUnSubscribeHostFunc(me, t));
    ACL_OK(aclmdlRICaptureBegin(t, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACL_OK(aclrtLaunchHostFunc(t, note, &r));
    ACL_OK(aclmdlRICaptureEnd(t, &model));
    atomic_store(&order, 0);
    ACL_OK(aclmdlRIExecuteAsync(model, t));
    ACL_OK(aclmdlRIExecuteAsync(model, t));
    ACL_OK(aclrtSynchronizeStream(t));
    assert_int_equal(atomic_load(&r.at), 2);
    ACL_OK(aclmdlRIDestroy(model));
    /* Destroyed and foreign streams. */
    ACL_OK(aclrtDestroyStream(t));
    ACL_FAILS(aclrtSubscribeHostFunc(me, t), ACL_ERROR_RT_PARAM_INVALID, "aclrtSubscribeHostFunc");
    ACL_FAILS(aclrtLaunchHostFunc(t, note, &r), ACL_ERROR_RT_PARAM_INVALID, "aclrtLaunchHostFunc");
    aclrtEvent e;
    ACL_OK(aclrtCreateEvent(&e));
    ACL_FAILS(aclrtSubscribeHostFunc(me, e), ACL_ERROR_RT_PARAM_INVALID, "aclrtSubscribeHostFunc");
    ACL_OK(aclrtDestroyEvent(e));
    /* A stream destroyed while subscribed is still unsubscribed. */
    ACL_OK(aclrtDestroyStream(s));
    ACL_OK(aclrtUnSubscribeHostFunc(me, s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        ACL_TEST(test_acl_host_func_runs_on_subscribed_thread_in_order),
        ACL_TEST(test_acl_host_func_holds_the_stream_and_is_its_own_kind),
        ACL_TEST(test_acl_unsubscribe_host_func_runs_queued_ones),
        ACL_TEST(test_acl_host_func_refusals),
    };
    return RT_RUN(tests);
}
