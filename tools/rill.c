/* SPDX-License-Identifier: MIT */
/* The rill command-line tool, a user of the public API only:
 *   rill info            lists the devices, as nvidia-smi -L and clinfo do
 *                        (--memory adds each device's memory summary);
 *   rill demo [--size N] runs a multi-stream pipeline in the spirit of the
 *                        seeds on the CPU device, once over two streams joined
 *                        by events and once on one stream, times each stream
 *                        with timing events, checks that both runs agree (and
 *                        spot-checks them against the host), prints the speedup;
 *   rill trace-summary T per-stream busy time, overlap, idle gaps and the
 *                        critical path of a trace (rill_trace_start);
 *   rill trace-svg T OUT the trace's timeline as an SVG picture.
 * Any failing rill call ends the command with its rill_last_error() sentence
 * and exit status 1; a usage error exits with 2. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rill.h"
#include "trace_view.h"

/* Prints a failed rill call and returns true; false when st is RILL_OK. */
static bool failed(rill_status st, const char *call) {
    if (st == RILL_OK)
        return false;
    const char *why = rill_last_error();
    fprintf(stderr, "rill: %s failed: %s: %s\n", call, rill_status_name(st),
            why[0] ? why : rill_status_string(st));
    return true;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- rill info ---- */

static const char *kind_name(rill_device_kind kind) {
    switch (kind) {
    case RILL_DEVICE_CPU:
        return "cpu";
    case RILL_DEVICE_CUDA:
        return "cuda";
    }
    return "?";
}

/* Prints every device's memory summary (rill_mem_summary). */
static int print_memory(void) {
    int count = 0;
    if (failed(rill_device_count(&count), "rill_device_count"))
        return 1;
    for (int i = 0; i < count; i++) {
        rill_device *dev = NULL;
        printf("\n");
        if (failed(rill_device_get(i, &dev), "rill_device_get") ||
            failed(rill_mem_summary(dev, stdout), "rill_mem_summary"))
            return 1;
    }
    return 0;
}

static int cmd_info(void) {
    int count = 0;
    rill_device *current = NULL;
    if (failed(rill_device_count(&count), "rill_device_count"))
        return 1;
    /* The devices are listed even when RILL_DEVICE names none of them:
     * that is when people run this command. */
    rill_status current_st = rill_get_device(&current);
    char current_error[512];
    snprintf(current_error, sizeof(current_error), "%s", rill_last_error());
    rill_device_info *infos = calloc(count > 0 ? (size_t)count : 1, sizeof(*infos));
    rill_device **devs = calloc(count > 0 ? (size_t)count : 1, sizeof(*devs));
    int rc = 1;
    if (!infos || !devs) {
        fprintf(stderr, "rill: out of memory\n");
        goto out;
    }
    int name_width = (int)strlen("name");
    for (int i = 0; i < count; i++) {
        if (failed(rill_device_get(i, &devs[i]), "rill_device_get") ||
            failed(rill_device_get_info(devs[i], &infos[i]), "rill_device_get_info"))
            goto out;
        int len = (int)strnlen(infos[i].name, sizeof(infos[i].name));
        if (len > name_width)
            name_width = len;
    }
    printf("%d device%s\n", count, count == 1 ? "" : "s");
    printf("  %-7s  %-4s  %-*s  %13s  %10s  %s\n", "ordinal", "kind", name_width, "name",
           "compute units", "memory", "stream priorities (greatest..least)");
    for (int i = 0; i < count; i++) {
        const rill_device_info *in = &infos[i];
        printf("%c %-7d  %-4s  %-*.*s  %13d  %6.1f GiB  %d..%d\n", devs[i] == current ? '*' : ' ',
               in->ordinal, kind_name(in->kind), name_width, (int)sizeof(in->name), in->name,
               in->compute_units, (double)in->memory_bytes / (1024.0 * 1024.0 * 1024.0),
               in->greatest_priority, in->least_priority);
    }
    printf("* the current device (RILL_DEVICE=cpu|cuda:N chooses it; RILL_CPU_WORKERS=N sets the\n"
           "  CPU device's compute units); lower priority numbers run first\n");
    if (current_st != RILL_OK) {
        fprintf(stderr, "rill: rill_get_device failed: %s: %s\n", rill_status_name(current_st),
                current_error);
        goto out;
    }
    rc = 0;
out:
    free(devs);
    free(infos);
    return rc;
}

/* ---- rill demo: shapes and buffers ---- */

/* B = matmul(A, A) is viewed as DEMO_IMAGES images of DEMO_CHANNELS
 * channels, side = size / 32 (so that images * channels * side^2 = size^2).
 * Half h of the images (h = 0, 1) goes through conv2d, conv2d and sum on
 * stream s(h+1); add joins the two sums on the default stream. */
enum { DEMO_IMAGES = 8, DEMO_CHANNELS = 128, DEMO_KERNEL = 3, DEMO_DEFAULT_SIZE = 1792 };

typedef struct demo_shape {
    size_t m;                       /* A and B are m x m */
    size_t half_images;             /* images per half */
    size_t side;                    /* image side: B = [images, channels, side, side] */
    size_t y_side, z_side;          /* after the first and the second conv2d */
    size_t image, y_image, z_image; /* floats per image of B, Y, Z */
} demo_shape;

typedef struct demo_bufs { /* device memory, all owned */
    float *a, *b, *w1, *w2;
    float *y[2], *z[2];    /* per half: first and second conv2d outputs */
    float *sum[2], *total; /* per half sums and their sum */
} demo_bufs;

/* Host copies of one run's results. */
typedef struct demo_results {
    float *b, *y, *z; /* owned: all images, both halves */
    float sum[2], total;
} demo_results;

enum { SEG_MATMUL, SEG_HALF0, SEG_HALF1, SEG_JOIN, NUM_SEGS };

typedef struct demo_events { /* RILL_EVENT_TIMING events, all owned */
    rill_event *begin[NUM_SEGS];
    rill_event *end[NUM_SEGS];
} demo_events;

typedef struct demo_timing {
    double begin_ms[NUM_SEGS], end_ms[NUM_SEGS]; /* from the matmul's begin */
    double wall_ms;                              /* host: first submit until the device is idle */
} demo_timing;

typedef struct demo {
    demo_shape shape;
    rill_device *dev;     /* borrowed */
    rill_stream *main;    /* borrowed: the default stream */
    rill_stream *side[2]; /* owned: s1, s2 */
    demo_bufs buf;
    demo_events ev;
} demo;

static float *device_alloc(demo *d, size_t floats) {
    void *p = NULL;
    if (failed(rill_malloc(d->dev, floats * sizeof(float), &p), "rill_malloc"))
        return NULL;
    return p;
}

/* Fills x with a deterministic sequence in [-scale, scale). */
static void fill_random(float *x, size_t n, uint64_t seed, double scale) {
    uint64_t s = seed * 0x9E3779B97F4A7C15u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)(scale * ((double)(s >> 11) / 4503599627370496.0 - 1.0));
    }
}

/* Allocates every buffer, uploads A and the weights and touches the
 * outputs once, so that neither run pays for first-touch page faults. */
static int demo_alloc(demo *d) {
    const demo_shape *sh = &d->shape;
    demo_bufs *b = &d->buf;
    size_t weights = (size_t)DEMO_CHANNELS * DEMO_CHANNELS * DEMO_KERNEL * DEMO_KERNEL;
    b->a = device_alloc(d, sh->m * sh->m);
    b->b = device_alloc(d, sh->m * sh->m);
    b->w1 = device_alloc(d, weights);
    b->w2 = device_alloc(d, weights);
    b->total = device_alloc(d, 1);
    if (!b->a || !b->b || !b->w1 || !b->w2 || !b->total)
        return -1;
    for (int h = 0; h < 2; h++) {
        b->y[h] = device_alloc(d, sh->half_images * sh->y_image);
        b->z[h] = device_alloc(d, sh->half_images * sh->z_image);
        b->sum[h] = device_alloc(d, 1);
        if (!b->y[h] || !b->z[h] || !b->sum[h])
            return -1;
    }
    /* One staging buffer for A and the weights: the larger of the two. */
    size_t staging = sh->m * sh->m > weights ? sh->m * sh->m : weights;
    float *host = malloc(staging * sizeof(float));
    if (!host) {
        fprintf(stderr, "rill: out of memory\n");
        return -1;
    }
    int rc = -1;
    /* A in [-1, 1); weights scaled so that a conv2d keeps magnitudes. */
    double w_scale = 1.0 / sqrt((double)DEMO_CHANNELS * DEMO_KERNEL * DEMO_KERNEL / 3.0);
    fill_random(host, sh->m * sh->m, 1, 1.0);
    if (failed(rill_memcpy(b->a, host, sh->m * sh->m * sizeof(float)), "rill_memcpy"))
        goto out;
    fill_random(host, weights, 2, w_scale);
    if (failed(rill_memcpy(b->w1, host, weights * sizeof(float)), "rill_memcpy"))
        goto out;
    fill_random(host, weights, 3, w_scale);
    if (failed(rill_memcpy(b->w2, host, weights * sizeof(float)), "rill_memcpy"))
        goto out;
    if (failed(rill_memset_async(b->b, 0, sh->m * sh->m * sizeof(float), d->main),
               "rill_memset_async"))
        goto out;
    for (int h = 0; h < 2; h++) {
        if (failed(rill_memset_async(b->y[h], 0, sh->half_images * sh->y_image * sizeof(float),
                                     d->main),
                   "rill_memset_async") ||
            failed(rill_memset_async(b->z[h], 0, sh->half_images * sh->z_image * sizeof(float),
                                     d->main),
                   "rill_memset_async"))
            goto out;
    }
    if (failed(rill_stream_synchronize(d->main), "rill_stream_synchronize"))
        goto out;
    rc = 0;
out:
    free(host);
    return rc;
}

static int demo_free(demo *d) {
    demo_bufs *b = &d->buf;
    float *all[] = {b->a,    b->b,    b->w1,   b->w2,     b->total, b->y[0],
                    b->y[1], b->z[0], b->z[1], b->sum[0], b->sum[1]};
    int rc = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i] && failed(rill_free(all[i]), "rill_free"))
            rc = -1;
    return rc;
}

/* ---- rill demo: the pipeline ---- */

/* Submits one run: matmul on the default stream, each half on halves[h]
 * (which waits for the matmul when it is another stream), then add on the
 * default stream after both halves. With halves[] = {default, default} the
 * same commands run on one stream in the same order. */
static int demo_submit(demo *d, rill_stream *halves[2]) {
    const demo_shape *sh = &d->shape;
    demo_bufs *b = &d->buf;
    demo_events *ev = &d->ev;
    if (failed(rill_event_record(ev->begin[SEG_MATMUL], d->main), "rill_event_record") ||
        failed(rill_op_matmul_f32(d->main, b->b, b->a, b->a, sh->m, sh->m, sh->m),
               "rill_op_matmul_f32") ||
        failed(rill_event_record(ev->end[SEG_MATMUL], d->main), "rill_event_record"))
        return -1;
    for (int h = 0; h < 2; h++) {
        rill_stream *s = halves[h];
        int seg = SEG_HALF0 + h;
        const float *images = b->b + (size_t)h * sh->half_images * sh->image;
        /* The fork: the half's stream waits for B (seed 000's wait_stream). */
        if (s != d->main &&
            failed(rill_stream_wait_event(s, ev->end[SEG_MATMUL]), "rill_stream_wait_event"))
            return -1;
        if (failed(rill_event_record(ev->begin[seg], s), "rill_event_record") ||
            failed(rill_op_conv2d_f32(s, b->y[h], images, b->w1, sh->half_images, DEMO_CHANNELS,
                                      sh->side, sh->side, DEMO_CHANNELS, DEMO_KERNEL, DEMO_KERNEL),
                   "rill_op_conv2d_f32") ||
            failed(rill_op_conv2d_f32(s, b->z[h], b->y[h], b->w2, sh->half_images, DEMO_CHANNELS,
                                      sh->y_side, sh->y_side, DEMO_CHANNELS, DEMO_KERNEL,
                                      DEMO_KERNEL),
                   "rill_op_conv2d_f32") ||
            failed(rill_op_sum_f32(s, b->sum[h], b->z[h], sh->half_images * sh->z_image),
                   "rill_op_sum_f32") ||
            failed(rill_event_record(ev->end[seg], s), "rill_event_record"))
            return -1;
    }
    /* The join: the default stream waits for both halves' last events. */
    for (int h = 0; h < 2; h++) {
        if (halves[h] != d->main && failed(rill_stream_wait_event(d->main, ev->end[SEG_HALF0 + h]),
                                           "rill_stream_wait_event"))
            return -1;
    }
    if (failed(rill_event_record(ev->begin[SEG_JOIN], d->main), "rill_event_record") ||
        failed(rill_op_add_f32(d->main, b->total, b->sum[0], b->sum[1], 1.0f, 1),
               "rill_op_add_f32") ||
        failed(rill_event_record(ev->end[SEG_JOIN], d->main), "rill_event_record"))
        return -1;
    return 0;
}

static int copy_out(float *dst, const float *src, size_t floats) {
    return failed(rill_memcpy(dst, src, floats * sizeof(float)), "rill_memcpy") ? -1 : 0;
}

/* Runs the pipeline once and collects its timing and results. */
static int demo_run(demo *d, rill_stream *halves[2], demo_timing *t, demo_results *r) {
    const demo_shape *sh = &d->shape;
    double t0 = now_ms();
    if (demo_submit(d, halves) != 0 ||
        failed(rill_device_synchronize(d->dev), "rill_device_synchronize"))
        return -1;
    t->wall_ms = now_ms() - t0;
    for (int i = 0; i < NUM_SEGS; i++) {
        float begin, end;
        if (failed(rill_event_elapsed_ms(d->ev.begin[SEG_MATMUL], d->ev.begin[i], &begin),
                   "rill_event_elapsed_ms") ||
            failed(rill_event_elapsed_ms(d->ev.begin[SEG_MATMUL], d->ev.end[i], &end),
                   "rill_event_elapsed_ms"))
            return -1;
        t->begin_ms[i] = begin;
        t->end_ms[i] = end;
    }
    size_t half_y = sh->half_images * sh->y_image, half_z = sh->half_images * sh->z_image;
    if (copy_out(r->b, d->buf.b, sh->m * sh->m) != 0 || copy_out(&r->total, d->buf.total, 1))
        return -1;
    for (int h = 0; h < 2; h++) {
        if (copy_out(r->y + (size_t)h * half_y, d->buf.y[h], half_y) != 0 ||
            copy_out(r->z + (size_t)h * half_z, d->buf.z[h], half_z) != 0 ||
            copy_out(&r->sum[h], d->buf.sum[h], 1) != 0)
            return -1;
    }
    return 0;
}

static void print_run(const char *title, const char *stream_names[NUM_SEGS], const demo_timing *t,
                      size_t half_images) {
    static const char *ops[NUM_SEGS] = {"matmul", "conv2d, conv2d, sum", "conv2d, conv2d, sum",
                                        "add"};
    char images[NUM_SEGS][32] = {"-", "", "", "-"};
    snprintf(images[SEG_HALF0], sizeof(images[0]), "0-%zu", half_images - 1);
    snprintf(images[SEG_HALF1], sizeof(images[0]), "%zu-%zu", half_images, 2 * half_images - 1);
    printf("\n%s\n", title);
    printf("  %-8s %-20s %-7s %10s %10s %10s\n", "stream", "ops", "images", "start ms", "end ms",
           "ms");
    for (int i = 0; i < NUM_SEGS; i++)
        printf("  %-8s %-20s %-7s %10.2f %10.2f %10.2f\n", stream_names[i], ops[i], images[i],
               t->begin_ms[i], t->end_ms[i], t->end_ms[i] - t->begin_ms[i]);
    printf("  %-37s %10s %10.2f %10s  (host wall clock %.2f ms)\n", "total", "",
           t->end_ms[SEG_JOIN], "", t->wall_ms);
}

/* ---- rill demo: checks ---- */

/* Largest |x - y| over the largest |y| of two arrays; 0 when both are 0. */
static double relative_diff(const float *x, const float *y, size_t n) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)x[i] - (double)y[i]));
        scale = fmax(scale, fabs((double)y[i]));
    }
    return scale > 0.0 ? diff / scale : diff;
}

/* |got - want| against the sum of |terms| that made want: float32 error
 * grows with that sum, not with the result, which may cancel to ~0. */
static bool close_to(double got, double want, double abs_terms) {
    return fabs(got - want) <= 1e-4 * abs_terms + 1e-30;
}

/* One output of a stride-1 3x3 conv2d over in [*, channels, side, side]. */
static bool check_conv_at(const float *out, const float *in, const float *weight, size_t side,
                          size_t image, size_t k, size_t oy, size_t ox) {
    size_t out_side = side - DEMO_KERNEL + 1;
    double want = 0.0, terms = 0.0;
    for (size_t c = 0; c < DEMO_CHANNELS; c++)
        for (size_t ky = 0; ky < DEMO_KERNEL; ky++)
            for (size_t kx = 0; kx < DEMO_KERNEL; kx++) {
                double x = in[((image * DEMO_CHANNELS + c) * side + oy + ky) * side + ox + kx];
                double w = weight[((k * DEMO_CHANNELS + c) * DEMO_KERNEL + ky) * DEMO_KERNEL + kx];
                want += x * w;
                terms += fabs(x * w);
            }
    double got = out[((image * DEMO_CHANNELS + k) * out_side + oy) * out_side + ox];
    return close_to(got, want, terms);
}

/* Spot-checks every stage of one run against the host, in double. */
static int check_against_host(demo *d, const demo_results *r) {
    const demo_shape *sh = &d->shape;
    size_t weights = (size_t)DEMO_CHANNELS * DEMO_CHANNELS * DEMO_KERNEL * DEMO_KERNEL;
    size_t m = sh->m;
    float *a = malloc(m * m * sizeof(float));
    float *w = malloc(2 * weights * sizeof(float));
    int rc = -1;
    if (!a || !w) {
        fprintf(stderr, "rill: out of memory\n");
        goto out;
    }
    if (copy_out(a, d->buf.a, m * m) != 0 || copy_out(w, d->buf.w1, weights) != 0 ||
        copy_out(w + weights, d->buf.w2, weights) != 0)
        goto out;
    const char *bad = NULL;
    for (size_t i = 0; i < 4 && !bad; i++) {
        size_t row = (i * 7919) % m, col = (i * 104729 + 13) % m;
        double want = 0.0, terms = 0.0;
        for (size_t k = 0; k < m; k++) {
            want += (double)a[row * m + k] * a[k * m + col];
            terms += fabs((double)a[row * m + k] * a[k * m + col]);
        }
        if (!close_to(r->b[row * m + col], want, terms))
            bad = "matmul";
    }
    size_t images = 2 * sh->half_images;
    for (size_t i = 0; i < 4 && !bad; i++) {
        size_t image = (i * 5 + 1) % images, k = (i * 37) % DEMO_CHANNELS;
        if (!check_conv_at(r->y, r->b, w, sh->side, image, k, (i * 3) % sh->y_side,
                           (i * 11) % sh->y_side))
            bad = "the first conv2d";
        else if (!check_conv_at(r->z, r->y, w + weights, sh->y_side, image, k, (i * 5) % sh->z_side,
                                (i * 7) % sh->z_side))
            bad = "the second conv2d";
    }
    size_t half_z = sh->half_images * sh->z_image;
    double all_terms = 0.0;
    for (int h = 0; h < 2 && !bad; h++) {
        double want = 0.0, terms = 0.0;
        for (size_t i = 0; i < half_z; i++) {
            want += r->z[(size_t)h * half_z + i];
            terms += fabs((double)r->z[(size_t)h * half_z + i]);
        }
        all_terms += terms;
        if (!close_to(r->sum[h], want, terms))
            bad = "sum";
    }
    if (!bad && !close_to(r->total, (double)r->sum[0] + r->sum[1], all_terms))
        bad = "add";
    if (bad) {
        fprintf(stderr, "rill demo: %s gave a result that differs from the host's\n", bad);
        goto out;
    }
    rc = 0;
out:
    free(w);
    free(a);
    return rc;
}

/* ---- rill demo: the command ---- */

static int results_alloc(demo_results *r, const demo_shape *sh) {
    r->b = malloc(sh->m * sh->m * sizeof(float));
    r->y = malloc(2 * sh->half_images * sh->y_image * sizeof(float));
    r->z = malloc(2 * sh->half_images * sh->z_image * sizeof(float));
    if (r->b && r->y && r->z)
        return 0;
    fprintf(stderr, "rill: out of memory\n");
    return -1;
}

static void results_free(demo_results *r) {
    free(r->z);
    free(r->y);
    free(r->b);
}

static int demo_setup(demo *d) {
    if (failed(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &d->dev), "rill_device_get_by_kind"))
        return -1;
    d->main = rill_default_stream(d->dev);
    if (!d->main) {
        fprintf(stderr, "rill: rill_default_stream returned NULL: %s\n", rill_last_error());
        return -1;
    }
    const char *names[2] = {"s1", "s2"};
    for (int h = 0; h < 2; h++) {
        if (failed(rill_stream_create(d->dev, 0, &d->side[h]), "rill_stream_create") ||
            failed(rill_stream_set_name(d->side[h], names[h]), "rill_stream_set_name"))
            return -1;
    }
    for (int i = 0; i < NUM_SEGS; i++) {
        if (failed(rill_event_create(RILL_EVENT_TIMING, &d->ev.begin[i]), "rill_event_create") ||
            failed(rill_event_create(RILL_EVENT_TIMING, &d->ev.end[i]), "rill_event_create"))
            return -1;
    }
    return demo_alloc(d);
}

static int demo_teardown(demo *d) {
    int rc = demo_free(d);
    for (int i = 0; i < NUM_SEGS; i++) {
        if (d->ev.begin[i] && failed(rill_event_destroy(d->ev.begin[i]), "rill_event_destroy"))
            rc = -1;
        if (d->ev.end[i] && failed(rill_event_destroy(d->ev.end[i]), "rill_event_destroy"))
            rc = -1;
    }
    for (int h = 0; h < 2; h++)
        if (d->side[h] && failed(rill_stream_destroy(d->side[h]), "rill_stream_destroy"))
            rc = -1;
    return rc;
}

/* Compares the two runs: every output and both sums. */
static int compare_runs(const demo *d, const demo_results *two, const demo_results *one) {
    const demo_shape *sh = &d->shape;
    double diff_b = relative_diff(two->b, one->b, sh->m * sh->m);
    double diff_y = relative_diff(two->y, one->y, 2 * sh->half_images * sh->y_image);
    double diff_z = relative_diff(two->z, one->z, 2 * sh->half_images * sh->z_image);
    double diff_sum =
        fmax(relative_diff(two->sum, one->sum, 2), relative_diff(&two->total, &one->total, 1));
    double worst = fmax(fmax(diff_b, diff_y), fmax(diff_z, diff_sum));
    printf("\nresults: sum = %.6g (two streams) and %.6g (one stream); largest relative\n"
           "difference over B, both conv2d outputs and the sums: %.2g\n",
           (double)two->total, (double)one->total, worst);
    if (!(worst <= 1e-5)) {
        fprintf(stderr, "rill demo: the two runs disagree (relative difference %.2g)\n", worst);
        return -1;
    }
    return 0;
}

static int cmd_demo(size_t size) {
    demo d = {.shape = {.m = size, .half_images = DEMO_IMAGES / 2, .side = size / 32}};
    demo_shape *sh = &d.shape;
    sh->y_side = sh->side - DEMO_KERNEL + 1;
    sh->z_side = sh->y_side - DEMO_KERNEL + 1;
    sh->image = (size_t)DEMO_CHANNELS * sh->side * sh->side;
    sh->y_image = (size_t)DEMO_CHANNELS * sh->y_side * sh->y_side;
    sh->z_image = (size_t)DEMO_CHANNELS * sh->z_side * sh->z_side;
    demo_results two = {0}, one = {0};
    demo_timing two_t, one_t;
    int rc = 1;
    double t0 = now_ms();
    if (demo_setup(&d) != 0 || results_alloc(&two, sh) != 0 || results_alloc(&one, sh) != 0)
        goto out;
    rill_device_info info;
    if (failed(rill_device_get_info(d.dev, &info), "rill_device_get_info"))
        goto out;
    printf("rill demo on %s (%d compute units)\n", info.name, info.compute_units);
    printf("B = matmul(A, A) with A %zux%zu on the default stream; B viewed as %d images\n"
           "[%d,%zu,%zu]; each half of the images: conv2d (%dx%d, %d filters) twice, then sum;\n"
           "add joins the two sums on the default stream.\n",
           sh->m, sh->m, DEMO_IMAGES, DEMO_CHANNELS, sh->side, sh->side, DEMO_KERNEL, DEMO_KERNEL,
           DEMO_CHANNELS);

    rill_stream *split[2] = {d.side[0], d.side[1]};
    rill_stream *single[2] = {d.main, d.main};
    /* An untimed warm-up of both arrangements first: the first run of an op
     * on a worker pays for scratch memory and page faults, which would
     * otherwise count against whichever arrangement runs first. */
    if (demo_run(&d, split, &two_t, &two) != 0 || demo_run(&d, single, &one_t, &one) != 0 ||
        demo_run(&d, split, &two_t, &two) != 0 || demo_run(&d, single, &one_t, &one) != 0)
        goto out;
    const char *split_names[NUM_SEGS] = {"default", "s1", "s2", "default"};
    const char *single_names[NUM_SEGS] = {"default", "default", "default", "default"};
    print_run("two streams: the halves on s1 and s2, forked and joined by events", split_names,
              &two_t, sh->half_images);
    print_run("one stream: everything on the default stream, in the same order", single_names,
              &one_t, sh->half_images);
    if (compare_runs(&d, &two, &one) != 0 || check_against_host(&d, &two) != 0)
        goto out;
    printf("spot checks against the host (matmul, conv2d, conv2d, sum, add): passed\n");
    double speedup = one_t.end_ms[SEG_JOIN] / two_t.end_ms[SEG_JOIN];
    printf("speedup of two streams over one: %.2fx (%.2f ms vs %.2f ms; %.1f s in all)\n", speedup,
           two_t.end_ms[SEG_JOIN], one_t.end_ms[SEG_JOIN], (now_ms() - t0) / 1e3);
    if (speedup < 1.1)
        printf("(ops this large already spread their blocks over all %d compute units, so a\n"
               " second stream finds no idle unit; on this device streams pay off for ops too\n"
               " small to split and for host functions)\n",
               info.compute_units);
    rc = 0;
out:
    results_free(&one);
    results_free(&two);
    if (demo_teardown(&d) != 0)
        rc = 1;
    return rc;
}

/* ---- main ---- */

static void usage(void) {
    fprintf(stderr,
            "usage: rill <command> [options]\n"
            "commands:\n"
            "  info [--memory]   list the devices: ordinal, kind, name, compute units, memory,\n"
            "                    stream priority range; --memory adds each device's memory\n"
            "                    summary (rill_mem_summary)\n"
            "  demo [--size N] [--memory]\n"
            "                    run a pipeline on the CPU device over two streams joined by\n"
            "                    events and over one stream, and compare: B = matmul(A, A) with\n"
            "                    A NxN, then conv2d, conv2d and sum on each half of B\n"
            "                    (N a multiple of 32, 160..8192; default %d); --memory prints\n"
            "                    the memory summary afterwards\n"
            "  trace-summary TRACE\n"
            "                    per-stream busy time, the overlap between streams, the\n"
            "                    longest idle gaps and the critical path of a trace written by\n"
            "                    rill_trace_start or RILL_TRACE=path\n"
            "  trace-svg TRACE OUT.svg\n"
            "                    draw the trace's timeline as an SVG picture\n"
            "environment: RILL_DEVICE=cpu|cuda:N, RILL_CPU_WORKERS=N, RILL_TRACE=path\n",
            DEMO_DEFAULT_SIZE);
}

/* Parses a decimal size; false unless the whole text is a number. */
static bool parse_size(const char *text, size_t *out) {
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (!text[0] || *end || text[0] == '-')
        return false;
    *out = (size_t)v;
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return 2;
    }
    int rc;
    bool memory = false;
    /* the trace views read a file: no device, no runtime */
    if (strcmp(argv[1], "trace-summary") == 0) {
        if (argc != 3) {
            usage();
            return 2;
        }
        return rill_tool_trace_summary(argv[2], stdout);
    }
    if (strcmp(argv[1], "trace-svg") == 0) {
        if (argc != 4) {
            usage();
            return 2;
        }
        return rill_tool_trace_svg(argv[2], argv[3]);
    }
    if (strcmp(argv[1], "info") == 0 &&
        (argc == 2 || (argc == 3 && strcmp(argv[2], "--memory") == 0))) {
        rc = cmd_info();
        if (rc == 0 && argc == 3)
            rc = print_memory();
    } else if (strcmp(argv[1], "demo") == 0) {
        size_t size = DEMO_DEFAULT_SIZE;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--size") == 0 && i + 1 < argc && parse_size(argv[i + 1], &size)) {
                i++;
            } else if (strcmp(argv[i], "--memory") == 0) {
                memory = true;
            } else {
                usage();
                return 2;
            }
        }
        if (size % 32 != 0 || size < 160 || size > 8192) {
            fprintf(stderr, "rill demo: --size must be a multiple of 32 in 160..8192\n");
            usage();
            return 2;
        }
        rc = cmd_demo(size);
        if (rc == 0 && memory)
            rc = print_memory();
    } else {
        usage();
        return 2;
    }
    if (failed(rill_shutdown(), "rill_shutdown"))
        rc = 1;
    return rc;
}
