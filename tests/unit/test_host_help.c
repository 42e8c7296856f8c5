/* SPDX-License-Identifier: MIT */
/* A host thread that waits for work no awake worker has taken runs that work itself: compute
 * units stay unique, host functions run as on a worker, and stream order, sticky errors, stream
 * destruction and shutdown keep their rules.
 *
 * Whether the waiting thread or a worker runs a command is up to timing; the tests that need the
 * host to run it pause first (so the workers sleep) and repeat until it did, and check the rules
 * whoever ran it. Kernels and host functions report through atomics; only the main thread
 * asserts. */
#include "fixture.h"

#include "backend/cpu/cpu.h"
#include "core/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum {
    MAX_UNITS = 64,
    ATTEMPTS = 50,  /* tries for the host to be the one that runs the work */
    PAUSE_US = 3000 /* long enough for idle workers to go to sleep */
};

static rill_kernel *make_kernel(const char *name, rill_cpu_kernel_fn fn) {
    rill_kernel_desc desc = {.name = name, .cpu = fn};
    rill_kernel *k = NULL;
    RT_OK(rill_kernel_create(&desc, &k));
    return k;
}

static int compute_units(void) {
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    assert_true(info.compute_units > 0 && info.compute_units <= MAX_UNITS);
    return info.compute_units;
}

/* ---- who ran it ---- */

typedef struct ran_on {
    pthread_t host; /* the waiting thread */
    atomic_int runs;
    atomic_int on_host;
} ran_on;

static void note_thread(ran_on *r) {
    atomic_fetch_add(&r->runs, 1);
    if (pthread_equal(pthread_self(), r->host))
        atomic_fetch_add(&r->on_host, 1);
}

static void note_thread_fn(void *user_data) {
    note_thread(user_data);
}

/* "the waiting thread does the work": after a pause, a launch and a synchronize of a default
 * event run the command on the synchronizing thread (at least once in a few tries: a worker
 * that is still awake may take it first). */
static void test_waiting_host_runs_work_no_worker_took(void **state) {
    (void)state;
    rill_stream *s;
    rill_event *e;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    static ran_on r;
    memset(&r, 0, sizeof r);
    r.host = pthread_self();
    for (int i = 0; i < ATTEMPTS && atomic_load(&r.on_host) == 0; i++) {
        rt_sleep_us(PAUSE_US);
        RT_OK(rill_launch_host_func(s, note_thread_fn, &r));
        RT_OK(rill_event_record(e, s));
        RT_OK(rill_event_synchronize(e));
        assert_int_equal(atomic_load(&r.runs), i + 1);
    }
    assert_true(atomic_load(&r.on_host) > 0);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

/* ---- compute units ---- */

typedef struct unit_check {
    int units;
    atomic_int busy[MAX_UNITS]; /* blocks running as each unit now */
    atomic_int clashes;         /* a block found its unit busy */
    atomic_int out_of_range;
    atomic_int blocks;
    ran_on who;
} unit_check;

typedef struct unit_args {
    unit_check *check;
    pthread_t host;
} unit_args;

static void unit_kernel(const rill_block_ctx *ctx, const void *args) {
    unit_args a;
    memcpy(&a, args, sizeof a);
    unit_check *u = a.check;
    int w = ctx->worker;
    if (w < 0 || w >= u->units) {
        atomic_fetch_add(&u->out_of_range, 1);
        return;
    }
    if (atomic_fetch_add(&u->busy[w], 1) != 0)
        atomic_fetch_add(&u->clashes, 1);
    rt_spin_us(20);
    atomic_fetch_sub(&u->busy[w], 1);
    atomic_fetch_add(&u->blocks, 1);
    atomic_fetch_add(&u->who.runs, 1);
    if (pthread_equal(pthread_self(), a.host))
        atomic_fetch_add(&u->who.on_host, 1);
}

enum { UNIT_THREADS = 3, UNIT_ROUNDS = 40, UNIT_BLOCKS = 12 };

typedef struct unit_thread {
    unit_check *check;
    rill_kernel *kernel;
    int index;
    atomic_int failures;
} unit_thread;

static void *unit_thread_main(void *arg) {
    unit_thread *t = arg;
    rill_stream *s = NULL;
    if (rill_stream_create(NULL, 0, &s) != RILL_OK) {
        atomic_fetch_add(&t->failures, 1);
        return NULL;
    }
    unit_args a = {t->check, pthread_self()};
    rill_launch launch = {
        .grid = {UNIT_BLOCKS, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    for (int r = 0; r < UNIT_ROUNDS; r++) {
        /* Pauses of 0 to 3 ms: sometimes the workers are awake, sometimes asleep. */
        rt_sleep_us((unsigned)((r * 7 + t->index * 3) % 4) * 1000u);
        if (rill_launch_kernel(s, t->kernel, &launch) != RILL_OK ||
            rill_stream_synchronize(s) != RILL_OK)
            atomic_fetch_add(&t->failures, 1);
    }
    if (rill_stream_destroy(s) != RILL_OK)
        atomic_fetch_add(&t->failures, 1);
    return NULL;
}

/* rill_block_ctx.worker: "which compute unit runs this block". Blocks that run at once, on
 * workers and on host threads that run kernels while they wait, never share a unit, and every
 * unit is one of the device's. */
/* Runs UNIT_THREADS threads of thread_main against one check; each runs blocks_per_thread
 * blocks. Returns the check, whose units never clashed. */
static unit_check *run_unit_threads(void *(*thread_main)(void *), int blocks_per_thread) {
    static unit_check u;
    memset(&u, 0, sizeof u);
    u.units = compute_units();
    rill_kernel *k = make_kernel("unit_check", unit_kernel);
    static unit_thread threads[UNIT_THREADS];
    pthread_t handles[UNIT_THREADS];
    for (int i = 0; i < UNIT_THREADS; i++) {
        threads[i] = (unit_thread){.check = &u, .kernel = k, .index = i};
        assert_int_equal(pthread_create(&handles[i], NULL, thread_main, &threads[i]), 0);
    }
    for (int i = 0; i < UNIT_THREADS; i++) {
        assert_int_equal(pthread_join(handles[i], NULL), 0);
        assert_int_equal(atomic_load(&threads[i].failures), 0);
    }
    assert_int_equal(atomic_load(&u.out_of_range), 0);
    assert_int_equal(atomic_load(&u.clashes), 0);
    assert_int_equal(atomic_load(&u.blocks), UNIT_THREADS * blocks_per_thread);
    RT_OK(rill_kernel_destroy(k));
    return &u;
}

static void test_blocks_running_at_once_have_different_workers(void **state) {
    (void)state;
    unit_check *u = run_unit_threads(unit_thread_main, UNIT_ROUNDS * UNIT_BLOCKS);
    /* The waiting threads did run blocks themselves, next to the workers. */
    assert_true(atomic_load(&u->who.on_host) > 0);
    assert_true(atomic_load(&u->who.on_host) < atomic_load(&u->who.runs));
}

/* ---- graph launches ---- */

typedef struct root_args {
    ran_on *who;
    unsigned us;
} root_args;

static void root_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    root_args a;
    memcpy(&a, args, sizeof a);
    note_thread(a.who);
    rt_spin_us(a.us);
}

/* A graph launch that a worker runs gets help from the thread that waits for it, as a launch's
 * blocks do: the blocks of its nodes run on the waiting thread too, each as a unit that nobody
 * else holds at the time. The graph's first node keeps the worker that took the launch busy
 * for 100 us; the waiting thread starts to wait once it runs, so that the node ends while the
 * thread still spins (60 us) rather than sleeps, and a try counts when the waiting thread ran
 * blocks of the second node (workers that wake may take them all). */
static void test_waiting_host_helps_a_graph_launch_a_worker_runs(void **state) {
    (void)state;
    static unit_check u;
    static ran_on root;
    memset(&u, 0, sizeof u);
    memset(&root, 0, sizeof root);
    u.units = compute_units();
    /* The waiting thread helps with a unit that no worker holds: a device of one unit
     * (RILL_CPU_DEVICES splits the processors) has none while its worker runs the graph. */
    if (u.units < 2)
        skip();
    root.host = pthread_self();
    rill_kernel *k = make_kernel("unit_check", unit_kernel);
    rill_kernel *first = make_kernel("first", root_kernel);
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    unit_args a = {&u, pthread_self()};
    root_args ra = {&root, 100};
    rill_launch one = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &ra, .args_size = sizeof ra};
    rill_launch many = {
        .grid = {UNIT_BLOCKS, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_launch_kernel(s, first, &one));
    RT_OK(rill_launch_kernel(s, k, &many));
    rill_graph *graph;
    rill_graph_exec *x;
    RT_OK(rill_stream_end_capture(s, &graph));
    RT_OK(rill_graph_instantiate(graph, &x));
    int helped = 0, tries = 0;
    /* Tries go on for seconds, not for a count: while other processes hold the processors, a
     * few hundred tries in a row may find no unit free (a tenth of a second). */
    uint64_t give_up = rt_now_ns() + 10000000000ull;
    for (; helped == 0 && rt_now_ns() < give_up; tries++) {
        int root_runs = atomic_load(&root.runs);
        int root_on_host = atomic_load(&root.on_host);
        int blocks_on_host = atomic_load(&u.who.on_host);
        RT_OK(rill_graph_launch(x, s));
        rill_status polled = rill_stream_query(s); /* a poll: a worker takes the launch */
        assert_true(polled == RILL_NOT_READY || polled == RILL_OK); /* OK: preempted meanwhile */
        /* The first node has started on a worker, however long the worker took to wake; it
         * ends 40 to 85 us before its 100 us, while this thread spins in its wait. */
        uint64_t deadline = rt_now_ns() + 100000000ull;
        while (atomic_load(&root.runs) == root_runs && rt_now_ns() < deadline)
            continue;
        rt_spin_us(40u + (unsigned)(tries % 4) * 15u);
        RT_OK(rill_stream_synchronize(s));
        if (atomic_load(&root.on_host) == root_on_host &&
            atomic_load(&u.who.on_host) > blocks_on_host)
            helped++;
    }
    assert_true(helped > 0);
    assert_int_equal(atomic_load(&u.out_of_range), 0);
    assert_int_equal(atomic_load(&u.clashes), 0);
    assert_int_equal(atomic_load(&u.blocks), tries * UNIT_BLOCKS);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(graph));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(first));
    RT_OK(rill_kernel_destroy(k));
}

/* Threads that each replay a graph of two multi-block kernels after pauses of 0 to 3 ms, and
 * wait for it: the workers and the waiting threads that help share the blocks, and blocks that
 * run at once never share a unit. */
static void *graph_thread_main(void *arg) {
    unit_thread *t = arg;
    rill_stream *s = NULL;
    rill_graph *g = NULL;
    rill_graph_exec *x = NULL;
    unit_args a = {t->check, pthread_self()};
    rill_launch launch = {
        .grid = {UNIT_BLOCKS, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    if (rill_stream_create(NULL, 0, &s) != RILL_OK ||
        rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL) != RILL_OK ||
        rill_launch_kernel(s, t->kernel, &launch) != RILL_OK ||
        rill_launch_kernel(s, t->kernel, &launch) != RILL_OK ||
        rill_stream_end_capture(s, &g) != RILL_OK || rill_graph_instantiate(g, &x) != RILL_OK) {
        atomic_fetch_add(&t->failures, 1);
        return NULL;
    }
    for (int r = 0; r < UNIT_ROUNDS; r++) {
        rt_sleep_us((unsigned)((r * 5 + t->index * 3) % 4) * 1000u);
        if (rill_graph_launch(x, s) != RILL_OK || rill_stream_synchronize(s) != RILL_OK)
            atomic_fetch_add(&t->failures, 1);
    }
    if (rill_graph_exec_destroy(x) != RILL_OK || rill_graph_destroy(g) != RILL_OK ||
        rill_stream_destroy(s) != RILL_OK)
        atomic_fetch_add(&t->failures, 1);
    return NULL;
}

static void test_graph_blocks_running_at_once_have_different_workers(void **state) {
    (void)state;
    run_unit_threads(graph_thread_main, UNIT_ROUNDS * 2 * UNIT_BLOCKS);
}

/* ---- host functions run as on a worker ---- */

typedef struct as_worker {
    ran_on who;
    rill_stream *other; /* made current by the function */
    atomic_int sync_status;
    atomic_int bad_create_status;
    atomic_int mode_was_global;
} as_worker;

static void act_as_worker(void *user_data) {
    as_worker *a = user_data;
    note_thread(&a->who);
    atomic_store(&a->sync_status, rill_stream_synchronize(a->other));
    rill_event *bad = NULL;
    atomic_store(&a->bad_create_status, rill_event_create(0x80u, &bad)); /* leaves a sentence */
    rill_set_current_stream(a->other);
    rill_capture_mode mode = RILL_CAPTURE_GLOBAL;
    rill_thread_exchange_capture_mode(&mode);
    atomic_store(&a->mode_was_global, mode == RILL_CAPTURE_GLOBAL);
    mode = RILL_CAPTURE_RELAXED; /* changed, as a function may: the waiting thread keeps its own */
    rill_thread_exchange_capture_mode(&mode);
}

/* rill_launch_host_func: "fn must not block on rill (synchronize calls from it return
 * RILL_ERROR_NOT_PERMITTED)", whichever thread runs it; a host function that the waiting thread
 * runs leaves that thread's current stream, capture mode and rill_last_error() sentence as they
 * were. */
static void test_host_function_run_by_waiting_thread_behaves_as_on_a_worker(void **state) {
    (void)state;
    rill_stream *s, *mine, *other;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_create(NULL, 0, &mine));
    RT_OK(rill_stream_create(NULL, 0, &other));
    rill_stream *prev = rill_set_current_stream(mine);
    rill_capture_mode mode = RILL_CAPTURE_THREAD_LOCAL;
    RT_OK(rill_thread_exchange_capture_mode(&mode));
    static as_worker a;
    memset(&a, 0, sizeof a);
    a.who.host = pthread_self();
    a.other = other;
    for (int i = 0; i < ATTEMPTS && atomic_load(&a.who.on_host) == 0; i++) {
        rt_sleep_us(PAUSE_US);
        rill_event *bad = NULL;
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_create(0x40u, &bad));
        char before[1024];
        snprintf(before, sizeof before, "%s", rill_last_error());
        RT_OK(rill_launch_host_func(s, act_as_worker, &a));
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(atomic_load(&a.sync_status), RILL_ERROR_NOT_PERMITTED);
        assert_int_equal(atomic_load(&a.bad_create_status), RILL_ERROR_INVALID_ARGUMENT);
        assert_true(atomic_load(&a.mode_was_global));
        assert_string_equal(rill_last_error(), before);
        assert_true(rill_current_stream(NULL) == mine);
        rill_capture_mode now = RILL_CAPTURE_THREAD_LOCAL;
        RT_OK(rill_thread_exchange_capture_mode(&now));
        assert_int_equal(now, RILL_CAPTURE_THREAD_LOCAL);
    }
    assert_true(atomic_load(&a.who.on_host) > 0);
    RT_OK(rill_thread_exchange_capture_mode(&mode));
    rill_set_current_stream(prev);
    RT_OK(rill_stream_destroy(other));
    RT_OK(rill_stream_destroy(mine));
    RT_OK(rill_stream_destroy(s));
}

/* The same from a thread that has no rill_last_error() sentence: after a host function it ran
 * itself left one, the thread still has none. */
static void *run_as_worker_without_sentence(void *arg) {
    as_worker *a = arg;
    a->who.host = pthread_self();
    rill_stream *s = NULL;
    if (rill_stream_create(NULL, 0, &s) != RILL_OK)
        return (void *)"rill_stream_create failed";
    const char *failure = NULL;
    for (int i = 0; i < ATTEMPTS && failure == NULL && atomic_load(&a->who.on_host) == 0; i++) {
        rt_sleep_us(PAUSE_US);
        if (rill_launch_host_func(s, act_as_worker, a) != RILL_OK ||
            rill_stream_synchronize(s) != RILL_OK)
            failure = "launch or synchronize failed";
        else if (atomic_load(&a->bad_create_status) != RILL_ERROR_INVALID_ARGUMENT)
            failure = "the host function's bad call did not fail";
        else if (rill_last_error()[0] != '\0')
            failure = "the waiting thread was left a sentence it never caused";
    }
    if (rill_stream_destroy(s) != RILL_OK && failure == NULL)
        failure = "rill_stream_destroy failed";
    return (void *)failure;
}

static void test_host_function_run_by_thread_without_sentence_leaves_none(void **state) {
    (void)state;
    static as_worker a;
    memset(&a, 0, sizeof a);
    RT_OK(rill_stream_create(NULL, 0, &a.other));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_as_worker_without_sentence, &a), 0);
    void *failure = NULL;
    assert_int_equal(pthread_join(t, &failure), 0);
    if (failure != NULL)
        fail_msg("%s", (const char *)failure);
    assert_true(atomic_load(&a.who.on_host) > 0);
    RT_OK(rill_stream_destroy(a.other));
}

/* Whichever thread runs them, and whatever the one before did, host functions start from a
 * worker's state: a function that made a stream current, changed its capture mode and left a
 * sentence leaves none of it to the next one. */
typedef struct fresh_state {
    rill_stream *other;
    atomic_int checked;
    atomic_int stale; /* how many checks found the previous function's state */
} fresh_state;

static void dirty_state(void *user_data) {
    fresh_state *f = user_data;
    rill_set_current_stream(f->other);
    rill_capture_mode mode = RILL_CAPTURE_RELAXED;
    rill_thread_exchange_capture_mode(&mode);
    rill_event *bad = NULL;
    (void)rill_event_create(0x80u, &bad); /* leaves a sentence */
}

static void check_state(void *user_data) {
    fresh_state *f = user_data;
    rill_capture_mode mode = RILL_CAPTURE_GLOBAL;
    rill_thread_exchange_capture_mode(&mode);
    if (rill_current_stream(NULL) == f->other || mode != RILL_CAPTURE_GLOBAL ||
        rill_last_error()[0] != '\0')
        atomic_fetch_add(&f->stale, 1);
    atomic_fetch_add(&f->checked, 1);
}

static void test_host_functions_start_from_a_worker_state(void **state) {
    (void)state;
    enum { ROUNDS = 200 };
    static fresh_state f;
    memset(&f, 0, sizeof f);
    rill_stream *s[2];
    RT_OK(rill_stream_create(NULL, 0, &s[0]));
    RT_OK(rill_stream_create(NULL, 0, &s[1]));
    RT_OK(rill_stream_create(NULL, 0, &f.other));
    for (int i = 0; i < ROUNDS; i++) {
        RT_OK(rill_launch_host_func(s[i % 2], dirty_state, &f));
        RT_OK(rill_launch_host_func(s[(i / 2) % 2], check_state, &f));
        if (i % 16 == 15)
            RT_OK(rill_stream_synchronize(s[i % 2])); /* the waiting thread runs some */
    }
    RT_OK(rill_device_synchronize(NULL));
    assert_int_equal(atomic_load(&f.checked), ROUNDS);
    assert_int_equal(atomic_load(&f.stale), 0);
    for (int i = 0; i < 2; i++)
        RT_OK(rill_stream_destroy(s[i]));
    RT_OK(rill_stream_destroy(f.other));
}

/* ---- capture rules ---- */

typedef struct unsafe_call {
    ran_on who;
    atomic_int malloc_status;
} unsafe_call;

static void call_unsafe(void *user_data) {
    unsafe_call *u = user_data;
    note_thread(&u->who);
    void *p = NULL;
    rill_status st = rill_malloc(NULL, 256, &p);
    atomic_store(&u->malloc_status, st);
    if (st == RILL_OK)
        rill_free(p);
}

/* Capture modes: "unsafe calls fail in the capturing thread" for a capture begun THREAD_LOCAL,
 * and a host function runs as on a worker, not as the capturing thread, even when the capturing
 * thread runs it while it waits: its rill_malloc is allowed and leaves the capture valid. */
static void test_host_function_run_by_capturing_thread_keeps_capture_rules(void **state) {
    (void)state;
    rill_stream *captured, *other;
    RT_OK(rill_stream_create(NULL, 0, &captured));
    RT_OK(rill_stream_create(NULL, 0, &other));
    static unsafe_call u;
    memset(&u, 0, sizeof u);
    u.who.host = pthread_self();
    static ran_on in_graph;
    for (int i = 0; i < ATTEMPTS && atomic_load(&u.who.on_host) == 0; i++) {
        rt_sleep_us(PAUSE_US);
        RT_OK(rill_stream_begin_capture(captured, RILL_CAPTURE_THREAD_LOCAL));
        RT_OK(rill_launch_host_func(captured, note_thread_fn, &in_graph));
        atomic_store(&u.malloc_status, -1);
        RT_OK(rill_launch_host_func(other, call_unsafe, &u));
        RT_OK(rill_stream_synchronize(other));
        assert_int_equal(atomic_load(&u.malloc_status), RILL_OK);
        rill_graph *g = NULL;
        RT_OK(rill_stream_end_capture(captured, &g));
        RT_OK(rill_graph_destroy(g));
    }
    assert_true(atomic_load(&u.who.on_host) > 0);
    assert_int_equal(atomic_load(&in_graph.runs), 0); /* captured, never launched */
    RT_OK(rill_stream_destroy(other));
    RT_OK(rill_stream_destroy(captured));
}

/* ---- stream order and sticky errors ---- */

typedef struct order_log {
    ran_on who;
    atomic_int next;
    atomic_int order[8];
} order_log;

typedef struct step_args {
    order_log *log;
    int step;
    int fail;
} step_args;

static void step_kernel(const rill_block_ctx *ctx, const void *args) {
    step_args a;
    memcpy(&a, args, sizeof a);
    note_thread(&a.log->who);
    atomic_store(&a.log->order[atomic_fetch_add(&a.log->next, 1)], a.step);
    if (a.fail)
        rill_kernel_fail(ctx, "step failed on purpose");
}

static void launch_step(rill_stream *s, rill_kernel *k, order_log *log, int step, int fail) {
    step_args a = {log, step, fail};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, k, &launch));
}

/* Sticky errors: "when a kernel or host function fails, the rest of its stream's work is
 * skipped, query/synchronize return RILL_ERROR_KERNEL_FAILED", also when the waiting thread runs
 * the stream's commands; commands run in stream order, and only up to the point awaited. */
static void test_host_runs_commands_in_order_with_sticky_errors(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("step", step_kernel);
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, "helped"));
    rill_event *mid;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &mid));
    static order_log log;
    for (int i = 0; i < ATTEMPTS; i++) {
        memset(&log, 0, sizeof log);
        log.who.host = pthread_self();
        rt_sleep_us(PAUSE_US);
        launch_step(s, k, &log, 1, 0);
        launch_step(s, k, &log, 2, 0);
        RT_OK(rill_event_record(mid, s));
        launch_step(s, k, &log, 3, 1);
        launch_step(s, k, &log, 4, 0); /* skipped */
        RT_OK(rill_event_synchronize(mid));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_non_null(strstr(rill_last_error(), "step failed on purpose"));
        assert_non_null(strstr(rill_last_error(), "'helped'"));
        assert_int_equal(atomic_load(&log.next), 3);
        for (int j = 0; j < 3; j++)
            assert_int_equal(atomic_load(&log.order[j]), j + 1);
        RT_OK(rill_stream_clear_error(s));
        RT_OK(rill_stream_synchronize(s));
        if (atomic_load(&log.who.on_host) > 0)
            break;
    }
    assert_true(atomic_load(&log.who.on_host) > 0);
    RT_OK(rill_event_destroy(mid));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* ---- lifetime ---- */

/* rill_stream_destroy with work pending: the stream lives until that work is done, also when the
 * thread that waits for it through an event runs it. */
static void test_host_runs_work_of_a_destroyed_stream(void **state) {
    (void)state;
    static ran_on r;
    memset(&r, 0, sizeof r);
    r.host = pthread_self();
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    for (int i = 0; i < ATTEMPTS && atomic_load(&r.on_host) == 0; i++) {
        rill_stream *s;
        RT_OK(rill_stream_create(NULL, 0, &s));
        rt_sleep_us(PAUSE_US);
        RT_OK(rill_launch_host_func(s, note_thread_fn, &r));
        RT_OK(rill_launch_host_func(s, note_thread_fn, &r));
        RT_OK(rill_event_record(e, s));
        RT_OK(rill_stream_destroy(s));
        RT_OK(rill_event_synchronize(e));
        assert_int_equal(atomic_load(&r.runs), 2 * (i + 1));
    }
    assert_true(atomic_load(&r.on_host) > 0);
    RT_OK(rill_event_destroy(e));
}

/* rill_device_synchronize waits for every stream; the waiting thread runs what no worker took,
 * stream by stream. */
static void test_device_synchronize_runs_work_of_every_stream(void **state) {
    (void)state;
    enum { STREAMS = 6 };
    static ran_on r;
    memset(&r, 0, sizeof r);
    r.host = pthread_self();
    rill_stream *s[STREAMS];
    for (int i = 0; i < STREAMS; i++)
        RT_OK(rill_stream_create(NULL, -(i % 3), &s[i]));
    for (int a = 0; a < ATTEMPTS && atomic_load(&r.on_host) == 0; a++) {
        rt_sleep_us(PAUSE_US);
        for (int i = 0; i < STREAMS; i++)
            RT_OK(rill_launch_host_func(s[i], note_thread_fn, &r));
        RT_OK(rill_device_synchronize(NULL));
        assert_int_equal(atomic_load(&r.runs), STREAMS * (a + 1));
    }
    assert_true(atomic_load(&r.on_host) > 0);
    for (int i = 0; i < STREAMS; i++)
        RT_OK(rill_stream_destroy(s[i]));
}

/* rill_shutdown waits for all work; the thread that shuts down may run it, and a fresh library
 * works afterwards. */
static void test_shutdown_runs_pending_work(void **state) {
    (void)state;
    enum { STREAMS = 4, PER_STREAM = 50 };
    static ran_on r;
    memset(&r, 0, sizeof r);
    r.host = pthread_self();
    rt_sleep_us(PAUSE_US);
    for (int i = 0; i < STREAMS; i++) {
        rill_stream *s;
        RT_OK(rill_stream_create(NULL, 0, &s));
        for (int j = 0; j < PER_STREAM; j++)
            RT_OK(rill_launch_host_func(s, note_thread_fn, &r));
    }
    RT_OK(rill_shutdown());
    assert_int_equal(atomic_load(&r.runs), STREAMS * PER_STREAM);
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_launch_host_func(s, note_thread_fn, &r));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&r.runs), STREAMS * PER_STREAM + 1);
    RT_OK(rill_stream_destroy(s));
}

/* ---- work that nobody waits for ---- */

static void set_flag(void *user_data) {
    atomic_store((atomic_int *)user_data, 1);
}

/* Makes the calling thread one that came back for its work: a launch after a pause, then a
 * wait for it. */
static void come_back_for_work(rill_stream *s) {
    static ran_on r;
    r.host = pthread_self();
    rt_sleep_us(PAUSE_US);
    RT_OK(rill_launch_host_func(s, note_thread_fn, &r));
    RT_OK(rill_stream_synchronize(s));
}

/* Work runs without the program waiting for it: a launch by a thread that came back for its
 * work before may leave waking a worker for later, and the work still runs while the thread
 * makes no rill call at all (here it watches a flag that the work sets). */
static void test_work_nobody_waits_for_still_runs(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    static atomic_int flag;
    for (int round = 0; round < 5; round++) {
        come_back_for_work(s);
        rt_sleep_us(PAUSE_US);
        atomic_store(&flag, 0);
        RT_OK(rill_launch_host_func(s, set_flag, &flag));
        uint64_t deadline = rt_now_ns() + 5000000000ull;
        while (!atomic_load(&flag) && rt_now_ns() < deadline)
            rt_sleep_us(50);
        assert_true(atomic_load(&flag));
        RT_OK(rill_stream_synchronize(s));
    }
    RT_OK(rill_stream_destroy(s));
}

static void nothing(void *user_data) {
    (void)user_data;
}

/* How often the device's watch ran work that a host thread had left to it (cpu.h). */
static uint64_t watch_catches(void) {
    rill_device *handle;
    rill__device *dev;
    RT_OK(rill_get_device(&handle));
    RT_OK(rill__device_resolve(handle, "watch_catches", &dev));
    return atomic_load(&cpu_device_of(dev)->watch_catches);
}

/* A thread that came back for its work before, and now submits a long batch without waiting:
 * the batch starts running while the thread still submits, although its first launch left the
 * wake-up for later, to the watch, which naps 4 ms at a time: the submits that follow wake a
 * worker. Whether the watch's nap or a wake-up started the batch is told by the watch's count
 * of the work it caught, not by the time the batch took to start, which a machine busy with
 * other processes stretches at will: without the wake-up the watch catches every round. */
static void test_a_long_batch_starts_while_the_thread_submits(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    static atomic_int flag;
    int caught = 0;
    for (int round = 0; round < 10; round++) {
        come_back_for_work(s);
        rt_sleep_us(1000);
        uint64_t catches = watch_catches();
        atomic_store(&flag, 0);
        RT_OK(rill_launch_host_func(s, set_flag, &flag));
        uint64_t deadline = rt_now_ns() + 5000000000ull;
        while (!atomic_load(&flag) && rt_now_ns() < deadline) {
            RT_OK(rill_launch_host_func(s, nothing, NULL));
            rt_spin_us(5);
        }
        assert_true(atomic_load(&flag));
        caught += watch_catches() != catches;
        RT_OK(rill_stream_synchronize(s));
    }
    RT_OK(rill_stream_destroy(s));
    assert_true(caught <= 2);
}

/* RILL_EVENT_BLOCKING_SYNC: "host waits sleep instead of spinning"; the work that a sleeping
 * waiter waits for runs on a worker, also when its launch left the wake-up for later. A query
 * that polls gets its work run too. */
static void test_sleeping_or_polling_waits_get_their_work_run(void **state) {
    (void)state;
    rill_stream *s;
    rill_event *blocking, *polled;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &blocking));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &polled));
    static atomic_int flag;
    for (int round = 0; round < 5; round++) {
        come_back_for_work(s);
        rt_sleep_us(PAUSE_US);
        atomic_store(&flag, 0);
        RT_OK(rill_launch_host_func(s, set_flag, &flag));
        RT_OK(rill_event_record(blocking, s));
        RT_OK(rill_event_synchronize(blocking));
        assert_true(atomic_load(&flag));

        come_back_for_work(s);
        rt_sleep_us(PAUSE_US);
        atomic_store(&flag, 0);
        RT_OK(rill_launch_host_func(s, set_flag, &flag));
        RT_OK(rill_event_record(polled, s));
        uint64_t deadline = rt_now_ns() + 5000000000ull;
        rill_status st;
        while ((st = rill_event_query(polled)) == RILL_NOT_READY && rt_now_ns() < deadline)
            rt_sleep_us(10);
        assert_int_equal(st, RILL_OK);
        assert_true(atomic_load(&flag));
    }
    RT_OK(rill_event_destroy(polled));
    RT_OK(rill_event_destroy(blocking));
    RT_OK(rill_stream_destroy(s));
}

/* ---- small ops ---- */

enum { SMALL_N = 4 };

static float *small_buffer(float first) {
    void *p = NULL;
    RT_OK(rill_malloc(NULL, SMALL_N * sizeof(float), &p));
    float *f = p;
    for (int i = 0; i < SMALL_N; i++)
        f[i] = first + (float)i;
    return f;
}

static void free_buffers(float *a, float *b, float *c) {
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(c));
}

/* A small element-wise op on a stream with nothing queued, while a compute unit is free, runs on
 * the submitting thread: it is done when its launch returns, without a worker's wake-up. */
static void test_small_op_on_an_idle_stream_is_done_when_launched(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *a = small_buffer(1.0f), *b = small_buffer(10.0f), *c = small_buffer(0.0f);
    for (int round = 0; round < 3; round++) {
        rt_sleep_us(PAUSE_US); /* the workers sleep: their units are free */
        RT_OK(rill_op_add_f32(s, c, a, b, (float)round, SMALL_N));
        RT_OK(rill_stream_query(s));
        for (int i = 0; i < SMALL_N; i++)
            assert_true(c[i] == a[i] + (float)round * b[i]);
        RT_OK(rill_op_map_f32(s, RILL_MAP_NEG, c, c, 0.0f, SMALL_N));
        RT_OK(rill_stream_query(s));
        assert_true(c[0] == -(a[0] + (float)round * b[0]));
    }
    free_buffers(a, b, c);
    RT_OK(rill_stream_destroy(s));
}

typedef struct gate {
    atomic_int open;
    float *dst;
} gate;

static void wait_at_gate(void *user_data) {
    gate *g = user_data;
    uint64_t deadline = rt_now_ns() + 5000000000ull;
    while (!atomic_load(&g->open) && rt_now_ns() < deadline)
        rt_sleep_us(50);
    g->dst[0] = 100.0f;
}

/* A small op queued behind other work waits for it, in stream order. */
static void test_small_op_behind_queued_work_keeps_stream_order(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *a = small_buffer(1.0f), *b = small_buffer(10.0f), *c = small_buffer(0.0f);
    static gate g;
    atomic_store(&g.open, 0);
    g.dst = a;
    rt_sleep_us(PAUSE_US);
    RT_OK(rill_launch_host_func(s, wait_at_gate, &g));
    RT_OK(rill_op_add_f32(s, c, a, b, 1.0f, SMALL_N));
    RT_STATUS(RILL_NOT_READY, rill_stream_query(s));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(s));
    assert_true(c[0] == 100.0f + b[0]);
    assert_true(c[1] == a[1] + b[1]);
    free_buffers(a, b, c);
    RT_OK(rill_stream_destroy(s));
}

typedef struct hold_units {
    atomic_int started;
    atomic_int release;
} hold_units;

static void hold_unit_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    hold_units *h;
    memcpy(&h, args, sizeof h);
    atomic_fetch_add(&h->started, 1);
    uint64_t deadline = rt_now_ns() + 5000000000ull;
    while (!atomic_load(&h->release) && rt_now_ns() < deadline)
        rt_spin_us(20);
}

/* While every compute unit runs a block, a small op does not run on the submitting thread (it
 * would be a unit more than the device has): it waits for a unit as other work does. */
static void test_small_op_waits_while_every_unit_is_busy(void **state) {
    (void)state;
    int units = compute_units();
    rill_kernel *k = make_kernel("hold_unit", hold_unit_kernel);
    rill_stream *busy, *s;
    RT_OK(rill_stream_create(NULL, 0, &busy));
    RT_OK(rill_stream_create(NULL, 0, &s));
    float *a = small_buffer(1.0f), *b = small_buffer(10.0f), *c = small_buffer(0.0f);
    static hold_units h;
    atomic_store(&h.started, 0);
    atomic_store(&h.release, 0);
    hold_units *hp = &h;
    rill_launch launch = {
        .grid = {(uint32_t)units, 1, 1}, .block = {1, 1, 1}, .args = &hp, .args_size = sizeof hp};
    RT_OK(rill_launch_kernel(busy, k, &launch));
    uint64_t deadline = rt_now_ns() + 5000000000ull;
    while (atomic_load(&h.started) < units && rt_now_ns() < deadline)
        rt_sleep_us(50);
    assert_int_equal(atomic_load(&h.started), units);
    RT_OK(rill_op_add_f32(s, c, a, b, 1.0f, SMALL_N));
    RT_STATUS(RILL_NOT_READY, rill_stream_query(s));
    atomic_store(&h.release, 1);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_synchronize(busy));
    for (int i = 0; i < SMALL_N; i++)
        assert_true(c[i] == a[i] + b[i]);
    free_buffers(a, b, c);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(busy));
    RT_OK(rill_kernel_destroy(k));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiting_host_runs_work_no_worker_took),
        cmocka_unit_test(test_blocks_running_at_once_have_different_workers),
        cmocka_unit_test(test_waiting_host_helps_a_graph_launch_a_worker_runs),
        cmocka_unit_test(test_graph_blocks_running_at_once_have_different_workers),
        cmocka_unit_test(test_host_function_run_by_waiting_thread_behaves_as_on_a_worker),
        cmocka_unit_test(test_host_function_run_by_thread_without_sentence_leaves_none),
        cmocka_unit_test(test_host_functions_start_from_a_worker_state),
        cmocka_unit_test(test_host_function_run_by_capturing_thread_keeps_capture_rules),
        cmocka_unit_test(test_host_runs_commands_in_order_with_sticky_errors),
        cmocka_unit_test(test_host_runs_work_of_a_destroyed_stream),
        cmocka_unit_test(test_device_synchronize_runs_work_of_every_stream),
        cmocka_unit_test(test_work_nobody_waits_for_still_runs),
        cmocka_unit_test(test_a_long_batch_starts_while_the_thread_submits),
        cmocka_unit_test(test_sleeping_or_polling_waits_get_their_work_run),
        cmocka_unit_test(test_small_op_on_an_idle_stream_is_done_when_launched),
        cmocka_unit_test(test_small_op_behind_queued_work_keeps_stream_order),
        cmocka_unit_test(test_small_op_waits_while_every_unit_is_busy),
        cmocka_unit_test(test_shutdown_runs_pending_work),
    };
    return RT_RUN(tests);
}
