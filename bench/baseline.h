/* SPDX-License-Identifier: MIT */
/* What rill is compared to: the same figures done with plain pthreads and
 * single-threaded OpenBLAS, written as directly as one would without a
 * runtime. Each sampler has the bench_sample_fn shape so that the harness can
 * alternate it with the rill sampler of the same figure. */
#ifndef RILL_BENCH_BASELINE_H
#define RILL_BENCH_BASELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* ---- per-call times collected in batches ---- */

/* Per-call nanoseconds of batches of calls, kept across repeats. */
typedef struct bench_batches {
    double *values; /* owned */
    int count;
    int capacity;
} bench_batches;

int bench_batches_init(bench_batches *b, int capacity);
void bench_batches_add(bench_batches *b, double ns_per_call); /* drops values past capacity */
void bench_batches_free(bench_batches *b);

enum { BENCH_ENQUEUE_BATCH = 256 }; /* calls per timed batch */

/* ---- a. a worker thread consuming a mutex+condvar queue ---- */

typedef struct base_queue base_queue;

/* Starts a worker thread that runs pushed function pointers in order. At
 * most capacity tasks may be pushed between two drains. NULL on failure. */
base_queue *base_queue_create(size_t capacity);
void base_queue_destroy(base_queue *q);

typedef struct base_launch_ctx {
    base_queue *queue;      /* borrowed */
    long count;             /* tasks per sample, <= the queue's capacity - 1 */
    bench_batches *batches; /* borrowed; NULL: no per-call times */
} base_launch_ctx;
/* Pushes count empty tasks and waits until they ran: ns per task. */
int base_sample_launch(void *ctx, double *ns_per_task);

/* ---- b. two threads handing a token through a spinning atomic ---- */

typedef struct base_token_ctx {
    long hops;
} base_token_ctx;
int base_sample_token(void *ctx, double *ns_per_hop);

/* ---- c. condition-variable wake-up ---- */

typedef struct base_wake base_wake;

/* Starts a thread that, per sample, spins spin_ns, stamps the clock and
 * signals a condition variable that the sampling thread sleeps on. */
base_wake *base_wake_create(uint64_t spin_ns);
void base_wake_destroy(base_wake *w);
/* Microseconds from the worker's stamp until the sampler's wait returned. */
int base_sample_wake(void *ctx, double *us);

/* ---- f. a task for a sleeping thread, the host sleeping until it is done ---- */

typedef struct base_sleepers base_sleepers;

/* Starts a thread that sleeps on a futex until it is handed a task, runs
 * it (an empty function), wakes the host with a futex wake and sleeps
 * again. NULL on failure. */
base_sleepers *base_sleepers_create(void);
void base_sleepers_destroy(base_sleepers *b);

typedef struct base_sleepers_ctx {
    base_sleepers *sleepers; /* borrowed */
    uint64_t pause_ns;       /* idle time before each task */
    bool sleep;              /* sleep (or spin) for the pause */
} base_sleepers_ctx;
/* After the pause, hands the thread a task with a futex wake and sleeps on
 * a futex until the thread has run it: microseconds from the hand-over
 * until the host is back, the floor of a wake-up both ways. */
int base_sample_sleepers(void *ctx, double *us);

/* ---- d. compute-bound work on two threads ---- */

/* The compute-bound body that the rill kernels and the threads both run: a
 * dependent floating-point chain of iters steps, whose result is returned so
 * that it cannot be optimised away. */
double bench_spin_work(uint64_t iters);
/* Iterations of bench_spin_work that take about ms milliseconds here. */
uint64_t bench_spin_calibrate(double ms);

typedef struct base_speedup_ctx {
    uint64_t iters;
} base_speedup_ctx;
/* Time of two bench_spin_work(iters) calls in one thread over the time of
 * the same two calls in two threads. */
int base_sample_speedup(void *ctx, double *speedup);

/* ---- e. single-threaded OpenBLAS ---- */

/* Loads OpenBLAS privately (dlopen with RTLD_LOCAL: its cblas_sgemm meets
 * nothing the program links), the pthreads variant first so that its own
 * threads can be measured too, and makes it single-threaded. 0 when
 * loaded; otherwise -1 with a sentence in why (Debian: libopenblas0-pthread). */
int base_blas_load(char *why, size_t size);

typedef struct base_matmul_ctx {
    const float *a, *b; /* borrowed: [m,k] and [k,n] */
    float *c;           /* borrowed: [m,n] */
    size_t m, k, n;
    int threads; /* OpenBLAS threads for this call; 0 or 1: one */
} base_matmul_ctx;
/* c = a b with cblas_sgemm: GFLOP/s. With threads > 1, OpenBLAS runs its
 * own threads for this call and is single-threaded again on return. */
int base_sample_matmul(void *ctx, double *gflops);

typedef struct base_conv2d_ctx {
    const float *in, *weight; /* borrowed: [n,c,h,w] and [k,c,r,s] */
    float *out;               /* borrowed: [n,k,h-r+1,w-s+1] */
    float *cols;              /* borrowed: [c*r*s, (h-r+1)*(w-s+1)] scratch */
    size_t n, c, h, w, k, r, s;
} base_conv2d_ctx;
/* Stride-1 unpadded convolution by im2col and cblas_sgemm: GFLOP/s. */
int base_sample_conv2d(void *ctx, double *gflops);

#endif
