/* SPDX-License-Identifier: MIT */
/* Memory: device and page-locked host allocations, frees of pointers rill does not own, copies
 * and fills (synchronous and stream-ordered), bounds of device allocations, and statistics.
 *
 * Work on the device reports through atomics; only the test's main thread asserts. Every wait
 * has a deadline. */
#include "fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS 1000000000ull

static rill_stream *new_stream(void) {
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    assert_non_null(s);
    return s;
}

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    RT_OK(rill_malloc(NULL, bytes, &p));
    assert_non_null(p);
    return p;
}

static rill_mem_stats stats_now(void) {
    rill_mem_stats st;
    RT_OK(rill_mem_get_stats(NULL, &st));
    return st;
}

static void fill_pattern(unsigned char *buf, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 31u + seed);
}

static bool all_bytes(const unsigned char *buf, size_t n, unsigned char value) {
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != value)
            return false;
    }
    return true;
}

/* ---- allocation ---- */

/* rill_malloc: "Device memory from the device's caching pool"; rill_free returns it. */
static void test_memory_malloc_and_free(void **state) {
    (void)state;
    rill_device *cpu = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    void *a = NULL, *b = NULL;
    RT_OK(rill_malloc(cpu, 4096, &a));
    RT_OK(rill_malloc(NULL, 1, &b));
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_malloc(NULL, 64, NULL));
}

/* RILL_ERROR_INVALID_ARGUMENT: "size 0": every allocation call refuses zero bytes and leaves
 * the out-parameter NULL. */
static void test_memory_zero_bytes_is_invalid_argument(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    void *p = &p;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_malloc(NULL, 0, &p));
    assert_null(p);
    p = &p;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_malloc_host(0, &p));
    assert_null(p);
    p = &p;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_malloc_async(0, s, &p));
    assert_null(p);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

/* rill_free(NULL) is RILL_OK; a pointer rill did not hand out (a stack or libc pointer, an
 * interior pointer, page-locked host memory, or one already freed) is RILL_ERROR_INVALID_ARGUMENT
 * and does no harm. */
static void test_memory_free_unknown_pointer_is_invalid_argument(void **state) {
    (void)state;
    RT_OK(rill_free(NULL));
    int on_stack = 0;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(&on_stack));
    void *from_libc = malloc(64);
    assert_non_null(from_libc);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(from_libc));
    free(from_libc);

    unsigned char *p = dev_alloc(256);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(p + 16));
    void *pinned = NULL;
    RT_OK(rill_malloc_host(256, &pinned));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(pinned));
    RT_OK(rill_free_host(pinned));

    /* The allocation survived the bad frees: it still copies. */
    unsigned char in[256], out[256];
    fill_pattern(in, sizeof in, 3);
    RT_OK(rill_memcpy(p, in, sizeof in));
    RT_OK(rill_memcpy(out, p, sizeof out));
    assert_memory_equal(in, out, sizeof in);
    RT_OK(rill_free(p));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(p));

    /* The allocator still works after all that. */
    void *q = dev_alloc(256);
    RT_OK(rill_free(q));
}

/* rill_malloc_host: "Page-locked host memory": the host reads and writes it directly;
 * rill_free_host of anything else is RILL_ERROR_INVALID_ARGUMENT. */
static void test_memory_host_alloc_and_free(void **state) {
    (void)state;
    unsigned char *h = NULL;
    RT_OK(rill_malloc_host(4096, (void **)&h));
    assert_non_null(h);
    memset(h, 0xC3, 4096);
    assert_true(all_bytes(h, 4096, 0xC3));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_malloc_host(64, NULL));

    void *d = dev_alloc(64);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_host(d));
    RT_OK(rill_free(d));
    void *from_libc = malloc(64);
    assert_non_null(from_libc);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_host(from_libc));
    free(from_libc);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_host(h + 8));

    RT_OK(rill_free_host(h));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_host(h));
}

/* ---- copies ---- */

/* rill_memcpy: "Direction is inferred from where dst and src live (host memory, page-locked host
 * memory, or a device's memory)": host -> device -> device -> page-locked -> host keeps the
 * bytes. */
static void test_memory_memcpy_round_trip(void **state) {
    (void)state;
    enum { N = 100000 };
    unsigned char *in = malloc(N), *out = malloc(N);
    assert_non_null(in);
    assert_non_null(out);
    fill_pattern(in, N, 7);
    memset(out, 0, N);
    void *d1 = dev_alloc(N), *d2 = dev_alloc(N);
    unsigned char *pinned = NULL;
    RT_OK(rill_malloc_host(N, (void **)&pinned));

    RT_OK(rill_memcpy(d1, in, N));
    RT_OK(rill_memcpy(d2, d1, N));
    RT_OK(rill_memcpy(pinned, d2, N));
    bool pinned_ok = memcmp(pinned, in, N) == 0;
    RT_OK(rill_memcpy(out, pinned, N));
    bool out_ok = memcmp(out, in, N) == 0;
    /* pinned -> device and back, too. */
    memset(out, 0, N);
    RT_OK(rill_memcpy(d1, pinned, N));
    RT_OK(rill_memcpy(out, d1, N));
    bool again_ok = memcmp(out, in, N) == 0;

    RT_OK(rill_free_host(pinned));
    RT_OK(rill_free(d1));
    RT_OK(rill_free(d2));
    free(in);
    free(out);
    assert_true(pinned_ok);
    assert_true(out_ok);
    assert_true(again_ok);
}

/* A zero-byte rill_memcpy is RILL_OK and does nothing. */
static void test_memory_memcpy_zero_bytes_is_noop(void **state) {
    (void)state;
    unsigned char host[16];
    memset(host, 0x11, sizeof host);
    unsigned char *d = dev_alloc(16);
    RT_OK(rill_memcpy(d, host, sizeof host));
    unsigned char other[16];
    memset(other, 0x22, sizeof other);
    RT_OK(rill_memcpy(d, other, 0));
    RT_OK(rill_memcpy(other, d, 0));
    assert_true(all_bytes(other, sizeof other, 0x22));
    RT_OK(rill_memcpy(other, d, sizeof other));
    assert_true(all_bytes(other, sizeof other, 0x11));
    RT_OK(rill_free(d));
}

/* RILL_ERROR_INVALID_ARGUMENT: "NULL where a value is needed" in copies and fills. */
static void test_memory_copy_null_pointers_are_invalid(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    unsigned char host[8] = {0};
    void *d = dev_alloc(8);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(NULL, d, 8));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(host, NULL, 8));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy_async(NULL, d, 8, s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy_async(host, NULL, 8, s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memset_async(NULL, 0, 8, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free(d));
    RT_OK(rill_stream_destroy(s));
}

/* A copy or fill that runs past the end of a device allocation is RILL_ERROR_INVALID_ARGUMENT
 * and changes nothing ("Validate every argument before any side effect"); one that ends exactly
 * at the end is fine. */
static void test_memory_copy_past_end_is_invalid_argument(void **state) {
    (void)state;
    enum { N = 64 };
    rill_stream *s = new_stream();
    unsigned char *d = dev_alloc(N);
    unsigned char *d2 = dev_alloc(N);
    unsigned char host[2 * N];
    memset(host, 0xAA, sizeof host);
    RT_OK(rill_memcpy(d, host, N));

    unsigned char junk[2 * N];
    memset(junk, 0x55, sizeof junk);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(host, d, N + 1));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(d, junk, N + 1));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(d + N / 2, junk, N / 2 + 1));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy(d2, d + 1, N));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy_async(d + 1, junk, N, s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memcpy_async(junk, d + N - 1, 2, s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memset_async(d, 0x55, N + 1, s));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_memset_async(d + N - 1, 0x55, 2, s));
    RT_OK(rill_stream_synchronize(s));

    unsigned char back[N];
    RT_OK(rill_memcpy(back, d, N));
    assert_true(all_bytes(back, N, 0xAA));

    RT_OK(rill_memcpy(d + N - 1, junk, 1));
    RT_OK(rill_memset_async(d + N / 2, 0x55, N / 2, s));
    RT_OK(rill_memcpy_async(back, d, N, s));
    RT_OK(rill_stream_synchronize(s));
    assert_true(all_bytes(back, N / 2, 0xAA));
    assert_true(all_bytes(back + N / 2, N / 2, 0x55));

    RT_OK(rill_free(d));
    RT_OK(rill_free(d2));
    RT_OK(rill_stream_destroy(s));
}

/* rill_memcpy_async / rill_memset_async run in stream order, behind earlier work and in front
 * of later work. */
static void test_memory_async_ops_run_in_stream_order(void **state) {
    (void)state;
    enum { N = 4096 };
    static rt_gate g;
    memset(&g, 0, sizeof g);
    static unsigned char first[N], second[N];
    memset(first, 0, N);
    memset(second, 0, N);
    rill_stream *s = new_stream();
    unsigned char *d = dev_alloc(N);

    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g)); /* everything below queues behind it */
    RT_OK(rill_memset_async(d, 0xAB, N, s));
    RT_OK(rill_memcpy_async(first, d, N, s));
    RT_OK(rill_memset_async(d, 0x11 + 0x100, N / 2, s)); /* only the low byte counts */
    RT_OK(rill_memcpy_async(second, d, N, s));
    rill_status pending = rill_stream_query(s);
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(s));

    assert_int_equal(pending, RILL_NOT_READY);
    assert_false(atomic_load(&g.timed_out));
    assert_true(all_bytes(first, N, 0xAB));
    assert_true(all_bytes(second, N / 2, 0x11));
    assert_true(all_bytes(second + N / 2, N / 2, 0xAB));
    RT_OK(rill_free(d));
    RT_OK(rill_stream_destroy(s));
}

static void spin_fn(void *user_data) {
    (void)user_data;
    rt_spin_us(20000);
}

/* rill_memcpy: "it runs after all work already submitted to the current stream of the device
 * that src (else dst) belongs to, as if submitted there, and returns when the copy is done; work
 * on other streams is not waited for." */
static void test_memory_memcpy_follows_current_stream_only(void **state) {
    (void)state;
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    if (info.compute_units < 2)
        skip(); /* the blocked stream would hold the only compute unit */
    enum { N = 1024 };
    static rt_gate other_gate;
    memset(&other_gate, 0, sizeof other_gate);
    rill_stream *s = new_stream();
    rill_stream *other = new_stream();
    unsigned char *d = dev_alloc(N);
    unsigned char host[N];
    memset(host, 0, N);

    RT_OK(rill_launch_host_func(other, rt_gate_fn, &other_gate));
    rill_stream *prev = rill_set_current_stream(s);
    RT_OK(rill_launch_host_func(s, spin_fn, NULL));
    RT_OK(rill_memset_async(d, 0x5A, N, s));
    rill_status copied = rill_memcpy(host, d, N); /* src is device memory: after s's work */
    bool other_still_blocked = atomic_load(&other_gate.done) == 0;
    rill_set_current_stream(prev);
    atomic_store(&other_gate.open, 1);
    RT_OK(rill_stream_synchronize(other));

    assert_int_equal(copied, RILL_OK);
    assert_true(all_bytes(host, N, 0x5A));
    assert_true(other_still_blocked);
    assert_false(atomic_load(&other_gate.timed_out));

    /* dst on the device, src on the host: ordered on dst's device's current stream. */
    prev = rill_set_current_stream(s);
    unsigned char fresh[N];
    memset(fresh, 0x6B, N);
    RT_OK(rill_launch_host_func(s, spin_fn, NULL));
    RT_OK(rill_memset_async(d, 0x00, N, s));
    copied = rill_memcpy(d, fresh, N); /* must land after the memset */
    rill_set_current_stream(prev);
    assert_int_equal(copied, RILL_OK);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_memcpy(host, d, N));
    assert_true(all_bytes(host, N, 0x6B));

    RT_OK(rill_free(d));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(other));
}

/* ---- stream-ordered allocation ---- */

/* rill_malloc_async / rill_free_async: allocation and release in stream order; the memory is
 * usable by work on that stream in between. */
static void test_memory_malloc_async_and_free_async(void **state) {
    (void)state;
    enum { N = 8192 };
    static unsigned char host[N];
    memset(host, 0, N);
    rill_stream *s = new_stream();
    RT_OK(rill_stream_synchronize(s));
    size_t base = stats_now().allocated_bytes;

    void *p = &p;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_malloc_async(N, s, NULL));
    RT_OK(rill_malloc_async(N, s, &p));
    assert_non_null(p);
    RT_OK(rill_memset_async(p, 7, N, s));
    RT_OK(rill_memcpy_async(host, p, N, s));
    RT_OK(rill_free_async(p, s));
    RT_OK(rill_stream_synchronize(s));
    assert_true(all_bytes(host, N, 7));
    assert_int_equal(stats_now().allocated_bytes, base);

    /* A NULL stream is the current stream. */
    rill_stream *prev = rill_set_current_stream(s);
    void *q = NULL;
    rill_status allocated = rill_malloc_async(N, NULL, &q);
    rill_status freed = q != NULL ? rill_free_async(q, NULL) : RILL_ERROR_INTERNAL;
    rill_set_current_stream(prev);
    assert_int_equal(allocated, RILL_OK);
    assert_int_equal(freed, RILL_OK);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(stats_now().allocated_bytes, base);

    int on_stack = 0;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_async(&on_stack, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

/* ---- statistics ---- */

/* rill_mem_stats.allocated_bytes: "handed out and not yet freed"; allocations and frees count
 * calls; reserved and peak values bound the live bytes from above. */
static void test_memory_stats_track_live_allocations(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_get_stats(NULL, NULL));
    rill_mem_stats base = stats_now();

    void *big = dev_alloc(1 << 20);
    rill_mem_stats after_big = stats_now();
    void *small = dev_alloc(3000);
    rill_mem_stats after_small = stats_now();
    size_t big_bytes = after_big.allocated_bytes - base.allocated_bytes;
    size_t small_bytes = after_small.allocated_bytes - after_big.allocated_bytes;
    assert_true(after_big.allocated_bytes >= base.allocated_bytes + (1 << 20));
    assert_true(small_bytes >= 3000);
    assert_int_equal(after_small.allocations, base.allocations + 2);
    assert_true(after_small.reserved_bytes >= after_small.allocated_bytes);
    assert_true(after_small.peak_allocated_bytes >= after_small.allocated_bytes);
    assert_true(after_small.peak_reserved_bytes >= after_small.reserved_bytes);

    RT_OK(rill_free(big));
    rill_mem_stats after_free_big = stats_now();
    assert_int_equal(after_free_big.allocated_bytes, base.allocated_bytes + small_bytes);
    assert_int_equal(after_free_big.frees, base.frees + 1);
    assert_true(after_free_big.peak_allocated_bytes >= base.allocated_bytes + big_bytes);
    RT_OK(rill_free(small));
    rill_mem_stats end = stats_now();
    assert_int_equal(end.allocated_bytes, base.allocated_bytes);
    assert_int_equal(end.frees, base.frees + 2);
    assert_true(end.reserved_bytes >= end.allocated_bytes);

    /* Failed calls change nothing. */
    int on_stack = 0;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free(&on_stack));
    rill_mem_stats after_bad = stats_now();
    assert_int_equal(after_bad.allocated_bytes, end.allocated_bytes);
    assert_int_equal(after_bad.frees, end.frees);
}

static rill_mem_pool_stats pool_now(rill_mem_pool pool) {
    rill_mem_pool_stats st;
    RT_OK(rill_mem_get_pool_stats(NULL, pool, &st));
    return st;
}

/* rill_mem_get_pool_stats: "the rows of rill_mem_summary's per-pool table"; "small serves
 * requests up to 1 MiB, large the rest"; "Summed over both pools, allocated_bytes is
 * rill_mem_stats' allocated_bytes and reserved_bytes its reserved_bytes"; a freed block that
 * pending work of another stream still holds counts in pending_free_blocks until that work
 * completes. */
static void test_memory_pool_stats_count_each_pools_blocks(void **state) {
    (void)state;
    rill_mem_pool_stats bad;
    memset(&bad, 0xff, sizeof bad);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_mem_get_pool_stats(NULL, RILL_MEM_POOL_SMALL, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_get_pool_stats(NULL, (rill_mem_pool)2, &bad));
    assert_non_null(strstr(rill_last_error(), "RILL_MEM_POOL_SMALL or RILL_MEM_POOL_LARGE"));
    assert_int_equal(bad.segments, 0); /* out-parameters are zero on failure */
    assert_int_equal(bad.live_blocks, 0);

    rill_mem_pool_stats small0 = pool_now(RILL_MEM_POOL_SMALL);
    rill_mem_pool_stats large0 = pool_now(RILL_MEM_POOL_LARGE);
    void *s1 = dev_alloc(1000), *s2 = dev_alloc(100000), *s3 = dev_alloc(1u << 20);
    void *l1 = dev_alloc((1u << 20) + 1), *l2 = dev_alloc(5u << 20);
    rill_mem_pool_stats small = pool_now(RILL_MEM_POOL_SMALL);
    rill_mem_pool_stats large = pool_now(RILL_MEM_POOL_LARGE);
    rill_mem_stats all = stats_now();
    assert_int_equal(small.live_blocks, small0.live_blocks + 3);
    assert_int_equal(large.live_blocks, large0.live_blocks + 2);
    assert_true(small.allocated_bytes >= small0.allocated_bytes + 1000 + 100000 + (1u << 20));
    assert_true(large.allocated_bytes >= large0.allocated_bytes + (1u << 20) + 1 + (5u << 20));
    assert_true(small.segments >= 1 && large.segments >= 1);
    assert_true(small.reserved_bytes >= small.allocated_bytes);
    assert_true(large.reserved_bytes >= large.allocated_bytes);
    assert_int_equal(small.allocated_bytes + large.allocated_bytes, all.allocated_bytes);
    assert_int_equal(small.reserved_bytes + large.reserved_bytes, all.reserved_bytes);

    /* A free leaves a free block at least as large in its pool. */
    RT_OK(rill_free(l2));
    rill_mem_stats after_free = stats_now();
    rill_mem_pool_stats large_freed = pool_now(RILL_MEM_POOL_LARGE);
    assert_int_equal(large_freed.live_blocks, large.live_blocks - 1);
    assert_int_equal(large_freed.allocated_bytes,
                     large.allocated_bytes - (all.allocated_bytes - after_free.allocated_bytes));
    assert_true(large_freed.free_blocks >= 1);
    assert_true(large_freed.largest_free_bytes >= (5u << 20));
    assert_int_equal(pool_now(RILL_MEM_POOL_SMALL).live_blocks, small.live_blocks);

    /* Freed while a gated stream may still use it: pending until the stream's work is done. */
    rill_stream *s = new_stream();
    rt_gate g;
    rt_gate_reset(&g);
    RT_OK(rt_launch_gate_kernel(s, &g));
    RT_OK(rill_record_stream(l1, s));
    size_t pending0 = pool_now(RILL_MEM_POOL_LARGE).pending_free_blocks;
    RT_OK(rill_free(l1));
    rill_mem_pool_stats held = pool_now(RILL_MEM_POOL_LARGE);
    assert_int_equal(held.pending_free_blocks, pending0 + 1);
    rt_gate_open(&g);
    RT_OK(rill_stream_synchronize(s));
    assert_false(atomic_load(&g.timed_out));
    assert_int_equal(pool_now(RILL_MEM_POOL_LARGE).pending_free_blocks, pending0);
    RT_OK(rill_stream_destroy(s));

    RT_OK(rill_free(s1));
    RT_OK(rill_free(s2));
    RT_OK(rill_free(s3));
    rill_mem_pool_stats small_end = pool_now(RILL_MEM_POOL_SMALL);
    assert_int_equal(small_end.live_blocks, small0.live_blocks);
    assert_int_equal(small_end.allocated_bytes, small0.allocated_bytes);
}

/* rill_mem_stats.limit_bytes is "rill_mem_set_limit's limit; 0: none". */
static void test_memory_stats_carry_the_limit(void **state) {
    (void)state;
    assert_int_equal(stats_now().limit_bytes, 0);
    RT_OK(rill_mem_set_limit(NULL, (size_t)1 << 40));
    assert_int_equal(stats_now().limit_bytes, (size_t)1 << 40);
    RT_OK(rill_mem_set_limit(NULL, 0));
    assert_int_equal(stats_now().limit_bytes, 0);
}

/* rill_mem_reset_peak_stats: "Lowers peak_allocated_bytes and peak_reserved_bytes to the
 * current allocated and reserved bytes"; "counts are kept"; later peaks rise again. */
static void test_memory_reset_peak_stats_lowers_peaks_to_current(void **state) {
    (void)state;
    void *big = dev_alloc(8u << 20);
    RT_OK(rill_free(big));
    rill_mem_stats before = stats_now();
    assert_true(before.peak_allocated_bytes >= before.allocated_bytes + (8u << 20));
    RT_OK(rill_mem_reset_peak_stats(NULL));
    rill_mem_stats reset = stats_now();
    assert_int_equal(reset.peak_allocated_bytes, reset.allocated_bytes);
    assert_int_equal(reset.peak_reserved_bytes, reset.reserved_bytes);
    assert_int_equal(reset.allocations, before.allocations);
    assert_int_equal(reset.frees, before.frees);
    assert_int_equal(reset.cache_hits, before.cache_hits);

    /* Same-stream pairs go through the thread's cache: the peak still sees them. */
    rill_stream *s = new_stream();
    void *p = NULL;
    RT_OK(rill_malloc_async(1u << 20, s, &p));
    rill_mem_stats live = stats_now();
    assert_true(live.peak_allocated_bytes >= reset.allocated_bytes + (1u << 20));
    RT_OK(rill_free_async(p, s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_mem_reset_peak_stats(NULL));
    rill_mem_stats again = stats_now();
    assert_int_equal(again.peak_allocated_bytes, again.allocated_bytes);
    RT_OK(rill_stream_destroy(s));

    rill_device *forged = (rill_device *)&again;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_reset_peak_stats(forged));
}

/* rill_mem_get_limit: the limit rill_mem_set_limit set, "0: none"; a NULL out-parameter or a
 * device that is not one is RILL_ERROR_INVALID_ARGUMENT and leaves the limit as it was. */
static void test_memory_get_limit_returns_the_set_limit(void **state) {
    (void)state;
    size_t limit = 1;
    RT_OK(rill_mem_get_limit(NULL, &limit));
    assert_int_equal(limit, 0);
    RT_OK(rill_mem_set_limit(NULL, (size_t)3 << 30));
    RT_OK(rill_mem_get_limit(NULL, &limit));
    assert_int_equal(limit, (size_t)3 << 30);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_get_limit(NULL, NULL));
    rill_device *forged = (rill_device *)&limit;
    limit = 1;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_mem_get_limit(forged, &limit));
    assert_int_equal(limit, 0);
    RT_OK(rill_mem_get_limit(NULL, &limit));
    assert_int_equal(limit, (size_t)3 << 30);
    RT_OK(rill_mem_set_limit(NULL, 0));
    RT_OK(rill_mem_get_limit(NULL, &limit));
    assert_int_equal(limit, 0);
}

/* RILL_ERROR_OUT_OF_MEMORY: "the pool cannot serve it, even from its emptied cache":
 * with rill_mem_set_limit below what is asked, the allocation fails, leaves the out-parameter
 * NULL and explains; without the limit ("0: none") it succeeds again. */
static void test_memory_over_limit_is_out_of_memory(void **state) {
    (void)state;
    rill_mem_stats before = stats_now();
    RT_OK(rill_mem_set_limit(NULL, before.reserved_bytes + (1u << 20)));
    void *p = &p;
    rill_status st = rill_malloc(NULL, 4u << 20, &p);
    char sentence[512];
    snprintf(sentence, sizeof sentence, "%s", rill_last_error());
    RT_OK(rill_mem_set_limit(NULL, 0));
    if (st != RILL_ERROR_OUT_OF_MEMORY)
        fail_msg("rill_malloc over the limit returned %s", rill_status_name(st));
    assert_null(p);
    assert_true(sentence[0] != '\0');
    assert_int_equal(stats_now().allocated_bytes, before.allocated_bytes);

    void *q = dev_alloc(4u << 20);
    RT_OK(rill_free(q));
}

/* A lookup of a pointer that is no allocated block's start (an interior or stale pointer, as an
 * op's argument check makes) never reads a segment that another thread releases meanwhile: one
 * thread allocates, frees and empties the cache (each round releases the segment) while another
 * exports interior pointers of those rounds, live or stale (rill_ipc_get_mem_handle refuses
 * both). AddressSanitizer reports a read of a released segment. */
typedef struct churn {
    _Atomic(uintptr_t) last; /* the last block's address, freed or about to be */
    atomic_int stop;
    atomic_int failures;
} churn;

static void *churn_main(void *arg) {
    churn *c = arg;
    for (int i = 0; i < 2000; i++) {
        void *p = NULL;
        if (rill_malloc(NULL, (size_t)1 << 20, &p) != RILL_OK) {
            atomic_fetch_add(&c->failures, 1);
            break;
        }
        atomic_store(&c->last, (uintptr_t)p);
        if (rill_free(p) != RILL_OK || rill_mem_empty_cache(NULL) != RILL_OK)
            atomic_fetch_add(&c->failures, 1);
    }
    atomic_store(&c->stop, 1);
    return NULL;
}

static void test_memory_lookups_race_with_released_segments(void **state) {
    (void)state;
    static churn c;
    memset(&c, 0, sizeof c);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, churn_main, &c), 0);
    int checked = 0;
    while (!atomic_load(&c.stop)) {
        uintptr_t last = atomic_load(&c.last);
        if (last == 0)
            continue;
        rill_ipc_mem_handle h;
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_ipc_get_mem_handle((void *)(last + 4096), &h));
        checked++;
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&c.failures), 0);
    assert_true(checked > 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_malloc_and_free),
        cmocka_unit_test(test_memory_zero_bytes_is_invalid_argument),
        cmocka_unit_test(test_memory_free_unknown_pointer_is_invalid_argument),
        cmocka_unit_test(test_memory_host_alloc_and_free),
        cmocka_unit_test(test_memory_memcpy_round_trip),
        cmocka_unit_test(test_memory_memcpy_zero_bytes_is_noop),
        cmocka_unit_test(test_memory_copy_null_pointers_are_invalid),
        cmocka_unit_test(test_memory_copy_past_end_is_invalid_argument),
        cmocka_unit_test(test_memory_async_ops_run_in_stream_order),
        cmocka_unit_test(test_memory_memcpy_follows_current_stream_only),
        cmocka_unit_test(test_memory_malloc_async_and_free_async),
        cmocka_unit_test(test_memory_stats_track_live_allocations),
        cmocka_unit_test(test_memory_over_limit_is_out_of_memory),
        cmocka_unit_test(test_memory_reset_peak_stats_lowers_peaks_to_current),
        cmocka_unit_test(test_memory_get_limit_returns_the_set_limit),
        cmocka_unit_test(test_memory_pool_stats_count_each_pools_blocks),
        cmocka_unit_test(test_memory_stats_carry_the_limit),
        cmocka_unit_test(test_memory_lookups_race_with_released_segments),
    };
    return RT_RUN(tests);
}
