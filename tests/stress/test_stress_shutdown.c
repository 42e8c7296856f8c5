/* SPDX-License-Identifier: MIT */
/* Randomized shutdowns: threads make calls on their own streams, events and
 * kernels while one of them now and then calls rill_shutdown. Must hold: no
 * crash, use after free, data race or hang; each call returns RILL_OK,
 * RILL_NOT_READY or RILL_ERROR_INVALID_ARGUMENT with a sentence; and the
 * work of every launch that returned RILL_OK runs. Bounded by iterations and
 * seconds; seed from RILL_STRESS_SEED. */
#include "fixture.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SEC_NS       1000000000ull
#define RUN_NS       (2 * SEC_NS) /* stop after this */
#define DEFAULT_SEED 0x5d0e5eedu

enum {
    NUM_THREADS = 4,
    ITERATIONS = 100000,    /* per thread */
    SHUTDOWN_ONE_IN = 2000, /* of a thread's operations */
};

static rt_failures failures;
static _Atomic uint64_t calls, refused, shutdowns;

typedef struct thread_state {
    uint64_t rng;
    int index;
    rill_stream *stream;
    rill_event *event;
    rill_kernel *kernel;
    atomic_int ran;   /* launches of its kernel that ran (written by the work) */
    int launched;     /* accepted on stream since it was created */
    int ran_at_start; /* ran when the stream was created */
} thread_state;

static void count_block(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    thread_state *t = *(thread_state *const *)args;
    atomic_fetch_add(&t->ran, 1);
}

static void empty_host_fn(void *user_data) {
    (void)user_data;
}

/* Checks st against what a call may return here; counts refusals. */
static void check(thread_state *t, const char *what, rill_status st, bool may_be_not_ready) {
    atomic_fetch_add(&calls, 1);
    if (st == RILL_OK || (may_be_not_ready && st == RILL_NOT_READY))
        return;
    if (st == RILL_ERROR_INVALID_ARGUMENT && rill_last_error()[0] != '\0') {
        atomic_fetch_add(&refused, 1);
        return;
    }
    rt_failure(&failures, "thread %d: %s returned %s: %s", t->index, what, rill_status_name(st),
               rill_last_error());
}

/* Gives the thread a stream, an event and a kernel on the runtime there is now (after a
 * shutdown, its old ones are stale: destroying them is refused, which is allowed). */
static void renew(thread_state *t) {
    if (t->stream != NULL)
        check(t, "rill_stream_destroy", rill_stream_destroy(t->stream), false);
    if (t->event != NULL)
        check(t, "rill_event_destroy", rill_event_destroy(t->event), false);
    if (t->kernel != NULL)
        check(t, "rill_kernel_destroy", rill_kernel_destroy(t->kernel), false);
    t->stream = NULL;
    t->event = NULL;
    t->kernel = NULL;
    const rill_kernel_desc desc = {.name = "count", .cpu = count_block};
    check(t, "rill_stream_create", rill_stream_create(NULL, 0, &t->stream), false);
    check(t, "rill_event_create", rill_event_create(RILL_EVENT_DEFAULT, &t->event), false);
    check(t, "rill_kernel_create", rill_kernel_create(&desc, &t->kernel), false);
    t->launched = 0;
    t->ran_at_start = atomic_load(&t->ran);
}

static void one_op(void *arg) {
    thread_state *t = arg;
    uint64_t r = rt_next_random(&t->rng);
    if (r % SHUTDOWN_ONE_IN == 0) {
        rill_status st = rill_shutdown();
        check(t, "rill_shutdown", st, false);
        atomic_fetch_add(&shutdowns, 1);
        /* It waited for all work: every launch accepted on the stream has run. */
        int ran = atomic_load(&t->ran) - t->ran_at_start;
        if (st == RILL_OK && ran < t->launched)
            rt_failure(&failures, "thread %d: %d launches accepted, %d ran after rill_shutdown",
                       t->index, t->launched, ran);
        renew(t);
        return;
    }
    switch ((r >> 16) % 10) {
    case 0:
    case 1: {
        thread_state *self = t;
        rill_launch l = {
            .grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &self, .args_size = sizeof self};
        rill_status st = rill_launch_kernel(t->stream, t->kernel, &l);
        check(t, "rill_launch_kernel", st, false);
        if (st == RILL_OK)
            t->launched++;
        break;
    }
    case 2:
        check(t, "rill_launch_host_func", rill_launch_host_func(t->stream, empty_host_fn, NULL),
              false);
        break;
    case 3:
        check(t, "rill_launch_host_func (current stream)",
              rill_launch_host_func(NULL, empty_host_fn, NULL), false);
        break;
    case 4:
        check(t, "rill_event_record", rill_event_record(t->event, t->stream), false);
        break;
    case 5:
        check(t, "rill_event_synchronize", rill_event_synchronize(t->event), false);
        break;
    case 6:
        check(t, "rill_stream_query", rill_stream_query(t->stream), true);
        break;
    case 7: {
        rill_status st = rill_stream_synchronize(t->stream);
        check(t, "rill_stream_synchronize", st, false);
        /* Every launch accepted on the stream has run, shutdown or not: a shutdown waits for
         * all work. */
        int ran = atomic_load(&t->ran) - t->ran_at_start;
        if (st == RILL_OK && ran < t->launched)
            rt_failure(&failures, "thread %d: %d launches accepted, %d ran after synchronize",
                       t->index, t->launched, ran);
        break;
    }
    case 8: {
        void *mem = NULL, *host = NULL;
        size_t bytes = 64 + (r >> 40) % 4096;
        rill_status st = rill_malloc(NULL, bytes, &mem);
        check(t, "rill_malloc", st, false);
        rill_status hst = rill_malloc_host(bytes, &host);
        check(t, "rill_malloc_host", hst, false);
        /* (No rill_memcpy between them: another thread's shutdown may free both, and a copy
         * between pointers rill no longer knows is a copy between plain host pointers.) */
        if (st == RILL_OK)
            check(t, "rill_free", rill_free(mem), false);
        if (hst == RILL_OK)
            check(t, "rill_free_host", rill_free_host(host), false);
        break;
    }
    default: {
        rill_event *e = NULL;
        rill_status st = rill_event_create(RILL_EVENT_DEFAULT, &e);
        check(t, "rill_event_create", st, false);
        if (st == RILL_OK)
            check(t, "rill_event_destroy", rill_event_destroy(e), false);
        break;
    }
    }
    /* A refused call on the thread's own objects means a shutdown ended their runtime. */
    if (rill_stream_query(t->stream) == RILL_ERROR_INVALID_ARGUMENT)
        renew(t);
}

static void test_stress_shutdowns_racing_calls_of_other_threads(void **state) {
    (void)state;
    uint64_t seed = rt_stress_seed(DEFAULT_SEED);
    static thread_state ts[NUM_THREADS];
    memset(ts, 0, sizeof ts);
    for (int i = 0; i < NUM_THREADS; i++) {
        ts[i].rng = seed + 1 + (uint64_t)i * 0x9e3779b97f4a7c15ull;
        ts[i].index = i;
    }
    for (int i = 0; i < NUM_THREADS; i++)
        renew(&ts[i]);
    rt_stress_threads(NUM_THREADS, ts, sizeof ts[0], one_op, ITERATIONS, RUN_NS);
    for (int i = 0; i < NUM_THREADS; i++) {
        rill_stream_destroy(ts[i].stream); /* stale after the last shutdown: refused */
        rill_event_destroy(ts[i].event);
        rill_kernel_destroy(ts[i].kernel);
    }
    RT_OK(rill_device_synchronize(NULL));
    print_message("%" PRIu64 " calls, %" PRIu64 " refused, %" PRIu64 " shutdowns\n",
                  atomic_load(&calls), atomic_load(&refused), atomic_load(&shutdowns));
    rt_failures_assert_none(&failures);
    assert_true(atomic_load(&shutdowns) > 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_shutdowns_racing_calls_of_other_threads),
    };
    return RT_RUN(tests);
}
