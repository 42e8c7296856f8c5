/* SPDX-License-Identifier: MIT */
/* Streams: lifetime, priorities, the default and current streams, query and synchronize, order
 * within a stream and across streams and submitting threads, wait_stream and wait_event,
 * concurrency between streams, names, tags, destroy with pending work and sticky errors.
 *
 * Work on the device reports through atomics (tickets from one global counter show the order in
 * which things happened); only the test's main thread asserts. Every wait has a deadline. */
#include "fixture.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

#define SEC_NS          1000000000ull
#define WAIT_TIMEOUT_NS (10 * SEC_NS) /* the main thread gives up waiting after this */

/* ---- tickets, markers and gates ---- */

/* Host function: stores a ticket into the _Atomic uint64_t that user_data points at. */
static void marker_fn(void *user_data) {
    atomic_store((_Atomic uint64_t *)user_data, rt_take_ticket());
}

/* Waits (with a deadline) until *v is non-zero; returns whether it became so. */
static bool wait_int(atomic_int *v) {
    uint64_t deadline = rt_now_ns() + WAIT_TIMEOUT_NS;
    while (atomic_load(v) == 0) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

static bool wait_u64(_Atomic uint64_t *v) {
    uint64_t deadline = rt_now_ns() + WAIT_TIMEOUT_NS;
    while (atomic_load(v) == 0) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* Gives a broken engine time to run work that must stay blocked: true when *v stayed zero for
 * `ms` milliseconds. A correct engine always passes; the ordering itself is checked with
 * tickets. */
static bool stays_zero(_Atomic uint64_t *v, unsigned ms) {
    uint64_t end = rt_now_ns() + (uint64_t)ms * 1000000u;
    while (rt_now_ns() < end) {
        if (atomic_load(v) != 0)
            return false;
        rt_sleep_us(200);
    }
    return atomic_load(v) == 0;
}

/* Tests that hold one stream's host function while another stream must progress need a second
 * compute unit; with one (RILL_CPU_WORKERS=1) they skip. */
static void require_two_compute_units(void) {
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    if (info.compute_units < 2)
        skip();
}

/* ---- kernels ---- */

typedef struct marker_args {
    _Atomic uint64_t *slot;
} marker_args;

static void marker_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    marker_args a;
    memcpy(&a, args, sizeof a);
    atomic_store(a.slot, rt_take_ticket());
}

typedef struct fail_args {
    const char *message;
    atomic_int *ran;
} fail_args;

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    fail_args a;
    memcpy(&a, args, sizeof a);
    atomic_store(a.ran, 1);
    rill_kernel_fail(ctx, a.message);
}

static rill_kernel *make_kernel(const char *name, rill_cpu_kernel_fn fn) {
    rill_kernel_desc desc = {.name = name, .cpu = fn};
    rill_kernel *kernel = NULL;
    RT_OK(rill_kernel_create(&desc, &kernel));
    assert_non_null(kernel);
    return kernel;
}

static rill_status launch_marker_kernel(rill_stream *s, rill_kernel *k, _Atomic uint64_t *slot) {
    marker_args a = {slot};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    return rill_launch_kernel(s, k, &launch);
}

static rill_status launch_fail_kernel(rill_stream *s, rill_kernel *k, const char *message,
                                      atomic_int *ran) {
    fail_args a = {message, ran};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    return rill_launch_kernel(s, k, &launch);
}

static rill_stream *new_stream(int priority) {
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, priority, &s));
    assert_non_null(s);
    return s;
}

/* ---- lifetime and priorities ---- */

/* "Whoever creates a handle destroys it"; a new stream belongs to the current device and has the
 * priority it was given. */
static void test_stream_create_and_destroy(void **state) {
    (void)state;
    rill_device *dev = NULL;
    RT_OK(rill_get_device(&dev));
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(dev, 0, &s));
    assert_non_null(s);
    assert_ptr_not_equal(s, rill_default_stream(dev));
    rill_device *owner = NULL;
    RT_OK(rill_stream_get_device(s, &owner));
    assert_ptr_equal(owner, dev);
    int priority = 42;
    RT_OK(rill_stream_get_priority(s, &priority));
    assert_int_equal(priority, 0);
    RT_OK(rill_stream_destroy(s));

    rill_stream *t = NULL;
    RT_OK(rill_stream_create(NULL, -1, &t));
    RT_OK(rill_stream_get_device(t, &owner));
    assert_ptr_equal(owner, dev);
    RT_OK(rill_stream_destroy(t));
}

/* RILL_ERROR_INVALID_ARGUMENT: "NULL where a value is needed"; failed calls leave out-parameters
 * NULL/zero. */
static void test_stream_bad_arguments_are_invalid(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_create(NULL, 0, NULL));
    rill_stream *s = new_stream(0);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_get_priority(s, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_get_device(s, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_wait_event(s, NULL));
    rill_stream *tagged = (rill_stream *)&tagged;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_get_tagged(NULL, NULL, 0, &tagged));
    assert_null(tagged);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_get_tagged(NULL, "t", 0, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_host_func(s, NULL, NULL));
    RT_OK(rill_stream_destroy(s));
}

/* "priority is clamped into [greatest_priority, least_priority]" (CPU: [-5, 0]). */
static void test_stream_priority_is_clamped(void **state) {
    (void)state;
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    const struct {
        int asked, expected;
    } cases[] = {
        {-1000, info.greatest_priority},
        {info.greatest_priority - 1, info.greatest_priority},
        {info.greatest_priority, info.greatest_priority},
        {-3, -3},
        {0, 0},
        {1, info.least_priority},
        {1000, info.least_priority},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rill_stream *s = new_stream(cases[i].asked);
        int priority = 12345;
        RT_OK(rill_stream_get_priority(s, &priority));
        assert_int_equal(priority, cases[i].expected);
        RT_OK(rill_stream_destroy(s));
    }
    int priority = 12345;
    RT_OK(rill_stream_get_priority(rill_default_stream(NULL), &priority));
    assert_int_equal(priority, 0);
}

/* rill_stream_destroy: "not the default stream" (RILL_ERROR_INVALID_ARGUMENT); the default stream
 * keeps working afterwards. */
static void test_stream_default_is_not_destroyable(void **state) {
    (void)state;
    rill_stream *def = rill_default_stream(NULL);
    assert_non_null(def);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_destroy(def));
    static _Atomic uint64_t ran;
    atomic_store(&ran, 0);
    RT_OK(rill_launch_host_func(def, marker_fn, (void *)&ran));
    RT_OK(rill_stream_synchronize(def));
    assert_true(atomic_load(&ran) != 0);
}

/* ---- the current stream ---- */

typedef struct current_probe {
    rill_stream *seen_first;   /* rill_current_stream(NULL) before any set */
    rill_stream *default_seen; /* rill_default_stream(NULL) in the thread */
    rill_stream *to_set;       /* the thread makes this current */
    rill_stream *prev;         /* what rill_set_current_stream returned */
    rill_stream *seen_after;   /* rill_current_stream(NULL) after the set */
} current_probe;

static void *probe_current_stream(void *arg) {
    current_probe *p = arg;
    p->seen_first = rill_current_stream(NULL);
    p->default_seen = rill_default_stream(NULL);
    if (p->to_set != NULL) {
        p->prev = rill_set_current_stream(p->to_set);
        p->seen_after = rill_current_stream(NULL);
    }
    return NULL;
}

static void run_current_probe(current_probe *p) {
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, probe_current_stream, p), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
}

/* "Each device has one default stream: an ordinary stream ... that is current until changed". */
static void test_stream_current_is_default_until_set(void **state) {
    (void)state;
    rill_stream *def = rill_default_stream(NULL);
    assert_non_null(def);
    rill_device *dev = NULL;
    RT_OK(rill_get_device(&dev));
    assert_ptr_equal(rill_default_stream(dev), def);
    assert_ptr_equal(rill_current_stream(NULL), def);
    assert_ptr_equal(rill_current_stream(dev), def);

    current_probe probe = {0};
    run_current_probe(&probe);
    assert_ptr_equal(probe.seen_first, def);
    assert_ptr_equal(probe.default_seen, def);
}

/* rill_set_current_stream: "returns the stream that was current before, so scopes nest". */
static void test_stream_set_current_returns_previous_and_nests(void **state) {
    (void)state;
    rill_stream *def = rill_default_stream(NULL);
    rill_stream *outer = new_stream(0);
    rill_stream *inner = new_stream(0);

    rill_stream *prev_outer = rill_set_current_stream(outer);
    assert_ptr_equal(prev_outer, def);
    assert_ptr_equal(rill_current_stream(NULL), outer);
    {
        rill_stream *prev_inner = rill_set_current_stream(inner);
        assert_ptr_equal(prev_inner, outer);
        assert_ptr_equal(rill_current_stream(NULL), inner);
        assert_ptr_equal(rill_set_current_stream(prev_inner), inner);
    }
    assert_ptr_equal(rill_current_stream(NULL), outer);
    assert_ptr_equal(rill_set_current_stream(prev_outer), outer);
    assert_ptr_equal(rill_current_stream(NULL), def);

    RT_OK(rill_stream_destroy(inner));
    RT_OK(rill_stream_destroy(outer));
}

/* rill_set_current_stream(NULL) makes the current device's default stream current and returns
 * the previous one. */
static void test_stream_set_current_null_selects_default(void **state) {
    (void)state;
    rill_stream *def = rill_default_stream(NULL);
    rill_stream *s = new_stream(0);
    assert_ptr_equal(rill_set_current_stream(s), def);
    assert_ptr_equal(rill_set_current_stream(NULL), s);
    assert_ptr_equal(rill_current_stream(NULL), def);
    assert_ptr_equal(rill_set_current_stream(NULL), def);
    RT_OK(rill_stream_destroy(s));
}

/* rill_set_current_stream: "Makes stream current for its device in the calling thread": another
 * thread is unaffected, and its own choice does not leak back. */
static void test_stream_current_is_per_thread(void **state) {
    (void)state;
    rill_stream *def = rill_default_stream(NULL);
    rill_stream *mine = new_stream(0);
    rill_stream *theirs = new_stream(0);
    assert_ptr_equal(rill_set_current_stream(mine), def);

    current_probe probe = {0};
    probe.to_set = theirs;
    run_current_probe(&probe);
    assert_ptr_equal(probe.seen_first, def);
    assert_ptr_equal(probe.prev, def);
    assert_ptr_equal(probe.seen_after, theirs);
    assert_ptr_equal(rill_current_stream(NULL), mine);

    assert_ptr_equal(rill_set_current_stream(def), mine);
    RT_OK(rill_stream_destroy(theirs));
    RT_OK(rill_stream_destroy(mine));
}

/* "A NULL rill_stream* means the calling thread's current stream of the current device". */
static void test_stream_null_means_current(void **state) {
    (void)state;
    static rt_gate g;
    static _Atomic uint64_t via_null;
    rt_gate_reset(&g);
    atomic_store(&via_null, 0);
    rill_stream *s = new_stream(-2);
    rill_stream *prev = rill_set_current_stream(s);

    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_launch_host_func(NULL, marker_fn, (void *)&via_null));
    rill_status query_null = rill_stream_query(NULL);
    rill_status query_s = rill_stream_query(s);
    int priority = 0;
    rill_status prio_status = rill_stream_get_priority(NULL, &priority);
    bool held = stays_zero(&via_null, 50);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(NULL));
    rill_set_current_stream(prev);

    assert_int_equal(query_null, RILL_NOT_READY);
    assert_int_equal(query_s, RILL_NOT_READY);
    assert_int_equal(prio_status, RILL_OK);
    assert_int_equal(priority, -2);
    assert_true(held);
    assert_false(atomic_load(&g.timed_out));
    assert_true(atomic_load(&via_null) != 0);
    assert_true(atomic_load(&via_null) > atomic_load(&g.end_ticket));
    RT_OK(rill_stream_query(s));
    RT_OK(rill_stream_destroy(s));
}

/* ---- query and synchronize ---- */

/* rill_stream_query: "RILL_OK when all work submitted so far has completed". */
static void test_stream_query_empty_is_ok(void **state) {
    (void)state;
    rill_stream *s = new_stream(0);
    RT_OK(rill_stream_query(s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_query(s));
    RT_OK(rill_stream_destroy(s));
}

/* rill_stream_query: "... else RILL_NOT_READY" while a host function is still blocked. */
static void test_stream_query_not_ready_while_work_pending(void **state) {
    (void)state;
    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *s = new_stream(0);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    bool entered = wait_int(&g.entered);
    rill_status while_blocked = rill_stream_query(s);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    assert_true(entered);
    assert_int_equal(while_blocked, RILL_NOT_READY);
    assert_false(atomic_load(&g.timed_out));
    RT_OK(rill_stream_query(s));
    RT_OK(rill_stream_destroy(s));
}

static void slow_count_fn(void *user_data) {
    rt_spin_us(2000);
    atomic_fetch_add((atomic_int *)user_data, 1);
}

/* rill_stream_synchronize returns once all work submitted to the stream has completed. */
static void test_stream_synchronize_waits_for_work(void **state) {
    (void)state;
    static atomic_int done;
    atomic_store(&done, 0);
    rill_stream *s = new_stream(0);
    for (int i = 0; i < 10; i++)
        RT_OK(rill_launch_host_func(s, slow_count_fn, &done));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&done), 10);
    RT_OK(rill_stream_destroy(s));
}

/* rill_stream_synchronize_for, rill_event_synchronize_for, rill_device_synchronize_for: "returns
 * RILL_NOT_READY when that work has not completed within timeout_ns nanoseconds (0: at once),
 * changing nothing: the work runs on, and the caller may wait again" and "They never run the
 * awaited work on the calling thread ... even a host function that never returns". The gate
 * holds until opened; a wait that ran it here would return only when the gate gave up. */
static void test_stream_synchronize_for_ends_at_its_limit_and_may_wait_again(void **state) {
    (void)state;
    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *s = new_stream(0);
    rill_event *e, *blocking;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &blocking));
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_record(blocking, s));
    rill_status st[7];
    st[0] = rill_stream_synchronize_for(s, 20000000);
    st[1] = rill_stream_synchronize_for(s, 0);
    st[2] = rill_event_synchronize_for(e, 1000000);
    st[3] = rill_event_synchronize_for(blocking, 1000000);
    st[4] = rill_device_synchronize_for(NULL, 1000000);
    st[5] = rill_stream_query(s);
    rt_gate_open(&g);
    st[6] = rill_stream_synchronize_for(s, WAIT_TIMEOUT_NS);
    assert_false(atomic_load(&g.timed_out));
    for (int i = 0; i < 6; i++)
        assert_int_equal(st[i], RILL_NOT_READY);
    RT_OK(st[6]);
    assert_true(atomic_load(&g.done) != 0);
    RT_OK(rill_event_synchronize_for(e, WAIT_TIMEOUT_NS));
    RT_OK(rill_event_synchronize_for(blocking, 0));
    RT_OK(rill_device_synchronize_for(NULL, WAIT_TIMEOUT_NS));
    RT_OK(rill_stream_synchronize_for(s, 0));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_event_destroy(blocking));
    RT_OK(rill_stream_destroy(s));
}

/* A wait whose limit comes as the work completes either sees it done or returns RILL_NOT_READY,
 * and the next wait sees it done: the limit and the completion race here on every round. */
static void test_stream_synchronize_for_racing_its_limit_is_ok_or_not_ready(void **state) {
    (void)state;
    static atomic_int count;
    atomic_store(&count, 0);
    rill_stream *s = new_stream(0);
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &e));
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        RT_OK(rill_launch_host_func(s, slow_count_fn, &count));
        RT_OK(rill_event_record(e, s));
        uint64_t limit = 1000000 + (uint64_t)(i % 20) * 100000; /* about the 2 ms of the work */
        rill_status a =
            (i & 1) ? rill_event_synchronize_for(e, limit) : rill_stream_synchronize_for(s, limit);
        rill_status b = rill_stream_synchronize_for(s, WAIT_TIMEOUT_NS);
        if ((a != RILL_OK && a != RILL_NOT_READY) || b != RILL_OK)
            bad++;
    }
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&count), 200);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

/* ---- order ---- */

#define LOG_CAPACITY 4096

typedef struct stream_log {
    atomic_int count;
    atomic_int entries[LOG_CAPACITY];
} stream_log;

static void log_append(stream_log *log, int tag) {
    int i = atomic_fetch_add(&log->count, 1);
    if (i < LOG_CAPACITY)
        atomic_store_explicit(&log->entries[i], tag, memory_order_relaxed);
}

typedef struct log_cmd {
    stream_log *log;
    int tag;
} log_cmd;

static void log_host_fn(void *user_data) {
    log_cmd *c = user_data;
    log_append(c->log, c->tag);
}

static void log_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    log_cmd c;
    memcpy(&c, args, sizeof c);
    log_append(c.log, c.tag);
}

static rill_status launch_log_kernel(rill_stream *s, rill_kernel *k, stream_log *log, int tag) {
    log_cmd c = {log, tag};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &c, .args_size = sizeof c};
    return rill_launch_kernel(s, k, &launch);
}

/* Streams are "in-order queues": host functions and kernels on one stream run in submission
 * order. */
static void test_stream_runs_commands_in_order(void **state) {
    (void)state;
    enum { N = 2000 };
    static stream_log log;
    static log_cmd cmds[N];
    memset(&log, 0, sizeof log);
    rill_kernel *k = make_kernel("log_kernel", log_kernel);
    rill_stream *s = new_stream(0);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 1) {
            RT_OK(launch_log_kernel(s, k, &log, i));
        } else {
            cmds[i] = (log_cmd){&log, i};
            RT_OK(rill_launch_host_func(s, log_host_fn, &cmds[i]));
        }
    }
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&log.count), N);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&log.entries[i]), i);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

enum { ORD_STREAMS = 16, ORD_THREADS = 4, ORD_ROUNDS = 60 };

typedef struct order_run {
    bool locked; /* submissions to one stream serialised by the test, so their order is known */
    rill_stream *streams[ORD_STREAMS];
    rill_kernel *kernel;
    pthread_mutex_t locks[ORD_STREAMS];
    int expected_count[ORD_STREAMS];                     /* guarded by locks[s] */
    int expected[ORD_STREAMS][ORD_THREADS * ORD_ROUNDS]; /* guarded by locks[s] */
    stream_log logs[ORD_STREAMS];
    log_cmd cmds[ORD_THREADS][ORD_ROUNDS][ORD_STREAMS];
    pthread_barrier_t start;
    atomic_int failures;
    atomic_int first_failure;
} order_run;

typedef struct order_thread {
    order_run *run;
    int index;
} order_thread;

static int order_tag(int thread, int round) {
    return thread * 100000 + round;
}

static void *order_submitter(void *arg) {
    order_thread *t = arg;
    order_run *run = t->run;
    pthread_barrier_wait(&run->start);
    for (int r = 0; r < ORD_ROUNDS; r++) {
        for (int k = 0; k < ORD_STREAMS; k++) {
            int si = (k + t->index * 5 + r) % ORD_STREAMS;
            int tag = order_tag(t->index, r);
            if (run->locked)
                pthread_mutex_lock(&run->locks[si]);
            rill_status st;
            if ((r + si) % 4 == 0) {
                st = launch_log_kernel(run->streams[si], run->kernel, &run->logs[si], tag);
            } else {
                log_cmd *c = &run->cmds[t->index][r][si];
                *c = (log_cmd){&run->logs[si], tag};
                st = rill_launch_host_func(run->streams[si], log_host_fn, c);
            }
            if (run->locked) {
                run->expected[si][run->expected_count[si]++] = tag;
                pthread_mutex_unlock(&run->locks[si]);
            }
            if (st != RILL_OK && atomic_fetch_add(&run->failures, 1) == 0)
                atomic_store(&run->first_failure, (int)st);
        }
    }
    return NULL;
}

static void run_order(order_run *run) {
    run->kernel = make_kernel("log_kernel", log_kernel);
    for (int s = 0; s < ORD_STREAMS; s++) {
        run->streams[s] = new_stream(-(s % 3));
        pthread_mutex_init(&run->locks[s], NULL);
    }
    pthread_barrier_init(&run->start, NULL, ORD_THREADS);
    pthread_t threads[ORD_THREADS];
    order_thread args[ORD_THREADS];
    for (int t = 0; t < ORD_THREADS; t++) {
        args[t] = (order_thread){run, t};
        assert_int_equal(pthread_create(&threads[t], NULL, order_submitter, &args[t]), 0);
    }
    for (int t = 0; t < ORD_THREADS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    pthread_barrier_destroy(&run->start);
    for (int s = 0; s < ORD_STREAMS; s++)
        RT_OK(rill_stream_synchronize(run->streams[s]));
    if (atomic_load(&run->failures) != 0)
        fail_msg("%d submissions failed, the first with %s", atomic_load(&run->failures),
                 rill_status_name((rill_status)atomic_load(&run->first_failure)));
    for (int s = 0; s < ORD_STREAMS; s++)
        assert_int_equal(atomic_load(&run->logs[s].count), ORD_THREADS * ORD_ROUNDS);
}

static void destroy_order(order_run *run) {
    for (int s = 0; s < ORD_STREAMS; s++) {
        RT_OK(rill_stream_destroy(run->streams[s]));
        pthread_mutex_destroy(&run->locks[s]);
    }
    RT_OK(rill_kernel_destroy(run->kernel));
}

/* "Commands that several threads submit to one stream run in the order in which the calls
 * returned": with the test serialising the submissions to each stream (so the order in which
 * the calls returned is known), each of 16 streams runs its commands in exactly that order. */
static void test_stream_order_across_streams_and_threads(void **state) {
    (void)state;
    static order_run run;
    memset(&run, 0, sizeof run);
    run.locked = true;
    run_order(&run);
    for (int s = 0; s < ORD_STREAMS; s++) {
        assert_int_equal(run.expected_count[s], ORD_THREADS * ORD_ROUNDS);
        for (int i = 0; i < run.expected_count[s]; i++) {
            int got = atomic_load(&run.logs[s].entries[i]);
            if (got != run.expected[s][i])
                fail_msg("stream %d position %d ran tag %d, expected %d", s, i, got,
                         run.expected[s][i]);
        }
    }
    destroy_order(&run);
}

/* "Commands that several threads submit to one stream run in the order in which the calls
 * returned": with 4 threads submitting to 16 streams at once, each thread's commands on each
 * stream run in the thread's order, and every command runs once. */
static void test_stream_order_with_concurrent_submitters(void **state) {
    (void)state;
    static order_run run;
    memset(&run, 0, sizeof run);
    run.locked = false;
    run_order(&run);
    for (int s = 0; s < ORD_STREAMS; s++) {
        int next_round[ORD_THREADS] = {0};
        for (int i = 0; i < ORD_THREADS * ORD_ROUNDS; i++) {
            int tag = atomic_load(&run.logs[s].entries[i]);
            int t = tag / 100000, r = tag % 100000;
            assert_true(t >= 0 && t < ORD_THREADS);
            if (r != next_round[t])
                fail_msg("stream %d position %d ran thread %d round %d, expected round %d", s, i, t,
                         r, next_round[t]);
            next_round[t]++;
        }
    }
    destroy_order(&run);
}

/* ---- waits between streams ---- */

/* rill_stream_wait_stream: "Work submitted to stream after this call waits for all work
 * submitted to other before this call" (and not for work submitted to other later). */
static void test_stream_wait_stream_orders_work(void **state) {
    (void)state;
    require_two_compute_units();
    static rt_gate before, after;
    static _Atomic uint64_t b_pre, b_post1, b_post2;
    rt_gate_reset(&before);
    rt_gate_reset(&after);
    atomic_store(&b_pre, 0);
    atomic_store(&b_post1, 0);
    atomic_store(&b_post2, 0);
    rill_stream *a = new_stream(0);
    rill_stream *b = new_stream(0);

    RT_OK(rill_launch_host_func(a, rt_gate_fn, &before));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b_pre));
    bool pre_ran = wait_u64(&b_pre); /* b does not wait for a before the wait call */
    RT_OK(rill_stream_wait_stream(b, a));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b_post1));
    RT_OK(rill_launch_host_func(a, rt_gate_fn, &after));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b_post2));
    rill_status b_waiting = rill_stream_query(b);
    bool held = stays_zero(&b_post1, 50);
    rt_gate_open(&before);
    bool post_ran = wait_u64(&b_post2); /* while 'after' is still closed */
    rt_gate_open(&after);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));

    assert_true(pre_ran);
    assert_true(post_ran);
    assert_int_equal(b_waiting, RILL_NOT_READY);
    assert_true(held);
    assert_false(atomic_load(&before.timed_out));
    assert_false(atomic_load(&after.timed_out));
    assert_true(atomic_load(&b_post1) > atomic_load(&before.end_ticket));
    assert_true(atomic_load(&b_post2) > atomic_load(&b_post1));
    assert_true(atomic_load(&b_post2) < atomic_load(&after.end_ticket));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* "A NULL rill_stream* means the calling thread's current stream": rill_stream_wait_stream(b,
 * NULL) makes b wait for the current stream's work. */
static void test_stream_wait_stream_null_other_is_current(void **state) {
    (void)state;
    static rt_gate g;
    static _Atomic uint64_t after;
    rt_gate_reset(&g);
    atomic_store(&after, 0);
    rill_stream *cur = new_stream(0);
    rill_stream *b = new_stream(0);
    rill_stream *prev = rill_set_current_stream(cur);
    rill_status launched = rill_launch_host_func(cur, rt_gate_fn, &g);
    rill_status waited = rill_stream_wait_stream(b, NULL);
    rill_set_current_stream(prev);
    rill_status marked = rill_launch_host_func(b, marker_fn, (void *)&after);
    bool held = stays_zero(&after, 50);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(cur));
    RT_OK(rill_stream_synchronize(b));

    assert_int_equal(launched, RILL_OK);
    if (waited != RILL_OK)
        fail_msg("rill_stream_wait_stream(b, NULL) returned %s: %s", rill_status_name(waited),
                 rill_last_error());
    assert_int_equal(marked, RILL_OK);
    assert_true(held);
    assert_false(atomic_load(&g.timed_out));
    assert_true(atomic_load(&after) > atomic_load(&g.end_ticket));
    RT_OK(rill_stream_destroy(cur));
    RT_OK(rill_stream_destroy(b));
}

/* "Each device has one default stream: an ordinary stream (no implicit synchronisation with
 * other streams)": work on another stream runs while the default stream is blocked, and the
 * default stream's work runs while another stream is blocked. */
static void test_stream_default_has_no_implicit_sync(void **state) {
    (void)state;
    require_two_compute_units();
    static rt_gate on_default, on_other;
    static _Atomic uint64_t other_ran, default_ran;
    rt_gate_reset(&on_default);
    rt_gate_reset(&on_other);
    atomic_store(&other_ran, 0);
    atomic_store(&default_ran, 0);
    rill_stream *def = rill_default_stream(NULL);
    rill_stream *s = new_stream(0);

    RT_OK(rill_launch_host_func(def, rt_gate_fn, &on_default));
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&other_ran));
    bool other_done = wait_u64(&other_ran);
    rt_gate_open(&on_default);
    RT_OK(rill_stream_synchronize(def));

    RT_OK(rill_launch_host_func(s, rt_gate_fn, &on_other));
    RT_OK(rill_launch_host_func(def, marker_fn, (void *)&default_ran));
    bool default_done = wait_u64(&default_ran);
    rt_gate_open(&on_other);
    RT_OK(rill_stream_synchronize(s));

    assert_true(other_done);
    assert_true(default_done);
    assert_false(atomic_load(&on_default.timed_out));
    assert_false(atomic_load(&on_other.timed_out));
    assert_true(atomic_load(&other_ran) < atomic_load(&on_default.end_ticket));
    assert_true(atomic_load(&default_ran) < atomic_load(&on_other.end_ticket));
    RT_OK(rill_stream_destroy(s));
}

/* rill_stream_wait_event: "Work submitted to stream after this call waits until event
 * completes, as recorded at the time of this call (later records of event do not matter)". */
static void test_stream_wait_event_uses_record_at_call_time(void **state) {
    (void)state;
    require_two_compute_units();
    static rt_gate op1, op2;
    static _Atomic uint64_t b1, b2;
    rt_gate_reset(&op1);
    rt_gate_reset(&op2);
    atomic_store(&b1, 0);
    atomic_store(&b2, 0);
    rill_stream *a = new_stream(0);
    rill_stream *b = new_stream(0);
    rill_event *e = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));

    RT_OK(rill_launch_host_func(a, rt_gate_fn, &op1));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_stream_wait_event(b, e));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b1));
    RT_OK(rill_launch_host_func(a, rt_gate_fn, &op2));
    RT_OK(rill_event_record(e, a)); /* moves e behind op2; b's wait must not follow it */
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b2));
    bool held = stays_zero(&b1, 50);
    rt_gate_open(&op1);
    bool b_ran = wait_u64(&b2); /* while op2 is still blocked */
    rt_gate_open(&op2);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));

    assert_true(b_ran);
    assert_true(held);
    assert_false(atomic_load(&op1.timed_out));
    assert_false(atomic_load(&op2.timed_out));
    assert_true(atomic_load(&b1) > atomic_load(&op1.end_ticket));
    assert_true(atomic_load(&b2) < atomic_load(&op2.end_ticket));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* rill_stream_wait_event: "Waiting on a never-recorded event does nothing", even when the event
 * is recorded behind blocked work after the wait. */
static void test_stream_wait_unrecorded_event_does_nothing(void **state) {
    (void)state;
    require_two_compute_units();
    static rt_gate blocker;
    static _Atomic uint64_t ran;
    rt_gate_reset(&blocker);
    atomic_store(&ran, 0);
    rill_stream *a = new_stream(0);
    rill_stream *b = new_stream(0);
    rill_event *e = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));

    RT_OK(rill_launch_host_func(a, rt_gate_fn, &blocker));
    RT_OK(rill_stream_wait_event(b, e));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&ran));
    bool b_ran = wait_u64(&ran);
    rt_gate_open(&blocker);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));

    assert_true(b_ran);
    assert_false(atomic_load(&blocker.timed_out));
    assert_true(atomic_load(&ran) < atomic_load(&blocker.end_ticket));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* ---- concurrency ---- */

typedef struct rendezvous {
    atomic_int started[2];
    atomic_int met[2];
} rendezvous;

typedef struct rendezvous_side {
    rendezvous *rv;
    int me;
} rendezvous_side;

/* Marks this side started, then spins (5 s deadline) until the other side has started. */
static void rendezvous_fn(void *user_data) {
    rendezvous_side *side = user_data;
    atomic_store(&side->rv->started[side->me], 1);
    uint64_t deadline = rt_now_ns() + 5 * SEC_NS;
    while (rt_now_ns() < deadline) {
        if (atomic_load(&side->rv->started[1 - side->me])) {
            atomic_store(&side->rv->met[side->me], 1);
            return;
        }
        sched_yield();
    }
}

/* rill_stream_native: "NULL on a CPU device"; rill_event_native: "RILL_ERROR_NOT_RECORDED for an
 * event never recorded", "RILL_ERROR_NOT_SUPPORTED for an event bound to a device whose events have
 * no native handle (a CPU device)"; a NULL out or a destroyed handle is
 * RILL_ERROR_INVALID_ARGUMENT.
 */
static void test_native_handles_of_the_cpu_device(void **state) {
    (void)state;
    rill_stream *s;
    rill_event *e;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(0, &e));
    void *native = (void *)&native;
    RT_OK(rill_stream_native(s, &native));
    assert_null(native);
    native = (void *)&native;
    RT_STATUS(RILL_ERROR_NOT_RECORDED, rill_event_native(e, &native));
    assert_null(native); /* not bound yet */
    assert_non_null(strstr(rill_last_error(), "never recorded"));
    RT_OK(rill_event_record(e, s));
    native = (void *)&native;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_event_native(e, &native));
    assert_null(native);
    assert_non_null(strstr(rill_last_error(), "no native handle"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_native(s, NULL));
    assert_non_null(strstr(rill_last_error(), "pass the address of a void *"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_native(e, NULL));
    assert_non_null(strstr(rill_last_error(), "pass the address of a void *"));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    native = (void *)&native;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_native(s, &native));
    assert_null(native);
    native = (void *)&native;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_native(e, &native));
    assert_null(native);
}

/* Streams run "concurrently with other streams": two host functions that each wait for the other
 * to start both finish, so they ran at the same time. */
static void test_streams_run_concurrently(void **state) {
    (void)state;
    require_two_compute_units();
    static rendezvous rv;
    static rendezvous_side sides[2];
    memset(&rv, 0, sizeof rv);
    rill_stream *s[2] = {new_stream(0), new_stream(0)};
    for (int i = 0; i < 2; i++) {
        sides[i] = (rendezvous_side){&rv, i};
        RT_OK(rill_launch_host_func(s[i], rendezvous_fn, &sides[i]));
    }
    RT_OK(rill_stream_synchronize(s[0]));
    RT_OK(rill_stream_synchronize(s[1]));
    assert_true(atomic_load(&rv.met[0]));
    assert_true(atomic_load(&rv.met[1]));
    RT_OK(rill_stream_destroy(s[0]));
    RT_OK(rill_stream_destroy(s[1]));
}

/* ---- tags ---- */

/* rill_stream_get_tagged: "The same tag on the same device always names the same stream, created
 * at first use with the given priority and owned by the library". */
static void test_stream_tagged_same_tag_same_stream(void **state) {
    (void)state;
    rill_stream *a1 = NULL, *a2 = NULL, *b = NULL;
    RT_OK(rill_stream_get_tagged(NULL, "tag-a", -1000, &a1));
    char tag_copy[] = "tag-a";
    RT_OK(rill_stream_get_tagged(NULL, tag_copy, 0, &a2));
    RT_OK(rill_stream_get_tagged(NULL, "tag-b", 0, &b));
    assert_non_null(a1);
    assert_ptr_equal(a1, a2);
    assert_ptr_not_equal(a1, b);
    assert_ptr_not_equal(a1, rill_default_stream(NULL));
    int priority = 1;
    RT_OK(rill_stream_get_priority(a2, &priority));
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    assert_int_equal(priority, info.greatest_priority); /* first use's priority, clamped */

    static _Atomic uint64_t ran;
    atomic_store(&ran, 0);
    RT_OK(rill_launch_host_func(a1, marker_fn, (void *)&ran));
    RT_OK(rill_stream_synchronize(a2));
    assert_true(atomic_load(&ran) != 0);
}

/* Destroying a tagged stream is refused (RILL_ERROR_INVALID_ARGUMENT): the library owns it. */
static void test_stream_tagged_is_not_destroyable(void **state) {
    (void)state;
    rill_stream *t = NULL;
    RT_OK(rill_stream_get_tagged(NULL, "tag-owned", 0, &t));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_destroy(t));
    rill_stream *again = NULL;
    RT_OK(rill_stream_get_tagged(NULL, "tag-owned", 0, &again));
    assert_ptr_equal(again, t);
    RT_OK(rill_stream_synchronize(t));
}

enum { TAG_THREADS = 8 };

typedef struct tag_race {
    pthread_barrier_t start;
    rill_stream *got[TAG_THREADS];
    rill_status status[TAG_THREADS];
} tag_race;

typedef struct tag_racer {
    tag_race *race;
    int index;
} tag_racer;

static void *tag_race_fn(void *arg) {
    tag_racer *r = arg;
    pthread_barrier_wait(&r->race->start);
    r->race->status[r->index] =
        rill_stream_get_tagged(NULL, "tag-raced", 0, &r->race->got[r->index]);
    return NULL;
}

/* "The same tag ... always names the same stream", also when several threads use it first at
 * the same time ("Every function is thread-safe"). */
static void test_stream_tagged_first_use_from_many_threads(void **state) {
    (void)state;
    static tag_race race;
    memset(&race, 0, sizeof race);
    pthread_barrier_init(&race.start, NULL, TAG_THREADS);
    pthread_t threads[TAG_THREADS];
    tag_racer racers[TAG_THREADS];
    for (int i = 0; i < TAG_THREADS; i++) {
        racers[i] = (tag_racer){&race, i};
        assert_int_equal(pthread_create(&threads[i], NULL, tag_race_fn, &racers[i]), 0);
    }
    for (int i = 0; i < TAG_THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    pthread_barrier_destroy(&race.start);
    for (int i = 0; i < TAG_THREADS; i++) {
        assert_int_equal(race.status[i], RILL_OK);
        assert_non_null(race.got[i]);
        assert_ptr_equal(race.got[i], race.got[0]);
    }
}

/* ---- destroy with pending work ---- */

typedef struct delayed_open {
    rt_gate *g;
    atomic_int *go;
} delayed_open;

/* Opens the gate shortly after the main thread announces the destroy, so the test passes
 * whether rill_stream_destroy returns at once or waits for the work. */
static void *delayed_open_fn(void *arg) {
    delayed_open *d = arg;
    if (wait_int(d->go))
        rt_sleep_us(20000);
    rt_gate_open(d->g);
    return NULL;
}

/* "Destroying a stream ... with work still pending is allowed: the work finishes, then the
 * resources are released." */
static void test_stream_destroy_with_pending_work_completes(void **state) {
    (void)state;
    static rt_gate g;
    static _Atomic uint64_t host_ran, kernel_ran, waiter_ran;
    static atomic_int go;
    rt_gate_reset(&g);
    atomic_store(&host_ran, 0);
    atomic_store(&kernel_ran, 0);
    atomic_store(&waiter_ran, 0);
    atomic_store(&go, 0);
    rill_kernel *k = make_kernel("marker_kernel", marker_kernel);
    rill_stream *s = new_stream(0);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&host_ran));
    RT_OK(launch_marker_kernel(s, k, &kernel_ran));
    rill_stream *waiter = new_stream(0);
    RT_OK(rill_stream_wait_stream(waiter, s)); /* still waits after s is destroyed */
    RT_OK(rill_launch_host_func(waiter, marker_fn, (void *)&waiter_ran));

    delayed_open d = {&g, &go};
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, delayed_open_fn, &d), 0);
    atomic_store(&go, 1);
    rill_status destroyed = rill_stream_destroy(s);
    bool host_done = wait_u64(&host_ran);
    bool kernel_done = wait_u64(&kernel_ran);
    rill_status waiter_synced = rill_stream_synchronize(waiter);
    assert_int_equal(pthread_join(opener, NULL), 0);

    assert_int_equal(destroyed, RILL_OK);
    assert_true(host_done);
    assert_true(kernel_done);
    assert_false(atomic_load(&g.timed_out));
    assert_true(atomic_load(&host_ran) > atomic_load(&g.end_ticket));
    assert_true(atomic_load(&kernel_ran) > atomic_load(&host_ran));
    assert_int_equal(waiter_synced, RILL_OK);
    assert_true(atomic_load(&waiter_ran) > atomic_load(&kernel_ran));
    RT_OK(rill_stream_destroy(waiter));
    RT_OK(rill_kernel_destroy(k));
}

/* ---- sticky errors and names ---- */

/* Sticky errors: "when a kernel or host function fails, the rest of its stream's work is
 * skipped, query/synchronize return RILL_ERROR_KERNEL_FAILED"; the sentence carries the kernel's
 * message and the stream's name (rill_stream_set_name: "for errors and traces"). */
static void test_stream_kernel_fail_is_sticky_and_named(void **state) {
    (void)state;
    static atomic_int failed_ran;
    static _Atomic uint64_t before, after_host, after_kernel, later;
    atomic_store(&failed_ran, 0);
    atomic_store(&before, 0);
    atomic_store(&after_host, 0);
    atomic_store(&after_kernel, 0);
    atomic_store(&later, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_kernel *mark = make_kernel("marker_kernel", marker_kernel);
    rill_stream *s = new_stream(0);
    RT_OK(rill_stream_set_name(s, "sticky-stream-7"));

    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&before));
    RT_OK(launch_fail_kernel(s, fail, "kernel-said-boom-42", &failed_ran));
    rill_status st1 = rill_launch_host_func(s, marker_fn, (void *)&after_host);
    rill_status st2 = launch_marker_kernel(s, mark, &after_kernel);
    assert_true(st1 == RILL_OK || st1 == RILL_ERROR_KERNEL_FAILED);
    assert_true(st2 == RILL_OK || st2 == RILL_ERROR_KERNEL_FAILED);

    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_non_null(strstr(rill_last_error(), "kernel-said-boom-42"));
    assert_non_null(strstr(rill_last_error(), "sticky-stream-7"));

    /* query reports the error with its own sentence: fail differently first. */
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_create(NULL, 0, NULL));
    assert_null(strstr(rill_last_error(), "kernel-said-boom-42"));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_query(s));
    assert_non_null(strstr(rill_last_error(), "kernel-said-boom-42"));

    /* Work submitted after the failure is skipped too, until the error is cleared. */
    rill_status st3 = rill_launch_host_func(s, marker_fn, (void *)&later);
    assert_true(st3 == RILL_OK || st3 == RILL_ERROR_KERNEL_FAILED);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));

    assert_true(atomic_load(&before) != 0);
    assert_true(atomic_load(&failed_ran));
    assert_true(atomic_load(&after_host) == 0);
    assert_true(atomic_load(&after_kernel) == 0);
    assert_true(atomic_load(&later) == 0);

    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_synchronize(s));
    assert_true(atomic_load(&after_host) == 0);
    assert_true(atomic_load(&after_kernel) == 0);
    assert_true(atomic_load(&later) == 0);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(fail));
    RT_OK(rill_kernel_destroy(mark));
}

/* What a failing host function does: fails with `first`, then with `second` (which must not
 * count), and stores the statuses of both calls. */
typedef struct host_fail_args {
    const char *first, *second;
    atomic_int first_status, second_status, ran;
} host_fail_args;

static void host_fail_fn(void *user_data) {
    host_fail_args *a = user_data;
    atomic_store(&a->first_status, (int)rill_host_func_fail(a->first));
    if (a->second != NULL)
        atomic_store(&a->second_status, (int)rill_host_func_fail(a->second));
    atomic_store(&a->ran, 1);
}

/* rill_host_func_fail: "once fn returns, its stream's error is sticky (see
 * rill_stream_clear_error) and the stream's sentence ends in message"; "the first call's
 * message counts"; the stream's later work is skipped until the clear, then runs again, and a
 * host function that does not fail after the clear leaves the stream well. */
static void test_stream_host_func_fail_is_sticky_with_its_message(void **state) {
    (void)state;
    static host_fail_args a;
    static _Atomic uint64_t after, cleared, well;
    memset(&a, 0, sizeof a);
    a.first = "host-said-boom-17";
    a.second = "second-message-ignored";
    atomic_store(&after, 0);
    atomic_store(&cleared, 0);
    atomic_store(&well, 0);
    rill_stream *s = new_stream(0);
    RT_OK(rill_stream_set_name(s, "host-fail-stream"));
    RT_OK(rill_launch_host_func(s, host_fail_fn, &a));
    rill_status st = rill_launch_host_func(s, marker_fn, (void *)&after);
    assert_true(st == RILL_OK || st == RILL_ERROR_KERNEL_FAILED);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_non_null(strstr(rill_last_error(), "host function on stream 'host-fail-stream' failed: "
                                              "host-said-boom-17"));
    assert_null(strstr(rill_last_error(), "second-message-ignored"));
    assert_int_equal(atomic_load(&a.ran), 1);
    assert_int_equal(atomic_load(&a.first_status), RILL_OK);
    assert_int_equal(atomic_load(&a.second_status), RILL_OK);
    assert_true(atomic_load(&after) == 0);

    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&cleared));
    RT_OK(rill_stream_synchronize(s));
    assert_true(atomic_load(&cleared) != 0);
    assert_true(atomic_load(&after) == 0);
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&well));
    RT_OK(rill_stream_synchronize(s));
    assert_true(atomic_load(&well) != 0);
    RT_OK(rill_stream_destroy(s));
}

static void kernel_calls_host_fail(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    atomic_int *status;
    memcpy(&status, args, sizeof status);
    atomic_store(status, (int)rill_host_func_fail("from-a-kernel"));
}

/* rill_host_func_fail: "RILL_ERROR_NOT_PERMITTED when the calling thread is not running a host
 * function": from the host and from a kernel body, which fails nothing. */
static void test_stream_host_func_fail_outside_host_function_is_not_permitted(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_NOT_PERMITTED, rill_host_func_fail("from-the-host"));
    assert_non_null(strstr(rill_last_error(), "rill_host_func_fail"));
    static atomic_int status;
    atomic_store(&status, -1);
    atomic_int *p = &status;
    rill_kernel *k = make_kernel("calls_host_fail", kernel_calls_host_fail);
    rill_stream *s = new_stream(0);
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &p, .args_size = sizeof p};
    RT_OK(rill_launch_kernel(s, k, &launch));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&status), RILL_ERROR_NOT_PERMITTED);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* A failing host function is a failure like a kernel's: "streams that wait on that work fail
 * too", and their sentence names the host function's message. */
static void test_stream_waiting_on_failed_host_func_fails(void **state) {
    (void)state;
    static host_fail_args a;
    static _Atomic uint64_t b_after;
    memset(&a, 0, sizeof a);
    a.first = "host-root-cause-23";
    atomic_store(&b_after, 0);
    rill_stream *s = new_stream(0), *b = new_stream(0);
    RT_OK(rill_launch_host_func(s, host_fail_fn, &a));
    RT_OK(rill_stream_wait_stream(b, s));
    rill_status st = rill_launch_host_func(b, marker_fn, (void *)&b_after);
    assert_true(st == RILL_OK || st == RILL_ERROR_KERNEL_FAILED);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    assert_non_null(strstr(rill_last_error(), "host-root-cause-23"));
    assert_true(atomic_load(&b_after) == 0);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_clear_error(b));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(b));
}

/* Sticky errors: "streams that wait on that work fail too: nothing runs on inputs that were
 * never produced" (through wait_event and wait_stream alike); their earlier work still runs. */
static void test_stream_waiting_on_failed_work_fails(void **state) {
    (void)state;
    static atomic_int failed_ran;
    static _Atomic uint64_t b_before, b_after, c_after, b_cleared;
    atomic_store(&failed_ran, 0);
    atomic_store(&b_before, 0);
    atomic_store(&b_after, 0);
    atomic_store(&c_after, 0);
    atomic_store(&b_cleared, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_stream *a = new_stream(0);
    rill_stream *b = new_stream(0);
    rill_stream *c = new_stream(0);
    RT_OK(rill_stream_set_name(a, "producer"));
    rill_event *e = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));

    RT_OK(launch_fail_kernel(a, fail, "no-input-produced", &failed_ran));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b_before));
    RT_OK(rill_stream_wait_event(b, e));
    rill_status sb = rill_launch_host_func(b, marker_fn, (void *)&b_after);
    RT_OK(rill_stream_wait_stream(c, a));
    rill_status sc = rill_launch_host_func(c, marker_fn, (void *)&c_after);
    assert_true(sb == RILL_OK || sb == RILL_ERROR_KERNEL_FAILED);
    assert_true(sc == RILL_OK || sc == RILL_ERROR_KERNEL_FAILED);

    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(c));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(a));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_query(b));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_query(c));
    assert_true(atomic_load(&failed_ran));
    assert_true(atomic_load(&b_before) != 0);
    assert_true(atomic_load(&b_after) == 0);
    assert_true(atomic_load(&c_after) == 0);

    /* After clearing, b runs new work; a's failure is not re-inherited. */
    RT_OK(rill_stream_clear_error(b));
    RT_OK(rill_launch_host_func(b, marker_fn, (void *)&b_cleared));
    RT_OK(rill_stream_synchronize(b));
    assert_true(atomic_load(&b_cleared) != 0);
    assert_true(atomic_load(&b_after) == 0);

    RT_OK(rill_stream_clear_error(a));
    RT_OK(rill_stream_clear_error(c));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(c));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_kernel_destroy(fail));
}

typedef struct block_fail_args {
    uint32_t failing_block;
    atomic_int *blocks_ran;
} block_fail_args;

static void block_fail_kernel(const rill_block_ctx *ctx, const void *args) {
    block_fail_args a;
    memcpy(&a, args, sizeof a);
    atomic_fetch_add(a.blocks_ran, 1);
    if (ctx->block_idx.x == a.failing_block)
        rill_kernel_fail(ctx, "block-seven-failed");
}

/* Sticky errors: one failing block fails its whole launch; the stream's later work is skipped
 * and synchronize reports the block's message. */
static void test_stream_multi_block_kernel_fail_is_sticky(void **state) {
    (void)state;
    static atomic_int blocks_ran;
    static _Atomic uint64_t after;
    atomic_store(&blocks_ran, 0);
    atomic_store(&after, 0);
    rill_kernel *k = make_kernel("block_fail_kernel", block_fail_kernel);
    rill_stream *s = new_stream(0);
    block_fail_args a = {7, &blocks_ran};
    rill_launch launch = {
        .grid = {16, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, k, &launch));
    rill_status st = rill_launch_host_func(s, marker_fn, (void *)&after);
    assert_true(st == RILL_OK || st == RILL_ERROR_KERNEL_FAILED);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_non_null(strstr(rill_last_error(), "block-seven-failed"));
    assert_true(atomic_load(&blocks_ran) >= 1);
    assert_true(atomic_load(&blocks_ran) <= 16);
    assert_true(atomic_load(&after) == 0);
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* Sticky errors: "streams that wait on that work fail too: nothing runs on inputs that were
 * never produced". Work that failed stays failed: an event recorded behind it still reports
 * RILL_ERROR_KERNEL_FAILED, and a stream that waits on it still fails, after the producer was
 * cleared and has failed again since. */
static void test_stream_failed_work_stays_failed_after_later_failures(void **state) {
    (void)state;
    static atomic_int ran1, ran2;
    static _Atomic uint64_t consumer_ran;
    atomic_store(&ran1, 0);
    atomic_store(&ran2, 0);
    atomic_store(&consumer_ran, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_stream *producer = new_stream(0);
    rill_stream *consumer = new_stream(0);
    rill_event *e = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));

    RT_OK(launch_fail_kernel(producer, fail, "first-failure", &ran1));
    RT_OK(rill_event_record(e, producer)); /* e captures the failed work */
    RT_OK(rill_stream_clear_error(producer));
    RT_OK(rill_stream_synchronize(producer));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_event_synchronize(e));

    RT_OK(launch_fail_kernel(producer, fail, "second-failure", &ran2));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(producer));
    rill_status event_after = rill_event_synchronize(e);

    RT_OK(rill_stream_wait_event(consumer, e));
    rill_status st = rill_launch_host_func(consumer, marker_fn, (void *)&consumer_ran);
    assert_true(st == RILL_OK || st == RILL_ERROR_KERNEL_FAILED);
    rill_status consumer_synced = rill_stream_synchronize(consumer);

    assert_true(atomic_load(&ran1));
    assert_true(atomic_load(&ran2));
    if (event_after != RILL_ERROR_KERNEL_FAILED)
        fail_msg("an event recorded behind failed work returned %s after a later failure",
                 rill_status_name(event_after));
    if (atomic_load(&consumer_ran) != 0 || consumer_synced != RILL_ERROR_KERNEL_FAILED)
        fail_msg("a stream waiting on failed work ran it (%d) and synchronized with %s",
                 atomic_load(&consumer_ran) != 0, rill_status_name(consumer_synced));

    RT_OK(rill_stream_clear_error(producer));
    RT_OK(rill_stream_clear_error(consumer));
    RT_OK(rill_stream_synchronize(producer));
    RT_OK(rill_stream_synchronize(consumer));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(producer));
    RT_OK(rill_stream_destroy(consumer));
    RT_OK(rill_kernel_destroy(fail));
}

/* "Clearing lets the stream run new work again": rill_stream_clear_error is stream-ordered, so
 * work queued before it (behind the failure) is skipped and work queued after it runs; then
 * query and synchronize return RILL_OK. */
static void test_stream_clear_error_is_stream_ordered(void **state) {
    (void)state;
    static rt_gate g;
    static atomic_int failed_ran;
    static _Atomic uint64_t skipped, runs;
    rt_gate_reset(&g);
    atomic_store(&failed_ran, 0);
    atomic_store(&skipped, 0);
    atomic_store(&runs, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_stream *s = new_stream(0);

    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(launch_fail_kernel(s, fail, "first-failure", &failed_ran));
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&skipped));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&runs));
    rt_gate_open(&g);
    rill_status synced = rill_stream_synchronize(s);

    assert_false(atomic_load(&g.timed_out));
    assert_int_equal(synced, RILL_OK);
    RT_OK(rill_stream_query(s));
    assert_true(atomic_load(&failed_ran));
    assert_true(atomic_load(&skipped) == 0);
    assert_true(atomic_load(&runs) != 0);

    /* Clearing a stream without an error is harmless. */
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(fail));
}

/* "Work submitted to stream after this call waits for all work submitted to other before this
 * call", also when stream is failing at the time of the wait: the work after a later
 * rill_stream_clear_error runs only once other's work is done. */
static void test_stream_wait_made_while_failing_still_orders_work_after_clear(void **state) {
    (void)state;
    static rt_gate g;
    static atomic_int failed_ran;
    static _Atomic uint64_t after_clear;
    rt_gate_reset(&g);
    atomic_store(&failed_ran, 0);
    atomic_store(&after_clear, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_kernel *marker = make_kernel("marker_kernel", marker_kernel);
    rill_stream *s = new_stream(0), *other = new_stream(0);

    RT_OK(launch_fail_kernel(s, fail, "failing before the wait", &failed_ran));
    RT_OK(rill_launch_host_func(other, rt_gate_fn, &g));
    RT_OK(rill_stream_wait_stream(s, other));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(launch_marker_kernel(s, marker, &after_clear));
    assert_true(rt_gate_wait_entered(&g));
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_synchronize(other));

    assert_false(atomic_load(&g.timed_out));
    assert_true(atomic_load(&failed_ran));
    assert_true(atomic_load(&after_clear) > atomic_load(&g.end_ticket));
    RT_OK(rill_stream_destroy(other));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(marker));
    RT_OK(rill_kernel_destroy(fail));
}

/* "Clearing lets the stream run new work again": work submitted after
 * rill_stream_clear_error is not reported failed, by query or by a wait,
 * while the clear itself has not run yet (it waits behind a gate). */
static void
test_stream_work_after_a_clear_is_not_reported_failed_before_the_clear_runs(void **state) {
    (void)state;
    static rt_gate g;
    static atomic_int failed_ran;
    static _Atomic uint64_t ran_after;
    rt_gate_reset(&g);
    atomic_store(&failed_ran, 0);
    atomic_store(&ran_after, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_stream *s = new_stream(0), *gated = new_stream(0), *waiter = new_stream(0);
    RT_OK(launch_fail_kernel(s, fail, "failing before the clear", &failed_ran));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    RT_OK(rill_launch_host_func(gated, rt_gate_fn, &g));
    RT_OK(rill_stream_wait_stream(s, gated)); /* holds the clear back */
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_launch_host_func(s, marker_fn, (void *)&ran_after));
    assert_int_equal(rill_stream_query(s), RILL_NOT_READY);
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_record(e, s));
    assert_int_equal(rill_event_query(e), RILL_NOT_READY);
    RT_OK(rill_stream_wait_event(waiter, e));
    assert_true(rt_gate_wait_entered(&g));
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_synchronize(waiter));
    assert_false(atomic_load(&g.timed_out));
    assert_true(atomic_load(&ran_after) > atomic_load(&g.end_ticket));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(waiter));
    RT_OK(rill_stream_destroy(gated));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(fail));
}

/* The number of times needle occurs in hay. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* "streams that wait on that work fail too": the sentence of a stream that a failure reached
 * through waits names the root cause (the kernel, its stream and message) once, the streams
 * it went through, and the advice once. */
static void test_stream_failure_through_waits_names_root_cause_once(void **state) {
    (void)state;
    static atomic_int failed_ran;
    atomic_store(&failed_ran, 0);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_stream *a = new_stream(0), *b = new_stream(0), *c = new_stream(0);
    RT_OK(rill_stream_set_name(a, "first"));
    RT_OK(rill_stream_set_name(b, "second"));
    RT_OK(rill_stream_set_name(c, "third"));
    RT_OK(launch_fail_kernel(a, fail, "root-cause-17", &failed_ran));
    RT_OK(rill_stream_wait_stream(b, a));
    RT_OK(rill_stream_wait_stream(c, b));

    static const char root[] = "rill_stream_synchronize: kernel 'fail_kernel' on stream "
                               "'first' failed: root-cause-17; ";
    static const char *const whose[] = {"'first'", "'second'", "'third'"};
    rill_stream *streams[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(streams[i]));
        const char *e = rill_last_error();
        if (strncmp(e, root, sizeof root - 1) != 0 || count_of(e, "root-cause-17") != 1 ||
            count_of(e, "fail_kernel") != 1 || count_of(e, "rill_stream_synchronize") != 1 ||
            count_of(e, "skips") != 1 || count_of(e, "rill_stream_clear_error") != 1 ||
            strstr(e, whose[i]) == NULL)
            fail_msg("stream %s: \"%s\"", whose[i], e);
    }
    /* The last stream names the one it waited for, whose failure came from further back. */
    assert_non_null(strstr(rill_last_error(), "stream 'third' waited for it through stream "
                                              "'second'"));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_device_synchronize(NULL));
    assert_int_equal(count_of(rill_last_error(), "root-cause-17"), 1);
    for (int i = 0; i < 3; i++) {
        RT_OK(rill_stream_clear_error(streams[i]));
        RT_OK(rill_stream_destroy(streams[i]));
    }
    RT_OK(rill_kernel_destroy(fail));
}

/* rill_kernel_fail's message goes into the sentence whole when it fits; a longer one is cut at
 * a word, and "..." says so. */
static void test_stream_long_kernel_message_is_cut_at_a_word(void **state) {
    (void)state;
    static atomic_int failed_ran;
    static char message[600];
    atomic_store(&failed_ran, 0);
    size_t n = 0;
    for (int i = 0; n + 12 < sizeof message; i++)
        n += (size_t)snprintf(message + n, sizeof message - n, "w%03d-x ", i);
    rill_kernel *fail = make_kernel("fail_kernel", fail_kernel);
    rill_stream *a = new_stream(0), *b = new_stream(0);
    RT_OK(launch_fail_kernel(a, fail, message, &failed_ran));
    RT_OK(rill_stream_wait_stream(b, a));
    rill_stream *streams[] = {a, b};
    for (int i = 0; i < 2; i++) {
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(streams[i]));
        const char *e = rill_last_error();
        const char *cut = strstr(e, "...");
        const char *start = strstr(e, "w000-x ");
        assert_non_null(cut);
        assert_non_null(start);
        /* Whole words up to the ellipsis: "... w041-x w042-x..." */
        size_t kept = (size_t)(cut - start);
        assert_true(kept > 100);
        assert_memory_equal(start, message, kept);
        assert_true(message[kept] == ' ');
        assert_int_equal(count_of(e, "..."), 1);
        assert_int_equal(count_of(e, "skips"), 1);
    }
    for (int i = 0; i < 2; i++) {
        RT_OK(rill_stream_clear_error(streams[i]));
        RT_OK(rill_stream_destroy(streams[i]));
    }
    RT_OK(rill_kernel_destroy(fail));
}

/* A wait that cannot be queued (no memory for the command) fails with a sentence that names
 * rill_stream_wait_stream once and the cause as the backend gave it. The stream's queue takes
 * memory only now and then (a block of commands at a time): waits are queued until one fails. */
static void test_stream_wait_that_cannot_be_queued_names_the_call_once(void **state) {
    (void)state;
    static rt_gate g;
    rt_gate_reset(&g);
    rill_stream *other = new_stream(0), *s = new_stream(0);
    RT_OK(rill_launch_host_func(other, rt_gate_fn, &g)); /* the wait cannot be skipped */
    int failures = 0;
    for (int waits = 0; waits < 1000 && failures == 0; waits++) {
        rill_status st = RILL_ERROR_OUT_OF_MEMORY;
        for (long k = 1; k < 50 && st != RILL_OK; k++) {
            rill__alloc_fail_after(k);
            st = rill_stream_wait_stream(s, other);
            rill__alloc_fail_after(0);
            if (st == RILL_OK)
                break;
            failures++;
            const char *e = rill_last_error();
            if (st != RILL_ERROR_OUT_OF_MEMORY ||
                strncmp(e, "rill_stream_wait_stream: out of host memory", 43) != 0 ||
                count_of(e, "rill_stream_wait_stream") != 1 || count_of(e, "out of") != 1)
                fail_msg("failing allocation %ld: %s: \"%s\"", k, rill_status_name(st), e);
        }
        RT_OK(st);
    }
    assert_true(failures > 0);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(other));
}

/* "Destroying a stream ... with work still pending is allowed" and "A NULL rill_stream* means
 * the calling thread's current stream": once the current stream is destroyed, NULL means the
 * device's default stream again, and the destroyed stream's work still completes. */
static void test_stream_destroying_the_current_stream_falls_back_to_default(void **state) {
    (void)state;
    rill_stream *s;
    _Atomic uint64_t ran = 0, ran_default = 0;
    RT_OK(rill_stream_create(NULL, 0, &s));
    rill_stream *prev = rill_set_current_stream(s);
    RT_OK(rill_launch_host_func(NULL, marker_fn, (void *)&ran));
    RT_OK(rill_stream_destroy(s));
    assert_ptr_equal(rill_current_stream(NULL), rill_default_stream(NULL));
    RT_OK(rill_launch_host_func(NULL, marker_fn, (void *)&ran_default));
    RT_OK(rill_stream_synchronize(NULL));
    RT_OK(rill_device_synchronize(NULL));
    assert_true(atomic_load(&ran) != 0);
    assert_true(atomic_load(&ran_default) != 0);
    rill_set_current_stream(prev);
}

/* The x and y: a host function on the destroyed stream sets x,
 * one on the default stream reads it. */
typedef struct order_pair {
    _Atomic int x, y;
} order_pair;

static void set_x_fn(void *user_data) {
    atomic_store(&((order_pair *)user_data)->x, 1);
}

static void read_x_fn(void *user_data) {
    order_pair *p = user_data;
    atomic_store(&p->y, atomic_load(&p->x) + 1);
}

static void *destroy_stream_fn(void *stream) {
    RT_OK(rill_stream_destroy(stream));
    return NULL;
}

/* A thread's current stream destroyed by another thread: the thread's next
 * calls with NULL go to the default stream, and run after the work it
 * queued on the destroyed stream, not beside it. */
static void test_stream_destroyed_current_stream_keeps_the_threads_order(void **state) {
    (void)state;
    static rt_gate g;
    for (int round = 0; round < 4; round++) {
        rt_gate_reset(&g);
        order_pair p = {0, 0};
        rill_stream *s;
        RT_OK(rill_stream_create(NULL, 0, &s));
        rill_stream *prev = rill_set_current_stream(s);
        RT_OK(rill_launch_host_func(NULL, rt_gate_fn, &g));
        RT_OK(rill_launch_host_func(NULL, set_x_fn, &p));
        pthread_t other;
        assert_int_equal(pthread_create(&other, NULL, destroy_stream_fn, s), 0);
        assert_int_equal(pthread_join(other, NULL), 0);
        RT_OK(rill_launch_host_func(NULL, read_x_fn, &p));
        assert_ptr_equal(rill_current_stream(NULL), rill_default_stream(NULL));
        rt_gate_open(&g);
        RT_OK(rill_stream_synchronize(NULL));
        assert_int_equal(atomic_load(&p.y), 2);
        rill_set_current_stream(prev);
    }
}

/* An unnamed stream is named in sentences by its handle, the value the program holds ("a
 * handle is not the address of anything"), never by an address of rill's. */
static void test_stream_unnamed_is_named_by_its_handle(void **state) {
    (void)state;
    static host_fail_args a;
    memset(&a, 0, sizeof a);
    a.first = "unnamed-boom";
    rill_stream *s = new_stream(0);
    RT_OK(rill_launch_host_func(s, host_fail_fn, &a));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    char want[96];
    snprintf(want, sizeof want, "host function on stream %p failed: unnamed-boom", (void *)s);
    if (strstr(rill_last_error(), want) == NULL)
        fail_msg("the sentence should name the stream by its handle (%s): %s", want,
                 rill_last_error());
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_create_and_destroy),
        cmocka_unit_test(test_stream_destroying_the_current_stream_falls_back_to_default),
        cmocka_unit_test(test_stream_destroyed_current_stream_keeps_the_threads_order),
        cmocka_unit_test(test_stream_bad_arguments_are_invalid),
        cmocka_unit_test(test_stream_priority_is_clamped),
        cmocka_unit_test(test_stream_default_is_not_destroyable),
        cmocka_unit_test(test_stream_current_is_default_until_set),
        cmocka_unit_test(test_stream_set_current_returns_previous_and_nests),
        cmocka_unit_test(test_stream_set_current_null_selects_default),
        cmocka_unit_test(test_stream_current_is_per_thread),
        cmocka_unit_test(test_stream_null_means_current),
        cmocka_unit_test(test_stream_query_empty_is_ok),
        cmocka_unit_test(test_stream_query_not_ready_while_work_pending),
        cmocka_unit_test(test_stream_synchronize_waits_for_work),
        cmocka_unit_test(test_stream_synchronize_for_ends_at_its_limit_and_may_wait_again),
        cmocka_unit_test(test_stream_synchronize_for_racing_its_limit_is_ok_or_not_ready),
        cmocka_unit_test(test_stream_runs_commands_in_order),
        cmocka_unit_test(test_stream_order_across_streams_and_threads),
        cmocka_unit_test(test_stream_order_with_concurrent_submitters),
        cmocka_unit_test(test_stream_wait_stream_orders_work),
        cmocka_unit_test(test_stream_wait_stream_null_other_is_current),
        cmocka_unit_test(test_stream_default_has_no_implicit_sync),
        cmocka_unit_test(test_stream_wait_event_uses_record_at_call_time),
        cmocka_unit_test(test_stream_wait_unrecorded_event_does_nothing),
        cmocka_unit_test(test_native_handles_of_the_cpu_device),
        cmocka_unit_test(test_streams_run_concurrently),
        cmocka_unit_test(test_stream_tagged_same_tag_same_stream),
        cmocka_unit_test(test_stream_tagged_is_not_destroyable),
        cmocka_unit_test(test_stream_tagged_first_use_from_many_threads),
        cmocka_unit_test(test_stream_destroy_with_pending_work_completes),
        cmocka_unit_test(test_stream_kernel_fail_is_sticky_and_named),
        cmocka_unit_test(test_stream_host_func_fail_is_sticky_with_its_message),
        cmocka_unit_test(test_stream_unnamed_is_named_by_its_handle),
        cmocka_unit_test(test_stream_host_func_fail_outside_host_function_is_not_permitted),
        cmocka_unit_test(test_stream_waiting_on_failed_host_func_fails),
        cmocka_unit_test(test_stream_waiting_on_failed_work_fails),
        cmocka_unit_test(test_stream_multi_block_kernel_fail_is_sticky),
        cmocka_unit_test(test_stream_failed_work_stays_failed_after_later_failures),
        cmocka_unit_test(test_stream_clear_error_is_stream_ordered),
        cmocka_unit_test(test_stream_wait_made_while_failing_still_orders_work_after_clear),
        cmocka_unit_test(
            test_stream_work_after_a_clear_is_not_reported_failed_before_the_clear_runs),
        cmocka_unit_test(test_stream_failure_through_waits_names_root_cause_once),
        cmocka_unit_test(test_stream_long_kernel_message_is_cut_at_a_word),
        cmocka_unit_test(test_stream_wait_that_cannot_be_queued_names_the_call_once),
    };
    return RT_RUN(tests);
}
