/* SPDX-License-Identifier: MIT */
/* Several CPU devices (RILL_CPU_DEVICES, set to 2 here when unset):
 *   1. an event hop between devices (a kernel on device 0 waited for by
 *      device 1, and back) against the same hop between two streams of
 *      device 0, in the same run;
 *   2. a peer copy, device 0's memory to device 1's, against memcpy on the
 *      host.
 * The header line names the devices and their processors; on a machine
 * with one NUMA node the two devices are a split of its processors. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harness.h"
#include "rill.h"
#include "rill_bench.h"

typedef struct bench_config {
    long hops;
    int hop_repeats;
    size_t copy_bytes;
    int copy_repeats;
} bench_config;

static const bench_config full_config = {20000, 9, (size_t)64 << 20, 9};
static const bench_config quick_config = {2000, 3, (size_t)8 << 20, 3};

typedef struct bench {
    bench_config cfg;
    bench_report *report;
    rill_device *dev[2];
} bench;

/* ---- 1. event hops ---- */

typedef struct hop_ctx {
    rill_stream *a, *b;
    rill_event *a_done, *b_done;
    rill_kernel *k;
    long hops; /* even */
} hop_ctx;

static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

/* Hop 2i: a kernel on a, recorded and waited for by b; hop 2i+1 back. */
static int sample_hops(void *ctx, double *ns_per_hop) {
    hop_ctx *c = ctx;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->hops; i += 2) {
        if (bench_failed(rill_launch_kernel(c->a, c->k, &l), "rill_launch_kernel") ||
            bench_failed(rill_event_record(c->a_done, c->a), "rill_event_record") ||
            bench_failed(rill_stream_wait_event(c->b, c->a_done), "rill_stream_wait_event") ||
            bench_failed(rill_launch_kernel(c->b, c->k, &l), "rill_launch_kernel") ||
            bench_failed(rill_event_record(c->b_done, c->b), "rill_event_record") ||
            bench_failed(rill_stream_wait_event(c->a, c->b_done), "rill_stream_wait_event"))
            return -1;
    }
    if (bench_failed(rill_stream_synchronize(c->a), "rill_stream_synchronize") ||
        bench_failed(rill_stream_synchronize(c->b), "rill_stream_synchronize"))
        return -1;
    *ns_per_hop = (double)(bench_now_ns() - t0) / (double)c->hops;
    return 0;
}

static int hop_open(hop_ctx *c, rill_device *a, rill_device *b, rill_kernel *k, long hops) {
    memset(c, 0, sizeof *c);
    c->k = k;
    c->hops = hops + hops % 2;
    return bench_failed(rill_stream_create(a, 0, &c->a), "rill_stream_create") ||
                   bench_failed(rill_stream_create(b, 0, &c->b), "rill_stream_create") ||
                   bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &c->a_done),
                                "rill_event_create") ||
                   bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &c->b_done),
                                "rill_event_create")
               ? -1
               : 0;
}

static void hop_close(hop_ctx *c) {
    if (c->a_done)
        rill_event_destroy(c->a_done);
    if (c->b_done)
        rill_event_destroy(c->b_done);
    if (c->a)
        rill_stream_destroy(c->a);
    if (c->b)
        rill_stream_destroy(c->b);
}

static int figure_hops(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "1. kernel -> event -> kernel on the other stream, per hop "
                                    "(baseline: the same between two streams of device 0)");
    rill_kernel *k = NULL;
    const rill_kernel_desc desc = {.name = "empty", .cpu = empty_kernel};
    if (bench_failed(rill_kernel_create(&desc, &k), "rill_kernel_create"))
        return -1;
    hop_ctx across, same;
    int rc = -1;
    if (hop_open(&across, b->dev[0], b->dev[1], k, b->cfg.hops) != 0 ||
        hop_open(&same, b->dev[0], b->dev[0], k, b->cfg.hops) != 0)
        goto out;
    double ignored;
    if (sample_hops(&across, &ignored) != 0 || sample_hops(&same, &ignored) != 0)
        goto out;
    bench_row row = {.id = "x1",
                     .name = "device 0 <-> device 1",
                     .unit = "ns/hop",
                     .baseline_name = "two streams of device 0"};
    rc = bench_measure_row(b->report, &row, sample_hops, &across, sample_hops, &same,
                           b->cfg.hop_repeats);
out:
    hop_close(&across);
    hop_close(&same);
    rill_kernel_destroy(k);
    return rc;
}

/* ---- 2. peer copy ---- */

typedef struct copy_ctx {
    void *src, *dst; /* device 0's, device 1's (or host memory for the baseline) */
    size_t bytes;
    rill_stream *s; /* device 1's */
} copy_ctx;

static int sample_peer_copy(void *ctx, double *gb_per_s) {
    copy_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    if (bench_failed(rill_memcpy_async(c->dst, c->src, c->bytes, c->s), "rill_memcpy_async") ||
        bench_failed(rill_stream_synchronize(c->s), "rill_stream_synchronize"))
        return -1;
    *gb_per_s = (double)c->bytes / (double)(bench_now_ns() - t0);
    return 0;
}

static int sample_host_copy(void *ctx, double *gb_per_s) {
    copy_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    memcpy(c->dst, c->src, c->bytes);
    *gb_per_s = (double)c->bytes / (double)(bench_now_ns() - t0);
    return 0;
}

static int figure_copy(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "2. peer copy, device 0's memory to device 1's, on a stream "
                                    "of device 1 (baseline: memcpy of host memory)");
    size_t n = b->cfg.copy_bytes;
    copy_ctx peer = {.bytes = n}, host = {.bytes = n};
    int rc = -1;
    if (bench_failed(rill_malloc(b->dev[0], n, &peer.src), "rill_malloc") ||
        bench_failed(rill_malloc(b->dev[1], n, &peer.dst), "rill_malloc") ||
        bench_failed(rill_stream_create(b->dev[1], 0, &peer.s), "rill_stream_create"))
        goto out;
    host.src = malloc(n);
    host.dst = malloc(n);
    if (host.src == NULL || host.dst == NULL) {
        fprintf(stderr, "bench: out of host memory\n");
        goto out;
    }
    /* Every page touched once, on both sides, before timing. */
    memset(host.src, 1, n);
    memset(host.dst, 0, n);
    if (bench_failed(rill_memset_async(peer.src, 1, n, peer.s), "rill_memset_async") ||
        bench_failed(rill_memset_async(peer.dst, 0, n, peer.s), "rill_memset_async") ||
        bench_failed(rill_stream_synchronize(peer.s), "rill_stream_synchronize"))
        goto out;
    bench_row row = {.id = "x2",
                     .name = "rill_memcpy_async, device 0 -> device 1",
                     .unit = "GB/s",
                     .higher_is_better = true,
                     .baseline_name = "memcpy, host to host"};
    rc = bench_measure_row(b->report, &row, sample_peer_copy, &peer, sample_host_copy, &host,
                           b->cfg.copy_repeats);
out:
    free(host.src);
    free(host.dst);
    if (peer.s)
        rill_stream_destroy(peer.s);
    if (peer.src)
        rill_free(peer.src);
    if (peer.dst)
        rill_free(peer.dst);
    return rc;
}

/* ---- main ---- */

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    int count = 0;
    if (bench_failed(rill_device_count(&count), "rill_device_count"))
        return -1;
    if (count < 2) {
        fprintf(stderr, "bench_devices: %d device; set RILL_CPU_DEVICES=2 or more\n", count);
        return -1;
    }
    rill_device_info info[2];
    for (int i = 0; i < 2; i++)
        if (bench_failed(rill_device_get(i, &b->dev[i]), "rill_device_get") ||
            bench_failed(rill_device_get_info(b->dev[i], &info[i]), "rill_device_get_info"))
            return -1;
    snprintf(device->name, sizeof(device->name), "%.*s", 100, info[0].name);
    device->compute_units = info[0].compute_units;
    snprintf(device->platform, sizeof(device->platform), "%d devices; device 1: %.*s", count, 100,
             info[1].name);
    return 0;
}

static const bench_cli_figure figures[] = {
    {'1', figure_hops},
    {'2', figure_copy},
};

static const bench_cli cli = {
    .program = "bench_devices",
    .subject = "rill",
    .figure_prefix = "x",
    .quick_help = "fewer hops, smaller copies, fewer repeats (a CI smoke run, a few s)",
    .figures_help = "                1 event hop between devices   2 peer copy\n",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = bench_rill_shutdown,
};

int main(int argc, char **argv) {
    /* Two devices unless the caller chose how many. */
    setenv("RILL_CPU_DEVICES", "2", 0);
    bench b = {0};
    return bench_cli_main(&cli, &b, argc, argv);
}
