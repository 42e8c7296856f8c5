/* SPDX-License-Identifier: MIT */
/* bench_cuda_calls: what rill's CUDA device asks of the driver per public
 * call, counted by the stand-in driver (tests/cuda_fake, whose counters
 * fake_cuda_counts.h reads), beside what the CUDA runtime asks for the
 * same work. It runs where RILL_CUDA_DRIVER names the stand-in (ctest's
 * bench_cuda_calls_smoke sets it); with another driver it says so and
 * exits 77.
 *
 * Each figure has two rows: driver calls per rill call (every thread's,
 * the context switches of rill__cuda_enter left out: they have their own
 * row), and GPU-side memory operations (cuStreamWriteValue64 and the
 * like). The baseline column is the CUDA runtime's count for the same work:
 * cudaLaunchKernel is one cuLaunchKernel, cudaStreamSynchronize one call,
 * cudaEventRecord + cudaStreamWaitEvent two, cudaMallocAsync +
 * cudaFreeAsync from a warm pool none, cudaLaunchHostFunc one, and
 * cudaGraphLaunch of an instantiated graph one. */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fake_cuda_counts.h"
#include "harness.h"
#include "rill.h"

enum { EXIT_SKIP = 77 }; /* tests' SKIP_RETURN_CODE */

/* ---- the kernels (the stand-in runs NAME_host for entry NAME) ---- */

__attribute__((visibility("default"))) void calls_empty_host(const rill_block_ctx *ctx,
                                                             const void *args);
void calls_empty_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

/* Holds its stream until the gate opens, so that a wait is a real one. */
static _Atomic int gate;

__attribute__((visibility("default"))) void calls_gate_host(const rill_block_ctx *ctx,
                                                            const void *args);
void calls_gate_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    while (!atomic_load(&gate))
        bench_sleep_us(20);
}

typedef struct bench {
    fake_cuda_counters counters;
    bench_report *report;
    int n;       /* rill calls per sample */
    int repeats; /* samples per row */
    rill_device *dev;
    rill_stream *s, *t;
    rill_event *e;
    rill_kernel *empty, *gating;
} bench;

static int ok(rill_status st, const char *call) {
    if (st == RILL_OK)
        return 0;
    fprintf(stderr, "bench_cuda_calls: %s: %s: %s\n", call, rill_status_name(st),
            rill_last_error());
    return -1;
}

static int launch(rill_stream *s, rill_kernel *k) {
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, NULL, 0, NULL, 0};
    return ok(rill_launch_kernel(s, k, &l), "rill_launch_kernel");
}

/* What one sample counted, per rill call. */
typedef struct counts {
    double calls, memops, context;
} counts;

static counts take(bench *b, int n) {
    fake_cuda_counters *c = &b->counters;
    uint64_t context = c->calls("cuCtxGetCurrent") + c->calls("cuCtxSetCurrent");
    return (counts){(double)(c->calls(NULL) - context) / n, (double)c->memops() / n,
                    (double)context / n};
}

/* ---- the figures: each runs b->n rill calls and counts them ---- */

typedef enum which { LAUNCH, LAUNCH_SYNC, EVENT_WAIT, ALLOC_FREE, HOST_FUNC, GRAPH } which;

static void count_run(void *arg) {
    atomic_fetch_add((_Atomic int *)arg, 1);
}

static int run(bench *b, which w, counts *out) {
    fake_cuda_counters *c = &b->counters;
    static _Atomic int runs;
    int n = b->n;
    switch (w) {
    case LAUNCH: /* n launches; the synchronize after is not counted */
        c->reset();
        for (int i = 0; i < n; i++)
            if (launch(b->s, b->empty) != 0)
                return -1;
        *out = take(b, n);
        return ok(rill_stream_synchronize(b->s), "rill_stream_synchronize");
    case LAUNCH_SYNC:
        c->reset();
        for (int i = 0; i < n; i++)
            if (launch(b->s, b->empty) != 0 ||
                ok(rill_stream_synchronize(b->s), "rill_stream_synchronize") != 0)
                return -1;
        *out = take(b, n);
        return 0;
    case EVENT_WAIT: { /* the record and the wait, with the awaited stream busy */
        counts sum = {0, 0, 0};
        for (int i = 0; i < n; i++) {
            atomic_store(&gate, 0);
            if (launch(b->s, b->gating) != 0)
                return -1;
            c->reset();
            if (ok(rill_event_record(b->e, b->s), "rill_event_record") != 0 ||
                ok(rill_stream_wait_event(b->t, b->e), "rill_stream_wait_event") != 0)
                return -1;
            counts one = take(b, 1);
            sum.calls += one.calls;
            sum.memops += one.memops;
            sum.context += one.context;
            atomic_store(&gate, 1);
            if (ok(rill_stream_synchronize(b->t), "rill_stream_synchronize") != 0)
                return -1;
        }
        *out = (counts){sum.calls / n, sum.memops / n, sum.context / n};
        return 0;
    }
    case ALLOC_FREE:
        c->reset();
        for (int i = 0; i < n; i++) {
            void *p;
            if (ok(rill_malloc_async(4096, b->s, &p), "rill_malloc_async") != 0 ||
                ok(rill_free_async(p, b->s), "rill_free_async") != 0)
                return -1;
        }
        *out = take(b, n);
        return ok(rill_stream_synchronize(b->s), "rill_stream_synchronize");
    case HOST_FUNC: /* n host functions, then one synchronize, all counted */
        atomic_store(&runs, 0);
        c->reset();
        for (int i = 0; i < n; i++)
            if (ok(rill_launch_host_func(b->s, count_run, &runs), "rill_launch_host_func") != 0)
                return -1;
        if (ok(rill_stream_synchronize(b->s), "rill_stream_synchronize") != 0)
            return -1;
        *out = take(b, n);
        return atomic_load(&runs) == n ? 0 : -1;
    case GRAPH:
        break;
    }
    return -1;
}

/* A chain of 1,000 empty kernels, launched and synchronized: the figure
 * is per launch. */
static int run_graph(bench *b, counts *out) {
    enum { NODES = 1000 };
    rill_graph *g;
    rill_graph_exec *x = NULL;
    rill_graph_node *prev = NULL;
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, NULL, 0, NULL, 0};
    if (ok(rill_graph_create(&g), "rill_graph_create") != 0)
        return -1;
    int rc = -1;
    for (int i = 0; i < NODES; i++) {
        rill_graph_node *node;
        if (ok(rill_graph_add_kernel_node(g, prev != NULL ? &prev : NULL, prev != NULL, b->empty,
                                          &l, &node),
               "rill_graph_add_kernel_node") != 0)
            goto out;
        prev = node;
    }
    if (ok(rill_graph_instantiate(g, &x), "rill_graph_instantiate") != 0 ||
        ok(rill_graph_launch(x, b->s), "rill_graph_launch") != 0 ||
        ok(rill_stream_synchronize(b->s), "rill_stream_synchronize") != 0)
        goto out;
    b->counters.reset();
    if (ok(rill_graph_launch(x, b->s), "rill_graph_launch") != 0 ||
        ok(rill_stream_synchronize(b->s), "rill_stream_synchronize") != 0)
        goto out;
    *out = take(b, 1);
    rc = 0;
out:
    if (x != NULL)
        (void)rill_graph_exec_destroy(x);
    (void)rill_graph_destroy(g);
    return rc;
}

typedef struct figure_def {
    char id;
    which w;
    const char *title;
    const char *what;     /* the rill calls */
    const char *baseline; /* the CUDA runtime's */
    double runtime_calls, runtime_memops;
} figure_def;

static const figure_def defs[] = {
    {'a', LAUNCH, "a. kernel launch (target 1 call, 0 memops)", "rill_launch_kernel",
     "cudaLaunchKernel", 1, 0},
    {'b', LAUNCH_SYNC, "b. launch + stream synchronize (target <= 3 calls)", "launch + synchronize",
     "cudaLaunchKernel + cudaStreamSynchronize", 2, 0},
    {'c', EVENT_WAIT,
     "c. event record + wait on another stream of the device (target <= 2 calls, no event "
     "made)",
     "record + wait", "cudaEventRecord + cudaStreamWaitEvent", 2, 0},
    {'d', ALLOC_FREE, "d. rill_malloc_async + rill_free_async, warm (target 0)", "alloc + free",
     "cudaMallocAsync + cudaFreeAsync", 0, 0},
    {'e', HOST_FUNC, "e. host function, then one synchronize per sample (target <= 2 calls)",
     "rill_launch_host_func", "cudaLaunchHostFunc", 1, 0},
    {'f', GRAPH, "f. graph launch + synchronize, chain of 1000 kernels (target <= 2 calls)",
     "rill_graph_launch", "cudaGraphLaunch + cudaStreamSynchronize", 2, 0},
};

typedef struct sampler {
    bench *b;
    const figure_def *f;
    int field; /* 0 calls, 1 memops, 2 context */
} sampler;

/* Runs a sample of the figure and keeps the field asked for. Each row is
 * sampled apart: a count is the same whichever row asks. */
static int sample(void *ctx, double *value) {
    sampler *s = ctx;
    counts c = {0, 0, 0};
    int rc = s->f->w == GRAPH ? run_graph(s->b, &c) : run(s->b, s->f->w, &c);
    *value = s->field == 0 ? c.calls : s->field == 1 ? c.memops : c.context;
    return rc;
}

static int measure(bench *b, const figure_def *f) {
    static const char *units[] = {"calls", "memops", "calls"};
    static const char *kinds[] = {"driver calls", "GPU memory operations", "context switches"};
    bench_report_section(b->report, f->title);
    int rc = 0;
    for (int field = 0; field < 3; field++) {
        /* The report keeps the id's pointer. */
        static const char ids[][3][3] = {{"a1", "a2", "a3"}, {"b1", "b2", "b3"},
                                         {"c1", "c2", "c3"}, {"d1", "d2", "d3"},
                                         {"e1", "e2", "e3"}, {"f1", "f2", "f3"}};
        const char *id = ids[f->id - 'a'][field];
        char name[128];
        snprintf(name, sizeof name, "%s: %s", f->what, kinds[field]);
        sampler s = {b, f, field};
        double base = field == 0 ? f->runtime_calls : f->runtime_memops;
        bench_row row = {.id = id,
                         .name = name,
                         .unit = units[field],
                         .baseline_name = field < 2 ? f->baseline : NULL,
                         .baseline = {base, base, base, field < 2 ? 1 : 0},
                         /* counts: the cross-core probe says nothing of them */
                         .probe_before_ns = NAN,
                         .probe_after_ns = NAN};
        bench_watchdog_note(id);
        if (bench_repeat(sample, &s, b->repeats, &row.value) != 0 ||
            bench_report_add(b->report, &row) != 0)
            rc = -1;
    }
    return rc;
}

static bench the_bench;

#define FIGURE(c, i)                                                                               \
    static int figure_##c(void *ctx) {                                                             \
        return measure(ctx, &defs[i]);                                                             \
    }
FIGURE(a, 0)
FIGURE(b, 1)
FIGURE(c, 2)
FIGURE(d, 3)
FIGURE(e, 4)
FIGURE(f, 5)

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->report = report;
    b->n = quick ? 50 : 1000;
    b->repeats = quick ? 3 : 7;
    if (ok(rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &b->dev), "rill_device_get_by_kind") ||
        ok(rill_stream_create(b->dev, 0, &b->s), "rill_stream_create") ||
        ok(rill_stream_create(b->dev, 0, &b->t), "rill_stream_create") ||
        ok(rill_event_create(0, &b->e), "rill_event_create"))
        return -1;
    rill_kernel_desc empty = {"calls_empty", NULL, "// stand-in", "calls_empty"};
    rill_kernel_desc gating = {"calls_gate", NULL, "// stand-in", "calls_gate"};
    if (ok(rill_kernel_create(&empty, &b->empty), "rill_kernel_create") ||
        ok(rill_kernel_create(&gating, &b->gating), "rill_kernel_create"))
        return -1;
    /* The first launch of each kernel loads it; the pool's first
     * allocation reserves memory: neither is counted. */
    atomic_store(&gate, 1);
    void *p;
    if (launch(b->s, b->empty) || launch(b->s, b->gating) ||
        ok(rill_malloc_async(4096, b->s, &p), "rill_malloc_async") ||
        ok(rill_free_async(p, b->s), "rill_free_async") ||
        ok(rill_stream_synchronize(b->s), "rill_stream_synchronize"))
        return -1;
    rill_device_info info;
    if (ok(rill_device_get_info(b->dev, &info), "rill_device_get_info"))
        return -1;
    snprintf(device->name, sizeof device->name, "%.90s (the stand-in CUDA driver)", info.name);
    device->compute_units = info.compute_units;
    snprintf(device->platform, sizeof device->platform,
             "counts per rill call; baseline: the CUDA runtime's count for the same work");
    return 0;
}

static int teardown(void *ctx) {
    bench *b = ctx;
    (void)b;
    return ok(rill_shutdown(), "rill_shutdown");
}

static const bench_cli_figure figures[] = {
    {'a', figure_a}, {'b', figure_b}, {'c', figure_c},
    {'d', figure_d}, {'e', figure_e}, {'f', figure_f},
};

static const bench_cli cli = {
    .program = "bench_cuda_calls",
    .subject = "rill",
    .figure_prefix = "",
    .quick_help = "50 calls per sample, 3 samples (a smoke run)",
    .figures_help = "                a launch        b launch + sync    c event record + wait\n"
                    "                d alloc + free  e host function    f graph launch\n",
    .header_note = " (baseline: the CUDA runtime's count)",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = teardown,
};

int main(int argc, char **argv) {
    if (fake_cuda_counters_open(&the_bench.counters) != 0) {
        printf("bench_cuda_calls: skipped: RILL_CUDA_DRIVER does not name the stand-in driver "
               "(tests/cuda_fake), whose counters it reads\n");
        return EXIT_SKIP;
    }
    return bench_cli_main(&cli, &the_bench, argc, argv);
}
