/* SPDX-License-Identifier: MIT */
/* Queue bounds (rill.h, "Queue bounds"): a thread that submits faster than
 * the device runs waits once its stream's or device's queue is full, and
 * resumes as the device drains; nothing is lost or reordered; the waits
 * that could be the thread's own deadlock (inside a host function, during
 * a capture, behind a gate the thread itself opens later) do not happen or
 * end. Kernels and host functions report through atomics; only the main
 * thread asserts. */
#include "fixture.h"

#include "core/stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ---- helpers ---- */

/* Commands of s submitted and not completed. */
static uint64_t pending_of(rill_stream *h) {
    rill__stream *s = NULL;
    assert_int_equal(rill__stream_resolve(h, "test", &s), RILL_OK);
    return atomic_load(&s->q.sub_seq) - atomic_load(&s->q.done_seq);
}

/* The kernels of a test run in order: each checks that it is the next. */
static _Atomic uint64_t next_index;
static atomic_int out_of_order;

static void ordered_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    uint64_t i;
    memcpy(&i, args, sizeof i);
    if (atomic_load(&next_index) != i)
        atomic_store(&out_of_order, 1);
    atomic_store(&next_index, i + 1);
}

static void ordered_host(void *arg) {
    uint64_t i = (uint64_t)(uintptr_t)arg;
    if (atomic_load(&next_index) != i)
        atomic_store(&out_of_order, 1);
    atomic_store(&next_index, i + 1);
}

static void slow_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    rt_spin_us(50000);
}

static rill_kernel *ordered(void) {
    rill_kernel_desc desc = {.name = "ordered", .cpu = ordered_kernel};
    rill_kernel *k = NULL;
    RT_OK(rill_kernel_create(&desc, &k));
    return k;
}

/* Launches ordered kernel number i, its arguments args_size bytes (at
 * least 8: the number, then padding). */
static rill_status launch_ordered(rill_stream *s, rill_kernel *k, uint64_t i, size_t args_size) {
    unsigned char args[8192] = {0};
    memcpy(args, &i, sizeof i);
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = args, .args_size = args_size};
    return rill_launch_kernel(s, k, &l);
}

static size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f != NULL) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static int setup(void **state) {
    (void)state;
    atomic_store(&next_index, 0);
    atomic_store(&out_of_order, 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return rt_teardown_shutdown(state);
}

/* ---- the bound holds ---- */

/* "A stream holds at most `commands` commands submitted and not yet
 * completed (default 1024 ...)": a million kernels behind a slow first one
 * never have more than the bound queued, take far less memory than they
 * would all queued at once, and all run, in order. */
static void test_stream_holds_at_most_its_bound_and_loses_nothing(void **state) {
    (void)state;
    const uint64_t n = SANITIZED ? 100000 : 1000000;
    size_t commands = 0, bytes = 0;
    RT_OK(rill_get_queue_limit(NULL, &commands, &bytes));
    assert_true(commands > 0 && commands < n / 16);
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    rill_kernel *k = ordered();
    rill_kernel_desc desc = {.name = "slow", .cpu = slow_kernel};
    rill_kernel *slow = NULL;
    RT_OK(rill_kernel_create(&desc, &slow));
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    RT_OK(rill_launch_kernel(s, slow, &l)); /* the queue fills behind it */
    size_t rss0 = rss_bytes();
    uint64_t most = 0;
    for (uint64_t i = 0; i < n; i++) {
        RT_OK(launch_ordered(s, k, i, sizeof i));
        uint64_t p = pending_of(s);
        if (p > most)
            most = p;
    }
    size_t grown = rss_bytes() - rss0;
    RT_OK(rill_stream_synchronize(s));
    printf("# %llu kernels: at most %llu queued (bound %zu), RSS grew %zu KiB\n",
           (unsigned long long)n, (unsigned long long)most, commands, grown / 1024);
    assert_true(most <= commands);
    assert_int_equal(atomic_load(&next_index), n);
    assert_int_equal(atomic_load(&out_of_order), 0);
    /* All queued at once, they would take n slots of some hundred bytes
     * (the code before the bounds: 30 MB for a million). Under the
     * sanitizers RSS counts their shadow memory and quarantine too: the
     * count of queued commands above is the measure there. */
    if (!SANITIZED)
        assert_true(grown < n * 64);
    RT_OK(rill_kernel_destroy(slow));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
}

/* ---- a blocked submit resumes ---- */

typedef struct submitter {
    rill_stream *s;
    rill_kernel *k;
    uint64_t n;
    size_t args_size;
    _Atomic uint64_t launched;
    atomic_int failed;
} submitter;

static void *submit_all(void *arg) {
    submitter *t = arg;
    for (uint64_t i = 0; i < t->n; i++) {
        if (launch_ordered(t->s, t->k, i, t->args_size) != RILL_OK) {
            atomic_store(&t->failed, 1);
            break;
        }
        atomic_store(&t->launched, i + 1);
    }
    return NULL;
}

/* Waits until t's count stays put for 50 ms (its thread is blocked) or
 * everything is launched; returns the count. */
static uint64_t settled_count(submitter *t) {
    uint64_t last = UINT64_MAX, since = rt_now_ns();
    for (;;) {
        uint64_t now_count = atomic_load(&t->launched);
        if (now_count == t->n)
            return now_count;
        if (now_count != last) {
            last = now_count;
            since = rt_now_ns();
        } else if (rt_now_ns() - since > 50000000u) {
            return now_count;
        }
        rt_sleep_us(1000);
    }
}

/* "... and finds a bound reached blocks until the device has run that
 * stream ... down to half of it": a thread submitting behind a kernel that
 * does not end stops at the bound, and goes on once the kernel ends. */
static void test_submit_blocked_on_full_queue_resumes_when_device_drains(void **state) {
    (void)state;
    RT_OK(rill_set_queue_limit(64, 0));
    submitter t = {.n = 1000, .args_size = 8};
    RT_OK(rill_stream_create(NULL, 0, &t.s));
    t.k = ordered();
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rt_launch_gate_kernel(t.s, &gate));
    assert_true(rt_gate_wait_entered(&gate)); /* on a worker, not on a waiting thread */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, submit_all, &t), 0);
    uint64_t blocked_at = settled_count(&t);
    uint64_t pending = pending_of(t.s);
    rt_gate_open(&gate);
    assert_int_equal(pthread_join(th, NULL), 0);
    RT_OK(rill_stream_synchronize(t.s));
    printf("# blocked after %llu of %llu launches, %llu queued\n", (unsigned long long)blocked_at,
           (unsigned long long)t.n, (unsigned long long)pending);
    assert_true(blocked_at < t.n);
    assert_true(pending <= 64);
    assert_int_equal(atomic_load(&t.failed), 0);
    assert_int_equal(atomic_load(&t.launched), t.n);
    assert_int_equal(atomic_load(&next_index), t.n);
    assert_int_equal(atomic_load(&out_of_order), 0);
    RT_OK(rill_kernel_destroy(t.k));
    RT_OK(rill_stream_destroy(t.s));
}

/* "... and a device's streams together hold at most `bytes` of host memory
 * in queued commands (each command's slot, and a kernel's arguments and
 * access list in full when they pass 192 bytes ...)": kernels with 4 KiB
 * of arguments stop at the device's bound, far below the stream's. */
static void test_device_bound_counts_large_arguments(void **state) {
    (void)state;
    const size_t bound = 64 * 1024, args = 4096;
    RT_OK(rill_set_queue_limit(100000, bound));
    size_t commands = 0, bytes = 0;
    RT_OK(rill_get_queue_limit(NULL, &commands, &bytes));
    assert_int_equal(commands, 100000);
    assert_int_equal(bytes, bound);
    submitter t = {.n = 1000, .args_size = args};
    RT_OK(rill_stream_create(NULL, 0, &t.s));
    t.k = ordered();
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rt_launch_gate_kernel(t.s, &gate));
    assert_true(rt_gate_wait_entered(&gate));
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, submit_all, &t), 0);
    uint64_t blocked_at = settled_count(&t);
    rt_gate_open(&gate);
    assert_int_equal(pthread_join(th, NULL), 0);
    RT_OK(rill_stream_synchronize(t.s));
    printf("# blocked after %llu launches of %zu-byte arguments (bound %zu bytes)\n",
           (unsigned long long)blocked_at, args, bound);
    assert_true(blocked_at <= bound / args + 1);
    assert_int_equal(atomic_load(&next_index), t.n);
    assert_int_equal(atomic_load(&out_of_order), 0);
    RT_OK(rill_kernel_destroy(t.k));
    RT_OK(rill_stream_destroy(t.s));
}

/* "... blocks until the device has run that stream (or the device's
 * fullest stream) down to half of it": once one stream's large arguments
 * fill the device's bound, a launch with large arguments on another stream
 * waits for the full one, and both go on once it drains. */
static void test_device_bound_waits_for_the_fullest_stream(void **state) {
    (void)state;
    const size_t bound = 64 * 1024, args = 4096;
    RT_OK(rill_set_queue_limit(100000, bound));
    rill_kernel *k = ordered();
    submitter full = {.n = 200, .args_size = args, .k = k};
    submitter other = {.n = 20, .args_size = args, .k = k};
    RT_OK(rill_stream_create(NULL, 0, &full.s));
    RT_OK(rill_stream_create(NULL, 0, &other.s));
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rt_launch_gate_kernel(full.s, &gate));
    assert_true(rt_gate_wait_entered(&gate));
    pthread_t th_full, th_other;
    assert_int_equal(pthread_create(&th_full, NULL, submit_all, &full), 0);
    uint64_t full_at = settled_count(&full);
    assert_int_equal(pthread_create(&th_other, NULL, submit_all, &other), 0);
    uint64_t other_at = settled_count(&other);
    uint64_t other_pending = pending_of(other.s);
    rt_gate_open(&gate);
    assert_int_equal(pthread_join(th_full, NULL), 0);
    assert_int_equal(pthread_join(th_other, NULL), 0);
    RT_OK(rill_stream_synchronize(full.s));
    RT_OK(rill_stream_synchronize(other.s));
    printf("# the full stream stopped after %llu launches, the other after %llu\n",
           (unsigned long long)full_at, (unsigned long long)other_at);
    assert_true(full_at < full.n);
    assert_true(other_at < other.n);
    assert_true(other_pending <= 1);
    assert_int_equal(atomic_load(&full.failed), 0);
    assert_int_equal(atomic_load(&other.failed), 0);
    assert_int_equal(atomic_load(&full.launched), full.n);
    assert_int_equal(atomic_load(&other.launched), other.n);
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(full.s));
    RT_OK(rill_stream_destroy(other.s));
}

/* ---- waits that would never end do not happen ---- */

typedef struct nested {
    rill_stream *s;
    uint64_t n;
    atomic_int failed;
} nested;

static void submit_from_host(void *arg) {
    nested *w = arg;
    for (uint64_t i = 0; i < w->n; i++)
        if (rill_launch_host_func(w->s, ordered_host, (void *)(uintptr_t)i) != RILL_OK)
            atomic_store(&w->failed, 1);
}

/* "It never blocks inside a kernel or host function": a host function
 * that queues far more than the bound on its own stream, which cannot
 * drain until it returns, finishes, and everything runs. */
static void test_host_function_submitting_past_the_bound_does_not_wait(void **state) {
    (void)state;
    RT_OK(rill_set_queue_limit(16, 0));
    nested w = {.n = 500};
    RT_OK(rill_stream_create(NULL, 0, &w.s));
    RT_OK(rill_launch_host_func(w.s, submit_from_host, &w));
    RT_OK(rill_stream_synchronize(w.s)); /* the host function, */
    RT_OK(rill_stream_synchronize(w.s)); /* then what it queued */
    assert_int_equal(atomic_load(&w.failed), 0);
    assert_int_equal(atomic_load(&next_index), w.n);
    assert_int_equal(atomic_load(&out_of_order), 0);
    RT_OK(rill_stream_destroy(w.s));
}

/* "... nor for a capturing stream (which queues nothing)": a capture of
 * far more launches than the bound, behind a queue that is full, does not
 * wait, and its replay runs them all. */
static void test_capture_past_the_bound_does_not_wait(void **state) {
    (void)state;
    RT_OK(rill_set_queue_limit(8, 0));
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    rill_kernel *k = ordered();
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    for (uint64_t i = 0; i < 100; i++)
        RT_OK(launch_ordered(s, k, i, sizeof i));
    rill_graph *g = NULL;
    RT_OK(rill_stream_end_capture(s, &g));
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&next_index), 100);
    assert_int_equal(atomic_load(&out_of_order), 0);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
}

/* "such a wait ends once that work has not moved for 200 ms, and the
 * thread goes on past the bound until the work moves again": a host
 * function that waits for the submitting thread itself does not deadlock
 * it. */
static void test_full_queue_behind_a_gate_this_thread_opens_does_not_deadlock(void **state) {
    (void)state;
    RT_OK(rill_set_queue_limit(16, 0));
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    rill_kernel *k = ordered();
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &gate));
    uint64_t t0 = rt_now_ns();
    for (uint64_t i = 0; i < 1000; i++)
        RT_OK(launch_ordered(s, k, i, sizeof i));
    uint64_t waited = rt_now_ns() - t0;
    uint64_t pending = pending_of(s);
    rt_gate_open(&gate);
    RT_OK(rill_stream_synchronize(s));
    printf("# 1000 launches behind a closed gate: %.0f ms, %llu queued\n", waited / 1e6,
           (unsigned long long)pending);
    assert_false(atomic_load(&gate.timed_out));
    assert_true(waited >= 150000000u); /* it did wait, once */
    assert_int_equal(pending, 1001);
    assert_int_equal(atomic_load(&next_index), 1000);
    assert_int_equal(atomic_load(&out_of_order), 0);
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
}

/* ---- the timed wait, and the setting ---- */

/* "RILL_OK once stream may take a command without waiting, RILL_NOT_READY
 * when it still may not after timeout_ns, changing nothing." */
static void test_make_room_for_times_out_then_succeeds(void **state) {
    (void)state;
    RT_OK(rill_set_queue_limit(8, 0));
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    rill_kernel *k = ordered();
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rt_launch_gate_kernel(s, &gate));
    assert_true(rt_gate_wait_entered(&gate));
    RT_OK(rill_stream_make_room_for(s, 0)); /* one queued of 8 */
    for (uint64_t i = 0; i < 7; i++)
        RT_OK(launch_ordered(s, k, i, sizeof i));
    uint64_t t0 = rt_now_ns();
    RT_STATUS(RILL_NOT_READY, rill_stream_make_room_for(s, 20000000u));
    uint64_t waited = rt_now_ns() - t0;
    assert_int_equal(pending_of(s), 8);
    rt_gate_open(&gate);
    RT_OK(rill_stream_make_room_for(s, 10000000000ull));
    assert_true(pending_of(s) <= 4);
    RT_OK(rill_stream_synchronize(s));
    assert_true(waited >= 20000000u);
    assert_int_equal(atomic_load(&next_index), 7);
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
}

static atomic_int host_status;

static void make_room_from_host(void *s) {
    atomic_store(&host_status, (int)rill_stream_make_room_for(s, 0));
}

/* "RILL_ERROR_NOT_PERMITTED from a kernel or host function." */
static void test_make_room_for_from_a_host_function_is_not_permitted(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    atomic_store(&host_status, RILL_OK);
    RT_OK(rill_launch_host_func(s, make_room_from_host, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&host_status), RILL_ERROR_NOT_PERMITTED);
    RT_OK(rill_stream_destroy(s));
}

/* "a value that is not a number makes every queuing call fail with
 * RILL_ERROR_INVALID_ARGUMENT naming the variable" */
static void test_queue_limit_variable_not_a_number_fails_launches(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    setenv("RILL_QUEUE_LIMIT", "lots", 1);
    rill_stream *s = NULL;
    rill_status st = rill_stream_create(NULL, 0, &s);
    unsetenv("RILL_QUEUE_LIMIT");
    RT_OK(st);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_host_func(s, ordered_host, NULL));
    assert_non_null(strstr(rill_last_error(), "RILL_QUEUE_LIMIT='lots'"));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown()); /* the next runtime reads the variable again */
    size_t commands = 0, bytes = 0;
    RT_OK(rill_get_queue_limit(NULL, &commands, &bytes));
    assert_int_equal(commands, 1024);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_get_queue_limit(NULL, NULL, &bytes));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stream_holds_at_most_its_bound_and_loses_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_submit_blocked_on_full_queue_resumes_when_device_drains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_bound_counts_large_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_bound_waits_for_the_fullest_stream, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_host_function_submitting_past_the_bound_does_not_wait,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_capture_past_the_bound_does_not_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_full_queue_behind_a_gate_this_thread_opens_does_not_deadlock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_make_room_for_times_out_then_succeeds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_make_room_for_from_a_host_function_is_not_permitted,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_limit_variable_not_a_number_fails_launches,
                                        setup, teardown),
    };
    return RT_RUN(tests);
}
