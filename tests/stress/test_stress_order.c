/* SPDX-License-Identifier: MIT */
/* Randomized stream-order stress: several threads submit random mixes of
 * host functions, kernels, event records and waits to many streams; every
 * command takes a ticket when it starts and ends, and the test then checks
 * the contract's happens-before (in-order streams; waits order work after
 * what they captured), including work that waiting host threads run
 * themselves. Bounded by iterations and seconds; seed from
 * RILL_STRESS_SEED, printed on failure. */
#include "core/runtime.h"
#include "fixture.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS         1000000000ull
#define SUBMIT_NS      (5 * SEC_NS) /* stop submitting after this */
#define QUIET_EVERY_NS 25000000ull  /* how often the main thread quiets the submitters */
#define QUIET_US       3000u        /* how long the device stays without new work then */
#define DEFAULT_SEED   0x5eed0f0bu

enum {
    NUM_STREAMS = 24,
    NUM_THREADS = 4,
    ITERATIONS = 50000, /* per thread */
    EVENTS_PER_THREAD = 4,
    MAX_DEPS = 6,
    MAX_BLOCKS = 8,
    MAX_CMDS = NUM_THREADS * ITERATIONS,
    NOT_RECORDED = -2, /* event point: never recorded */
    NO_COMMAND = -1,   /* event point / prev: the stream had no command yet */
};

typedef struct command {
    /* written by the submitting thread before the launch, read-only afterwards */
    int stream;
    int prev; /* previous command of the stream, or NO_COMMAND */
    int num_deps;
    int deps[MAX_DEPS]; /* commands that waits before this one made it depend on */
    int blocks;
    unsigned spin_us;
    /* written by the command's blocks */
    _Atomic uint64_t start; /* smallest start ticket of its blocks */
    _Atomic uint64_t end;   /* largest end ticket of its blocks */
    atomic_int blocks_run;
    atomic_int on_main; /* blocks that the main thread ran (while it waited) */
} command;

typedef struct stream_state {
    pthread_mutex_t lock;
    rill_stream *stream;
    /* guarded by lock */
    int last; /* last command submitted, or NO_COMMAND */
    int num_pending;
    int pending[MAX_DEPS]; /* dependencies added by waits since the last command */
} stream_state;

typedef struct thread_state {
    int index;
    uint64_t rng;
    rill_event *events[EVENTS_PER_THREAD];
    int event_point[EVENTS_PER_THREAD]; /* command each event captured, NOT_RECORDED, NO_COMMAND */
    int iterations;
} thread_state;

static command cmds[MAX_CMDS];
static atomic_int num_cmds;
static stream_state streams[NUM_STREAMS];
static thread_state threads[NUM_THREADS + 1]; /* the submitters, then the main thread */
static pthread_t main_thread;

/* The quiet phases: the main thread sets quiet, each submitter that sees it counts itself in
 * paused (or in finished, once done) and waits until quiet is clear. */
static atomic_int quiet, paused, finished;
static rill_kernel *kernel;
static _Atomic uint64_t ticket_counter;
static uint64_t submit_deadline_ns;
static pthread_barrier_t start_barrier;

static rt_failures failures;

static void record_failure(const char *call, rill_status st) {
    rt_failure(&failures, "%s returned %s: %s", call, rill_status_name(st), rill_last_error());
}

static unsigned pick(thread_state *t, unsigned n) {
    return (unsigned)(rt_next_random(&t->rng) % n);
}

/* ---- command bodies ---- */

static void command_begin(command *c) {
    uint64_t t = atomic_fetch_add(&ticket_counter, 1) + 1;
    uint64_t cur = 0;
    while (!atomic_compare_exchange_weak(&c->start, &cur, t)) {
        if (cur != 0 && cur < t)
            break;
    }
}

static void command_end(command *c) {
    uint64_t t = atomic_fetch_add(&ticket_counter, 1) + 1;
    uint64_t cur = atomic_load(&c->end);
    while (cur < t && !atomic_compare_exchange_weak(&c->end, &cur, t)) {
    }
    if (pthread_equal(pthread_self(), main_thread))
        atomic_fetch_add(&c->on_main, 1);
    atomic_fetch_add(&c->blocks_run, 1);
}

static void command_host_fn(void *user_data) {
    command *c = user_data;
    command_begin(c);
    if (c->spin_us != 0)
        rt_spin_us(c->spin_us);
    command_end(c);
}

typedef struct command_args {
    command *c;
} command_args;

static void command_kernel(const rill_block_ctx *ctx, const void *args) {
    command_args a;
    memcpy(&a, args, sizeof a);
    command_begin(a.c);
    if (a.c->spin_us != 0 && ctx->block_idx.x % 2 == 1)
        rt_spin_us(a.c->spin_us); /* odd blocks: helpers, not only the first worker, run slow */
    command_end(a.c);
}

/* ---- submitting ---- */

/* Submits one command to stream si under its lock: a host function, or a kernel of `blocks`
 * blocks. Returns false when the command budget is used up. */
static bool submit_command(thread_state *t, int si, bool host, int blocks) {
    stream_state *st = &streams[si];
    pthread_mutex_lock(&st->lock);
    int id = atomic_fetch_add(&num_cmds, 1);
    if (id >= MAX_CMDS) {
        pthread_mutex_unlock(&st->lock);
        return false;
    }
    command *c = &cmds[id];
    c->stream = si;
    c->prev = st->last;
    c->num_deps = st->num_pending;
    memcpy(c->deps, st->pending, sizeof(int) * (size_t)st->num_pending);
    c->blocks = host ? 1 : blocks;
    /* Some commands take a while, so that waits, hand-offs and blocks on other workers are
     * really pending when later commands become ready. */
    unsigned spin_chance = host || blocks == 1 ? 5 : 30;
    c->spin_us = pick(t, 100) < spin_chance ? 1 + pick(t, 50) : 0;
    rill_status status;
    if (host) {
        status = rill_launch_host_func(st->stream, command_host_fn, c);
        if (status != RILL_OK)
            record_failure("rill_launch_host_func", status);
    } else {
        command_args a = {c};
        rill_launch launch = {.grid = {(uint32_t)blocks, 1, 1},
                              .block = {1, 1, 1},
                              .args = &a,
                              .args_size = sizeof a};
        status = rill_launch_kernel(st->stream, kernel, &launch);
        if (status != RILL_OK)
            record_failure("rill_launch_kernel", status);
    }
    if (status == RILL_OK) {
        st->last = id;
        st->num_pending = 0;
    } else {
        c->blocks = 0; /* never submitted: nothing to check */
    }
    pthread_mutex_unlock(&st->lock);
    return true;
}

static void add_pending_locked(stream_state *st, int dep) {
    if (dep >= 0 && st->num_pending < MAX_DEPS)
        st->pending[st->num_pending++] = dep;
}

static void record_event(thread_state *t, int si, int ei) {
    stream_state *st = &streams[si];
    pthread_mutex_lock(&st->lock);
    rill_status status = rill_event_record(t->events[ei], st->stream);
    if (status == RILL_OK)
        t->event_point[ei] = st->last;
    else
        record_failure("rill_event_record", status);
    pthread_mutex_unlock(&st->lock);
}

static void wait_event(thread_state *t, int si, int ei) {
    stream_state *st = &streams[si];
    pthread_mutex_lock(&st->lock);
    rill_status status = rill_stream_wait_event(st->stream, t->events[ei]);
    if (status == RILL_OK)
        add_pending_locked(st, t->event_point[ei]);
    else
        record_failure("rill_stream_wait_event", status);
    pthread_mutex_unlock(&st->lock);
}

static void wait_stream(int si, int ui) {
    if (si == ui)
        return;
    stream_state *st = &streams[si], *other = &streams[ui];
    /* Stream locks are taken in index order. */
    stream_state *first = si < ui ? st : other, *second = si < ui ? other : st;
    pthread_mutex_lock(&first->lock);
    pthread_mutex_lock(&second->lock);
    rill_status status = rill_stream_wait_stream(st->stream, other->stream);
    if (status == RILL_OK)
        add_pending_locked(st, other->last);
    else
        record_failure("rill_stream_wait_stream", status);
    pthread_mutex_unlock(&second->lock);
    pthread_mutex_unlock(&first->lock);
}

/* Waits while the main thread keeps the device quiet. */
static void stay_quiet(void) {
    if (!atomic_load(&quiet))
        return;
    atomic_fetch_add(&paused, 1);
    while (atomic_load(&quiet))
        rt_sleep_us(100);
    atomic_fetch_sub(&paused, 1);
}

static void *submitter(void *arg) {
    thread_state *t = arg;
    pthread_barrier_wait(&start_barrier);
    for (int i = 0; i < ITERATIONS; i++) {
        stay_quiet();
        if (i % 64 == 0 && rt_now_ns() > submit_deadline_ns)
            break;
        t->iterations = i + 1;
        int si = (int)pick(t, NUM_STREAMS);
        unsigned op = pick(t, 100);
        bool more = true;
        if (op < 40) {
            more = submit_command(t, si, true, 1);
        } else if (op < 60) {
            more = submit_command(t, si, false, 1);
        } else if (op < 75) {
            more = submit_command(t, si, false, 2 + (int)pick(t, MAX_BLOCKS - 1));
        } else if (op < 85) {
            record_event(t, si, (int)pick(t, EVENTS_PER_THREAD));
        } else if (op < 93) {
            wait_event(t, si, (int)pick(t, EVENTS_PER_THREAD));
        } else if (op < 98) {
            wait_stream(si, (int)pick(t, NUM_STREAMS));
        } else if (op < 99) {
            rill_status status = rill_stream_query(streams[si].stream);
            if (status != RILL_OK && status != RILL_NOT_READY)
                record_failure("rill_stream_query", status);
        } else {
            rill_status status = rill_stream_synchronize(streams[si].stream);
            if (status != RILL_OK)
                record_failure("rill_stream_synchronize", status);
        }
        if (!more)
            break;
    }
    atomic_fetch_add(&finished, 1);
    return NULL;
}

/* One quiet phase: no new work for QUIET_US, so idle workers go to sleep; then the main thread
 * submits to a few streams and waits for what it submitted, by event or by stream. */
static void quiet_phase(thread_state *t) {
    atomic_store(&quiet, 1);
    while (atomic_load(&paused) + atomic_load(&finished) < NUM_THREADS)
        rt_sleep_us(100);
    rt_sleep_us(QUIET_US);
    for (int n = 1 + (int)pick(t, 3); n > 0; n--) {
        int si = (int)pick(t, NUM_STREAMS);
        unsigned op = pick(t, 3);
        if (!submit_command(t, si, op == 0, op == 2 ? 2 + (int)pick(t, MAX_BLOCKS - 1) : 1))
            break;
        rill_status status;
        if (pick(t, 2) == 0) {
            int ei = (int)pick(t, EVENTS_PER_THREAD);
            record_event(t, si, ei);
            status = rill_event_synchronize(t->events[ei]);
            if (status != RILL_OK)
                record_failure("rill_event_synchronize", status);
        } else {
            status = rill_stream_synchronize(streams[si].stream);
            if (status != RILL_OK)
                record_failure("rill_stream_synchronize", status);
        }
    }
    atomic_store(&quiet, 0);
}

/* ---- the test ---- */

/* Checks one command against the happens-before relation; returns false (and explains in buf)
 * when it is broken. */
static bool command_is_ordered(int id, char *buf, size_t size) {
    const command *c = &cmds[id];
    if (c->blocks == 0)
        return true;
    uint64_t start = atomic_load(&c->start), end = atomic_load(&c->end);
    int ran = atomic_load(&c->blocks_run);
    if (ran != c->blocks || start == 0 || end == 0) {
        snprintf(buf, size, "command %d (stream %d) ran %d of its %d blocks", id, c->stream, ran,
                 c->blocks);
        return false;
    }
    if (c->prev >= 0 && start <= atomic_load(&cmds[c->prev].end)) {
        snprintf(buf, size,
                 "command %d started (ticket %" PRIu64 ") before command %d, the previous one "
                 "on stream %d, ended (ticket %" PRIu64 ")",
                 id, start, c->prev, c->stream, atomic_load(&cmds[c->prev].end));
        return false;
    }
    for (int d = 0; d < c->num_deps; d++) {
        int dep = c->deps[d];
        if (start <= atomic_load(&cmds[dep].end)) {
            snprintf(buf, size,
                     "command %d on stream %d started (ticket %" PRIu64 ") before command %d on "
                     "stream %d, which a wait made it depend on, ended (ticket %" PRIu64 ")",
                     id, c->stream, start, dep, cmds[dep].stream, atomic_load(&cmds[dep].end));
            return false;
        }
    }
    return true;
}

/* "Commands that several threads submit to one stream run in the order in which the calls
 * returned"; rill_stream_wait_event: "Work submitted to stream after this call waits until event
 * completes, as recorded at the time of this call"; rill_stream_wait_stream: "Work submitted to
 * stream after this call waits for all work submitted to other before this call". */
static void test_stress_random_streams_keep_happens_before(void **state) {
    (void)state;
    uint64_t seed = rt_stress_seed(DEFAULT_SEED);

    rill_kernel_desc desc = {.name = "stress_command", .cpu = command_kernel};
    RT_OK(rill_kernel_create(&desc, &kernel));
    for (int s = 0; s < NUM_STREAMS; s++) {
        pthread_mutex_init(&streams[s].lock, NULL);
        RT_OK(rill_stream_create(NULL, -(s % 6), &streams[s].stream));
        char name[32];
        snprintf(name, sizeof name, "stress-%d", s);
        RT_OK(rill_stream_set_name(streams[s].stream, name));
        streams[s].last = NO_COMMAND;
        streams[s].num_pending = 0;
    }
    for (int t = 0; t <= NUM_THREADS; t++) {
        threads[t].index = t;
        threads[t].rng =
            (seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)t + 1) * 0xD1B54A32D192ED03ull;
        if (threads[t].rng == 0)
            threads[t].rng = 1;
        for (int e = 0; e < EVENTS_PER_THREAD; e++) {
            RT_OK(rill_event_create(e % 2 ? RILL_EVENT_TIMING : RILL_EVENT_DEFAULT,
                                    &threads[t].events[e]));
            threads[t].event_point[e] = NOT_RECORDED;
        }
    }

    pthread_barrier_init(&start_barrier, NULL, NUM_THREADS);
    submit_deadline_ns = rt_now_ns() + SUBMIT_NS;
    main_thread = pthread_self();
    pthread_t handles[NUM_THREADS];
    for (int t = 0; t < NUM_THREADS; t++)
        assert_int_equal(pthread_create(&handles[t], NULL, submitter, &threads[t]), 0);
    int phases = 0;
    char why[512];
    while (atomic_load(&finished) < NUM_THREADS) {
        rt_sleep_us((unsigned)(QUIET_EVERY_NS / 1000u));
        quiet_phase(&threads[NUM_THREADS]);
        phases++;
        /* The streams' own invariants (rill__stream_check), while the submitters run. */
        if (!rill__device_check_streams(NULL, why, sizeof why))
            fail_msg("seed %" PRIu64 ": after %d quiet phases: %s", seed, phases, why);
    }
    for (int t = 0; t < NUM_THREADS; t++)
        assert_int_equal(pthread_join(handles[t], NULL), 0);
    pthread_barrier_destroy(&start_barrier);
    rill_status synced = rill_device_synchronize(NULL);
    for (int s = 0; s < NUM_STREAMS && synced == RILL_OK; s++)
        synced = rill_stream_synchronize(streams[s].stream);

    int total = atomic_load(&num_cmds);
    if (total > MAX_CMDS)
        total = MAX_CMDS;
    int iterations = 0, on_main = 0;
    for (int t = 0; t < NUM_THREADS; t++)
        iterations += threads[t].iterations;
    for (int id = 0; id < total; id++)
        on_main += atomic_load(&cmds[id].on_main) > 0;
    print_message("stress: %d iterations, %d commands, %d quiet phases, %d commands run (in part) "
                  "by the waiting main thread\n",
                  iterations, total, phases, on_main);

    if (synced != RILL_OK)
        fail_msg("seed %" PRIu64 ": synchronize returned %s: %s", seed, rill_status_name(synced),
                 rill_last_error());
    if (atomic_load(&failures.count) != 0)
        fail_msg("seed %" PRIu64 ": %d calls failed; the first: %s", seed,
                 atomic_load(&failures.count), failures.first);
    for (int id = 0; id < total; id++) {
        if (!command_is_ordered(id, why, sizeof why))
            fail_msg("seed %" PRIu64 ": %s", seed, why);
    }
    assert_true(total > 0);
    assert_true(on_main > 0); /* the waiting thread did run work itself */

    for (int t = 0; t <= NUM_THREADS; t++) {
        for (int e = 0; e < EVENTS_PER_THREAD; e++)
            RT_OK(rill_event_destroy(threads[t].events[e]));
    }
    for (int s = 0; s < NUM_STREAMS; s++) {
        RT_OK(rill_stream_destroy(streams[s].stream));
        pthread_mutex_destroy(&streams[s].lock);
    }
    RT_OK(rill_kernel_destroy(kernel));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_random_streams_keep_happens_before),
    };
    return RT_RUN(tests);
}
