/* SPDX-License-Identifier: MIT */
/* bench_comm: collectives over MPI through rill's streams (rill_mpi.h)
 * against plain blocking MPI calls in the same run (mpirun -np 2
 * bench_comm): a, allreduce bandwidth from 1 KiB to 64 MiB; b, 4-byte
 * allreduce latency, back to back and with a synchronize each. Samples
 * start with an MPI_Barrier and alternate with the baseline's (harness.c);
 * rank 0 prints and writes the JSON. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harness.h"
#include "rill.h"
#include "rill_bench.h"
#include "rill_mpi.h"

typedef struct config {
    size_t sample_bytes; /* a: bytes moved per sample (at least 3 calls) */
    int repeats;         /* samples per row */
    int latency_calls;   /* b: calls per sample */
} config;

static const config full_config = {256u << 20, 7, 4000};
static const config quick_config = {32u << 20, 3, 500};

typedef struct bench {
    config cfg;
    bench_report *report; /* borrowed: bench_cli_main owns it */
    int rank, size;
    rill_comm *comm;     /* owned */
    rill_stream *stream; /* owned */
    float *dev;          /* owned: 64 MiB of device memory */
    float *host;         /* owned: 64 MiB of host memory, the baseline's */
} bench;

enum { MAX_FLOATS = 16u << 20 }; /* 64 MiB */

static bool mpi_failed(int rc, const char *call) {
    if (rc == MPI_SUCCESS)
        return false;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fprintf(stderr, "bench_comm: %s: %s\n", call, text);
    return true;
}

/* ---- samples ---- */

typedef struct calls_ctx {
    bench *b;
    size_t count; /* floats per call */
    int calls;    /* per sample */
    bool sync_each;
    bool bandwidth; /* the value is GB/s; else microseconds per call */
} calls_ctx;

static double value_of(const calls_ctx *c, uint64_t ns) {
    double per_call_ns = (double)ns / c->calls;
    return c->bandwidth ? (double)(c->count * sizeof(float)) / per_call_ns : per_call_ns * 1e-3;
}

static int sample_rill(void *p, double *value) {
    calls_ctx *c = p;
    bench *b = c->b;
    if (mpi_failed(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"))
        return -1;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < c->calls; i++) {
        if (bench_failed(
                rill_allreduce_f32(b->stream, b->comm, b->dev, b->dev, c->count, RILL_REDUCE_SUM),
                "rill_allreduce_f32") ||
            (c->sync_each &&
             bench_failed(rill_stream_synchronize(b->stream), "rill_stream_synchronize")))
            return -1;
    }
    if (bench_failed(rill_stream_synchronize(b->stream), "rill_stream_synchronize"))
        return -1;
    *value = value_of(c, bench_now_ns() - t0);
    return 0;
}

static int sample_mpi(void *p, double *value) {
    calls_ctx *c = p;
    bench *b = c->b;
    if (mpi_failed(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"))
        return -1;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < c->calls; i++)
        if (mpi_failed(MPI_Allreduce(MPI_IN_PLACE, b->host, (int)c->count, MPI_FLOAT, MPI_SUM,
                                     MPI_COMM_WORLD),
                       "MPI_Allreduce"))
            return -1;
    *value = value_of(c, bench_now_ns() - t0);
    return 0;
}

/* ---- a. bandwidth ---- */

static int figure_bandwidth(void *ctx) {
    bench *b = ctx;
    static char names[9][64], ids[9][4];
    bench_report_section(b->report, "a. allreduce bandwidth, sum in place, calls back to back "
                                    "(baseline: blocking MPI_Allreduce)");
    int k = 0;
    for (size_t bytes = 1024; bytes <= (size_t)MAX_FLOATS * sizeof(float); bytes *= 4, k++) {
        size_t calls = b->cfg.sample_bytes / bytes;
        calls_ctx c = {b, bytes / sizeof(float),
                       calls < 3      ? 3
                       : calls > 2000 ? 2000
                                      : (int)calls,
                       false, true};
        if (bytes >= 1u << 20)
            snprintf(names[k], sizeof names[k], "allreduce %zu MiB", bytes >> 20);
        else
            snprintf(names[k], sizeof names[k], "allreduce %zu KiB", bytes >> 10);
        snprintf(ids[k], sizeof ids[k], "a%d", k + 1);
        double ignored;
        if (sample_rill(&c, &ignored) != 0 || sample_mpi(&c, &ignored) != 0)
            return -1;
        bench_row row = {.id = ids[k],
                         .name = names[k],
                         .unit = "GB/s",
                         .higher_is_better = true,
                         .baseline_name = "MPI_Allreduce"};
        if (bench_measure_row(b->report, &row, sample_rill, &c, sample_mpi, &c, b->cfg.repeats))
            return -1;
    }
    return 0;
}

/* ---- b. latency ---- */

static int figure_latency(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "b. 4-byte allreduce latency (baseline: blocking "
                                    "MPI_Allreduce)");
    calls_ctx piped = {b, 1, b->cfg.latency_calls, false, false};
    calls_ctx synced = {b, 1, b->cfg.latency_calls / 4, true, false};
    double ignored;
    if (sample_rill(&piped, &ignored) != 0 || sample_rill(&synced, &ignored) != 0 ||
        sample_mpi(&piped, &ignored) != 0)
        return -1;
    bench_row r1 = {.id = "b1",
                    .name = "back to back, synchronized once",
                    .unit = "us",
                    .baseline_name = "MPI_Allreduce"};
    bench_row r2 = {.id = "b2",
                    .name = "each call synchronized",
                    .unit = "us",
                    .baseline_name = "MPI_Allreduce"};
    if (bench_measure_row(b->report, &r1, sample_rill, &piped, sample_mpi, &piped,
                          b->cfg.repeats) != 0)
        return -1;
    return bench_measure_row(b->report, &r2, sample_rill, &synced, sample_mpi, &synced,
                             b->cfg.repeats);
}

/* ---- main ---- */

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    rill_device *dev;
    rill_device_info info;
    if (bench_failed(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev),
                     "rill_device_get_by_kind") ||
        bench_failed(rill_device_get_info(dev, &info), "rill_device_get_info") ||
        bench_failed(rill_comm_create_mpi(MPI_COMM_WORLD, &b->comm), "rill_comm_create_mpi") ||
        bench_failed(rill_stream_create(dev, 0, &b->stream), "rill_stream_create") ||
        bench_failed(rill_malloc(dev, (size_t)MAX_FLOATS * sizeof(float), (void **)&b->dev),
                     "rill_malloc") ||
        bench_failed(rill_memset_async(b->dev, 0, (size_t)MAX_FLOATS * sizeof(float), b->stream),
                     "rill_memset_async"))
        return -1;
    b->host = calloc(MAX_FLOATS, sizeof(float));
    if (b->host == NULL) {
        fprintf(stderr, "bench_comm: out of memory\n");
        return -1;
    }
    snprintf(device->name, sizeof device->name, "%.80s, %d MPI processes", info.name, b->size);
    device->compute_units = info.compute_units;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n,")] = '\0';
    snprintf(device->platform, sizeof device->platform, "%.100s", version);
    return 0;
}

static int teardown(void *ctx) {
    bench *b = ctx;
    int rc = 0;
    if (b->dev != NULL && bench_failed(rill_free(b->dev), "rill_free"))
        rc = -1;
    if (b->stream != NULL && bench_failed(rill_stream_destroy(b->stream), "rill_stream_destroy"))
        rc = -1;
    if (b->comm != NULL && bench_failed(rill_comm_destroy(b->comm), "rill_comm_destroy"))
        rc = -1;
    if (bench_failed(rill_shutdown(), "rill_shutdown"))
        rc = -1;
    free(b->host);
    return rc;
}

static const bench_cli_figure figures[] = {
    {'a', figure_bandwidth},
    {'b', figure_latency},
};

static const bench_cli cli = {
    .program = "bench_comm",
    .subject = "rill",
    .figure_prefix = "",
    .quick_help = "less data and fewer repeats (a smoke run, < 30 s)",
    .figures_help = "                a allreduce bandwidth, 1 KiB to 64 MiB\n"
                    "                b 4-byte allreduce latency\n",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = teardown,
};

int main(int argc, char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "bench_comm: MPI_Init_thread failed\n");
        return 1;
    }
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Every rank measures; rank 0 alone prints and writes the JSON. */
    if (rank != 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            return 1;
        static char dev_null[] = "/dev/null";
        for (int i = 1; i + 1 < argc; i++)
            if (strcmp(argv[i], "--json") == 0)
                argv[i + 1] = dev_null;
    }
    bench b = {0};
    int rc = bench_cli_main(&cli, &b, argc, argv);
    MPI_Finalize();
    return rc;
}
