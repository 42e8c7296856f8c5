/* SPDX-License-Identifier: MIT */
/* The stream sanitizer: one test per kind of report with its exact lines,
 * the orders that keep it quiet (stream and event waits, host waits,
 * rill_record_stream, launches of one exec), threads, and bad input. Each
 * test starts from a fresh runtime, so command numbers are known; the
 * sanitizer's reports are read back from stderr. A racing command waits
 * behind a gate until the host waited for the work it races with, so
 * that the race the sanitizer reports from the declarations never happens
 * in memory (which ThreadSanitizer would rightly flag). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "platform/thread.h"

enum { N = 20, FLOATS = N * N, BYTES = FLOATS * sizeof(float) };

/* ---- stderr, read back ---- */

static FILE *captured;
static int saved_fd = -1;

static void capture_begin(void) {
    fflush(stderr);
    captured = tmpfile();
    assert_non_null(captured);
    saved_fd = dup(2);
    assert_true(saved_fd >= 0);
    assert_true(dup2(fileno(captured), 2) >= 0);
}

/* The text written to stderr since capture_begin (static storage). */
static const char *capture_end(void) {
    static char text[1 << 16];
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    saved_fd = -1;
    rewind(captured);
    size_t n = fread(text, 1, sizeof text - 1, captured);
    text[n] = '\0';
    fclose(captured);
    captured = NULL;
    return text;
}

static void expect_line(const char *text, const char *line) {
    if (strstr(text, line) == NULL)
        fail_msg("expected the line\n%s\nin the sanitizer's output:\n%s", line, text);
}

static int count_reports(const char *text) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, "rill sanitizer: ")) != NULL; p++)
        n++;
    return n;
}

/* ---- set-up: each test on a fresh runtime with the sanitizer on ---- */

static int setup(void **state) {
    (void)state;
    RT_OK(rill_sanitizer_enable(1));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    RT_OK(rill_sanitizer_enable(0));
    RT_OK(rill_shutdown());
    return 0;
}

static rill_stream *named_stream(const char *name) {
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, name));
    return s;
}

static float *device_floats(size_t n) {
    void *p;
    RT_OK(rill_malloc(NULL, n * sizeof(float), &p));
    return p;
}

static void touch_body(const rill_block_ctx *ctx, const void *args) {
    (void)ctx, (void)args;
}

static rill_kernel *touch_kernel(void) {
    rill_kernel *k;
    rill_kernel_desc d = {.name = "touch", .cpu = touch_body};
    RT_OK(rill_kernel_create(&d, &k));
    return k;
}

/* ---- (a) two streams ---- */

/* Seed 000's first example: B = matmul(A, A) on the default stream, then
 * C = sum(B) on s1 with no wait. */
static void test_seed000_race_reported(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    float *a = device_floats(FLOATS), *b = device_floats(FLOATS), *c = device_floats(1);
    uint64_t before = rill_sanitizer_report_count();
    rt_gate gate;
    rt_gate_reset(&gate);
    capture_begin();
    RT_OK(rill_sanitizer_set_location("model.py", 13));
    RT_OK(rill_op_matmul_f32(NULL, b, a, a, N, N, N));
    RT_OK(rt_launch_gate_kernel(s1, &gate));
    RT_OK(rill_sanitizer_set_location("model.py", 16));
    RT_OK(rill_op_sum_f32(s1, c, b, FLOATS));
    RT_OK(rill_stream_synchronize(NULL));
    rt_gate_open(&gate);
    RT_OK(rill_device_synchronize(NULL));
    const char *text = capture_end();
    assert_int_equal(rill_sanitizer_report_count(), before + 1);
    assert_int_equal(count_reports(text), 1);
    char line[512];
    snprintf(line, sizeof line,
             "rill sanitizer: race between streams on bytes [%p, %p) (1600 bytes)\n", (void *)b,
             (void *)(b + FLOATS));
    expect_line(text, line);
    expect_line(text, "  kernel 'sum_f32_partial' on stream 's1' (command 2) reads them, at "
                      "model.py:16\n");
    expect_line(text, "  kernel 'matmul_f32' on stream 'default' (command 1) writes them, at "
                      "model.py:13\n");
    expect_line(text, "  no wait orders the two; fix: make stream 's1' wait for stream 'default' "
                      "before kernel 'sum_f32_partial' (rill_stream_wait_stream, or "
                      "rill_stream_wait_event on an event recorded on stream 'default' after "
                      "kernel 'matmul_f32')\n");
    RT_OK(rill_stream_destroy(s1));
}

/* The same race from a framework that names its ops: each command is
 * named after the op that submitted it. */
static void test_race_names_ops(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    float *a = device_floats(FLOATS), *b = device_floats(FLOATS), *c = device_floats(1);
    rt_gate gate;
    rt_gate_reset(&gate);
    capture_begin();
    const char *name = "aten::mm";
    RT_OK(rill_thread_exchange_op_name(&name));
    RT_OK(rill_op_matmul_f32(NULL, b, a, a, N, N, N));
    name = NULL;
    RT_OK(rill_thread_exchange_op_name(&name));
    RT_OK(rt_launch_gate_kernel(s1, &gate));
    name = "aten::sum";
    RT_OK(rill_thread_exchange_op_name(&name));
    RT_OK(rill_op_sum_f32(s1, c, b, FLOATS));
    name = NULL;
    RT_OK(rill_thread_exchange_op_name(&name));
    RT_OK(rill_stream_synchronize(NULL));
    rt_gate_open(&gate);
    RT_OK(rill_device_synchronize(NULL));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  kernel 'sum_f32_partial' of aten::sum on stream 's1' (command 2) reads "
                      "them\n");
    expect_line(text, "  kernel 'matmul_f32' of aten::mm on stream 'default' (command 1) writes "
                      "them\n");
    RT_OK(rill_stream_destroy(s1));
}

/* Its corrected version: s.wait_stream(current stream) first. */
static void test_seed000_wait_stream_clean(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    float *a = device_floats(FLOATS), *b = device_floats(FLOATS), *c = device_floats(1);
    uint64_t before = rill_sanitizer_report_count();
    capture_begin();
    RT_OK(rill_op_matmul_f32(NULL, b, a, a, N, N, N));
    RT_OK(rill_stream_wait_stream(s1, rill_current_stream(NULL)));
    RT_OK(rill_op_sum_f32(s1, c, b, FLOATS));
    /* And back: the default stream overwrites b only after s1 read it. */
    RT_OK(rill_stream_wait_stream(rill_current_stream(NULL), s1));
    RT_OK(rill_op_fill_f32(NULL, b, 1.0f, FLOATS));
    RT_OK(rill_device_synchronize(NULL));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 0);
    assert_int_equal(rill_sanitizer_report_count(), before);
    RT_OK(rill_stream_destroy(s1));
}

/* Reads on two streams do not race; a write after them on a third does,
 * with each of them, until it waits for both. */
static void test_reads_share_writes_wait(void **state) {
    (void)state;
    rill_stream *r1 = named_stream("r1"), *r2 = named_stream("r2"), *w = named_stream("w");
    float *x = device_floats(FLOATS), *y1 = device_floats(1), *y2 = device_floats(1);
    RT_OK(rill_op_fill_f32(w, x, 2.0f, FLOATS));
    RT_OK(rill_stream_synchronize(w));
    capture_begin();
    RT_OK(rill_op_sum_f32(r1, y1, x, FLOATS));
    RT_OK(rill_op_sum_f32(r2, y2, x, FLOATS));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 0);

    rt_gate gate;
    rt_gate_reset(&gate);
    capture_begin();
    RT_OK(rt_launch_gate_kernel(w, &gate));
    RT_OK(rill_op_fill_f32(w, x, 3.0f, FLOATS)); /* races with both reads */
    RT_OK(rill_stream_synchronize(r1));
    RT_OK(rill_stream_synchronize(r2));
    rt_gate_open(&gate);
    text = capture_end();
    assert_int_equal(count_reports(text), 2);
    expect_line(text, "  kernel 'fill_f32' on stream 'w' (command 3) writes them\n");
    expect_line(text, "  kernel 'sum_f32_partial' on stream 'r1' (command 1) reads them\n");
    expect_line(text, "  kernel 'sum_f32_partial' on stream 'r2' (command 1) reads them\n");

    capture_begin();
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_record(e, r1));
    RT_OK(rill_stream_wait_event(w, e));
    RT_OK(rill_stream_wait_stream(w, r2));
    RT_OK(rill_op_fill_f32(w, x, 4.0f, FLOATS));
    RT_OK(rill_device_synchronize(NULL));
    text = capture_end();
    assert_int_equal(count_reports(text), 0);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(r1));
    RT_OK(rill_stream_destroy(r2));
    RT_OK(rill_stream_destroy(w));
}

/* An event wait orders only the work recorded before the record: a write
 * submitted after the record still races. */
static void test_event_orders_only_up_to_record(void **state) {
    (void)state;
    rill_stream *p = named_stream("p"), *q = named_stream("q");
    float *x = device_floats(FLOATS), *z = device_floats(FLOATS), *y = device_floats(1);
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    rt_gate gate_p, gate_q;
    rt_gate_reset(&gate_p);
    rt_gate_reset(&gate_q);
    capture_begin();
    RT_OK(rt_launch_gate_kernel(p, &gate_p)); /* p's work stays pending: q's wait is a command */
    RT_OK(rill_op_fill_f32(p, x, 1.0f, FLOATS));
    RT_OK(rill_event_record(e, p));
    RT_OK(rill_op_fill_f32(p, z, 1.0f, FLOATS)); /* after the record */
    RT_OK(rill_stream_wait_event(q, e));
    RT_OK(rill_op_sum_f32(q, y, x, FLOATS)); /* ordered */
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 0);
    capture_begin();
    RT_OK(rt_launch_gate_kernel(q, &gate_q));
    RT_OK(rill_op_sum_f32(q, y, z, FLOATS)); /* not ordered */
    rt_gate_open(&gate_p);
    RT_OK(rill_stream_synchronize(p));
    rt_gate_open(&gate_q);
    RT_OK(rill_device_synchronize(NULL));
    text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  kernel 'sum_f32_partial' on stream 'q' (command 4) reads them\n");
    expect_line(text, "  kernel 'fill_f32' on stream 'p' (command 3) writes them\n");
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(q));
}

/* A host wait on one stream orders what is submitted afterwards, on any
 * stream: synchronize, event synchronize, and a query that found it done. */
static void test_host_waits_order(void **state) {
    (void)state;
    rill_stream *p = named_stream("p"), *q = named_stream("q");
    float *x = device_floats(FLOATS);
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    capture_begin();
    RT_OK(rill_op_fill_f32(p, x, 1.0f, FLOATS));
    RT_OK(rill_stream_synchronize(p));
    RT_OK(rill_op_fill_f32(q, x, 2.0f, FLOATS));
    RT_OK(rill_event_record(e, q));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_op_fill_f32(p, x, 3.0f, FLOATS));
    while (rill_stream_query(p) == RILL_NOT_READY)
        rt_sleep_us(50);
    RT_OK(rill_op_fill_f32(q, x, 4.0f, FLOATS));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_op_fill_f32(p, x, 5.0f, FLOATS));
    RT_OK(rill_device_synchronize(NULL));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 0);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(q));
}

/* Copies and fills declare their bytes too. */
static void test_copy_and_fill_race(void **state) {
    (void)state;
    rill_stream *p = named_stream("p"), *q = named_stream("q");
    float *x = device_floats(FLOATS), *y = device_floats(FLOATS);
    rt_gate gate;
    rt_gate_reset(&gate);
    capture_begin();
    RT_OK(rill_memset_async(x, 0, BYTES, p));
    RT_OK(rt_launch_gate_kernel(q, &gate));
    RT_OK(rill_memcpy_async(y, x, BYTES, q));
    RT_OK(rill_stream_synchronize(p));
    rt_gate_open(&gate);
    RT_OK(rill_device_synchronize(NULL));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  rill_memcpy_async on stream 'q' (command 2) reads them\n");
    expect_line(text, "  rill_memset_async on stream 'p' (command 1) writes them\n");
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(q));
}

/* ---- (b) the host ---- */

static void test_host_memcpy_not_ordered(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    float *x = device_floats(FLOATS);
    float host[FLOATS];
    rt_gate gate;
    rt_gate_reset(&gate);
    capture_begin();
    RT_OK(rt_launch_gate_kernel(s1, &gate)); /* the fill runs after the copy, in fact */
    RT_OK(rill_sanitizer_set_location("train.c", 40));
    RT_OK(rill_op_fill_f32(s1, x, 1.0f, FLOATS));
    RT_OK(rill_sanitizer_set_location("train.c", 41));
    RT_OK(rill_memcpy(host, x, BYTES)); /* runs on the default stream */
    rt_gate_open(&gate);
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 1);
    char line[512];
    snprintf(line, sizeof line,
             "rill sanitizer: host access not ordered after device work, on bytes [%p, %p) "
             "(1600 bytes)\n",
             (void *)x, (void *)(x + FLOATS));
    expect_line(text, line);
    expect_line(text, "  rill_memcpy on the host (run through stream 'default') reads them, at "
                      "train.c:41\n");
    expect_line(text, "  kernel 'fill_f32' on stream 's1' (command 2) writes them, at "
                      "train.c:40\n");
    expect_line(text, "  the host did not wait for that work; fix: rill_stream_synchronize(stream "
                      "'s1') (or rill_event_synchronize of an event recorded there after kernel "
                      "'fill_f32'), or make stream 'default' wait for stream 's1', before "
                      "rill_memcpy\n");
    /* Waited for: quiet, both ways (the host's write after the device's
     * read of another buffer). */
    capture_begin();
    RT_OK(rill_op_fill_f32(s1, x, 2.0f, FLOATS));
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_memcpy(host, x, BYTES));
    RT_OK(rill_memcpy(x, host, BYTES));
    RT_OK(rill_stream_wait_stream(s1, rill_current_stream(NULL)));
    RT_OK(rill_op_fill_f32(s1, x, 3.0f, FLOATS));
    RT_OK(rill_stream_synchronize(s1));
    text = capture_end();
    assert_int_equal(count_reports(text), 0);
    RT_OK(rill_stream_destroy(s1));
}

static void empty_host(void *user_data) {
    (void)user_data;
}

/* A host function's declared accesses: checked as the host's, and, the
 * pool not seeing them, a free of that memory needs an order. */
static void test_host_function_accesses(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1"), *s2 = named_stream("s2");
    float *x = device_floats(FLOATS);
    rill_access rd = {x, BYTES, RILL_READ};
    rt_gate gate;
    rt_gate_reset(&gate);
    capture_begin();
    RT_OK(rill_op_fill_f32(s2, x, 1.0f, FLOATS));
    RT_OK(rt_launch_gate_kernel(s1, &gate));
    RT_OK(rill_sanitizer_host_accesses(&rd, 1));
    RT_OK(rill_launch_host_func(s1, empty_host, NULL));
    RT_OK(rill_stream_synchronize(s2));
    rt_gate_open(&gate);
    RT_OK(rill_stream_synchronize(s1));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  host function on the host (run through stream 's1') reads them\n");
    expect_line(text, "  kernel 'fill_f32' on stream 's2' (command 1) writes them\n");
    /* Ordered by a wait: quiet; the declaration held for one launch only. */
    rt_gate gate2;
    rt_gate_reset(&gate2);
    capture_begin();
    RT_OK(rt_launch_gate_kernel(s2, &gate2)); /* s2's work stays pending: the wait is a command */
    RT_OK(rill_op_fill_f32(s2, x, 2.0f, FLOATS));
    RT_OK(rill_stream_wait_stream(s1, s2));
    RT_OK(rill_sanitizer_host_accesses(&rd, 1));
    RT_OK(rill_launch_host_func(s1, empty_host, NULL));
    RT_OK(rill_op_fill_f32(s2, x, 3.0f, FLOATS));       /* races with the host function */
    RT_OK(rill_launch_host_func(s1, empty_host, NULL)); /* declares nothing */
    rt_gate_open(&gate2);
    RT_OK(rill_device_synchronize(NULL));
    text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  kernel 'fill_f32' on stream 's2' (command 4) writes them\n");
    expect_line(text, "  host function on stream 's1' (command 4) reads them\n");
    /* A free on another stream, not ordered after the host function. */
    float *y = device_floats(FLOATS);
    rill_access wr = {y, BYTES, RILL_WRITE};
    capture_begin();
    RT_OK(rill_sanitizer_host_accesses(&wr, 1));
    RT_OK(rill_launch_host_func(s1, empty_host, NULL));
    RT_OK(rill_free_async(y, s2));
    RT_OK(rill_device_synchronize(NULL));
    text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  host function on stream 's1' (command 6) writes them\n");
    char line[256];
    snprintf(line, sizeof line, "  rill_free_async frees %p on stream 's2'\n", (void *)y);
    expect_line(text, line);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_host_accesses(NULL, 1));
    rill_access bad = {x, BYTES, (rill_access_mode)7};
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_host_accesses(&bad, 1));
    rill_access many[17];
    for (int i = 0; i < 17; i++)
        many[i] = rd;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_host_accesses(many, 17));
    RT_OK(rill_sanitizer_host_accesses(NULL, 0));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
}

/* ---- (c) frees ---- */

/* A graph's nodes are uses the pool does not track: freeing their memory
 * before the launch's stream is waited for is reported. */
static void test_free_while_graph_uses(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    rill_kernel *k = touch_kernel();
    float *x = device_floats(FLOATS);
    rill_access acc = {x, BYTES, RILL_WRITE};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .accesses = &acc, .num_accesses = 1};
    rill_graph *g;
    rill_graph_node *node;
    rill_graph_exec *ex;
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, k, &l, &node));
    RT_OK(rill_graph_instantiate(g, &ex));
    capture_begin();
    RT_OK(rill_graph_launch(ex, s1));
    RT_OK(rill_sanitizer_set_location("serve.c", 7));
    RT_OK(rill_free(x)); /* on the default stream, its allocation stream */
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 1);
    char line[512];
    snprintf(line, sizeof line,
             "rill sanitizer: free of memory that another stream may still use, bytes [%p, %p) "
             "(1600 bytes)\n",
             (void *)x, (void *)(x + FLOATS));
    expect_line(text, line);
    snprintf(line, sizeof line, "  rill_free frees %p on stream 'default', at serve.c:7\n",
             (void *)x);
    expect_line(text, line);
    expect_line(text, "  graph node 0 (kernel 'touch') on stream 's1' (command 1) writes them\n");
    snprintf(line, sizeof line,
             "  no wait orders the free after that use, and the pool does not track it; fix: "
             "make stream 'default' wait for stream 's1' before the free "
             "(rill_stream_wait_stream), or call rill_record_stream(%p, stream 's1')\n",
             (void *)x);
    expect_line(text, line);
    RT_OK(rill_stream_synchronize(s1));

    /* rill_record_stream, a wait, or a host wait: quiet. */
    capture_begin();
    for (int way = 0; way < 3; way++) {
        float *y = device_floats(FLOATS);
        rill_access acc2 = {y, BYTES, RILL_READ_WRITE};
        rill_launch l2 = l;
        l2.accesses = &acc2;
        rill_graph *g2;
        rill_graph_exec *ex2;
        RT_OK(rill_graph_create(&g2));
        RT_OK(rill_graph_add_kernel_node(g2, NULL, 0, k, &l2, &node));
        RT_OK(rill_graph_instantiate(g2, &ex2));
        RT_OK(rill_graph_launch(ex2, s1));
        if (way == 0)
            RT_OK(rill_record_stream(y, s1));
        else if (way == 1)
            RT_OK(rill_stream_wait_stream(rill_current_stream(NULL), s1));
        else
            RT_OK(rill_stream_synchronize(s1));
        RT_OK(rill_free(y));
        RT_OK(rill_stream_synchronize(s1));
        RT_OK(rill_graph_exec_destroy(ex2));
        RT_OK(rill_graph_destroy(g2));
    }
    text = capture_end();
    assert_int_equal(count_reports(text), 0);
    RT_OK(rill_graph_exec_destroy(ex));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s1));
}

/* A launch's declared use is tracked by the pool: its free is no report. */
static void test_free_of_tracked_use_clean(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    float *x = device_floats(FLOATS);
    capture_begin();
    RT_OK(rill_op_fill_f32(s1, x, 1.0f, FLOATS));
    RT_OK(rill_free(x));
    RT_OK(rill_stream_synchronize(s1));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 0);
    RT_OK(rill_stream_destroy(s1));
}

/* Launches of one exec on two streams run one after the other. */
static void test_graph_launches_ordered(void **state) {
    (void)state;
    rill_stream *p = named_stream("p"), *q = named_stream("q");
    rill_kernel *k = touch_kernel();
    float *x = device_floats(FLOATS);
    rill_access acc = {x, BYTES, RILL_READ_WRITE};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .accesses = &acc, .num_accesses = 1};
    rill_graph *g;
    rill_graph_node *node;
    rill_graph_exec *ex;
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, k, &l, &node));
    RT_OK(rill_graph_instantiate(g, &ex));
    capture_begin();
    RT_OK(rill_graph_launch(ex, p));
    RT_OK(rill_graph_launch(ex, q));
    RT_OK(rill_graph_launch(ex, p));
    RT_OK(rill_device_synchronize(NULL));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 0);
    /* Another kernel on q, not waiting for p's launch, races with it. */
    capture_begin();
    RT_OK(rill_graph_launch(ex, p));
    RT_OK(rill_launch_kernel(q, k, &l));
    RT_OK(rill_device_synchronize(NULL));
    text = capture_end();
    assert_int_equal(count_reports(text), 1);
    expect_line(text, "  kernel 'touch' on stream 'q' (command 2) writes them\n");
    expect_line(text, "  graph node 0 (kernel 'touch') on stream 'p' (command 3) writes them\n");
    RT_OK(rill_graph_exec_destroy(ex));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(q));
}

/* Inside a graph, its edges order the nodes: two nodes writing the same
 * bytes without a path between them race, once per instantiation. */
static void test_graph_inside(void **state) {
    (void)state;
    rill_stream *s1 = named_stream("s1");
    rill_kernel *k = touch_kernel();
    float *x = device_floats(FLOATS);
    rill_access acc = {x, BYTES, RILL_WRITE};
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .accesses = &acc, .num_accesses = 1};
    rill_graph *g, *h;
    rill_graph_node *a, *b, *c;
    rill_graph_exec *ex, *ey;
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, k, &l, &a));
    RT_OK(rill_graph_add_empty_node(g, NULL, 0, &c));
    RT_OK(rill_graph_add_kernel_node(g, &c, 1, k, &l, &b)); /* no path from a */
    RT_OK(rill_graph_instantiate(g, &ex));
    capture_begin();
    RT_OK(rill_graph_launch(ex, s1));
    RT_OK(rill_graph_launch(ex, s1)); /* reported once */
    RT_OK(rill_stream_synchronize(s1));
    const char *text = capture_end();
    assert_int_equal(count_reports(text), 1);
    char line[512];
    snprintf(line, sizeof line,
             "rill sanitizer: race inside a graph on bytes [%p, %p) (1600 bytes)\n", (void *)x,
             (void *)(x + FLOATS));
    expect_line(text, line);
    expect_line(text, "  graph node 2 (kernel 'touch') writes them\n"
                      "  graph node 0 (kernel 'touch') writes them\n"
                      "  no edge of the graph orders the two (launched on stream 's1', command 1); "
                      "fix: make graph node 2 depend on graph node 0\n");
    /* With a path a -> c -> b: quiet. */
    RT_OK(rill_graph_create(&h));
    RT_OK(rill_graph_add_kernel_node(h, NULL, 0, k, &l, &a));
    RT_OK(rill_graph_add_empty_node(h, &a, 1, &c));
    RT_OK(rill_graph_add_kernel_node(h, &c, 1, k, &l, &b));
    RT_OK(rill_graph_instantiate(h, &ey));
    capture_begin();
    RT_OK(rill_graph_launch(ey, s1));
    RT_OK(rill_stream_synchronize(s1));
    text = capture_end();
    assert_int_equal(count_reports(text), 0);
    RT_OK(rill_graph_exec_destroy(ex));
    RT_OK(rill_graph_exec_destroy(ey));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_graph_destroy(h));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s1));
}

/* ---- threads ---- */

enum { THREADS = 4, ROUNDS = 200 };

typedef struct worker_arg {
    rill_stream *stream;
    const float *shared; /* read by every thread */
    float *own;          /* written by this thread only */
    float *out;
} worker_arg;

static void thread_body(void *p) {
    worker_arg *w = p;
    for (int i = 0; i < ROUNDS; i++) {
        RT_OK(rill_op_add_f32(w->stream, w->own, w->shared, w->shared, 1.0f, FLOATS));
        RT_OK(rill_op_sum_f32(w->stream, w->out, w->own, FLOATS));
        if (i % 50 == 0)
            RT_OK(rill_stream_synchronize(w->stream));
    }
    RT_OK(rill_stream_synchronize(w->stream));
}

/* Threads launching on streams of their own, sharing only reads: no
 * report, and the sanitizer's own state is safe (ThreadSanitizer). */
static void test_threads_clean(void **state) {
    (void)state;
    float *shared = device_floats(FLOATS);
    RT_OK(rill_op_fill_f32(NULL, shared, 1.0f, FLOATS));
    RT_OK(rill_stream_synchronize(NULL));
    worker_arg args[THREADS];
    rill__thread threads[THREADS];
    uint64_t before = rill_sanitizer_report_count();
    for (int i = 0; i < THREADS; i++) {
        RT_OK(rill_stream_create(NULL, 0, &args[i].stream));
        args[i].shared = shared;
        args[i].own = device_floats(FLOATS);
        args[i].out = device_floats(1);
        rill__thread_start(&threads[i], "san-test", thread_body, &args[i]);
    }
    for (int i = 0; i < THREADS; i++)
        rill__thread_join(&threads[i]);
    assert_int_equal(rill_sanitizer_report_count(), before);
    for (int i = 0; i < THREADS; i++) {
        RT_OK(rill_free(args[i].own));
        RT_OK(rill_free(args[i].out));
        RT_OK(rill_stream_destroy(args[i].stream));
    }
}

/* ---- the switch and bad input ---- */

static void test_off_reports_nothing(void **state) {
    (void)state;
    RT_OK(rill_sanitizer_enable(0));
    rill_stream *s1 = named_stream("s1");
    float *a = device_floats(FLOATS), *b = device_floats(FLOATS), *c = device_floats(1);
    uint64_t before = rill_sanitizer_report_count();
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_op_matmul_f32(NULL, b, a, a, N, N, N));
    RT_OK(rt_launch_gate_kernel(s1, &gate));
    RT_OK(rill_op_sum_f32(s1, c, b, FLOATS));
    RT_OK(rill_stream_synchronize(NULL));
    rt_gate_open(&gate);
    RT_OK(rill_device_synchronize(NULL));
    assert_int_equal(rill_sanitizer_report_count(), before);
    RT_OK(rill_stream_destroy(s1));
}

static void test_bad_input(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_enable(3));
    assert_non_null(strstr(rill_last_error(), "pass 0 (off), 1"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_enable(-1));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_set_location(NULL, 12));
    assert_non_null(strstr(rill_last_error(), "RILL_SANITIZER_HERE()"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_set_location("a.c", 0));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_sanitizer_set_location("a.c", -4));
    RT_OK(rill_sanitizer_set_location(NULL, 0));
    RT_OK(RILL_SANITIZER_HERE());
    RT_OK(rill_sanitizer_set_location(NULL, 0));
}

/* A free before any access was recorded (the sanitizer holds no record yet): nothing to report,
 * and nothing read (UndefinedBehaviorSanitizer: no copy from the absent records). */
static void test_free_before_any_recorded_access(void **state) {
    (void)state;
    rill_stream *s = named_stream("first");
    void *p;
    RT_OK(rill_malloc_async(256, s, &p));
    RT_OK(rill_free_async(p, s));
    float *q = device_floats(16);
    RT_OK(rill_free(q));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_free_before_any_recorded_access, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_names_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed000_race_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed000_wait_stream_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_share_writes_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_orders_only_up_to_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_waits_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_and_fill_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_memcpy_not_ordered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_function_accesses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_while_graph_uses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_of_tracked_use_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_graph_launches_ordered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_graph_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_off_reports_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
    };
    return rt_run("sanitizer", tests, sizeof tests / sizeof tests[0], argc, argv);
}
