/* SPDX-License-Identifier: MIT */
/* Events: flags, record/query/synchronize, re-recording, elapsed time and its statuses, blocking
 * sync, tags, destroy with a pending record, a waiting stream destroyed once done and failed
 * recorded work.
 *
 * Work on the device reports through atomics; only the test's main thread asserts. Every wait
 * has a deadline. */
#include "fixture.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#define SEC_NS          1000000000ull
#define WAIT_TIMEOUT_NS (10 * SEC_NS)

/* Polls rill_event_query until it returns RILL_OK (or the deadline passes); returns the last
 * status seen. */
static rill_status query_until_ok(rill_event *e) {
    uint64_t deadline = rt_now_ns() + WAIT_TIMEOUT_NS;
    rill_status st;
    while ((st = rill_event_query(e)) == RILL_NOT_READY && rt_now_ns() < deadline)
        sched_yield();
    return st;
}

typedef struct spin_args {
    unsigned us;
} spin_args;

static void spin_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    spin_args a;
    memcpy(&a, args, sizeof a);
    rt_spin_us(a.us);
}

static rill_kernel *make_kernel(const char *name, rill_cpu_kernel_fn fn) {
    rill_kernel_desc desc = {.name = name, .cpu = fn};
    rill_kernel *kernel = NULL;
    RT_OK(rill_kernel_create(&desc, &kernel));
    assert_non_null(kernel);
    return kernel;
}

static rill_status launch_spin(rill_stream *s, rill_kernel *k, unsigned us) {
    spin_args a = {us};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    return rill_launch_kernel(s, k, &launch);
}

static rill_stream *new_stream(void) {
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    assert_non_null(s);
    return s;
}

static rill_event *new_event(unsigned flags) {
    rill_event *e = NULL;
    RT_OK(rill_event_create(flags, &e));
    assert_non_null(e);
    return e;
}

/* ---- creation ---- */

/* "Whoever creates a handle destroys it"; every valid flag combination creates an event. */
static void test_event_create_valid_flags(void **state) {
    (void)state;
    const unsigned valid[] = {
        RILL_EVENT_DEFAULT,
        RILL_EVENT_TIMING,
        RILL_EVENT_BLOCKING_SYNC,
        RILL_EVENT_TIMING | RILL_EVENT_BLOCKING_SYNC,
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        rill_event *e = new_event(valid[i]);
        RT_OK(rill_event_destroy(e));
    }
}

/* RILL_EVENT_INTERPROCESS: "not with TIMING"; RILL_ERROR_INVALID_ARGUMENT: "bad flag"; a failed
 * create leaves the out-parameter NULL. */
static void test_event_create_invalid_flags_is_invalid_argument(void **state) {
    (void)state;
    const unsigned invalid[] = {
        RILL_EVENT_INTERPROCESS | RILL_EVENT_TIMING,
        RILL_EVENT_INTERPROCESS | RILL_EVENT_TIMING | RILL_EVENT_BLOCKING_SYNC,
        1u << 3,
        1u << 31,
        RILL_EVENT_TIMING | (1u << 7),
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        rill_event *e = (rill_event *)&e;
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_create(invalid[i], &e));
        assert_null(e);
    }
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_create(RILL_EVENT_DEFAULT, NULL));
}

/* RILL_ERROR_INVALID_ARGUMENT: "NULL where a value is needed". */
static void test_event_null_arguments_are_invalid(void **state) {
    (void)state;
    rill_event *e = new_event(RILL_EVENT_TIMING);
    float ms = 1.0f;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_record(NULL, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_query(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_synchronize(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_elapsed_ms(NULL, e, &ms));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_elapsed_ms(e, NULL, &ms));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_elapsed_ms(e, e, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_destroy(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_get_tagged("ev-tag", NULL));
    rill_event *tagged = (rill_event *)&tagged;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_get_tagged(NULL, &tagged));
    assert_null(tagged);
    RT_OK(rill_event_destroy(e));
}

/* ---- record, query, synchronize ---- */

/* rill_event_query: "RILL_OK when ... the event was never recorded"; synchronize returns at
 * once. */
static void test_event_query_unrecorded_is_ok(void **state) {
    (void)state;
    rill_event *e = new_event(RILL_EVENT_DEFAULT);
    RT_OK(rill_event_query(e));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_event_destroy(e));
    rill_event *b = new_event(RILL_EVENT_BLOCKING_SYNC);
    RT_OK(rill_event_query(b));
    RT_OK(rill_event_synchronize(b));
    RT_OK(rill_event_destroy(b));
}

/* rill_event_record: "Captures the work submitted to stream so far"; query: "RILL_OK when the
 * recorded work has completed ..., else RILL_NOT_READY"; synchronize waits for it. */
static void test_event_record_query_synchronize(void **state) {
    (void)state;
    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *s = new_stream();
    rill_event *e = new_event(RILL_EVENT_DEFAULT);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_event_record(e, s));
    rill_status pending = rill_event_query(e);
    rt_gate_open(&g);
    RT_OK(rill_event_synchronize(e));
    bool done_at_sync = atomic_load(&g.done) != 0;

    assert_int_equal(pending, RILL_NOT_READY);
    assert_true(done_at_sync);
    assert_false(atomic_load(&g.timed_out));
    RT_OK(rill_event_query(e));

    /* A record on an idle stream completes without further work. */
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_record(e, s));
    RT_OK(query_until_ok(e));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

/* "A NULL rill_stream* means the calling thread's current stream": recording with NULL captures
 * the current stream's work. */
static void test_event_record_null_stream_uses_current(void **state) {
    (void)state;
    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *s = new_stream();
    rill_event *e = new_event(RILL_EVENT_DEFAULT);
    rill_stream *prev = rill_set_current_stream(s);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    rill_status recorded = rill_event_record(e, NULL);
    rill_status pending = rill_event_query(e);
    rt_gate_open(&g);
    rill_set_current_stream(prev);
    assert_int_equal(recorded, RILL_OK);
    assert_int_equal(pending, RILL_NOT_READY);
    RT_OK(rill_event_synchronize(e));
    assert_true(atomic_load(&g.done));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

/* rill_event_record: "re-recording moves the event to the new point for later waits and
 * queries", both to an earlier-completing point on another stream and to a later point. */
static void test_event_rerecord_moves_point(void **state) {
    (void)state;
    static rt_gate g1, g2;
    rt_gate_reset(&g1);
    rt_gate_reset(&g2);
    rill_stream *a = new_stream();
    rill_stream *b = new_stream();
    rill_event *e = new_event(RILL_EVENT_DEFAULT);

    RT_OK(rill_launch_host_func(a, rt_gate_fn, &g1));
    RT_OK(rill_event_record(e, a));
    rill_status on_blocked = rill_event_query(e);
    RT_OK(rill_event_record(e, b)); /* b is idle: the new point completes while a is blocked */
    rill_status on_idle = query_until_ok(e);
    bool a_still_blocked = atomic_load(&g1.done) == 0;
    rt_gate_open(&g1);
    RT_OK(rill_stream_synchronize(a));

    RT_OK(rill_launch_host_func(a, rt_gate_fn, &g2));
    RT_OK(rill_event_query(e));     /* still the completed point on b */
    RT_OK(rill_event_record(e, a)); /* moves behind g2 */
    rill_status moved_later = rill_event_query(e);
    rt_gate_open(&g2);
    RT_OK(rill_event_synchronize(e));
    bool g2_done = atomic_load(&g2.done) != 0;

    assert_int_equal(on_blocked, RILL_NOT_READY);
    assert_int_equal(on_idle, RILL_OK);
    assert_true(a_still_blocked);
    assert_int_equal(moved_later, RILL_NOT_READY);
    assert_true(g2_done);
    assert_false(atomic_load(&g1.timed_out));
    assert_false(atomic_load(&g2.timed_out));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

static void slow_done_fn(void *user_data) {
    rt_spin_us(20000);
    atomic_store((atomic_int *)user_data, 1);
}

/* RILL_EVENT_BLOCKING_SYNC: "host waits sleep instead of spinning"; they still wait for the
 * recorded work, and such an event can also time. */
static void test_event_blocking_sync_waits(void **state) {
    (void)state;
    static atomic_int done;
    atomic_store(&done, 0);
    rill_stream *s = new_stream();
    rill_event *start = new_event(RILL_EVENT_BLOCKING_SYNC | RILL_EVENT_TIMING);
    rill_event *end = new_event(RILL_EVENT_BLOCKING_SYNC | RILL_EVENT_TIMING);
    RT_OK(rill_event_record(start, s));
    RT_OK(rill_launch_host_func(s, slow_done_fn, &done));
    RT_OK(rill_event_record(end, s));
    RT_OK(rill_event_synchronize(end));
    assert_int_equal(atomic_load(&done), 1);
    RT_OK(rill_event_query(end));
    RT_OK(rill_event_synchronize(start));
    float ms = 0.0f;
    RT_OK(rill_event_elapsed_ms(start, end, &ms));
    assert_true(ms >= 15.0f);

    /* Many blocking waits in a row on short work. */
    for (int i = 0; i < 100; i++) {
        RT_OK(rill_event_record(start, s));
        RT_OK(rill_event_synchronize(start));
    }
    RT_OK(rill_event_destroy(start));
    RT_OK(rill_event_destroy(end));
    RT_OK(rill_stream_destroy(s));
}

/* ---- elapsed time ---- */

/* rill_event_elapsed_ms: "Milliseconds between two completed records": a ~2 ms kernel between
 * them measures between 1.5 ms and a generous 200 ms. */
static void test_event_elapsed_ms_measures_work(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("spin_kernel", spin_kernel);
    rill_stream *s = new_stream();
    rill_event *start = new_event(RILL_EVENT_TIMING);
    rill_event *end = new_event(RILL_EVENT_TIMING);
    RT_OK(rill_event_record(start, s));
    RT_OK(launch_spin(s, k, 2000));
    RT_OK(rill_event_record(end, s));
    RT_OK(rill_event_synchronize(end));
    float ms = -1.0f;
    RT_OK(rill_event_elapsed_ms(start, end, &ms));
    if (!(ms >= 1.5f && ms <= 200.0f))
        fail_msg("elapsed %f ms around a 2 ms kernel", (double)ms);
    RT_OK(rill_event_destroy(start));
    RT_OK(rill_event_destroy(end));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* rill_event_elapsed_ms: "with at least microsecond resolution": a ~50 us kernel between the
 * records gives a non-zero result well under 10 ms. */
static void test_event_elapsed_ms_has_microsecond_resolution(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("spin_kernel", spin_kernel);
    rill_stream *s = new_stream();
    rill_event *start = new_event(RILL_EVENT_TIMING);
    rill_event *end = new_event(RILL_EVENT_TIMING);
    RT_OK(rill_event_record(start, s));
    RT_OK(launch_spin(s, k, 50));
    RT_OK(rill_event_record(end, s));
    RT_OK(rill_event_synchronize(end));
    float ms = -1.0f;
    RT_OK(rill_event_elapsed_ms(start, end, &ms));
    if (!(ms > 0.0f && ms < 10.0f))
        fail_msg("elapsed %f ms around a 50 us kernel", (double)ms);
    RT_OK(rill_event_destroy(start));
    RT_OK(rill_event_destroy(end));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* RILL_ERROR_TIMING_DISABLED: "elapsed time of an event created without RILL_EVENT_TIMING",
 * either end; the result is left zero. */
static void test_event_elapsed_without_timing_is_timing_disabled(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *plain1 = new_event(RILL_EVENT_DEFAULT);
    rill_event *plain2 = new_event(RILL_EVENT_BLOCKING_SYNC);
    rill_event *timed = new_event(RILL_EVENT_TIMING);
    RT_OK(rill_event_record(plain1, s));
    RT_OK(rill_event_record(timed, s));
    RT_OK(rill_event_record(plain2, s));
    RT_OK(rill_stream_synchronize(s));
    float ms = 7.0f;
    RT_STATUS(RILL_ERROR_TIMING_DISABLED, rill_event_elapsed_ms(plain1, plain2, &ms));
    assert_true(ms == 0.0f);
    ms = 7.0f;
    RT_STATUS(RILL_ERROR_TIMING_DISABLED, rill_event_elapsed_ms(plain1, timed, &ms));
    assert_true(ms == 0.0f);
    ms = 7.0f;
    RT_STATUS(RILL_ERROR_TIMING_DISABLED, rill_event_elapsed_ms(timed, plain2, &ms));
    assert_true(ms == 0.0f);
    RT_OK(rill_event_destroy(plain1));
    RT_OK(rill_event_destroy(plain2));
    RT_OK(rill_event_destroy(timed));
    RT_OK(rill_stream_destroy(s));
}

/* RILL_ERROR_NOT_RECORDED: "elapsed time of an event never recorded", either end. */
static void test_event_elapsed_unrecorded_is_not_recorded(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *recorded = new_event(RILL_EVENT_TIMING);
    rill_event *never = new_event(RILL_EVENT_TIMING);
    RT_OK(rill_event_record(recorded, s));
    RT_OK(rill_event_synchronize(recorded));
    float ms = 7.0f;
    RT_STATUS(RILL_ERROR_NOT_RECORDED, rill_event_elapsed_ms(recorded, never, &ms));
    assert_true(ms == 0.0f);
    ms = 7.0f;
    RT_STATUS(RILL_ERROR_NOT_RECORDED, rill_event_elapsed_ms(never, recorded, &ms));
    assert_true(ms == 0.0f);
    rill_event *never2 = new_event(RILL_EVENT_TIMING);
    RT_STATUS(RILL_ERROR_NOT_RECORDED, rill_event_elapsed_ms(never, never2, &ms));
    RT_OK(rill_event_destroy(recorded));
    RT_OK(rill_event_destroy(never));
    RT_OK(rill_event_destroy(never2));
    RT_OK(rill_stream_destroy(s));
}

/* rill_event_elapsed_ms: "RILL_NOT_READY when either is still pending"; once both complete the
 * same call succeeds. */
static void test_event_elapsed_pending_is_not_ready(void **state) {
    (void)state;
    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *s = new_stream();
    rill_event *start = new_event(RILL_EVENT_TIMING);
    rill_event *end = new_event(RILL_EVENT_TIMING);
    RT_OK(rill_event_record(start, s));
    RT_OK(rill_event_synchronize(start));
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_event_record(end, s));
    float ms = 7.0f;
    rill_status pending_end = rill_event_elapsed_ms(start, end, &ms);
    float ms_pending = ms;
    rt_gate_open(&g);
    RT_OK(rill_event_synchronize(end));
    assert_int_equal(pending_end, RILL_NOT_READY);
    assert_true(ms_pending == 0.0f);
    RT_OK(rill_event_elapsed_ms(start, end, &ms));
    assert_true(ms > 0.0f);

    /* A pending start is not ready either. */
    static rt_gate g2;
    rt_gate_reset(&g2);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g2));
    RT_OK(rill_event_record(start, s));
    rill_status pending_start = rill_event_elapsed_ms(start, end, &ms);
    rt_gate_open(&g2);
    RT_OK(rill_event_synchronize(start));
    assert_int_equal(pending_start, RILL_NOT_READY);
    assert_false(atomic_load(&g.timed_out));
    assert_false(atomic_load(&g2.timed_out));
    RT_OK(rill_event_destroy(start));
    RT_OK(rill_event_destroy(end));
    RT_OK(rill_stream_destroy(s));
}

/* ---- tags ---- */

/* rill_event_get_tagged: "The same tag always names the same event"; different tags name
 * different events, and a tagged event records and waits like any other. */
static void test_event_tagged_same_tag_same_event(void **state) {
    (void)state;
    rill_event *a1 = NULL, *a2 = NULL, *b = NULL;
    RT_OK(rill_event_get_tagged("ev-a", &a1));
    char copy[] = "ev-a";
    RT_OK(rill_event_get_tagged(copy, &a2));
    RT_OK(rill_event_get_tagged("ev-b", &b));
    assert_non_null(a1);
    assert_ptr_equal(a1, a2);
    assert_ptr_not_equal(a1, b);

    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *s = new_stream();
    RT_OK(rill_event_query(a1));
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_event_record(a1, s));
    rill_status pending = rill_event_query(a2);
    rt_gate_open(&g);
    RT_OK(rill_event_synchronize(a2));
    assert_int_equal(pending, RILL_NOT_READY);
    assert_true(atomic_load(&g.done));
    RT_OK(rill_stream_destroy(s));
}

/* ---- lifetime and failures ---- */

typedef struct delayed_open {
    rt_gate *g;
    atomic_int *go;
} delayed_open;

/* Opens the gate shortly after the main thread announces the destroy, so the test passes
 * whether rill_event_destroy returns at once or waits for the work. */
static void *delayed_open_fn(void *arg) {
    delayed_open *d = arg;
    uint64_t deadline = rt_now_ns() + WAIT_TIMEOUT_NS;
    while (!atomic_load(d->go) && rt_now_ns() < deadline)
        sched_yield();
    rt_sleep_us(20000);
    rt_gate_open(d->g);
    return NULL;
}

/* "Destroying a stream, event or graph exec with work still pending is allowed: the work
 * finishes, then the resources are released." */
static void test_event_destroy_with_pending_record(void **state) {
    (void)state;
    static rt_gate g;
    static atomic_int go;
    rt_gate_reset(&g);
    atomic_store(&go, 0);
    rill_stream *s = new_stream();
    rill_event *e = new_event(RILL_EVENT_TIMING);
    rill_stream *waiter = new_stream();
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_stream_wait_event(waiter, e));

    delayed_open d = {&g, &go};
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, delayed_open_fn, &d), 0);
    atomic_store(&go, 1);
    rill_status destroyed = rill_event_destroy(e);
    rill_status synced = rill_stream_synchronize(waiter);
    assert_int_equal(pthread_join(opener, NULL), 0);

    assert_int_equal(destroyed, RILL_OK);
    assert_int_equal(synced, RILL_OK);
    assert_true(atomic_load(&g.done));
    assert_false(atomic_load(&g.timed_out));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(waiter));
}

/* A stream whose wait another stream's worker met is destroyed as soon as its work is done: the
 * worker that made it ready must not touch it afterwards (ThreadSanitizer and AddressSanitizer
 * see it when it does). Several rounds, each with a fresh waiting stream. */
static void test_event_waiting_stream_destroyed_once_done(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("spin", spin_kernel);
    rill_stream *s = new_stream();
    rill_event *e = new_event(0);
    for (int round = 0; round < 20; round++) {
        rill_stream *waiter = new_stream();
        RT_OK(launch_spin(s, k, 200)); /* the waiter parks before the record completes */
        RT_OK(rill_event_record(e, s));
        RT_OK(rill_stream_wait_event(waiter, e));
        RT_OK(launch_spin(waiter, k, 0));
        RT_OK(rill_stream_synchronize(waiter));
        RT_OK(rill_stream_destroy(waiter));
    }
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

typedef struct fail_args {
    const char *message;
} fail_args;

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    fail_args a;
    memcpy(&a, args, sizeof a);
    rill_kernel_fail(ctx, a.message);
}

/* Sticky errors: the recorded work failed, so waiting for it from the host reports
 * RILL_ERROR_KERNEL_FAILED with the kernel's message. */
static void test_event_synchronize_on_failed_work_is_kernel_failed(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("fail_kernel", fail_kernel);
    rill_stream *s = new_stream();
    RT_OK(rill_stream_set_name(s, "event-fail-stream"));
    rill_event *e = new_event(RILL_EVENT_DEFAULT);
    fail_args a = {"event-saw-failure"};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, k, &launch));
    RT_OK(rill_event_record(e, s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_event_synchronize(e));
    assert_non_null(strstr(rill_last_error(), "event-saw-failure"));

    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_create_valid_flags),
        cmocka_unit_test(test_event_create_invalid_flags_is_invalid_argument),
        cmocka_unit_test(test_event_null_arguments_are_invalid),
        cmocka_unit_test(test_event_query_unrecorded_is_ok),
        cmocka_unit_test(test_event_record_query_synchronize),
        cmocka_unit_test(test_event_record_null_stream_uses_current),
        cmocka_unit_test(test_event_rerecord_moves_point),
        cmocka_unit_test(test_event_blocking_sync_waits),
        cmocka_unit_test(test_event_elapsed_ms_measures_work),
        cmocka_unit_test(test_event_elapsed_ms_has_microsecond_resolution),
        cmocka_unit_test(test_event_elapsed_without_timing_is_timing_disabled),
        cmocka_unit_test(test_event_elapsed_unrecorded_is_not_recorded),
        cmocka_unit_test(test_event_elapsed_pending_is_not_ready),
        cmocka_unit_test(test_event_tagged_same_tag_same_event),
        cmocka_unit_test(test_event_destroy_with_pending_record),
        cmocka_unit_test(test_event_waiting_stream_destroyed_once_done),
        cmocka_unit_test(test_event_synchronize_on_failed_work_is_kernel_failed),
    };
    return RT_RUN(tests);
}
