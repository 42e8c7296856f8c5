/* SPDX-License-Identifier: MIT */
/* Communicators through librill's communication engine (src/comm/comm.h),
 * driven by a pretend transport instead of MPI, so that every rule of
 * rill_mpi.h that does not need other processes is proved here, under the
 * sanitizers: stream order on both sides of an operation, issue order, no
 * worker held, sticky errors, the broken communicator, timeouts and the
 * memory they keep, destroy and shutdown, and every refused argument.
 *
 * The pretend world has `size` ranks that all hold this rank's data: a sum
 * is size times the input, an allgather size copies of it, and a broadcast
 * from another rank writes bytes 0xb0, 0xb1, ... Its operations complete at
 * their first test unless the test holds them; it logs what it starts, in
 * order, with the memory it was handed. Like MPI, it leaves an average on
 * a CUDA device's memory a sum, for librill to divide. */
#include "fixture.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "util/alloc.h"

#define LOG_MAX 64
#define SEC_NS  1000000000ull

typedef struct fake {
    int size;
    atomic_int hold;       /* operations stay under way while set */
    atomic_int fail_start; /* the next operation's start fails */
    atomic_int fail_test;  /* the next completing operation fails */
    atomic_int fail_held;  /* completing operations fail, still holding their memory */
    atomic_int open_fails; /* OPEN is refused */
    atomic_int open_hangs; /* OPEN never completes */
    atomic_int released;   /* release ran */
    atomic_int cancels;
    atomic_int done_tests; /* tests that said DONE */
    bool cuda_aware;       /* takes CUDA devices' memory as it is */
    /* what started, in order: written by the communication thread before
     * nlog counts it (release) */
    atomic_int nlog;
    int log_kind[LOG_MAX];
    size_t log_count[LOG_MAX];
    void *log_recv[LOG_MAX];
    /* the loopback message of send and recv (communication thread only) */
    unsigned char msg[4096];
    size_t msg_bytes;
    int has_msg;
} fake;

typedef struct fake_state {
    int cancelled;
} fake_state;

static void log_op(fake *f, const rill__comm_op *op) {
    int n = atomic_load_explicit(&f->nlog, memory_order_relaxed);
    if (n == LOG_MAX)
        return;
    f->log_kind[n] = op->a.kind;
    f->log_count[n] = op->a.count;
    f->log_recv[n] = op->a.recv;
    atomic_store_explicit(&f->nlog, n + 1, memory_order_release);
}

static rill_status fake_start(void *ctx, rill__comm_op *op, char *why, size_t size) {
    fake *f = ctx;
    rill__comm_kind kind = op->a.kind;
    if (kind == RILL__COMM_OPEN && atomic_load(&f->open_fails)) {
        snprintf(why, size, "injected refusal");
        return RILL_ERROR_NOT_SUPPORTED;
    }
    if (kind != RILL__COMM_OPEN && kind != RILL__COMM_CLOSE && atomic_exchange(&f->fail_start, 0)) {
        snprintf(why, size, "injected start failure");
        return RILL_ERROR_INTERNAL;
    }
    memset(op->state, 0, sizeof op->state);
    log_op(f, op);
    if (kind == RILL__COMM_SEND) {
        memcpy(f->msg, op->a.recv, op->a.count);
        f->msg_bytes = op->a.count;
        f->has_msg = 1;
    }
    return RILL_OK;
}

/* What the pretend world computes: every rank holds this rank's data. */
static void perform(fake *f, const rill__comm_op *op) {
    const rill__comm_args *a = &op->a;
    size_t n = a->count;
    float *recv = a->recv;
    const float *send = a->send;
    bool sum =
        a->reduce == RILL__REDUCE_SUM || (a->reduce == RILL__REDUCE_AVG && op->device_memory);
    float scale = sum ? (float)f->size : 1.0f;
    switch (a->kind) {
    case RILL__COMM_ALLREDUCE:
    case RILL__COMM_REDUCE_SCATTER: /* rank 0 keeps block 0 */
        for (size_t i = 0; i < n; i++)
            recv[i] = send[i] * scale;
        break;
    case RILL__COMM_ALLGATHER:
        for (int r = 0; r < f->size; r++)
            memcpy((char *)a->recv + (size_t)r * n, a->send, n);
        break;
    case RILL__COMM_RECV:
        memcpy(a->recv, f->msg, n < f->msg_bytes ? n : f->msg_bytes);
        f->has_msg = 0;
        break;
    case RILL__COMM_BROADCAST: /* this rank is 0 */
        for (size_t i = 0; a->peer != 0 && i < n; i++)
            ((unsigned char *)a->recv)[i] = (unsigned char)(0xb0 + i);
        break;
    default: /* send: nothing more */
        break;
    }
}

static rill__comm_test fake_test(void *ctx, rill__comm_op *op, char *why, size_t size) {
    fake *f = ctx;
    fake_state *st = (fake_state *)(void *)op->state;
    rill__comm_kind kind = op->a.kind;
    if (kind == RILL__COMM_CLOSE)
        return RILL__COMM_DONE;
    if (st->cancelled) {
        snprintf(why, size, "cancelled");
        return RILL__COMM_FAILED;
    }
    if (kind == RILL__COMM_OPEN) {
        if (atomic_load(&f->open_hangs))
            return RILL__COMM_PENDING;
        op->rank = 0;
        op->size = f->size;
        op->cuda_aware = f->cuda_aware;
        return RILL__COMM_DONE;
    }
    if (atomic_load(&f->hold) || (kind == RILL__COMM_RECV && !f->has_msg))
        return RILL__COMM_PENDING;
    if (atomic_load(&f->fail_held)) {
        snprintf(why, size, "injected failure that keeps the buffers");
        return RILL__COMM_FAILED_HELD;
    }
    if (atomic_exchange(&f->fail_test, 0)) {
        snprintf(why, size, "injected failure");
        return RILL__COMM_FAILED;
    }
    perform(f, op);
    atomic_fetch_add(&f->done_tests, 1);
    return RILL__COMM_DONE;
}

static void fake_cancel(void *ctx, rill__comm_op *op) {
    fake *f = ctx;
    atomic_fetch_add(&f->cancels, 1);
    if (op->a.kind == RILL__COMM_SEND || op->a.kind == RILL__COMM_RECV)
        ((fake_state *)(void *)op->state)->cancelled = 1;
}

static void fake_release(void *ctx) {
    atomic_store(&((fake *)ctx)->released, 1);
}

static const rill__comm_transport fake_transport = {
    .name = "FAKE",
    .max_count = 1u << 20,
    .start = fake_start,
    .test = fake_test,
    .cancel = fake_cancel,
    .release = fake_release,
};

/* The same, with no limit of its own on counts (overflow checks). */
static const rill__comm_transport unlimited_transport = {
    .name = "FAKE",
    .max_count = SIZE_MAX,
    .start = fake_start,
    .test = fake_test,
    .cancel = fake_cancel,
    .release = fake_release,
};

static rill_comm *open_fake(fake *f, int size) {
    f->size = size;
    rill_comm *c = NULL;
    RT_OK(rill__comm_open(&fake_transport, f, "rill_comm_create_mpi", &c));
    return c;
}

static int logged(fake *f) {
    return atomic_load_explicit(&f->nlog, memory_order_acquire);
}

/* Waits (at most timeout_ns) until *word reaches want; returns whether it
 * did. */
static bool wait_for_ns(atomic_int *word, int want, uint64_t timeout_ns) {
    uint64_t deadline = rt_now_ns() + timeout_ns;
    while (atomic_load(word) < want && rt_now_ns() < deadline)
        rt_sleep_us(100);
    return atomic_load(word) >= want;
}

static bool wait_for(atomic_int *word, int want) {
    return wait_for_ns(word, want, 10 * SEC_NS);
}

static rill_stream *new_stream(void) {
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    return s;
}

static float *new_floats(rill_stream *s, size_t n) {
    float *p;
    RT_OK(rill_malloc_async(n * sizeof(float), s, (void **)&p));
    return p;
}

static rill_status allreduce(rill_stream *s, rill_comm *c, float *recv, const float *send,
                             size_t n) {
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE, .fn = "rill_allreduce_f32"};
    a.recv = recv;
    a.send = send;
    a.count = n;
    a.reduce = RILL__REDUCE_SUM;
    return rill__comm_issue(s, c, &a);
}

static rill_status point(rill_stream *s, rill_comm *c, rill__comm_kind kind, void *buf,
                         size_t bytes, int peer) {
    rill__comm_args a = {.kind = kind,
                         .fn = kind == RILL__COMM_SEND   ? "rill_send"
                               : kind == RILL__COMM_RECV ? "rill_recv"
                                                         : "rill_broadcast"};
    a.recv = buf;
    a.count = bytes;
    a.peer = peer;
    return rill__comm_issue(s, c, &a);
}

static void set_flag(void *flag) {
    atomic_store((atomic_int *)flag, 1);
}

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    rill_kernel_fail(ctx, "value out of range");
}

static void assert_contains(const char *text, const char *part) {
    if (strstr(text, part) == NULL)
        fail_msg("expected \"%s\" in: %s", part, text);
}

/* ------------------------------------------------------------ stream order */

/* rill_mpi.h: "it starts when the stream's earlier work is done, the
 * stream's later work waits for it". A fill before the allreduce is what
 * it reduces; a copy after it sees the result; while the stream's earlier
 * work runs, the operation has not started. */
static void test_comm_operation_runs_between_earlier_and_later_work(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4), *y = new_floats(s, 4), host[4] = {0};
    rt_gate g;
    rt_gate_reset(&g);
    RT_OK(rt_launch_gate_kernel(s, &g));
    RT_OK(rill_op_fill_f32(s, x, 2.0f, 4));
    RT_OK(allreduce(s, c, y, x, 4));
    RT_OK(rill_memcpy_async(host, y, sizeof host, s));
    assert_true(rt_gate_wait_entered(&g));
    assert_int_equal(logged(&f), 1); /* OPEN only */
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), 2);
    assert_int_equal(f.log_kind[1], RILL__COMM_ALLREDUCE);
    for (int i = 0; i < 4; i++)
        assert_true(host[i] == 8.0f);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    assert_int_equal(atomic_load(&f.released), 1);
}

/* rill_mpi.h: "events and rill_stream_wait_* order it with other streams
 * exactly like a kernel". A stream that waits for an event recorded after
 * an operation still under way waits, then sees its result. */
static void test_comm_event_after_operation_orders_other_stream(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s1 = new_stream(), *s2 = new_stream();
    float *x = new_floats(s1, 4), host[4] = {0};
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_op_fill_f32(s1, x, 3.0f, 4));
    atomic_store(&f.hold, 1);
    RT_OK(allreduce(s1, c, x, x, 4)); /* in place */
    RT_OK(rill_event_record(e, s1));
    RT_OK(rill_stream_wait_event(s2, e));
    RT_OK(rill_memcpy_async(host, x, sizeof host, s2));
    assert_int_equal(rill_event_query(e), RILL_NOT_READY);
    assert_int_equal(rill_stream_query(s2), RILL_NOT_READY);
    atomic_store(&f.hold, 0);
    RT_OK(rill_stream_synchronize(s2));
    for (int i = 0; i < 4; i++)
        assert_true(host[i] == 6.0f);
    RT_OK(rill_free_async(x, s2));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* rill_mpi.h: "A communicator starts its collectives in issue order, each
 * once its stream has reached it and every collective issued before it on
 * the communicator has started". B's stream reaches it at once, A's is
 * held: B waits for A. A second communicator's operation, issued after B
 * was ready and started, proves the engine looked at B meanwhile. */
static void test_comm_operations_start_in_issue_order(void **state) {
    (void)state;
    fake f = {0}, other = {0};
    rill_comm *c = open_fake(&f, 2), *c2 = open_fake(&other, 2);
    rill_stream *s1 = new_stream(), *s2 = new_stream(), *s3 = new_stream();
    float *x = new_floats(s1, 8);
    RT_OK(rill_stream_synchronize(s1));
    rt_gate g;
    rt_gate_reset(&g);
    RT_OK(rt_launch_gate_kernel(s1, &g));
    RT_OK(allreduce(s1, c, x, x, 1));         /* A */
    RT_OK(allreduce(s2, c, x + 4, x + 4, 2)); /* B: its stream is free */
    RT_OK(allreduce(s3, c2, x + 2, x + 2, 1));
    assert_true(wait_for(&other.nlog, 2));
    assert_int_equal(logged(&f), 1); /* B has not started before A */
    assert_int_equal(rill_stream_query(s2), RILL_NOT_READY);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_stream_synchronize(s2));
    RT_OK(rill_stream_synchronize(s3));
    assert_int_equal(logged(&f), 3);
    assert_int_equal(f.log_count[1], 1);
    assert_int_equal(f.log_count[2], 2);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_stream_destroy(s3));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    RT_OK(rill__comm_close(c2, "rill_comm_destroy"));
}

/* rill_mpi.h: "Progress never holds a compute unit". Twice as many
 * operations under way as there are workers, each on its own stream, and a
 * kernel on another stream still runs. */
static void test_comm_pending_operations_hold_no_worker(void **state) {
    (void)state;
    enum { N = 8 }; /* the tests run with 4 workers */
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s[N], *free_stream = new_stream();
    float *x = new_floats(free_stream, N + 1);
    RT_OK(rill_stream_synchronize(free_stream));
    atomic_store(&f.hold, 1);
    for (int i = 0; i < N; i++) {
        s[i] = new_stream();
        RT_OK(allreduce(s[i], c, x + i, x + i, 1));
    }
    RT_OK(rill_op_fill_f32(free_stream, x + N, 1.0f, 1));
    uint64_t deadline = rt_now_ns() + 10 * SEC_NS;
    rill_status st;
    while ((st = rill_stream_query(free_stream)) == RILL_NOT_READY && rt_now_ns() < deadline)
        rt_sleep_us(100);
    assert_int_equal(st, RILL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(rill_stream_query(s[i]), RILL_NOT_READY);
    atomic_store(&f.hold, 0);
    for (int i = 0; i < N; i++) {
        RT_OK(rill_stream_synchronize(s[i]));
        RT_OK(rill_stream_destroy(s[i]));
    }
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(free_stream));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* Operations issued back to back on one stream start one after another
 * on the communication thread, without the stream's worker running the
 * WAIT between them: with every worker held by a gate, the second starts
 * once the first completes (it was under way when the second was issued),
 * and a third, issued once the second had completed, starts at once. */
static void test_comm_back_to_back_operations_start_while_workers_are_busy(void **state) {
    (void)state;
    enum { MAX_WORKERS = 16 };
    rill_device *dev;
    rill_device_info info;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    RT_OK(rill_device_get_info(dev, &info));
    int workers = info.compute_units;
    assert_true(workers <= MAX_WORKERS);
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *busy[MAX_WORKERS], *s;
    float *x;
    RT_OK(rill_malloc(NULL, 8 * sizeof(float), (void **)&x));
    rt_gate g[MAX_WORKERS];
    for (int i = 0; i < workers; i++) {
        busy[i] = new_stream();
        rt_gate_reset(&g[i]);
        RT_OK(rt_launch_gate_kernel(busy[i], &g[i]));
    }
    for (int i = 0; i < workers; i++)
        assert_true(rt_gate_wait_entered(&g[i]));
    s = new_stream();
    atomic_store(&f.hold, 1);
    RT_OK(allreduce(s, c, x, x, 1));
    RT_OK(allreduce(s, c, x + 4, x + 4, 2));
    /* Each wait well within the gates' own timeout (10 s). */
    assert_true(wait_for_ns(&f.nlog, 2, 2 * SEC_NS));
    atomic_store(&f.hold, 0);
    assert_true(wait_for_ns(&f.done_tests, 2, 2 * SEC_NS));
    RT_OK(allreduce(s, c, x + 2, x + 2, 1));
    assert_true(wait_for_ns(&f.done_tests, 3, 2 * SEC_NS));
    for (int i = 0; i < workers; i++)
        assert_int_equal(rill_stream_query(busy[i]), RILL_NOT_READY);
    assert_int_equal(logged(&f), 4);
    assert_int_equal(f.log_count[2], 2);
    for (int i = 0; i < workers; i++)
        rt_gate_open(&g[i]);
    RT_OK(rill_stream_synchronize(s));
    for (int i = 0; i < workers; i++) {
        assert_int_equal(atomic_load(&g[i].timed_out), 0);
        RT_OK(rill_stream_synchronize(busy[i]));
        RT_OK(rill_stream_destroy(busy[i]));
    }
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* rill_mpi.h: "Its start, progress and completion need no compute unit".
 * With every worker held by a gate, an operation on an idle stream, the
 * event recorded after it, a stream that waits on that event and the
 * operation after that wait all complete (the second operation reduces
 * the first's result), and the host's synchronize returns, before any gate
 * opens. */
static void test_comm_operations_complete_while_every_unit_is_busy(void **state) {
    (void)state;
    enum { MAX_WORKERS = 16 };
    rill_device *dev;
    rill_device_info info;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    RT_OK(rill_device_get_info(dev, &info));
    int workers = info.compute_units;
    assert_true(workers <= MAX_WORKERS);
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *busy[MAX_WORKERS], *s1 = new_stream(), *s2 = new_stream();
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    float *x;
    RT_OK(rill_malloc(NULL, 4 * sizeof(float), (void **)&x));
    for (int i = 0; i < 4; i++)
        x[i] = 1.0f;
    rt_gate g[MAX_WORKERS];
    for (int i = 0; i < workers; i++) {
        busy[i] = new_stream();
        rt_gate_reset(&g[i]);
        RT_OK(rt_launch_gate_kernel(busy[i], &g[i]));
    }
    for (int i = 0; i < workers; i++)
        assert_true(rt_gate_wait_entered(&g[i]));
    RT_OK(allreduce(s1, c, x, x, 4));
    RT_OK(rill_event_record(e, s1));
    RT_OK(rill_stream_wait_event(s2, e));
    RT_OK(allreduce(s2, c, x, x, 4));
    /* Well within the gates' own timeout (10 s), and generous for a loaded
     * machine under ThreadSanitizer: it takes a millisecond. */
    uint64_t deadline = rt_now_ns() + 5 * SEC_NS;
    rill_status st;
    while ((st = rill_stream_query(s2)) == RILL_NOT_READY && rt_now_ns() < deadline)
        rt_sleep_us(100);
    assert_int_equal(st, RILL_OK);
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_event_synchronize(e));
    for (int i = 0; i < workers; i++)
        assert_int_equal(rill_stream_query(busy[i]), RILL_NOT_READY);
    for (int i = 0; i < 4; i++)
        assert_true(x[i] == 4.0f);
    for (int i = 0; i < workers; i++)
        rt_gate_open(&g[i]);
    for (int i = 0; i < workers; i++) {
        assert_int_equal(atomic_load(&g[i].timed_out), 0);
        RT_OK(rill_stream_synchronize(busy[i]));
        RT_OK(rill_stream_destroy(busy[i]));
    }
    RT_OK(rill_free(x));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* An operation of no bytes, with NULL buffers, is still a command of its
 * stream and still issued to the transport (the other ranks issue it too). */
static void test_comm_empty_operation_is_still_issued_in_order(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    atomic_int after = 0;
    atomic_store(&f.hold, 1);
    RT_OK(allreduce(s, c, NULL, NULL, 0));
    RT_OK(rill_launch_host_func(s, set_flag, &after));
    assert_int_equal(rill_stream_query(s), RILL_NOT_READY);
    atomic_store(&f.hold, 0);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&after), 1);
    assert_int_equal(logged(&f), 2);
    assert_int_equal(f.log_count[1], 0);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* rill_mpi.h: "a send and its recv match in issue order". A receive issued
 * first on one stream completes with the bytes of a send issued later on
 * another (the pretend world loops them back). */
static void test_comm_receive_completes_with_later_send(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 1);
    rill_stream *s1 = new_stream(), *s2 = new_stream();
    unsigned char *in, *out, host[64];
    RT_OK(rill_malloc(NULL, 64, (void **)&in));
    RT_OK(rill_malloc(NULL, 64, (void **)&out));
    RT_OK(rill_memset_async(out, 0x5a, 64, s2));
    RT_OK(point(s1, c, RILL__COMM_RECV, in, 64, 0));
    RT_OK(point(s2, c, RILL__COMM_SEND, out, 64, 0));
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_memcpy(host, in, 64));
    for (int i = 0; i < 64; i++)
        assert_int_equal(host[i], 0x5a);
    RT_OK(rill_free(in));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s1));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* ------------------------------------------------------------- failures */

/* rill_mpi.h: "An MPI failure ... fails the command: the stream's sticky
 * error, with a sentence naming the collective, the rank and MPI's error
 * string"; and "A failure breaks the communicator". */
static void test_comm_transport_failure_is_sticky_and_breaks_communicator(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4);
    atomic_int after = 0;
    atomic_store(&f.fail_test, 1);
    RT_OK(allreduce(s, c, x, x, 4));
    RT_OK(rill_launch_host_func(s, set_flag, &after));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(),
                    "rill_allreduce_f32 (sum of 4 floats) on rank 0 of 2 failed: injected failure");
    assert_int_equal(atomic_load(&after), 0); /* skipped */
    RT_OK(rill_stream_clear_error(s));
    RT_OK(point(s, c, RILL__COMM_BROADCAST, x, 16, 1));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "rill_broadcast (16 bytes from rank 1) on rank 0 of 2 was "
                                       "not started: the communicator failed before "
                                       "(rill_allreduce_f32");
    assert_int_equal(logged(&f), 2); /* the broadcast never reached the transport */
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* An operation issued right behind one that fails, on the same stream,
 * is skipped (its stream fails at the first one's WAIT) and never reaches
 * the transport; the stream's error names the first failure. */
static void test_comm_operation_behind_a_failed_one_is_skipped(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4);
    RT_OK(rill_stream_synchronize(s));
    atomic_store(&f.hold, 1);
    atomic_store(&f.fail_test, 1);
    RT_OK(allreduce(s, c, x, x, 4));
    RT_OK(allreduce(s, c, x, x, 2));
    atomic_store(&f.hold, 0);
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(),
                    "rill_allreduce_f32 (sum of 4 floats) on rank 0 of 2 failed: injected failure");
    assert_int_equal(logged(&f), 2); /* the second never reached the transport */
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* A transport that refuses to start an operation fails it the same way. */
static void test_comm_start_failure_is_sticky(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 3);
    rill_stream *s = new_stream();
    unsigned char *b;
    RT_OK(rill_malloc(NULL, 8, (void **)&b));
    atomic_store(&f.fail_start, 1);
    RT_OK(point(s, c, RILL__COMM_SEND, b, 8, 2));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(),
                    "rill_send (8 bytes to rank 2) on rank 0 of 3 failed: injected start failure");
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* rill_mpi.h: a collective "skipped because its stream had failed (as a
 * kernel is)" breaks the communicator, and the next one names why. */
static void test_comm_skipped_operation_breaks_communicator(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4);
    rill_kernel_desc d = {.name = "check", .cpu = fail_kernel};
    rill_kernel *k;
    RT_OK(rill_kernel_create(&d, &k));
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    RT_OK(rill_launch_kernel(s, k, &l));
    RT_OK(allreduce(s, c, x, x, 4));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "kernel 'check'");
    RT_OK(rill_stream_clear_error(s));
    RT_OK(allreduce(s, c, x, x, 2));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "was not started: the communicator failed before "
                                       "(rill_allreduce_f32 (sum of 4 floats) on rank 0 of 2 "
                                       "was skipped because its stream had failed");
    assert_int_equal(logged(&f), 1); /* neither reached the transport */
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

static rill_comm *open_with_timeout(fake *f, int size, const char *seconds) {
    setenv("RILL_COMM_TIMEOUT", seconds, 1);
    rill_comm *c = open_fake(f, size);
    unsetenv("RILL_COMM_TIMEOUT");
    return c;
}

/* p was freed on s while an operation still held it: the next
 * allocation of its size on s (none other of that size being free there)
 * does not get it, and once the transport lets go of it (release(), which
 * returns when it did), an allocation gets it back within 10 s. */
static void assert_kept_until_let_go(rill_stream *s, size_t bytes, void *p, void (*release)(void *),
                                     void *arg) {
    enum { MAX = 64 };
    void *got[MAX];
    int n = 0;
    RT_OK(rill_malloc_async(bytes, s, &got[n]));
    assert_ptr_not_equal(got[n++], p);
    release(arg);
    uint64_t deadline = rt_now_ns() + 10 * SEC_NS;
    bool reused = false;
    /* The pause doubles from 5 ms to 250 ms, so that the MAX tries span the
     * 10 s on a loaded machine. */
    unsigned pause_us = 5000;
    while (!reused && n < MAX && rt_now_ns() < deadline) {
        /* Each earlier block stays allocated: a freed one would be taken
         * first. */
        RT_OK(rill_malloc_async(bytes, s, &got[n]));
        reused = got[n++] == p;
        if (!reused) {
            rt_sleep_us(pause_us);
            pause_us = pause_us < 125000 ? 2 * pause_us : 250000;
        }
    }
    assert_true(reused);
    for (int i = 0; i < n; i++)
        RT_OK(rill_free_async(got[i], s));
}

/* Lets the held operation complete, and waits until the transport saw it. */
static void let_go_of_held(void *arg) {
    fake *f = arg;
    int done = atomic_load(&f->done_tests);
    atomic_store(&f->hold, 0);
    assert_true(wait_for(&f->done_tests, done + 1));
}

static void let_go_of_failed(void *arg) {
    fake *f = arg;
    int done = atomic_load(&f->done_tests);
    atomic_store(&f->fail_held, 0);
    assert_true(wait_for(&f->done_tests, done + 1));
}

/* rill_mpi.h: "no completion within RILL_COMM_TIMEOUT seconds ... fails
 * the command", and a collective that timed out keeps its memory from
 * being handed out again until the transport lets it go. */
static void test_comm_timeout_fails_stream_and_keeps_memory(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_with_timeout(&f, 2, "0.05");
    rill_stream *s = new_stream();
    float *x = new_floats(s, 1024);
    atomic_store(&f.hold, 1);
    RT_OK(allreduce(s, c, x, x, 1024));
    uint64_t t0 = rt_now_ns();
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_true(rt_now_ns() - t0 < 5 * SEC_NS);
    assert_contains(rill_last_error(), "rill_allreduce_f32 (sum of 1024 floats) on rank 0 of 2 "
                                       "did not complete within RILL_COMM_TIMEOUT (0.05 s)");
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_free_async(x, s));
    /* The transport completes it after all. */
    assert_kept_until_let_go(s, 4096, x, let_go_of_held, &f);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* The buffers of operations under way are never handed out again, however
 * many are in flight on them: 200 allreduces of one buffer held by the
 * transport, the buffer freed on another stream, and an allocation of its
 * size there gets other memory (the pool never makes a stream wait behind
 * a collective, which may wait for anything), until the transport lets
 * the operations go. */
static void test_comm_buffers_of_operations_in_flight_are_kept(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream(), *o = new_stream();
    float *x; /* no stream of its own: only the operations' uses keep it */
    RT_OK(rill_malloc(NULL, 4096, (void **)&x));
    atomic_store(&f.hold, 1);
    for (int i = 0; i < 200; i++)
        RT_OK(allreduce(s, c, x, x, 1024));
    RT_OK(rill_free_async(x, o));
    void *y;
    RT_OK(rill_malloc_async(4096, o, &y));
    atomic_store(&f.hold, 0); /* before the check, so that a failure ends */
    RT_OK(rill_stream_synchronize(s));
    assert_ptr_not_equal(y, x);
    assert_int_equal(atomic_load(&f.done_tests), 200);
    RT_OK(rill_free_async(y, o));
    RT_OK(rill_stream_synchronize(o));
    RT_OK(rill_stream_destroy(o));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

typedef struct racer {
    rill_comm *c;
    atomic_int *go;
    int issued, refused;
    bool bad; /* a status or sentence other than the two allowed */
} racer;

/* Issues allreduces and rank queries until the communicator is gone. */
static void *race_main(void *arg) {
    racer *r = arg;
    rill_stream *s = new_stream();
    float *x = new_floats(s, 16);
    while (!atomic_load(r->go))
        ;
    for (int i = 0; i < 100000 && r->refused < 20; i++) {
        rill_status st = i % 2 ? allreduce(s, r->c, x, x, 16)
                               : rill__comm_get(r->c, "rill_comm_rank", NULL, NULL, NULL);
        if (st == RILL_OK) {
            r->issued++;
            continue;
        }
        r->refused++;
        const char *e = rill_last_error();
        if (st != RILL_ERROR_INVALID_ARGUMENT ||
            (strstr(e, "handle is not valid") == NULL && strstr(e, "being destroyed") == NULL))
            r->bad = true;
    }
    /* What was issued before the destroy ran, whatever the race. */
    if (rill_stream_synchronize(s) != RILL_OK)
        r->bad = true;
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    return NULL;
}

/* Two threads race rill_comm_destroy with their own calls on the same
 * communicator: each call either runs or is refused with a sentence,
 * the destroy waits for what was issued, and nothing reaches freed
 * memory (run under AddressSanitizer and ThreadSanitizer in CI). */
static void test_comm_destroy_racing_with_calls_is_safe(void **state) {
    (void)state;
    enum { THREADS = 2 };
    for (int round = 0; round < 20; round++) {
        fake f = {0};
        rill_comm *c = open_fake(&f, 2);
        atomic_int go = 0;
        racer r[THREADS];
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++) {
            r[i] = (racer){.c = c, .go = &go};
            assert_int_equal(pthread_create(&th[i], NULL, race_main, &r[i]), 0);
        }
        atomic_store(&go, 1);
        rt_sleep_us((unsigned)(round * 50));
        RT_OK(rill__comm_close(c, "rill_comm_destroy"));
        for (int i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            assert_false(r[i].bad);
        }
    }
}

/* A receive that times out is cancelled (point-to-point operations can
 * be), and destroy then does not wait for it. */
static void test_comm_timed_out_receive_is_cancelled(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_with_timeout(&f, 1, "0.05");
    rill_stream *s = new_stream();
    unsigned char *b;
    RT_OK(rill_malloc(NULL, 16, (void **)&b));
    RT_OK(point(s, c, RILL__COMM_RECV, b, 16, 0));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "rill_recv (16 bytes from rank 0) on rank 0 of 1 did not "
                                       "complete within RILL_COMM_TIMEOUT (0.05 s)");
    assert_int_equal(atomic_load(&f.cancels), 1);
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    RT_OK(rill_free(b));
}

/* A failure after which the transport may still use the buffers fails the
 * stream at once and keeps the memory until the transport lets go. */
static void test_comm_failure_that_keeps_buffers_keeps_memory(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 1024);
    atomic_store(&f.fail_held, 1);
    RT_OK(allreduce(s, c, x, x, 1024));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "failed: injected failure that keeps the buffers");
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_free_async(x, s));
    assert_kept_until_let_go(s, 4096, x, let_go_of_failed, &f);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* ----------------------------------------------------- create and destroy */

/* A transport that refuses OPEN fails creation with its status and reason,
 * and its state is released. */
static void test_comm_create_failure_releases_transport_state(void **state) {
    (void)state;
    fake f = {.size = 2};
    atomic_store(&f.open_fails, 1);
    rill_comm *c = (rill_comm *)&f;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED,
              rill__comm_open(&fake_transport, &f, "rill_comm_create_mpi", &c));
    assert_null(c);
    assert_contains(rill_last_error(), "rill_comm_create_mpi: injected refusal");
    assert_int_equal(atomic_load(&f.released), 1);
}

/* rill_mpi.h: creation fails "when ... the other ranks do not within
 * RILL_COMM_TIMEOUT"; the state the transport may still write is kept. */
static void test_comm_create_times_out(void **state) {
    (void)state;
    static fake f; /* kept for good: the transport may still write it */
    atomic_store(&f.open_hangs, 1);
    f.size = 2;
    setenv("RILL_COMM_TIMEOUT", "0.05", 1);
    rill_comm *c = NULL;
    RT_STATUS(RILL_ERROR_INTERNAL,
              rill__comm_open(&fake_transport, &f, "rill_comm_create_mpi", &c));
    unsetenv("RILL_COMM_TIMEOUT");
    assert_null(c);
    assert_contains(rill_last_error(), "did not create their communicators from the same one "
                                       "within RILL_COMM_TIMEOUT (0.05 s)");
    assert_int_equal(atomic_load(&f.released), 0);
}

/* A RILL_COMM_TIMEOUT that is not a number of seconds is refused at
 * creation. */
static void test_comm_bad_timeout_is_refused(void **state) {
    (void)state;
    fake f = {.size = 2};
    setenv("RILL_COMM_TIMEOUT", "soon", 1);
    rill_comm *c = NULL;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill__comm_open(&fake_transport, &f, "rill_comm_create_mpi", &c));
    unsetenv("RILL_COMM_TIMEOUT");
    assert_contains(rill_last_error(), "RILL_COMM_TIMEOUT='soon' is not a number of seconds");
    assert_int_equal(atomic_load(&f.released), 1);
}

typedef struct destroyer {
    rill_comm *comm;
    atomic_int returned;
    rill_status status;
} destroyer;

static void *destroy_main(void *arg) {
    destroyer *d = arg;
    d->status = rill__comm_close(d->comm, "rill_comm_destroy");
    atomic_store(&d->returned, 1);
    return NULL;
}

/* rill_mpi.h: "Waits for the communicator's pending collectives, then
 * frees it". The operation under way completes before CLOSE starts, and
 * destroy returns only after both. */
static void test_comm_destroy_waits_for_pending_operations(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4);
    RT_OK(rill_stream_synchronize(s));
    atomic_store(&f.hold, 1);
    RT_OK(allreduce(s, c, x, x, 4));
    destroyer d = {.comm = c};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, destroy_main, &d), 0);
    /* Once the handle is closed, destroy has begun. */
    uint64_t deadline = rt_now_ns() + 10 * SEC_NS;
    int rank;
    while (rill__comm_get(c, "test", &rank, NULL, NULL) == RILL_OK && rt_now_ns() < deadline)
        rt_sleep_us(100);
    assert_int_equal(atomic_load(&d.returned), 0);
    atomic_store(&f.hold, 0);
    pthread_join(th, NULL);
    RT_OK(d.status);
    assert_int_equal(logged(&f), 3);
    assert_int_equal(f.log_kind[2], RILL__COMM_CLOSE);
    assert_int_equal(atomic_load(&f.done_tests), 1); /* before CLOSE logged */
    assert_int_equal(atomic_load(&f.released), 1);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_close(c, "rill_comm_destroy"));
    assert_contains(rill_last_error(), "rill_comm_destroy: the communicator handle is not valid");
}

typedef struct host_call {
    rill_comm *comm;
    atomic_int status;
} host_call;

static void destroy_in_host_function(void *arg) {
    host_call *h = arg;
    atomic_store(&h->status, rill__comm_close(h->comm, "rill_comm_destroy"));
}

/* rill_mpi.h: destroy "Blocks (RILL_ERROR_NOT_PERMITTED from a kernel or
 * host function)". */
static void test_comm_destroy_in_host_function_is_not_permitted(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    host_call h = {.comm = c};
    RT_OK(rill_launch_host_func(s, destroy_in_host_function, &h));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&h.status), RILL_ERROR_NOT_PERMITTED);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* rill_mpi.h: "rill_shutdown destroys the communicators left, waiting for
 * their collectives". */
static void test_comm_shutdown_destroys_communicators_left(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4);
    RT_OK(allreduce(s, c, x, x, 4));
    RT_OK(rill_shutdown());
    assert_int_equal(atomic_load(&f.released), 1);
    assert_int_equal(logged(&f), 3);
    assert_int_equal(f.log_kind[2], RILL__COMM_CLOSE);
    int rank;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_get(c, "rill_comm_rank", &rank, NULL, NULL));
}

/* ------------------------------------------------------------- arguments */

/* rill_mpi.h: each call refuses bad arguments "with
 * RILL_ERROR_INVALID_ARGUMENT and before anything is issued". */
static void test_comm_bad_arguments_are_refused_before_anything_is_issued(void **state) {
    (void)state;
    fake f = {0}, big = {0}, gone = {0};
    rill_comm *c = open_fake(&f, 4), *dead = open_fake(&gone, 2);
    RT_OK(rill__comm_close(dead, "rill_comm_destroy"));
    big.size = 1 << 30;
    rill_comm *huge;
    RT_OK(rill__comm_open(&unlimited_transport, &big, "rill_comm_create_mpi", &huge));
    rill_stream *s = new_stream();
    float *x, *pinned, host[4];
    RT_OK(rill_malloc(NULL, 16, (void **)&x));
    RT_OK(rill_malloc_host(16, (void **)&pinned));
    float *freed;
    RT_OK(rill_malloc(NULL, 16, (void **)&freed));
    RT_OK(rill_free(freed));
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE, .fn = "rill_allreduce_f32"};
    a.recv = x;
    a.send = x;
    a.count = 4;

    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, NULL, &a));
    assert_contains(rill_last_error(), "rill_allreduce_f32: comm is NULL");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, dead, &a));
    assert_contains(rill_last_error(), "the communicator handle is not valid");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, (rill_comm *)host, &a));

    rill__comm_args b = a;
    b.count = (1u << 20) + 1;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "count is 1048577, more than FAKE takes in one call");
    b = a;
    b.reduce = 7;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "op 7 is not a reduction");
    b = a;
    b.recv = NULL;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "recv is NULL");
    b = a;
    b.send = host;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "send");
    assert_contains(rill_last_error(), "is not device memory");
    b = a;
    b.recv = pinned;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "is not device memory");
    b = a;
    b.count = 5;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "covers 20 bytes (count floats), but its allocation has 16");
    b = a;
    b.recv = freed;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "not allocated");
    b = a;
    b.count = 2;
    b.recv = x + 1;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "recv and send overlap without being equal");

    b = a;
    b.kind = RILL__COMM_ALLGATHER;
    b.fn = "rill_allgather";
    b.count = 8; /* 4 ranks: 32 bytes of recv */
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "recv (");
    assert_contains(rill_last_error(), "covers 32 bytes (size * bytes_per_rank)");
    b.count = 2; /* recv: bytes 0 to 8; send: 4 to 6 */
    b.send = (char *)x + 4;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, c, &b));
    assert_contains(rill_last_error(), "recv and send overlap; pass buffers");
    b.count = (size_t)1 << 40;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, huge, &b));
    assert_contains(rill_last_error(), "do not fit in memory");
    b.kind = RILL__COMM_REDUCE_SCATTER;
    b.fn = "rill_reduce_scatter_f32";
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill__comm_issue(s, huge, &b));
    assert_contains(rill_last_error(), "count_per_rank is 1099511627776");

    for (int peer = -1; peer <= 4; peer += 5) {
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, point(s, c, RILL__COMM_BROADCAST, x, 4, peer));
        assert_contains(rill_last_error(), "is not a rank of the communicator, whose ranks are 0 "
                                           "to 3");
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, point(s, c, RILL__COMM_SEND, x, 4, peer));
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, point(s, c, RILL__COMM_RECV, x, 4, peer));
    }
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, point(s, c, RILL__COMM_RECV, NULL, 4, 1));
    assert_contains(rill_last_error(), "buf is NULL");

    /* Checked in a capture too; a valid one becomes a node, which reaches
     * the transport only when a launch runs it. */
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, point(s, c, RILL__COMM_RECV, NULL, 4, 1));
    RT_OK(rill__comm_issue(s, c, &a));
    rill_graph *g = NULL;
    RT_OK(rill_stream_end_capture(s, &g));
    RT_OK(rill_graph_destroy(g));

    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), 1); /* nothing but OPEN reached the transport */
    assert_int_equal(logged(&big), 1);
    RT_OK(rill_free(x));
    RT_OK(rill_free_host(pinned));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    RT_OK(rill__comm_close(huge, "rill_comm_destroy"));
}

/* ---------------------------------------------------------------- graphs */

typedef struct step {
    rill_graph *graph;
    rill_graph_exec *exec;
} step;

/* A step captured on s: y = 4 x (the pretend allreduce of 4 ranks), then
 * x = y + 1. */
static step capture_step(rill_stream *s, rill_comm *c, float *x, float *y, size_t n) {
    step st;
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(allreduce(s, c, y, x, n));
    RT_OK(rill_op_add_scalar_f32(s, x, y, 1.0f, n));
    RT_OK(rill_stream_end_capture(s, &st.graph));
    RT_OK(rill_graph_instantiate(st.graph, &st.exec));
    return st;
}

static void step_destroy(step st) {
    RT_OK(rill_graph_exec_destroy(st.exec));
    RT_OK(rill_graph_destroy(st.graph));
}

/* rill_mpi.h: "Collectives captured from a stream replay with the graph".
 * Each of 40 launches, submitted back to back, issues the operation once,
 * after the work before it in the graph and before the work after it. */
static void test_comm_captured_operation_runs_with_each_launch(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 8), *y = new_floats(s, 8), host[8];
    RT_OK(rill_op_fill_f32(s, x, 0.0f, 8));
    step st = capture_step(s, c, x, y, 8);
    assert_int_equal(logged(&f), 1); /* capturing issued nothing */
    float want = 0;                  /* the same float operations as the device's */
    for (int k = 0; k < 40; k++) {
        RT_OK(rill_graph_launch(st.exec, s));
        want = want * 4.0f + 1.0f;
    }
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_memcpy(host, x, sizeof host));
    for (int i = 0; i < 8; i++)
        assert_true(host[i] == want);
    assert_int_equal(logged(&f), 41);
    for (int k = 1; k < 41; k++) {
        assert_int_equal(f.log_kind[k], RILL__COMM_ALLREDUCE);
        assert_int_equal(f.log_count[k], 8);
    }
    step_destroy(st);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* A launch whose operation is under way holds no worker: launches of
 * other execs on other streams, more than there are workers, all run. */
static void test_comm_captured_operation_under_way_holds_no_worker(void **state) {
    (void)state;
    enum { N = 6 }; /* the tests run with 4 workers */
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s[N], *other = new_stream();
    float *x = new_floats(other, N), *y = new_floats(other, N);
    RT_OK(rill_stream_synchronize(other));
    step st[N];
    atomic_store(&f.hold, 1);
    for (int i = 0; i < N; i++) {
        s[i] = new_stream();
        st[i] = capture_step(s[i], c, x + i, y + i, 1);
        RT_OK(rill_graph_launch(st[i].exec, s[i]));
    }
    atomic_int ran = 0;
    RT_OK(rill_launch_host_func(other, set_flag, &ran));
    RT_OK(rill_stream_synchronize(other));
    assert_int_equal(atomic_load(&ran), 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(rill_stream_query(s[i]), RILL_NOT_READY);
    atomic_store(&f.hold, 0);
    for (int i = 0; i < N; i++) {
        RT_OK(rill_stream_synchronize(s[i]));
        step_destroy(st[i]);
        RT_OK(rill_stream_destroy(s[i]));
    }
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_stream_destroy(other));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* A transport failure inside a launch fails the launch: the stream's
 * sticky error names the graph node and the operation, the nodes after it
 * are skipped, and the communicator is broken for later operations. */
static void test_comm_captured_failure_fails_launch(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4), *y = new_floats(s, 4), host[4];
    RT_OK(rill_op_fill_f32(s, x, 2.0f, 4));
    step st = capture_step(s, c, x, y, 4);
    atomic_store(&f.fail_test, 1);
    RT_OK(rill_graph_launch(st.exec, s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "collective (graph node 0)");
    assert_contains(rill_last_error(),
                    "rill_allreduce_f32 (sum of 4 floats) on rank 0 of 4 failed: injected failure");
    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_memcpy(host, x, sizeof host));
    assert_true(host[0] == 2.0f); /* the node after it was skipped */
    RT_OK(rill_graph_launch(st.exec, s));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "was not started: the communicator failed before");
    RT_OK(rill_stream_clear_error(s));
    assert_int_equal(logged(&f), 2);
    step_destroy(st);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* Operations of a launch and eager ones start in the order of the calls
 * that issued them, whatever order the streams reach them in: the launch's
 * stream is held back by a host function while an eager operation issued
 * after the launch, on a free stream, is ready at once. */
static void test_comm_launch_and_eager_operations_start_in_call_order(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s = new_stream(), *e = new_stream();
    float *x = new_floats(s, 4), *y = new_floats(s, 4), *z = new_floats(s, 64);
    RT_OK(rill_stream_synchronize(s));
    step st = capture_step(s, c, x, y, 4);
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &gate));
    RT_OK(rill_graph_launch(st.exec, s));
    RT_OK(allreduce(e, c, z, z, 64));
    rt_sleep_us(20000);
    assert_int_equal(logged(&f), 1); /* the eager one waits for the launch's */
    rt_gate_open(&gate);
    RT_OK(rill_stream_synchronize(e));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), 3);
    assert_int_equal(f.log_count[1], 4);
    assert_int_equal(f.log_count[2], 64);
    step_destroy(st);
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_free(z));
    RT_OK(rill_stream_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* A graph outlives its communicator: launching it fails, issues nothing,
 * and leaves the stream usable. */
static void test_comm_launch_after_destroy_is_refused(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4), *y = new_floats(s, 4);
    step st = capture_step(s, c, x, y, 4);
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_graph_launch(st.exec, s));
    assert_contains(rill_last_error(), "rill_graph_launch (graph node 0): rill_allreduce_f32, "
                                       "captured in the graph, names a communicator that was "
                                       "destroyed");
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), 2); /* OPEN and CLOSE */
    step_destroy(st);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_stream_destroy(s));
}

/* rill_mpi.h: the buffers "count as declared accesses": the stream
 * sanitizer sees an operation's, eager or in a graph. A fill on another
 * stream of the buffer an allreduce writes, with no order between them,
 * is reported; after rill_stream_wait_stream it is not. In a graph, an
 * operation and a fill captured on two forked streams without an edge
 * between them are a race inside the graph. The pretend transport holds
 * the operations until the racing fill is done, so that the races are the
 * sanitizer's to find, not real ones. */
static void test_comm_sanitizer_sees_operation_buffers(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 4);
    rill_stream *s = new_stream(), *o = new_stream();
    float *x = new_floats(s, 4), *y = new_floats(s, 4);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_sanitizer_enable(1));
    uint64_t before = rill_sanitizer_report_count();
    atomic_store(&f.hold, 1);
    RT_OK(allreduce(s, c, y, x, 4));
    RT_OK(rill_op_fill_f32(o, y, 1.0f, 4));
    RT_OK(rill_stream_synchronize(o));
    atomic_store(&f.hold, 0);
    RT_OK(rill_device_synchronize(NULL));
    assert_int_equal(rill_sanitizer_report_count(), before + 1);
    RT_OK(allreduce(s, c, y, x, 4));
    RT_OK(rill_stream_wait_stream(o, s));
    RT_OK(rill_op_fill_f32(o, y, 1.0f, 4));
    RT_OK(rill_device_synchronize(NULL));
    assert_int_equal(rill_sanitizer_report_count(), before + 1);

    rill_event *fork, *join;
    RT_OK(rill_event_create(0, &fork));
    RT_OK(rill_event_create(0, &join));
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_OK(rill_event_record(fork, s));
    RT_OK(rill_stream_wait_event(o, fork));
    RT_OK(allreduce(s, c, y, x, 4));
    RT_OK(rill_op_fill_f32(o, y, 2.0f, 4));
    atomic_int filled = 0;
    RT_OK(rill_launch_host_func(o, set_flag, &filled));
    RT_OK(rill_event_record(join, o));
    RT_OK(rill_stream_wait_event(s, join));
    rill_graph *g;
    rill_graph_exec *e;
    RT_OK(rill_stream_end_capture(s, &g));
    RT_OK(rill_graph_instantiate(g, &e));
    atomic_store(&f.hold, 1);
    RT_OK(rill_graph_launch(e, s));
    assert_true(wait_for(&filled, 1));
    atomic_store(&f.hold, 0);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(rill_sanitizer_report_count(), before + 2);
    RT_OK(rill_sanitizer_enable(0));
    RT_OK(rill_graph_exec_destroy(e));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_event_destroy(fork));
    RT_OK(rill_event_destroy(join));
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_stream_destroy(o));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* A trace shows each operation as a slice on the communication track,
 * from its start to its completion, with an arrow to the wait of the
 * stream that issued it. */
static void test_comm_operations_are_traced(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    RT_OK(rill_stream_set_name(s, "compute"));
    float *x = new_floats(s, 256);
    RT_OK(rill_stream_synchronize(s));
    char path[256];
    rt_trace_path(path, sizeof path, "comm");
    RT_OK(rill_trace_start(path));
    RT_OK(allreduce(s, c, x, x, 256));
    RT_OK(point(s, c, RILL__COMM_BROADCAST, x, 64, 1));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_stop());
    rt_check_trace(path, "track=stream rill:communication",
                   "slice=stream rill:communication|allreduce sum|bytes=1024",
                   "slice=stream rill:communication|broadcast|bytes=64",
                   "flow=stream rill:communication|stream compute", NULL);
    unlink(path);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* Out of memory at every allocation in turn while issuing: the call fails
 * with RILL_ERROR_OUT_OF_MEMORY and a sentence, nothing reaches the
 * transport and the stream goes on; or it succeeds and runs. */
static void test_comm_out_of_memory_while_issuing_changes_nothing(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 2);
    rill_stream *s = new_stream();
    float *x = new_floats(s, 4);
    RT_OK(rill_stream_synchronize(s));
    int completed = 0, failed = 0;
    for (long k = 1; k < 40 && completed < 3; k++) {
        int before = logged(&f);
        rill__alloc_fail_after(k);
        rill_status st = allreduce(s, c, x, x, 4);
        rill__alloc_fail_after(0);
        if (st == RILL_OK) {
            RT_OK(rill_stream_synchronize(s));
            assert_int_equal(logged(&f), before + 1);
            completed++;
            continue;
        }
        failed++;
        assert_int_equal(st, RILL_ERROR_OUT_OF_MEMORY);
        assert_contains(rill_last_error(), "rill_allreduce_f32: out of");
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(logged(&f), before);
    }
    assert_int_equal(completed, 3);
    assert_true(failed > 0);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* The rank and size of a communicator are those its transport reported. */
static void test_comm_rank_and_size_come_from_transport(void **state) {
    (void)state;
    fake f = {0};
    rill_comm *c = open_fake(&f, 3);
    int rank = -1, size = -1;
    RT_OK(rill__comm_get(c, "rill_comm_size", &rank, &size, NULL));
    assert_int_equal(rank, 0);
    assert_int_equal(size, 3);
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* ------------------------------------------------- a CUDA device's memory
 *
 * With the stand-in CUDA driver (unit_test_comm_cuda_memory; skipped where
 * rill lists no CUDA device). The stand-in's device memory is host memory,
 * so the pretend transport can read it when it takes it as it is (a
 * CUDA-aware MPI); rill itself only ever copies it on the stream. */

/* cuda:0 and a stream of it, or the test is skipped. */
static rill_stream *cuda_stream_or_skip(void) {
    int count = 0;
    RT_OK(rill_device_count_of_kind(RILL_DEVICE_CUDA, &count, NULL, 0));
    if (count == 0)
        skip();
    rill_device *gpu;
    rill_stream *s;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &gpu));
    RT_OK(rill_stream_create(gpu, 0, &s));
    return s;
}

static rill_comm *open_cuda_fake(fake *f, int size, bool cuda_aware) {
    f->cuda_aware = cuda_aware;
    rill_comm *c = open_fake(f, size);
    int aware = -1;
    RT_OK(rill__comm_get(c, "rill_comm_cuda_aware", NULL, NULL, &aware));
    assert_int_equal(aware, cuda_aware);
    return c;
}

/* n floats of s's device, holding v(i) (copied from the host on s). */
static float *cuda_floats(rill_stream *s, size_t n, float (*v)(size_t)) {
    float *p = new_floats(s, n), *host = malloc(n * sizeof *host);
    assert_non_null(host);
    for (size_t i = 0; i < n; i++)
        host[i] = v != NULL ? v(i) : -1.0f;
    RT_OK(rill_memcpy_async(p, host, n * sizeof *host, s));
    RT_OK(rill_stream_synchronize(s)); /* the copy may read host until then */
    free(host);
    return p;
}

static float ramp(size_t i) {
    return (float)i + 1.0f;
}

/* Reads n floats of device memory back (rill_memcpy, after the stream). */
static void read_back(float *host, const float *dev, size_t n) {
    RT_OK(rill_memcpy(host, dev, n * sizeof *host));
}

/* The memory the transport was handed for operation k (log entry) is
 * device memory p itself (direct) or other memory (staged). */
static void assert_handed(const fake *f, int k, const void *p, bool direct) {
    if (direct)
        assert_ptr_equal(f->log_recv[k], p);
    else
        assert_ptr_not_equal(f->log_recv[k], p);
}

/* Every operation on a CUDA device's memory, staged through page-locked
 * host memory (cuda_aware false) or handed to the transport as it is, in
 * place and not, an average, and 0 bytes: the results that the stream
 * copies back equal the pretend world's (3 ranks). */
static void run_every_kind_on_cuda(bool cuda_aware) {
    enum { N = 1000, R = 3 };
    fake f = {0};
    rill_stream *s = cuda_stream_or_skip();
    rill_comm *c = open_cuda_fake(&f, R, cuda_aware);
    float *x = cuda_floats(s, N * R, ramp), *y = cuda_floats(s, N * R, NULL);
    float *z = cuda_floats(s, N, ramp), *host = malloc(N * R * sizeof *host);
    unsigned char *b = (unsigned char *)cuda_floats(s, N, NULL), bytes[N];
    assert_non_null(host);
    int k = logged(&f);
    /* allreduce, sum, into y */
    RT_OK(allreduce(s, c, y, x, N));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), k + 1);
    assert_handed(&f, k, y, cuda_aware);
    read_back(host, y, N);
    for (size_t i = 0; i < N; i++)
        assert_true(host[i] == R * ramp(i));
    /* allreduce, average, in place: the sum divided by the ranks */
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE, .fn = "rill_allreduce_f32"};
    a.recv = z;
    a.send = z;
    a.count = N;
    a.reduce = RILL__REDUCE_AVG;
    RT_OK(rill__comm_issue(s, c, &a));
    /* reduce-scatter, sum: rank 0 keeps block 0 */
    a = (rill__comm_args){.kind = RILL__COMM_REDUCE_SCATTER, .fn = "rill_reduce_scatter_f32"};
    a.recv = y + N;
    a.send = x;
    a.count = N / 2;
    a.reduce = RILL__REDUCE_SUM;
    RT_OK(rill__comm_issue(s, c, &a));
    /* allgather: R copies of x's first 100 floats into y */
    a = (rill__comm_args){.kind = RILL__COMM_ALLGATHER, .fn = "rill_allgather"};
    a.recv = y;
    a.send = x;
    a.count = 100 * sizeof(float);
    RT_OK(rill__comm_issue(s, c, &a));
    /* a broadcast from rank 1 writes b; one from rank 0 (this one) keeps it */
    RT_OK(point(s, c, RILL__COMM_BROADCAST, b, N, 1));
    RT_OK(point(s, c, RILL__COMM_BROADCAST, b, N, 0));
    /* a send of x's bytes, then their receive into y + 2N */
    RT_OK(point(s, c, RILL__COMM_SEND, x, 400, 0));
    RT_OK(point(s, c, RILL__COMM_RECV, y + 2 * N, 400, 0));
    /* 0 bytes: nothing to move, in order all the same */
    RT_OK(allreduce(s, c, y, x, 0));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), k + 9);
    read_back(host, z, N);
    for (size_t i = 0; i < N; i++)
        assert_true(host[i] == ramp(i));
    read_back(host, y, N * R);
    for (size_t i = 0; i < 100 * R; i++)
        assert_true(host[i] == ramp(i % 100));
    for (size_t i = 0; i < N / 2; i++)
        assert_true(host[N + i] == R * ramp(i));
    for (size_t i = 0; i < 100; i++)
        assert_true(host[2 * N + i] == ramp(i));
    RT_OK(rill_memcpy(bytes, b, N));
    for (size_t i = 0; i < N; i++)
        assert_int_equal(bytes[i], (unsigned char)(0xb0 + i));
    for (int i = 1; i < 8; i++)
        assert_handed(&f, k + i,
                      f.log_kind[k + i] == RILL__COMM_ALLREDUCE        ? (void *)z
                      : f.log_kind[k + i] == RILL__COMM_REDUCE_SCATTER ? (void *)(y + N)
                      : f.log_kind[k + i] == RILL__COMM_ALLGATHER      ? (void *)y
                      : f.log_kind[k + i] == RILL__COMM_RECV           ? (void *)(y + 2 * N)
                      : f.log_kind[k + i] == RILL__COMM_SEND           ? (void *)x
                                                                       : (void *)b,
                      cuda_aware);
    free(host);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_free_async(z, s));
    RT_OK(rill_free_async(b, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* rill_mpi.h: on a CUDA device's memory, "otherwise the stream copies the
 * bytes into page-locked host memory, MPI works there, and the stream
 * copies the result back". */
static void test_comm_cuda_staged_operations_give_their_results(void **state) {
    (void)state;
    run_every_kind_on_cuda(false);
}

/* rill_mpi.h: "a communicator whose MPI is CUDA-aware hands the device's
 * pointers to MPI as they are ... and an average is divided on the device
 * after it, on the stream". */
static void test_comm_cuda_direct_operations_give_their_results(void **state) {
    (void)state;
    run_every_kind_on_cuda(true);
}

/* rill_mpi.h: "it all runs in stream order, none of it waits on the
 * calling thread". A gate (a host function) holds the stream: the
 * allreduce's call returns at once and the transport starts nothing; once
 * the gate opens, the operation runs after the copy before it, and the
 * copy after it waits for it (the transport holds it a while). */
static void run_in_stream_order_on_cuda(bool cuda_aware) {
    enum { N = 256 };
    fake f = {0};
    rill_stream *s = cuda_stream_or_skip();
    rill_comm *c = open_cuda_fake(&f, 4, cuda_aware);
    float *x = cuda_floats(s, N, NULL), *in, *out;
    RT_OK(rill_malloc_host(N * sizeof *in, (void **)&in));
    RT_OK(rill_malloc_host(N * sizeof *out, (void **)&out));
    for (size_t i = 0; i < N; i++) {
        in[i] = ramp(i);
        out[i] = -1.0f;
    }
    rt_gate g;
    rt_gate_reset(&g);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    RT_OK(rill_memcpy_async(x, in, N * sizeof *in, s));
    int k = logged(&f);
    uint64_t t0 = rt_now_ns();
    RT_OK(allreduce(s, c, x, x, N));
    uint64_t took = rt_now_ns() - t0;
    RT_OK(rill_memcpy_async(out, x, N * sizeof *out, s));
    assert_true(rt_gate_wait_entered(&g));
    assert_true(took < SEC_NS); /* the gate holds it for up to 10 s */
    rt_sleep_us(20000);
    assert_int_equal(logged(&f), k); /* not started: the stream has not reached it */
    assert_int_equal(rill_stream_query(s), RILL_NOT_READY);
    atomic_store(&f.hold, 1);
    rt_gate_open(&g);
    assert_true(wait_for(&f.nlog, k + 1));
    rt_sleep_us(20000);
    assert_true(out[0] == -1.0f); /* the copy after it has not run */
    assert_int_equal(rill_stream_query(s), RILL_NOT_READY);
    atomic_store(&f.hold, 0);
    RT_OK(rill_stream_synchronize(s));
    for (size_t i = 0; i < N; i++)
        assert_true(out[i] == 4.0f * ramp(i));
    RT_OK(rill_free_host(in));
    RT_OK(rill_free_host(out));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

static void test_comm_cuda_staged_operation_keeps_stream_order_without_blocking(void **state) {
    (void)state;
    run_in_stream_order_on_cuda(false);
}

static void test_comm_cuda_direct_operation_keeps_stream_order_without_blocking(void **state) {
    (void)state;
    run_in_stream_order_on_cuda(true);
}

/* stage.h: a staging buffer is "reused only once both are let go". An
 * operation that failed while the transport still holds its buffer (as
 * after a timeout) fails its stream at once, and its staging buffer goes
 * to no other operation, of this communicator or another, until the
 * transport lets go of it; then it is reused. */
static void test_comm_cuda_staging_memory_is_not_reused_while_held(void **state) {
    (void)state;
    enum { N = 1024 };
    fake f = {0}, g = {0};
    rill_stream *s = cuda_stream_or_skip();
    rill_comm *c = open_cuda_fake(&f, 2, false), *c2 = open_cuda_fake(&g, 2, false);
    float *x = cuda_floats(s, N, ramp), host[N];
    atomic_store(&f.fail_held, 1);
    RT_OK(allreduce(s, c, x, x, N));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_contains(rill_last_error(), "failed: injected failure that keeps the buffers");
    RT_OK(rill_stream_clear_error(s));
    read_back(host, x, N); /* the copy back was skipped with the stream's work */
    for (size_t i = 0; i < N; i++)
        assert_true(host[i] == ramp(i));
    void *held = f.log_recv[1];
    for (int i = 0; i < 3; i++) {
        int k = logged(&g);
        RT_OK(allreduce(s, c2, x, x, N));
        RT_OK(rill_stream_synchronize(s));
        assert_ptr_not_equal(g.log_recv[k], held);
    }
    let_go_of_failed(&f);
    bool reused = false;
    for (int i = 0; i < 100 && !reused; i++) {
        int k = logged(&g);
        RT_OK(allreduce(s, c2, x, x, N));
        RT_OK(rill_stream_synchronize(s));
        reused = g.log_recv[k] == held;
        if (!reused)
            rt_sleep_us(2000);
    }
    assert_true(reused);
    read_back(host, x, N);
    for (size_t i = 0; i < N; i++)
        assert_true(host[i] == 16.0f * ramp(i)); /* 2^4 after four sums of 2 ranks */
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    RT_OK(rill__comm_close(c2, "rill_comm_destroy"));
}

/* Each refusal says what to do, and nothing is issued: memory of another
 * device than the stream's (either way round), host memory on a CUDA
 * stream, and a staged collective on a capturing stream. */
static void test_comm_cuda_unsupported_uses_are_refused_with_advice(void **state) {
    (void)state;
    fake f = {0};
    rill_stream *s = cuda_stream_or_skip();
    rill_comm *c = open_cuda_fake(&f, 2, false);
    rill_device *cpu;
    rill_stream *cpu_s;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    RT_OK(rill_stream_create(cpu, 0, &cpu_s));
    float *gx = cuda_floats(s, 64, ramp), *cx = new_floats(cpu_s, 64), plain[64];
    RT_OK(rill_stream_synchronize(cpu_s));
    int before = logged(&f);
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, allreduce(s, c, cx, cx, 64));
    assert_contains(rill_last_error(), "pass memory of the stream's device");
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, allreduce(cpu_s, c, gx, gx, 64));
    assert_contains(rill_last_error(), "pass memory of the stream's device");
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, allreduce(s, c, plain, plain, 64));
    assert_contains(rill_last_error(), "is not device memory; pass memory from rill_malloc");
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, allreduce(s, c, gx, gx, 64));
    assert_contains(rill_last_error(), "rill_allreduce_f32: the stream is capturing a graph");
    assert_contains(rill_last_error(), "issue the collective outside the capture");
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(s, &graph));
    size_t nodes = 1;
    RT_OK(rill_graph_node_count(graph, &nodes));
    assert_int_equal(nodes, 0);
    RT_OK(rill_graph_destroy(graph));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), before);
    RT_OK(rill_free_async(gx, s));
    RT_OK(rill_free_async(cx, cpu_s));
    RT_OK(rill_stream_destroy(cpu_s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* A CUDA-aware communicator's collective captured on a CUDA stream runs
 * with each launch, its average divided on the device after it. */
static void test_comm_cuda_direct_operation_is_captured(void **state) {
    (void)state;
    enum { N = 64 };
    fake f = {0};
    rill_stream *s = cuda_stream_or_skip();
    rill_comm *c = open_cuda_fake(&f, 4, true);
    float *x = cuda_floats(s, N, ramp), host[N];
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_THREAD_LOCAL));
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE, .fn = "rill_allreduce_f32"};
    a.recv = x;
    a.send = x;
    a.count = N;
    a.reduce = RILL__REDUCE_AVG;
    RT_OK(rill__comm_issue(s, c, &a));
    RT_OK(rill_op_add_scalar_f32(s, x, x, 1.0f, N));
    rill_graph *graph;
    rill_graph_exec *exec;
    RT_OK(rill_stream_end_capture(s, &graph));
    RT_OK(rill_graph_instantiate(graph, &exec));
    int k = logged(&f);
    for (int i = 0; i < 3; i++)
        RT_OK(rill_graph_launch(exec, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(logged(&f), k + 3);
    read_back(host, x, N);
    for (size_t i = 0; i < N; i++)
        assert_true(host[i] == ramp(i) + 3.0f);
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(graph));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

/* Out of memory at each allocation of a staged issue: the call fails with
 * the status, or succeeds; one that failed after its WAIT was queued fails
 * its stream and breaks the communicator with a sentence that says so,
 * and nothing reaches the transport for it either way. Under ASan, every
 * path frees what it took. */
static void test_comm_cuda_out_of_memory_while_staging(void **state) {
    (void)state;
    enum { N = 64 };
    fake f = {0};
    rill_stream *s = cuda_stream_or_skip();
    rill_comm *c = open_cuda_fake(&f, 2, false);
    float *x = cuda_floats(s, N, ramp);
    int completed = 0, failed = 0;
    for (long k = 1; k < 60 && completed < 3; k++) {
        int before = logged(&f);
        rill__alloc_fail_after(k);
        rill_status st = allreduce(s, c, x, x, N);
        rill__alloc_fail_after(0);
        if (st == RILL_OK) {
            RT_OK(rill_stream_synchronize(s));
            assert_int_equal(logged(&f), before + 1);
            completed++;
            continue;
        }
        failed++;
        assert_int_equal(st, RILL_ERROR_OUT_OF_MEMORY);
        assert_contains(rill_last_error(), "rill_allreduce_f32: ");
        bool broke = strstr(rill_last_error(), "can no longer be used") != NULL;
        rill_status sync = rill_stream_synchronize(s);
        assert_int_equal(logged(&f), before);
        if (broke) {
            /* Its sentence is not checked: the communication thread may
             * fail it while allocations still fail (on every thread), and
             * a failure without memory for its window reopens an earlier
             * window of the proxy stream, with that one's sentence. */
            assert_int_equal(sync, RILL_ERROR_KERNEL_FAILED);
            RT_OK(rill_stream_clear_error(s));
            RT_OK(rill__comm_close(c, "rill_comm_destroy"));
            c = open_cuda_fake(&f, 2, false);
        } else {
            RT_OK(sync);
        }
    }
    assert_int_equal(completed, 3);
    assert_true(failed > 0);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill__comm_close(c, "rill_comm_destroy"));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_operation_runs_between_earlier_and_later_work),
        cmocka_unit_test(test_comm_event_after_operation_orders_other_stream),
        cmocka_unit_test(test_comm_operations_start_in_issue_order),
        cmocka_unit_test(test_comm_pending_operations_hold_no_worker),
        cmocka_unit_test(test_comm_back_to_back_operations_start_while_workers_are_busy),
        cmocka_unit_test(test_comm_operations_complete_while_every_unit_is_busy),
        cmocka_unit_test(test_comm_empty_operation_is_still_issued_in_order),
        cmocka_unit_test(test_comm_receive_completes_with_later_send),
        cmocka_unit_test(test_comm_transport_failure_is_sticky_and_breaks_communicator),
        cmocka_unit_test(test_comm_operation_behind_a_failed_one_is_skipped),
        cmocka_unit_test(test_comm_start_failure_is_sticky),
        cmocka_unit_test(test_comm_skipped_operation_breaks_communicator),
        cmocka_unit_test(test_comm_timeout_fails_stream_and_keeps_memory),
        cmocka_unit_test(test_comm_buffers_of_operations_in_flight_are_kept),
        cmocka_unit_test(test_comm_timed_out_receive_is_cancelled),
        cmocka_unit_test(test_comm_destroy_racing_with_calls_is_safe),
        cmocka_unit_test(test_comm_failure_that_keeps_buffers_keeps_memory),
        cmocka_unit_test(test_comm_create_failure_releases_transport_state),
        cmocka_unit_test(test_comm_create_times_out),
        cmocka_unit_test(test_comm_bad_timeout_is_refused),
        cmocka_unit_test(test_comm_destroy_waits_for_pending_operations),
        cmocka_unit_test(test_comm_destroy_in_host_function_is_not_permitted),
        cmocka_unit_test(test_comm_shutdown_destroys_communicators_left),
        cmocka_unit_test(test_comm_captured_operation_runs_with_each_launch),
        cmocka_unit_test(test_comm_captured_operation_under_way_holds_no_worker),
        cmocka_unit_test(test_comm_captured_failure_fails_launch),
        cmocka_unit_test(test_comm_launch_and_eager_operations_start_in_call_order),
        cmocka_unit_test(test_comm_launch_after_destroy_is_refused),
        cmocka_unit_test(test_comm_sanitizer_sees_operation_buffers),
        cmocka_unit_test(test_comm_operations_are_traced),
        cmocka_unit_test(test_comm_bad_arguments_are_refused_before_anything_is_issued),
        cmocka_unit_test(test_comm_out_of_memory_while_issuing_changes_nothing),
        cmocka_unit_test(test_comm_rank_and_size_come_from_transport),
        cmocka_unit_test(test_comm_cuda_staged_operations_give_their_results),
        cmocka_unit_test(test_comm_cuda_direct_operations_give_their_results),
        cmocka_unit_test(test_comm_cuda_staged_operation_keeps_stream_order_without_blocking),
        cmocka_unit_test(test_comm_cuda_direct_operation_keeps_stream_order_without_blocking),
        cmocka_unit_test(test_comm_cuda_staging_memory_is_not_reused_while_held),
        cmocka_unit_test(test_comm_cuda_unsupported_uses_are_refused_with_advice),
        cmocka_unit_test(test_comm_cuda_direct_operation_is_captured),
        cmocka_unit_test(test_comm_cuda_out_of_memory_while_staging),
    };
    return RT_RUN(tests);
}
