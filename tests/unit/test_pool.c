/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool: memory freed while another stream may
 * still use it is never handed out before that use is done (declared
 * accesses, copies, rill_record_stream), return flow makes it reusable at
 * once, same-stream reuse hits the cache, out-of-memory recovers by waiting
 * for pending frees, and the statistics are exact. */
#include "fixture.h"
#include "mem/memory.h"
#include "mem/pool_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

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

static rill_kernel *sum_k;

static void do_nothing(void *user) {
    (void)user;
}

static void launch_sum(rill_stream *s, const float *in, size_t n, float *out) {
    if (sum_k == NULL) {
        rill_kernel_desc d = {.name = "read_sum", .cpu = sum_kernel};
        RT_OK(rill_kernel_create(&d, &sum_k));
    }
    sum_args a = {in, n, out};
    rill_access acc[2] = {{in, n * sizeof(float), RILL_READ}, {out, sizeof(float), RILL_WRITE}};
    rill_launch l = {.grid = {1, 1, 1},
                     .block = {1, 1, 1},
                     .args = &a,
                     .args_size = sizeof a,
                     .accesses = acc,
                     .num_accesses = 2};
    RT_OK(rill_launch_kernel(s, sum_k, &l));
}

static int teardown(void **state) {
    (void)state;
    if (sum_k != NULL)
        rill_kernel_destroy(sum_k);
    sum_k = NULL;
    return rill_shutdown() == RILL_OK ? 0 : -1;
}

/* Seed 000 (add_s0): the host frees a block while another stream still
 * reads it; "Memory freed while work on any stream may still use it is
 * reused only after that work completes": a new allocation on the freeing
 * side must not get that memory, and the reader sees exact values. */
static void test_pool_free_while_other_stream_reads_is_not_reused(void **state) {
    (void)state;
    const size_t n = 10 * 32 * 32 * 32;
    rill_stream *s0 = rill_default_stream(NULL), *s1;
    float *add_s0, *mess, *result;
    RT_OK(rill_stream_create(NULL, 0, &s1));
    RT_OK(rill_malloc(NULL, n * sizeof(float), (void **)&add_s0));
    RT_OK(rill_malloc(NULL, sizeof(float), (void **)&result));
    RT_OK(rill_op_fill_f32(s0, add_s0, 1.0f, n));
    RT_OK(rill_stream_wait_stream(s1, s0));
    rt_gate g = {0};
    RT_OK(rill_launch_host_func(s1, rt_gate_fn, &g)); /* s1 is busy: the read is pending */
    launch_sum(s1, add_s0, n, result);
    RT_OK(rill_free(add_s0));
    RT_OK(rill_malloc(NULL, n * sizeof(float), (void **)&mess));
    assert_true(mess != add_s0);
    RT_OK(rill_op_fill_f32(s0, mess, 7.0f, n));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(s1));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, result, sizeof host));
    assert_true(host == (float)n);
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_true(st.deferred_frees >= 1);
    RT_OK(rill_free(mess));
    RT_OK(rill_free(result));
    RT_OK(rill_stream_destroy(s1));
}

/* "When the allocation stream has since waited for the using stream past
 * the use, the block is reusable in stream order at once, with no host
 * wait": the using stream is still held by a gate when the allocation
 * returns the same memory. */
static void test_pool_return_flow_reuses_without_host_wait(void **state) {
    (void)state;
    rill_stream *a, *b;
    rill_event *e;
    float *x, *y, *out;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_malloc_async(4096, a, (void **)&out));
    RT_OK(rill_malloc_async(MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 2.0f, MiB / sizeof(float)));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rill_launch_host_func(b, rt_gate_fn, &g));
    launch_sum(b, x, MiB / sizeof(float), out); /* a use by another stream */
    RT_OK(rill_event_record(e, b));
    RT_OK(rill_stream_wait_event(a, e)); /* return flow */
    RT_OK(rill_free_async(x, a));
    RT_OK(rill_malloc_async(MiB, a, (void **)&y)); /* must not block: b is held */
    assert_ptr_equal(y, x);
    RT_OK(rill_op_fill_f32(a, y, 3.0f, MiB / sizeof(float)));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(a));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == 2.0f * (float)(MiB / sizeof(float)));
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_free_async(out, a));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

typedef struct host_reader {
    rt_gate g;
    const float *p;
    size_t n;
    _Atomic int ok;
} host_reader;

static void host_read(void *user_data) {
    host_reader *r = user_data;
    rt_gate_fn(&r->g);
    int ok = 1;
    for (size_t i = 0; i < r->n; i++)
        ok &= r->p[i] == 5.0f;
    atomic_store(&r->ok, ok);
}

/* "rill_record_stream covers uses the library cannot see (host functions,
 * undeclared access)": a host function's use keeps the block from being
 * handed out again until it is done. */
static void test_pool_record_stream_covers_host_function_uses(void **state) {
    (void)state;
    rill_stream *a, *b;
    float *x, *y;
    const size_t n = 4096;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    RT_OK(rill_malloc_async(n * sizeof(float), a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 5.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    host_reader r = {.p = x, .n = n};
    RT_OK(rill_launch_host_func(b, host_read, &r));
    RT_OK(rill_record_stream(x, b));
    RT_OK(rill_free_async(x, a));
    RT_OK(rill_malloc_async(n * sizeof(float), a, (void **)&y));
    assert_true(y != x);
    RT_OK(rill_op_fill_f32(a, y, 9.0f, n));
    atomic_store(&r.g.open, 1);
    RT_OK(rill_stream_synchronize(b));
    assert_int_equal(atomic_load(&r.ok), 1);
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* A hot malloc_async/free_async pair on one stream never reaches the
 * system: 1000 pairs of 1 MiB reserve nothing new after the first. */
static void test_pool_same_stream_reuse_hits_cache(void **state) {
    (void)state;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    rill_mem_stats before, after;
    void *p;
    RT_OK(rill_malloc_async(MiB, s, &p));
    RT_OK(rill_free_async(p, s));
    RT_OK(rill_mem_get_stats(NULL, &before));
    for (int i = 0; i < 1000; i++) {
        RT_OK(rill_malloc_async(MiB, s, &p));
        RT_OK(rill_memset_async(p, i & 0xff, MiB, s));
        RT_OK(rill_free_async(p, s));
    }
    RT_OK(rill_mem_get_stats(NULL, &after));
    assert_int_equal(after.reserved_bytes, before.reserved_bytes);
    assert_int_equal(after.peak_reserved_bytes, before.peak_reserved_bytes);
    assert_int_equal(after.cache_hits - before.cache_hits, 1000);
    assert_int_equal(after.allocations - before.allocations, 1000);
    assert_int_equal(after.frees - before.frees, 1000);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

/* rill_mem_get_stats "fills every field exactly": allocated and reserved
 * follow the rounded sizes and segments; rill_mem_empty_cache returns idle
 * segments to the system. */
static void test_pool_stats_are_exact(void **state) {
    (void)state;
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    rill_mem_stats s0, s1, s2;
    RT_OK(rill_mem_get_stats(NULL, &s0));
    void *a, *b;
    RT_OK(rill_malloc(NULL, 1000, &a));    /* rounds to 1024 in the small kind */
    RT_OK(rill_malloc(NULL, 3 * MiB, &b)); /* exactly 3 MiB in the large kind */
    RT_OK(rill_mem_get_stats(NULL, &s1));
    assert_int_equal(s1.allocated_bytes - s0.allocated_bytes, 1024 + 3 * MiB);
    /* Each kind commits what it needs, in 16 KiB steps. */
    assert_int_equal(s1.reserved_bytes - s0.reserved_bytes, 16 * 1024 + 3 * MiB);
    assert_true(s1.peak_allocated_bytes >= s1.allocated_bytes);
    assert_int_equal(s1.allocations - s0.allocations, 2);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    RT_OK(rill_mem_get_stats(NULL, &s2));
    assert_int_equal(s2.allocated_bytes, s0.allocated_bytes);
    assert_int_equal(s2.frees - s0.frees, 2);
    assert_int_equal(s2.reserved_bytes, s0.reserved_bytes);
    assert_true(s2.peak_reserved_bytes >= s1.reserved_bytes);
}

typedef struct opener {
    rt_gate *g;
    unsigned delay_us;
} opener;

static void *open_later(void *p) {
    opener *o = p;
    rt_sleep_us(o->delay_us);
    atomic_store(&o->g->open, 1);
    return NULL;
}

/* rill_malloc: "When the pool can only serve it by reusing such a block
 * (the limit is reached or the device is full), it waits on the host for
 * the pending frees": a cached small segment held by another stream's
 * pending use behind a host function is returned to the system once that
 * use is done, and the large allocation then fits under the limit. */
static void test_pool_out_of_memory_recovers_when_frees_drain(void **state) {
    (void)state;
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    rill_mem_stats st0, st1, held;
    RT_OK(rill_mem_get_stats(NULL, &st0));
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    float *x, *out, *big;
    RT_OK(rill_malloc_async(4096, a, (void **)&out));
    RT_OK(rill_malloc_async(64 * 1024, a, (void **)&x)); /* the small segment */
    RT_OK(rill_op_fill_f32(a, x, 1.0f, 16384));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rill_launch_host_func(b, rt_gate_fn, &g));
    launch_sum(b, x, 16384, out);
    RT_OK(rill_free_async(x, a));
    RT_OK(rill_free_async(out, a));
    /* The small segment is reserved and held by b; 3 MiB more does not
     * fit beside it. */
    RT_OK(rill_mem_get_stats(NULL, &held));
    assert_true(held.reserved_bytes > st0.reserved_bytes);
    size_t limit = st0.reserved_bytes + 3 * MiB + (held.reserved_bytes - st0.reserved_bytes) / 2;
    RT_OK(rill_mem_set_limit(NULL, limit));
    pthread_t t;
    opener o = {&g, 50000};
    assert_int_equal(pthread_create(&t, NULL, open_later, &o), 0);
    rill_status st = rill_malloc(NULL, 3 * MiB, (void **)&big);
    assert_int_equal(pthread_join(t, NULL), 0);
    RT_OK(st);
    RT_OK(rill_mem_get_stats(NULL, &st1));
    assert_int_equal(st1.oom_recoveries - st0.oom_recoveries, 1);
    assert_true(st1.reserved_bytes <= limit);
    RT_OK(rill_free(big));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* RILL_ERROR_OUT_OF_MEMORY: "the pool cannot serve it, even from its
 * emptied cache", with a sentence giving the request and the limit;
 * nothing already submitted is lost. */
static void test_pool_out_of_memory_fails_cleanly(void **state) {
    (void)state;
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    rill_stream *s;
    float *keep, *out;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_malloc_async(4096, s, (void **)&out));
    RT_OK(rill_malloc_async(1024 * sizeof(float), s, (void **)&keep));
    RT_OK(rill_op_fill_f32(s, keep, 4.0f, 1024));
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes + 2 * MiB));
    void *p = (void *)1;
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, rill_malloc_async(8 * MiB, s, &p));
    assert_null(p);
    assert_non_null(strstr(rill_last_error(), "8388608 bytes"));
    assert_non_null(strstr(rill_last_error(), "limit"));
    launch_sum(s, keep, 1024, out);
    RT_OK(rill_stream_synchronize(s));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == 4096.0f);
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_free_async(keep, s));
    RT_OK(rill_free_async(out, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

/* When growing is impossible, the pool may make the allocating stream wait
 * on the pending use (an internal stream wait) instead of the host: the
 * allocation returns while the user is still held, and the new owner's
 * work runs only after that use. */
static void test_pool_internal_wait_orders_reuse(void **state) {
    (void)state;
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_mem_empty_cache(NULL));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    float *x, *y, *out;
    const size_t n = 3 * MiB / sizeof(float);
    RT_OK(rill_malloc_async(4096, b, (void **)&out));
    RT_OK(rill_mem_get_stats(NULL, &st));
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes + 4 * MiB));
    RT_OK(rill_malloc_async(3 * MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(b, &g));
    launch_sum(b, x, n, out);
    RT_OK(rill_free_async(x, a));
    RT_OK(rill_malloc_async(3 * MiB, a, (void **)&y)); /* returns at once: b is held */
    assert_ptr_equal(y, x);
    RT_OK(rill_op_fill_f32(a, y, 2.0f, n)); /* must run after b's read */
    assert_true(rt_gate_wait_entered(&g));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == (float)n);
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* Starts a test from a fresh runtime, so that the lifetime peaks of
 * rill_mem_get_stats are the test's own. */
static void fresh_runtime(void) {
    if (sum_k != NULL)
        RT_OK(rill_kernel_destroy(sum_k));
    sum_k = NULL;
    RT_OK(rill_shutdown());
}

/* Same-stream pairs are served by the thread's cache without the pool's
 * lock; "rill_mem_get_stats fills every field exactly" still holds:
 * allocations, frees and cache hits count every pair, allocated bytes
 * return to zero, and a peak reached by a cached block is recorded. */
static void test_pool_thread_cache_keeps_stats_exact(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    void *x, *y, *z;
    RT_OK(rill_malloc_async(64 * 1024, s, &x));
    RT_OK(rill_free_async(x, s)); /* to the cache */
    for (int i = 0; i < 100; i++) {
        RT_OK(rill_malloc_async(64 * 1024, s, &z));
        assert_ptr_equal(z, x); /* the cached block, on the same stream */
        RT_OK(rill_free_async(z, s));
    }
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.allocations, 101);
    assert_int_equal(st.frees, 101);
    assert_int_equal(st.cache_hits, 100);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.peak_allocated_bytes, 64 * 1024);
    /* y comes from the pool, then x from the cache: the peak is both. */
    RT_OK(rill_malloc_async(2 * MiB, s, &y));
    RT_OK(rill_malloc_async(64 * 1024, s, &z));
    assert_ptr_equal(z, x);
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.allocated_bytes, 2 * MiB + 64 * 1024);
    assert_int_equal(st.peak_allocated_bytes, 2 * MiB + 64 * 1024);
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_free_async(z, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

/* A use by another stream of a block the thread's cache leased is noted
 * without the pool's lock, and still "memory freed while work on any
 * stream may still use it is reused only after that work completes": the
 * freed block stays in the cache but is not handed out while the reader is
 * held; after return flow it is, with no host wait, and the reader sees
 * exact values. */
static void test_pool_thread_cache_tracks_uses_by_other_streams(void **state) {
    (void)state;
    fresh_runtime();
    const size_t n = 16384;
    rill_stream *a, *b;
    rill_event *e;
    float *x, *y, *z, *w, *out;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_malloc_async(4096, a, (void **)&out));
    RT_OK(rill_malloc_async(n * sizeof(float), a, (void **)&x));
    RT_OK(rill_free_async(x, a)); /* to the cache */
    RT_OK(rill_malloc_async(n * sizeof(float), a, (void **)&y));
    assert_ptr_equal(y, x); /* leased from the cache */
    RT_OK(rill_op_fill_f32(a, y, 2.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rill_launch_host_func(b, rt_gate_fn, &g)); /* b is busy: the read is pending */
    /* Work queued before the read, more than a's wait budget: the pool
     * does not reuse y through an internal wait either (see pool.h). */
    for (int i = 0; i < 16; i++)
        RT_OK(rill_launch_host_func(b, do_nothing, NULL));
    launch_sum(b, y, n, out);
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_malloc_async(n * sizeof(float), a, (void **)&z));
    assert_true(z != y);
    RT_OK(rill_op_fill_f32(a, z, 7.0f, n));
    RT_OK(rill_event_record(e, b));
    RT_OK(rill_stream_wait_event(a, e));                         /* return flow */
    RT_OK(rill_malloc_async(n * sizeof(float), a, (void **)&w)); /* must not block */
    assert_ptr_equal(w, y);
    RT_OK(rill_op_fill_f32(a, w, 3.0f, n));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(a));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == 2.0f * (float)n);
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_true(st.deferred_frees >= 1);
    RT_OK(rill_free_async(w, a));
    RT_OK(rill_free_async(z, a));
    RT_OK(rill_free_async(out, a));
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

typedef struct pair_thread {
    rill_stream *s;
    void *kept; /* a block left allocated, for the main thread to free */
    atomic_int failures;
} pair_thread;

static void *run_pairs(void *arg) {
    pair_thread *t = arg;
    for (int i = 0; i < 100; i++) {
        void *p;
        if (rill_malloc_async(256 * 1024, t->s, &p) != RILL_OK ||
            rill_free_async(p, t->s) != RILL_OK)
            atomic_fetch_add(&t->failures, 1);
    }
    if (rill_malloc_async(256 * 1024, t->s, &t->kept) != RILL_OK)
        atomic_fetch_add(&t->failures, 1);
    return NULL;
}

/* "rill_mem_empty_cache returns idle segments to the system": blocks that
 * another thread's cache holds free are taken back; a block that thread
 * still holds allocated can be freed here, and freeing it twice is
 * RILL_ERROR_INVALID_ARGUMENT. */
static void test_pool_empty_cache_takes_back_thread_caches(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    pair_thread t = {.s = s};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_pairs, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(atomic_load(&t.failures), 0);
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.allocated_bytes, 256 * 1024);
    assert_int_equal(st.allocations, 101);
    assert_int_equal(st.frees, 100);
    RT_OK(rill_free_async(t.kept, s)); /* leased by the other thread's cache */
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_async(t.kept, s));
    assert_non_null(strstr(rill_last_error(), "already freed"));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_mem_empty_cache(NULL));
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.frees, 101);
    RT_OK(rill_stream_destroy(s));
}

/* rill_malloc_async "may reuse memory that another stream's pending work
 * still holds, ordering the new owner's work after it" rather than grow:
 * the block, freed by the stream that read it, comes back to its
 * allocation stream while the reader is still held, nothing more is
 * reserved, and the new owner's write runs after the read. (A block its
 * own stream frees after another's use stays in the thread's rotation
 * instead: test_pool_thread_cache_tracks_uses_by_other_streams.) */
static void test_pool_async_reuses_pending_block_instead_of_growing(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    const size_t n = MiB / sizeof(float);
    float *x, *y, *out;
    RT_OK(rill_malloc_async(4096, b, (void **)&out));
    RT_OK(rill_malloc_async(MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(b, &g));
    launch_sum(b, x, n, out);
    RT_OK(rill_free_async(x, b));
    rill_mem_stats before, after;
    RT_OK(rill_mem_get_stats(NULL, &before));
    RT_OK(rill_malloc_async(MiB, a, (void **)&y)); /* returns at once: b is held */
    RT_OK(rill_mem_get_stats(NULL, &after));
    assert_ptr_equal(y, x);
    assert_int_equal(after.reserved_bytes, before.reserved_bytes);
    assert_int_equal(after.cache_hits - before.cache_hits, 1);
    RT_OK(rill_op_fill_f32(a, y, 2.0f, n)); /* must run after b's read */
    assert_true(rt_gate_wait_entered(&g));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == (float)n);
    char text[4096] = {0};
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    assert_non_null(f);
    RT_OK(rill_mem_summary(NULL, f));
    fclose(f);
    assert_non_null(strstr(text, "(instead of growing) 1"));
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* Segments grow in place: a free block next to uncommitted space becomes
 * part of a larger block, so the pool commits only the difference (a pool
 * of fixed segments would reserve 3 + 4 MiB here). The block is freed on
 * another stream, once its own is done, so that it goes to the pool and
 * not to the thread's cache. */
static void test_pool_segment_grows_in_place(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *s, *t;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_create(NULL, 0, &t));
    void *x, *y;
    RT_OK(rill_malloc_async(3 * MiB, s, &x));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free_async(x, t));
    RT_OK(rill_malloc_async(4 * MiB, t, &y));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_ptr_equal(y, x);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_int_equal(st.peak_reserved_bytes, 4 * MiB);
    RT_OK(rill_memset_async(y, 0x5a, 4 * MiB, t)); /* all of it is usable */
    RT_OK(rill_stream_synchronize(t));
    unsigned char last = 0;
    RT_OK(rill_memcpy(&last, (char *)y + 4 * MiB - 1, 1));
    assert_int_equal(last, 0x5a);
    RT_OK(rill_free_async(y, t));
    RT_OK(rill_stream_destroy(t));
    RT_OK(rill_stream_destroy(s));
}

/* rill_mem_empty_cache gives back free blocks wherever they lie: a live
 * block after them does not keep them reserved; and a block committed
 * again later is memory the system provides anew (it reads as zeros). */
static void test_pool_empty_cache_returns_free_blocks_between_live_ones(void **state) {
    (void)state;
    fresh_runtime();
    unsigned char *a, *b;
    RT_OK(rill_malloc(NULL, 8 * MiB, (void **)&a));
    RT_OK(rill_malloc(NULL, 2 * MiB, (void **)&b)); /* after a in the same segment */
    RT_OK(rill_memset_async(a, 0xab, 8 * MiB, NULL));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_free(a));
    RT_OK(rill_mem_empty_cache(NULL));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.reserved_bytes, 2 * MiB);
    assert_int_equal(st.allocated_bytes, 2 * MiB);
    unsigned char *c;
    RT_OK(rill_malloc(NULL, 8 * MiB, (void **)&c));
    assert_ptr_equal(c, a);
    unsigned char probe[3];
    RT_OK(rill_memcpy(&probe[0], c, 1));
    RT_OK(rill_memcpy(&probe[1], c + 4 * MiB, 1));
    RT_OK(rill_memcpy(&probe[2], c + 8 * MiB - 1, 1));
    assert_int_equal(probe[0] | probe[1] | probe[2], 0);
    RT_OK(rill_free(c));
    RT_OK(rill_free(b));
    RT_OK(rill_mem_empty_cache(NULL));
    RT_OK(rill_mem_get_stats(NULL, &st));
    assert_int_equal(st.reserved_bytes, 0);
}

/* A block decommitted between live ones is committed again in place: the
 * next request of its size takes that hole rather than the end of the
 * segment, and reserved grows by the request alone. */
static void test_pool_decommitted_hole_is_reused(void **state) {
    (void)state;
    fresh_runtime();
    void *a, *b, *c, *d;
    RT_OK(rill_malloc(NULL, 2 * MiB, &a));
    RT_OK(rill_malloc(NULL, 3 * MiB, &b));
    RT_OK(rill_malloc(NULL, 2 * MiB, &c));
    RT_OK(rill_free(b));
    RT_OK(rill_mem_empty_cache(NULL));
    rill_mem_stats st0, st1;
    RT_OK(rill_mem_get_stats(NULL, &st0));
    assert_int_equal(st0.reserved_bytes, 4 * MiB);
    RT_OK(rill_malloc(NULL, 3 * MiB, &d));
    RT_OK(rill_mem_get_stats(NULL, &st1));
    assert_ptr_equal(d, b);
    assert_int_equal(st1.reserved_bytes, 7 * MiB);
    RT_OK(rill_free(d));
    RT_OK(rill_free(c));
    RT_OK(rill_free(a));
    RT_OK(rill_mem_empty_cache(NULL));
    RT_OK(rill_mem_get_stats(NULL, &st1));
    assert_int_equal(st1.reserved_bytes, 0);
}

/* Requests a few hundred bytes apart get blocks of one size (a 64th of
 * their power of two), so a block freed by one serves the next without the
 * pool growing. */
static void test_pool_nearby_sizes_share_blocks(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    void *x, *y;
    RT_OK(rill_malloc_async(700 * 1024, s, &x));
    rill_mem_stats st0, st1;
    RT_OK(rill_mem_get_stats(NULL, &st0));
    assert_int_equal(st0.allocated_bytes, 704 * 1024); /* 512 KiB / 64 = 8 KiB steps */
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_malloc_async(700 * 1024 + 640, s, &y));
    RT_OK(rill_mem_get_stats(NULL, &st1));
    assert_ptr_equal(y, x);
    assert_int_equal(st1.reserved_bytes, st0.reserved_bytes);
    RT_OK(rill_free_async(y, s));
    RT_OK(rill_stream_destroy(s));
}

/* Interior pointers find their block among many: a copy that ends at the
 * block's last requested byte is accepted, one byte more is refused, for
 * pointers at every offset class of small blocks, of blocks that span
 * many chunks of the pool's index, and of freed blocks (refused). */
static void test_pool_interior_pointers_find_their_block(void **state) {
    (void)state;
    fresh_runtime();
    enum { N = 3000 };
    static char *blocks[N];
    static size_t sizes[N];
    unsigned seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        sizes[i] = i % 500 == 7 ? (size_t)(seed % (9 * MiB)) + 5 * MiB : 1 + seed % 5000;
        RT_OK(rill_malloc(NULL, sizes[i], (void **)&blocks[i]));
    }
    for (int i = 0; i < N; i += 2) /* holes between live blocks */
        RT_OK(rill_free(blocks[i]));
    static char dst[16];
    for (int i = 0; i < N; i++) {
        size_t off[3] = {0, sizes[i] / 2, sizes[i] - 1};
        for (int j = 0; j < 3; j++) {
            char *p = blocks[i] + off[j];
            size_t left = sizes[i] - off[j];
            size_t n = left < sizeof dst ? left : sizeof dst;
            if (i % 2 == 0) {
                RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(dst, p, n));
                continue;
            }
            RT_OK(rill_memcpy(dst, p + left - n, n));
            RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(dst, p + left - n, n + 1));
        }
    }
    for (int i = 1; i < N; i += 2)
        RT_OK(rill_free(blocks[i]));
}

/* Frees of bad pointers are clear errors, never crashes. */
static void test_pool_bad_frees_are_invalid(void **state) {
    (void)state;
    char *p;
    RT_OK(rill_malloc(NULL, 4096, (void **)&p));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(p + 16));
    assert_non_null(strstr(rill_last_error(), "16 bytes into"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_record_stream(p + 16, NULL));
    RT_OK(rill_free(p));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(p));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_async(p, NULL));
    int local;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(&local));
}

/* rill_mem_summary writes the table users read. */
static void test_pool_summary_is_written(void **state) {
    (void)state;
    void *p;
    RT_OK(rill_malloc(NULL, 1 << 16, &p));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    RT_OK(rill_mem_summary(NULL, f));
    fclose(f);
    assert_non_null(strstr(buf, "allocated"));
    assert_non_null(strstr(buf, "reserved"));
    assert_non_null(strstr(buf, "small"));
    assert_non_null(strstr(buf, "cache hits"));
    free(buf);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_summary(NULL, NULL));
    RT_OK(rill_free(p));
}

/* ---- reuse of held blocks: rill_malloc, internal waits, the policy ---- */

static void fail_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    rill_kernel_fail(ctx, "injected failure");
}

static void launch_failing(rill_stream *s) {
    rill_kernel_desc d = {.name = "fails", .cpu = fail_kernel};
    rill_kernel *k;
    RT_OK(rill_kernel_create(&d, &k));
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    RT_OK(rill_launch_kernel(s, k, &l));
    RT_OK(rill_kernel_destroy(k));
}

/* "rill_malloc returns memory that any stream may use at once: never a
 * block that pending work still touches. When the pool can only serve it
 * by reusing such a block (the limit is reached ...), it waits on the host
 * for the pending frees": the block comes back only once the reader on s1
 * is done, so a write to it on an unrelated stream cannot reach s1's
 * input (it did: a sum of 4096 ones came out 28672). */
static void test_pool_malloc_at_limit_waits_on_host_for_readers(void **state) {
    (void)state;
    fresh_runtime();
    const size_t n = 4096; /* 16 KiB: one commit granule, nothing beside it */
    rill_stream *s1, *s2;
    float *x, *y, *out;
    RT_OK(rill_stream_create(NULL, 0, &s1));
    RT_OK(rill_stream_create(NULL, 0, &s2));
    RT_OK(rill_malloc(NULL, n * sizeof(float), (void **)&out));
    RT_OK(rill_malloc(NULL, n * sizeof(float), (void **)&x));
    RT_OK(rill_op_fill_f32(NULL, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(s1, rill_current_stream(NULL)));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(s1, &g));
    launch_sum(s1, x, n, out);
    RT_OK(rill_free(x));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes)); /* no room to grow */
    pthread_t t;
    opener o = {&g, 50000};
    assert_int_equal(pthread_create(&t, NULL, open_later, &o), 0);
    RT_OK(rill_malloc(NULL, n * sizeof(float), (void **)&y));
    assert_ptr_equal(y, x);
    assert_int_equal(atomic_load(&g.done), 1); /* the read is over */
    RT_OK(rill_op_fill_f32(s2, y, 7.0f, n));
    assert_int_equal(pthread_join(t, NULL), 0);
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_stream_synchronize(s2));
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == (float)n);
    assert_int_equal(atomic_load(&g.timed_out), 0);
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_free(y));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s2));
    RT_OK(rill_stream_destroy(s1));
}

/* rill_mem_set_reuse_policy: an internal wait "orders memory only: it ends
 * when that work completes or is skipped after a failure, and never
 * carries the failure" to the allocating stream, whose work runs and
 * reports success while the holder fails. */
static void test_pool_internal_wait_never_carries_a_failure(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    const size_t n = MiB / sizeof(float);
    float *x, *y, *out;
    RT_OK(rill_malloc_async(4096, b, (void **)&out));
    RT_OK(rill_malloc_async(MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(b, &g));
    launch_sum(b, x, n, out);
    launch_failing(b);
    RT_OK(rill_free_async(x, b));
    RT_OK(rill_malloc_async(MiB, a, (void **)&y)); /* at once, behind b's work */
    assert_ptr_equal(y, x);
    RT_OK(rill_op_fill_f32(a, y, 2.0f, n));
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(a));
    float host[2] = {0};
    RT_OK(rill_memcpy(&host[0], &y[n - 1], sizeof(float)));
    RT_OK(rill_memcpy(&host[1], out, sizeof(float)));
    assert_true(host[0] == 2.0f);     /* a's fill ran ... */
    assert_true(host[1] == (float)n); /* ... after b's read */
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    assert_non_null(strstr(rill_last_error(), "injected failure"));
    RT_OK(rill_stream_clear_error(b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

typedef struct flag_wait {
    _Atomic int flag;
    _Atomic int timed_out;
} flag_wait;

/* A host function that waits for later work of another stream: correct
 * without the pool's reuse, a deadlock if that work waited for it. */
static void wait_for_flag(void *user_data) {
    flag_wait *f = user_data;
    uint64_t deadline = rt_now_ns() + RT_GATE_TIMEOUT_NS;
    while (!atomic_load(&f->flag)) {
        if (rt_now_ns() > deadline) {
            atomic_store(&f->timed_out, 1);
            return;
        }
        rt_sleep_us(50);
    }
}

static void set_flag_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    flag_wait *f;
    memcpy(&f, args, sizeof f);
    atomic_store(&f->flag, 1);
}

/* "The pool never waits behind work that may itself wait for anything,
 * S's later work included: host functions ...": b's host function waits
 * for a kernel that a submits after allocating; the pool grows rather than
 * put a behind b, and both streams finish. */
static void test_pool_no_internal_wait_behind_host_functions(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    const size_t n = MiB / sizeof(float);
    float *x, *y, *out;
    RT_OK(rill_malloc_async(4096, b, (void **)&out));
    RT_OK(rill_malloc_async(MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    launch_sum(b, x, n, out);
    flag_wait f = {0};
    RT_OK(rill_launch_host_func(b, wait_for_flag, &f));
    RT_OK(rill_free_async(x, b));
    RT_OK(rill_malloc_async(MiB, a, (void **)&y));
    rill_kernel_desc d = {.name = "set_flag", .cpu = set_flag_kernel};
    rill_kernel *k;
    RT_OK(rill_kernel_create(&d, &k));
    flag_wait *fp = &f;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &fp, .args_size = sizeof fp};
    RT_OK(rill_launch_kernel(a, k, &l));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_synchronize(b));
    RT_OK(rill_stream_synchronize(a));
    assert_int_equal(atomic_load(&f.timed_out), 0);
    assert_true(y != x);
    float host = 0.0f;
    RT_OK(rill_memcpy(&host, out, sizeof host));
    assert_true(host == (float)n);
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* rill_mem_set_reuse_policy(dev, 0): "the pool never adds a wait; it grows
 * instead"; the default is RILL_MEM_REUSE_INTERNAL_WAITS; unknown flags
 * are refused with a sentence. */
static void test_pool_reuse_policy_without_internal_waits_grows(void **state) {
    (void)state;
    fresh_runtime();
    unsigned flags = 0;
    RT_OK(rill_mem_get_reuse_policy(NULL, &flags));
    assert_int_equal(flags, RILL_MEM_REUSE_INTERNAL_WAITS);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_set_reuse_policy(NULL, 1u << 5));
    assert_non_null(strstr(rill_last_error(), "rill_mem_set_reuse_policy"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_get_reuse_policy(NULL, NULL));
    RT_OK(rill_mem_set_reuse_policy(NULL, 0));
    RT_OK(rill_mem_get_reuse_policy(NULL, &flags));
    assert_int_equal(flags, 0);
    rill_stream *a, *b;
    RT_OK(rill_stream_create(NULL, 0, &a));
    RT_OK(rill_stream_create(NULL, 0, &b));
    const size_t n = MiB / sizeof(float);
    float *x, *y, *out;
    RT_OK(rill_malloc_async(4096, b, (void **)&out));
    RT_OK(rill_malloc_async(MiB, a, (void **)&x));
    RT_OK(rill_op_fill_f32(a, x, 1.0f, n));
    RT_OK(rill_stream_wait_stream(b, a));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(b, &g));
    launch_sum(b, x, n, out);
    RT_OK(rill_free_async(x, b));
    rill_mem_stats before, after;
    RT_OK(rill_mem_get_stats(NULL, &before));
    RT_OK(rill_malloc_async(MiB, a, (void **)&y));
    RT_OK(rill_mem_get_stats(NULL, &after));
    assert_true(y != x);
    assert_true(after.reserved_bytes > before.reserved_bytes);
    RT_OK(rill_op_fill_f32(a, y, 2.0f, n));
    RT_OK(rill_stream_synchronize(a)); /* a does not wait for b */
    assert_int_equal(atomic_load(&g.done), 0);
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(b));
    RT_OK(rill_mem_set_reuse_policy(NULL, RILL_MEM_REUSE_INTERNAL_WAITS));
    RT_OK(rill_free_async(y, a));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(a));
}

/* Graph memory is allocated on a library-owned stream through the pool;
 * when the pool can only serve it by reusing a block that failing work
 * held, that failure must not stick to that stream (rill_device_synchronize
 * would report it for the rest of the process: the program cannot clear a
 * stream it does not own). */
static void test_pool_graph_memory_reuse_keeps_device_clean_after_failure(void **state) {
    (void)state;
    fresh_runtime();
    rill_stream *b, *c;
    RT_OK(rill_stream_create(NULL, 0, &b));
    RT_OK(rill_stream_create(NULL, 0, &c));
    const size_t n = MiB / sizeof(float);
    float *x, *y, *out;
    RT_OK(rill_malloc_async(4096, b, (void **)&out));
    RT_OK(rill_malloc_async(MiB, b, (void **)&x));
    RT_OK(rill_op_fill_f32(b, x, 1.0f, n));
    rt_gate g = {0};
    RT_OK(rt_launch_gate_kernel(b, &g));
    launch_sum(b, x, n, out);
    launch_failing(b);
    RT_OK(rill_free_async(x, b));
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    RT_OK(rill_mem_set_limit(NULL, st.reserved_bytes)); /* no room to grow */
    pthread_t t;
    opener o = {&g, 50000};
    assert_int_equal(pthread_create(&t, NULL, open_later, &o), 0);
    RT_OK(rill_stream_begin_capture(c, RILL_CAPTURE_GLOBAL));
    RT_OK(rill_malloc_async(MiB, c, (void **)&y));
    assert_ptr_equal(y, x);
    RT_OK(rill_op_fill_f32(c, y, 3.0f, n));
    RT_OK(rill_free_async(y, c));
    rill_graph *graph;
    RT_OK(rill_stream_end_capture(c, &graph));
    assert_int_equal(pthread_join(t, NULL), 0);
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    RT_OK(rill_stream_clear_error(b));
    RT_OK(rill_device_synchronize(NULL));
    rill_graph_exec *exec;
    RT_OK(rill_graph_instantiate(graph, &exec));
    RT_OK(rill_graph_launch(exec, c));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_graph_exec_destroy(exec));
    RT_OK(rill_graph_destroy(graph));
    RT_OK(rill_free_async(out, b));
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_stream_destroy(b));
}

/* rill__mem_describe (for failure messages of the stress tests): an address inside an allocated
 * block names the block's start and "allocated"; once the block is freed and the cache
 * emptied, the address is in no segment. */
static void test_pool_describe_names_the_block_and_its_state(void **state) {
    (void)state;
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    void *p = NULL;
    RT_OK(rill_malloc_async(100000, s, &p));
    char out[256], start[32];
    snprintf(start, sizeof start, "[%#" PRIxPTR ",", (uintptr_t)p);
    rill__mem_describe(NULL, (char *)p + 4096, out, sizeof out);
    assert_non_null(strstr(out, start));
    assert_non_null(strstr(out, " allocated"));
    RT_OK(rill_free_async(p, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_mem_empty_cache(NULL));
    rill__mem_describe(NULL, (char *)p + 4096, out, sizeof out);
    assert_non_null(strstr(out, "in no segment"));
    RT_OK(rill_stream_destroy(s));
}

/* rill__block_tiles, behind the pool's RILL_ASSERTs where blocks change hands: true for blocks that
 * tile their segment, false for one that runs into its neighbour, leaves a gap or leaves the
 * segment. */
static void test_pool_block_tiles_finds_a_broken_tiling(void **state) {
    (void)state;
    segment g = {.base = 0x100000, .size = 0x3000};
    block a = {.ptr = 0x100000, .size = 0x1000, .seg = &g};
    block b = {.ptr = 0x101000, .size = 0x2000, .seg = &g};
    a.next = &b;
    b.prev = &a;
    assert_true(rill__block_tiles(&a));
    assert_true(rill__block_tiles(&b));
    a.size = 0x1800; /* runs into b */
    assert_false(rill__block_tiles(&a));
    a.size = 0x800; /* a gap before b */
    assert_false(rill__block_tiles(&a));
    assert_false(rill__block_tiles(&b));
    a.size = 0x1000;
    b.size = 0x3000; /* past the segment's end */
    assert_false(rill__block_tiles(&b));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_free_while_other_stream_reads_is_not_reused),
        cmocka_unit_test(test_pool_return_flow_reuses_without_host_wait),
        cmocka_unit_test(test_pool_record_stream_covers_host_function_uses),
        cmocka_unit_test(test_pool_same_stream_reuse_hits_cache),
        cmocka_unit_test(test_pool_stats_are_exact),
        cmocka_unit_test(test_pool_out_of_memory_recovers_when_frees_drain),
        cmocka_unit_test(test_pool_out_of_memory_fails_cleanly),
        cmocka_unit_test(test_pool_internal_wait_orders_reuse),
        cmocka_unit_test(test_pool_bad_frees_are_invalid),
        cmocka_unit_test(test_pool_summary_is_written),
        cmocka_unit_test(test_pool_thread_cache_keeps_stats_exact),
        cmocka_unit_test(test_pool_thread_cache_tracks_uses_by_other_streams),
        cmocka_unit_test(test_pool_empty_cache_takes_back_thread_caches),
        cmocka_unit_test(test_pool_async_reuses_pending_block_instead_of_growing),
        cmocka_unit_test(test_pool_segment_grows_in_place),
        cmocka_unit_test(test_pool_empty_cache_returns_free_blocks_between_live_ones),
        cmocka_unit_test(test_pool_decommitted_hole_is_reused),
        cmocka_unit_test(test_pool_nearby_sizes_share_blocks),
        cmocka_unit_test(test_pool_interior_pointers_find_their_block),
        cmocka_unit_test(test_pool_malloc_at_limit_waits_on_host_for_readers),
        cmocka_unit_test(test_pool_internal_wait_never_carries_a_failure),
        cmocka_unit_test(test_pool_no_internal_wait_behind_host_functions),
        cmocka_unit_test(test_pool_reuse_policy_without_internal_waits_grows),
        cmocka_unit_test(test_pool_graph_memory_reuse_keeps_device_clean_after_failure),
        cmocka_unit_test(test_pool_describe_names_the_block_and_its_state),
        cmocka_unit_test(test_pool_block_tiles_finds_a_broken_tiling),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, teardown);
}
