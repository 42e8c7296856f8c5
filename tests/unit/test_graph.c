/* SPDX-License-Identifier: MIT */
/* Graphs: stream capture with forks and joins, every end_capture status
 * (WRONG_THREAD in test_capture.c), capture modes across threads,
 * isolation, allocation during capture, graphs built by hand, exec update,
 * replays with fresh inputs, failures inside a launch, a capture abandoned
 * by rill_shutdown, and random multi-stream programs captured and replayed
 * against eager runs. */
#include "fixture.h"

#include "util/alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ kernels */

/* cell[dst] = cell[dst] * mul + add + (src != NONE ? cell[src] : 0), in uint32 */
typedef struct step_args {
    uint32_t *cells;
    int dst, src;
    uint32_t mul, add;
} step_args;

#define NONE (-1)

static void step_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    step_args a;
    memcpy(&a, args, sizeof a);
    uint32_t v = a.cells[a.dst] * a.mul + a.add;
    if (a.src != NONE)
        v += a.cells[a.src];
    a.cells[a.dst] = v;
}

static rill_kernel *step_k, *count_k, *fail_k;

/* Appends the kernel's tag to a log: the order the nodes ran in. */
typedef struct log_args {
    atomic_int *len;
    int *log;
    int tag;
} log_args;

static void count_kernel(const rill_block_ctx *ctx, const void *args) {
    log_args a;
    memcpy(&a, args, sizeof a);
    (void)ctx;
    int i = atomic_fetch_add(a.len, 1);
    a.log[i] = a.tag;
}

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    rill_kernel_fail(ctx, "the input was bad");
}

static int setup(void **state) {
    (void)state;
    rill_kernel_desc d1 = {.name = "step", .cpu = step_kernel};
    rill_kernel_desc d2 = {.name = "log", .cpu = count_kernel};
    rill_kernel_desc d3 = {.name = "fails", .cpu = fail_kernel};
    if (rill_kernel_create(&d1, &step_k) != RILL_OK ||
        rill_kernel_create(&d2, &count_k) != RILL_OK || rill_kernel_create(&d3, &fail_k) != RILL_OK)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rill_kernel_destroy(step_k);
    rill_kernel_destroy(count_k);
    rill_kernel_destroy(fail_k);
    return rill_shutdown() == RILL_OK ? 0 : -1;
}

static void step(rill_stream *s, uint32_t *cells, int dst, int src, uint32_t mul, uint32_t add) {
    step_args a = {cells, dst, src, mul, add};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, step_k, &l));
}

static void log_tag(rill_stream *s, atomic_int *len, int *log, int tag) {
    log_args a = {len, log, tag};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, count_k, &l));
}

static int position(const int *log, int n, int tag) {
    for (int i = 0; i < n; i++)
        if (log[i] == tag)
            return i;
    return -1;
}

static void fork_to(rill_stream *from, rill_stream *to) {
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_record(e, from));
    RT_OK(rill_stream_wait_event(to, e));
    RT_OK(rill_event_destroy(e));
}

static rill_stream *named_stream(const char *name) {
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, name));
    return s;
}

/* -------------------------------------------------------------- tests */

/* Captured work does not run until launched, and runs at each launch. */
static void test_capture_records_instead_of_running(void **state) {
    (void)state;
    rill_stream *s = named_stream("main");
    uint32_t *cells;
    RT_OK(rill_malloc(NULL, 4 * sizeof *cells, (void **)&cells));
    memset(cells, 0, 4 * sizeof *cells);
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    rill_capture_status cs;
    RT_OK(rill_stream_get_capture_status(s, &cs));
    assert_int_equal(cs, RILL_CAPTURE_ACTIVE);
    step(s, cells, 0, NONE, 1, 1);
    step(s, cells, 0, NONE, 2, 0);
    rill_graph *g;
    RT_OK(rill_stream_end_capture(s, &g));
    RT_OK(rill_stream_get_capture_status(s, &cs));
    assert_int_equal(cs, RILL_CAPTURE_NONE);
    size_t n;
    RT_OK(rill_graph_node_count(g, &n));
    assert_int_equal(n, 2);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(cells[0], 0); /* nothing ran at capture */
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g)); /* the exec outlives its graph */
    uint32_t want = 0;
    for (int i = 0; i < 5; i++) {
        RT_OK(rill_graph_launch(x, s));
        want = (want + 1) * 2;
    }
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(cells[0], want);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_free(cells));
    RT_OK(rill_stream_destroy(s));
}

/* s1 -> s2 -> s3, s3 joined back through s2, s2 back to s1 (seed 004's
 * indirect capture); the launch keeps every captured order. */
static void test_capture_nested_forks_join_through_middle(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1"), *s2 = named_stream("s2"), *s3 = named_stream("s3");
    atomic_int len = 0;
    int log[16];
    RT_OK(rill_stream_begin_capture(s1, RILL_CAPTURE_GLOBAL));
    log_tag(s1, &len, log, 1);
    fork_to(s1, s2);
    log_tag(s2, &len, log, 2);
    fork_to(s2, s3);
    const char *op = "aten::third"; /* labels node 3 in the dump */
    RT_OK(rill_thread_exchange_op_name(&op));
    log_tag(s3, &len, log, 3);
    RT_OK(rill_thread_exchange_op_name(&op));
    log_tag(s2, &len, log, 4); /* concurrent with 3 */
    fork_to(s3, s2);           /* s3 back to s2 */
    log_tag(s2, &len, log, 5);
    fork_to(s2, s1); /* s2 back to s1 */
    log_tag(s1, &len, log, 6);
    rill_graph *g;
    RT_OK(rill_stream_end_capture(s1, &g));
    size_t n;
    RT_OK(rill_graph_node_count(g, &n));
    assert_int_equal(n, 6);
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    for (int rep = 0; rep < 50; rep++) {
        atomic_store(&len, 0);
        RT_OK(rill_graph_launch(x, s1));
        RT_OK(rill_stream_synchronize(s1));
        assert_int_equal(atomic_load(&len), 6);
        int p1 = position(log, 6, 1), p2 = position(log, 6, 2), p3 = position(log, 6, 3),
            p4 = position(log, 6, 4), p5 = position(log, 6, 5), p6 = position(log, 6, 6);
        assert_true(p1 < p2 && p2 < p3 && p2 < p4 && p3 < p5 && p4 < p5 && p5 < p6);
    }
    char path[] = "/tmp/rill_test_graph_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    RT_OK(rill_graph_write_dot(g, path));
    FILE *f = fopen(path, "r");
    char buf[4096] = {0};
    assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    remove(path);
    assert_non_null(strstr(buf, "digraph"));
    assert_non_null(strstr(buf, "[s3]"));
    assert_non_null(strstr(buf, "log"));
    const char *third = strstr(buf, "aten::third\\n");
    assert_non_null(third);
    assert_null(strstr(third + 1, "aten::third"));
    assert_non_null(strstr(buf, "->"));
    /* nodes are coloured by the stream they were captured from: one colour
     * per stream, three streams, three colours */
    char colour[3][16] = {"", "", ""};
    for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        const char *fill = strstr(line, "fillcolor=\"");
        for (int k = 0; k < 3 && fill != NULL; k++) {
            char tag[8];
            snprintf(tag, sizeof tag, "[s%d]", k + 1);
            if (strstr(line, tag) == NULL)
                continue;
            char c[16] = {0};
            sscanf(fill + strlen("fillcolor=\""), "%15[^\"]", c);
            if (colour[k][0] == '\0')
                memcpy(colour[k], c, sizeof c);
            assert_string_equal(colour[k], c);
        }
    }
    for (int k = 0; k < 3; k++)
        assert_true(colour[k][0] == '#');
    assert_string_not_equal(colour[0], colour[1]);
    assert_string_not_equal(colour[1], colour[2]);
    assert_string_not_equal(colour[0], colour[2]);
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_stream_destroy(s3));
}

/* rill_graph_write_dot draws "edges [that] are dependencies", without those
 * a longer path implies: a -> c is dropped beside a -> b -> c (seed 004's
 * copy -> copy beside copy -> add -> copy), d -> e is kept. */
static void test_graph_dot_drops_edges_a_longer_path_implies(void **state) {
    (void)state;
    rill_graph *g;
    rill_graph_node *a, *b, *c, *d, *e;
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_graph_add_empty_node(g, NULL, 0, &a));
    RT_OK(rill_graph_add_empty_node(g, &a, 1, &b));
    rill_graph_node *ab[2] = {a, b};
    RT_OK(rill_graph_add_empty_node(g, ab, 2, &c));
    RT_OK(rill_graph_add_empty_node(g, NULL, 0, &d));
    rill_graph_node *cd[2] = {c, d};
    RT_OK(rill_graph_add_empty_node(g, cd, 2, &e));
    char path[] = "/tmp/rill_test_dot_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    RT_OK(rill_graph_write_dot(g, path));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096] = {0};
    assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    remove(path);
    assert_non_null(strstr(buf, "n0 -> n1;"));
    assert_non_null(strstr(buf, "n1 -> n2;"));
    assert_null(strstr(buf, "n0 -> n2;"));
    assert_non_null(strstr(buf, "n2 -> n4;"));
    assert_non_null(strstr(buf, "n3 -> n4;"));
    RT_OK(rill_graph_destroy(g));
}

/* A forked stream not joined back, or given work after its last join:
 * UNJOINED naming the stream; the capture ends and nothing ran. */
static void test_capture_unjoined_names_stream(void **state) {
    (void)state;
    rill_stream *main_s = named_stream("main"), *side = named_stream("side");
    uint32_t cells[2] = {0, 0};
    for (int after_join = 0; after_join < 2; after_join++) {
        RT_OK(rill_stream_begin_capture(main_s, RILL_CAPTURE_GLOBAL));
        fork_to(main_s, side);
        step(side, cells, 0, NONE, 1, 1);
        if (after_join) {
            fork_to(side, main_s);
            step(side, cells, 0, NONE, 1, 1);
            step(side, cells, 0, NONE, 1, 1);
        }
        rill_graph *g = (rill_graph *)&g;
        RT_STATUS(RILL_ERROR_CAPTURE_UNJOINED, rill_stream_end_capture(main_s, &g));
        assert_null(g);
        assert_non_null(strstr(rill_last_error(), "'side'"));
        assert_non_null(strstr(rill_last_error(), after_join ? "2 commands" : "1 command"));
        assert_non_null(strstr(rill_last_error(), "'main'"));
        rill_capture_status cs;
        RT_OK(rill_stream_get_capture_status(side, &cs));
        assert_int_equal(cs, RILL_CAPTURE_NONE);
        RT_OK(rill_stream_get_capture_status(main_s, &cs));
        assert_int_equal(cs, RILL_CAPTURE_NONE);
    }
    /* Both streams work as usual again, and nothing captured ran. */
    step(side, cells, 1, NONE, 1, 7);
    RT_OK(rill_stream_synchronize(side));
    assert_int_equal(cells[0], 0);
    assert_int_equal(cells[1], 7);
    RT_OK(rill_stream_destroy(main_s));
    RT_OK(rill_stream_destroy(side));
}

/* end_capture on a forked stream: UNMATCHED, the capture goes on. */
static void test_capture_unmatched_leaves_capture(void **state) {
    (void)state;
    rill_stream *a = named_stream("a"), *b = named_stream("b");
    uint32_t cells[1] = {0};
    RT_OK(rill_stream_begin_capture(a, RILL_CAPTURE_GLOBAL));
    fork_to(a, b);
    step(b, cells, 0, NONE, 1, 3);
    rill_graph *g;
    RT_STATUS(RILL_ERROR_CAPTURE_UNMATCHED, rill_stream_end_capture(b, &g));
    assert_non_null(strstr(rill_last_error(), "'a'"));
    rill_capture_status cs;
    RT_OK(rill_stream_get_capture_status(b, &cs));
    assert_int_equal(cs, RILL_CAPTURE_ACTIVE);
    fork_to(b, a);
    RT_OK(rill_stream_end_capture(a, &g));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, a));
    RT_OK(rill_stream_synchronize(a));
    assert_int_equal(cells[0], 3);
    rill_stream *c = named_stream("c");
    rill_graph *none;
    RT_STATUS(RILL_ERROR_CAPTURE_UNMATCHED, rill_stream_end_capture(c, &none));
    assert_null(none);
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(c));
}

/* Synchronizing or querying a capturing stream, an event recorded in the
 * capture, or the device: UNSUPPORTED in every mode, the capture is
 * invalidated, its streams refuse work until end_capture says
 * INVALIDATED, and nothing captured runs. */
static void test_capture_sync_invalidates_in_every_mode(void **state) {
    (void)state;
    rill_stream *s = named_stream("s");
    uint32_t cells[1] = {0};
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    for (int mode = RILL_CAPTURE_GLOBAL; mode <= RILL_CAPTURE_RELAXED; mode++) {
        for (int what = 0; what < 4; what++) {
            RT_OK(rill_stream_begin_capture(s, (rill_capture_mode)mode));
            step(s, cells, 0, NONE, 1, 1);
            RT_OK(rill_event_record(e, s));
            if (what == 0)
                RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_stream_synchronize(s));
            else if (what == 1)
                RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_stream_query(s));
            else if (what == 2)
                RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_event_query(e));
            else
                RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_device_synchronize(NULL));
            rill_capture_status cs;
            RT_OK(rill_stream_get_capture_status(s, &cs));
            assert_int_equal(cs, RILL_CAPTURE_INVALIDATED);
            step_args a = {cells, 0, NONE, 1, 1};
            rill_launch l = {.grid = {1, 1, 1}, .args = &a, .args_size = sizeof a};
            RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_launch_kernel(s, step_k, &l));
            rill_graph *g;
            RT_STATUS(RILL_ERROR_CAPTURE_INVALIDATED, rill_stream_end_capture(s, &g));
            assert_null(g);
        }
    }
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_query(e)); /* recorded only in ended captures: as if never */
    assert_int_equal(cells[0], 0);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

typedef struct unsafe_call {
    rill_capture_mode thread_mode;
    rill_status malloc_status;
    rill_status memcpy_status;
} unsafe_call;

static void *other_thread_unsafe(void *p) {
    unsafe_call *u = p;
    rill_capture_mode m = u->thread_mode;
    rill_thread_exchange_capture_mode(&m);
    void *q = NULL;
    u->malloc_status = rill_malloc(NULL, 64, &q);
    if (q != NULL)
        rill_free(q);
    static float src[4], dst[4];
    float *d = NULL;
    if (rill_malloc(NULL, sizeof src, (void **)&d) == RILL_OK) {
        u->memcpy_status = rill_memcpy(d, src, sizeof src);
        rill_free(d);
    } else {
        u->memcpy_status = rill_memcpy(dst, src, sizeof src); /* host to host: always fine */
    }
    return NULL;
}

static rill_status unsafe_from_thread(rill_capture_mode thread_mode) {
    unsafe_call u = {.thread_mode = thread_mode};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread_unsafe, &u), 0);
    pthread_join(t, NULL);
    return u.malloc_status;
}

/* The contract's rule: a thread T may make an unsafe call unless T is
 * GLOBAL and a GLOBAL capture is active anywhere, or T (GLOBAL or
 * THREAD_LOCAL) itself has a GLOBAL or THREAD_LOCAL capture active. */
static void test_capture_modes_decide_unsafe_calls(void **state) {
    (void)state;
    rill_stream *s = named_stream("cap");
    static const struct {
        rill_capture_mode capture, other_thread;
        rill_status expect;
    } cases[] = {
        {RILL_CAPTURE_GLOBAL, RILL_CAPTURE_GLOBAL, RILL_ERROR_CAPTURE_UNSUPPORTED},
        {RILL_CAPTURE_GLOBAL, RILL_CAPTURE_THREAD_LOCAL, RILL_OK},
        {RILL_CAPTURE_GLOBAL, RILL_CAPTURE_RELAXED, RILL_OK},
        {RILL_CAPTURE_THREAD_LOCAL, RILL_CAPTURE_GLOBAL, RILL_OK},
        {RILL_CAPTURE_RELAXED, RILL_CAPTURE_GLOBAL, RILL_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        RT_OK(rill_stream_begin_capture(s, cases[i].capture));
        rill_status st = unsafe_from_thread(cases[i].other_thread);
        assert_int_equal(st, cases[i].expect);
        rill_capture_status cs;
        RT_OK(rill_stream_get_capture_status(s, &cs));
        assert_int_equal(cs, st == RILL_OK ? RILL_CAPTURE_ACTIVE : RILL_CAPTURE_INVALIDATED);
        rill_graph *g;
        rill_status end = rill_stream_end_capture(s, &g);
        assert_int_equal(end, st == RILL_OK ? RILL_OK : RILL_ERROR_CAPTURE_INVALIDATED);
        if (g != NULL)
            RT_OK(rill_graph_destroy(g));
    }
    /* The capturing thread itself: forbidden under GLOBAL and THREAD_LOCAL
     * captures unless it switches itself to RELAXED; allowed under a
     * RELAXED capture. */
    for (int mode = RILL_CAPTURE_GLOBAL; mode <= RILL_CAPTURE_RELAXED; mode++) {
        void *p = NULL;
        RT_OK(rill_stream_begin_capture(s, (rill_capture_mode)mode));
        rill_capture_mode relaxed = RILL_CAPTURE_RELAXED;
        RT_OK(rill_thread_exchange_capture_mode(&relaxed));
        assert_int_equal(relaxed, RILL_CAPTURE_GLOBAL);
        RT_OK(rill_malloc(NULL, 64, &p)); /* runs at once */
        RT_OK(rill_free(p));
        RT_OK(rill_thread_exchange_capture_mode(&relaxed));
        rill_status st = rill_malloc(NULL, 64, &p);
        if (mode == RILL_CAPTURE_RELAXED) {
            RT_OK(st);
            RT_OK(rill_free(p));
        } else {
            assert_int_equal(st, RILL_ERROR_CAPTURE_UNSUPPORTED);
            assert_non_null(strstr(rill_last_error(), "RILL_CAPTURE_RELAXED"));
        }
        rill_graph *g;
        rill_status end = rill_stream_end_capture(s, &g);
        assert_int_equal(end,
                         mode == RILL_CAPTURE_RELAXED ? RILL_OK : RILL_ERROR_CAPTURE_INVALIDATED);
        if (g != NULL)
            RT_OK(rill_graph_destroy(g));
    }
    rill_capture_mode bad = (rill_capture_mode)7;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_thread_exchange_capture_mode(&bad));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_thread_exchange_capture_mode(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_begin_capture(s, bad));
    RT_OK(rill_stream_destroy(s));
}

/* Freeing memory the capture uses is unsafe; other memory frees freely. */
static void test_capture_free_of_used_memory_is_unsafe(void **state) {
    (void)state;
    rill_stream *s = named_stream("s");
    uint32_t *used, *unused;
    RT_OK(rill_malloc(NULL, 64, (void **)&used));
    RT_OK(rill_malloc(NULL, 64, (void **)&unused));
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_memset_async(used, 0, 64, s));
    RT_OK(rill_free(unused));
    RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_free(used));
    rill_graph *g;
    RT_STATUS(RILL_ERROR_CAPTURE_INVALIDATED, rill_stream_end_capture(s, &g));
    RT_OK(rill_free(used)); /* refused above: still allocated */
    RT_OK(rill_stream_destroy(s));
}

/* Waiting during capture on an event recorded outside it, or in another
 * capture: ISOLATION; a never-recorded event still does nothing. */
static void test_capture_isolation(void **state) {
    (void)state;
    rill_stream *a = named_stream("a"), *b = named_stream("b"), *c = named_stream("c");
    rill_event *outside, *never, *in_b;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &outside));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &never));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &in_b));
    uint32_t cells[1] = {0};
    step(c, cells, 0, NONE, 1, 1);
    RT_OK(rill_event_record(outside, c));
    RT_OK(rill_stream_begin_capture(a, RILL_CAPTURE_GLOBAL));
    RT_OK(rill_stream_begin_capture(b, RILL_CAPTURE_GLOBAL));
    RT_OK(rill_event_record(in_b, b));
    RT_STATUS(RILL_ERROR_CAPTURE_ISOLATION, rill_stream_wait_event(a, outside));
    RT_STATUS(RILL_ERROR_CAPTURE_ISOLATION, rill_stream_wait_event(a, in_b));
    RT_STATUS(RILL_ERROR_CAPTURE_ISOLATION, rill_stream_wait_stream(a, b));
    RT_STATUS(RILL_ERROR_CAPTURE_ISOLATION, rill_stream_wait_stream(a, c));
    RT_OK(rill_stream_wait_event(a, never));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_begin_capture(a, RILL_CAPTURE_GLOBAL));
    rill_graph *ga, *gb;
    RT_OK(rill_stream_end_capture(a, &ga));
    RT_OK(rill_stream_end_capture(b, &gb));
    RT_OK(rill_graph_destroy(ga));
    RT_OK(rill_graph_destroy(gb));
    RT_OK(rill_stream_synchronize(c));
    RT_OK(rill_event_destroy(outside));
    RT_OK(rill_event_destroy(never));
    RT_OK(rill_event_destroy(in_b));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(c));
}

/* Seed 004's shape with fresh inputs copied in before each of 1000
 * replays: out = in * 3 + 5 computed on a side stream. */
static void test_graph_replays_with_fresh_inputs(void **state) {
    (void)state;
    enum { N = 64 };
    rill_stream *s1 = named_stream("s1"), *s2 = named_stream("s2");
    float *in_h, *out_h, *in_d, *tmp_d, *out_d;
    RT_OK(rill_malloc_host(N * sizeof(float), (void **)&in_h));
    RT_OK(rill_malloc_host(N * sizeof(float), (void **)&out_h));
    RT_OK(rill_malloc(NULL, N * sizeof(float), (void **)&in_d));
    RT_OK(rill_malloc(NULL, N * sizeof(float), (void **)&tmp_d));
    RT_OK(rill_malloc(NULL, N * sizeof(float), (void **)&out_d));
    RT_OK(rill_stream_begin_capture(s1, RILL_CAPTURE_GLOBAL));
    RT_OK(rill_memcpy_async(in_d, in_h, N * sizeof(float), s1));
    fork_to(s1, s2);
    RT_OK(rill_op_add_f32(s2, tmp_d, in_d, in_d, 2.0f, N)); /* 3 * in */
    RT_OK(rill_op_add_scalar_f32(s2, out_d, tmp_d, 5.0f, N));
    fork_to(s2, s1);
    RT_OK(rill_memcpy_async(out_h, out_d, N * sizeof(float), s1));
    rill_graph *g;
    RT_OK(rill_stream_end_capture(s1, &g));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g));
    for (int rep = 0; rep < 1000; rep++) {
        for (int i = 0; i < N; i++)
            in_h[i] = (float)(rep + i);
        RT_OK(rill_graph_launch(x, s1));
        RT_OK(rill_stream_synchronize(s1));
        for (int i = 0; i < N; i++)
            if (out_h[i] != (float)(rep + i) * 3.0f + 5.0f)
                fail_msg("replay %d: out[%d] = %g, expected %g", rep, i, (double)out_h[i],
                         (double)((float)(rep + i) * 3.0f + 5.0f));
    }
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_free(in_d));
    RT_OK(rill_free(tmp_d));
    RT_OK(rill_free(out_d));
    RT_OK(rill_free_host(in_h));
    RT_OK(rill_free_host(out_h));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
}

static void host_add(void *p) {
    atomic_fetch_add((atomic_int *)p, 1);
}

/* Every node kind by hand, update with new parameters, and refusals. */
static void test_graph_by_hand_and_update(void **state) {
    (void)state;
    rill_stream *s = named_stream("s");
    uint32_t *cells;
    RT_OK(rill_malloc(NULL, 8 * sizeof *cells, (void **)&cells));
    uint32_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    atomic_int hits = 0;
    rill_event *rec;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &rec));
    rill_graph *g[2];
    for (int k = 0; k < 2; k++) {
        RT_OK(rill_graph_create(&g[k]));
        rill_graph_node *set, *cpy, *kern, *host, *empty, *recn;
        RT_OK(rill_graph_add_memset_node(g[k], NULL, 0, cells, 0, 8 * sizeof *cells, &set));
        RT_OK(rill_graph_add_memcpy_node(g[k], &set, 1, cells, src, (k + 1) * sizeof *cells, &cpy));
        step_args a = {cells, 7, 0, 1, k == 0 ? 100u : 200u};
        rill_launch l = {.grid = {1, 1, 1}, .args = &a, .args_size = sizeof a};
        RT_OK(rill_graph_add_kernel_node(g[k], &cpy, 1, step_k, &l, &kern));
        RT_OK(rill_graph_add_host_node(g[k], &cpy, 1, host_add, &hits, &host));
        rill_graph_node *both[2] = {kern, host};
        RT_OK(rill_graph_add_empty_node(g[k], both, 2, &empty));
        RT_OK(rill_graph_add_event_record_node(g[k], &empty, 1, rec, &recn));
        size_t n;
        RT_OK(rill_graph_node_count(g[k], &n));
        assert_int_equal(n, 6);
    }
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g[0], &x));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_event_synchronize(rec));
    assert_int_equal(cells[0], 1);
    assert_int_equal(cells[1], 0);
    assert_int_equal(cells[7], 101);
    assert_int_equal(atomic_load(&hits), 1);
    RT_OK(rill_graph_exec_update(x, g[1]));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(cells[1], 2);
    assert_int_equal(cells[7], 201);
    assert_int_equal(atomic_load(&hits), 2);
    /* A different topology is refused with what differs. */
    rill_graph *other;
    RT_OK(rill_graph_create(&other));
    rill_graph_node *e1;
    RT_OK(rill_graph_add_empty_node(other, NULL, 0, &e1));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_exec_update(x, other));
    assert_non_null(strstr(rill_last_error(), "1 nodes"));
    /* Bad arguments. */
    rill_graph_node *bad;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_empty_node(other, NULL, 1, &bad));
    rill_graph_node *foreign = NULL;
    RT_OK(rill_graph_add_empty_node(g[0], NULL, 0, &foreign));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_empty_node(other, &foreign, 1, &bad));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_graph_add_host_node(other, NULL, 0, NULL, NULL, &bad));
    rill_graph_exec *none;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_instantiate(NULL, &none));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_launch(NULL, s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_write_dot(other, NULL));
    RT_OK(rill_graph_destroy(other));
    RT_OK(rill_graph_destroy(g[0]));
    RT_OK(rill_graph_destroy(g[1]));
    RT_OK(rill_graph_exec_destroy(x));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_exec_destroy(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_destroy(NULL));
    RT_OK(rill_event_destroy(rec));
    RT_OK(rill_free(cells));
    RT_OK(rill_stream_destroy(s));
}

/* Style contract: "out-parameters come last and are NULL/0 on failure":
 * every refused node leaves NULL in *out, whichever check refuses it
 * (found by tests/fuzz/fuzz_graph.c: the checks made before the
 * dependency list left *out as it was). */
static void test_graph_refused_node_sets_out_to_null(void **state) {
    (void)state;
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_event *ipc;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &ipc));
    rill_graph_node *stale = (rill_graph_node *)(void *)&g;
    rill_graph_node *n = stale;
    rill_launch l = {.grid = {0, 1, 1}, .block = {1, 1, 1}};
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_kernel_node(g, NULL, 0, NULL, &l, &n));
    assert_null(n);
    n = stale;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_kernel_node(g, NULL, 0, step_k, &l, &n));
    assert_null(n);
    n = stale;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_host_node(g, NULL, 0, NULL, NULL, &n));
    assert_null(n);
    n = stale;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_memcpy_node(g, NULL, 0, NULL, &l, 1, &n));
    assert_null(n);
    n = stale;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_memset_node(g, NULL, 0, NULL, 0, 1, &n));
    assert_null(n);
    n = stale;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_event_record_node(g, NULL, 0, NULL, &n));
    assert_null(n);
    n = stale;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_graph_add_event_wait_node(g, NULL, 0, ipc, &n));
    assert_null(n);
    size_t count = 1;
    RT_OK(rill_graph_node_count(g, &count));
    assert_int_equal(count, 0);
    RT_OK(rill_event_destroy(ipc));
    RT_OK(rill_graph_destroy(g));
}

/* A kernel node's launch is checked as rill_launch_kernel checks one (one
 * check serves both): a declared access with a NULL pointer or an unknown
 * mode is refused, naming the access. */
static void test_graph_kernel_node_accesses_are_checked_as_launches_are(void **state) {
    (void)state;
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    float x = 0.0f;
    rill_access bad[2] = {{&x, sizeof x, RILL_READ}, {NULL, 4, RILL_WRITE}};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .accesses = bad, .num_accesses = 2};
    rill_graph_node *n;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_kernel_node(g, NULL, 0, step_k, &l, &n));
    assert_non_null(strstr(rill_last_error(), "access 1"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_kernel(NULL, step_k, &l));
    assert_non_null(strstr(rill_last_error(), "access 1"));
    bad[1].ptr = &x;
    bad[1].mode = (rill_access_mode)7;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_kernel_node(g, NULL, 0, step_k, &l, &n));
    assert_non_null(strstr(rill_last_error(), "mode"));
    size_t count = 1;
    RT_OK(rill_graph_node_count(g, &count));
    assert_int_equal(count, 0);
    RT_OK(rill_graph_destroy(g));
}

/* A memset or memcpy node is checked against the allocations it touches
 * as rill_memset_async and rill_memcpy_async check what they capture: one
 * byte past the end of device memory is RILL_ERROR_INVALID_ARGUMENT with
 * a sentence, where a launch would have written into the next block (found
 * by tests/fuzz/fuzz_graph.c); the exact fit is added and runs. */
static void test_graph_copy_and_set_nodes_refuse_to_run_past_an_allocation(void **state) {
    (void)state;
    enum { N = 64 };
    rill_stream *s = named_stream("s");
    unsigned char *a, *next;
    RT_OK(rill_malloc(NULL, N, (void **)&a));
    RT_OK(rill_malloc(NULL, N, (void **)&next));
    RT_OK(rill_memset_async(next, 7, N, s));
    unsigned char host[2 * N];
    memset(host, 1, sizeof host);
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *n;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_memset_node(g, NULL, 0, a, 9, N + 1, &n));
    assert_non_null(strstr(rill_last_error(), "rill_graph_add_memset_node: dst ("));
    assert_non_null(strstr(rill_last_error(), "covers 65 bytes, but its allocation has 64 bytes"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_add_memset_node(g, NULL, 0, a + 1, 9, N, &n));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_graph_add_memcpy_node(g, NULL, 0, a, host, N + 1, &n));
    assert_non_null(strstr(rill_last_error(), "rill_graph_add_memcpy_node: dst ("));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_graph_add_memcpy_node(g, NULL, 0, host, a + N - 1, 2, &n));
    assert_non_null(strstr(rill_last_error(), "rill_graph_add_memcpy_node: src ("));
    size_t count = 1;
    RT_OK(rill_graph_node_count(g, &count));
    assert_int_equal(count, 0);

    rill_graph_node *set, *copy;
    RT_OK(rill_graph_add_memset_node(g, NULL, 0, a, 9, N, &set));
    RT_OK(rill_graph_add_memcpy_node(g, &set, 1, host, a, N, &copy));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    for (int i = 0; i < 2 * N; i++)
        assert_int_equal(host[i], i < N ? 9 : 1);
    unsigned char got[N];
    RT_OK(rill_memcpy(got, next, N));
    for (int i = 0; i < N; i++)
        assert_int_equal(got[i], 7);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free(a));
    RT_OK(rill_free(next));
    RT_OK(rill_stream_destroy(s));
}

/* Allocation during capture: private to the graph, reused inside it in
 * stream order, at the same addresses for every replay, refused to
 * rill_free, and returned to the device when the graph and exec go. */
static void test_graph_private_memory(void **state) {
    (void)state;
    rill_stream *s = named_stream("s");
    rill_mem_stats before, after;
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_mem_get_stats(NULL, &before));
    float *out;
    RT_OK(rill_malloc(NULL, 16 * sizeof(float), (void **)&out));
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    float *t1, *t2, *t3;
    RT_OK(rill_malloc_async(1024, s, (void **)&t1));
    RT_OK(rill_op_fill_f32(s, t1, 2.0f, 16));
    RT_OK(rill_malloc_async(1024, s, (void **)&t2));
    assert_ptr_not_equal(t1, t2); /* t1 still live */
    RT_OK(rill_op_add_scalar_f32(s, t2, t1, 1.0f, 16));
    RT_OK(rill_free_async(t1, s));
    RT_OK(rill_malloc_async(1024, s, (void **)&t3));
    assert_ptr_equal(t3, t1); /* freed earlier on the same stream: reused */
    RT_OK(rill_op_mul_f32(s, t3, t2, t2, 16));
    RT_OK(rill_op_add_f32(s, out, t3, t2, 1.0f, 16)); /* 9 + 3 */
    RT_OK(rill_free_async(t2, s));
    RT_OK(rill_free_async(t3, s));
    rill_graph *g;
    RT_OK(rill_stream_end_capture(s, &g));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(t1));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g));
    for (int rep = 0; rep < 3; rep++) {
        memset(out, 0, 16 * sizeof(float));
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_stream_synchronize(s));
        for (int i = 0; i < 16; i++)
            assert_true(out[i] == 12.0f);
    }
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_free(out));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_get_stats(NULL, &after));
    assert_int_equal(after.allocated_bytes, before.allocated_bytes);
    RT_OK(rill_stream_destroy(s));
}

/* "refused to rill_free" with many graphs alive, each free answered from
 * the index of graph memory: 256 graphs with two live blocks each are
 * destroyed in a scattered order; after each, the blocks of every graph
 * still alive are refused and memory allocated eagerly (which may reuse
 * the addresses of the graphs gone) is freed. */
static void test_graph_memory_of_many_graphs_is_refused_until_they_go(void **state) {
    (void)state;
    enum { GRAPHS = 256 };
    rill_stream *s = named_stream("s");
    static rill_graph_exec *execs[GRAPHS];
    static void *blocks[GRAPHS][2];
    for (int i = 0; i < GRAPHS; i++) {
        RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
        RT_OK(rill_malloc_async(512, s, &blocks[i][0]));
        RT_OK(rill_malloc_async(4096, s, &blocks[i][1]));
        RT_OK(rill_op_fill_f32(s, blocks[i][0], 1.0f, 16));
        rill_graph *g;
        RT_OK(rill_stream_end_capture(s, &g));
        RT_OK(rill_graph_instantiate(g, &execs[i]));
        RT_OK(rill_graph_destroy(g));
    }
    for (int k = 0; k < GRAPHS; k++) {
        int gone = (k * 97) % GRAPHS; /* 97 is prime to 256: each graph once */
        RT_OK(rill_graph_exec_destroy(execs[gone]));
        execs[gone] = NULL;
        for (int i = 0; i < GRAPHS; i += 7) {
            if (execs[i] == NULL)
                continue;
            RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(blocks[i][k % 2]));
            assert_non_null(strstr(rill_last_error(), "belongs to its graph"));
        }
        void *p, *q;
        RT_OK(rill_malloc(NULL, 512, &p));
        RT_OK(rill_malloc_async(4096, s, &q));
        RT_OK(rill_free(p));
        RT_OK(rill_free_async(q, s));
    }
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

/* A kernel failing inside a launch fails the stream like an eager one. */
static void test_graph_kernel_failure_is_sticky(void **state) {
    (void)state;
    rill_stream *s = named_stream("s"), *side = named_stream("side");
    uint32_t cells[2] = {0, 0};
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    fork_to(s, side);
    rill_launch l = {.grid = {1, 1, 1}};
    RT_OK(rill_launch_kernel(side, fail_k, &l));
    step(s, cells, 1, NONE, 1, 1);
    fork_to(side, s);
    step(s, cells, 0, NONE, 1, 1); /* after the failure: skipped */
    rill_graph *g;
    RT_OK(rill_stream_end_capture(s, &g));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_non_null(strstr(rill_last_error(), "fails"));
    assert_non_null(strstr(rill_last_error(), "the input was bad"));
    assert_int_equal(cells[0], 0);
    RT_OK(rill_stream_clear_error(s));
    step(s, cells, 0, NONE, 1, 5);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(cells[0], 5);
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(side));
}

typedef struct race_flags {
    atomic_int started, failed, finishing;
} race_flags;

/* Fails once the other node runs, then returns only once it has finished. */
static void fail_then_wait(const rill_block_ctx *ctx, const void *args) {
    race_flags *f;
    memcpy(&f, args, sizeof f);
    uint64_t deadline = rt_now_ns() + RT_GATE_TIMEOUT_NS;
    while (!atomic_load(&f->started) && rt_now_ns() < deadline)
        rt_sleep_us(50);
    rill_kernel_fail(ctx, "the first node failed");
    atomic_store(&f->failed, 1);
    while (!atomic_load(&f->finishing) && rt_now_ns() < deadline)
        rt_sleep_us(50);
    rt_sleep_us(20000); /* the other node's runner is done with it by now */
}

/* Succeeds, once the first node has failed after it started. */
static void finish_after_failure(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    race_flags *f;
    memcpy(&f, args, sizeof f);
    atomic_store(&f->started, 1);
    uint64_t deadline = rt_now_ns() + RT_GATE_TIMEOUT_NS;
    while (!atomic_load(&f->failed) && rt_now_ns() < deadline)
        rt_sleep_us(50);
    atomic_store(&f->finishing, 1);
}

/* The failure names the node that failed, also when a parallel node that
 * succeeded finished after the failure and before the failed node did. */
static void test_graph_failure_names_the_node_that_failed(void **state) {
    (void)state;
    race_flags f = {0};
    race_flags *fp = &f;
    rill_kernel_desc da = {.name = "fails_first", .cpu = fail_then_wait};
    rill_kernel_desc db = {.name = "succeeds_later", .cpu = finish_after_failure};
    rill_kernel *ka, *kb;
    RT_OK(rill_kernel_create(&da, &ka));
    RT_OK(rill_kernel_create(&db, &kb));
    rill_graph *g;
    rill_graph_node *a, *b;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &fp, .args_size = sizeof fp};
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, ka, &l, &a));
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, kb, &l, &b));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    rill_stream *s = named_stream("names");
    RT_OK(rill_graph_launch(x, s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&f.finishing), 1); /* both ran, at once */
    assert_non_null(strstr(rill_last_error(), "fails_first"));
    assert_null(strstr(rill_last_error(), "succeeds_later"));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_kernel_destroy(ka));
    RT_OK(rill_kernel_destroy(kb));
    RT_OK(rill_stream_destroy(s));
}

static void host_fails(void *user_data) {
    (void)user_data;
    rill_host_func_fail("graph-host-failed");
}

static void host_marks(void *user_data) {
    atomic_fetch_add((atomic_int *)user_data, 1);
}

/* rill_host_func_fail: "in a graph, the launch fails as with a failing kernel node": in a chain
 * and in a graph with parallel branches, the stream's error is sticky, names the host node and
 * its message, and the nodes after it are skipped. */
static void test_graph_host_node_failure_is_sticky(void **state) {
    (void)state;
    static atomic_int marks;
    atomic_store(&marks, 0);
    rill_stream *s = named_stream("s");
    for (int parallel = 0; parallel < 2; parallel++) {
        rill_graph *g;
        RT_OK(rill_graph_create(&g));
        rill_graph_node *root = NULL, *fail = NULL, *side = NULL, *last = NULL;
        if (parallel)
            RT_OK(rill_graph_add_empty_node(g, NULL, 0, &root));
        RT_OK(rill_graph_add_host_node(g, parallel ? &root : NULL, parallel ? 1 : 0, host_fails,
                                       NULL, &fail));
        rill_graph_node *deps[2] = {fail, NULL};
        if (parallel) {
            RT_OK(rill_graph_add_empty_node(g, &root, 1, &side));
            deps[1] = side;
        }
        RT_OK(rill_graph_add_host_node(g, deps, parallel ? 2 : 1, host_marks, &marks, &last));
        rill_graph_exec *x;
        RT_OK(rill_graph_instantiate(g, &x));
        RT_OK(rill_graph_launch(x, s));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
        assert_non_null(strstr(rill_last_error(), parallel ? "host function (graph node 1)"
                                                           : "host function (graph node 0)"));
        assert_non_null(strstr(rill_last_error(), "graph-host-failed"));
        assert_int_equal(atomic_load(&marks), 0);
        RT_OK(rill_stream_clear_error(s));
        RT_OK(rill_graph_destroy(g));
        RT_OK(rill_graph_exec_destroy(x));
    }
    RT_OK(rill_stream_destroy(s));
}

/* rill_shutdown with a capture active: nothing captured runs, the next
 * runtime works. */
static void test_capture_abandoned_by_shutdown(void **state) {
    (void)state;
    rill_stream *s = named_stream("s");
    uint32_t cells[1] = {0};
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    step(s, cells, 0, NONE, 1, 1);
    RT_OK(rill_kernel_destroy(step_k));
    RT_OK(rill_kernel_destroy(count_k));
    RT_OK(rill_kernel_destroy(fail_k));
    RT_OK(rill_shutdown());
    assert_int_equal(cells[0], 0);
    assert_int_equal(setup(NULL), 0);
    s = named_stream("again");
    step(s, cells, 0, NONE, 1, 4);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(cells[0], 4);
    RT_OK(rill_stream_destroy(s));
}

/* ------------------------------------------------- random programs */

enum { RS = 4, RCELLS = 4 * 8 };

typedef struct rop {
    int kind; /* 0: step, 1: cross-stream add through a mailbox */
    int stream, other;
    uint32_t mul, add;
} rop;

/* Runs prog on streams s[0..RS); stream j owns cells [8j, 8j + 8);
 * mailbox cells come after them. Every stream is joined back to s[0]. */
static void run_program(rill_stream **s, uint32_t *cells, const rop *prog, int n) {
    int mail = RS * 8;
    for (int k = 1; k < RS; k++)
        fork_to(s[0], s[k]);
    for (int i = 0; i < n; i++) {
        const rop *o = &prog[i];
        int own = o->stream * 8;
        if (o->kind == 0) {
            step(s[o->stream], cells, own, NONE, o->mul, o->add);
        } else {
            /* other copies its cell to a fresh mailbox; stream adds it */
            step(s[o->other], cells, mail, NONE, 0, 0);
            step(s[o->other], cells, mail, o->other * 8, 1, 0);
            fork_to(s[o->other], s[o->stream]);
            step(s[o->stream], cells, own, mail, o->mul, o->add);
            mail++;
        }
    }
    for (int k = 1; k < RS; k++)
        fork_to(s[k], s[0]);
}

static void test_graph_random_programs_match_eager(void **state) {
    (void)state;
    rill_stream *s[RS];
    char name[8];
    for (int k = 0; k < RS; k++) {
        snprintf(name, sizeof name, "r%d", k);
        s[k] = named_stream(name);
    }
    uint32_t seed = 12345;
    enum { OPS = 40 };
    uint32_t *cells;
    RT_OK(rill_malloc(NULL, (RCELLS + OPS) * sizeof *cells, (void **)&cells));
    uint32_t eager[RCELLS];
    for (int trial = 0; trial < 40; trial++) {
        rop prog[OPS];
        for (int i = 0; i < OPS; i++) {
            seed = seed * 1664525u + 1013904223u;
            prog[i].kind = (seed >> 8) % 3 == 0;
            prog[i].stream = (int)((seed >> 12) % RS);
            prog[i].other = (prog[i].stream + 1 + (int)((seed >> 16) % (RS - 1))) % RS;
            prog[i].mul = 1 + (seed >> 20) % 5;
            prog[i].add = (seed >> 24) % 7;
        }
        memset(cells, 0, (RCELLS + OPS) * sizeof *cells);
        run_program(s, cells, prog, OPS);
        RT_OK(rill_stream_synchronize(s[0]));
        memcpy(eager, cells, sizeof eager);
        RT_OK(rill_stream_begin_capture(s[0], RILL_CAPTURE_GLOBAL));
        run_program(s, cells, prog, OPS);
        rill_graph *g;
        RT_OK(rill_stream_end_capture(s[0], &g));
        rill_graph_exec *x;
        RT_OK(rill_graph_instantiate(g, &x));
        RT_OK(rill_graph_destroy(g));
        for (int rep = 0; rep < 3; rep++) {
            memset(cells, 0, (RCELLS + OPS) * sizeof *cells);
            RT_OK(rill_graph_launch(x, s[rep % RS]));
            RT_OK(rill_stream_synchronize(s[rep % RS]));
            if (memcmp(cells, eager, sizeof eager) != 0)
                fail_msg("trial %d replay %d differs from the eager run", trial, rep);
        }
        RT_OK(rill_graph_exec_destroy(x));
    }
    RT_OK(rill_free(cells));
    for (int k = 0; k < RS; k++)
        RT_OK(rill_stream_destroy(s[k]));
}

/* A wide fan-out with multi-block kernels runs every block once. */
static void count_blocks(const rill_block_ctx *ctx, const void *args) {
    atomic_int *hits;
    memcpy(&hits, args, sizeof hits);
    atomic_fetch_add(&hits[ctx->block_idx.x], 1);
}

static void test_graph_fan_out_runs_every_block_once(void **state) {
    (void)state;
    rill_kernel *k;
    rill_kernel_desc d = {.name = "count_blocks", .cpu = count_blocks};
    RT_OK(rill_kernel_create(&d, &k));
    enum { FAN = 300, BLOCKS = 64 };
    static atomic_int hits[FAN][BLOCKS];
    memset(hits, 0, sizeof hits);
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *root, *sink, *mid[FAN];
    RT_OK(rill_graph_add_empty_node(g, NULL, 0, &root));
    for (int i = 0; i < FAN; i++) {
        atomic_int *h = hits[i];
        rill_launch l = {
            .grid = {i % 3 == 0 ? BLOCKS : 1, 1, 1}, .args = &h, .args_size = sizeof h};
        RT_OK(rill_graph_add_kernel_node(g, &root, 1, k, &l, &mid[i]));
    }
    RT_OK(rill_graph_add_empty_node(g, mid, FAN, &sink));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    rill_stream *s = named_stream("fan");
    for (int rep = 1; rep <= 20; rep++) {
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_stream_synchronize(s));
        for (int i = 0; i < FAN; i++)
            for (int b = 0; b < (i % 3 == 0 ? BLOCKS : 1); b++)
                if (atomic_load(&hits[i][b]) != rep)
                    fail_msg("launch %d: node %d block %d ran %d times", rep, i, b,
                             atomic_load(&hits[i][b]));
    }
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
}

/* Independent branches of a launch run at the same time: each of two host
 * nodes waits (with a deadline) until the other has started. */
typedef struct rendezvous {
    atomic_int arrived;
    atomic_int missed;
} rendezvous;

static void meet(void *p) {
    rendezvous *r = p;
    atomic_fetch_add(&r->arrived, 1);
    uint64_t deadline = rt_now_ns() + 5000000000ull;
    while (atomic_load(&r->arrived) < 2)
        if (rt_now_ns() > deadline) {
            atomic_store(&r->missed, 1);
            return;
        }
}

static void test_graph_branches_run_concurrently(void **state) {
    (void)state;
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    if (info.compute_units < 2)
        skip();
    rendezvous rv;
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *root, *a, *b;
    RT_OK(rill_graph_add_empty_node(g, NULL, 0, &root));
    RT_OK(rill_graph_add_host_node(g, &root, 1, meet, &rv, &a));
    RT_OK(rill_graph_add_host_node(g, &root, 1, meet, &rv, &b));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    rill_stream *s = named_stream("s");
    for (int rep = 0; rep < 3; rep++) {
        atomic_store(&rv.arrived, 0);
        atomic_store(&rv.missed, 0);
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(atomic_load(&rv.arrived), 2);
        assert_int_equal(atomic_load(&rv.missed), 0);
    }
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(s));
}

/* Launches of one exec never overlap, even on different streams. */
typedef struct overlap {
    atomic_int inside, overlapped, runs;
} overlap;

static void enter_leave(void *p) {
    overlap *o = p;
    if (atomic_fetch_add(&o->inside, 1) != 0)
        atomic_store(&o->overlapped, 1);
    rt_spin_us(200);
    atomic_fetch_sub(&o->inside, 1);
    atomic_fetch_add(&o->runs, 1);
}

static void test_graph_launches_of_one_exec_do_not_overlap(void **state) {
    (void)state;
    overlap o = {0};
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *n;
    RT_OK(rill_graph_add_host_node(g, NULL, 0, enter_leave, &o, &n));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    rill_stream *s[3] = {named_stream("l0"), named_stream("l1"), named_stream("l2")};
    for (int i = 0; i < 30; i++)
        RT_OK(rill_graph_launch(x, s[i % 3]));
    for (int i = 0; i < 3; i++)
        RT_OK(rill_stream_synchronize(s[i]));
    assert_int_equal(atomic_load(&o.runs), 30);
    assert_int_equal(atomic_load(&o.overlapped), 0);
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_exec_destroy(x));
    for (int i = 0; i < 3; i++)
        RT_OK(rill_stream_destroy(s[i]));
}

/* ------------------------------------------- exec update and launches */

/* A kernel node's arguments in the update tests: the parameter set it
 * belongs to, and a pattern made from it that the kernel checks, so a
 * launch reading freed or half-written arguments is seen. */
enum { SET_NODES = 4, SET_PATTERN = 24 };
typedef struct set_args {
    uint32_t set, node;
    _Atomic uint32_t *seen; /* per node: the set of the launch being run */
    atomic_int *bad;        /* launches that mixed sets or saw a bad pattern */
    atomic_int *runs;       /* launches whose last node ran */
    _Atomic uint32_t *log;  /* the set of each launch, in launch order */
    uint32_t pattern[SET_PATTERN];
} set_args;

static bool pattern_ok(const set_args *a) {
    for (uint32_t k = 0; k < SET_PATTERN; k++)
        if (a->pattern[k] != a->set * 1000u + k)
            return false;
    return true;
}

/* Reads its arguments twice, a few microseconds apart, so that a launch
 * whose arguments are freed or rewritten while it runs is caught (by the
 * pattern, and by the sanitizers). */
static void set_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    set_args a, again;
    memcpy(&a, args, sizeof a);
    rt_spin_us(5);
    memcpy(&again, args, sizeof again);
    if (!pattern_ok(&a) || memcmp(&a, &again, sizeof a) != 0)
        atomic_fetch_add(a.bad, 1);
    atomic_store(&a.seen[a.node], a.set);
}

/* The last node: every node of this launch ran with its set. */
static void set_check_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    set_args a;
    memcpy(&a, args, sizeof a);
    bool ok = pattern_ok(&a);
    for (uint32_t n = 0; n < SET_NODES - 1; n++)
        ok = ok && atomic_load(&a.seen[n]) == a.set;
    if (!ok)
        atomic_fetch_add(a.bad, 1);
    int i = atomic_fetch_add(a.runs, 1);
    if (a.log != NULL)
        atomic_store(&a.log[i], a.set);
}

typedef struct set_state {
    _Atomic uint32_t seen[SET_NODES];
    atomic_int bad, runs;
    _Atomic uint32_t log[8];
} set_state;

/* Parameter set `set` of a graph of SET_NODES kernel nodes: a diamond
 * (node 2 with 4 blocks) when diamond, else a chain of one-block nodes. */
static rill_graph *set_graph(rill_kernel *k, rill_kernel *check, set_state *st, uint32_t set,
                             bool diamond, bool log) {
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *n[SET_NODES];
    for (uint32_t i = 0; i < SET_NODES; i++) {
        set_args a = {.set = set,
                      .node = i,
                      .seen = st->seen,
                      .bad = &st->bad,
                      .runs = &st->runs,
                      .log = log ? st->log : NULL};
        for (uint32_t j = 0; j < SET_PATTERN; j++)
            a.pattern[j] = set * 1000u + j;
        rill_launch l = {
            .grid = {diamond && i == 2 ? 4 : 1, 1, 1}, .args = &a, .args_size = sizeof a};
        rill_graph_node *deps[2] = {NULL, NULL};
        size_t nd = 0;
        if (i > 0 && (!diamond || i < SET_NODES - 1))
            deps[nd++] = n[diamond ? 0 : i - 1];
        else if (i == SET_NODES - 1) {
            deps[nd++] = n[1];
            deps[nd++] = n[2];
        }
        RT_OK(rill_graph_add_kernel_node(g, deps, nd, i == SET_NODES - 1 ? check : k, &l, &n[i]));
    }
    return g;
}

typedef struct race_thread {
    pthread_barrier_t *start;
    rill_graph_exec *x;
    rill_graph *g[2];
    rill_stream *s; /* launchers: their stream; updaters: NULL */
    int index;
    atomic_int failures;
} race_thread;

enum { RACE_ROUNDS = 300 };

static void *race_main(void *p) {
    race_thread *t = p;
    pthread_barrier_wait(t->start);
    for (int i = 0; i < RACE_ROUNDS; i++) {
        rill_status st = t->s != NULL ? rill_graph_launch(t->x, t->s)
                                      : rill_graph_exec_update(t->x, t->g[(i + t->index) % 2]);
        if (st == RILL_OK && t->s != NULL && i % 50 == 49)
            st = rill_stream_synchronize(t->s);
        if (st != RILL_OK)
            atomic_fetch_add(&t->failures, 1);
    }
    if (t->s != NULL && rill_stream_synchronize(t->s) != RILL_OK)
        atomic_fetch_add(&t->failures, 1);
    return NULL;
}

/* "Every function is thread-safe": two threads launch one exec on their
 * streams while two others update it between two parameter sets; every
 * launch runs with one whole set, old or new, and never with arguments
 * an update freed. */
static void test_graph_update_racing_launches_runs_each_launch_with_one_set(void **state) {
    (void)state;
    rill_kernel *k, *check;
    rill_kernel_desc d1 = {.name = "set", .cpu = set_kernel};
    rill_kernel_desc d2 = {.name = "set_check", .cpu = set_check_kernel};
    RT_OK(rill_kernel_create(&d1, &k));
    RT_OK(rill_kernel_create(&d2, &check));
    for (int diamond = 0; diamond < 2; diamond++) {
        static set_state st;
        memset(&st, 0, sizeof st);
        rill_graph *g[2] = {set_graph(k, check, &st, 1, diamond, false),
                            set_graph(k, check, &st, 2, diamond, false)};
        rill_graph_exec *x;
        RT_OK(rill_graph_instantiate(g[0], &x));
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 4);
        race_thread t[4];
        pthread_t tid[4];
        for (int i = 0; i < 4; i++) {
            t[i] = (race_thread){.start = &start, .x = x, .g = {g[0], g[1]}, .index = i};
            atomic_init(&t[i].failures, 0);
            if (i < 2)
                t[i].s = named_stream(i == 0 ? "launcher 0" : "launcher 1");
            assert_int_equal(pthread_create(&tid[i], NULL, race_main, &t[i]), 0);
        }
        for (int i = 0; i < 4; i++)
            pthread_join(tid[i], NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < 4; i++)
            assert_int_equal(atomic_load(&t[i].failures), 0);
        assert_int_equal(atomic_load(&st.runs), 2 * RACE_ROUNDS);
        assert_int_equal(atomic_load(&st.bad), 0);
        RT_OK(rill_graph_exec_destroy(x));
        RT_OK(rill_graph_destroy(g[0]));
        RT_OK(rill_graph_destroy(g[1]));
        RT_OK(rill_stream_destroy(t[0].s));
        RT_OK(rill_stream_destroy(t[1].s));
    }
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_kernel_destroy(check));
}

typedef struct update_call {
    rill_graph_exec *x;
    rill_graph *g;
    rill_status status;
} update_call;

static void update_from_host(void *p) {
    update_call *u = p;
    u->status = rill_graph_exec_update(u->x, u->g);
}

/* An update changes the launches submitted after it: a launch already
 * submitted (here held behind a gate, not yet running) keeps its set, and
 * the update does not wait for it. */
static void test_graph_update_leaves_submitted_launches_their_parameters(void **state) {
    (void)state;
    rill_kernel *k, *check;
    rill_kernel_desc d1 = {.name = "set", .cpu = set_kernel};
    rill_kernel_desc d2 = {.name = "set_check", .cpu = set_check_kernel};
    RT_OK(rill_kernel_create(&d1, &k));
    RT_OK(rill_kernel_create(&d2, &check));
    static set_state st;
    memset(&st, 0, sizeof st);
    rill_graph *g[2] = {set_graph(k, check, &st, 1, true, true),
                        set_graph(k, check, &st, 2, true, true)};
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g[0], &x));
    rill_stream *s = named_stream("s");
    static rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &gate));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_graph_exec_update(x, g[1]));
    RT_OK(rill_graph_destroy(g[1])); /* the exec keeps what it took */
    RT_OK(rill_graph_launch(x, s));
    assert_int_equal(atomic_load(&st.runs), 0); /* both still held by the gate */
    rt_gate_open(&gate);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&gate.timed_out), 0);
    assert_int_equal(atomic_load(&st.runs), 2);
    assert_int_equal(atomic_load(&st.bad), 0);
    assert_int_equal(atomic_load(&st.log[0]), 1);
    assert_int_equal(atomic_load(&st.log[1]), 2);
    /* From a host function, too: it does not block. */
    update_call u = {.x = x, .g = g[0], .status = RILL_ERROR_INTERNAL};
    RT_OK(rill_launch_host_func(s, update_from_host, &u));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(u.status, RILL_OK);
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&st.runs), 3);
    assert_int_equal(atomic_load(&st.log[2]), 1);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g[0]));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_kernel_destroy(check));
}

/* A kernel node that takes a ticket: when it ran, against gates. */
static void ticket_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    _Atomic uint64_t *slot;
    memcpy(&slot, args, sizeof slot);
    atomic_store(slot, rt_take_ticket());
}

/* "An event wait node holds its event": with the event destroyed, every
 * launch still succeeds and waits for the event's last record. */
static void test_graph_wait_node_outlives_destroyed_event(void **state) {
    (void)state;
    rill_kernel *k;
    rill_kernel_desc d = {.name = "ticket", .cpu = ticket_kernel};
    RT_OK(rill_kernel_create(&d, &k));
    rill_stream *s = named_stream("s"), *side = named_stream("side");
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    static _Atomic uint64_t ran;
    _Atomic uint64_t *slot = &ran;
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *w, *kn;
    RT_OK(rill_graph_add_event_wait_node(g, NULL, 0, e, &w));
    rill_launch l = {.grid = {1, 1, 1}, .args = &slot, .args_size = sizeof slot};
    RT_OK(rill_graph_add_kernel_node(g, &w, 1, k, &l, &kn));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g));
    static rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_launch_host_func(side, rt_gate_fn, &gate));
    RT_OK(rill_event_record(e, side));
    RT_OK(rill_event_destroy(e));
    for (int rep = 0; rep < 3; rep++) {
        atomic_store(&ran, 0);
        RT_OK(rill_graph_launch(x, s));
        if (rep == 0)
            rt_gate_open(&gate);
        RT_OK(rill_stream_synchronize(s));
        assert_true(atomic_load(&ran) > atomic_load(&gate.end_ticket));
    }
    assert_int_equal(atomic_load(&gate.timed_out), 0);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(side));
    RT_OK(rill_kernel_destroy(k));
}

/* A kernel failing at its first run only; each run takes a ticket. */
typedef struct first_fails {
    atomic_int calls;
    _Atomic uint64_t ticket[4];
} first_fails;

static void first_fails_kernel(const rill_block_ctx *ctx, const void *args) {
    first_fails *f;
    memcpy(&f, args, sizeof f);
    int i = atomic_fetch_add(&f->calls, 1);
    if (i < 4)
        atomic_store(&f->ticket[i], rt_take_ticket());
    if (i == 0)
        rill_kernel_fail(ctx, "the first run fails");
}

/* "A failure in a launch is a sticky error of the stream it ran on": the
 * exec's next launch on another stream runs after it, and succeeds,
 * whether the failed launch was still pending when the next was
 * submitted or had already failed. */
static void test_graph_failed_launch_does_not_fail_next_launch_elsewhere(void **state) {
    (void)state;
    rill_kernel *k;
    rill_kernel_desc d = {.name = "first_fails", .cpu = first_fails_kernel};
    RT_OK(rill_kernel_create(&d, &k));
    rill_stream *a = named_stream("a"), *b = named_stream("b");
    static first_fails f;
    first_fails *fp = &f;
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *n;
    rill_launch l = {.grid = {1, 1, 1}, .args = &fp, .args_size = sizeof fp};
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, k, &l, &n));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g));
    for (int pending = 0; pending < 2; pending++) {
        memset(&f, 0, sizeof f);
        static rt_gate gate;
        rt_gate_reset(&gate);
        if (pending)
            RT_OK(rill_launch_host_func(a, rt_gate_fn, &gate));
        RT_OK(rill_graph_launch(x, a));
        if (!pending)
            RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(a));
        RT_OK(rill_graph_launch(x, b));
        if (pending)
            rt_gate_open(&gate);
        RT_OK(rill_stream_synchronize(b));
        RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(a));
        assert_non_null(strstr(rill_last_error(), "the first run fails"));
        assert_int_equal(atomic_load(&f.calls), 2);
        assert_true(atomic_load(&f.ticket[1]) > atomic_load(&f.ticket[0]));
        RT_OK(rill_stream_clear_error(a));
        RT_OK(rill_stream_synchronize(a));
    }
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_kernel_destroy(k));
}

/* "...unless it waits for the failed work itself": a launch whose event
 * wait node waits for a record made after a failure fails its stream,
 * with the failed kernel in the sentence. */
static void test_graph_wait_node_on_failed_work_fails_the_launch(void **state) {
    (void)state;
    rill_stream *a = named_stream("a"), *b = named_stream("b");
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    atomic_int hits = 0;
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *w, *h;
    RT_OK(rill_graph_add_event_wait_node(g, NULL, 0, e, &w));
    RT_OK(rill_graph_add_host_node(g, &w, 1, host_add, &hits, &h));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g));
    rill_launch l = {.grid = {1, 1, 1}};
    RT_OK(rill_launch_kernel(a, fail_k, &l));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_graph_launch(x, b));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    assert_non_null(strstr(rill_last_error(), "'fails'"));
    assert_int_equal(atomic_load(&hits), 0);
    RT_OK(rill_stream_clear_error(a));
    RT_OK(rill_stream_clear_error(b));
    RT_OK(rill_event_record(e, a)); /* a clean record: the next launch runs */
    RT_OK(rill_graph_launch(x, b));
    RT_OK(rill_stream_synchronize(b));
    assert_int_equal(atomic_load(&hits), 1);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* Host node of the skip test: when each run started and ended. */
typedef struct run_log {
    atomic_int runs;
    _Atomic uint64_t start[4], end[4];
} run_log;

static void log_run(void *p) {
    run_log *r = p;
    int i = atomic_fetch_add(&r->runs, 1);
    if (i >= 4)
        return;
    atomic_store(&r->start[i], rt_take_ticket());
    rt_spin_us(100);
    atomic_store(&r->end[i], rt_take_ticket());
}

/* A launch into a stream with a sticky error is skipped, but the exec's
 * launches still run one after another: a launch that comes after the
 * skipped one runs only once the launch before that has ended, and does
 * not fail. */
static void test_graph_skipped_launch_keeps_launches_in_order(void **state) {
    (void)state;
    rill_stream *a = named_stream("a"), *b = named_stream("b"), *c = named_stream("c");
    static run_log r;
    memset(&r, 0, sizeof r);
    rill_graph *g;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *n;
    RT_OK(rill_graph_add_host_node(g, NULL, 0, log_run, &r, &n));
    rill_graph_exec *x;
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_destroy(g));
    rill_launch l = {.grid = {1, 1, 1}};
    RT_OK(rill_launch_kernel(a, fail_k, &l));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(a));
    static rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_launch_host_func(c, rt_gate_fn, &gate));
    RT_OK(rill_graph_launch(x, c)); /* runs once the gate opens */
    RT_OK(rill_graph_launch(x, a)); /* skipped: a has failed */
    RT_OK(rill_graph_launch(x, b)); /* after both */
    assert_int_equal(rill_stream_query(b), RILL_NOT_READY);
    rt_gate_open(&gate);
    RT_OK(rill_stream_synchronize(b));
    RT_OK(rill_stream_synchronize(c));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(a));
    assert_int_equal(atomic_load(&gate.timed_out), 0);
    assert_int_equal(atomic_load(&r.runs), 2);
    assert_true(atomic_load(&r.start[0]) > atomic_load(&gate.end_ticket));
    assert_true(atomic_load(&r.start[1]) > atomic_load(&r.end[0]));
    RT_OK(rill_stream_clear_error(a));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(c));
}

/* Out of host memory at every allocation in turn while capturing,
 * instantiating and launching: each call fails cleanly or succeeds, and
 * nothing leaks (the sanitizer builds check). */
static void test_graph_out_of_memory_fails_cleanly(void **state) {
    (void)state;
    rill_stream *a = named_stream("a"), *b = named_stream("b");
    uint32_t cells[2] = {0, 0};
    int completed = 0;
    for (long k = 1; k < 80 && completed < 3; k++) {
        rill__alloc_fail_after(k);
        rill_graph *g = NULL;
        rill_graph_exec *x = NULL;
        rill_event *e = NULL;
        bool ok = rill_stream_begin_capture(a, RILL_CAPTURE_GLOBAL) == RILL_OK;
        bool captured = ok;
        step_args sa = {cells, 0, NONE, 1, 1};
        rill_launch l = {.grid = {1, 1, 1}, .args = &sa, .args_size = sizeof sa};
        ok = ok && rill_launch_kernel(a, step_k, &l) == RILL_OK;
        ok = ok && rill_event_create(RILL_EVENT_DEFAULT, &e) == RILL_OK;
        ok = ok && rill_event_record(e, a) == RILL_OK;
        ok = ok && rill_stream_wait_event(b, e) == RILL_OK;
        ok = ok && rill_launch_kernel(b, step_k, &l) == RILL_OK;
        ok = ok && rill_event_record(e, b) == RILL_OK;
        ok = ok && rill_stream_wait_event(a, e) == RILL_OK;
        if (captured) {
            rill_status st = rill_stream_end_capture(a, &g);
            if (ok && st == RILL_OK)
                ok = rill_graph_instantiate(g, &x) == RILL_OK;
            else
                ok = false;
        }
        rill__alloc_fail_after(0);
        if (ok) {
            RT_OK(rill_graph_launch(x, a));
            RT_OK(rill_stream_synchronize(a));
            completed++;
        }
        rill_capture_status cs;
        RT_OK(rill_stream_get_capture_status(a, &cs));
        if (cs != RILL_CAPTURE_NONE) /* a failed end_capture already ended it */
            fail_msg("countdown %ld left the capture active", k);
        if (x != NULL)
            RT_OK(rill_graph_exec_destroy(x));
        if (g != NULL)
            RT_OK(rill_graph_destroy(g));
        if (e != NULL)
            RT_OK(rill_event_destroy(e));
    }
    assert_true(completed > 0);
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_records_instead_of_running),
        cmocka_unit_test(test_capture_nested_forks_join_through_middle),
        cmocka_unit_test(test_capture_unjoined_names_stream),
        cmocka_unit_test(test_capture_unmatched_leaves_capture),
        cmocka_unit_test(test_capture_sync_invalidates_in_every_mode),
        cmocka_unit_test(test_capture_modes_decide_unsafe_calls),
        cmocka_unit_test(test_capture_free_of_used_memory_is_unsafe),
        cmocka_unit_test(test_capture_isolation),
        cmocka_unit_test(test_graph_replays_with_fresh_inputs),
        cmocka_unit_test(test_graph_by_hand_and_update),
        cmocka_unit_test(test_graph_refused_node_sets_out_to_null),
        cmocka_unit_test(test_graph_dot_drops_edges_a_longer_path_implies),
        cmocka_unit_test(test_graph_kernel_node_accesses_are_checked_as_launches_are),
        cmocka_unit_test(test_graph_copy_and_set_nodes_refuse_to_run_past_an_allocation),
        cmocka_unit_test(test_graph_private_memory),
        cmocka_unit_test(test_graph_memory_of_many_graphs_is_refused_until_they_go),
        cmocka_unit_test(test_graph_kernel_failure_is_sticky),
        cmocka_unit_test(test_graph_failure_names_the_node_that_failed),
        cmocka_unit_test(test_graph_host_node_failure_is_sticky),
        cmocka_unit_test(test_graph_random_programs_match_eager),
        cmocka_unit_test(test_graph_fan_out_runs_every_block_once),
        cmocka_unit_test(test_graph_branches_run_concurrently),
        cmocka_unit_test(test_graph_launches_of_one_exec_do_not_overlap),
        cmocka_unit_test(test_graph_update_racing_launches_runs_each_launch_with_one_set),
        cmocka_unit_test(test_graph_update_leaves_submitted_launches_their_parameters),
        cmocka_unit_test(test_graph_wait_node_outlives_destroyed_event),
        cmocka_unit_test(test_graph_failed_launch_does_not_fail_next_launch_elsewhere),
        cmocka_unit_test(test_graph_wait_node_on_failed_work_fails_the_launch),
        cmocka_unit_test(test_graph_skipped_launch_keeps_launches_in_order),
        cmocka_unit_test(test_graph_out_of_memory_fails_cleanly),
        cmocka_unit_test(test_capture_abandoned_by_shutdown),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, setup, teardown);
}
