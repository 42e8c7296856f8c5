/* SPDX-License-Identifier: MIT */
/* bench_cuda_baseline: the CUDA runtime's own figures on this machine's GPU
 * (cudart and cuBLAS, cuda_side.c) with rill's figure for the same operation
 * beside each (rill_side.c), alternating repeat by repeat, over one list of
 * rows (cb_op, sides.h): launches, synchronizes, event hops, graph replay,
 * allocation, host functions, matrix products. Without a GPU (and no
 * RILL_DEVICE) it prints "skipped: no CUDA device" and exits with 77. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harness.h"
#include "rill.h"
#include "sides.h"

enum { EXIT_SKIP = 77 }; /* tests' SKIP_RETURN_CODE */

const size_t cb_pair_sizes[] = {256,       1u << 10,   4u << 10, 16u << 10,
                                64u << 10, 256u << 10, 1u << 20, 4u << 20};
const int cb_num_pair_sizes = sizeof cb_pair_sizes / sizeof cb_pair_sizes[0];

static const cb_config full_config = {
    .launch_batches = 100,
    .launch_batch = 100,
    .sync_rounds = 2000,
    .hops = 2000,
    .graph_nodes = 1000,
    .graph_runs = 50,
    .alloc_pairs = 100000,
    .host_funcs = 5000,
    .spin_kernels = 200,
    .spin_ns = 50000,
    .idle_ms = 20,
    .mm_f32_n = 4096,
    .mm_f16_n = 8192,
    .mm_runs = 10,
    .repeats = 7,
    .idle_repeats = 21,
};

/* A smoke run: every row, in seconds, small matrices. */
static const cb_config quick_config = {
    .launch_batches = 5,
    .launch_batch = 20,
    .sync_rounds = 50,
    .hops = 50,
    .graph_nodes = 1000,
    .graph_runs = 3,
    .alloc_pairs = 2000,
    .host_funcs = 200,
    .spin_kernels = 8,
    .spin_ns = 20000,
    .idle_ms = 20,
    .mm_f32_n = 256,
    .mm_f16_n = 256,
    .mm_runs = 2,
    .repeats = 3,
    .idle_repeats = 3,
};

/* ---- the rows ---- */

typedef struct row_def {
    char figure; /* the --only letter */
    const char *id;
    const char *unit;
    bool higher_is_better;
    const char *baseline_name;
} row_def;

static const row_def rows[CB_NUM_OPS] = {
    [CB_LAUNCH] = {'a', "a1", "us", false, "cudaLaunchKernel"},
    [CB_LAUNCH_SYNC] = {'b', "b1", "us", false, "cudaLaunchKernel + cudaStreamSynchronize"},
    [CB_EVENT_HOP] = {'c', "c1", "us/hop", false, "cudaEventRecord + cudaStreamWaitEvent"},
    [CB_GRAPH_CHAIN] = {'d', "d1", "ns/node", false, "cudaGraphLaunch + cudaStreamSynchronize"},
    [CB_GRAPH_FAN] = {'d', "d2", "ns/node", false, "cudaGraphLaunch + cudaStreamSynchronize"},
    [CB_ALLOC_PAIR] = {'e', "e1", "ns/pair", false, "cudaMallocAsync + cudaFreeAsync"},
    [CB_HOST_FUNC] = {'f', "f1", "us", false, "cudaLaunchHostFunc"},
    [CB_TWO_STREAMS] = {'g', "g1", "x", true, "CUDA streams, 2 over 1"},
    [CB_IDLE_LAUNCH] = {'h', "h1", "us", false, "cudaLaunchKernel + cudaStreamSynchronize"},
    [CB_MATMUL_F32] = {'i', "i1", "TFLOP/s", true, "cublasSgemm"},
    [CB_MATMUL_F16] = {'i', "i2", "TFLOP/s", true, "cublasGemmEx, f16 in, f32 compute"},
};

/* The row's name for people, with the sizes of this run. */
static void row_name(cb_op op, const cb_config *cfg, char *buf, size_t size) {
    switch (op) {
    case CB_LAUNCH:
        snprintf(buf, size, "empty kernel: launch call alone");
        break;
    case CB_LAUNCH_SYNC:
        snprintf(buf, size, "empty kernel: launch + synchronize");
        break;
    case CB_EVENT_HOP:
        snprintf(buf, size, "kernel on A, record, B waits, and back");
        break;
    case CB_GRAPH_CHAIN:
        snprintf(buf, size, "replay, chain of %d kernels", cfg->graph_nodes);
        break;
    case CB_GRAPH_FAN:
        snprintf(buf, size, "replay, fan 1 -> %d -> 1", cfg->graph_nodes - 2);
        break;
    case CB_ALLOC_PAIR:
        snprintf(buf, size, "allocate + free pair, 256 B..4 MiB in turn");
        break;
    case CB_HOST_FUNC:
        snprintf(buf, size, "empty host function, enqueue + execute");
        break;
    case CB_TWO_STREAMS:
        snprintf(buf, size, "%d 1-block %.0f us kernels: 2 streams vs 1", cfg->spin_kernels,
                 (double)cfg->spin_ns / 1e3);
        break;
    case CB_IDLE_LAUNCH:
        snprintf(buf, size, "launch + synchronize after %u ms idle", cfg->idle_ms);
        break;
    case CB_MATMUL_F32:
        snprintf(buf, size, "f32 matmul %zu^3", cfg->mm_f32_n);
        break;
    case CB_MATMUL_F16:
        snprintf(buf, size, "f16 matmul %zu^3", cfg->mm_f16_n);
        break;
    case CB_NUM_OPS:
        buf[0] = '\0';
        break;
    }
}

typedef struct figure_def {
    char id;
    const char *title;
} figure_def;

static const figure_def figure_titles[] = {
    {'a', "a. empty-kernel launch, the call alone (batches synchronized untimed)"},
    {'b', "b. empty-kernel launch + stream synchronize, round trip"},
    {'c', "c. cross-stream event hop, per hop"},
    {'d', "d. graph replay (launch + synchronize) per node"},
    {'e', "e. stream-ordered allocate + free on one stream"},
    {'f', "f. host functions on one stream"},
    {'g', "g. one-block spin kernels, speedup of two streams over one"},
    {'h', "h. the first launch after a pause"},
    {'i', "i. matrix products, square, row-major (torch.mm: bench/cuda/torch_mm.py)"},
};

/* ---- the run ---- */

typedef struct bench {
    cb_config cfg;
    bench_report *report; /* borrowed: bench_cli_main owns it */
    bool has_cuda;        /* the CUDA runtime sees a device */
    char cuda_why[160];   /* why not, when it does not */
    cb_side cuda, rill;
    bool cuda_open, rill_open;
    char rill_note[64];      /* why the rill column is empty, when rill_open is false */
    char rill_name[160];     /* the rill device, or rill_note: for the header and the meta */
    char cuda_platform[160]; /* the CUDA side's versions, or cuda_why: for the meta */
} bench;

typedef struct side_op {
    cb_side *side;
    cb_op op;
} side_op;

static int sample_side(void *ctx, double *value) {
    side_op *so = ctx;
    return so->side->sample(so->side->state, so->op, value);
}

/* Prepares one side for op: 0 ready, 1 not measured (note says why), -1. */
static int prepare_side(cb_side *side, bool open, const char *closed_note, cb_op op, char *note,
                        size_t note_size) {
    if (!open) {
        snprintf(note, note_size, "%s", closed_note);
        return 1;
    }
    return side->prepare(side->state, op, note, note_size);
}

/* Measures one row: both sides alternately where both can, else the one
 * that can, and adds it to the report. */
static int measure(bench *b, cb_op op) {
    const row_def *d = &rows[op];
    char name[128], rill_note[64] = "", cuda_note[64] = "";
    row_name(op, &b->cfg, name, sizeof name);
    bench_row row = {.id = d->id,
                     .name = name,
                     .unit = d->unit,
                     .higher_is_better = d->higher_is_better,
                     .baseline_name = d->baseline_name};
    bench_watchdog_note(d->id);
    int repeats = op == CB_IDLE_LAUNCH ? b->cfg.idle_repeats : b->cfg.repeats;
    side_op r = {&b->rill, op}, c = {&b->cuda, op};
    int rc = -1;
    int rp = prepare_side(&b->rill, b->rill_open, b->rill_note, op, rill_note, sizeof rill_note);
    int cp = rp < 0 ? 1
                    : prepare_side(&b->cuda, b->cuda_open, "no CUDA device", op, cuda_note,
                                   sizeof cuda_note);
    if (rp < 0 || cp < 0)
        goto out;
    row.probe_before_ns = bench_probe_hop_ns();
    if (rp == 0 && cp == 0)
        rc =
            bench_repeat_pair(sample_side, &r, &row.value, sample_side, &c, &row.baseline, repeats);
    else if (rp == 0)
        rc = bench_repeat(sample_side, &r, repeats, &row.value);
    else if (cp == 0)
        rc = bench_repeat(sample_side, &c, repeats, &row.baseline);
    else
        rc = 0;
    row.probe_after_ns = bench_probe_hop_ns();
    row.value_note = rill_note;
    row.baseline_note = cuda_note;
    if (rc == 0)
        rc = bench_report_add(b->report, &row);
out:
    if (b->rill_open)
        b->rill.release(b->rill.state, op);
    if (b->cuda_open)
        b->cuda.release(b->cuda.state, op);
    return rc;
}

static int run_figure(bench *b, char figure) {
    for (size_t i = 0; i < sizeof figure_titles / sizeof figure_titles[0]; i++)
        if (figure_titles[i].id == figure)
            bench_report_section(b->report, figure_titles[i].title);
    int rc = 0;
    for (int op = 0; op < CB_NUM_OPS; op++)
        if (rows[op].figure == figure && measure(b, (cb_op)op) != 0)
            rc = -1;
    return rc;
}

static int figure_a(void *ctx) {
    return run_figure(ctx, 'a');
}
static int figure_b(void *ctx) {
    return run_figure(ctx, 'b');
}
static int figure_c(void *ctx) {
    return run_figure(ctx, 'c');
}
static int figure_d(void *ctx) {
    return run_figure(ctx, 'd');
}
static int figure_e(void *ctx) {
    return run_figure(ctx, 'e');
}
static int figure_f(void *ctx) {
    return run_figure(ctx, 'f');
}
static int figure_g(void *ctx) {
    return run_figure(ctx, 'g');
}
static int figure_h(void *ctx) {
    return run_figure(ctx, 'h');
}
static int figure_i(void *ctx) {
    return run_figure(ctx, 'i');
}

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    char platform[sizeof device->platform] = "";
    if (b->has_cuda) {
        if (cuda_side_open(&b->cuda, &b->cfg, device->name, sizeof device->name,
                           &device->compute_units, platform, sizeof platform) != 0)
            return -1;
        b->cuda_open = true;
    } else {
        snprintf(device->name, sizeof device->name, "no CUDA device");
        snprintf(platform, sizeof platform, "%.120s", b->cuda_why);
    }
    char rill_name[128];
    int rc = rill_side_open(&b->rill, &b->cfg, rill_name, sizeof rill_name, b->rill_note,
                            sizeof b->rill_note);
    if (rc < 0)
        return -1;
    b->rill_open = rc == 0;
    snprintf(b->rill_name, sizeof b->rill_name, "%s", b->rill_open ? rill_name : b->rill_note);
    snprintf(b->cuda_platform, sizeof b->cuda_platform, "%s", b->has_cuda ? platform : b->cuda_why);
    /* The two halves cut to fit the line: the meta keeps the rill device whole. */
    snprintf(device->platform, sizeof device->platform, "%.70s; rill: %.48s", platform,
             b->rill_name);
    if (bench_report_meta_str(report, "rill_device", b->rill_name) ||
        bench_report_meta_str(report, "cuda", b->cuda_platform) ||
        bench_report_meta_num(report, "mm_f32_n", (double)b->cfg.mm_f32_n) ||
        bench_report_meta_num(report, "mm_f16_n", (double)b->cfg.mm_f16_n)) {
        fprintf(stderr, "bench_cuda_baseline: out of memory\n");
        return -1;
    }
    return 0;
}

/* The rill side first: its streams live in the context the CUDA side made. */
static int teardown(void *ctx) {
    bench *b = ctx;
    int rc = rill_side_close(&b->rill);
    if (b->cuda_open && cuda_side_close(&b->cuda) != 0)
        rc = -1;
    return rc;
}

static const bench_cli_figure figures[] = {
    {'a', figure_a}, {'b', figure_b}, {'c', figure_c}, {'d', figure_d}, {'e', figure_e},
    {'f', figure_f}, {'g', figure_g}, {'h', figure_h}, {'i', figure_i},
};

static const bench_cli cli = {
    .program = "bench_cuda_baseline",
    .subject = "rill",
    .figure_prefix = "",
    .quick_help = "few repeats and 256^3 products (a smoke run, seconds)",
    .figures_help = "                a launch call   b launch + sync    c event hop\n"
                    "                d graph replay  e allocate + free  f host function\n"
                    "                g 2 streams/1   h after 20 ms idle i matmul f32, f16\n",
    .header_note = " (baseline: the CUDA runtime)",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = teardown,
};

static bool wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

/* Whether a device chosen with RILL_DEVICE gives the rill column something
 * to measure when the CUDA runtime has no device. */
static bool rill_device_chosen(void) {
    const char *chosen = getenv("RILL_DEVICE");
    rill_device *dev;
    return chosen != NULL && chosen[0] != '\0' && rill_get_device(&dev) == RILL_OK;
}

int main(int argc, char **argv) {
    static bench b;
    b.has_cuda = cuda_side_has_device(b.cuda_why, sizeof b.cuda_why);
    if (!b.has_cuda && !wants_help(argc, argv) && !rill_device_chosen()) {
        printf("bench_cuda_baseline: skipped: no CUDA device (%s)\n", b.cuda_why);
        rill_shutdown();
        return EXIT_SKIP;
    }
    return bench_cli_main(&cli, &b, argc, argv);
}
