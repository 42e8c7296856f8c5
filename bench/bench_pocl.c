/* SPDX-License-Identifier: MIT */
/* bench_pocl: figures a to c and f of bench_runtime done with OpenCL on PoCL's
 * CPU device, against the same pthread baselines (baseline.c) in the same
 * run, so that the README can put rill and PoCL side by side: native
 * kernels stand for host functions, in-order command queues for streams,
 * event wait lists for event record/wait, clWaitForEvents for
 * rill_event_synchronize. It uses no part of rill, and the same command
 * counts and repeats as bench_runtime, so the rows compare one to one;
 * and figure f, the first launch after a pause, as bench_runtime's f1 to
 * f3. */
#include <CL/cl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "cli.h"
#include "harness.h"

typedef struct config {
    long launch_count; /* a: commands per sample */
    int launch_repeats;
    long hops; /* b: hops per sample */
    int hop_repeats;
    int wake_samples; /* c */
    int idle_samples; /* f: samples of IDLE_BURST launches each */
} config;

static const config full_config = {1000000, 5, 100000, 5, 200, 31};
static const config quick_config = {100000, 3, 10000, 3, 40, 5};

enum { FLUSH_EVERY = 256 }; /* commands between clFlush calls */

typedef struct ocl {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;      /* owned */
    cl_command_queue qa, qb; /* owned: in-order queues */
    cl_program program;      /* owned */
    cl_kernel empty;         /* owned: __kernel void empty(void) */
    char device_name[128];
    char platform_version[128];
    cl_uint compute_units;
} ocl;

typedef struct bench {
    config cfg;
    ocl cl;
    bench_report *report; /* borrowed: bench_cli_main owns it */
} bench;

/* Prints a failed OpenCL call and returns true; false on CL_SUCCESS. */
static bool failed(cl_int err, const char *call) {
    if (err == CL_SUCCESS)
        return false;
    fprintf(stderr, "bench_pocl: %s failed with OpenCL error %d\n", call, (int)err);
    return true;
}

/* ---- setup ---- */

static const char kernel_source[] = "__kernel void empty(void) {}\n";

/* Picks PoCL's platform (else the first) and its first CPU device. */
static int ocl_pick_device(ocl *cl) {
    cl_platform_id platforms[16];
    cl_uint count = 0;
    if (failed(clGetPlatformIDs(16, platforms, &count), "clGetPlatformIDs"))
        return -1;
    if (count > 16)
        count = 16;
    for (int pass = 0; pass < 2; pass++) {
        for (cl_uint i = 0; i < count; i++) {
            char name[256] = "";
            if (failed(clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof(name), name, NULL),
                       "clGetPlatformInfo"))
                return -1;
            if (pass == 0 && !strstr(name, "Portable Computing Language"))
                continue;
            cl_uint devices = 0;
            if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_CPU, 1, &cl->device, &devices) ==
                    CL_SUCCESS &&
                devices > 0) {
                cl->platform = platforms[i];
                return 0;
            }
        }
    }
    fprintf(stderr, "bench_pocl: no OpenCL platform with a CPU device; install "
                    "pocl-opencl-icd\n");
    return -1;
}

static int ocl_open(ocl *cl) {
    cl_int err;
    if (ocl_pick_device(cl) != 0 ||
        failed(clGetDeviceInfo(cl->device, CL_DEVICE_NAME, sizeof(cl->device_name), cl->device_name,
                               NULL),
               "clGetDeviceInfo") ||
        failed(clGetDeviceInfo(cl->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cl->compute_units),
                               &cl->compute_units, NULL),
               "clGetDeviceInfo") ||
        failed(clGetPlatformInfo(cl->platform, CL_PLATFORM_VERSION, sizeof(cl->platform_version),
                                 cl->platform_version, NULL),
               "clGetPlatformInfo"))
        return -1;
    cl_device_exec_capabilities caps = 0;
    if (failed(clGetDeviceInfo(cl->device, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof(caps), &caps,
                               NULL),
               "clGetDeviceInfo"))
        return -1;
    if (!(caps & CL_EXEC_NATIVE_KERNEL)) {
        fprintf(stderr,
                "bench_pocl: %s cannot run native kernels, which stand for host "
                "functions here\n",
                cl->device_name);
        return -1;
    }
    cl->context = clCreateContext(NULL, 1, &cl->device, NULL, NULL, &err);
    if (failed(err, "clCreateContext"))
        return -1;
    cl->qa = clCreateCommandQueue(cl->context, cl->device, 0, &err);
    if (failed(err, "clCreateCommandQueue"))
        return -1;
    cl->qb = clCreateCommandQueue(cl->context, cl->device, 0, &err);
    if (failed(err, "clCreateCommandQueue"))
        return -1;
    const char *source = kernel_source;
    cl->program = clCreateProgramWithSource(cl->context, 1, &source, NULL, &err);
    if (failed(err, "clCreateProgramWithSource") ||
        failed(clBuildProgram(cl->program, 1, &cl->device, "", NULL, NULL), "clBuildProgram"))
        return -1;
    cl->empty = clCreateKernel(cl->program, "empty", &err);
    return failed(err, "clCreateKernel") ? -1 : 0;
}

static void ocl_close(ocl *cl) {
    if (cl->empty)
        clReleaseKernel(cl->empty);
    if (cl->program)
        clReleaseProgram(cl->program);
    if (cl->qb)
        clReleaseCommandQueue(cl->qb);
    if (cl->qa)
        clReleaseCommandQueue(cl->qa);
    if (cl->context)
        clReleaseContext(cl->context);
}

/* ---- a. launch throughput and enqueue cost ---- */

static void CL_CALLBACK empty_native(void *args) {
    (void)args;
}

typedef struct launch_ctx {
    ocl *cl;     /* borrowed */
    bool native; /* native kernels, else the empty OpenCL C kernel */
    long count;
    bench_batches *batches; /* borrowed; NULL: no per-call times */
} launch_ctx;

static cl_int enqueue_empty(launch_ctx *c) {
    static const size_t one = 1;
    if (c->native)
        return clEnqueueNativeKernel(c->cl->qa, empty_native, NULL, 0, 0, NULL, NULL, 0, NULL,
                                     NULL);
    return clEnqueueNDRangeKernel(c->cl->qa, c->cl->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
}

/* The per-batch time includes the batch's clFlush, without which PoCL would
 * not start the commands: together they are what a rill launch does. */
static int sample_launch(void *ctx, double *ns_per_cmd) {
    launch_ctx *c = ctx;
    uint64_t t0 = bench_now_ns(), batch_start = t0;
    for (long i = 0; i < c->count; i++) {
        if (failed(enqueue_empty(c),
                   c->native ? "clEnqueueNativeKernel" : "clEnqueueNDRangeKernel"))
            return -1;
        if ((i + 1) % FLUSH_EVERY == 0 && failed(clFlush(c->cl->qa), "clFlush"))
            return -1;
        if ((i + 1) % BENCH_ENQUEUE_BATCH == 0) {
            uint64_t now = bench_now_ns();
            if (c->batches)
                bench_batches_add(c->batches, (double)(now - batch_start) / BENCH_ENQUEUE_BATCH);
            batch_start = now;
        }
    }
    if (failed(clFinish(c->cl->qa), "clFinish"))
        return -1;
    *ns_per_cmd = (double)(bench_now_ns() - t0) / (double)c->count;
    return 0;
}

static int figure_launch(void *ctx) {
    bench *b = ctx;
    const config *cfg = &b->cfg;
    const char *base_name = "pthread worker, mutex+condvar queue of function pointers";
    bench_report_section(b->report, "a. empty commands on one in-order queue, enqueue+execute "
                                    "(baseline: a pthread worker with a mutex+condvar queue)");
    int batch_capacity = (int)(cfg->launch_count / BENCH_ENQUEUE_BATCH) * cfg->launch_repeats;
    bench_batches value_batches = {0}, base_batches = {0};
    base_queue *queue = base_queue_create((size_t)cfg->launch_count + 1);
    int rc = -1;
    if (!queue || bench_batches_init(&value_batches, batch_capacity) != 0 ||
        bench_batches_init(&base_batches, batch_capacity) != 0) {
        fprintf(stderr, "bench_pocl: out of memory or threads for figure a\n");
        goto out;
    }
    launch_ctx native = {&b->cl, true, cfg->launch_count, &value_batches};
    base_launch_ctx base = {queue, cfg->launch_count, &base_batches};
    launch_ctx warm = {&b->cl, true, cfg->launch_count / 10, NULL};
    base_launch_ctx base_warm = {queue, cfg->launch_count / 10, NULL};
    double ignored;
    if (sample_launch(&warm, &ignored) != 0 || base_sample_launch(&base_warm, &ignored) != 0)
        goto out;
    warm.native = false;
    if (sample_launch(&warm, &ignored) != 0)
        goto out;

    bench_row host = {.id = "a1",
                      .name = "native kernel: enqueue+execute",
                      .unit = "ns/cmd",
                      .baseline_name = base_name};
    if (bench_measure_row(b->report, &host, sample_launch, &native, base_sample_launch, &base,
                          cfg->launch_repeats) != 0)
        goto out;
    bench_row enqueue = {.id = "a2",
                         .name = "native kernel: enqueue (+flush) call alone",
                         .unit = "ns/call",
                         .baseline_name = "mutex+condvar queue push"};
    enqueue.value = bench_stats_of(value_batches.values, value_batches.count);
    enqueue.baseline = bench_stats_of(base_batches.values, base_batches.count);
    enqueue.probe_before_ns = host.probe_before_ns;
    enqueue.probe_after_ns = host.probe_after_ns;
    if (bench_report_add(b->report, &enqueue) != 0)
        goto out;

    launch_ctx kernel = {&b->cl, false, cfg->launch_count, NULL};
    base.batches = NULL;
    bench_row kern = {.id = "a3",
                      .name = "1-work-item empty kernel: enqueue+execute",
                      .unit = "ns/cmd",
                      .baseline_name = base_name};
    if (bench_measure_row(b->report, &kern, sample_launch, &kernel, base_sample_launch, &base,
                          cfg->launch_repeats) != 0)
        goto out;
    rc = 0;
out:
    bench_batches_free(&base_batches);
    bench_batches_free(&value_batches);
    base_queue_destroy(queue);
    return rc;
}

/* ---- b. cross-queue ping-pong ---- */

typedef struct pingpong_ctx {
    ocl *cl;                      /* borrowed */
    long hops;                    /* even */
    alignas(64) atomic_long work; /* the tiny native kernel's counter */
} pingpong_ctx;

/* A native kernel receives a copy of its argument block: here, one pointer. */
static void CL_CALLBACK tick(void *args) {
    pingpong_ctx *c = *(pingpong_ctx *const *)args;
    atomic_fetch_add_explicit(&c->work, 1, memory_order_relaxed);
}

/* Hop 2i runs on qa after the previous hop's event, hop 2i+1 on qb after
 * hop 2i's event. Both queues are flushed every FLUSH_EVERY hops: OpenCL
 * requires a flush before another queue may wait on a command's event. */
static int sample_pingpong(void *ctx, double *ns_per_hop) {
    pingpong_ctx *c = ctx;
    atomic_store(&c->work, 0);
    cl_event prev = NULL;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->hops; i += 2) {
        cl_event ea, eb;
        if (failed(clEnqueueNativeKernel(c->cl->qa, tick, &c, sizeof(c), 0, NULL, NULL,
                                         prev ? 1 : 0, prev ? &prev : NULL, &ea),
                   "clEnqueueNativeKernel"))
            return -1;
        if (prev)
            clReleaseEvent(prev);
        cl_int err =
            clEnqueueNativeKernel(c->cl->qb, tick, &c, sizeof(c), 0, NULL, NULL, 1, &ea, &eb);
        clReleaseEvent(ea);
        if (failed(err, "clEnqueueNativeKernel"))
            return -1;
        prev = eb;
        if ((i / 2 + 1) % FLUSH_EVERY == 0 &&
            (failed(clFlush(c->cl->qa), "clFlush") || failed(clFlush(c->cl->qb), "clFlush")))
            return -1;
    }
    cl_int err = clFlush(c->cl->qa);
    if (err == CL_SUCCESS)
        err = clFlush(c->cl->qb);
    if (err == CL_SUCCESS && prev)
        err = clWaitForEvents(1, &prev);
    if (prev)
        clReleaseEvent(prev);
    if (failed(err, "clWaitForEvents") || failed(clFinish(c->cl->qa), "clFinish") ||
        failed(clFinish(c->cl->qb), "clFinish"))
        return -1;
    *ns_per_hop = (double)(bench_now_ns() - t0) / (double)c->hops;
    if (atomic_load(&c->work) != c->hops) {
        fprintf(stderr, "bench_pocl: ping-pong ran %ld native kernels of %ld\n",
                atomic_load(&c->work), c->hops);
        return -1;
    }
    return 0;
}

static int figure_pingpong(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "b. cross-queue ping-pong through event wait lists "
                                    "(baseline: two pthreads handing a token via an atomic)");
    pingpong_ctx *c = aligned_alloc(64, sizeof(*c));
    if (!c) {
        fprintf(stderr, "bench_pocl: out of memory\n");
        return -1;
    }
    memset(c, 0, sizeof(*c));
    atomic_init(&c->work, 0);
    c->cl = &b->cl;
    long hops = b->cfg.hops + b->cfg.hops % 2;
    c->hops = hops / 10 + hops / 10 % 2;
    double ignored;
    int rc = -1;
    if (sample_pingpong(c, &ignored) != 0)
        goto out;
    c->hops = hops;
    base_token_ctx base = {hops};
    bench_row row = {.id = "b1",
                     .name = "queue A -> event -> queue B, tiny native fns",
                     .unit = "ns/hop",
                     .baseline_name = "two pthreads, spinning atomic token"};
    if (bench_measure_row(b->report, &row, sample_pingpong, c, base_sample_token, &base,
                          b->cfg.hop_repeats) != 0)
        goto out;
    rc = 0;
out:
    free(c);
    return rc;
}

/* ---- c. host wake-up in clWaitForEvents ---- */

enum { WAKE_SPIN_NS = 20000 };

typedef struct wake_ctx {
    ocl *cl; /* borrowed */
    alignas(64) _Atomic uint64_t stamp_ns;
} wake_ctx;

/* Spins ~20 us, then stamps the clock right before returning. */
static void CL_CALLBACK spin_then_stamp(void *args) {
    wake_ctx *c = *(wake_ctx *const *)args;
    bench_spin_ns(WAKE_SPIN_NS);
    /* Release pairs with the acquire load in sample_wake. */
    atomic_store_explicit(&c->stamp_ns, bench_now_ns(), memory_order_release);
}

static int sample_wake(void *ctx, double *us) {
    wake_ctx *c = ctx;
    atomic_store(&c->stamp_ns, 0);
    cl_event done;
    if (failed(clEnqueueNativeKernel(c->cl->qa, spin_then_stamp, &c, sizeof(c), 0, NULL, NULL, 0,
                                     NULL, &done),
               "clEnqueueNativeKernel"))
        return -1;
    cl_int err = clFlush(c->cl->qa);
    if (err == CL_SUCCESS)
        err = clWaitForEvents(1, &done);
    uint64_t now = bench_now_ns();
    clReleaseEvent(done);
    if (failed(err, "clWaitForEvents"))
        return -1;
    uint64_t stamp = atomic_load_explicit(&c->stamp_ns, memory_order_acquire);
    if (stamp == 0) {
        fprintf(stderr, "bench_pocl: clWaitForEvents returned before the native kernel ran\n");
        return -1;
    }
    *us = (double)(now - stamp) / 1000.0;
    return 0;
}

static int figure_wake(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "c. host wake-up: work done 20 us after submit -> "
                                    "clWaitForEvents returns (baseline: pthread condvar)");
    wake_ctx *c = aligned_alloc(64, sizeof(*c));
    if (!c) {
        fprintf(stderr, "bench_pocl: out of memory\n");
        return -1;
    }
    memset(c, 0, sizeof(*c));
    atomic_init(&c->stamp_ns, 0);
    c->cl = &b->cl;
    base_wake *base = base_wake_create(WAKE_SPIN_NS);
    int rc = -1;
    double ignored;
    if (!base) {
        fprintf(stderr, "bench_pocl: cannot start the wake-up baseline thread\n");
        goto out;
    }
    if (sample_wake(c, &ignored) != 0 || base_sample_wake(base, &ignored) != 0)
        goto out;
    bench_row row = {.id = "c1",
                     .name = "clWaitForEvents on a native kernel's event",
                     .unit = "us",
                     .baseline_name = "pthread condvar wake-up"};
    if (bench_measure_row(b->report, &row, sample_wake, c, base_sample_wake, base,
                          b->cfg.wake_samples) != 0)
        goto out;
    rc = 0;
out:
    base_wake_destroy(base);
    free(c);
    return rc;
}

/* ---- f. the first launch after a pause ---- */

/* As bench_runtime's figure f: the loop is enqueue an empty 1-work-item
 * kernel with an event, flush, clWaitForEvents; each sample is the median
 * of IDLE_BURST iterations, each after the pause. */
enum { IDLE_BURST = 7, BUSY_WARM = 8 };

typedef struct idle_ctx {
    ocl *cl;           /* borrowed */
    uint64_t pause_ns; /* idle time before the launch */
    bool sleep;        /* sleep (or spin) for the pause */
} idle_ctx;

static int launch_and_wait(idle_ctx *c, double *us) {
    static const size_t one = 1;
    cl_event done;
    uint64_t t0 = bench_now_ns();
    if (failed(clEnqueueNDRangeKernel(c->cl->qa, c->cl->empty, 1, NULL, &one, NULL, 0, NULL, &done),
               "clEnqueueNDRangeKernel"))
        return -1;
    cl_int err = clFlush(c->cl->qa);
    if (err == CL_SUCCESS)
        err = clWaitForEvents(1, &done);
    *us = (double)(bench_now_ns() - t0) / 1000.0;
    clReleaseEvent(done);
    return failed(err, "clWaitForEvents") ? -1 : 0;
}

static int sample_after_pause(void *ctx, double *us) {
    idle_ctx *c = ctx;
    double v[IDLE_BURST];
    for (int i = 0; i < IDLE_BURST; i++) {
        bench_idle_ns(c->pause_ns, c->sleep);
        if (launch_and_wait(c, &v[i]) != 0)
            return -1;
    }
    *us = bench_stats_of(v, IDLE_BURST).median;
    return 0;
}

static int sample_busy(void *ctx, double *us) {
    idle_ctx *c = ctx;
    double v[IDLE_BURST], one;
    for (int i = 0; i < BUSY_WARM; i++)
        if (launch_and_wait(c, &one) != 0)
            return -1;
    for (int i = 0; i < IDLE_BURST; i++)
        if (launch_and_wait(c, &v[i]) != 0)
            return -1;
    *us = bench_stats_of(v, IDLE_BURST).median;
    return 0;
}

static int figure_idle(void *ctx) {
    bench *b = ctx;
    static const struct {
        const char *id, *name;
        uint64_t pause_ns;
        bool sleep;
    } pauses[] = {
        {"f1", "after 200 us of host idle (spinning)", 200000, false},
        {"f2", "after 2 ms of host idle (spinning)", 2000000, false},
        {"f3", "after 20 ms of host idle (sleeping)", 20000000, true},
    };
    bench_report_section(b->report, "f. enqueue + clWaitForEvents of an empty kernel after a "
                                    "pause (baseline: the loop back to back)");
    idle_ctx c = {.cl = &b->cl};
    double ignored;
    if (sample_busy(&c, &ignored) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(pauses) / sizeof(pauses[0]); i++) {
        c.pause_ns = pauses[i].pause_ns;
        c.sleep = pauses[i].sleep;
        bench_row row = {.id = pauses[i].id,
                         .name = pauses[i].name,
                         .unit = "us",
                         .baseline_name = "the same loop back to back"};
        if (bench_measure_row(b->report, &row, sample_after_pause, &c, sample_busy, &c,
                              b->cfg.idle_samples) != 0)
            return -1;
    }
    return 0;
}

/* ---- main ---- */

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    if (ocl_open(&b->cl) != 0)
        return -1;
    snprintf(device->name, sizeof(device->name), "%s", b->cl.device_name);
    device->compute_units = (int)b->cl.compute_units;
    snprintf(device->platform, sizeof(device->platform), "%s", b->cl.platform_version);
    return 0;
}

static int teardown(void *ctx) {
    bench *b = ctx;
    ocl_close(&b->cl);
    return 0;
}

static const bench_cli_figure figures[] = {
    {'a', figure_launch},
    {'b', figure_pingpong},
    {'c', figure_wake},
    {'f', figure_idle},
};

static const bench_cli cli = {
    .program = "bench_pocl",
    .subject = "pocl",
    .figure_prefix = "",
    .quick_help = "fewer commands and repeats (a smoke run)",
    .figures_help = "                a launch throughput   b cross-queue ping-pong\n"
                    "                c host wake-up         f first launch after a pause\n",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = teardown,
};

int main(int argc, char **argv) {
    bench b = {0};
    return bench_cli_main(&cli, &b, argc, argv);
}
