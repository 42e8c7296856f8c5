/* SPDX-License-Identifier: MIT */
/* Randomized destroy races: several threads share tables of streams, events, kernels and graph
 * execs, take handles out of them and destroy them while the other threads pass the same handles
 * to launches, records, waits, queries, synchronizes and graph launches, with nothing ordering
 * the two. rill.h: a call that races with the destruction of one of its handles either behaves as
 * if it came first or is refused as given a destroyed handle. What must hold:
 *   - no crash, use after free or hang (this runs under AddressSanitizer and ThreadSanitizer);
 *   - each call returns RILL_OK (queries: or their other statuses for live objects) or
 *     RILL_ERROR_INVALID_ARGUMENT with a sentence;
 *   - no work is lost: once every handle is destroyed and the device synchronized, every block of
 *     every accepted launch ran exactly once, whatever was destroyed meanwhile.
 * Bounded by iterations and by seconds; the seed comes from RILL_STRESS_SEED (or a fixed default)
 * and is printed. */
#include "fixture.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define SEC_NS       1000000000ull
#define RUN_NS       (3 * SEC_NS) /* stop after this */
#define DEFAULT_SEED 0xdead5eedu

enum {
    NUM_THREADS = 4,
    ITERATIONS = 200000, /* per thread */
    SLOTS = 4,           /* per kind */
    GRAPH_NODES = 2,
    MAX_BLOCKS = 3,
};

/* The tables: a slot holds a live handle or NULL. Whoever takes a handle out of its slot
 * (exchange) destroys it, while others may still have loaded it. */
static _Atomic(rill_stream *) streams[SLOTS];
static _Atomic(rill_event *) events[SLOTS];
static _Atomic(rill_kernel *) kernels[SLOTS];
static _Atomic(rill_graph_exec *) execs[SLOTS];

static _Atomic uint64_t expected_runs, runs, calls, refused;
static rt_failures failures;

typedef struct worker_state {
    uint64_t rng;
    rill_stream *own; /* captures */
} worker_state;

static unsigned pick(worker_state *w, unsigned n) {
    return (unsigned)(rt_next_random(&w->rng) % n);
}

static void note_failure(const char *call, rill_status st, const char *why) {
    rt_failure(&failures, "%s returned %s (%s): %s", call, rill_status_name(st), why,
               rill_last_error());
}

/* RILL_OK, one of allowed, or a destroyed handle; true when RILL_OK. */
static bool check(const char *call, rill_status st, const rill_status *allowed, size_t n) {
    atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
    if (st == RILL_OK)
        return true;
    bool ok = st == RILL_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        ok = ok || st == allowed[i];
    if (!ok)
        note_failure(call, st, "neither its result nor a destroyed handle");
    else if (st != RILL_NOT_READY && rill_last_error()[0] == '\0')
        note_failure(call, st, "no sentence");
    if (st == RILL_ERROR_INVALID_ARGUMENT)
        atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
    return false;
}

static const rill_status QUERY[] = {RILL_NOT_READY};
#define CHECK(call)       check(#call, (call), NULL, 0)
#define CHECK_QUERY(call) check(#call, (call), QUERY, 1)

static void count_block(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    atomic_fetch_add(&runs, 1);
}

static void count_host(void *user_data) {
    (void)user_data;
    atomic_fetch_add(&runs, 1);
}

/* Destroys what the owner took out of a slot: it was live, so that must succeed. */
static void must_destroy(const char *what, rill_status st) {
    if (st != RILL_OK)
        note_failure(what, st, "its owner destroys a live object");
}

static void replace_stream(worker_state *w, rill_stream *s) {
    rill_stream *old = atomic_exchange(&streams[pick(w, SLOTS)], s);
    if (old != NULL)
        must_destroy("rill_stream_destroy", rill_stream_destroy(old));
}
static void replace_event(worker_state *w, rill_event *e) {
    rill_event *old = atomic_exchange(&events[pick(w, SLOTS)], e);
    if (old != NULL)
        must_destroy("rill_event_destroy", rill_event_destroy(old));
}
static void replace_kernel(worker_state *w, rill_kernel *k) {
    rill_kernel *old = atomic_exchange(&kernels[pick(w, SLOTS)], k);
    if (old != NULL)
        must_destroy("rill_kernel_destroy", rill_kernel_destroy(old));
}
static void replace_exec(worker_state *w, rill_graph_exec *x) {
    rill_graph_exec *old = atomic_exchange(&execs[pick(w, SLOTS)], x);
    if (old != NULL)
        must_destroy("rill_graph_exec_destroy", rill_graph_exec_destroy(old));
}

static void make_stream(worker_state *w) {
    rill_stream *s;
    if (rill_stream_create(NULL, -(int)pick(w, 6), &s) != RILL_OK)
        note_failure("rill_stream_create", RILL_ERROR_INTERNAL, "nothing is wrong");
    else
        replace_stream(w, s);
}

static void make_event(worker_state *w) {
    static const unsigned flags[] = {RILL_EVENT_DEFAULT, RILL_EVENT_BLOCKING_SYNC};
    rill_event *e;
    if (rill_event_create(flags[pick(w, 2)], &e) != RILL_OK)
        note_failure("rill_event_create", RILL_ERROR_INTERNAL, "nothing is wrong");
    else
        replace_event(w, e);
}

static void make_kernel(worker_state *w) {
    const rill_kernel_desc desc = {.name = "count", .cpu = count_block};
    rill_kernel *k;
    if (rill_kernel_create(&desc, &k) != RILL_OK)
        note_failure("rill_kernel_create", RILL_ERROR_INTERNAL, "nothing is wrong");
    else
        replace_kernel(w, k);
}

/* GRAPH_NODES launches of kernels from the table, captured on the thread's own stream; a kernel
 * destroyed meanwhile is refused, and then the graph is dropped. */
static void make_exec(worker_state *w) {
    const rill_launch one = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    if (!CHECK(rill_stream_begin_capture(w->own, RILL_CAPTURE_RELAXED)))
        return;
    bool whole = true;
    for (int i = 0; i < GRAPH_NODES; i++) {
        rill_kernel *k = atomic_load(&kernels[pick(w, SLOTS)]);
        whole = k != NULL && CHECK(rill_launch_kernel(w->own, k, &one)) && whole;
    }
    rill_graph *g;
    if (!CHECK(rill_stream_end_capture(w->own, &g)))
        return;
    rill_graph_exec *x;
    if (whole && CHECK(rill_graph_instantiate(g, &x)))
        replace_exec(w, x);
    (void)CHECK(rill_graph_destroy(g));
}

static void one_op(void *arg) {
    worker_state *w = arg;
    rill_stream *s = atomic_load(&streams[pick(w, SLOTS)]);
    rill_stream *t = atomic_load(&streams[pick(w, SLOTS)]);
    rill_event *e = atomic_load(&events[pick(w, SLOTS)]);
    rill_kernel *k = atomic_load(&kernels[pick(w, SLOTS)]);
    rill_graph_exec *x = atomic_load(&execs[pick(w, SLOTS)]);
    /* Widens the window in which another thread destroys what was loaded. */
    if (pick(w, 4) == 0)
        sched_yield();
    switch (pick(w, 20)) {
    case 0:
        make_stream(w);
        break;
    case 1:
        make_event(w);
        break;
    case 2:
        make_kernel(w);
        break;
    case 3:
        make_exec(w);
        break;
    case 4:
    case 5:
    case 6:
        if (s != NULL && k != NULL) {
            unsigned blocks = 1 + pick(w, MAX_BLOCKS);
            const rill_launch l = {.grid = {blocks, 1, 1}, .block = {1, 1, 1}};
            if (CHECK(rill_launch_kernel(s, k, &l)))
                atomic_fetch_add(&expected_runs, blocks);
        }
        break;
    case 7:
        if (s != NULL && CHECK(rill_launch_host_func(s, count_host, NULL)))
            atomic_fetch_add(&expected_runs, 1);
        break;
    case 8:
        if (s != NULL && x != NULL && CHECK(rill_graph_launch(x, s)))
            atomic_fetch_add(&expected_runs, GRAPH_NODES);
        break;
    case 9:
        if (s != NULL && e != NULL)
            (void)CHECK(rill_event_record(e, s));
        break;
    case 10:
        if (s != NULL && e != NULL)
            (void)CHECK(rill_stream_wait_event(s, e));
        break;
    case 11:
        if (s != NULL && t != NULL)
            (void)CHECK(rill_stream_wait_stream(s, t));
        break;
    case 12:
        if (e != NULL)
            (void)CHECK_QUERY(rill_event_query(e));
        break;
    case 13:
        if (e != NULL)
            (void)CHECK(rill_event_synchronize(e));
        break;
    case 14:
        if (s != NULL)
            (void)CHECK_QUERY(rill_stream_query(s));
        break;
    case 15:
        if (s != NULL)
            (void)CHECK(rill_stream_synchronize(s));
        break;
    case 16:
        if (s != NULL)
            (void)CHECK(rill_stream_set_name(s, "racing"));
        break;
    default: { /* a destroy of a handle that others may be using */
        unsigned slot = pick(w, SLOTS);
        switch (pick(w, 4)) {
        case 0:
            if ((s = atomic_exchange(&streams[slot], NULL)) != NULL)
                must_destroy("rill_stream_destroy", rill_stream_destroy(s));
            break;
        case 1:
            if ((e = atomic_exchange(&events[slot], NULL)) != NULL)
                must_destroy("rill_event_destroy", rill_event_destroy(e));
            break;
        case 2:
            if ((k = atomic_exchange(&kernels[slot], NULL)) != NULL)
                must_destroy("rill_kernel_destroy", rill_kernel_destroy(k));
            break;
        default:
            if ((x = atomic_exchange(&execs[slot], NULL)) != NULL)
                must_destroy("rill_graph_exec_destroy", rill_graph_exec_destroy(x));
            break;
        }
        break;
    }
    }
}

static void test_stress_calls_racing_destroys_of_their_handles(void **state) {
    (void)state;
    uint64_t seed = rt_stress_seed(DEFAULT_SEED);
    worker_state ws[NUM_THREADS];
    for (int i = 0; i < NUM_THREADS; i++) {
        ws[i].rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i + 1;
        RT_OK(rill_stream_create(NULL, 0, &ws[i].own));
    }
    worker_state setup = {.rng = seed + 7};
    for (int i = 0; i < SLOTS; i++) {
        make_stream(&setup);
        make_event(&setup);
        make_kernel(&setup);
    }
    rt_stress_threads(NUM_THREADS, ws, sizeof ws[0], one_op, ITERATIONS, RUN_NS);
    for (int i = 0; i < SLOTS; i++) {
        rill_stream *s = atomic_exchange(&streams[i], NULL);
        rill_event *e = atomic_exchange(&events[i], NULL);
        rill_kernel *k = atomic_exchange(&kernels[i], NULL);
        rill_graph_exec *x = atomic_exchange(&execs[i], NULL);
        if (s != NULL)
            RT_OK(rill_stream_destroy(s));
        if (e != NULL)
            RT_OK(rill_event_destroy(e));
        if (k != NULL)
            RT_OK(rill_kernel_destroy(k));
        if (x != NULL)
            RT_OK(rill_graph_exec_destroy(x));
    }
    for (int i = 0; i < NUM_THREADS; i++)
        RT_OK(rill_stream_destroy(ws[i].own));
    RT_OK(rill_device_synchronize(NULL));
    print_message("%" PRIu64 " calls, %" PRIu64 " refused a destroyed handle, %" PRIu64
                  " blocks ran\n",
                  atomic_load(&calls), atomic_load(&refused), atomic_load(&runs));
    rt_failures_assert_none(&failures);
    assert_int_equal(atomic_load(&runs), atomic_load(&expected_runs));
    /* Some calls met a handle destroyed under them, most were accepted. */
    assert_true(atomic_load(&refused) > 0);
    assert_true(atomic_load(&refused) * 2 < atomic_load(&calls));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_calls_racing_destroys_of_their_handles),
    };
    return RT_RUN(tests);
}
