/* SPDX-License-Identifier: MIT */
/* Capture ownership: which thread may end a capture, and what a wrong
 * thread's attempt leaves.
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

static rill_capture_status capture_status(rill_stream *s) {
    rill_capture_status cs;
    RT_OK(rill_stream_get_capture_status(s, &cs));
    return cs;
}

/* What a thread other than the test's main thread saw. */
typedef struct thread_call {
    rill_stream *s;
    rill_status end_status;
    rill_graph *g;
    char end_error[256];
} thread_call;

static void *end_elsewhere(void *p) {
    thread_call *t = p;
    t->end_status = rill_stream_end_capture(t->s, &t->g);
    snprintf(t->end_error, sizeof t->end_error, "%s", rill_last_error());
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

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_end_from_wrong_thread_leaves_capture),
    };
    return RT_RUN(tests);
}
