/* SPDX-License-Identifier: MIT */
/* The pool at its limit when the only block that fits was freed behind a
 * host function that the test releases only after the call returned:
 * rill_malloc_async, allocation inside a capture and the ops that allocate
 * in stream order never wait on the host, and fail at once with
 * RILL_ERROR_OUT_OF_MEMORY, leaving everything submitted as it was;
 * rill_malloc waits for the free, as documented. A call that waits would
 * wait for the test itself: a watchdog opens the gate once WATCHDOG_NS
 * passed without the call returning, so that the test fails instead of
 * hanging. */
#include "backend/cpu/cpu.h"
#include "core/stream.h"
#include "fixture.h"
#include "mem/memory.h"
#include "util/alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MiB         ((size_t)1 << 20)
#define KiB         ((size_t)1 << 10)
#define WATCHDOG_NS 3000000000ull

/* ---- the watchdog ---- */

typedef struct watchdog {
    rt_gate *g;
    uint64_t after_ns;   /* opens the gate this long after the start */
    atomic_int returned; /* set by the test once its call returned */
    atomic_int fired;    /* set by the watchdog when it had to open the gate */
    pthread_t thread;
} watchdog;

static void *watch(void *arg) {
    watchdog *w = arg;
    uint64_t deadline = rt_now_ns() + w->after_ns;
    while (!atomic_load(&w->returned)) {
        if (rt_now_ns() > deadline) {
            atomic_store(&w->fired, 1);
            rt_gate_open(w->g);
            return NULL;
        }
        rt_sleep_us(200);
    }
    return NULL;
}

static void watch_start(watchdog *w, rt_gate *g, uint64_t after_ns) {
    w->g = g;
    w->after_ns = after_ns;
    atomic_init(&w->returned, 0);
    atomic_init(&w->fired, 0);
    assert_int_equal(pthread_create(&w->thread, NULL, watch, w), 0);
}

/* Ends the watch after the call returned; fails the test when the call
 * returned only because the watchdog opened the gate. */
static void watch_end(watchdog *w, const char *call) {
    atomic_store(&w->returned, 1);
    assert_int_equal(pthread_join(w->thread, NULL), 0);
    if (atomic_load(&w->fired))
        fail_msg("%s waited on the host for a pending free that the calling thread releases "
                 "only after the call returns (a deadlock: the watchdog opened the gate after "
                 "%llu s)",
                 call, WATCHDOG_NS / 1000000000ull);
}

/* ---- a free behind a host function, at the limit ---- */

/* A kernel that reads a buffer (declared access) and sums it into *out. */
typedef struct sum_args {
    const float *in;
    size_t n;
    float *out;
} sum_args;

static void sum_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    sum_args a;
    memcpy(&a, args, sizeof a);
    float s = 0.0f;
    for (size_t i = 0; i < a.n; i++)
        s += a.in[i];
    *a.out = s;
}

/* x (1 MiB, allocated on a) is read on b behind a host function that
 * holds b until the test opens g, and freed on b; in (1 MiB on a) and out
 * (16 KiB on b) stay live. The limit is what the pool reserved, which is
 * exactly its blocks: the pool cannot grow, and the only free block that
 * fits 1 MiB is x. */
typedef struct held {
    rill_stream *a, *b;
    float *x, *in, *out;
    size_t n;
    rt_gate g;
    rill_kernel *k;
} held;

static void hold_behind_host_function(held *h) {
    RT_OK(rill_shutdown()); /* a fresh pool */
    memset(h, 0, sizeof *h);
    h->n = MiB / sizeof(float);
    RT_OK(rill_stream_create(NULL, 0, &h->a));
    RT_OK(rill_stream_create(NULL, 0, &h->b));
    RT_OK(rill_stream_set_name(h->b, "holder"));
    RT_OK(rill_malloc_async(16 * KiB, h->b, (void **)&h->out));
    RT_OK(rill_malloc_async(MiB, h->a, (void **)&h->in));
    RT_OK(rill_malloc_async(MiB, h->a, (void **)&h->x));
    RT_OK(rill_op_fill_f32(h->a, h->x, 1.0f, h->n));
    RT_OK(rill_op_fill_f32(h->a, h->in, 2.0f, h->n));
    RT_OK(rill_stream_wait_stream(h->b, h->a));
    RT_OK(rill_launch_host_func(h->b, rt_gate_fn, &h->g));
    rill_kernel_desc d = {.name = "read_sum", .cpu = sum_kernel};
    RT_OK(rill_kernel_create(&d, &h->k));
    sum_args args = {h->x, h->n, h->out};
    rill_access acc[2] = {{h->x, MiB, RILL_READ}, {h->out, sizeof(float), RILL_WRITE}};
    rill_launch l = {.grid = {1, 1, 1},
                     .block = {1, 1, 1},
                     .args = &args,
                     .args_size = sizeof args,
                     .accesses = acc,
                     .num_accesses = 2};
    RT_OK(rill_launch_kernel(h->b, h->k, &l));
    RT_OK(rill_free_async(h->x, h->b));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.reserved_bytes, st.allocated_bytes + MiB); /* no room but x */
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes));
}

/* Opens the gate: the work submitted before the failed calls all runs,
 * the read of x included, and x is then free for anyone. */
static void release(held *h) {
    rt_gate_open(&h->g);
    RT_OK(rill_stream_synchronize(h->b));
    RT_OK(rill_stream_synchronize(h->a));
    assert_int_equal(atomic_load(&h->g.timed_out), 0);
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, h->out, sizeof host));
    assert_true(host == (float)h->n);
    void *y;
    RT_OK(rill_malloc_async(MiB, h->a, &y)); /* within the limit, now that the read is done */
    assert_ptr_equal(y, h->x);
    RT_OK(rill_free_async(y, h->a));
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_free_async(h->in, h->a));
    RT_OK(rill_free_async(h->out, h->b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_kernel_destroy(h->k));
    RT_OK(rill_stream_destroy(h->b));
    RT_OK(rill_stream_destroy(h->a));
}

static uint64_t submitted(rill_stream *handle) {
    rill__stream *s;
    RT_OK(rill__stream_resolve(handle, "submitted", &s));
    return atomic_load(&s->q.sub_seq);
}

/* The out-of-memory sentence names the limit, what is in use, what is
 * pending and where, and what to do. */
static void check_sentence(const char *fn) {
    const char *e = rill_last_error();
    print_message("%s\n", e);
    assert_true(strncmp(e, fn, strlen(fn)) == 0);
    char limit[64], in_use[64];
    snprintf(limit, sizeof limit, "limit of %zu bytes", 16 * KiB + 2 * MiB);
    snprintf(in_use, sizeof in_use, "%zu bytes in use", 16 * KiB + MiB);
    assert_non_null(strstr(e, limit));
    assert_non_null(strstr(e, in_use));
    assert_non_null(strstr(e, "1048576 bytes freed"));
    assert_non_null(strstr(e, "stream 'holder'"));
    assert_non_null(strstr(e, "host function"));
    assert_non_null(strstr(e, "rill_malloc"));
    assert_non_null(strstr(e, "rill_mem_set_limit"));
}

/* "rill_malloc_async ... never waits on the host: it hands out a block
 * that stream order allows (with internal waits where the reuse policy
 * allows them) or fails at once with RILL_ERROR_OUT_OF_MEMORY": under
 * either reuse policy, the block that a host function holds is neither
 * waited for on the host nor handed out, and nothing already submitted
 * changes. */
static void test_pool_malloc_async_at_limit_fails_at_once_behind_host_function(void **state) {
    (void)state;
    const unsigned policies[2] = {RILL_MEM_REUSE_INTERNAL_WAITS, 0};
    for (int i = 0; i < 2; i++) {
        held h;
        hold_behind_host_function(&h);
        RT_OK(rill_mem_set_reuse_policy(NULL, policies[i]));
        rill_mem_stats before, after;
        RT_OK(rill_mem_get_stats(NULL, &before));
        uint64_t seq_a = submitted(h.a), seq_b = submitted(h.b);
        watchdog w;
        watch_start(&w, &h.g, WATCHDOG_NS);
        void *y = (void *)1;
        rill_status st = rill_malloc_async(MiB, h.a, &y);
        watch_end(&w, "rill_malloc_async");
        RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, st);
        assert_null(y);
        check_sentence("rill_malloc_async");
        assert_int_equal(atomic_load(&h.g.done), 0); /* the host function still holds b */
        RT_OK(rill_mem_get_stats(NULL, &after));
        assert_int_equal(after.allocated_bytes, before.allocated_bytes);
        assert_int_equal(after.reserved_bytes, before.reserved_bytes);
        assert_int_equal(submitted(h.a), seq_a); /* no wait was queued */
        assert_int_equal(submitted(h.b), seq_b);
        release(&h);
        RT_OK(rill_mem_set_reuse_policy(NULL, RILL_MEM_REUSE_INTERNAL_WAITS));
    }
}

/* "Memory that rill_malloc_async allocates on a capturing stream belongs
 * to the graph" and is allocated as rill_malloc_async allocates: at the
 * limit, behind a host function, the call fails at once, and the capture
 * goes on. */
static void test_pool_capture_malloc_at_limit_fails_at_once_behind_host_function(void **state) {
    (void)state;
    held h;
    hold_behind_host_function(&h);
    rill_stream *c;
    RT_OK(rill_stream_create(NULL, 0, &c));
    RT_OK(rill_stream_begin_capture(c, RILL_CAPTURE_THREAD_LOCAL));
    watchdog w;
    watch_start(&w, &h.g, WATCHDOG_NS);
    void *y = (void *)1;
    rill_status st = rill_malloc_async(MiB, c, &y);
    watch_end(&w, "rill_malloc_async in a capture");
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, st);
    assert_null(y);
    check_sentence("rill_malloc_async");
    assert_int_equal(atomic_load(&h.g.done), 0);
    rill_capture_status cs;
    RT_OK(rill_stream_get_capture_status(c, &cs));
    assert_int_equal(cs, RILL_CAPTURE_ACTIVE); /* the capture goes on */
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(c, &graph));
    RT_OK(rill_graph_destroy(graph));
    release(&h);
    RT_OK(rill_stream_destroy(c));
}

/* The ops that allocate in stream order (scratch memory, *_new outputs)
 * fail as rill_malloc_async does, before they submit anything: "On any
 * failure *out is NULL and nothing stays allocated." */
static void test_pool_ops_at_limit_fail_before_submitting_behind_host_function(void **state) {
    (void)state;
    held h;
    hold_behind_host_function(&h);
    float *out2 = NULL;
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_malloc_async(16 * KiB, h.a, (void **)&out2));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes));
    assert_int_equal(st.reserved_bytes, st.allocated_bytes + MiB);
    uint64_t seq = submitted(h.a);
    watchdog w;
    watch_start(&w, &h.g, WATCHDOG_NS);
    float *o = (float *)1;
    rill_status st_new = rill_op_add_scalar_f32_new(h.a, h.in, 1.0f, h.n, NULL, &o);
    rill_status st_sum = rill_op_sum_f32(h.a, out2, h.in, h.n);
    rill_status st_conv = rill_op_conv2d_f32(h.a, out2, h.in, h.in, 1, 1, 64, 64, 1, 3, 3);
    watch_end(&w, "an op that allocates in stream order");
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, st_new);
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, st_sum);
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, st_conv);
    assert_null(o);
    assert_int_equal(submitted(h.a), seq); /* nothing half-submitted */
    rill_mem_stats after;
    RT_OK(rill_mem_get_stats(NULL, &after));
    assert_int_equal(after.allocated_bytes, st.allocated_bytes);
    RT_OK(rill_free_async(out2, h.a));
    release(&h);
}

/* "rill_malloc returns memory that any stream may use at once ... When
 * the pool can only serve it by reusing such a block (the limit is
 * reached or the device is full), it waits on the host for the pending
 * frees": behind a host function that another thread releases, it
 * returns x once that function and the read after it are done. */
static void test_pool_malloc_at_limit_waits_for_free_behind_host_function(void **state) {
    (void)state;
    held h;
    hold_behind_host_function(&h);
    watchdog w; /* here the thread that releases b: rill_malloc waits for it */
    watch_start(&w, &h.g, 50000000ull); /* 50 ms */
    void *y = NULL;
    rill_status st = rill_malloc(NULL, MiB, &y);
    atomic_store(&w.returned, 1);
    assert_int_equal(pthread_join(w.thread, NULL), 0);
    RT_OK(st);
    assert_int_equal(atomic_load(&w.fired), 1);
    assert_ptr_equal(y, h.x);
    assert_int_equal(atomic_load(&h.g.done), 1); /* the host function had returned */
    RT_OK(rill_stream_synchronize(h.b));
    RT_OK(rill_op_fill_f32(NULL, y, 7.0f, h.n));
    RT_OK(rill_stream_synchronize(NULL));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, h.out, sizeof host));
    assert_true(host == (float)h.n); /* the read saw x, not the fill */
    RT_OK(rill_free(y));
    release(&h);
}

static void nop_host_fn(void *user_data) {
    (void)user_data;
}

/* "rill_malloc_async ... fails at once with RILL_ERROR_OUT_OF_MEMORY ...
 * and nothing already submitted changes", also when the internal wait that
 * a reuse needs cannot be queued (internal allocations failing in turn;
 * c has filled its first block of commands): the block goes back with
 * the use it was to wait for, instead of a wait on the host for a kernel
 * that the test releases only later, and the allocation that succeeds
 * still comes after b's read. */
static void test_pool_malloc_async_gives_back_a_block_whose_wait_fails(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    rill_stream *a, *b, *c;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    RT_OK(rill_stream_create(NULL, 0, &c));
    for (int i = 0; i < CPU_BLOCK_SLOTS; i++)
        RT_OK(rill_launch_host_func(c, nop_host_fn, NULL));
    RT_OK(rill_stream_synchronize(c));
    const size_t n = MiB / sizeof(float);
    float *x, *y = NULL, *out;
    RT_OK(rill_malloc_async(16 * KiB, b, (void **)&out));
    RT_OK(rill_malloc_async(MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(b, &g)); /* a kernel: the pool may wait behind it */
    rill_kernel_desc d = {.name = "read_sum", .cpu = sum_kernel};
    rill_kernel *k;
    RT_OK(rill_kernel_create(&d, &k));
    sum_args args = {x, n, out};
    rill_access acc[2] = {{x, MiB, RILL_READ}, {out, sizeof(float), RILL_WRITE}};
    rill_launch l = {.grid = {1, 1, 1},
                     .block = {1, 1, 1},
                     .args = &args,
                     .args_size = sizeof args,
                     .accesses = acc,
                     .num_accesses = 2};
    RT_OK(rill_launch_kernel(b, k, &l));
    RT_OK(rill_free_async(x, a));
    RT_OK(rill_stream_synchronize(a)); /* only b's read holds x */
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes));
    int failed = 0;
    rill_status s = RILL_ERROR_OUT_OF_MEMORY;
    watchdog w;
    watch_start(&w, &g, WATCHDOG_NS);
    for (long i = 1; i < 40 && s != RILL_OK; i++) {
        rill__alloc_fail_after(i);
        s = rill_malloc_async(MiB, c, (void **)&y);
        rill__alloc_fail_after(0);
        if (s != RILL_OK)
            failed++;
        if (s != RILL_OK && (s != RILL_ERROR_OUT_OF_MEMORY || y != NULL))
            break;
    }
    watch_end(&w, "rill_malloc_async with its internal wait failing");
    RT_OK(s);
    assert_true(failed > 0);
    char why[512];
    if (!rill__mem_check(NULL, why, sizeof why))
        fail_msg("the pool's invariants do not hold: %s", why);
    assert_ptr_equal(y, x);
    assert_int_equal(atomic_load(&g.done), 0); /* c waits for b's read in stream order */
    RT_OK(rill_op_fill_f32(c, y, 2.0f, n));
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(c));
    RT_OK(rill_stream_synchronize(b));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == (float)n);
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_free_async(y, c));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* ---- frees that a synchronize has shown complete, with later work pending ---- */

/* Four 4 MiB blocks on the default stream, freed there (into the thread
 * cache of the thread that frees them). */
static void *alloc_and_free_four(void *arg) {
    (void)arg;
    void *p[4];
    for (int i = 0; i < 4; i++)
        if (rill_malloc_async(4 * MiB, NULL, &p[i]) != RILL_OK)
            return (void *)1;
    for (int i = 0; i < 4; i++)
        if (rill_free_async(p[i], NULL) != RILL_OK)
            return (void *)1;
    return NULL;
}

/* rill.h: "rill_free frees at the end of the work submitted to it so far,
 * rill_free_async on stream": work given to the stream after the free is
 * not what the free waits for. At a 16 MiB limit that four 4 MiB blocks
 * fill, freed on the default stream before rill_device_synchronize, 4
 * bytes on that stream fit (the pool gives the free blocks back to make
 * room) although the stream was given more work after the synchronize;
 * so do 4 MiB on another stream, at once. The blocks sit in the cache of
 * the thread that freed them, this one or another, which the allocation
 * takes back. */
static void test_pool_synchronized_frees_serve_allocations_with_later_work_pending(void **state) {
    (void)state;
    for (int other_thread = 0; other_thread < 2; other_thread++) {
        RT_OK(rill_shutdown()); /* a fresh pool */
        RT_OK(rill_mem_set_limit(NULL, 16 * MiB));
        if (other_thread) {
            pthread_t t;
            void *failed;
            assert_int_equal(pthread_create(&t, NULL, alloc_and_free_four, NULL), 0);
            assert_int_equal(pthread_join(t, &failed), 0);
            assert_null(failed);
        } else {
            assert_null(alloc_and_free_four(NULL));
        }
        RT_OK(rill_device_synchronize(NULL));
        rt_gate g;
        rt_gate_reset(&g);
        RT_OK(rt_launch_gate_kernel(NULL, &g)); /* later work: pending until opened */
        void *small = NULL, *large = NULL;
        rill_stream *s;
        RT_OK(rill_stream_create(NULL, 0, &s));
        rill_status small_st = rill_malloc_async(4, NULL, &small);
        if (small_st != RILL_OK)
            print_message("%s\n", rill_last_error());
        rill_status large_st = rill_malloc_async(4 * MiB, s, &large);
        if (large_st != RILL_OK)
            print_message("%s\n", rill_last_error());
        rt_gate_open(&g);
        RT_OK(rill_device_synchronize(NULL));
        assert_int_equal(atomic_load(&g.timed_out), 0);
        RT_OK(rill_free_async(small, NULL));
        RT_OK(rill_free_async(large, s));
        RT_OK(rill_stream_destroy(s));
        RT_OK(rill_device_synchronize(NULL));
        RT_OK(rill_mem_set_limit(NULL, 0));
        RT_STATUS(RILL_OK, small_st);
        RT_STATUS(RILL_OK, large_st);
    }
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_malloc_async_at_limit_fails_at_once_behind_host_function),
        cmocka_unit_test(test_pool_capture_malloc_at_limit_fails_at_once_behind_host_function),
        cmocka_unit_test(test_pool_ops_at_limit_fail_before_submitting_behind_host_function),
        cmocka_unit_test(test_pool_malloc_at_limit_waits_for_free_behind_host_function),
        cmocka_unit_test(test_pool_malloc_async_gives_back_a_block_whose_wait_fails),
        cmocka_unit_test(test_pool_synchronized_frees_serve_allocations_with_later_work_pending),
    };
    return RT_RUN(tests);
}
