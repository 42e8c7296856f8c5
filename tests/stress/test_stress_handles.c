/* SPDX-License-Identifier: MIT */
/* Randomized lifecycle stress: several threads share tables of streams,
 * events, kernels and graph execs, and create, use and destroy them at
 * random (destroyed with work pending, kernels destroyed before their graph
 * runs, destroyed handles passed again), with a lock per slot so that each
 * call's expected status is known. Must hold: no crash or hang, each call
 * returns what its contract says, and every accepted launch runs exactly
 * once. Bounded by iterations and seconds; seed from RILL_STRESS_SEED. */
#include "fixture.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS       1000000000ull
#define RUN_NS       (3 * SEC_NS) /* stop after this */
#define DEFAULT_SEED 0x5eedc0deu

enum {
    NUM_THREADS = 4,
    ITERATIONS = 200000, /* per thread */
    NUM_STREAMS = 6,
    NUM_EVENTS = 6,
    NUM_KERNELS = 3,
    NUM_EXECS = 3,
    GRAPH_NODES = 3, /* kernels per captured graph, one block each */
    MAX_BLOCKS = 4,
    NUM_OPS = 27,
};

/* A table slot: the handle it last held (NULL: none yet) and whether that object is live. Uses
 * hold the lock shared; creation and destruction hold it exclusively. */
typedef struct slot {
    pthread_rwlock_t lock;
    void *handle;
    bool live;
} slot;

static slot streams[NUM_STREAMS], events[NUM_EVENTS], kernels[NUM_KERNELS], execs[NUM_EXECS];

/* Blocks expected to run (counted when a launch is accepted) and blocks that ran. */
static _Atomic uint64_t expected_runs, runs;
static _Atomic uint64_t calls, refused;

static rt_failures failures;

typedef struct worker_state {
    uint64_t rng;
    rill_stream *own; /* allocations and captures */
} worker_state;

static unsigned pick(worker_state *w, unsigned n) {
    return (unsigned)(rt_next_random(&w->rng) % n);
}

static void note_failure(const char *call, rill_status st, const char *why) {
    rt_failure(&failures, "%s returned %s (%s): %s", call, rill_status_name(st), why,
               rill_last_error());
}

/* Checks a call on handles that were all live (live) or not: a live call returns RILL_OK or
 * one of allowed; one with a destroyed handle RILL_ERROR_INVALID_ARGUMENT with a sentence.
 * Returns whether the call was accepted. */
static bool check(const char *call, rill_status st, bool live, const rill_status *allowed,
                  size_t n) {
    atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
    if (!live) {
        atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
        if (st != RILL_ERROR_INVALID_ARGUMENT)
            note_failure(call, st, "a destroyed handle must be refused");
        else if (rill_last_error()[0] == '\0')
            note_failure(call, st, "no sentence");
        return false;
    }
    if (st == RILL_OK)
        return true;
    bool ok = false;
    for (size_t i = 0; i < n; i++)
        ok = ok || st == allowed[i];
    if (!ok)
        note_failure(call, st, "its handles are live");
    else if (st != RILL_NOT_READY && rill_last_error()[0] == '\0')
        note_failure(call, st, "no sentence");
    return false;
}

static const rill_status QUERY[] = {RILL_NOT_READY};
static const rill_status ELAPSED[] = {RILL_NOT_READY, RILL_ERROR_TIMING_DISABLED,
                                      RILL_ERROR_NOT_RECORDED};
#define CHECK(call, live, allowed)                                                                 \
    check(#call, (call), live, allowed, sizeof(allowed) / sizeof((allowed)[0]))
/* A call whose handles were live, or not, and that has no other way to fail here. */
#define CHECK_OK(call, live) check(#call, (call), live, NULL, 0)

static void count_block(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    atomic_fetch_add(&runs, 1);
}

static void count_host(void *user_data) {
    (void)user_data;
    atomic_fetch_add(&runs, 1);
}

/* ---- slots ---- */

/* Takes up to three slots shared, in address order (a slot named twice is taken once), so that
 * their objects are neither destroyed nor replaced until release_slots. */
typedef struct held {
    slot *s[3];
    int n;
} held;

static void hold(held *h, slot *a, slot *b, slot *c) {
    slot *in[3] = {a, b, c};
    h->n = 0;
    for (int i = 0; i < 3; i++) {
        bool dup = in[i] == NULL;
        for (int j = 0; j < h->n && !dup; j++)
            dup = h->s[j] == in[i];
        if (!dup)
            h->s[h->n++] = in[i];
    }
    for (int i = 1; i < h->n; i++)
        for (int j = i; j > 0 && h->s[j] < h->s[j - 1]; j--) {
            slot *t = h->s[j];
            h->s[j] = h->s[j - 1];
            h->s[j - 1] = t;
        }
    for (int i = 0; i < h->n; i++)
        pthread_rwlock_rdlock(&h->s[i]->lock);
}

static void release(held *h) {
    for (int i = h->n - 1; i >= 0; i--)
        pthread_rwlock_unlock(&h->s[i]->lock);
}

typedef rill_status (*destroy_fn)(void *handle);

static rill_status destroy_stream(void *h) {
    return rill_stream_destroy(h);
}
static rill_status destroy_event(void *h) {
    return rill_event_destroy(h);
}
static rill_status destroy_kernel(void *h) {
    return rill_kernel_destroy(h);
}
static rill_status destroy_exec(void *h) {
    return rill_graph_exec_destroy(h);
}

/* Destroys the slot's object (slot held exclusively); the slot keeps its handle, now stale, and
 * a second destroy of it is refused. */
static void destroy_locked(slot *s, destroy_fn destroy, const char *what) {
    if (s->handle == NULL)
        return;
    rill_status st = destroy(s->handle);
    if (s->live && st != RILL_OK)
        note_failure(what, st, "destroying a live object");
    if (!s->live && st != RILL_ERROR_INVALID_ARGUMENT)
        note_failure(what, st, "destroying it twice must be refused");
    s->live = false;
}

static void destroy_slot(slot *s, destroy_fn destroy, const char *what) {
    pthread_rwlock_wrlock(&s->lock);
    destroy_locked(s, destroy, what);
    pthread_rwlock_unlock(&s->lock);
}

/* Puts a new object in the slot, destroying the one there (work pending or not). */
static void replace(slot *s, void *handle, destroy_fn destroy, const char *what) {
    pthread_rwlock_wrlock(&s->lock);
    if (s->live)
        destroy_locked(s, destroy, what);
    s->handle = handle;
    s->live = true;
    pthread_rwlock_unlock(&s->lock);
}

static void make_stream(worker_state *w) {
    rill_stream *s;
    rill_status st = rill_stream_create(NULL, -(int)pick(w, 6), &s);
    if (st != RILL_OK) {
        note_failure("rill_stream_create", st, "nothing is wrong with its arguments");
        return;
    }
    if (rill_stream_set_name(s, pick(w, 2) ? "chaos-a" : "chaos-b") != RILL_OK)
        note_failure("rill_stream_set_name", RILL_ERROR_INTERNAL, "the stream is live");
    replace(&streams[pick(w, NUM_STREAMS)], s, destroy_stream, "rill_stream_destroy");
}

static void make_event(worker_state *w) {
    static const unsigned flags[] = {RILL_EVENT_DEFAULT, RILL_EVENT_TIMING,
                                     RILL_EVENT_BLOCKING_SYNC};
    rill_event *e;
    rill_status st = rill_event_create(flags[pick(w, 3)], &e);
    if (st != RILL_OK) {
        note_failure("rill_event_create", st, "nothing is wrong with its arguments");
        return;
    }
    replace(&events[pick(w, NUM_EVENTS)], e, destroy_event, "rill_event_destroy");
}

static void make_kernel(worker_state *w) {
    const rill_kernel_desc desc = {.name = "count", .cpu = count_block};
    rill_kernel *k;
    rill_status st = rill_kernel_create(&desc, &k);
    if (st != RILL_OK) {
        note_failure("rill_kernel_create", st, "nothing is wrong with its arguments");
        return;
    }
    replace(&kernels[pick(w, NUM_KERNELS)], k, destroy_kernel, "rill_kernel_destroy");
}

/* Captures GRAPH_NODES one-block launches on the thread's own stream, each of a kernel from the
 * table, into *g; false when a kernel had been destroyed (it is refused, and the graph is
 * dropped), so that every graph made here has the same shape. The kernels may be destroyed
 * before the graph runs. */
static bool capture_graph(worker_state *w, rill_graph **g) {
    const rill_launch one = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    *g = NULL;
    if (!CHECK_OK(rill_stream_begin_capture(w->own, RILL_CAPTURE_RELAXED), true))
        return false;
    bool whole = true;
    for (int i = 0; i < GRAPH_NODES; i++) {
        slot *k = &kernels[pick(w, NUM_KERNELS)];
        held h;
        hold(&h, k, NULL, NULL);
        if (k->handle != NULL)
            whole = CHECK_OK(rill_launch_kernel(w->own, k->handle, &one), k->live) && whole;
        else
            whole = false;
        release(&h);
    }
    if (!CHECK_OK(rill_stream_end_capture(w->own, g), true))
        return false;
    if (!whole) {
        (void)CHECK_OK(rill_graph_destroy(*g), true);
        *g = NULL;
    }
    return whole;
}

static void make_exec(worker_state *w) {
    rill_graph *g;
    if (!capture_graph(w, &g))
        return;
    rill_graph_exec *x = NULL;
    bool made = CHECK_OK(rill_graph_instantiate(g, &x), true);
    (void)CHECK_OK(rill_graph_destroy(g), true);
    if (made)
        replace(&execs[pick(w, NUM_EXECS)], x, destroy_exec, "rill_graph_exec_destroy");
}

/* Updates an exec of the table, which other threads may be launching meanwhile, with a graph of
 * the same shape. */
static void update_exec(worker_state *w) {
    rill_graph *g;
    if (!capture_graph(w, &g))
        return;
    slot *x = &execs[pick(w, NUM_EXECS)];
    held h;
    hold(&h, x, NULL, NULL);
    if (x->handle != NULL)
        (void)CHECK_OK(rill_graph_exec_update(x->handle, g), x->live);
    release(&h);
    (void)CHECK_OK(rill_graph_destroy(g), true);
}

static void own_memory(worker_state *w) {
    void *p;
    size_t bytes = 64u + pick(w, 8192);
    if (!CHECK_OK(rill_malloc_async(bytes, w->own, &p), true))
        return;
    (void)CHECK_OK(rill_memset_async(p, (int)pick(w, 256), bytes, w->own), true);
    if (CHECK_OK(rill_launch_host_func(w->own, count_host, NULL), true))
        atomic_fetch_add(&expected_runs, 1);
    (void)CHECK_OK(rill_free_async(p, w->own), true);
}

#define ANY(table, n) (&(table)[pick(w, (n))])

static void one_op(void *arg) {
    worker_state *w = arg;
    slot *a, *b;
    held h;
    switch (pick(w, NUM_OPS)) {
    case 0:
    case 22:
        make_stream(w);
        return;
    case 1:
        destroy_slot(ANY(streams, NUM_STREAMS), destroy_stream, "rill_stream_destroy");
        return;
    case 2:
    case 23:
        make_event(w);
        return;
    case 3:
        destroy_slot(ANY(events, NUM_EVENTS), destroy_event, "rill_event_destroy");
        return;
    case 4:
    case 24:
        make_kernel(w);
        return;
    case 5:
        destroy_slot(ANY(kernels, NUM_KERNELS), destroy_kernel, "rill_kernel_destroy");
        return;
    case 6:
    case 25:
        make_exec(w);
        return;
    case 7:
        destroy_slot(ANY(execs, NUM_EXECS), destroy_exec, "rill_graph_exec_destroy");
        return;
    case 8:
    case 9:
    case 10: {
        a = ANY(streams, NUM_STREAMS);
        b = ANY(kernels, NUM_KERNELS);
        unsigned blocks = 1 + pick(w, MAX_BLOCKS);
        const rill_launch l = {.grid = {blocks, 1, 1}, .block = {1, 1, 1}};
        hold(&h, a, b, NULL);
        if (a->handle != NULL && b->handle != NULL &&
            CHECK_OK(rill_launch_kernel(a->handle, b->handle, &l), a->live && b->live))
            atomic_fetch_add(&expected_runs, blocks);
        break;
    }
    case 11:
        a = ANY(streams, NUM_STREAMS);
        hold(&h, a, NULL, NULL);
        if (a->handle != NULL &&
            CHECK_OK(rill_launch_host_func(a->handle, count_host, NULL), a->live))
            atomic_fetch_add(&expected_runs, 1);
        break;
    case 12:
        a = ANY(streams, NUM_STREAMS);
        b = ANY(execs, NUM_EXECS);
        hold(&h, a, b, NULL);
        if (a->handle != NULL && b->handle != NULL &&
            CHECK_OK(rill_graph_launch(b->handle, a->handle), a->live && b->live))
            atomic_fetch_add(&expected_runs, GRAPH_NODES);
        break;
    case 13:
        a = ANY(streams, NUM_STREAMS);
        b = ANY(events, NUM_EVENTS);
        hold(&h, a, b, NULL);
        if (a->handle != NULL && b->handle != NULL)
            (void)CHECK_OK(rill_event_record(b->handle, a->handle), a->live && b->live);
        break;
    case 14:
        a = ANY(streams, NUM_STREAMS);
        b = ANY(events, NUM_EVENTS);
        hold(&h, a, b, NULL);
        if (a->handle != NULL && b->handle != NULL)
            (void)CHECK_OK(rill_stream_wait_event(a->handle, b->handle), a->live && b->live);
        break;
    case 15:
        a = ANY(streams, NUM_STREAMS);
        b = ANY(streams, NUM_STREAMS);
        hold(&h, a, b, NULL);
        if (a->handle != NULL && b->handle != NULL)
            (void)CHECK_OK(rill_stream_wait_stream(a->handle, b->handle), a->live && b->live);
        break;
    case 16:
        a = ANY(events, NUM_EVENTS);
        hold(&h, a, NULL, NULL);
        if (a->handle != NULL)
            (void)CHECK(rill_event_query(a->handle), a->live, QUERY);
        break;
    case 17:
        a = ANY(events, NUM_EVENTS);
        hold(&h, a, NULL, NULL);
        if (a->handle != NULL)
            (void)CHECK_OK(rill_event_synchronize(a->handle), a->live);
        break;
    case 18:
        a = ANY(streams, NUM_STREAMS);
        hold(&h, a, NULL, NULL);
        if (a->handle != NULL)
            (void)CHECK(rill_stream_query(a->handle), a->live, QUERY);
        break;
    case 19:
        a = ANY(streams, NUM_STREAMS);
        hold(&h, a, NULL, NULL);
        if (a->handle != NULL)
            (void)CHECK_OK(rill_stream_synchronize(a->handle), a->live);
        break;
    case 20: {
        float ms;
        a = ANY(events, NUM_EVENTS);
        b = ANY(events, NUM_EVENTS);
        hold(&h, a, b, NULL);
        if (a->handle != NULL && b->handle != NULL)
            (void)CHECK(rill_event_elapsed_ms(a->handle, b->handle, &ms), a->live && b->live,
                        ELAPSED);
        break;
    }
    case 26:
        update_exec(w);
        return;
    default: /* 21 */
        own_memory(w);
        return;
    }
    release(&h);
}

static void test_stress_objects_made_used_and_destroyed_by_many_threads(void **state) {
    (void)state;
    uint64_t seed = rt_stress_seed(DEFAULT_SEED);
    worker_state ws[NUM_THREADS];
    for (int i = 0; i < NUM_THREADS; i++) {
        ws[i].rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i + 1;
        RT_OK(rill_stream_create(NULL, 0, &ws[i].own));
    }
    slot *tables[] = {streams, events, kernels, execs};
    int sizes[] = {NUM_STREAMS, NUM_EVENTS, NUM_KERNELS, NUM_EXECS};
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < sizes[t]; i++) {
            assert_int_equal(pthread_rwlock_init(&tables[t][i].lock, NULL), 0);
            tables[t][i].handle = NULL;
            tables[t][i].live = false;
        }
    worker_state setup = {.rng = seed + 7};
    for (int i = 0; i < NUM_STREAMS; i++)
        make_stream(&setup);
    for (int i = 0; i < NUM_EVENTS; i++)
        make_event(&setup);
    for (int i = 0; i < NUM_KERNELS; i++)
        make_kernel(&setup);
    rt_stress_threads(NUM_THREADS, ws, sizeof ws[0], one_op, ITERATIONS, RUN_NS);

    for (int i = 0; i < NUM_STREAMS; i++)
        destroy_slot(&streams[i], destroy_stream, "rill_stream_destroy");
    for (int i = 0; i < NUM_EVENTS; i++)
        destroy_slot(&events[i], destroy_event, "rill_event_destroy");
    for (int i = 0; i < NUM_KERNELS; i++)
        destroy_slot(&kernels[i], destroy_kernel, "rill_kernel_destroy");
    for (int i = 0; i < NUM_EXECS; i++)
        destroy_slot(&execs[i], destroy_exec, "rill_graph_exec_destroy");
    for (int i = 0; i < NUM_THREADS; i++)
        RT_OK(rill_stream_destroy(ws[i].own));
    RT_OK(rill_device_synchronize(NULL));
    print_message("%" PRIu64 " calls, %" PRIu64 " refused a destroyed handle, %" PRIu64
                  " blocks ran\n",
                  atomic_load(&calls), atomic_load(&refused), atomic_load(&runs));
    rt_failures_assert_none(&failures);
    assert_int_equal(atomic_load(&runs), atomic_load(&expected_runs));
    /* The mix did what it is for: some calls met destroyed handles, and most were accepted. */
    assert_true(atomic_load(&refused) > 0);
    assert_true(atomic_load(&refused) * 2 < atomic_load(&calls));
    assert_true(atomic_load(&runs) > 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_objects_made_used_and_destroyed_by_many_threads),
    };
    return RT_RUN(tests);
}
