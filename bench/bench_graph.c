/* SPDX-License-Identifier: MIT */
/* bench_graph: what a graph launch costs per node, against launching the
 * same kernels one by one and against oneTBB's flow_graph (tbb_flow.cpp)
 * on the same graphs: g1 a 1000-kernel chain replay vs eager, g2..g4 the
 * chain and a 1000-wide fan against TBB on one thread and on rill's worker
 * count. Figures are nanoseconds per node, medians of repeats. g2 runs
 * before any multi-thread TBB arena exists: TBB's workers spin on after. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "harness.h"
#include "rill.h"
#include "rill_bench.h"
#ifdef RILL_BENCH_TBB
#include "tbb_flow.h"
#endif

enum { NODES = 1000 };

typedef struct config {
    int runs;    /* launches per sample */
    int repeats; /* samples per row */
} config;

static const config full_config = {2000, 7};
static const config quick_config = {100, 3};

static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

typedef struct graph_ctx {
    rill_graph_exec *exec;
    rill_stream *stream;
    rill_kernel *kernel;
    int runs;
    int nodes;
} graph_ctx;

static int sample_replay(void *p, double *ns_per_node) {
    graph_ctx *c = p;
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < c->runs; r++) {
        if (bench_failed(rill_graph_launch(c->exec, c->stream), "rill_graph_launch") ||
            bench_failed(rill_stream_synchronize(c->stream), "rill_stream_synchronize"))
            return -1;
    }
    *ns_per_node = (double)(bench_now_ns() - t0) / ((double)c->runs * c->nodes);
    return 0;
}

static int sample_eager(void *p, double *ns_per_node) {
    graph_ctx *c = p;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < c->runs; r++) {
        for (int i = 0; i < c->nodes; i++)
            if (bench_failed(rill_launch_kernel(c->stream, c->kernel, &l), "rill_launch_kernel"))
                return -1;
        if (bench_failed(rill_stream_synchronize(c->stream), "rill_stream_synchronize"))
            return -1;
    }
    *ns_per_node = (double)(bench_now_ns() - t0) / ((double)c->runs * c->nodes);
    return 0;
}

#ifdef RILL_BENCH_TBB
typedef struct tbb_ctx {
    tbb_graph *g;
    int runs;
    int nodes;
} tbb_ctx;

static int sample_tbb(void *p, double *ns_per_node) {
    tbb_ctx *c = p;
    *ns_per_node = tbb_graph_run_ns(c->g, c->runs) / ((double)c->runs * c->nodes);
    return 0;
}
#endif

/* The chain (fan_out false) or the fan-out/fan-in, by hand. */
static rill_graph_exec *build(rill_kernel *k, bool fan_out) {
    rill_graph *g;
    rill_graph_exec *x = NULL;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    rill_graph_node *nodes[NODES];
    if (bench_failed(rill_graph_create(&g), "rill_graph_create"))
        return NULL;
    for (int i = 0; i < NODES; i++) {
        rill_graph_node **deps = NULL;
        size_t num_deps = 0;
        if (i > 0 && !fan_out) {
            deps = &nodes[i - 1];
            num_deps = 1;
        } else if (i > 0 && i < NODES - 1) {
            deps = &nodes[0];
            num_deps = 1;
        } else if (i == NODES - 1) {
            deps = &nodes[1];
            num_deps = NODES - 2;
        }
        if (bench_failed(rill_graph_add_kernel_node(g, deps, num_deps, k, &l, &nodes[i]),
                         "rill_graph_add_kernel_node"))
            goto out;
    }
    bench_failed(rill_graph_instantiate(g, &x), "rill_graph_instantiate");
out:
    rill_graph_destroy(g);
    return x;
}

/* Measures one row of replay against a TBB baseline with tbb_threads
 * threads (a row without baseline when TBB is not built in). */
static int tbb_row(bench_report *report, const config *cfg, const char *id, const char *name,
                   graph_ctx *c, bool fan_out, int tbb_threads) {
    static char base_name[64];
    bench_row row = {.id = id, .name = name, .unit = "ns/node"};
#ifdef RILL_BENCH_TBB
    snprintf(base_name, sizeof base_name, "oneTBB flow_graph, %d thread%s", tbb_threads,
             tbb_threads == 1 ? "" : "s");
    tbb_ctx t = {tbb_graph_create(NODES, fan_out, tbb_threads), cfg->runs, NODES};
    row.baseline_name = base_name;
    double ignored;
    sample_tbb(&t, &ignored); /* warm the arena's threads */
    int rc = bench_measure_row(report, &row, sample_replay, c, sample_tbb, &t, cfg->repeats);
    tbb_graph_destroy(t.g);
    return rc;
#else
    (void)fan_out;
    (void)tbb_threads;
    (void)base_name;
    row.probe_before_ns = bench_probe_hop_ns();
    if (bench_repeat(sample_replay, c, cfg->repeats, &row.value) != 0)
        return -1;
    row.probe_after_ns = bench_probe_hop_ns();
    return bench_report_add(report, &row);
#endif
}

/* ---- main ---- */

typedef struct bench {
    config cfg;
    bench_report *report; /* borrowed: bench_cli_main owns it */
    int workers;
    rill_kernel *kernel;          /* owned */
    rill_stream *stream;          /* owned */
    rill_graph_exec *chain, *fan; /* owned */
    graph_ctx cc, fc;             /* replays of chain and fan on stream */
    bool begun;                   /* begin() has run */
} bench;

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    rill_device *dev;
    rill_device_info info;
    rill_kernel_desc kd = {.name = "empty", .cpu = empty_kernel};
    if (bench_failed(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev), "device") ||
        bench_failed(rill_device_get_info(dev, &info), "rill_device_get_info") ||
        bench_failed(rill_kernel_create(&kd, &b->kernel), "rill_kernel_create") ||
        bench_failed(rill_stream_create(dev, 0, &b->stream), "rill_stream_create"))
        return -1;
    b->workers = info.compute_units;
    snprintf(device->name, sizeof(device->name), "%.*s", (int)sizeof(info.name), info.name);
    device->compute_units = info.compute_units;
    b->chain = build(b->kernel, false);
    b->fan = build(b->kernel, true);
    if (b->chain == NULL || b->fan == NULL)
        return -1;
    b->cc = (graph_ctx){b->chain, b->stream, b->kernel, b->cfg.runs, NODES};
    b->fc = (graph_ctx){b->fan, b->stream, b->kernel, b->cfg.runs, NODES};
    return 0;
}

/* Before the first selected figure: one untimed run of each kind, then the
 * section line. */
static void begin(bench *b) {
    if (b->begun)
        return;
    b->begun = true;
    double ignored;
    sample_replay(&b->cc, &ignored);
    sample_replay(&b->fc, &ignored);
    sample_eager(&b->cc, &ignored);
    bench_report_section(b->report, "g. graph launches of 1000 empty 1-block kernels, launch + "
                                    "synchronize per run");
}

static int figure_chain_eager(void *ctx) {
    bench *b = ctx;
    begin(b);
    bench_row row = {.id = "g1",
                     .name = "chain: replay (baseline: eager launches)",
                     .unit = "ns/node",
                     .baseline_name = "1000 rill_launch_kernel + synchronize"};
    bench_watchdog_note("g1");
    return bench_measure_row(b->report, &row, sample_replay, &b->cc, sample_eager, &b->cc,
                             b->cfg.repeats);
}

static int figure_fan_one_thread(void *ctx) {
    bench *b = ctx;
    begin(b);
    bench_watchdog_note("g2");
    return tbb_row(b->report, &b->cfg, "g2", "fan-out/fan-in: replay vs 1 TBB thread", &b->fc, true,
                   1);
}

static int figure_chain_tbb(void *ctx) {
    bench *b = ctx;
    begin(b);
    bench_watchdog_note("g3");
    return tbb_row(b->report, &b->cfg, "g3", "chain: replay", &b->cc, false, b->workers);
}

static int figure_fan_tbb(void *ctx) {
    bench *b = ctx;
    begin(b);
    bench_watchdog_note("g4");
    return tbb_row(b->report, &b->cfg, "g4", "fan-out/fan-in: replay", &b->fc, true, b->workers);
}

static int teardown(void *ctx) {
    bench *b = ctx;
    int rc = 0;
    if (b->chain && bench_failed(rill_graph_exec_destroy(b->chain), "rill_graph_exec_destroy"))
        rc = -1;
    if (b->fan && bench_failed(rill_graph_exec_destroy(b->fan), "rill_graph_exec_destroy"))
        rc = -1;
    if (b->stream && bench_failed(rill_stream_destroy(b->stream), "rill_stream_destroy"))
        rc = -1;
    if (b->kernel && bench_failed(rill_kernel_destroy(b->kernel), "rill_kernel_destroy"))
        rc = -1;
    bench_watchdog_note("rill_shutdown");
    if (bench_failed(rill_shutdown(), "rill_shutdown"))
        rc = -1;
    return rc;
}

/* g2 stays before g3 and g4: see the top of the file. */
static const bench_cli_figure figures[] = {
    {'1', figure_chain_eager},
    {'2', figure_fan_one_thread},
    {'3', figure_chain_tbb},
    {'4', figure_fan_tbb},
};

static const bench_cli cli = {
    .program = "bench_graph",
    .subject = "rill",
    .figure_prefix = "g",
    .quick_help = "fewer runs and repeats (a CI smoke run, < 10 s)",
    .figures_help = "                1 chain vs eager launches   2 fan-out/fan-in vs 1 TBB "
                    "thread\n"
                    "                3 chain vs TBB              4 fan-out/fan-in vs TBB\n",
#ifndef RILL_BENCH_TBB
    .header_note = " (oneTBB not found at build time: no TBB baselines)",
#endif
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = teardown,
};

int main(int argc, char **argv) {
    bench b = {0};
    return bench_cli_main(&cli, &b, argc, argv);
}
