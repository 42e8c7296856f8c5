/* SPDX-License-Identifier: MIT */
/* Kernels and host functions: descriptor and launch validation, argument copying, grids, block
 * concurrency, stream order, and blocking calls made from device work.
 *
 * Kernels and host functions report through atomics; only the test's main thread asserts. Every
 * wait has a deadline. */
#include "fixture.h"

#include "util/alloc.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS          1000000000ull
#define WAIT_TIMEOUT_NS (10 * SEC_NS)

static bool wait_int(atomic_int *v) {
    uint64_t deadline = rt_now_ns() + WAIT_TIMEOUT_NS;
    while (atomic_load(v) == 0) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

static void noop_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

static rill_kernel *make_kernel(const char *name, rill_cpu_kernel_fn fn) {
    rill_kernel_desc desc = {.name = name, .cpu = fn};
    rill_kernel *kernel = NULL;
    RT_OK(rill_kernel_create(&desc, &kernel));
    assert_non_null(kernel);
    return kernel;
}

static rill_stream *new_stream(void) {
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    assert_non_null(s);
    return s;
}

static int compute_units(void) {
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    return info.compute_units;
}

/* ---- validation ---- */

/* RILL_ERROR_INVALID_ARGUMENT: "NULL where a value is needed": a NULL descriptor, a descriptor
 * with no body, or one with no name ("shown in errors, traces and graph dumps") is refused, and
 * the out-parameter is left NULL. */
static void test_kernel_create_bad_desc_is_invalid_argument(void **state) {
    (void)state;
    const rill_kernel_desc no_body = {.name = "no_body"};
    const rill_kernel_desc no_name = {.name = NULL, .cpu = noop_kernel};
    const rill_kernel_desc *bad[] = {NULL, &no_body, &no_name};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rill_kernel *k = (rill_kernel *)&k;
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_kernel_create(bad[i], &k));
        assert_null(k);
    }
    const rill_kernel_desc good = {.name = "noop", .cpu = noop_kernel};
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_kernel_create(&good, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_kernel_destroy(NULL));
    rill_kernel *k = NULL;
    RT_OK(rill_kernel_create(&good, &k));
    assert_non_null(k);
    RT_OK(rill_kernel_destroy(k));
}

/* RILL_ERROR_NOT_SUPPORTED: "the device or build lacks the feature": a kernel with only a CUDA
 * body is a valid kernel, but the CPU device cannot run it. */
static void test_kernel_without_cpu_body_is_not_supported_on_cpu(void **state) {
    (void)state;
    const rill_kernel_desc cuda_only = {
        .name = "cuda_only", .cuda_ptx = ".version 7.0\n", .cuda_entry = "cuda_only"};
    rill_kernel *k = NULL;
    RT_OK(rill_kernel_create(&cuda_only, &k));
    rill_device *cpu = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(cpu, 0, &s));
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_launch_kernel(s, k, &launch));
    assert_non_null(strstr(rill_last_error(), "cuda_only"));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

typedef struct count_args {
    atomic_int *count;
} count_args;

static void count_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    count_args a;
    memcpy(&a, args, sizeof a);
    atomic_fetch_add(a.count, 1);
}

/* rill_launch.grid: "0 in a dimension is invalid"; a NULL kernel or launch, or args NULL with a
 * non-zero args_size, is refused too. Nothing runs and the stream is not put in error. */
static void test_kernel_launch_bad_arguments_are_invalid(void **state) {
    (void)state;
    static atomic_int count;
    atomic_store(&count, 0);
    rill_kernel *k = make_kernel("count_kernel", count_kernel);
    rill_stream *s = new_stream();
    count_args a = {&count};
    const rill_dim3 bad_grids[] = {{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, 0, 0}};
    for (size_t i = 0; i < sizeof bad_grids / sizeof bad_grids[0]; i++) {
        rill_launch launch = {
            .grid = bad_grids[i], .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_kernel(s, k, &launch));
    }
    rill_launch ok = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_kernel(s, NULL, &ok));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_kernel(s, k, NULL));
    rill_launch null_args = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = NULL, .args_size = 16};
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_kernel(s, k, &null_args));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&count), 0);

    RT_OK(rill_launch_kernel(s, k, &ok));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&count), 1);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* A kernel without arguments (args NULL, args_size 0) launches and runs. */
static void test_kernel_launch_without_args_runs(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("noop", noop_kernel);
    rill_stream *s = new_stream();
    rill_launch launch = {.grid = {3, 1, 1}, .block = {1, 1, 1}};
    RT_OK(rill_launch_kernel(s, k, &launch));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

static atomic_int host_fn_seen; /* 1: ran with NULL user_data, 2: ran with a pointer */

static void record_user_data_fn(void *user_data) {
    atomic_store(&host_fn_seen, user_data == NULL ? 1 : 2);
}

/* rill_launch_host_func: fn is required ("NULL where a value is needed"); user_data is passed
 * through, NULL included; a NULL stream is the current stream. */
static void test_kernel_host_func_arguments(void **state) {
    (void)state;
    static int some_data;
    atomic_store(&host_fn_seen, 0);
    rill_stream *s = new_stream();
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_host_func(s, NULL, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_launch_host_func(NULL, NULL, &some_data));
    RT_OK(rill_launch_host_func(s, record_user_data_fn, &some_data));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&host_fn_seen), 2);
    RT_OK(rill_launch_host_func(s, record_user_data_fn, NULL));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&host_fn_seen), 1);

    atomic_store(&host_fn_seen, 0);
    static rt_gate g;
    memset(&g, 0, sizeof g);
    rill_stream *prev = rill_set_current_stream(s);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));
    rill_status launched = rill_launch_host_func(NULL, record_user_data_fn, &some_data);
    rill_status pending = rill_stream_query(s);
    rill_set_current_stream(prev);
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(launched, RILL_OK);
    assert_int_equal(pending, RILL_NOT_READY); /* it queued behind the gate on s */
    assert_int_equal(atomic_load(&host_fn_seen), 2);
    RT_OK(rill_stream_destroy(s));
}

/* ---- arguments ---- */

typedef struct value_args {
    int value;
    char pad[60];
    atomic_int *seen;
} value_args;

static void value_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    value_args a;
    memcpy(&a, args, sizeof a);
    atomic_store(a.seen, a.value);
}

/* rill_launch.args: "packed like the kernel's parameters; copied": the caller may change or free
 * its memory as soon as the launch returns; the kernel sees the values at submit. */
static void test_kernel_args_are_copied_at_submit(void **state) {
    (void)state;
    static rt_gate g;
    static atomic_int seen_stack, seen_heap;
    memset(&g, 0, sizeof g);
    atomic_store(&seen_stack, 0);
    atomic_store(&seen_heap, 0);
    rill_kernel *k = make_kernel("value_kernel", value_kernel);
    rill_stream *s = new_stream();
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));

    value_args on_stack = {.value = 11, .seen = &seen_stack};
    rill_launch launch = {
        .grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &on_stack, .args_size = sizeof on_stack};
    rill_status st1 = rill_launch_kernel(s, k, &launch);
    on_stack.value = 99;

    value_args *on_heap = malloc(sizeof *on_heap);
    assert_non_null(on_heap);
    *on_heap = (value_args){.value = 22, .seen = &seen_heap};
    launch.args = on_heap;
    rill_status st2 = rill_launch_kernel(s, k, &launch);
    memset(on_heap, 0x5a, sizeof *on_heap);
    free(on_heap);

    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(st1, RILL_OK);
    assert_int_equal(st2, RILL_OK);
    assert_false(atomic_load(&g.timed_out));
    assert_int_equal(atomic_load(&seen_stack), 11);
    assert_int_equal(atomic_load(&seen_heap), 22);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

enum { BIG_ARGS_BYTES = 1024 };

typedef struct big_args {
    atomic_int *mismatches;
    unsigned char bytes[BIG_ARGS_BYTES];
} big_args;

static void big_args_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const big_args *a = args; /* the library's copy is aligned for any parameter type */
    int wrong = 0;
    for (int i = 0; i < BIG_ARGS_BYTES; i++)
        wrong += a->bytes[i] != (unsigned char)(i * 7 + 1);
    atomic_store(a->mismatches, wrong + 1); /* 1 means all bytes matched */
}

static void fill_big_args(big_args *a, atomic_int *mismatches) {
    a->mismatches = mismatches;
    for (int i = 0; i < BIG_ARGS_BYTES; i++)
        a->bytes[i] = (unsigned char)(i * 7 + 1);
}

/* rill_launch.args: "copied", however large: a 1 KiB argument block that the caller overwrites,
 * or frees, right after the launch reaches the kernel intact. */
static void test_kernel_large_args_are_copied(void **state) {
    (void)state;
    static rt_gate g;
    static atomic_int from_static, from_heap;
    static big_args reused;
    memset(&g, 0, sizeof g);
    atomic_store(&from_static, 0);
    atomic_store(&from_heap, 0);
    rill_kernel *k = make_kernel("big_args_kernel", big_args_kernel);
    rill_stream *s = new_stream();
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &g));

    fill_big_args(&reused, &from_static);
    rill_launch launch = {
        .grid = {2, 1, 1}, .block = {1, 1, 1}, .args = &reused, .args_size = sizeof reused};
    rill_status st1 = rill_launch_kernel(s, k, &launch);
    memset(reused.bytes, 0, sizeof reused.bytes);

    big_args *heap = malloc(sizeof *heap);
    assert_non_null(heap);
    fill_big_args(heap, &from_heap);
    launch.args = heap;
    rill_status st2 = rill_launch_kernel(s, k, &launch);
    explicit_bzero(heap->bytes, sizeof heap->bytes);
    free(heap);

    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(st1, RILL_OK);
    assert_int_equal(st2, RILL_OK);
    assert_int_equal(atomic_load(&from_static), 1);
    assert_int_equal(atomic_load(&from_heap), 1);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* ---- grids ---- */

enum { GX = 3, GY = 4, GZ = 5 };

typedef struct grid_args {
    atomic_int *counts; /* [z][y][x] */
    atomic_int *bad;
    rill_dim3 grid;
    int units;
} grid_args;

static void grid_kernel(const rill_block_ctx *ctx, const void *args) {
    grid_args a;
    memcpy(&a, args, sizeof a);
    rill_dim3 g = ctx->grid_dim, b = ctx->block_idx;
    if (g.x != a.grid.x || g.y != a.grid.y || g.z != a.grid.z || b.x >= g.x || b.y >= g.y ||
        b.z >= g.z || ctx->worker < 0 || ctx->worker >= a.units) {
        atomic_fetch_add(a.bad, 1);
        return;
    }
    atomic_fetch_add(&a.counts[((size_t)b.z * g.y + b.y) * g.x + b.x], 1);
}

static void run_grid(rill_dim3 grid) {
    size_t n = (size_t)grid.x * grid.y * grid.z;
    atomic_int *counts = calloc(n, sizeof *counts);
    assert_non_null(counts);
    static atomic_int bad;
    atomic_store(&bad, 0);
    rill_kernel *k = make_kernel("grid_kernel", grid_kernel);
    rill_stream *s = new_stream();
    grid_args a = {counts, &bad, grid, compute_units()};
    rill_launch launch = {.grid = grid, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, k, &launch));
    RT_OK(rill_stream_synchronize(s));
    size_t wrong = 0, first_wrong = n;
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&counts[i]) != 1 && wrong++ == 0)
            first_wrong = i;
    }
    free(counts);
    assert_int_equal(atomic_load(&bad), 0);
    if (wrong != 0)
        fail_msg("%zu of %zu blocks did not run exactly once (first: linear index %zu)", wrong, n,
                 first_wrong);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* rill_block_ctx: "one call per block of the grid", with its block_idx, the grid_dim and the
 * compute unit ("worker") that runs it: every block of a 3-D grid runs exactly once. */
static void test_kernel_3d_grid_runs_every_block_once(void **state) {
    (void)state;
    run_grid((rill_dim3){GX, GY, GZ});
    run_grid((rill_dim3){1, 1, 1});
    run_grid((rill_dim3){1000, 1, 1});
    run_grid((rill_dim3){1, 7, 9});
}

typedef struct meet_args {
    atomic_int *started;
    atomic_int *met;
    int blocks;
} meet_args;

/* Each block counts itself started, then spins (5 s deadline) until every block has started. */
static void meet_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    meet_args a;
    memcpy(&a, args, sizeof a);
    atomic_fetch_add(a.started, 1);
    uint64_t deadline = rt_now_ns() + 5 * SEC_NS;
    while (rt_now_ns() < deadline) {
        if (atomic_load(a.started) >= a.blocks) {
            atomic_fetch_add(a.met, 1);
            return;
        }
        sched_yield();
    }
}

static void run_meet(int blocks) {
    static atomic_int started, met;
    atomic_store(&started, 0);
    atomic_store(&met, 0);
    rill_kernel *k = make_kernel("meet_kernel", meet_kernel);
    rill_stream *s = new_stream();
    meet_args a = {&started, &met, blocks};
    rill_launch launch = {
        .grid = {(uint32_t)blocks, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(s, k, &launch));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&started), blocks);
    assert_int_equal(atomic_load(&met), blocks);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* "Blocks of one launch run concurrently on the device's compute units": two blocks that each
 * wait for the other to start both finish. */
static void test_kernel_two_blocks_run_concurrently(void **state) {
    (void)state;
    if (compute_units() < 2)
        skip(); /* one compute unit cannot run two blocks at once */
    run_meet(2);
}

/* "Blocks of one launch run concurrently on the device's compute units": a grid of one block
 * per compute unit has all its blocks running at once. */
static void test_kernel_blocks_fill_all_compute_units(void **state) {
    (void)state;
    run_meet(compute_units());
}

/* ---- order ---- */

enum { ORDER_CMDS = 300 };

typedef struct span {
    _Atomic uint64_t start; /* smallest start ticket of any block */
    _Atomic uint64_t end;   /* largest end ticket of any block */
    atomic_int blocks;
} span;

static void span_begin(span *sp) {
    uint64_t t = rt_take_ticket();
    uint64_t cur = 0;
    while (!atomic_compare_exchange_weak(&sp->start, &cur, t)) {
        if (cur != 0 && cur < t)
            break;
    }
}

static void span_end(span *sp) {
    uint64_t t = rt_take_ticket();
    uint64_t cur = atomic_load(&sp->end);
    while (cur < t && !atomic_compare_exchange_weak(&sp->end, &cur, t)) {
    }
    atomic_fetch_add(&sp->blocks, 1);
}

static void span_host_fn(void *user_data) {
    span_begin(user_data);
    span_end(user_data);
}

typedef struct span_args {
    span *sp;
} span_args;

static void span_kernel(const rill_block_ctx *ctx, const void *args) {
    span_args a;
    memcpy(&a, args, sizeof a);
    span_begin(a.sp);
    if (ctx->block_idx.x % 3 == 0)
        rt_spin_us(20);
    span_end(a.sp);
}

/* rill_launch_host_func: "Runs fn(user_data) on a worker in stream order": interleaved with
 * multi-block kernels, each command starts after every block of the one before has ended. */
static void test_kernel_host_funcs_and_kernels_in_stream_order(void **state) {
    (void)state;
    static span spans[ORDER_CMDS];
    static int blocks[ORDER_CMDS];
    memset(spans, 0, sizeof spans);
    rill_kernel *k = make_kernel("span_kernel", span_kernel);
    rill_stream *s = new_stream();
    for (int i = 0; i < ORDER_CMDS; i++) {
        if (i % 3 == 0) {
            blocks[i] = 1;
            RT_OK(rill_launch_host_func(s, span_host_fn, &spans[i]));
        } else {
            blocks[i] = 1 + (i * 7) % 9;
            span_args a = {&spans[i]};
            rill_launch launch = {.grid = {(uint32_t)blocks[i], 1, 1},
                                  .block = {1, 1, 1},
                                  .args = &a,
                                  .args_size = sizeof a};
            RT_OK(rill_launch_kernel(s, k, &launch));
        }
    }
    RT_OK(rill_stream_synchronize(s));
    for (int i = 0; i < ORDER_CMDS; i++) {
        assert_int_equal(atomic_load(&spans[i].blocks), blocks[i]);
        if (i > 0 && atomic_load(&spans[i].start) <= atomic_load(&spans[i - 1].end))
            fail_msg("command %d started (ticket %llu) before command %d ended (ticket %llu)", i,
                     (unsigned long long)atomic_load(&spans[i].start), i - 1,
                     (unsigned long long)atomic_load(&spans[i - 1].end));
    }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

typedef struct slow_span_args {
    span *sp;
    unsigned spin_us;
} slow_span_args;

static void slow_span_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    slow_span_args a;
    memcpy(&a, args, sizeof a);
    span_begin(a.sp);
    rt_spin_us(a.spin_us);
    span_end(a.sp);
}

/* Streams are in-order queues: the command after a multi-block kernel starts only after every
 * block of the kernel has ended, whichever compute unit ran it. */
static void test_kernel_next_command_waits_for_every_block(void **state) {
    (void)state;
    enum { ROUNDS = 20 };
    static span kernels[ROUNDS], hosts[ROUNDS];
    memset(kernels, 0, sizeof kernels);
    memset(hosts, 0, sizeof hosts);
    int units = compute_units();
    uint32_t blocks = (uint32_t)units * 3u;
    rill_kernel *k = make_kernel("slow_span_kernel", slow_span_kernel);
    rill_stream *s = new_stream();
    for (int r = 0; r < ROUNDS; r++) {
        slow_span_args a = {&kernels[r], 200};
        rill_launch launch = {
            .grid = {blocks, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
        RT_OK(rill_launch_kernel(s, k, &launch));
        RT_OK(rill_launch_host_func(s, span_host_fn, &hosts[r]));
    }
    RT_OK(rill_stream_synchronize(s));
    for (int r = 0; r < ROUNDS; r++) {
        assert_int_equal(atomic_load(&kernels[r].blocks), (int)blocks);
        if (atomic_load(&hosts[r].start) <= atomic_load(&kernels[r].end))
            fail_msg("round %d: the host function started (ticket %llu) before the last block of "
                     "the kernel before it ended (ticket %llu)",
                     r, (unsigned long long)atomic_load(&hosts[r].start),
                     (unsigned long long)atomic_load(&kernels[r].end));
    }
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* ---- blocking calls from device work ---- */

enum { CALL_STREAM_SYNC, CALL_EVENT_SYNC, CALL_MEMCPY, CALL_DEVICE_SYNC, NUM_CALLS };
static const char *const call_names[NUM_CALLS] = {
    "rill_stream_synchronize", "rill_event_synchronize", "rill_memcpy", "rill_device_synchronize"};

typedef struct blocking_probe {
    rill_stream *other; /* an idle stream */
    rill_event *event;  /* recorded and complete */
    void *device_buf;   /* 64 bytes of device memory */
    char host_buf[64];
    atomic_int status[NUM_CALLS];
    atomic_int sentence_set[NUM_CALLS]; /* rill_last_error() was non-empty after the call */
    atomic_int done;
} blocking_probe;

/* Makes every blocking call and records what each returned; the device-wide synchronize goes
 * last, since a broken engine that honoured it would wait for this very work. */
static void probe_blocking_calls(blocking_probe *p) {
    rill_status st[NUM_CALLS];
    st[CALL_STREAM_SYNC] = rill_stream_synchronize(p->other);
    atomic_store(&p->sentence_set[CALL_STREAM_SYNC], rill_last_error()[0] != '\0');
    st[CALL_EVENT_SYNC] = rill_event_synchronize(p->event);
    atomic_store(&p->sentence_set[CALL_EVENT_SYNC], rill_last_error()[0] != '\0');
    st[CALL_MEMCPY] = rill_memcpy(p->host_buf, p->device_buf, sizeof p->host_buf);
    atomic_store(&p->sentence_set[CALL_MEMCPY], rill_last_error()[0] != '\0');
    st[CALL_DEVICE_SYNC] = rill_device_synchronize(NULL);
    atomic_store(&p->sentence_set[CALL_DEVICE_SYNC], rill_last_error()[0] != '\0');
    for (int i = 0; i < NUM_CALLS; i++)
        atomic_store(&p->status[i], (int)st[i]);
    atomic_store(&p->done, 1);
}

static void blocking_host_fn(void *user_data) {
    probe_blocking_calls(user_data);
}

typedef struct probe_args {
    blocking_probe *probe;
} probe_args;

static void blocking_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    probe_args a;
    memcpy(&a, args, sizeof a);
    probe_blocking_calls(a.probe);
}

static void run_blocking_probe(bool from_kernel) {
    static blocking_probe p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < NUM_CALLS; i++)
        atomic_store(&p.status[i], -1);
    rill_stream *s = new_stream();
    p.other = new_stream();
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &p.event));
    RT_OK(rill_event_record(p.event, p.other));
    RT_OK(rill_event_synchronize(p.event));
    RT_OK(rill_malloc(NULL, sizeof p.host_buf, &p.device_buf));
    RT_OK(rill_memset_async(p.device_buf, 0, sizeof p.host_buf, s));
    RT_OK(rill_stream_synchronize(s));

    rill_kernel *k = make_kernel("blocking_kernel", blocking_kernel);
    probe_args a = {&p};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    if (from_kernel)
        RT_OK(rill_launch_kernel(s, k, &launch));
    else
        RT_OK(rill_launch_host_func(s, blocking_host_fn, &p));
    bool done = wait_int(&p.done);
    if (!done)
        fail_msg("the blocking calls inside the %s did not return within the deadline",
                 from_kernel ? "kernel" : "host function");
    /* Refused calls are the caller's mistake, not a failure of the stream's work. */
    RT_OK(rill_stream_synchronize(s));
    for (int i = 0; i < NUM_CALLS; i++) {
        rill_status st = (rill_status)atomic_load(&p.status[i]);
        if (st != RILL_ERROR_NOT_PERMITTED)
            fail_msg("%s inside a %s returned %s, expected RILL_ERROR_NOT_PERMITTED", call_names[i],
                     from_kernel ? "kernel" : "host function", rill_status_name(st));
        assert_true(atomic_load(&p.sentence_set[i]));
    }
    RT_OK(rill_free(p.device_buf));
    RT_OK(rill_event_destroy(p.event));
    RT_OK(rill_stream_destroy(p.other));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* rill_launch_host_func: "fn must not block on rill (synchronize calls from it return
 * RILL_ERROR_NOT_PERMITTED)"; RILL_ERROR_NOT_PERMITTED: "e.g. a blocking call from inside a host
 * function or kernel" (rill_memcpy is synchronous, so it blocks too). */
static void test_kernel_blocking_calls_in_host_func_not_permitted(void **state) {
    (void)state;
    run_blocking_probe(false);
}

/* RILL_ERROR_NOT_PERMITTED: "e.g. a blocking call from inside a host function or kernel". */
static void test_kernel_blocking_calls_in_kernel_not_permitted(void **state) {
    (void)state;
    run_blocking_probe(true);
}

/* ---- lifetime ---- */

enum { CHURN_OWNERS = 3, CHURN_SYNCERS = 2, CHURN_ROUNDS = 400, CHURN_LAUNCHES = 4 };

typedef struct churn {
    atomic_int ready;    /* threads at the start line */
    atomic_int owners;   /* owner threads still running */
    atomic_int failures; /* calls that did not return RILL_OK */
    atomic_int ran;      /* blocks run, every launch of every kernel */
    char first_error[600];
} churn;

static churn the_churn;

static void churn_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    count_args a;
    memcpy(&a, args, sizeof a);
    atomic_fetch_add(a.count, 1);
}

static void churn_start(void) {
    atomic_fetch_add(&the_churn.ready, 1);
    while (atomic_load(&the_churn.ready) < CHURN_OWNERS + CHURN_SYNCERS)
        sched_yield();
}

static void churn_check(rill_status st) {
    /* The first failure keeps its sentence for the main thread to report. */
    if (st != RILL_OK && atomic_fetch_add(&the_churn.failures, 1) == 0)
        snprintf(the_churn.first_error, sizeof the_churn.first_error, "%s: %s",
                 rill_status_name(st), rill_last_error());
}

/* Each owner creates, launches and destroys kernels of its own, never waiting for the launches:
 * a kernel is destroyed while its launches are queued (directly, or through an exec that
 * outlives its graph), and another thread's create or synchronize looks at the list of destroyed
 * kernels meanwhile. */
static void *churn_owner(void *arg) {
    (void)arg;
    rill_stream *s = NULL;
    churn_check(rill_stream_create(NULL, 0, &s));
    count_args a = {&the_churn.ran};
    rill_launch launch = {.grid = {3, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    const rill_kernel_desc desc = {.name = "churn", .cpu = churn_kernel};
    churn_start();
    for (int r = 0; r < CHURN_ROUNDS && s != NULL; r++) {
        rill_kernel *k = NULL;
        rill_status st = rill_kernel_create(&desc, &k);
        churn_check(st);
        if (st != RILL_OK)
            break;
        if (r % 4 == 3) {
            /* Through a graph: the exec names the kernel after both are destroyed. */
            rill_graph *g = NULL;
            rill_graph_exec *x = NULL;
            churn_check(rill_graph_create(&g));
            rill_graph_node *node = NULL;
            churn_check(rill_graph_add_kernel_node(g, NULL, 0, k, &launch, &node));
            churn_check(rill_graph_instantiate(g, &x));
            churn_check(rill_graph_destroy(g));
            churn_check(rill_kernel_destroy(k));
            for (int i = 0; i < CHURN_LAUNCHES && x != NULL; i++)
                churn_check(rill_graph_launch(x, s));
            if (x != NULL)
                churn_check(rill_graph_exec_destroy(x));
            continue;
        }
        for (int i = 0; i < CHURN_LAUNCHES; i++)
            churn_check(rill_launch_kernel(s, k, &launch));
        churn_check(rill_kernel_destroy(k));
    }
    if (s != NULL) {
        churn_check(rill_stream_synchronize(s));
        churn_check(rill_stream_destroy(s));
    }
    atomic_fetch_sub(&the_churn.owners, 1);
    return NULL;
}

static void *churn_syncer(void *arg) {
    (void)arg;
    churn_start();
    while (atomic_load(&the_churn.owners) > 0)
        churn_check(rill_device_synchronize(NULL));
    return NULL;
}

/* rill.h: "Every function is thread-safe", and a destroyed kernel lives until its queued
 * launches, and the graphs and execs that name it, are done: threads that each create, launch and
 * destroy their own kernels while others call rill_device_synchronize run every launch, and free no
 * kernel early (ASan, TSan). */
static void test_kernel_destroy_racing_create_and_synchronize_runs_every_launch(void **state) {
    (void)state;
    memset(&the_churn, 0, sizeof the_churn);
    atomic_store(&the_churn.owners, CHURN_OWNERS);
    pthread_t threads[CHURN_OWNERS + CHURN_SYNCERS];
    for (int i = 0; i < CHURN_OWNERS + CHURN_SYNCERS; i++)
        assert_int_equal(
            pthread_create(&threads[i], NULL, i < CHURN_OWNERS ? churn_owner : churn_syncer, NULL),
            0);
    for (int i = 0; i < CHURN_OWNERS + CHURN_SYNCERS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    RT_OK(rill_device_synchronize(NULL));
    if (atomic_load(&the_churn.failures) != 0)
        fail_msg("%d calls failed, the first with %s", atomic_load(&the_churn.failures),
                 the_churn.first_error);
    assert_int_equal(atomic_load(&the_churn.ran), CHURN_OWNERS * CHURN_ROUNDS * CHURN_LAUNCHES * 3);
}

static void slow_count_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    count_args a;
    memcpy(&a, args, sizeof a);
    rt_spin_us(2000);
    atomic_fetch_add(a.count, 1);
}

/* A destroyed kernel lives until its queued launches have run; without memory to note them,
 * rill_kernel_destroy waits for them instead (and still succeeds). */
static void test_kernel_destroy_without_memory_waits_for_its_launches(void **state) {
    (void)state;
    enum { LAUNCHES = 5 };
    static atomic_int count;
    atomic_store(&count, 0);
    rill_kernel *k = make_kernel("slow_count", slow_count_kernel);
    rill_stream *s = new_stream();
    count_args a = {&count};
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    for (int i = 0; i < LAUNCHES; i++)
        RT_OK(rill_launch_kernel(s, k, &launch));
    rill__alloc_fail_after(1);
    rill_status st = rill_kernel_destroy(k);
    rill__alloc_fail_after(0);
    RT_OK(st);
    assert_int_equal(atomic_load(&count), LAUNCHES);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_create_bad_desc_is_invalid_argument),
        cmocka_unit_test(test_kernel_without_cpu_body_is_not_supported_on_cpu),
        cmocka_unit_test(test_kernel_launch_bad_arguments_are_invalid),
        cmocka_unit_test(test_kernel_launch_without_args_runs),
        cmocka_unit_test(test_kernel_host_func_arguments),
        cmocka_unit_test(test_kernel_args_are_copied_at_submit),
        cmocka_unit_test(test_kernel_large_args_are_copied),
        cmocka_unit_test(test_kernel_3d_grid_runs_every_block_once),
        cmocka_unit_test(test_kernel_two_blocks_run_concurrently),
        cmocka_unit_test(test_kernel_blocks_fill_all_compute_units),
        cmocka_unit_test(test_kernel_host_funcs_and_kernels_in_stream_order),
        cmocka_unit_test(test_kernel_next_command_waits_for_every_block),
        cmocka_unit_test(test_kernel_blocking_calls_in_host_func_not_permitted),
        cmocka_unit_test(test_kernel_blocking_calls_in_kernel_not_permitted),
        cmocka_unit_test(test_kernel_destroy_racing_create_and_synchronize_runs_every_launch),
        cmocka_unit_test(test_kernel_destroy_without_memory_waits_for_its_launches),
    };
    return RT_RUN(tests);
}
