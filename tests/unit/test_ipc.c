/* SPDX-License-Identifier: MIT */
/* Inter-process handles: memory and events shared with a second, real process (this program
 * started again with fork + exec as "test_ipc --child ROLE"), snapshot semantics across
 * processes, an exporter that dies, and every bad handle and argument.
 *
 * The parent sends handles and one-byte signals through a pipe on the child's fd 0; the child
 * answers through a pipe on its fd 3 and reports through its exit status (0: every check held;
 * the message on stderr says which did not). Work in the parent is held back by host functions
 * that wait for a gate the test opens, so every ordering is forced, not left to timing. */
#include "fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include "util/alloc.h"

#define N      4096 /* floats in the shared buffer */
#define SEC_NS 1000000000ull

/* ---------------------------------------------------------------- helpers */

static void sleep_fn(void *user_data) {
    rt_sleep_us((unsigned)(uintptr_t)user_data);
}

typedef struct child {
    pid_t pid;
    int to;   /* the child's fd 0 */
    int from; /* the child's fd 3 */
} child;

static void child_start(child *c, const char *role) {
    int in[2], out[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    char *argv[] = {"test_ipc", "--child", (char *)role, NULL};
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        if (dup2(in[0], 0) < 0 || dup2(out[1], 3) < 0)
            _exit(126);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->pid = pid;
    c->to = in[1];
    c->from = out[0];
}

static void send_bytes(int fd, const void *p, size_t n) {
    assert_int_equal(write(fd, p, n), (ssize_t)n);
}

static int recv_bytes(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    return 1;
}

static void expect_signal(child *c, char want) {
    char b = 0;
    if (!recv_bytes(c->from, &b, 1))
        fail_msg("the child exited before signalling '%c'", want);
    assert_int_equal(b, want);
}

/* Waits for the child and asserts that all its checks held. */
static void child_finish(child *c) {
    int status = 0;
    close(c->to);
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    close(c->from);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the child failed (status 0x%x; see its message above)", status);
}

static float *dev_buffer(float value) {
    void *p = NULL;
    RT_OK(rill_malloc(NULL, N * sizeof(float), &p));
    RT_OK(rill_op_fill_f32(NULL, p, value, N));
    RT_OK(rill_stream_synchronize(NULL));
    return p;
}

/* ------------------------------------------------------------ the child */

static int child_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child: %s:%d: ", __FILE__, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", rill_last_error());                             \
            child_failed = 1;                                                                      \
        }                                                                                          \
    } while (0)

static void child_signal(char b) {
    if (write(3, &b, 1) != 1)
        child_failed = 1;
}

static int child_recv(void *p, size_t n) {
    int ok = recv_bytes(0, p, n);
    CHECK(ok, "the parent closed the pipe early");
    return ok;
}

/* Every element of the device buffer p equals want. */
static int all_equal(const float *p, float want) {
    static float host[N];
    if (rill_memcpy(host, p, sizeof host) != RILL_OK)
        return 0;
    for (int i = 0; i < N; i++)
        if (host[i] != want)
            return 0;
    return 1;
}

/* The sum of the device buffer p, computed on the current stream after what it waits for. */
static float device_sum(const float *p) {
    float *out = NULL, sum = -1.0f;
    if (rill_malloc(NULL, sizeof(float), (void **)&out) != RILL_OK)
        return -1.0f;
    rill_op_sum_f32(NULL, out, p, N);
    rill_memcpy(&sum, out, sizeof sum);
    rill_free(out);
    return sum;
}

/* mem: opens the buffer, checks the parent's data, writes its own; a damaged copy of the
 * handle is refused. */
static void child_mem(void) {
    rill_ipc_mem_handle h, bad;
    void *p = NULL;
    if (!child_recv(&h, sizeof h))
        return;
    bad = h;
    bad.bytes[20] ^= 0x40;
    CHECK(rill_ipc_open_mem_handle(&bad, &p) == RILL_ERROR_IPC, "a damaged handle opened");
    CHECK(p == NULL && rill_last_error()[0] != '\0', "no sentence for a damaged handle");
    CHECK(rill_ipc_open_mem_handle(&h, &p) == RILL_OK, "open failed");
    if (p == NULL)
        return;
    CHECK(all_equal(p, 3.0f), "the parent's data is not visible");
    CHECK(rill_op_fill_f32(NULL, p, 7.0f, N) == RILL_OK, "fill failed");
    CHECK(rill_stream_synchronize(NULL) == RILL_OK, "synchronize failed");
    CHECK(rill_ipc_close_mem_handle(p) == RILL_OK, "close failed");
    CHECK(rill_ipc_close_mem_handle(p) == RILL_ERROR_INVALID_ARGUMENT, "closed twice");
}

/* wait / snapshot: the child's stream waits on the parent's record, whose work the parent
 * holds back until the child has submitted its wait and its sum. */
static void child_wait(int snapshot) {
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    void *p = NULL;
    rill_event *e = NULL;
    if (!child_recv(&mh, sizeof mh) || !child_recv(&eh, sizeof eh))
        return;
    CHECK(rill_ipc_open_mem_handle(&mh, &p) == RILL_OK, "open memory failed");
    CHECK(rill_event_open_ipc_handle(&eh, &e) == RILL_OK, "open event failed");
    if (p == NULL || e == NULL)
        return;
    CHECK(rill_event_query(e) == RILL_NOT_READY, "the held-back record reads as complete");
    CHECK(rill_stream_wait_event(NULL, e) == RILL_OK, "wait_event failed");
    child_signal('w');
    float want = snapshot ? 1.0f * N : 5.0f * N;
    float sum = device_sum(p);
    CHECK(sum == want, "the sum is %g, expected %g: the wait did not order the read", sum, want);
    if (snapshot) {
        /* The parent re-recorded the event after the wait, on work still held back. */
        char b = 0;
        child_recv(&b, 1);
        CHECK(rill_event_query(e) == RILL_NOT_READY, "the later record reads as complete");
        child_signal('d');
        CHECK(rill_event_synchronize(e) == RILL_OK, "synchronize on the later record failed");
        CHECK(rill_event_query(e) == RILL_OK, "query after synchronize is not OK");
    }
    CHECK(rill_event_destroy(e) == RILL_OK, "destroy failed");
    CHECK(rill_ipc_close_mem_handle(p) == RILL_OK, "close failed");
}

/* record: the opener records; the parent waits for it. */
static void child_record(void) {
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    void *p = NULL;
    rill_event *e = NULL;
    if (!child_recv(&mh, sizeof mh) || !child_recv(&eh, sizeof eh))
        return;
    CHECK(rill_ipc_open_mem_handle(&mh, &p) == RILL_OK, "open memory failed");
    CHECK(rill_event_open_ipc_handle(&eh, &e) == RILL_OK, "open event failed");
    if (p == NULL || e == NULL)
        return;
    CHECK(rill_launch_host_func(NULL, sleep_fn, (void *)(uintptr_t)200000) == RILL_OK,
          "host function failed");
    CHECK(rill_op_fill_f32(NULL, p, 9.0f, N) == RILL_OK, "fill failed");
    CHECK(rill_event_record(e, NULL) == RILL_OK, "record failed");
    child_signal('r');
    CHECK(rill_event_synchronize(e) == RILL_OK, "synchronize failed");
    char b = 0;
    child_recv(&b, 1); /* the parent has read the buffer */
    CHECK(rill_event_destroy(e) == RILL_OK, "destroy failed");
    CHECK(rill_ipc_close_mem_handle(p) == RILL_OK, "close failed");
}

/* exporter: exports an event whose record never completes, then waits to be killed. */
static void child_exporter(void) {
    static rt_gate never;
    rill_event *e = NULL;
    rill_ipc_event_handle h;
    CHECK(rill_event_create(RILL_EVENT_INTERPROCESS, &e) == RILL_OK, "create failed");
    CHECK(rill_launch_host_func(NULL, rt_gate_fn, &never) == RILL_OK, "host function failed");
    CHECK(rill_event_record(e, NULL) == RILL_OK, "record failed");
    CHECK(rill_event_ipc_handle(e, &h) == RILL_OK, "export failed");
    if (write(3, &h, sizeof h) != (ssize_t)sizeof h)
        child_failed = 1;
    char b;
    while (read(0, &b, 1) > 0) {
    }
    _exit(child_failed); /* killed before this, normally */
}

/* Host function: holds its stream until the parent sends a byte on fd 0. */
static void wait_for_parent_fn(void *user_data) {
    (void)user_data;
    char b;
    if (read(0, &b, 1) != 1)
        child_failed = 1;
}

/* recorder: records the parent's event behind a host function that waits for the parent's
 * 'g', signals 'r', then 'd' once its record completed; the parent may kill it instead. */
static void child_recorder(void) {
    rill_ipc_event_handle eh;
    rill_event *e = NULL;
    if (!child_recv(&eh, sizeof eh))
        return;
    CHECK(rill_event_open_ipc_handle(&eh, &e) == RILL_OK, "open event failed");
    if (e == NULL)
        return;
    CHECK(rill_launch_host_func(NULL, wait_for_parent_fn, NULL) == RILL_OK, "host function failed");
    CHECK(rill_event_record(e, NULL) == RILL_OK, "record failed");
    child_signal('r');
    CHECK(rill_event_synchronize(e) == RILL_OK, "synchronize failed");
    child_signal('d');
    char b;
    while (read(0, &b, 1) > 0) {
    }
    CHECK(rill_event_destroy(e) == RILL_OK, "destroy failed");
}

static int child_main(const char *role) {
    if (strcmp(role, "mem") == 0)
        child_mem();
    else if (strcmp(role, "wait") == 0)
        child_wait(0);
    else if (strcmp(role, "snapshot") == 0)
        child_wait(1);
    else if (strcmp(role, "record") == 0)
        child_record();
    else if (strcmp(role, "exporter") == 0)
        child_exporter();
    else if (strcmp(role, "recorder") == 0)
        child_recorder();
    else
        CHECK(0, "unknown role '%s'", role);
    rill_shutdown();
    return child_failed;
}

/* ------------------------------------------------------------ the tests */

/* "rill_ipc_open_mem_handle maps it in another process": data written by the parent is seen
 * by the child, and the child's writes by the parent. */
static void test_ipc_memory_is_shared_both_ways(void **state) {
    (void)state;
    float *p = dev_buffer(3.0f);
    rill_ipc_mem_handle h;
    RT_OK(rill_ipc_get_mem_handle(p, &h));
    child c;
    child_start(&c, "mem");
    send_bytes(c.to, &h, sizeof h);
    child_finish(&c);
    assert_true(all_equal(p, 7.0f));
    RT_OK(rill_free(p));
}

/* "Work submitted to stream after this call waits until event completes": a stream of another
 * process waits for this process's record; its read sees the write made before the record. */
static void test_ipc_event_orders_other_process_stream(void **state) {
    (void)state;
    static rt_gate g;
    atomic_store(&g.open, 0);
    float *p = dev_buffer(0.0f);
    rill_event *e;
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    RT_OK(rill_launch_host_func(NULL, rt_gate_fn, &g));
    RT_OK(rill_op_fill_f32(NULL, p, 5.0f, N));
    RT_OK(rill_event_record(e, NULL));
    RT_OK(rill_ipc_get_mem_handle(p, &mh));
    RT_OK(rill_event_ipc_handle(e, &eh));
    child c;
    child_start(&c, "wait");
    send_bytes(c.to, &mh, sizeof mh);
    send_bytes(c.to, &eh, sizeof eh);
    expect_signal(&c, 'w');
    rt_sleep_us(50000); /* the child's sum would run now if the wait did not hold it */
    atomic_store(&g.open, 1);
    child_finish(&c);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_free(p));
}

/* "as recorded at the time of this call (later records of event do not matter)", across
 * processes: a re-record after the child's wait, on work held back, does not delay the child;
 * the child's query then reports the later record as pending, and synchronize waits for it. */
static void test_ipc_wait_is_a_snapshot(void **state) {
    (void)state;
    static rt_gate first, second;
    atomic_store(&first.open, 0);
    atomic_store(&second.open, 0);
    float *p = dev_buffer(0.0f);
    rill_stream *s2;
    rill_event *e;
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    RT_OK(rill_stream_create(NULL, 0, &s2));
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    RT_OK(rill_launch_host_func(NULL, rt_gate_fn, &first));
    RT_OK(rill_op_fill_f32(NULL, p, 1.0f, N));
    RT_OK(rill_event_record(e, NULL));
    RT_OK(rill_ipc_get_mem_handle(p, &mh));
    RT_OK(rill_event_ipc_handle(e, &eh));
    child c;
    child_start(&c, "snapshot");
    send_bytes(c.to, &mh, sizeof mh);
    send_bytes(c.to, &eh, sizeof eh);
    expect_signal(&c, 'w');
    RT_OK(rill_launch_host_func(s2, rt_gate_fn, &second));
    RT_OK(rill_event_record(e, s2));
    atomic_store(&first.open, 1);
    send_bytes(c.to, "n", 1);
    expect_signal(&c, 'd');
    assert_int_equal(rill_event_query(e), RILL_NOT_READY);
    atomic_store(&second.open, 1);
    child_finish(&c);
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_free(p));
}

/* Both sides may record: the opener records after its write, and the exporter's stream waits
 * for that record before reading. */
static void test_ipc_opener_records_exporter_waits(void **state) {
    (void)state;
    float *p = dev_buffer(0.0f);
    rill_event *e;
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS | RILL_EVENT_BLOCKING_SYNC, &e));
    RT_OK(rill_ipc_get_mem_handle(p, &mh));
    RT_OK(rill_event_ipc_handle(e, &eh));
    child c;
    child_start(&c, "record");
    send_bytes(c.to, &mh, sizeof mh);
    send_bytes(c.to, &eh, sizeof eh);
    expect_signal(&c, 'r');
    RT_OK(rill_stream_wait_event(NULL, e));
    float *out;
    RT_OK(rill_malloc(NULL, sizeof(float), (void **)&out));
    RT_OK(rill_op_sum_f32(NULL, out, p, N));
    float sum = 0;
    RT_OK(rill_memcpy(&sum, out, sizeof sum));
    assert_true(sum == 9.0f * N);
    RT_OK(rill_event_query(e));
    send_bytes(c.to, "x", 1);
    child_finish(&c);
    RT_OK(rill_free(out));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_free(p));
}

/* "The exporting process keeps the event alive while others use it": when it exits with a
 * record pending, waits fail instead of hanging, and its handle no longer opens. */
static void test_ipc_exporter_exit_fails_waits(void **state) {
    (void)state;
    child c;
    rill_ipc_event_handle h;
    rill_event *e = NULL, *again = NULL;
    rill_stream *s;
    child_start(&c, "exporter");
    assert_true(recv_bytes(c.from, &h, sizeof h));
    RT_OK(rill_event_open_ipc_handle(&h, &e));
    assert_int_equal(rill_event_query(e), RILL_NOT_READY);
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_wait_event(s, e));
    kill(c.pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    close(c.to);
    close(c.from);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_event_synchronize(e));
    assert_non_null(strstr(rill_last_error(), "exited"));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    RT_STATUS(RILL_ERROR_IPC, rill_event_open_ipc_handle(&h, &again));
    assert_null(again);
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_event_destroy(e));
}

/* rill_event_synchronize_for: "returns RILL_NOT_READY when that work has not completed within
 * timeout_ns nanoseconds ... the caller may wait again": for another process's record too, and
 * waits in slices share one queued wait; once the exporter exits, the wait fails as the plain
 * one does. */
static void test_ipc_event_synchronize_for_ends_at_its_limit(void **state) {
    (void)state;
    child c;
    rill_ipc_event_handle h;
    rill_event *e = NULL;
    child_start(&c, "exporter");
    assert_true(recv_bytes(c.from, &h, sizeof h));
    RT_OK(rill_event_open_ipc_handle(&h, &e));
    rill_status st[3];
    for (int i = 0; i < 3; i++)
        st[i] = rill_event_synchronize_for(e, 2000000);
    kill(c.pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    close(c.to);
    close(c.from);
    for (int i = 0; i < 3; i++)
        assert_int_equal(st[i], RILL_NOT_READY);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_event_synchronize_for(e, 10 * SEC_NS));
    assert_non_null(strstr(rill_last_error(), "exited"));
    RT_OK(rill_event_destroy(e));
}

/* Kills the child and reaps it. */
static void child_kill(child *c) {
    int status;
    kill(c->pid, SIGKILL);
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    close(c->to);
    close(c->from);
}

/* "When the recorded work failed, waits on it fail too ... Clearing lets the stream run new work
 * again": a wait that failed because the exporter exited belongs to the stream that waited;
 * once that stream is cleared, rill_device_synchronize succeeds, with the opened event still
 * alive. */
static void test_ipc_cleared_wait_failure_leaves_device_synchronize_ok(void **state) {
    (void)state;
    child c;
    rill_ipc_event_handle h;
    rill_event *e = NULL;
    rill_stream *s;
    child_start(&c, "exporter");
    assert_true(recv_bytes(c.from, &h, sizeof h));
    RT_OK(rill_event_open_ipc_handle(&h, &e));
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_wait_event(s, e));
    child_kill(&c);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_event_synchronize(e));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_event_destroy(e));
}

/* "if a process that recorded the event exits before that record completes, waits for it fail
 * rather than hanging", in the exporter too: an opener records behind a host function and is
 * killed; the exporter's synchronize and its stream's wait fail with a sentence naming the
 * process, and the event and the stream go on once cleared. */
static void test_ipc_recorder_exit_fails_exporter_waits(void **state) {
    (void)state;
    rill_event *e;
    rill_ipc_event_handle eh;
    rill_stream *s;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    RT_OK(rill_event_ipc_handle(e, &eh));
    child c;
    child_start(&c, "recorder");
    send_bytes(c.to, &eh, sizeof eh);
    expect_signal(&c, 'r');
    assert_int_equal(rill_event_query(e), RILL_NOT_READY);
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_wait_event(s, e));
    char pid[32];
    snprintf(pid, sizeof pid, "process %d,", (int)c.pid);
    child_kill(&c);
    /* Polled with a deadline, so that a wait that never fails fails the test, not its time. */
    rill_status st = RILL_NOT_READY;
    for (uint64_t end = rt_now_ns() + 10 * SEC_NS; st == RILL_NOT_READY && rt_now_ns() < end;) {
        rt_sleep_us(1000);
        st = rill_stream_query(s);
    }
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, st);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_event_synchronize(e));
    assert_non_null(strstr(rill_last_error(), "exited"));
    assert_non_null(strstr(rill_last_error(), pid));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_non_null(strstr(rill_last_error(), pid));
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_event_destroy(e));
}

/* Several openers: one that recorded exits, but a later record of another, still running,
 * would also meet the waits ("a later record that completes first also meets earlier waits"),
 * so they keep waiting and succeed when it completes. */
static void test_ipc_recorder_exit_keeps_waits_a_later_record_meets(void **state) {
    (void)state;
    rill_event *e;
    rill_ipc_event_handle eh;
    rill_stream *first, *second;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    RT_OK(rill_event_ipc_handle(e, &eh));
    RT_OK(rill_stream_create(NULL, 0, &first));
    RT_OK(rill_stream_create(NULL, 0, &second));
    child a, b;
    child_start(&a, "recorder");
    send_bytes(a.to, &eh, sizeof eh);
    expect_signal(&a, 'r');
    RT_OK(rill_stream_wait_event(first, e)); /* for a's record */
    child_start(&b, "recorder");
    send_bytes(b.to, &eh, sizeof eh);
    expect_signal(&b, 'r');
    RT_OK(rill_stream_wait_event(second, e)); /* for b's, the latest */
    child_kill(&a);
    rt_sleep_us(350000); /* three liveness checks: a broken check fails the waits now */
    assert_int_equal(rill_stream_query(first), RILL_NOT_READY);
    assert_int_equal(rill_stream_query(second), RILL_NOT_READY);
    send_bytes(b.to, "g", 1);
    expect_signal(&b, 'd');
    RT_OK(rill_stream_synchronize(first));
    RT_OK(rill_stream_synchronize(second));
    RT_OK(rill_event_synchronize(e));
    child_finish(&b);
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(first));
    RT_OK(rill_stream_destroy(second));
    RT_OK(rill_event_destroy(e));
}

/* The number of times needle occurs in hay. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Out of memory while an interprocess event is made or opened: the sentence names the call
 * once, never the inner call that ran out. */
static void test_ipc_event_out_of_memory_names_the_call_once(void **state) {
    (void)state;
    rill_event *e = NULL, *o = NULL;
    rill_ipc_event_handle h;
    rill_status st = RILL_ERROR_OUT_OF_MEMORY;
    RT_OK(rill_device_synchronize(NULL)); /* the devices exist: only the event's memory fails */
    for (long k = 1; k < 50 && st != RILL_OK; k++) {
        rill__alloc_fail_after(k);
        st = rill_event_create(RILL_EVENT_INTERPROCESS, &e);
        rill__alloc_fail_after(0);
        const char *msg = rill_last_error();
        if (st != RILL_OK && (st != RILL_ERROR_OUT_OF_MEMORY ||
                              strncmp(msg, "rill_event_create: out of memory", 32) != 0 ||
                              count_of(msg, "rill_") != 1))
            fail_msg("failing allocation %ld: %s: \"%s\"", k, rill_status_name(st), msg);
    }
    RT_OK(st);
    RT_OK(rill_event_ipc_handle(e, &h));
    st = RILL_ERROR_OUT_OF_MEMORY;
    for (long k = 1; k < 50 && st != RILL_OK; k++) {
        rill__alloc_fail_after(k);
        st = rill_event_open_ipc_handle(&h, &o);
        rill__alloc_fail_after(0);
        const char *msg = rill_last_error();
        if (st != RILL_OK && (st != RILL_ERROR_OUT_OF_MEMORY ||
                              strncmp(msg, "rill_event_open_ipc_handle: out of memory", 41) != 0 ||
                              count_of(msg, "rill_") != 1))
            fail_msg("failing allocation %ld: %s: \"%s\"", k, rill_status_name(st), msg);
    }
    RT_OK(st);
    RT_OK(rill_event_destroy(o));
    RT_OK(rill_event_destroy(e));
}

/* This process's table of memory mappings, filled to vm.max_map_count with one-page mappings
 * of alternating protection, so that the next mmap fails with ENOMEM. */
typedef struct mappings {
    char *base; /* the pages whose protection alternates */
    size_t bytes;
    void *extra[8]; /* single pages mapped after base was full */
    size_t num_extra;
} mappings;

static bool fill_mappings(mappings *m) {
    long max = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f == NULL)
        return false;
    int got = fscanf(f, "%ld", &max);
    fclose(f);
    if (got != 1 || max <= 0 || max > 1000000)
        return false; /* too many to fill in a test */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    m->num_extra = 0;
    m->bytes = (size_t)(max + 1) * 2 * page;
    m->base = mmap(NULL, m->bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m->base == MAP_FAILED)
        return false;
    /* Each page made readable in the middle of the rest adds two mappings, until the kernel
     * refuses to split one more; then mmap, which checks the count once more loosely, maps
     * single pages (never merged: their protection alternates) until it refuses too. */
    for (long i = 0; i <= max; i++)
        if (mprotect(m->base + (size_t)(2 * i + 1) * page, page, PROT_READ) != 0)
            break;
    while (m->num_extra < sizeof m->extra / sizeof m->extra[0]) {
        int prot = m->num_extra % 2 == 0 ? PROT_READ : PROT_NONE;
        void *p = mmap(NULL, page, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return errno == ENOMEM;
        m->extra[m->num_extra++] = p;
    }
    return false;
}

static void empty_mappings(mappings *m) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (m->base == MAP_FAILED)
        return;
    /* First merge base back into one mapping (mprotect over whole mappings needs none more);
     * then munmap, which a sanitizer follows with mappings of its own, has room. */
    mprotect(m->base, m->bytes, PROT_NONE);
    for (size_t i = 0; i < m->num_extra; i++)
        munmap(m->extra[i], page);
    munmap(m->base, m->bytes);
}

/* ThreadSanitizer maps memory of its own inside open(), which the filled table refuses. */
#if defined(__SANITIZE_THREAD__)
#define FILL_MAPPINGS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FILL_MAPPINGS 0
#endif
#endif
#ifndef FILL_MAPPINGS
#define FILL_MAPPINGS 1
#endif

/* A process that has no room for another mapping fails to open memory with
 * RILL_ERROR_OUT_OF_MEMORY and a sentence that says so, not one that blames the exporter; it
 * opens once it has room again. */
static void test_ipc_open_without_room_blames_this_process(void **state) {
    (void)state;
    float *p = dev_buffer(1.0f);
    rill_ipc_mem_handle h;
    RT_OK(rill_ipc_get_mem_handle(p, &h));
    static char sentence[1024];
    static mappings m;
    void *q = &q;
    /* Between fill and empty, nothing here may need a mapping: no asserts, no allocation. */
    m.base = MAP_FAILED;
    bool full = FILL_MAPPINGS && fill_mappings(&m);
    rill_status st = full ? rill_ipc_open_mem_handle(&h, &q) : RILL_OK;
    if (full)
        snprintf(sentence, sizeof sentence, "%s", rill_last_error());
    empty_mappings(&m);
    if (!full) {
        RT_OK(rill_free(p));
        skip(); /* under ThreadSanitizer, or vm.max_map_count is too large to fill here */
    }
    assert_int_equal(st, RILL_ERROR_OUT_OF_MEMORY);
    assert_null(q);
    if (strstr(sentence, "rill_ipc_open_mem_handle: this process has no room") != sentence ||
        strstr(sentence, "Cannot allocate memory") == NULL || strstr(sentence, "exporter") != NULL)
        fail_msg("the sentence is \"%s\"", sentence);
    RT_OK(rill_ipc_open_mem_handle(&h, &q));
    RT_OK(rill_ipc_close_mem_handle(q));
    RT_OK(rill_free(p));
}

/* Opening in the exporting process maps the memory again, at another address. */
static void test_ipc_open_in_same_process_aliases(void **state) {
    (void)state;
    float *p = dev_buffer(2.0f);
    rill_ipc_mem_handle h;
    float *q = NULL;
    RT_OK(rill_ipc_get_mem_handle(p, &h));
    RT_OK(rill_ipc_open_mem_handle(&h, (void **)&q));
    assert_non_null(q);
    assert_ptr_not_equal(p, q);
    assert_true(all_equal(q, 2.0f));
    RT_OK(rill_op_fill_f32(NULL, q, 4.0f, N));
    RT_OK(rill_stream_synchronize(NULL));
    assert_true(all_equal(p, 4.0f));
    /* Copies accept the opened pointer, and check its bounds. */
    static float host[N + 1];
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(host, q, sizeof host));
    RT_OK(rill_ipc_close_mem_handle(q));
    RT_OK(rill_free(p));
}

/* An opened event in the exporting process shares the state of the exported one. */
static void test_ipc_event_open_in_same_process(void **state) {
    (void)state;
    static rt_gate g;
    atomic_store(&g.open, 0);
    rill_event *e, *o;
    rill_ipc_event_handle h;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    RT_OK(rill_event_ipc_handle(e, &h));
    RT_OK(rill_event_open_ipc_handle(&h, &o));
    RT_OK(rill_event_query(o)); /* never recorded */
    RT_OK(rill_launch_host_func(NULL, rt_gate_fn, &g));
    RT_OK(rill_event_record(e, NULL));
    assert_int_equal(rill_event_query(o), RILL_NOT_READY);
    atomic_store(&g.open, 1);
    RT_OK(rill_event_synchronize(o));
    RT_OK(rill_event_query(e));
    RT_OK(rill_event_destroy(o));
    RT_OK(rill_event_destroy(e));
}

/* RILL_ERROR_IPC: "an inter-process handle could not be ... opened": random bytes, a damaged
 * checksum, a wrong magic number, zeros, and a handle of the other kind never crash. */
static void test_ipc_bad_handles_are_ipc_errors(void **state) {
    (void)state;
    float *p = dev_buffer(1.0f);
    rill_event *e;
    rill_ipc_mem_handle mh, m;
    rill_ipc_event_handle eh, v;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    RT_OK(rill_ipc_get_mem_handle(p, &mh));
    RT_OK(rill_event_ipc_handle(e, &eh));
    void *q = &q;
    rill_event *o = (rill_event *)&o;

    srand(12345);
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof m.bytes; i++)
            m.bytes[i] = (unsigned char)rand();
        memcpy(v.bytes, m.bytes, sizeof v.bytes);
        RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&m, &q));
        assert_null(q);
        RT_STATUS(RILL_ERROR_IPC, rill_event_open_ipc_handle(&v, &o));
        assert_null(o);
    }
    for (size_t i = 0; i < sizeof mh.bytes; i++) { /* any one byte changed */
        m = mh;
        m.bytes[i] ^= 0x01;
        RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&m, &q));
        v = eh;
        v.bytes[i] ^= 0x80;
        RT_STATUS(RILL_ERROR_IPC, rill_event_open_ipc_handle(&v, &o));
    }
    m = mh;
    m.bytes[63] ^= 0xff; /* the checksum */
    RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&m, &q));
    assert_non_null(strstr(rill_last_error(), "checksum"));
    m = mh;
    m.bytes[0] = 'X'; /* the magic number */
    RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&m, &q));
    assert_non_null(strstr(rill_last_error(), "magic"));
    memset(&m, 0, sizeof m);
    RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&m, &q));
    memset(&v, 0, sizeof v);
    RT_STATUS(RILL_ERROR_IPC, rill_event_open_ipc_handle(&v, &o));
    memcpy(m.bytes, eh.bytes, sizeof m.bytes); /* an event handle as memory */
    RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&m, &q));
    assert_non_null(strstr(rill_last_error(), "event handle"));
    memcpy(v.bytes, mh.bytes, sizeof v.bytes);
    RT_STATUS(RILL_ERROR_IPC, rill_event_open_ipc_handle(&v, &o));

    /* A handle whose segment went back to the system no longer opens (a block this large has
     * a segment of its own). */
    void *big;
    RT_OK(rill_malloc(NULL, 12u << 20, &big));
    RT_OK(rill_ipc_get_mem_handle(big, &mh));
    RT_OK(rill_free(big));
    RT_OK(rill_stream_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    RT_STATUS(RILL_ERROR_IPC, rill_ipc_open_mem_handle(&mh, &q));
    assert_null(q);
    RT_OK(rill_free(p));
    RT_OK(rill_event_destroy(e));
}

/* Arguments: NULLs, pointers that are no allocation or its interior, closing what was never
 * opened, a non-interprocess event, and RILL_EVENT_INTERPROCESS with RILL_EVENT_TIMING. */
static void test_ipc_bad_arguments_are_invalid(void **state) {
    (void)state;
    float *p = dev_buffer(1.0f);
    rill_ipc_mem_handle mh;
    rill_ipc_event_handle eh;
    rill_event *e = NULL, *plain;
    void *q = NULL;
    int on_stack = 0;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_get_mem_handle(NULL, &mh));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_get_mem_handle(p, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_get_mem_handle(&on_stack, &mh));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_get_mem_handle(p + 1, &mh));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_open_mem_handle(NULL, &q));
    RT_OK(rill_ipc_get_mem_handle(p, &mh));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_open_mem_handle(&mh, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_close_mem_handle(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_close_mem_handle(&on_stack));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_close_mem_handle(p)); /* not opened */

    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_event_create(RILL_EVENT_INTERPROCESS | RILL_EVENT_TIMING, &e));
    assert_null(e);
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &plain));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_ipc_handle(plain, &eh));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_ipc_handle(NULL, &eh));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_ipc_handle(plain, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_open_ipc_handle(NULL, &e));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_event_open_ipc_handle(&eh, NULL));
    RT_OK(rill_event_destroy(plain));
    RT_OK(rill_free(p));
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_memory_is_shared_both_ways),
        cmocka_unit_test(test_ipc_event_orders_other_process_stream),
        cmocka_unit_test(test_ipc_wait_is_a_snapshot),
        cmocka_unit_test(test_ipc_opener_records_exporter_waits),
        cmocka_unit_test(test_ipc_exporter_exit_fails_waits),
        cmocka_unit_test(test_ipc_event_synchronize_for_ends_at_its_limit),
        cmocka_unit_test(test_ipc_cleared_wait_failure_leaves_device_synchronize_ok),
        cmocka_unit_test(test_ipc_recorder_exit_fails_exporter_waits),
        cmocka_unit_test(test_ipc_recorder_exit_keeps_waits_a_later_record_meets),
        cmocka_unit_test(test_ipc_event_out_of_memory_names_the_call_once),
        cmocka_unit_test(test_ipc_open_without_room_blames_this_process),
        cmocka_unit_test(test_ipc_open_in_same_process_aliases),
        cmocka_unit_test(test_ipc_event_open_in_same_process),
        cmocka_unit_test(test_ipc_bad_handles_are_ipc_errors),
        cmocka_unit_test(test_ipc_bad_arguments_are_invalid),
    };
    return RT_RUN(tests);
}
