/* SPDX-License-Identifier: MIT */
/* `rill demo`: what streams and graphs are for, on the current device (a
 * CUDA device where rill lists one, else the CPU device). A small-batch
 * inference pipeline (host decode, a small model, host post-processing) runs
 * three ways over the same buffers: eager on one stream, on several streams
 * ordered by events, and captured once into a graph then replayed. Each is
 * timed, the results compared, and one run of each traced into
 * rill-demo-trace.json (docs/tools.md). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include "demo.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    DEMO_REQUESTS = 16, /* a batch */
    DEMO_ROWS = 16,     /* rows per request */
    DEMO_IN = 128,
    DEMO_HIDDEN = 128,
    DEMO_OUT = 128,
    DEMO_LAYERS = 6,       /* matmul by W[l], then square, each */
    DEMO_MAX_STREAMS = 16, /* compute streams: one per compute unit, up to this */
    DEMO_REPEATS = 15,
    DEMO_POOL = 8 /* raw bytes per input feature */
};

typedef struct request {
    struct demo *d;
    int index;
    unsigned char raw[DEMO_ROWS * DEMO_IN * DEMO_POOL]; /* the request as it arrives */
    float *x, *t, *h, *o, *sum;                         /* device memory, owned */
    /* page-locked host memory, owned: what the host functions read and
     * write (device memory need not be the host's) */
    float *x_host, *o_host, *sum_host;
    int label[DEMO_ROWS]; /* the answer: argmax of each row */
    float checksum;       /* sum of o, as the post-processing saw it */
} request;

/* The model's weights, as the host keeps them for its own answers. */
typedef struct weights {
    float w[DEMO_LAYERS][DEMO_IN * DEMO_HIDDEN];
    float out[DEMO_HIDDEN * DEMO_OUT];
} weights;

typedef struct demo {
    rill_device *dev;                       /* borrowed */
    rill_stream *main;                      /* owned: eager runs, capture origin */
    rill_stream *decode, *post;             /* owned */
    rill_stream *compute[DEMO_MAX_STREAMS]; /* owned */
    int num_compute;                        /* streams in compute */
    rill_event *decoded[DEMO_REQUESTS];     /* owned */
    rill_event *computed[DEMO_REQUESTS];    /* owned */
    rill_event *fork, *join;                /* owned */
    float *w[DEMO_LAYERS], *w_out;          /* device memory, owned */
    request req[DEMO_REQUESTS];
} demo;

static bool failed(rill_status st, const char *call) {
    if (st == RILL_OK)
        return false;
    fprintf(stderr, "rill: %s failed: %s: %s\n", call, rill_status_name(st), rill_last_error());
    return true;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the host stages ---- */

/* Bytes to floats in [-1, 1]: each feature is the mean of DEMO_POOL raw
 * bytes, smoothed with its neighbours (a stand-in for decoding and
 * downsampling an image). */
static void decode_row(const unsigned char *in, float *out) {
    float pooled[DEMO_IN];
    for (int j = 0; j < DEMO_IN; j++) {
        unsigned acc = 0;
        for (int k = 0; k < DEMO_POOL; k++)
            acc += in[j * DEMO_POOL + k];
        pooled[j] = (float)acc / (255.0f * DEMO_POOL);
    }
    for (int j = 0; j < DEMO_IN; j++) {
        float a = pooled[j > 0 ? j - 1 : j], b = pooled[j], c = pooled[j + 1 < DEMO_IN ? j + 1 : j];
        out[j] = (a + 2 * b + c) * 0.5f - 1.0f;
    }
}

static void decode_fn(void *user_data) {
    request *r = user_data;
    for (int row = 0; row < DEMO_ROWS; row++)
        decode_row(r->raw + row * DEMO_IN * DEMO_POOL, r->x_host + row * DEMO_IN);
}

/* The label of each row (its largest output) and the checksum. */
static void post_fn(void *user_data) {
    request *r = user_data;
    for (int row = 0; row < DEMO_ROWS; row++) {
        const float *o = r->o_host + row * DEMO_OUT;
        int best = 0;
        for (int j = 1; j < DEMO_OUT; j++)
            if (o[j] > o[best])
                best = j;
        r->label[row] = best;
    }
    r->checksum = r->sum_host[0];
}

/* ---- the three ways ---- */

/* One request's model on stream s: DEMO_LAYERS matmuls by W[l] (h and t
 * take turns), then o = h W_out and sum = sum(o). Weights of variance
 * 1/DEMO_IN keep the rows' magnitudes. */
static int model(demo *d, request *r, rill_stream *s) {
    const float *in = r->x;
    float *out = r->t;
    for (int l = 0; l < DEMO_LAYERS; l++) {
        if (failed(rill_op_matmul_f32(s, out, in, d->w[l], DEMO_ROWS, DEMO_IN, DEMO_HIDDEN),
                   "rill_op_matmul_f32"))
            return -1;
        in = out;
        out = out == r->t ? r->h : r->t;
    }
    if (failed(rill_op_matmul_f32(s, r->o, in, d->w_out, DEMO_ROWS, DEMO_HIDDEN, DEMO_OUT),
               "rill_op_matmul_f32") ||
        failed(rill_op_sum_f32(s, r->sum, r->o, DEMO_ROWS * DEMO_OUT), "rill_op_sum_f32"))
        return -1;
    return 0;
}

/* Decodes request r on the host and copies it to the device, on s. */
static int decode(request *r, rill_stream *s) {
    return failed(rill_launch_host_func(s, decode_fn, r), "rill_launch_host_func") ||
                   failed(
                       rill_memcpy_async(r->x, r->x_host, DEMO_ROWS * DEMO_IN * sizeof(float), s),
                       "rill_memcpy_async")
               ? -1
               : 0;
}

/* Copies request r's outputs to the host and post-processes them, on s. */
static int post(request *r, rill_stream *s) {
    return failed(rill_memcpy_async(r->o_host, r->o, DEMO_ROWS * DEMO_OUT * sizeof(float), s),
                  "rill_memcpy_async") ||
                   failed(rill_memcpy_async(r->sum_host, r->sum, sizeof(float), s),
                          "rill_memcpy_async") ||
                   failed(rill_launch_host_func(s, post_fn, r), "rill_launch_host_func")
               ? -1
               : 0;
}

static int submit_eager(demo *d) {
    for (int i = 0; i < DEMO_REQUESTS; i++) {
        request *r = &d->req[i];
        if (decode(r, d->main) != 0 || model(d, r, d->main) != 0 || post(r, d->main) != 0)
            return -1;
    }
    return 0;
}

/* Forks from main, runs the stages on their streams, joins back into main
 * (what a capture needs, and harmless eagerly). */
static int submit_streams(demo *d) {
    if (failed(rill_event_record(d->fork, d->main), "rill_event_record") ||
        failed(rill_stream_wait_event(d->decode, d->fork), "rill_stream_wait_event"))
        return -1;
    for (int i = 0; i < DEMO_REQUESTS; i++) {
        request *r = &d->req[i];
        rill_stream *c = d->compute[i % d->num_compute];
        if (decode(r, d->decode) != 0 ||
            failed(rill_event_record(d->decoded[i], d->decode), "rill_event_record") ||
            failed(rill_stream_wait_event(c, d->decoded[i]), "rill_stream_wait_event") ||
            model(d, r, c) != 0 ||
            failed(rill_event_record(d->computed[i], c), "rill_event_record") ||
            failed(rill_stream_wait_event(d->post, d->computed[i]), "rill_stream_wait_event") ||
            post(r, d->post) != 0)
            return -1;
    }
    if (failed(rill_event_record(d->join, d->post), "rill_event_record") ||
        failed(rill_stream_wait_event(d->main, d->join), "rill_stream_wait_event"))
        return -1;
    return 0;
}

typedef enum way { EAGER, STREAMS, GRAPH, NUM_WAYS } way;

static int run_once(demo *d, way w, rill_graph_exec *x, double *ms) {
    for (int i = 0; i < DEMO_REQUESTS; i++)
        memset(d->req[i].label, -1, sizeof d->req[i].label);
    double t0 = now_ms();
    int rc = w == EAGER     ? submit_eager(d)
             : w == STREAMS ? submit_streams(d)
                            : (failed(rill_graph_launch(x, d->main), "rill_graph_launch") ? -1 : 0);
    if (rc != 0 || failed(rill_device_synchronize(d->dev), "rill_device_synchronize"))
        return -1;
    *ms = now_ms() - t0;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- checks ---- */

/* The host's answer for request r: its labels and checksum. */
static void host_answer(const request *r, const weights *wt, int label[DEMO_ROWS],
                        double *checksum) {
    *checksum = 0;
    for (int row = 0; row < DEMO_ROWS; row++) {
        float x[DEMO_IN], h[DEMO_HIDDEN], next[DEMO_HIDDEN], o[DEMO_OUT];
        decode_row(r->raw + row * DEMO_IN * DEMO_POOL, x);
        memcpy(h, x, sizeof h);
        for (int l = 0; l < DEMO_LAYERS; l++) {
            for (int j = 0; j < DEMO_HIDDEN; j++) {
                double acc = 0;
                for (int k = 0; k < DEMO_IN; k++)
                    acc += (double)h[k] * wt->w[l][k * DEMO_HIDDEN + j];
                next[j] = (float)acc;
            }
            memcpy(h, next, sizeof h);
        }
        int best = 0;
        for (int j = 0; j < DEMO_OUT; j++) {
            double acc = 0;
            for (int k = 0; k < DEMO_HIDDEN; k++)
                acc += (double)h[k] * wt->out[k * DEMO_OUT + j];
            o[j] = (float)acc;
            *checksum += acc;
            if (o[j] > o[best])
                best = j;
        }
        label[row] = best;
    }
}

/* Every request's labels and checksum agree with the host's (labels may
 * differ only where two outputs tie within rounding). */
static int check(const demo *d, const weights *wt, const char *what) {
    for (int i = 0; i < DEMO_REQUESTS; i++) {
        const request *r = &d->req[i];
        int label[DEMO_ROWS];
        double checksum;
        host_answer(r, wt, label, &checksum);
        double err = fabs(checksum - r->checksum) / (fabs(checksum) + 1e-3);
        if (err > 1e-3 || memcmp(label, r->label, sizeof label) != 0) {
            fprintf(stderr,
                    "rill demo: %s: request %d differs from the host's answer (checksum %.6g vs "
                    "%.6g, first label %d vs %d)\n",
                    what, i, (double)r->checksum, checksum, r->label[0], label[0]);
            return -1;
        }
    }
    return 0;
}

/* ---- setup ---- */

static void fill_random(float *x, size_t n, uint64_t seed, double scale) {
    uint64_t s = seed * 0x9E3779B97F4A7C15u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)(scale * ((double)(s >> 11) / 4503599627370496.0 - 1.0));
    }
}

static float *device_floats(demo *d, size_t n) {
    void *p = NULL;
    return failed(rill_malloc(d->dev, n * sizeof(float), &p), "rill_malloc") ? NULL : p;
}

static int setup(demo *d, weights *wt) {
    if (failed(rill_get_device(&d->dev), "rill_get_device") ||
        failed(rill_stream_create(d->dev, 0, &d->main), "rill_stream_create") ||
        failed(rill_stream_set_name(d->main, "main"), "rill_stream_set_name") ||
        failed(rill_stream_create(d->dev, 0, &d->decode), "rill_stream_create") ||
        failed(rill_stream_set_name(d->decode, "decode"), "rill_stream_set_name") ||
        failed(rill_stream_create(d->dev, 0, &d->post), "rill_stream_create") ||
        failed(rill_stream_set_name(d->post, "postprocess"), "rill_stream_set_name") ||
        failed(rill_event_create(0, &d->fork), "rill_event_create") ||
        failed(rill_event_create(0, &d->join), "rill_event_create"))
        return -1;
    rill_device_info info;
    if (failed(rill_device_get_info(d->dev, &info), "rill_device_get_info"))
        return -1;
    d->num_compute = info.compute_units < DEMO_MAX_STREAMS ? info.compute_units : DEMO_MAX_STREAMS;
    for (int c = 0; c < d->num_compute; c++) {
        char name[32];
        snprintf(name, sizeof name, "model %d", c);
        if (failed(rill_stream_create(d->dev, 0, &d->compute[c]), "rill_stream_create") ||
            failed(rill_stream_set_name(d->compute[c], name), "rill_stream_set_name"))
            return -1;
    }
    /* scaled so that a layer keeps magnitudes near 1 */
    for (int l = 0; l < DEMO_LAYERS; l++) {
        fill_random(wt->w[l], DEMO_IN * DEMO_HIDDEN, (uint64_t)l + 1, sqrt(3.0 / DEMO_IN));
        if ((d->w[l] = device_floats(d, DEMO_IN * DEMO_HIDDEN)) == NULL ||
            failed(rill_memcpy(d->w[l], wt->w[l], sizeof wt->w[l]), "rill_memcpy"))
            return -1;
    }
    fill_random(wt->out, DEMO_HIDDEN * DEMO_OUT, 99, sqrt(3.0 / DEMO_HIDDEN));
    if ((d->w_out = device_floats(d, DEMO_HIDDEN * DEMO_OUT)) == NULL ||
        failed(rill_memcpy(d->w_out, wt->out, sizeof wt->out), "rill_memcpy"))
        return -1;
    uint64_t s = 12345;
    for (int i = 0; i < DEMO_REQUESTS; i++) {
        request *r = &d->req[i];
        r->d = d;
        r->index = i;
        for (size_t j = 0; j < sizeof r->raw; j++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            r->raw[j] = (unsigned char)(s >> 56);
        }
        if (failed(rill_event_create(0, &d->decoded[i]), "rill_event_create") ||
            failed(rill_event_create(0, &d->computed[i]), "rill_event_create") ||
            (r->x = device_floats(d, DEMO_ROWS * DEMO_IN)) == NULL ||
            (r->t = device_floats(d, DEMO_ROWS * DEMO_HIDDEN)) == NULL ||
            (r->h = device_floats(d, DEMO_ROWS * DEMO_HIDDEN)) == NULL ||
            (r->o = device_floats(d, DEMO_ROWS * DEMO_OUT)) == NULL ||
            (r->sum = device_floats(d, 1)) == NULL ||
            failed(rill_malloc_host(DEMO_ROWS * DEMO_IN * sizeof(float), (void **)&r->x_host),
                   "rill_malloc_host") ||
            failed(rill_malloc_host(DEMO_ROWS * DEMO_OUT * sizeof(float), (void **)&r->o_host),
                   "rill_malloc_host") ||
            failed(rill_malloc_host(sizeof(float), (void **)&r->sum_host), "rill_malloc_host"))
            return -1;
    }
    return 0;
}

static int teardown(demo *d) {
    int rc = 0;
    rc |= d->dev != NULL && failed(rill_device_synchronize(d->dev), "rill_device_synchronize");
    for (int i = 0; i < DEMO_REQUESTS; i++) {
        request *r = &d->req[i];
        float *bufs[] = {r->x, r->t, r->h, r->o, r->sum};
        for (size_t k = 0; k < 5; k++)
            rc |= bufs[k] != NULL && failed(rill_free(bufs[k]), "rill_free");
        float *host[] = {r->x_host, r->o_host, r->sum_host};
        for (size_t k = 0; k < 3; k++)
            rc |= host[k] != NULL && failed(rill_free_host(host[k]), "rill_free_host");
        rc |= d->decoded[i] && failed(rill_event_destroy(d->decoded[i]), "rill_event_destroy");
        rc |= d->computed[i] && failed(rill_event_destroy(d->computed[i]), "rill_event_destroy");
    }
    for (int l = 0; l < DEMO_LAYERS; l++)
        rc |= d->w[l] != NULL && failed(rill_free(d->w[l]), "rill_free");
    rc |= d->w_out != NULL && failed(rill_free(d->w_out), "rill_free");
    rc |= d->fork && failed(rill_event_destroy(d->fork), "rill_event_destroy");
    rc |= d->join && failed(rill_event_destroy(d->join), "rill_event_destroy");
    rill_stream *streams[] = {d->main, d->decode, d->post};
    for (size_t k = 0; k < 3; k++)
        rc |= streams[k] && failed(rill_stream_destroy(streams[k]), "rill_stream_destroy");
    for (int c = 0; c < d->num_compute; c++)
        rc |= d->compute[c] && failed(rill_stream_destroy(d->compute[c]), "rill_stream_destroy");
    return rc ? -1 : 0;
}

/* ---- how many units run at once ---- */

enum { PROBE_MATMULS = 32 };

/* Runs PROBE_MATMULS of the model's first layer on each of the first
 * `streams` compute streams at once; *ms is the time until all are done. */
static int probe_matmuls(demo *d, int streams, double *ms) {
    double t0 = now_ms();
    for (int k = 0; k < PROBE_MATMULS; k++)
        for (int c = 0; c < streams; c++) {
            request *r = &d->req[c];
            if (failed(rill_op_matmul_f32(d->compute[c], r->t, r->x, d->w[0], DEMO_ROWS, DEMO_IN,
                                          DEMO_HIDDEN),
                       "rill_op_matmul_f32"))
                return -1;
        }
    if (failed(rill_device_synchronize(d->dev), "rill_device_synchronize"))
        return -1;
    *ms = now_ms() - t0;
    return 0;
}

/* How many model streams' matmuls run at once now: the model's own work on
 * every compute stream against the same on one (best of three). Other
 * processes that take processors, or processors that are hyperthreads of
 * one core, lower it; a kernel of scalar work would not see the latter. */
static int units_at_once(demo *d, double *out) {
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 3; rep++)
        for (int wide = 0; wide < 2; wide++) {
            double ms;
            if (probe_matmuls(d, wide ? d->num_compute : 1, &ms) != 0)
                return -1;
            if (ms < best[wide])
                best[wide] = ms;
        }
    *out = d->num_compute * best[0] / best[1];
    return 0;
}

/* ---- the command ---- */

int rill_tool_demo(const char *trace_path) {
    static demo d;
    static weights wt;
    memset(&d, 0, sizeof d);
    rill_graph *g = NULL;
    rill_graph_exec *x = NULL;
    int rc = 1;
    double t_start = now_ms();
    if (setup(&d, &wt) != 0)
        goto out;
    rill_device_info info;
    if (failed(rill_device_get_info(d.dev, &info), "rill_device_get_info"))
        goto out;
    printf("rill demo on %s (%d compute units)\n", info.name, info.compute_units);
    printf("A batch of %d requests of %d rows, each: decode on the host (a host function)\n"
           "and a copy to the device,\n"
           "the model (%d matmuls by %dx%d, then matmul by %dx%d and sum:\n"
           "%d ops of one block each), then a copy to the host and post-processing there\n"
           "(a host function: the argmax of each row).\n\n",
           DEMO_REQUESTS, DEMO_ROWS, DEMO_LAYERS, DEMO_IN, DEMO_HIDDEN, DEMO_HIDDEN, DEMO_OUT,
           DEMO_LAYERS + 2);
    /* the graph: the streams version, captured from main */
    if (failed(rill_stream_begin_capture(d.main, RILL_CAPTURE_GLOBAL), "rill_stream_begin_capture"))
        goto out;
    if (submit_streams(&d) != 0) {
        rill_graph *discard;
        (void)rill_stream_end_capture(d.main, &discard);
        goto out;
    }
    if (failed(rill_stream_end_capture(d.main, &g), "rill_stream_end_capture") ||
        failed(rill_graph_instantiate(g, &x), "rill_graph_instantiate"))
        goto out;
    char streams_title[64];
    snprintf(streams_title, sizeof streams_title, "streams (decode, %d model, postprocess)",
             d.num_compute);
    const char *const titles[NUM_WAYS] = {"eager, one stream", streams_title,
                                          "graph of the streams, replayed"};
    double median[NUM_WAYS];
    /* warm-up, and each way's answers checked against the host's */
    for (int w = 0; w < NUM_WAYS; w++) {
        double ms;
        if (run_once(&d, (way)w, x, &ms) != 0 || run_once(&d, (way)w, x, &ms) != 0 ||
            check(&d, &wt, titles[w]) != 0)
            goto out;
    }
    /* timed: the ways interleaved, so that a change of load hits all three */
    double times[NUM_WAYS][DEMO_REPEATS];
    for (int k = 0; k < DEMO_REPEATS; k++)
        for (int w = 0; w < NUM_WAYS; w++)
            if (run_once(&d, (way)w, x, &times[w][k]) != 0)
                goto out;
    for (int w = 0; w < NUM_WAYS; w++) {
        qsort(times[w], DEMO_REPEATS, sizeof(double), cmp_double);
        median[w] = times[w][DEMO_REPEATS / 2];
        printf("  %-40s %8.3f ms  (median of %d; min %.3f)\n", titles[w], median[w], DEMO_REPEATS,
               times[w][0]);
    }
    double parallel;
    if (units_at_once(&d, &parallel) != 0)
        goto out;
    printf("\n  speedup of streams over eager: %.2fx\n", median[EAGER] / median[STREAMS]);
    printf("  speedup of the graph over eager: %.2fx\n", median[EAGER] / median[GRAPH]);
    printf("  answers of all three agree with the host's (labels and checksums of %d requests)\n",
           DEMO_REQUESTS);
    printf("  model streams running at once right after: %.2f of %d", parallel, d.num_compute);
    if (parallel < 0.8 * d.num_compute)
        printf(" (other processes hold processors, or\n  they are hyperthreads of one core: the "
               "speedups cannot exceed this)");
    printf("\n");
    /* one traced run of each way */
    if (trace_path != NULL) {
        if (failed(rill_trace_start(trace_path), "rill_trace_start"))
            goto out;
        for (int w = 0; w < NUM_WAYS; w++) {
            double ms;
            if (run_once(&d, (way)w, x, &ms) != 0) {
                (void)rill_trace_stop();
                goto out;
            }
        }
        if (failed(rill_trace_stop(), "rill_trace_stop"))
            goto out;
        printf("\ntrace of one run of each (eager, streams, graph, in that order): %s\n"
               "  open it in https://ui.perfetto.dev (\"Open trace file\") or chrome://tracing;\n"
               "  or: rill trace-summary %s; rill trace-svg %s demo.svg\n",
               trace_path, trace_path, trace_path);
    }
    printf("(%.1f s in all)\n", (now_ms() - t_start) / 1e3);
    rc = 0;
out:
    if (x != NULL && failed(rill_graph_exec_destroy(x), "rill_graph_exec_destroy"))
        rc = 1;
    if (g != NULL && failed(rill_graph_destroy(g), "rill_graph_destroy"))
        rc = 1;
    if (teardown(&d) != 0)
        rc = 1;
    return rc;
}
