/* SPDX-License-Identifier: MIT */
/* Calls in flight and retired objects (src/core/calls.h): an object whose handle closed is
 * released once no call that may have found it is still running, and a call that finds its
 * handle destroyed under it works on a whole object. */
#include "core/calls.h"
#include "fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the mechanism, through the internal interface ---- */

static void count_release(void *obj) {
    atomic_fetch_add((atomic_int *)obj, 1);
}

/* rill__retire(count_release, obj, mode) from inside a call, as a destroy does. */
static void retire_in_call(atomic_int *obj, rill__retire_mode mode) {
    RILL_CALL_SCOPE();
    rill__retire(count_release, (void *)obj, mode);
}

/* A thread in a call until told to leave it; depth nested calls deep. */
typedef struct in_call {
    int depth;
    atomic_int inside;      /* set once in the call(s) */
    atomic_int leave_inner; /* leave the nested calls (not the outermost) */
    atomic_int leave;       /* leave the outermost call */
    atomic_int left_inner;
} in_call;

static void wait_flag(atomic_int *flag) {
    uint64_t deadline = rt_now_ns() + 10000000000ull;
    while (!atomic_load(flag) && rt_now_ns() < deadline)
        rt_sleep_us(100);
    assert_true(atomic_load(flag));
}

static void nested(in_call *c, int depth) {
    RILL_CALL_SCOPE();
    if (depth < c->depth) {
        nested(c, depth + 1);
        if (depth == 1)
            atomic_store(&c->left_inner, 1);
        return;
    }
    atomic_store(&c->inside, 1);
    wait_flag(&c->leave_inner);
}

static void *call_thread(void *arg) {
    in_call *c = arg;
    RILL_CALL_SCOPE();
    nested(c, 1);
    wait_flag(&c->leave);
    return NULL;
}

/* rill__retire with no other thread in a call releases at once. */
static void test_calls_retire_without_calls_in_flight_releases_at_once(void **state) {
    (void)state;
    RILL_CALL_SCOPE();
    atomic_int obj = 0;
    rill__retire(count_release, &obj, RILL__RETIRE_BATCHED);
    assert_int_equal(atomic_load(&obj), 1);
}

/* An object retired while another thread is in a call stays until that call, the outermost
 * one, returns; then the thread that leaves it releases the object (a prompt retire: the
 * barrier finds the thread in the call). */
static void test_calls_retired_object_waits_for_the_calls_in_flight(void **state) {
    (void)state;
    static in_call c;
    memset(&c, 0, sizeof c);
    c.depth = 3;
    static atomic_int obj;
    atomic_store(&obj, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_thread, &c), 0);
    wait_flag(&c.inside);
    retire_in_call(&obj, RILL__RETIRE_PROMPT);
    rt_sleep_us(2000);
    assert_int_equal(atomic_load(&obj), 0);
    /* Leaving nested calls is not leaving the call. */
    atomic_store(&c.leave_inner, 1);
    wait_flag(&c.left_inner);
    rt_sleep_us(2000);
    assert_int_equal(atomic_load(&obj), 0);
    atomic_store(&c.leave, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&obj), 1);
}

/* A call that begins after the retire cannot have found the object: it does not hold it. */
static void test_calls_begun_after_the_retire_do_not_hold_it(void **state) {
    (void)state;
    static in_call c;
    memset(&c, 0, sizeof c);
    c.depth = 1;
    atomic_int obj = 0;
    pthread_t t;
    {
        RILL_CALL_SCOPE();
        rill__retire(count_release, &obj, RILL__RETIRE_BATCHED);
    }
    assert_int_equal(atomic_load(&obj), 1);
    assert_int_equal(pthread_create(&t, NULL, call_thread, &c), 0);
    wait_flag(&c.inside);
    atomic_store(&c.leave_inner, 1);
    atomic_store(&c.leave, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&obj), 1);
}

/* A thread that made a call and now makes none: it waits outside any call until told to make
 * one more, then until told to exit. */
typedef struct idle_caller {
    atomic_int ready; /* its first call made */
    atomic_int call;  /* make one more */
    atomic_int called;
    atomic_int exit;
    atomic_int obj; /* what the test retires: counts its releases */
} idle_caller;

static void *idle_thread(void *arg) {
    idle_caller *c = arg;
    { RILL_CALL_SCOPE(); }
    atomic_store(&c->ready, 1);
    wait_flag(&c->call);
    { RILL_CALL_SCOPE(); }
    atomic_store(&c->called, 1);
    wait_flag(&c->exit);
    return NULL;
}

static pthread_t start_idle_caller(idle_caller *c) {
    memset(c, 0, sizeof *c);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, idle_thread, c), 0);
    wait_flag(&c->ready);
    return t;
}

static void stop_idle_caller(idle_caller *c, pthread_t t) {
    atomic_store(&c->call, 1);
    atomic_store(&c->exit, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* A batched retire issues no heavy barrier: another thread that has made calls is owed the
 * release until it leaves its next call; the next retire then releases the object. */
static void test_calls_batched_retire_waits_for_the_next_call_of_another_thread(void **state) {
    (void)state;
    static idle_caller c;
    pthread_t t = start_idle_caller(&c);
    uint64_t barriers = rill__call_heavy_barriers();
    uint64_t t0 = rt_now_ns();
    retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
    assert_int_equal(atomic_load(&c.obj), 0);
    atomic_store(&c.call, 1);
    wait_flag(&c.called);
    static atomic_int next;
    atomic_store(&next, 0);
    retire_in_call(&next, RILL__RETIRE_BATCHED);
    assert_int_equal(atomic_load(&c.obj), 1);
    /* Unless the machine paused the test for RILL__LIMBO_AGE_NS (the next retire then reads
     * the thread under a barrier), the thread owes the next one. */
    if (rt_now_ns() - t0 < RILL__LIMBO_AGE_NS) {
        assert_int_equal(atomic_load(&next), 0);
        assert_int_equal(rill__call_heavy_barriers(), barriers);
    }
    stop_idle_caller(&c, t);
    retire_in_call(&next, RILL__RETIRE_BATCHED);
    assert_int_equal(atomic_load(&next), 2); /* the thread exited */
}

/* Batched retires while another thread makes no calls share one heavy barrier per
 * RILL__LIMBO_BATCH: it finds the thread out of any call, and every object goes. */
static void test_calls_batched_retires_share_one_barrier(void **state) {
    (void)state;
    static idle_caller c;
    pthread_t t = start_idle_caller(&c);
    uint64_t barriers = rill__call_heavy_barriers();
    for (int i = 0; i < RILL__LIMBO_BATCH - 1; i++)
        retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
    /* Unless the machine paused the loop for RILL__LIMBO_AGE_NS, nothing went yet. */
    if (rill__call_heavy_barriers() == barriers) {
        assert_int_equal(atomic_load(&c.obj), 0);
        retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
        assert_int_equal(rill__call_heavy_barriers(), barriers + 1);
        assert_int_equal(atomic_load(&c.obj), RILL__LIMBO_BATCH);
    }
    stop_idle_caller(&c, t);
}

/* A batched retire that waited RILL__LIMBO_AGE_NS goes with the next retire's barrier. */
static void test_calls_old_batched_retire_goes_with_the_next(void **state) {
    (void)state;
    static idle_caller c;
    pthread_t t = start_idle_caller(&c);
    retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
    rt_sleep_us(RILL__LIMBO_AGE_NS / 1000 + 1000);
    uint64_t barriers = rill__call_heavy_barriers();
    retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
    assert_int_equal(rill__call_heavy_barriers(), barriers + 1);
    assert_int_equal(atomic_load(&c.obj), 2);
    stop_idle_caller(&c, t);
}

/* A prompt retire issues the barrier at once: with the other thread in no call, the object
 * goes before the retire returns. */
static void test_calls_prompt_retire_releases_at_once(void **state) {
    (void)state;
    static idle_caller c;
    pthread_t t = start_idle_caller(&c);
    uint64_t barriers = rill__call_heavy_barriers();
    retire_in_call(&c.obj, RILL__RETIRE_PROMPT);
    assert_int_equal(atomic_load(&c.obj), 1);
    assert_int_equal(rill__call_heavy_barriers(), barriers + 1);
    stop_idle_caller(&c, t);
}

/* A thread that exits owing releases checks in as it goes: the next retire, which has no
 * thread to wait for, releases the object too. */
static void test_calls_exiting_thread_checks_in(void **state) {
    (void)state;
    static idle_caller c;
    pthread_t t = start_idle_caller(&c);
    retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
    assert_int_equal(atomic_load(&c.obj), 0);
    atomic_store(&c.exit, 1);
    atomic_store(&c.call, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    retire_in_call(&c.obj, RILL__RETIRE_BATCHED);
    assert_int_equal(atomic_load(&c.obj), 2);
}

/* ---- through the public interface ---- */

typedef struct waiter {
    rill_event *event;
    rill_stream *stream;
    atomic_int started;
    _Atomic(rill__call_rec *) rec; /* the waiting thread's record */
    rill_status status;
} waiter;

/* The waiting thread's record, for the test to see it park. */
static void publish_record(waiter *w) {
    { RILL_CALL_SCOPE(); }
    atomic_store(&w->rec, rill__call_self);
    atomic_store(&w->started, 1);
}

static void *sync_event(void *arg) {
    waiter *w = arg;
    publish_record(w);
    w->status = rill_event_synchronize(w->event);
    return NULL;
}

static void *sync_stream(void *arg) {
    waiter *w = arg;
    publish_record(w);
    w->status = rill_stream_synchronize(w->stream);
    return NULL;
}

/* Waits until w's thread sleeps parked in its wait. */
static void wait_parked(waiter *w) {
    wait_flag(&w->started);
    rill__call_rec *r = atomic_load(&w->rec);
    uint64_t deadline = rt_now_ns() + 10000000000ull;
    while (!atomic_load(&r->parked) && rt_now_ns() < deadline)
        rt_sleep_us(100);
    assert_true(atomic_load(&r->parked));
}

/* A stream whose work a gate holds, an event recorded after that work, and a thread waiting on
 * each: one in rill_event_synchronize, one in rill_stream_synchronize. */
typedef struct gated_waits {
    rt_gate gate;
    rill_stream *stream;
    rill_event *event;
    waiter on_event, on_stream;
    pthread_t a, b;
} gated_waits;

/* Starts g's waits once a worker runs the gate: they cannot run it themselves, and sleep
 * (parked) until it opens. */
static void gated_waits_start(gated_waits *g, unsigned event_flags) {
    memset(g, 0, sizeof *g);
    rt_gate_reset(&g->gate);
    RT_OK(rill_stream_create(NULL, 0, &g->stream));
    RT_OK(rill_event_create(event_flags, &g->event));
    RT_OK(rill_launch_host_func(g->stream, rt_gate_fn, &g->gate));
    RT_OK(rill_event_record(g->event, g->stream));
    assert_true(rt_gate_wait_entered(&g->gate));
    g->on_event.event = g->event;
    g->on_stream.stream = g->stream;
    assert_int_equal(pthread_create(&g->a, NULL, sync_event, &g->on_event), 0);
    assert_int_equal(pthread_create(&g->b, NULL, sync_stream, &g->on_stream), 0);
    wait_parked(&g->on_event);
    wait_parked(&g->on_stream);
}

/* Opens the gate; both waits return RILL_OK. */
static void gated_waits_finish(gated_waits *g) {
    rt_gate_open(&g->gate);
    assert_int_equal(pthread_join(g->a, NULL), 0);
    assert_int_equal(pthread_join(g->b, NULL), 0);
    assert_false(atomic_load(&g->gate.timed_out));
    RT_OK(g->on_event.status);
    RT_OK(g->on_stream.status);
    assert_false(atomic_load(&g->on_event.rec)->parked);
    assert_false(atomic_load(&g->on_stream.rec)->parked);
    assert_null(atomic_load(&g->on_stream.rec)->hold); /* dropped as the call returned */
}

/* rill.h: a call that races with the destruction of its handle behaves as if it came first.
 * The event and the stream that two threads sleep on are destroyed, and released meanwhile (a
 * prompt retire's barrier finds the sleeping calls parked): the waits hold what they use after
 * the wait, and return RILL_OK once the work is done (AddressSanitizer: without a use of the
 * freed stream). */
static void test_calls_waits_outlive_the_destroy_of_what_they_wait_on(void **state) {
    (void)state;
    static gated_waits g;
    gated_waits_start(&g, RILL_EVENT_DEFAULT);
    /* rill_stream_synchronize holds its stream while it sleeps; rill_event_synchronize needs no
     * hold (its snapshot of the event holds the stream). parked was stored after hold. */
    assert_non_null(atomic_load(&g.on_stream.rec)->hold);
    assert_null(atomic_load(&g.on_event.rec)->hold);
    RT_OK(rill_event_destroy(g.event));
    RT_OK(rill_stream_destroy(g.stream));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_query(g.event));
    static atomic_int prompt;
    atomic_store(&prompt, 0);
    retire_in_call(&prompt, RILL__RETIRE_PROMPT);
    assert_int_equal(atomic_load(&prompt), 1);
    gated_waits_finish(&g);
    RT_OK(rill_device_synchronize(NULL));
}

/* Threads asleep in rill_event_synchronize (a blocking-sync event) and rill_stream_synchronize
 * park their calls: objects that another thread destroys meanwhile go with their batch's barrier
 * instead of waiting for the waits to return, and a prompt retire goes at once. */
static void test_calls_sleeping_waits_do_not_hold_back_releases(void **state) {
    (void)state;
    static gated_waits g;
    gated_waits_start(&g, RILL_EVENT_BLOCKING_SYNC);
    static atomic_int batched, prompt;
    atomic_store(&batched, 0);
    atomic_store(&prompt, 0);
    uint64_t barriers = rill__call_heavy_barriers();
    for (int i = 0; i < RILL__LIMBO_BATCH; i++)
        retire_in_call(&batched, RILL__RETIRE_BATCHED);
    assert_true(rill__call_heavy_barriers() > barriers);
    retire_in_call(&prompt, RILL__RETIRE_PROMPT);
    assert_int_equal(atomic_load(&prompt), 1);
    assert_int_equal(atomic_load(&batched), RILL__LIMBO_BATCH);
    /* The gate is shut: the threads still sleep in their calls. */
    assert_true(atomic_load(&g.on_event.rec)->parked);
    assert_true(atomic_load(&g.on_stream.rec)->parked);
    gated_waits_finish(&g);
    RT_OK(rill_event_destroy(g.event));
    RT_OK(rill_stream_destroy(g.stream));
}

static void destroy_own_stream(void *stream) {
    if (rill_stream_destroy(stream) != RILL_OK)
        abort();
}

/* A host function that destroys its own stream, which the thread that runs it may be waiting on
 * (a waiting thread runs the work itself when no worker took it): the wait returns RILL_OK, and
 * the stream goes once it has (AddressSanitizer: without a use of the freed stream). */
static void test_calls_host_function_destroys_the_stream_its_runner_waits_on(void **state) {
    (void)state;
    for (int i = 0; i < 200; i++) {
        rill_stream *s;
        RT_OK(rill_stream_create(NULL, 0, &s));
        RT_OK(rill_launch_host_func(s, destroy_own_stream, s));
        if (i % 2 == 0)
            rt_sleep_us(200); /* the workers may go to sleep: then this thread runs it */
        rill_status st = rill_stream_synchronize(s);
        /* OK, or refused once the host function destroyed it before the call looked it up. */
        assert_true(st == RILL_OK || st == RILL_ERROR_INVALID_ARGUMENT);
    }
    RT_OK(rill_device_synchronize(NULL));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_retire_without_calls_in_flight_releases_at_once),
        cmocka_unit_test(test_calls_retired_object_waits_for_the_calls_in_flight),
        cmocka_unit_test(test_calls_begun_after_the_retire_do_not_hold_it),
        cmocka_unit_test(test_calls_batched_retire_waits_for_the_next_call_of_another_thread),
        cmocka_unit_test(test_calls_batched_retires_share_one_barrier),
        cmocka_unit_test(test_calls_old_batched_retire_goes_with_the_next),
        cmocka_unit_test(test_calls_prompt_retire_releases_at_once),
        cmocka_unit_test(test_calls_exiting_thread_checks_in),
        cmocka_unit_test(test_calls_waits_outlive_the_destroy_of_what_they_wait_on),
        cmocka_unit_test(test_calls_host_function_destroys_the_stream_its_runner_waits_on),
        cmocka_unit_test(test_calls_sleeping_waits_do_not_hold_back_releases),
    };
    return RT_RUN(tests);
}
