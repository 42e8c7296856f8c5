/* SPDX-License-Identifier: MIT */
/* bench_runtime: what rill's CPU device costs and gains, each figure
 * against a plain-pthreads (or single-threaded OpenBLAS) baseline measured
 * in the same run, alternating with it repeat by repeat:
 *   a. launch throughput and enqueue cost      b. cross-stream ping-pong
 *   c. host wake-up in rill_event_synchronize  d. two kernels on two streams
 *   e. the matmul and conv2d ops               f. the first launch after a pause
 *   g. the stream sanitizer's cost per launch with two declared accesses
 *   h. event create + destroy while another thread that made calls runs
 *      (baseline: no other thread made calls)
 * Every row shows the cross-core probe before and after it (harness.c). The
 * baselines live in baseline.c; this file holds the rill side and main. */
#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baseline.h"
#include "cli.h"
#include "harness.h"
#include "rill.h"
#include "rill_bench.h"

typedef struct config {
    long launch_count; /* a: commands per sample */
    int launch_repeats;
    long hops; /* b: hops per sample */
    int hop_repeats;
    int wake_samples; /* c */
    int idle_samples; /* f: samples of IDLE_BURST launches each */
    double kernel_ms; /* d: length of each compute-bound kernel */
    int kernel_repeats;
    int chain_repeats;  /* d2: samples of two chains of short kernels */
    int op_repeats;     /* e */
    long destroy_pairs; /* h: create + destroy pairs per sample */
    int destroy_repeats;
} config;

static const config full_config = {1000000, 5, 100000, 5, 200, 31, 100.0, 3, 31, 5, 20000, 7};
static const config quick_config = {100000, 3, 10000, 3, 40, 5, 20.0, 2, 5, 2, 2000, 3};

typedef struct bench {
    config cfg;
    rill_device *dev; /* borrowed: lives until rill_shutdown */
    int compute_units;
    bench_report *report; /* borrowed: bench_cli_main owns it */
} bench;

/* Prints a failed rill call and returns true; false when st is RILL_OK. */
/* ---- a. launch throughput and enqueue cost ---- */

static void empty_host_fn(void *user_data) {
    (void)user_data;
}

static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

typedef struct launch_ctx {
    rill_stream *stream; /* borrowed */
    rill_kernel *kernel; /* borrowed; NULL: host functions */
    long count;
    bench_batches *batches; /* borrowed; NULL: no per-call times */
} launch_ctx;

static int sample_launch(void *ctx, double *ns_per_cmd) {
    launch_ctx *c = ctx;
    const rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    uint64_t t0 = bench_now_ns(), batch_start = t0;
    for (long i = 0; i < c->count; i++) {
        rill_status st = c->kernel ? rill_launch_kernel(c->stream, c->kernel, &launch)
                                   : rill_launch_host_func(c->stream, empty_host_fn, NULL);
        if (bench_failed(st, c->kernel ? "rill_launch_kernel" : "rill_launch_host_func"))
            return -1;
        if ((i + 1) % BENCH_ENQUEUE_BATCH == 0) {
            uint64_t now = bench_now_ns();
            if (c->batches)
                bench_batches_add(c->batches, (double)(now - batch_start) / BENCH_ENQUEUE_BATCH);
            batch_start = now;
        }
    }
    if (bench_failed(rill_stream_synchronize(c->stream), "rill_stream_synchronize"))
        return -1;
    *ns_per_cmd = (double)(bench_now_ns() - t0) / (double)c->count;
    return 0;
}

/* sample_launch with a trace recording: started before the timed loop
 * and written after it, so the row measures recording, not the file. */
static int sample_launch_traced(void *ctx, double *ns_per_cmd) {
    char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/bench-runtime-trace-%d.json", dir != NULL ? dir : "/tmp",
             (int)getpid());
    if (bench_failed(rill_trace_start(path), "rill_trace_start"))
        return -1;
    int rc = sample_launch(ctx, ns_per_cmd);
    if (bench_failed(rill_trace_stop(), "rill_trace_stop"))
        rc = -1;
    remove(path);
    return rc;
}

static int figure_launch(void *ctx) {
    bench *b = ctx;
    const config *cfg = &b->cfg;
    const char *base_name = "pthread worker, mutex+condvar queue of function pointers";
    bench_report_section(b->report, "a. empty commands on one stream, enqueue+execute "
                                    "(baseline: a pthread worker with a mutex+condvar queue)");
    int batch_capacity = (int)(cfg->launch_count / BENCH_ENQUEUE_BATCH) * cfg->launch_repeats;
    rill_stream *stream = NULL;
    rill_kernel *kernel = NULL;
    base_queue *queue = NULL;
    bench_batches rill_batches = {0}, base_batches = {0};
    int rc = -1;
    const rill_kernel_desc desc = {.name = "empty", .cpu = empty_kernel};
    if (bench_failed(rill_stream_create(b->dev, 0, &stream), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(stream, "bench-a"), "rill_stream_set_name") ||
        bench_failed(rill_kernel_create(&desc, &kernel), "rill_kernel_create"))
        goto out;
    queue = base_queue_create((size_t)cfg->launch_count + 1);
    if (!queue || bench_batches_init(&rill_batches, batch_capacity) != 0 ||
        bench_batches_init(&base_batches, batch_capacity) != 0) {
        fprintf(stderr, "bench: out of memory or threads for figure a\n");
        goto out;
    }

    launch_ctx rill_ctx = {stream, NULL, cfg->launch_count, &rill_batches};
    base_launch_ctx base_ctx = {queue, cfg->launch_count, &base_batches};
    /* Warm-up: the stream's and the queue's first commands touch new memory. */
    launch_ctx warm = {stream, NULL, cfg->launch_count / 10, NULL};
    base_launch_ctx base_warm = {queue, cfg->launch_count / 10, NULL};
    double ignored;
    if (sample_launch(&warm, &ignored) != 0 || base_sample_launch(&base_warm, &ignored) != 0)
        goto out;

    bench_row host = {.id = "a1",
                      .name = "host func: enqueue+execute",
                      .unit = "ns/cmd",
                      .baseline_name = base_name};
    if (bench_measure_row(b->report, &host, sample_launch, &rill_ctx, base_sample_launch, &base_ctx,
                          cfg->launch_repeats) != 0)
        goto out;

    /* The enqueue call alone, from the batches timed during a1. */
    bench_row enqueue = {.id = "a2",
                         .name = "host func: rill_launch_host_func call alone",
                         .unit = "ns/call",
                         .baseline_name = "mutex+condvar queue push"};
    enqueue.value = bench_stats_of(rill_batches.values, rill_batches.count);
    enqueue.baseline = bench_stats_of(base_batches.values, base_batches.count);
    enqueue.probe_before_ns = host.probe_before_ns;
    enqueue.probe_after_ns = host.probe_after_ns;
    if (bench_report_add(b->report, &enqueue) != 0)
        goto out;

    launch_ctx kernel_ctx = {stream, kernel, cfg->launch_count, NULL};
    base_ctx.batches = NULL;
    bench_row kern = {.id = "a3",
                      .name = "1-block empty kernel: enqueue+execute",
                      .unit = "ns/cmd",
                      .baseline_name = base_name};
    if (bench_measure_row(b->report, &kern, sample_launch, &kernel_ctx, base_sample_launch,
                          &base_ctx, cfg->launch_repeats) != 0)
        goto out;

    /* Tracing: the same commands with a trace recording, against the same
     * without one, alternately in this run; the difference is the cost of
     * recording per command (target: 200 ns at most). */
    bench_row traced_kern = {.id = "a4",
                             .name = "1-block empty kernel, tracing on: enqueue+execute",
                             .unit = "ns/cmd",
                             .baseline_name = "the same, tracing off"};
    if (bench_measure_row(b->report, &traced_kern, sample_launch_traced, &kernel_ctx, sample_launch,
                          &kernel_ctx, cfg->launch_repeats) != 0)
        goto out;
    launch_ctx host_ctx = {stream, NULL, cfg->launch_count, NULL};
    bench_row traced_host = {.id = "a5",
                             .name = "host func, tracing on: enqueue+execute",
                             .unit = "ns/cmd",
                             .baseline_name = "the same, tracing off"};
    if (bench_measure_row(b->report, &traced_host, sample_launch_traced, &host_ctx, sample_launch,
                          &host_ctx, cfg->launch_repeats) != 0)
        goto out;
    rc = 0;
out:
    bench_batches_free(&base_batches);
    bench_batches_free(&rill_batches);
    base_queue_destroy(queue);
    if (kernel && bench_failed(rill_kernel_destroy(kernel), "rill_kernel_destroy"))
        rc = -1;
    if (stream && bench_failed(rill_stream_destroy(stream), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- b. cross-stream ping-pong ---- */

typedef struct pingpong_ctx {
    rill_stream *a, *b;           /* borrowed */
    rill_event *a_done, *b_done;  /* borrowed */
    long hops;                    /* even */
    int gated;                    /* submit the whole chain first, then open the gate */
    alignas(64) atomic_long work; /* the tiny host function's counter */
    alignas(64) atomic_int gate;  /* opened by the host after submitting */
    atomic_ullong t_open;         /* when the gate host function saw it open */
} pingpong_ctx;

/* First command of a gated run: holds stream a until the host has
 * submitted every hop, then stamps the start of the measurement. */
static void hold_gate(void *user_data) {
    pingpong_ctx *c = user_data;
    bench_backoff backoff = {0};
    while (!atomic_load_explicit(&c->gate, memory_order_acquire))
        bench_backoff_pause(&backoff);
    atomic_store(&c->t_open, bench_now_ns());
}

static void tick(void *user_data) {
    pingpong_ctx *c = user_data;
    atomic_fetch_add_explicit(&c->work, 1, memory_order_relaxed);
}

/* Hop 2i runs on a, then hands over to b through a_done; hop 2i+1 runs on
 * b and hands back through b_done. Re-recording an event only affects waits
 * submitted after it, so two events serve every hop. */
static int sample_pingpong(void *ctx, double *ns_per_hop) {
    pingpong_ctx *c = ctx;
    atomic_store(&c->work, 0);
    atomic_store(&c->gate, 0);
    if (c->gated &&
        bench_failed(rill_launch_host_func(c->a, hold_gate, c), "rill_launch_host_func"))
        return -1;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->hops; i += 2) {
        if (bench_failed(rill_launch_host_func(c->a, tick, c), "rill_launch_host_func") ||
            bench_failed(rill_event_record(c->a_done, c->a), "rill_event_record") ||
            bench_failed(rill_stream_wait_event(c->b, c->a_done), "rill_stream_wait_event") ||
            bench_failed(rill_launch_host_func(c->b, tick, c), "rill_launch_host_func") ||
            bench_failed(rill_event_record(c->b_done, c->b), "rill_event_record") ||
            bench_failed(rill_stream_wait_event(c->a, c->b_done), "rill_stream_wait_event"))
            return -1;
    }
    if (c->gated)
        atomic_store_explicit(&c->gate, 1, memory_order_release);
    if (bench_failed(rill_stream_synchronize(c->a), "rill_stream_synchronize") ||
        bench_failed(rill_stream_synchronize(c->b), "rill_stream_synchronize"))
        return -1;
    if (c->gated)
        t0 = atomic_load(&c->t_open);
    *ns_per_hop = (double)(bench_now_ns() - t0) / (double)c->hops;
    if (atomic_load(&c->work) != c->hops) {
        fprintf(stderr, "bench: ping-pong ran %ld host functions of %ld\n", atomic_load(&c->work),
                c->hops);
        return -1;
    }
    return 0;
}

static int figure_pingpong(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "b. cross-stream ping-pong through events "
                                    "(baseline: two pthreads handing a token via an atomic)");
    pingpong_ctx *c = aligned_alloc(64, sizeof(*c));
    if (!c) {
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    memset(c, 0, sizeof(*c));
    atomic_init(&c->work, 0);
    c->hops = b->cfg.hops + b->cfg.hops % 2;
    int rc = -1;
    if (bench_failed(rill_stream_create(b->dev, 0, &c->a), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(c->a, "bench-b-ping"), "rill_stream_set_name") ||
        bench_failed(rill_stream_create(b->dev, 0, &c->b), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(c->b, "bench-b-pong"), "rill_stream_set_name") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &c->a_done), "rill_event_create") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &c->b_done), "rill_event_create"))
        goto out;
    base_token_ctx base = {c->hops};
    /* Warm-up with a tenth of the hops. */
    double ignored;
    long hops = c->hops;
    c->hops = hops / 10 + hops / 10 % 2;
    if (sample_pingpong(c, &ignored) != 0)
        goto out;
    c->hops = hops;
    /* b1: the device-side cost of a hop (the chain is submitted behind a
     * gate, then runs); b2: the same chain submitted while it runs, so the
     * submitting thread shares the cores with the workers. */
    c->gated = 1;
    bench_row row = {.id = "b1",
                     .name = "stream A -> event -> stream B, submitted first",
                     .unit = "ns/hop",
                     .baseline_name = "two pthreads, spinning atomic token"};
    /* The whole chain is queued behind the gate: past the queue bounds,
     * which would hold the submitting thread 200 ms a sample (rill.h). */
    size_t commands, bytes;
    if (bench_failed(rill_get_queue_limit(b->dev, &commands, &bytes), "rill_get_queue_limit") ||
        bench_failed(rill_set_queue_limit(0, 0), "rill_set_queue_limit"))
        goto out;
    int failed = bench_measure_row(b->report, &row, sample_pingpong, c, base_sample_token, &base,
                                   b->cfg.hop_repeats);
    if (bench_failed(rill_set_queue_limit(commands, bytes), "rill_set_queue_limit") || failed)
        goto out;
    c->gated = 0;
    bench_row row2 = {.id = "b2",
                      .name = "  the same, submitted while it runs",
                      .unit = "ns/hop",
                      .baseline_name = "two pthreads, spinning atomic token"};
    if (bench_measure_row(b->report, &row2, sample_pingpong, c, base_sample_token, &base,
                          b->cfg.hop_repeats))
        goto out;
    rc = 0;
out:
    if (c->b_done && bench_failed(rill_event_destroy(c->b_done), "rill_event_destroy"))
        rc = -1;
    if (c->a_done && bench_failed(rill_event_destroy(c->a_done), "rill_event_destroy"))
        rc = -1;
    if (c->b && bench_failed(rill_stream_destroy(c->b), "rill_stream_destroy"))
        rc = -1;
    if (c->a && bench_failed(rill_stream_destroy(c->a), "rill_stream_destroy"))
        rc = -1;
    free(c);
    return rc;
}

/* ---- c. host wake-up in rill_event_synchronize ---- */

enum { WAKE_SPIN_NS = 20000 };

typedef struct wake_ctx {
    rill_stream *stream; /* borrowed */
    rill_event *done;    /* borrowed */
    alignas(64) _Atomic uint64_t stamp_ns;
} wake_ctx;

/* Spins ~20 us, then stamps the clock right before returning. */
static void spin_then_stamp(void *user_data) {
    wake_ctx *c = user_data;
    bench_spin_ns(WAKE_SPIN_NS);
    /* Release pairs with the acquire load in sample_wake. */
    atomic_store_explicit(&c->stamp_ns, bench_now_ns(), memory_order_release);
}

static int sample_wake(void *ctx, double *us) {
    wake_ctx *c = ctx;
    atomic_store(&c->stamp_ns, 0);
    if (bench_failed(rill_launch_host_func(c->stream, spin_then_stamp, c),
                     "rill_launch_host_func") ||
        bench_failed(rill_event_record(c->done, c->stream), "rill_event_record") ||
        bench_failed(rill_event_synchronize(c->done), "rill_event_synchronize"))
        return -1;
    uint64_t now = bench_now_ns();
    uint64_t stamp = atomic_load_explicit(&c->stamp_ns, memory_order_acquire);
    if (stamp == 0) {
        fprintf(stderr, "bench: rill_event_synchronize returned before the host function ran\n");
        return -1;
    }
    *us = (double)(now - stamp) / 1000.0;
    return 0;
}

static int figure_wake(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "c. host wake-up: work done 20 us after submit -> "
                                    "rill_event_synchronize returns (baseline: pthread condvar)");
    wake_ctx *c = aligned_alloc(64, sizeof(*c));
    if (!c) {
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    memset(c, 0, sizeof(*c));
    atomic_init(&c->stamp_ns, 0);
    rill_event *spin_event = NULL, *blocking_event = NULL;
    base_wake *base = NULL;
    int rc = -1;
    if (bench_failed(rill_stream_create(b->dev, 0, &c->stream), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(c->stream, "bench-c"), "rill_stream_set_name") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &spin_event), "rill_event_create") ||
        bench_failed(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &blocking_event),
                     "rill_event_create"))
        goto out;
    base = base_wake_create(WAKE_SPIN_NS);
    if (!base) {
        fprintf(stderr, "bench: cannot start the wake-up baseline thread\n");
        goto out;
    }
    double ignored;
    c->done = spin_event;
    if (sample_wake(c, &ignored) != 0 || base_sample_wake(base, &ignored) != 0)
        goto out;
    bench_row spin = {.id = "c1",
                      .name = "default event",
                      .unit = "us",
                      .baseline_name = "pthread condvar wake-up"};
    if (bench_measure_row(b->report, &spin, sample_wake, c, base_sample_wake, base,
                          b->cfg.wake_samples))
        goto out;
    c->done = blocking_event;
    bench_row blocking = {.id = "c2",
                          .name = "RILL_EVENT_BLOCKING_SYNC event",
                          .unit = "us",
                          .baseline_name = "pthread condvar wake-up"};
    if (bench_measure_row(b->report, &blocking, sample_wake, c, base_sample_wake, base,
                          b->cfg.wake_samples))
        goto out;
    rc = 0;
out:
    base_wake_destroy(base);
    if (blocking_event && bench_failed(rill_event_destroy(blocking_event), "rill_event_destroy"))
        rc = -1;
    if (spin_event && bench_failed(rill_event_destroy(spin_event), "rill_event_destroy"))
        rc = -1;
    if (c->stream && bench_failed(rill_stream_destroy(c->stream), "rill_stream_destroy"))
        rc = -1;
    free(c);
    return rc;
}

/* ---- d. two compute-bound kernels on two streams ---- */

typedef struct spin_args {
    uint64_t iters;
    double *result; /* where the kernel leaves its result */
} spin_args;

static void spin_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const spin_args *a = args;
    *a->result = bench_spin_work(a->iters);
}

typedef struct overlap_ctx {
    rill_stream *s1, *s2; /* borrowed */
    rill_kernel *kernel;  /* borrowed */
    uint64_t iters;
    double results[2];
} overlap_ctx;

static int launch_spin(overlap_ctx *c, rill_stream *s, int i) {
    spin_args args = {c->iters, &c->results[i]};
    rill_launch launch = {
        .grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &args, .args_size = sizeof(args)};
    return bench_failed(rill_launch_kernel(s, c->kernel, &launch), "rill_launch_kernel") ? -1 : 0;
}

/* One stream's time for both kernels over two streams' time. */
static int sample_overlap(void *ctx, double *speedup) {
    overlap_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    if (launch_spin(c, c->s1, 0) != 0 || launch_spin(c, c->s1, 1) != 0 ||
        bench_failed(rill_stream_synchronize(c->s1), "rill_stream_synchronize"))
        return -1;
    uint64_t t1 = bench_now_ns();
    if (launch_spin(c, c->s1, 0) != 0 || launch_spin(c, c->s2, 1) != 0 ||
        bench_failed(rill_stream_synchronize(c->s1), "rill_stream_synchronize") ||
        bench_failed(rill_stream_synchronize(c->s2), "rill_stream_synchronize"))
        return -1;
    uint64_t t2 = bench_now_ns();
    *speedup = (double)(t1 - t0) / (double)(t2 - t1);
    return 0;
}

/* d2: two chains of CHAIN_KERNELS short kernels. */
#define CHAIN_KERNELS   200
#define CHAIN_KERNEL_MS 0.01

/* Each chain's kernels queued on one stream (both chains on s1, then one
 * on each stream), the host submitting all of them before it waits: one
 * stream's time over two streams'. */
static int sample_chains(void *ctx, double *speedup) {
    overlap_ctx *c = ctx;
    uint64_t t[3];
    for (int pass = 0; pass < 2; pass++) {
        t[pass] = bench_now_ns();
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < CHAIN_KERNELS; k++)
                if (launch_spin(c, pass == 0 || i == 0 ? c->s1 : c->s2, i) != 0)
                    return -1;
        if (bench_failed(rill_stream_synchronize(c->s1), "rill_stream_synchronize") ||
            bench_failed(rill_stream_synchronize(c->s2), "rill_stream_synchronize"))
            return -1;
    }
    t[2] = bench_now_ns();
    *speedup = (double)(t[1] - t[0]) / (double)(t[2] - t[1]);
    return 0;
}

static int figure_overlap(void *ctx) {
    bench *b = ctx;
    char name[64];
    snprintf(name, sizeof(name), "two %.0f ms 1-block kernels: 2 streams vs 1", b->cfg.kernel_ms);
    bench_report_section(b->report, "d. compute-bound kernels, speedup of two streams over one "
                                    "(baseline: two pthreads over one)");
    overlap_ctx c = {.iters = bench_spin_calibrate(b->cfg.kernel_ms)};
    const rill_kernel_desc desc = {.name = "spin", .cpu = spin_kernel};
    int rc = -1;
    if (bench_failed(rill_stream_create(b->dev, 0, &c.s1), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(c.s1, "bench-d-1"), "rill_stream_set_name") ||
        bench_failed(rill_stream_create(b->dev, 0, &c.s2), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(c.s2, "bench-d-2"), "rill_stream_set_name") ||
        bench_failed(rill_kernel_create(&desc, &c.kernel), "rill_kernel_create"))
        goto out;
    base_speedup_ctx base = {c.iters};
    bench_row row = {.id = "d1",
                     .name = name,
                     .unit = "x",
                     .higher_is_better = true,
                     .baseline_name = "two pthreads over one"};
    if (bench_measure_row(b->report, &row, sample_overlap, &c, base_sample_speedup, &base,
                          b->cfg.kernel_repeats))
        goto out;
    /* The same on short kernels, which leave a worker idle whenever its
     * stream's next command is late; the baseline runs each chain's work
     * as one piece. */
    c.iters = bench_spin_calibrate(CHAIN_KERNEL_MS);
    base.iters = c.iters * CHAIN_KERNELS;
    snprintf(name, sizeof(name), "two chains of %d %.0f us 1-block kernels: 2 streams vs 1",
             CHAIN_KERNELS, CHAIN_KERNEL_MS * 1000.0);
    bench_row chains = {.id = "d2",
                        .name = name,
                        .unit = "x",
                        .higher_is_better = true,
                        .baseline_name = "two pthreads over one"};
    if (bench_measure_row(b->report, &chains, sample_chains, &c, base_sample_speedup, &base,
                          b->cfg.chain_repeats))
        goto out;
    rc = 0;
out:
    if (c.kernel && bench_failed(rill_kernel_destroy(c.kernel), "rill_kernel_destroy"))
        rc = -1;
    if (c.s2 && bench_failed(rill_stream_destroy(c.s2), "rill_stream_destroy"))
        rc = -1;
    if (c.s1 && bench_failed(rill_stream_destroy(c.s1), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- e. the matmul and conv2d ops ---- */

/* Fills x with a deterministic sequence in [-1, 1). */
static void fill_random(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 4503599627370496.0 - 1.0);
    }
}

/* Largest |got - want| over the largest |want|; 0 when both are zero. */
static double relative_error(const float *got, const float *want, size_t n) {
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)got[i] - (double)want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    return scale > 0.0 ? err / scale : err;
}

/* Device buffers of one op: up to three inputs/outputs with host copies. */
typedef struct op_buffers {
    float *dev[3];  /* rill_malloc'ed: owned */
    float *host[3]; /* malloc'ed: owned */
    size_t count[3];
} op_buffers;

static int buffers_alloc(op_buffers *o, rill_device *dev, const size_t count[3]) {
    for (int i = 0; i < 3; i++) {
        o->count[i] = count[i];
        o->host[i] = malloc(count[i] * sizeof(float));
        if (!o->host[i]) {
            fprintf(stderr, "bench: out of memory\n");
            return -1;
        }
        void *p = NULL;
        if (bench_failed(rill_malloc(dev, count[i] * sizeof(float), &p), "rill_malloc"))
            return -1;
        o->dev[i] = p;
        if (i < 2) {
            fill_random(o->host[i], count[i], (uint64_t)i + 1);
            if (bench_failed(rill_memcpy(o->dev[i], o->host[i], count[i] * sizeof(float)),
                             "rill_memcpy"))
                return -1;
        }
    }
    return 0;
}

static int buffers_free(op_buffers *o) {
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        if (o->dev[i] && bench_failed(rill_free(o->dev[i]), "rill_free"))
            rc = -1;
        free(o->host[i]);
    }
    return rc;
}

typedef struct op_ctx {
    rill_stream *stream; /* borrowed */
    op_buffers buf;
    size_t dims[7]; /* matmul: m, k, n; conv2d: n, c, h, w, k, r, s */
    bool is_conv;
    double flops;
} op_ctx;

static int sample_op(void *ctx, double *gflops) {
    op_ctx *c = ctx;
    const size_t *d = c->dims;
    float *out = c->buf.dev[2];
    const float *x = c->buf.dev[0], *y = c->buf.dev[1];
    uint64_t t0 = bench_now_ns();
    rill_status st = c->is_conv ? rill_op_conv2d_f32(c->stream, out, x, y, d[0], d[1], d[2], d[3],
                                                     d[4], d[5], d[6])
                                : rill_op_matmul_f32(c->stream, out, x, y, d[0], d[1], d[2]);
    if (bench_failed(st, c->is_conv ? "rill_op_conv2d_f32" : "rill_op_matmul_f32") ||
        bench_failed(rill_stream_synchronize(c->stream), "rill_stream_synchronize"))
        return -1;
    *gflops = c->flops / (double)(bench_now_ns() - t0);
    return 0;
}

/* Runs the rill op and the baseline once each and compares their outputs. */
static int verify_op(op_ctx *c, bench_sample_fn base_fn, void *base_ctx, const float *base_out,
                     const char *what) {
    double ignored;
    if (sample_op(c, &ignored) != 0 || base_fn(base_ctx, &ignored) != 0)
        return -1;
    if (bench_failed(rill_memcpy(c->buf.host[2], c->buf.dev[2], c->buf.count[2] * sizeof(float)),
                     "rill_memcpy"))
        return -1;
    double err = relative_error(c->buf.host[2], base_out, c->buf.count[2]);
    if (!(err < 1e-3)) {
        fprintf(stderr, "bench: %s result differs from OpenBLAS: relative error %g\n", what, err);
        return -1;
    }
    return 0;
}

/* Adds the "per compute unit" row derived from a GFLOP/s row. */
static int add_per_cu_row(bench *b, const bench_row *whole, const char *id, const char *name) {
    bench_row row = *whole;
    row.id = id;
    row.name = name;
    row.value = bench_stats_scale(whole->value, 1.0 / b->compute_units);
    return bench_report_add(b->report, &row);
}

static int figure_matmul(bench *b, rill_stream *stream) {
    const size_t m = 1024, k = 1024, n = 1024;
    op_ctx c = {.stream = stream, .dims = {m, k, n}, .flops = 2.0 * m * k * n};
    float *base_out = malloc(m * n * sizeof(float));
    int rc = -1;
    if (!base_out || buffers_alloc(&c.buf, b->dev, (const size_t[3]){m * k, k * n, m * n}))
        goto out;
    base_matmul_ctx base = {c.buf.host[0], c.buf.host[1], base_out, m, k, n, 1};
    if (verify_op(&c, base_sample_matmul, &base, base_out, "rill_op_matmul_f32") != 0)
        goto out;
    bench_row row = {.id = "e1",
                     .name = "rill_op_matmul_f32 1024x1024x1024",
                     .unit = "GFLOP/s",
                     .higher_is_better = true,
                     .baseline_name = "cblas_sgemm, OpenBLAS single-threaded"};
    if (bench_measure_row(b->report, &row, sample_op, &c, base_sample_matmul, &base,
                          b->cfg.op_repeats) ||
        add_per_cu_row(b, &row, "e2", "  per compute unit, vs 1-thread sgemm"))
        goto out;
    /* What the machine gives a threaded sgemm right now: e1's ceiling, far
     * below compute units x e1's baseline where the processors share
     * floating-point units (SMT siblings) or the host is busy. */
    char name[64];
    snprintf(name, sizeof(name), "  vs OpenBLAS's own %d threads", b->compute_units);
    base_matmul_ctx threaded = base;
    threaded.threads = b->compute_units;
    bench_row ceiling = {.id = "e3",
                         .name = name,
                         .unit = "GFLOP/s",
                         .higher_is_better = true,
                         .baseline_name = "cblas_sgemm, OpenBLAS with one thread per compute unit"};
    if (b->compute_units > 1 && bench_measure_row(b->report, &ceiling, sample_op, &c,
                                                  base_sample_matmul, &threaded, b->cfg.op_repeats))
        goto out;
    rc = 0;
out:
    if (buffers_free(&c.buf) != 0)
        rc = -1;
    free(base_out);
    return rc;
}

static int figure_conv2d(bench *b, rill_stream *stream) {
    /* Seed 000's shapes: input [10,32,32,32], weight [32,32,3,3]. */
    const size_t n = 10, ch = 32, h = 32, w = 32, k = 32, r = 3, s = 3;
    const size_t oh = h - r + 1, ow = w - s + 1;
    op_ctx c = {.stream = stream,
                .dims = {n, ch, h, w, k, r, s},
                .is_conv = true,
                .flops = 2.0 * (double)(n * k * ch * r * s * oh * ow)};
    float *base_out = malloc(n * k * oh * ow * sizeof(float));
    float *cols = malloc(ch * r * s * oh * ow * sizeof(float));
    int rc = -1;
    if (!base_out || !cols ||
        buffers_alloc(&c.buf, b->dev,
                      (const size_t[3]){n * ch * h * w, k * ch * r * s, n * k * oh * ow}))
        goto out;
    base_conv2d_ctx base = {c.buf.host[0], c.buf.host[1], base_out, cols, n, ch, h, w, k, r, s};
    if (verify_op(&c, base_sample_conv2d, &base, base_out, "rill_op_conv2d_f32") != 0)
        goto out;
    bench_row row = {.id = "e4",
                     .name = "rill_op_conv2d_f32 [10,32,32,32]*[32,32,3,3]",
                     .unit = "GFLOP/s",
                     .higher_is_better = true,
                     .baseline_name = "im2col + cblas_sgemm, OpenBLAS single-threaded"};
    if (bench_measure_row(b->report, &row, sample_op, &c, base_sample_conv2d, &base,
                          b->cfg.op_repeats) ||
        add_per_cu_row(b, &row, "e5", "  per compute unit, vs 1-thread im2col+sgemm"))
        goto out;
    rc = 0;
out:
    if (buffers_free(&c.buf) != 0)
        rc = -1;
    free(cols);
    free(base_out);
    return rc;
}

static int figure_ops(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "e. built-in ops (baseline: single-threaded OpenBLAS; "
                                    "per-CU rows divide rill by the compute units)");
    char why[128];
    if (base_blas_load(why, sizeof why) != 0) {
        printf("    skipped: %s\n", why);
        return 0;
    }
    rill_stream *stream = NULL;
    if (bench_failed(rill_stream_create(b->dev, 0, &stream), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(stream, "bench-e"), "rill_stream_set_name"))
        return -1;
    int rc = figure_matmul(b, stream);
    if (figure_conv2d(b, stream) != 0)
        rc = -1;
    if (bench_failed(rill_stream_destroy(stream), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- f. the first launch after a pause ---- */

typedef struct idle_ctx {
    rill_stream *stream; /* borrowed */
    rill_event *event;   /* borrowed: default or blocking-sync */
    rill_kernel *kernel; /* borrowed */
    rill_launch launch;
    uint64_t pause_ns; /* idle time before the launch */
    bool sleep;        /* sleep (or spin) for the pause */
    bool by_stream;    /* synchronize the stream instead of recording the event */
} idle_ctx;

/* Launch, record, synchronize: microseconds from the launch until the
 * synchronize returns. */
static int launch_and_wait(idle_ctx *c, double *us) {
    uint64_t t0 = bench_now_ns();
    if (bench_failed(rill_launch_kernel(c->stream, c->kernel, &c->launch), "rill_launch_kernel"))
        return -1;
    if (c->by_stream) {
        if (bench_failed(rill_stream_synchronize(c->stream), "rill_stream_synchronize"))
            return -1;
    } else if (bench_failed(rill_event_record(c->event, c->stream), "rill_event_record") ||
               bench_failed(rill_event_synchronize(c->event), "rill_event_synchronize")) {
        return -1;
    }
    *us = (double)(bench_now_ns() - t0) / 1000.0;
    return 0;
}

/* Iterations per sample of figure f: the sample is their median, so that
 * what the other side of the row left running (a worker still spinning, a
 * processor not yet halted) touches one iteration of the burst, not the
 * figure. */
enum { IDLE_BURST = 7 };

static int median_of(double *v, int n, double *out) {
    *out = bench_stats_of(v, n).median;
    return 0;
}

/* Launches after the pause, IDLE_BURST times. */
static int sample_after_pause(void *ctx, double *us) {
    idle_ctx *c = ctx;
    double v[IDLE_BURST];
    for (int i = 0; i < IDLE_BURST; i++) {
        bench_idle_ns(c->pause_ns, c->sleep);
        if (launch_and_wait(c, &v[i]) != 0)
            return -1;
    }
    return median_of(v, IDLE_BURST, us);
}

/* The pthread baseline of the blocking-sync rows, in bursts too. */
static int sample_sleepers_burst(void *ctx, double *us) {
    double v[IDLE_BURST];
    for (int i = 0; i < IDLE_BURST; i++)
        if (base_sample_sleepers(ctx, &v[i]) != 0)
            return -1;
    return median_of(v, IDLE_BURST, us);
}

enum { BUSY_WARM = 8 };

/* The same loop back to back, the device busy with it: the median of
 * IDLE_BURST iterations after BUSY_WARM untimed ones. */
static int sample_busy(void *ctx, double *us) {
    idle_ctx *c = ctx;
    double v[IDLE_BURST], one;
    for (int i = 0; i < BUSY_WARM; i++)
        if (launch_and_wait(c, &one) != 0)
            return -1;
    for (int i = 0; i < IDLE_BURST; i++)
        if (launch_and_wait(c, &v[i]) != 0)
            return -1;
    return median_of(v, IDLE_BURST, us);
}

typedef struct block_work {
    uint64_t iters;
} block_work;

static void work_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const block_work *w = args;
    volatile double sink = bench_spin_work(w->iters);
    (void)sink;
}

static const struct {
    const char *id, *name;
    uint64_t pause_ns;
    bool sleep;
} pauses[] = {
    {"f1", "after 200 us of host idle (spinning)", 200000, false},
    {"f2", "after 2 ms of host idle (spinning)", 2000000, false},
    {"f3", "after 20 ms of host idle (sleeping)", 20000000, true},
};
enum { NUM_PAUSES = sizeof(pauses) / sizeof(pauses[0]) };

static const char *blocking_ids[NUM_PAUSES] = {"f4", "f5", "f6"};

static int figure_idle(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "f. launch + record + synchronize of an empty kernel after "
                                    "a pause (baselines: the loop back to back; a pthread pair "
                                    "that sleeps on futexes)");
    rill_stream *stream = NULL;
    rill_event *spin_event = NULL, *blocking_event = NULL;
    rill_kernel *kernel = NULL, *worker = NULL;
    base_sleepers *sleepers = NULL;
    int rc = -1;
    const rill_kernel_desc empty = {.name = "empty", .cpu = empty_kernel};
    const rill_kernel_desc work = {.name = "work", .cpu = work_kernel};
    if (bench_failed(rill_stream_create(b->dev, 0, &stream), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(stream, "bench-f"), "rill_stream_set_name") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &spin_event), "rill_event_create") ||
        bench_failed(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &blocking_event),
                     "rill_event_create") ||
        bench_failed(rill_kernel_create(&empty, &kernel), "rill_kernel_create") ||
        bench_failed(rill_kernel_create(&work, &worker), "rill_kernel_create"))
        goto out;
    sleepers = base_sleepers_create();
    if (!sleepers) {
        fprintf(stderr, "bench: cannot start the sleeping-thread baseline\n");
        goto out;
    }
    idle_ctx c = {.stream = stream,
                  .event = spin_event,
                  .kernel = kernel,
                  .launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}}};
    double ignored;
    if (sample_busy(&c, &ignored) != 0)
        goto out;
    for (int i = 0; i < NUM_PAUSES; i++) {
        c.pause_ns = pauses[i].pause_ns;
        c.sleep = pauses[i].sleep;
        bench_row row = {.id = pauses[i].id,
                         .name = pauses[i].name,
                         .unit = "us",
                         .baseline_name = "the same loop back to back"};
        if (bench_measure_row(b->report, &row, sample_after_pause, &c, sample_busy, &c,
                              b->cfg.idle_samples) != 0)
            goto out;
    }
    c.event = blocking_event;
    for (int i = 0; i < NUM_PAUSES; i++) {
        char name[96];
        snprintf(name, sizeof name, "  blocking-sync event, %s", pauses[i].name + 6);
        c.pause_ns = pauses[i].pause_ns;
        c.sleep = pauses[i].sleep;
        base_sleepers_ctx base = {sleepers, pauses[i].pause_ns, pauses[i].sleep};
        bench_row row = {.id = blocking_ids[i],
                         .name = name,
                         .unit = "us",
                         .baseline_name = "pthreads: futex wake, futex sleep, same pause"};
        if (bench_measure_row(b->report, &row, sample_after_pause, &c, sample_sleepers_burst, &base,
                              b->cfg.idle_samples) != 0)
            goto out;
    }
    /* A 64-block kernel of about 2 us per block, synchronized by stream. */
    block_work w = {bench_spin_calibrate(0.002)};
    idle_ctx k = {
        .stream = stream,
        .kernel = worker,
        .launch = {.grid = {64, 1, 1}, .block = {1, 1, 1}, .args = &w, .args_size = sizeof w},
        .pause_ns = 2000000,
        .by_stream = true};
    bench_row blocks = {.id = "f7",
                        .name = "64 blocks of ~2 us after 2 ms idle (spinning)",
                        .unit = "us",
                        .baseline_name = "the same back to back"};
    if (sample_busy(&k, &ignored) != 0 ||
        bench_measure_row(b->report, &blocks, sample_after_pause, &k, sample_busy, &k,
                          b->cfg.idle_samples) != 0)
        goto out;
    rc = 0;
out:
    base_sleepers_destroy(sleepers);
    if (worker && bench_failed(rill_kernel_destroy(worker), "rill_kernel_destroy"))
        rc = -1;
    if (kernel && bench_failed(rill_kernel_destroy(kernel), "rill_kernel_destroy"))
        rc = -1;
    if (blocking_event && bench_failed(rill_event_destroy(blocking_event), "rill_event_destroy"))
        rc = -1;
    if (spin_event && bench_failed(rill_event_destroy(spin_event), "rill_event_destroy"))
        rc = -1;
    if (stream && bench_failed(rill_stream_destroy(stream), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- main ---- */

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    rill_device_info info;
    if (bench_failed(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &b->dev),
                     "rill_device_get_by_kind") ||
        bench_failed(rill_device_get_info(b->dev, &info), "rill_device_get_info"))
        return -1;
    b->compute_units = info.compute_units > 0 ? info.compute_units : 1;
    snprintf(device->name, sizeof(device->name), "%.*s", (int)sizeof(info.name), info.name);
    device->compute_units = b->compute_units;
    return 0;
}

/* ---- g. the stream sanitizer ---- */

typedef struct san_ctx {
    rill_stream *stream; /* borrowed */
    rill_kernel *kernel; /* borrowed */
    rill_access acc[2];  /* a read and a write of a block each */
    long count;
    int sanitize; /* the sanitizer's state for the sample */
} san_ctx;

/* ns per rill_launch_kernel call with two declared accesses, the stream
 * drained after each sample (not timed): the cost lands on the calling
 * thread, so the call alone is what the sanitizer adds to. */
static int sample_san(void *ctx, double *ns_per_call) {
    san_ctx *c = ctx;
    const rill_launch launch = {
        .grid = {1, 1, 1}, .block = {1, 1, 1}, .accesses = c->acc, .num_accesses = 2};
    if (bench_failed(rill_sanitizer_enable(c->sanitize), "rill_sanitizer_enable"))
        return -1;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->count; i++)
        if (bench_failed(rill_launch_kernel(c->stream, c->kernel, &launch), "rill_launch_kernel"))
            return -1;
    *ns_per_call = (double)(bench_now_ns() - t0) / (double)c->count;
    if (bench_failed(rill_stream_synchronize(c->stream), "rill_stream_synchronize") ||
        bench_failed(rill_sanitizer_enable(0), "rill_sanitizer_enable"))
        return -1;
    return 0;
}

static int figure_sanitizer(void *ctx) {
    bench *b = ctx;
    const config *cfg = &b->cfg;
    bench_report_section(b->report, "g. the stream sanitizer: 1-block kernel with two declared "
                                    "accesses, launch call (baseline: the same, sanitizer off)");
    rill_stream *stream = NULL;
    rill_kernel *kernel = NULL;
    void *in = NULL, *out = NULL;
    int rc = -1;
    const rill_kernel_desc desc = {.name = "empty", .cpu = empty_kernel};
    if (bench_failed(rill_stream_create(b->dev, 0, &stream), "rill_stream_create") ||
        bench_failed(rill_kernel_create(&desc, &kernel), "rill_kernel_create") ||
        bench_failed(rill_malloc(b->dev, 4096, &in), "rill_malloc") ||
        bench_failed(rill_malloc(b->dev, 4096, &out), "rill_malloc"))
        goto out;
    san_ctx on = {
        stream, kernel, {{in, 4096, RILL_READ}, {out, 4096, RILL_WRITE}}, cfg->launch_count, 1};
    san_ctx off = on;
    off.sanitize = 0;
    san_ctx warm = on;
    warm.count = cfg->launch_count / 10;
    double ignored;
    if (sample_san(&warm, &ignored) != 0)
        goto out;
    bench_row row = {.id = "g1",
                     .name = "rill_launch_kernel, 2 accesses, sanitizer on",
                     .unit = "ns/call",
                     .baseline_name = "sanitizer off"};
    if (bench_measure_row(b->report, &row, sample_san, &on, sample_san, &off,
                          cfg->launch_repeats) != 0)
        goto out;
    rc = 0;
out:
    if (in && bench_failed(rill_free(in), "rill_free"))
        rc = -1;
    if (out && bench_failed(rill_free(out), "rill_free"))
        rc = -1;
    if (kernel && bench_failed(rill_kernel_destroy(kernel), "rill_kernel_destroy"))
        rc = -1;
    if (stream && bench_failed(rill_stream_destroy(stream), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- h. destroys while other threads have made calls ---- */

/* What the other thread does once it has made a call. */
typedef enum other_kind {
    OTHER_NONE,
    OTHER_ASLEEP,
    OTHER_COMPUTING,
    OTHER_CALLING,
    OTHER_BLOCKED /* in rill_stream_synchronize for the whole sample */
} other_kind;

typedef struct other_thread {
    other_kind kind;
    rill_stream *stream; /* borrowed: what its calls pass */
    atomic_int ready, stop;
    int failed;
} other_thread;

/* A host function that holds its stream until the sample ends. */
static void hold_until_stop(void *arg) {
    other_thread *o = arg;
    while (!atomic_load(&o->stop))
        bench_sleep_us(100);
}

static void *other_main(void *arg) {
    other_thread *o = arg;
    /* A call: the thread has a record from now on (src/core/calls.h). */
    o->failed = bench_failed(rill_stream_query(o->stream), "rill_stream_query");
    if (o->kind == OTHER_BLOCKED) {
        rill_stream *held = NULL;
        if (bench_failed(rill_stream_create(NULL, 0, &held), "rill_stream_create") ||
            bench_failed(rill_launch_host_func(held, hold_until_stop, o), "rill_launch_host_func"))
            o->failed = 1;
        atomic_store(&o->ready, 1);
        if (held != NULL &&
            (bench_failed(rill_stream_synchronize(held), "rill_stream_synchronize") ||
             bench_failed(rill_stream_destroy(held), "rill_stream_destroy")))
            o->failed = 1;
        return NULL;
    }
    atomic_store(&o->ready, 1);
    while (!atomic_load(&o->stop)) {
        if (o->kind == OTHER_ASLEEP) {
            bench_sleep_us(1000);
        } else if (o->kind == OTHER_COMPUTING) {
            volatile double sink = bench_spin_work(1000);
            (void)sink;
        } else if (bench_failed(rill_stream_query(o->stream), "rill_stream_query")) {
            o->failed = 1;
            break;
        }
    }
    return NULL;
}

typedef struct destroy_ctx {
    other_kind other;
    rill_stream *stream; /* borrowed */
    long pairs;
} destroy_ctx;

static int create_destroy_pairs(long n) {
    for (long i = 0; i < n; i++) {
        rill_event *e;
        if (bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &e), "rill_event_create") ||
            bench_failed(rill_event_destroy(e), "rill_event_destroy"))
            return -1;
    }
    return 0;
}

/* ns per rill_event_create + rill_event_destroy pair, with the other thread
 * (if any) started before and joined after the timed loop. */
static int sample_destroys(void *ctx, double *ns) {
    destroy_ctx *c = ctx;
    other_thread o = {.kind = c->other, .stream = c->stream};
    pthread_t t;
    if (c->other != OTHER_NONE) {
        if (pthread_create(&t, NULL, other_main, &o) != 0) {
            fprintf(stderr, "bench: cannot start a thread\n");
            return -1;
        }
        while (!atomic_load(&o.ready))
            bench_sleep_us(100);
        bench_sleep_us(2000); /* asleep, computing, calling or blocked by now */
    }
    int rc = create_destroy_pairs(c->pairs / 20);
    uint64_t t0 = bench_now_ns();
    if (rc == 0)
        rc = create_destroy_pairs(c->pairs);
    *ns = (double)(bench_now_ns() - t0) / (double)c->pairs;
    if (c->other != OTHER_NONE) {
        atomic_store(&o.stop, 1);
        pthread_join(t, NULL);
        if (o.failed)
            rc = -1;
    }
    return rc;
}

static int figure_destroys(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "h. rill_event_create + rill_event_destroy while another "
                                    "thread that made a call sleeps, computes, calls or waits "
                                    "(baseline: no other thread made calls)");
    static const struct {
        const char *id, *name;
        other_kind kind;
    } rows[] = {
        {"h1", "another thread asleep", OTHER_ASLEEP},
        {"h2", "another thread computing", OTHER_COMPUTING},
        {"h3", "another thread calling rill_stream_query", OTHER_CALLING},
        {"h4", "another thread in rill_stream_synchronize", OTHER_BLOCKED},
    };
    rill_stream *stream = NULL;
    int rc = -1;
    if (bench_failed(rill_stream_create(b->dev, 0, &stream), "rill_stream_create"))
        goto out;
    destroy_ctx alone = {OTHER_NONE, stream, b->cfg.destroy_pairs};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        destroy_ctx c = {rows[i].kind, stream, b->cfg.destroy_pairs};
        bench_row row = {.id = rows[i].id,
                         .name = rows[i].name,
                         .unit = "ns/pair",
                         .baseline_name = "no other thread made calls"};
        if (bench_measure_row(b->report, &row, sample_destroys, &c, sample_destroys, &alone,
                              b->cfg.destroy_repeats) != 0)
            goto out;
    }
    rc = 0;
out:
    if (stream && bench_failed(rill_stream_destroy(stream), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

static const bench_cli_figure figures[] = {
    {'a', figure_launch}, {'b', figure_pingpong}, {'c', figure_wake},      {'d', figure_overlap},
    {'e', figure_ops},    {'f', figure_idle},     {'g', figure_sanitizer}, {'h', figure_destroys},
};

static const bench_cli cli = {
    .program = "bench_runtime",
    .subject = "rill",
    .figure_prefix = "",
    .quick_help = "fewer commands and repeats (a CI smoke run, < 20 s)",
    .figures_help = "                a launch throughput   b cross-stream ping-pong\n"
                    "                c host wake-up        d two kernels on two streams\n"
                    "                e matmul and conv2d ops     f first launch after a pause\n"
                    "                g the stream sanitizer's cost per launch\n"
                    "                h event create + destroy while other threads make calls\n",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = bench_rill_shutdown,
};

int main(int argc, char **argv) {
    bench b = {0};
    return bench_cli_main(&cli, &b, argc, argv);
}
