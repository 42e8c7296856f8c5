/* SPDX-License-Identifier: MIT */
/* Capture ownership and the end of a capture: which thread may end a
 * capture (a thread, not its thread-local storage, which a later thread may
 * inherit), what a wrong thread's attempt leaves, and what destroying a
 * capturing stream (the origin, or a stream forked into the capture) does
 * to the capture, its other streams and the calls that it forbade.
 *
 * Captured work is host functions that count into atomics; threads report
 * statuses through plain fields read after pthread_join; only the main
 * thread asserts. */
#include "fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static void bump(void *p) {
    atomic_fetch_add((atomic_int *)p, 1);
}

static rill_stream *named_stream(const char *name) {
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, name));
    return s;
}

static void fork_to(rill_stream *from, rill_stream *to) {
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_record(e, from));
    RT_OK(rill_stream_wait_event(to, e));
    RT_OK(rill_event_destroy(e));
}

static rill_capture_status capture_status(rill_stream *s) {
    rill_capture_status cs;
    RT_OK(rill_stream_get_capture_status(s, &cs));
    return cs;
}

/* What a thread other than the test's main thread saw. */
typedef struct thread_call {
    rill_stream *s;
    rill_status end_status, malloc_status;
    rill_graph *g;
    char end_error[256];
} thread_call;

static void *end_elsewhere(void *p) {
    thread_call *t = p;
    t->end_status = rill_stream_end_capture(t->s, &t->g);
    snprintf(t->end_error, sizeof t->end_error, "%s", rill_last_error());
    return NULL;
}

/* rill_malloc (an unsafe call) from a new thread in GLOBAL mode. */
static void *malloc_elsewhere(void *p) {
    thread_call *t = p;
    void *q = NULL;
    t->malloc_status = rill_malloc(NULL, 64, &q);
    if (q != NULL)
        rill_free(q);
    return NULL;
}

static void run_thread(void *(*fn)(void *), thread_call *t) {
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fn, t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
}

/* ------------------------------------------------- ending from a thread */

/* "ending a capture not begun RELAXED from another thread than the one
 * that began it is RILL_ERROR_CAPTURE_WRONG_THREAD. Both leave the capture
 * as it was: the beginning thread can still end it on its origin." */
static void test_capture_end_from_wrong_thread_leaves_capture(void **state) {
    (void)state;
    rill_stream *s = named_stream("s");
    for (int mode = RILL_CAPTURE_GLOBAL; mode <= RILL_CAPTURE_RELAXED; mode++) {
        atomic_int ran = 0;
        RT_OK(rill_stream_begin_capture(s, (rill_capture_mode)mode));
        RT_OK(rill_launch_host_func(s, bump, &ran));
        thread_call t = {.s = s};
        run_thread(end_elsewhere, &t);
        rill_graph *g = t.g;
        if (mode == RILL_CAPTURE_RELAXED) {
            assert_int_equal(t.end_status, RILL_OK);
        } else {
            assert_int_equal(t.end_status, RILL_ERROR_CAPTURE_WRONG_THREAD);
            assert_null(t.g);
            assert_non_null(strstr(t.end_error, "'s'"));
            assert_non_null(strstr(t.end_error, "goes on"));
            /* Untouched: still active, still recording, and the beginning
             * thread ends it with every node. */
            assert_int_equal(capture_status(s), RILL_CAPTURE_ACTIVE);
            RT_OK(rill_launch_host_func(s, bump, &ran));
            RT_OK(rill_stream_end_capture(s, &g));
        }
        assert_int_equal(capture_status(s), RILL_CAPTURE_NONE);
        size_t n;
        RT_OK(rill_graph_node_count(g, &n));
        assert_int_equal(n, mode == RILL_CAPTURE_RELAXED ? 1 : 2);
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(atomic_load(&ran), 0); /* nothing ran at capture */
        rill_graph_exec *x;
        RT_OK(rill_graph_instantiate(g, &x));
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(atomic_load(&ran), 2 * (int)n);
        RT_OK(rill_graph_exec_destroy(x));
        RT_OK(rill_graph_destroy(g));
    }
    RT_OK(rill_stream_destroy(s));
}

/* A thread that exits with its capture active, then threads started until
 * one inherits its thread-local storage (glibc reuses the stack and TLS
 * block of a joined thread). */
static _Thread_local char tls_probe;

typedef struct inheritor {
    const void *owner_tls; /* &tls_probe of the beginning thread */
    rill_status begin_status;
    bool same_tls;
    thread_call call; /* the inheriting thread's calls on call.s */
} inheritor;

static void *begin_and_exit(void *p) {
    inheritor *h = p;
    h->owner_tls = &tls_probe;
    h->begin_status = rill_stream_begin_capture(h->call.s, RILL_CAPTURE_THREAD_LOCAL);
    return NULL;
}

static void *maybe_inherit(void *p) {
    inheritor *h = p;
    h->same_tls = (const void *)&tls_probe == h->owner_tls;
    if (!h->same_tls)
        return NULL;
    /* The beginning thread's capture is not this thread's: an unsafe call
     * is allowed, and ending it is WRONG_THREAD. */
    malloc_elsewhere(&h->call);
    end_elsewhere(&h->call);
    return NULL;
}

/* "ending a capture not begun RELAXED from another thread than the one
 * that began it is RILL_ERROR_CAPTURE_WRONG_THREAD", and "a thread started
 * later is never that thread", even when it has the same thread-local
 * storage. */
static void test_capture_owner_is_a_thread_not_its_storage(void **state) {
    (void)state;
    enum { MAX_THREADS = 256 };
    rill_stream *s = named_stream("left");
    atomic_int ran = 0;
    inheritor h = {.call.s = s};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, begin_and_exit, &h), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(h.begin_status, RILL_OK);
    RT_OK(rill_launch_host_func(s, bump, &ran)); /* captured, from this thread */
    int tries = 0;
    while (!h.same_tls && tries++ < MAX_THREADS) {
        assert_int_equal(pthread_create(&th, NULL, maybe_inherit, &h), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
    }
    if (!h.same_tls) {
        RT_OK(rill_stream_destroy(s));
        print_message("no thread inherited the thread-local storage in %d tries\n", MAX_THREADS);
        skip();
    }
    assert_int_equal(h.call.malloc_status, RILL_OK);
    assert_int_equal(h.call.end_status, RILL_ERROR_CAPTURE_WRONG_THREAD);
    assert_null(h.call.g);
    assert_non_null(strstr(h.call.end_error, "THREAD_LOCAL"));
    assert_int_equal(capture_status(s), RILL_CAPTURE_ACTIVE);
    /* Only rill_stream_destroy of its origin (or rill_shutdown) ends it now. */
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_device_synchronize(NULL)); /* refused while any capture is active */
    assert_int_equal(atomic_load(&ran), 0);
}

/* ------------------------------------------- destroying capturing streams */

/* "Destroying the origin ends the capture as a failed end_capture does:
 * its graph is discarded, its other streams are usable, nothing captured
 * runs." Before, rill_malloc and rill_device_synchronize failed in every
 * GLOBAL thread until rill_shutdown. */
static void test_capture_destroying_origin_discards_capture(void **state) {
    (void)state;
    for (int mode = RILL_CAPTURE_GLOBAL; mode <= RILL_CAPTURE_RELAXED; mode++) {
        rill_stream *origin = named_stream("origin"), *side = named_stream("side");
        atomic_int ran = 0, after = 0;
        rill_event *in_capture;
        RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &in_capture));
        RT_OK(rill_stream_begin_capture(origin, (rill_capture_mode)mode));
        RT_OK(rill_launch_host_func(origin, bump, &ran));
        fork_to(origin, side);
        void *graph_mem;
        RT_OK(rill_malloc_async(4096, side, &graph_mem)); /* the graph's own memory */
        RT_OK(rill_memset_async(graph_mem, 0, 4096, side));
        RT_OK(rill_launch_host_func(side, bump, &ran));
        RT_OK(rill_event_record(in_capture, side));
        assert_int_equal(capture_status(side), RILL_CAPTURE_ACTIVE);

        RT_OK(rill_stream_destroy(origin));

        /* The capture is gone: its forked stream left it and works. */
        assert_int_equal(capture_status(side), RILL_CAPTURE_NONE);
        RT_OK(rill_stream_wait_event(side, in_capture)); /* as if never recorded */
        RT_OK(rill_launch_host_func(side, bump, &after));
        RT_OK(rill_stream_synchronize(side));
        assert_int_equal(atomic_load(&after), 1);
        /* The calls it forbade are allowed again, in every thread. */
        void *p;
        RT_OK(rill_malloc(NULL, 64, &p));
        RT_OK(rill_free(p));
        thread_call t = {0};
        run_thread(malloc_elsewhere, &t);
        assert_int_equal(t.malloc_status, RILL_OK);
        RT_OK(rill_device_synchronize(NULL));
        assert_int_equal(atomic_load(&ran), 0); /* nothing captured ran */
        RT_OK(rill_event_destroy(in_capture));
        RT_OK(rill_stream_destroy(side));
    }
}

/* "Destroying a stream forked into a capture invalidates the capture, and
 * end_capture on the origin then returns RILL_ERROR_CAPTURE_INVALIDATED
 * naming that stream." */
static void test_capture_destroying_forked_stream_invalidates_capture(void **state) {
    (void)state;
    rill_stream *origin = named_stream("origin"), *side = named_stream("side");
    atomic_int ran = 0, after = 0;
    RT_OK(rill_stream_begin_capture(origin, RILL_CAPTURE_GLOBAL));
    RT_OK(rill_launch_host_func(origin, bump, &ran));
    fork_to(origin, side);
    RT_OK(rill_launch_host_func(side, bump, &ran));

    RT_OK(rill_stream_destroy(side));

    assert_int_equal(capture_status(origin), RILL_CAPTURE_INVALIDATED);
    RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_launch_host_func(origin, bump, &ran));
    assert_non_null(strstr(rill_last_error(), "rill_stream_destroy"));
    rill_graph *g;
    RT_STATUS(RILL_ERROR_CAPTURE_INVALIDATED, rill_stream_end_capture(origin, &g));
    assert_null(g);
    assert_non_null(strstr(rill_last_error(), "rill_stream_destroy"));
    assert_non_null(strstr(rill_last_error(), "'side'"));
    /* The origin is usable, the device free of captures, nothing ran. */
    assert_int_equal(capture_status(origin), RILL_CAPTURE_NONE);
    RT_OK(rill_launch_host_func(origin, bump, &after));
    RT_OK(rill_stream_synchronize(origin));
    RT_OK(rill_device_synchronize(NULL));
    assert_int_equal(atomic_load(&after), 1);
    assert_int_equal(atomic_load(&ran), 0);
    RT_OK(rill_stream_destroy(origin));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_end_from_wrong_thread_leaves_capture),
        cmocka_unit_test(test_capture_owner_is_a_thread_not_its_storage),
        cmocka_unit_test(test_capture_destroying_origin_discards_capture),
        cmocka_unit_test(test_capture_destroying_forked_stream_invalidates_capture),
    };
    return RT_RUN(tests);
}
