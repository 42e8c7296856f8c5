/* SPDX-License-Identifier: MIT */
/* Streams, events, host functions, stream-ordered memory and graphs, on the
 * device under test (contract.h): the rules of rill.h that every device
 * keeps. */
#include "contract.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPIN_NS 20000000ull /* 20 ms: longer than any launch takes to return */

/* A stream runs its work in submission order: after a slow first launch,
 * ten rounds of x = 2x + 1 give 2^10 x0 + 1023 only in that order. */
static void test_a_stream_runs_its_work_in_order(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    uint32_t *x = contract_words(s, 1024, 0);
    RT_OK(contract_spin(s, x, SPIN_NS / 4));
    for (int i = 0; i < 10; i++) {
        RT_OK(contract_scale(s, x, x, 2, 1024));
        RT_OK(contract_add(s, x, 1, 1024));
    }
    uint32_t host[1024];
    RT_OK(rill_stream_synchronize(s));
    contract_read(host, x, 1024);
    assert_int_equal(host[0], 2047);
    for (int i = 1; i < 1024; i++)
        assert_int_equal(host[i], 1023);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* Launches return before the work runs: a query right after a slow
 * launch finds it pending, and synchronize waits for it. */
static void test_work_runs_after_the_launch_returns(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    uint32_t *x = contract_words(s, 1, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(contract_spin(s, x, SPIN_NS));
    RT_STATUS(RILL_NOT_READY, rill_stream_query(s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_query(s));
    uint32_t host;
    contract_read(&host, x, 1);
    assert_int_equal(host, 1);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* A wait on an event orders another stream's work after the recorded
 * work, across a slow producer. */
static void test_an_event_orders_two_streams(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *a, *b;
    rill_event *e;
    RT_OK(rill_stream_create(dev, 0, &a));
    RT_OK(rill_stream_create(dev, 0, &b));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    uint32_t *x = contract_words(a, 4096, 0), *y = contract_words(a, 4096, 0);
    RT_OK(contract_spin(a, x, SPIN_NS / 4));
    RT_OK(contract_add(a, x, 6, 4096));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_stream_wait_event(b, e));
    RT_OK(contract_scale(b, y, x, 7, 4096));
    RT_OK(rill_stream_synchronize(b));
    uint32_t host[4096];
    contract_read(host, y, 4096);
    assert_int_equal(host[0], 7 * 7);
    for (int i = 1; i < 4096; i++)
        assert_int_equal(host[i], 42);
    RT_OK(rill_event_query(e));
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

typedef struct host_seen {
    uint32_t *copy; /* host memory the stream copied into before the function */
    uint32_t value;
    _Atomic int calls;
} host_seen;

static void record_host(void *p) {
    host_seen *h = p;
    h->value = h->copy[0];
    atomic_fetch_add(&h->calls, 1);
}

/* A host function runs after the stream's earlier work (it sees a copy
 * that work made) and before its later work. */
static void test_a_host_function_runs_in_stream_order(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    uint32_t *x = contract_words(s, 1, 0);
    void *pinned = NULL;
    RT_OK(rill_malloc_host(sizeof(uint32_t), &pinned));
    memset(pinned, 0, sizeof(uint32_t));
    host_seen h = {pinned, 0, 0};
    RT_OK(contract_spin(s, x, SPIN_NS / 4));
    RT_OK(contract_add(s, x, 4, 1));
    RT_OK(rill_memcpy_async(pinned, x, sizeof(uint32_t), s));
    RT_OK(rill_launch_host_func(s, record_host, &h));
    RT_OK(contract_add(s, x, 100, 1));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&h.calls), 1);
    assert_int_equal(h.value, 5);
    uint32_t host;
    contract_read(&host, x, 1);
    assert_int_equal(host, 105);
    RT_OK(rill_free_host(pinned));
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* Memory freed in stream order and allocated again on another stream
 * holds the second stream's data only once the first stream's use of it
 * is done: the reader of the first buffer sees its own values. */
static void test_stream_ordered_memory_is_not_reused_under_pending_work(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *a, *b;
    RT_OK(rill_stream_create(dev, 0, &a));
    RT_OK(rill_stream_create(dev, 0, &b));
    enum { N = 1 << 16 };
    uint32_t *out = contract_words(a, N, 0);
    for (int round = 0; round < 8; round++) {
        uint32_t *tmp = contract_words(a, N, 3);
        RT_OK(contract_spin(a, out, SPIN_NS / 20));
        RT_OK(contract_scale(a, out, tmp, 2, N));
        RT_OK(rill_free_async(tmp, a));
        void *other = NULL;
        RT_OK(rill_malloc_async(N * sizeof(uint32_t), b, &other));
        RT_OK(rill_memset_async(other, 0xff, N * sizeof(uint32_t), b));
        RT_OK(rill_free_async(other, b));
    }
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    static uint32_t host[N];
    contract_read(host, out, N);
    for (int i = 0; i < N; i++)
        if (host[i] != 6)
            fail_msg("out[%d] = %u, not 6: its input was reused while in use", i, host[i]);
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* Work captured from two streams replays as one graph, each launch in
 * order after the previous one. */
static void test_a_graph_captured_from_two_streams_replays(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *a, *b;
    rill_event *fork, *join;
    RT_OK(rill_stream_create(dev, 0, &a));
    RT_OK(rill_stream_create(dev, 0, &b));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &fork));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &join));
    uint32_t *x = contract_words(a, 256, 0), *y = contract_words(a, 256, 0);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_begin_capture(a, RILL_CAPTURE_GLOBAL));
    RT_OK(contract_add(a, x, 1, 256));
    RT_OK(rill_event_record(fork, a));
    RT_OK(rill_stream_wait_event(b, fork));
    RT_OK(contract_scale(b, y, x, 3, 256));
    RT_OK(rill_event_record(join, b));
    RT_OK(rill_stream_wait_event(a, join));
    rill_graph *g;
    RT_OK(rill_stream_end_capture(a, &g));
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(g, &exec));
    for (int i = 0; i < 5; i++)
        RT_OK(rill_graph_launch(exec, a));
    RT_OK(rill_stream_synchronize(a));
    uint32_t hx[256], hy[256];
    contract_read(hx, x, 256);
    contract_read(hy, y, 256);
    for (int i = 0; i < 256; i++) {
        assert_int_equal(hx[i], 5);
        assert_int_equal(hy[i], 15);
    }
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_event_destroy(fork));
    RT_OK(rill_event_destroy(join));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

static void nothing(void *user_data) {
    (void)user_data;
}

/* The file at path, whole, NUL-terminated (freed by the caller). */
static char *read_whole(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    return text;
}

/* The start and duration (µs) of the slice named name on track tid. */
static void slice_of(const char *json, const char *name, uint64_t tid, double *ts, double *dur) {
    char head[128];
    snprintf(head, sizeof head, "{\"ph\":\"X\",\"name\":\"%s\",", name);
    for (const char *at = strstr(json, head); at != NULL; at = strstr(at + 1, head)) {
        const char *t = strstr(at, "\"tid\":");
        if (t != NULL && strtoull(t + 6, NULL, 10) == tid &&
            sscanf(strstr(t, "\"ts\":"), "\"ts\":%lf,\"dur\":%lf", ts, dur) == 2)
            return;
    }
    fail_msg("no slice named %s on the stream's track (tid %" PRIu64 ")", name, tid);
}

/* A trace shows what a stream ran on its track, in order: its kernels by
 * their names, its memset, copy and host function, and the spinning kernel
 * as long as it spun. */
static void test_a_trace_shows_a_streams_commands_in_order(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_device_kind kind = contract_kind(dev);
    if (kind != RILL_DEVICE_CPU && kind != RILL_DEVICE_CUDA)
        skip(); /* the test-only backend records nothing */
    char path[] = "/tmp/rill-contract-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_stream_set_name(s, "traced"));
    uint32_t *x = contract_words(s, 256, 0), *y = contract_words(s, 256, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_start(path));
    RT_OK(contract_spin(s, x, SPIN_NS / 10));
    RT_OK(contract_add(s, x, 1, 256));
    RT_OK(rill_memset_async(y, 0, 256 * sizeof *y, s));
    RT_OK(rill_memcpy_async(y, x, 256 * sizeof *y, s));
    RT_OK(rill_launch_host_func(s, nothing, NULL));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_stop());
    char *json = read_whole(path);
    unlink(path);
    const char *track = strstr(json, "\"args\":{\"name\":\"stream traced\"}");
    assert_non_null(track);
    const char *tid_at = track;
    while (tid_at > json && strncmp(tid_at, "\"tid\":", 6) != 0)
        tid_at--;
    uint64_t tid = strtoull(tid_at + 6, NULL, 10);
    static const char *const names[] = {"contract_spin", "contract_add", "memset", "memcpy",
                                        "host function"};
    double end = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        double ts = 0, dur = 0;
        slice_of(json, names[i], tid, &ts, &dur);
        /* A GPU's host function is timed by the host's clock, its other commands by
         * the GPU's mapped onto it: the last one's presence is all that is certain. */
        if (i == 0) /* 2 ms, with room for a clock that rounds */
            assert_true(dur >= 0.9 * (double)(SPIN_NS / 10) / 1000.0);
        else if (i < 4) /* after the one before, to the rounding of the times (1 ns) */
            assert_true(ts >= end - 0.002);
        end = ts + dur;
    }
    free(json);
    uint32_t host[256];
    contract_read(host, y, 256); /* the spin added 1 to x[0], the add 1 to each */
    assert_int_equal(host[0], 2);
    assert_int_equal(host[255], 1);
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_stream_destroy(s));
}

/* A timing event pair around slow work measures at least its length. */
static void test_timing_events_measure_the_work_between_them(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    rill_event *start, *end;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &start));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &end));
    uint32_t *x = contract_words(s, 1, 0);
    RT_OK(rill_event_record(start, s));
    RT_OK(contract_spin(s, x, SPIN_NS / 4));
    RT_OK(rill_event_record(end, s));
    RT_OK(rill_event_synchronize(end));
    float ms = 0;
    RT_OK(rill_event_elapsed_ms(start, end, &ms));
    assert_true(ms >= 4.5f);
    assert_true(ms < 10000.0f);
    RT_OK(rill_free(x));
    RT_OK(rill_event_destroy(start));
    RT_OK(rill_event_destroy(end));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_stream_runs_its_work_in_order),
        cmocka_unit_test(test_work_runs_after_the_launch_returns),
        cmocka_unit_test(test_an_event_orders_two_streams),
        cmocka_unit_test(test_a_host_function_runs_in_stream_order),
        cmocka_unit_test(test_stream_ordered_memory_is_not_reused_under_pending_work),
        cmocka_unit_test(test_a_graph_captured_from_two_streams_replays),
        cmocka_unit_test(test_timing_events_measure_the_work_between_them),
        cmocka_unit_test(test_a_trace_shows_a_streams_commands_in_order),
    };
    return CONTRACT_RUN(tests);
}
