/* SPDX-License-Identifier: MIT */
/* What rill's CUDA backend asks of the driver per public call, counted by
 * the stand-in driver (fake_cuda_counts.h), against the targets set by what
 * the CUDA runtime asks for the same work (bench/bench_cuda_calls.c prints
 * the same figures beside the runtime's):
 *
 *   call                                         runtime   target
 *   kernel launch                                1, 0      1, 0
 *   launch + rill_stream_synchronize             2         <= 3
 *   event record + wait on another stream        2         <= 2, no event create/destroy
 *   record of an event with a native CUevent     1         <= 1
 *   copy of 4 KiB from pageable memory to GPU    1         <= 2, staged at submit
 *   rill_malloc_async + rill_free_async, warm    0         0
 *   memset + copy of device memory               2, 0      2, 0
 *   host function                                1         <= 2
 *   graph launch of 1,000 kernels + synchronize  2         <= 2
 *
 * (driver calls, GPU-side memory operations). Calls that only switch the
 * thread's current context (cuCtxGetCurrent, cuCtxSetCurrent) are not
 * counted: rill makes its device's context current around each call and
 * restores the caller's. A launch and a wait are counted on the calling
 * thread, which makes all their calls; the device's pump also queues a
 * write of a stream's done word once the stream has been quiet a while
 * (200 us), which a loaded machine may let fall inside a measured loop.
 * The other rows count every thread's calls. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_counts.h"
#include "fixture.h"

static fake_cuda_counters counters;

static int open_counters(void **state) {
    (void)state;
    return fake_cuda_counters_open(&counters);
}

/* ----------------------------------------------------------- the kernels */

__attribute__((visibility("default"))) void calls_empty_host(const rill_block_ctx *ctx,
                                                             const void *args);
void calls_empty_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

/* Holds its stream until the gate opens, so that work queued behind it is
 * still pending when the next call looks. */
static _Atomic int gate;

__attribute__((visibility("default"))) void calls_gate_host(const rill_block_ctx *ctx,
                                                            const void *args);
void calls_gate_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    while (!atomic_load(&gate))
        rt_sleep_us(20);
}

static rill_kernel *make_kernel(const char *entry) {
    rill_kernel *k;
    rill_kernel_desc desc = {entry, NULL, "// stand-in", entry};
    RT_OK(rill_kernel_create(&desc, &k));
    return k;
}

static rill_stream *new_stream(void) {
    rill_device *dev;
    rill_stream *s;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &dev));
    RT_OK(rill_stream_create(dev, 0, &s));
    return s;
}

static void launch(rill_stream *s, rill_kernel *k) {
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, NULL, 0, NULL, 0};
    RT_OK(rill_launch_kernel(s, k, &l));
}

/* ------------------------------------------------------------- counting */

typedef struct figure {
    double calls, memops; /* per call measured */
} figure;

/* Driver calls since the last reset, less the context switches: of every
 * thread, or of the calling thread. */
static uint64_t work_calls(void) {
    return counters.calls(NULL) - counters.calls("cuCtxGetCurrent") -
           counters.calls("cuCtxSetCurrent");
}

static uint64_t work_calls_here(void) {
    return counters.calls_here(NULL) - counters.calls_here("cuCtxGetCurrent") -
           counters.calls_here("cuCtxSetCurrent");
}

static figure per(uint64_t calls, uint64_t memops, int n) {
    return (figure){(double)calls / n, (double)memops / n};
}

/* memops < 0: no target for them. A stream's done word is written once
 * every 256 commands (the backend's CUDA_FLUSH_EVERY), whatever else
 * happens: each of the call's commands may add 1/256 of a call and of a
 * memory operation. */
static void check(const char *what, figure f, double calls, double memops, int commands) {
    double slack = commands / 256.0;
    char text[512];
    counters.text(text, sizeof text);
    printf("%s: %.3f driver calls, %.3f memops per call (target %g, %g)\n", what, f.calls, f.memops,
           calls, memops);
    if (f.calls > calls + slack || (memops >= 0 && f.memops > memops + slack))
        fail_msg("%s: %.3f driver calls and %.3f memops per call, over the target of %g and %g "
                 "(the last loop made: %s)",
                 what, f.calls, f.memops, calls, memops, text);
}

enum { N = 200 };

/* A kernel launch is one driver call (cuLaunchKernel) and no memory
 * operation, as cudaLaunchKernel is. */
static void test_launch_is_one_call(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("calls_empty");
    rill_stream *s = new_stream();
    launch(s, k); /* loads the kernel */
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < N; i++)
        launch(s, k);
    figure f = per(work_calls_here(), counters.memops_here(), N);
    check("kernel launch", f, 1, 0, 1);
    assert_int_equal(counters.calls("cuLaunchKernel"), N);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
}

/* A launch and a synchronize of its stream: at most three driver calls
 * (cudaLaunchKernel + cudaStreamSynchronize are two). */
static void test_launch_and_synchronize(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("calls_empty");
    rill_stream *s = new_stream();
    launch(s, k);
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < N; i++) {
        launch(s, k);
        RT_OK(rill_stream_synchronize(s));
    }
    check("launch + synchronize", per(work_calls(), counters.memops(), N), 3, -1, 1);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
}

/* A record of an event on a busy stream and a wait for it on another
 * stream of the device: at most two driver calls, and no event made or
 * destroyed for it, then or when the wait completes. */
static void test_event_wait_is_two_calls(void **state) {
    (void)state;
    enum { ROUNDS = 100 };
    rill_kernel *k = make_kernel("calls_gate");
    rill_stream *a = new_stream(), *b = new_stream();
    rill_event *e;
    RT_OK(rill_event_create(0, &e));
    atomic_store(&gate, 1);
    launch(a, k);
    RT_OK(rill_stream_synchronize(a));
    uint64_t calls = 0, memops = 0, made = 0;
    for (int i = 0; i < ROUNDS; i++) {
        atomic_store(&gate, 0);
        launch(a, k);
        counters.reset();
        RT_OK(rill_event_record(e, a));
        RT_OK(rill_stream_wait_event(b, e));
        calls += work_calls_here();
        memops += counters.memops_here();
        atomic_store(&gate, 1);
        RT_OK(rill_stream_synchronize(b));
        made += counters.calls("cuEventCreate") + counters.calls("cuEventDestroy");
    }
    check("event record + wait", per(calls, memops, ROUNDS), 2, 0, 1);
    if (made != 0)
        fail_msg("%llu events made or destroyed for %d waits", (unsigned long long)made, ROUNDS);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
}

/* A record of an event whose CUevent was asked for (rill_event_native):
 * one driver call, the CUevent's record (cudaEventRecord), and no memory
 * operation. */
static void test_native_event_record_is_one_call(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *e;
    void *native;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_native(e, &native));
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < N; i++)
        RT_OK(rill_event_record(e, s));
    check("record of an event with a native CUevent",
          per(work_calls_here(), counters.memops_here(), N), 1, 0, 1);
    assert_int_equal(counters.calls_here("cuEventRecord"), N);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

/* A copy of 4 KiB from pageable host memory into device memory, with the
 * staging buffers made: two driver calls, the look at the host memory
 * (cuPointerGetAttributes: pageable or page-locked) and the copy from the
 * staging buffer (cudaMemcpyAsync is one call, which stages it inside
 * the driver); the source is free when the call returns. */
static void test_pageable_copy_to_the_gpu_calls(void **state) {
    (void)state;
    enum { BYTES = 4096 };
    rill_stream *s = new_stream();
    static unsigned char src[BYTES];
    void *x;
    RT_OK(rill_malloc_async(BYTES, s, &x));
    /* With every copy in flight at once: the staging buffers the loop
     * below may need, at most. */
    rill_kernel *k = make_kernel("calls_gate");
    atomic_store(&gate, 0);
    launch(s, k);
    for (int i = 0; i < N; i++)
        RT_OK(rill_memcpy_async(x, src, BYTES, s));
    atomic_store(&gate, 1);
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < N; i++)
        RT_OK(rill_memcpy_async(x, src, BYTES, s));
    check("copy of 4 KiB from pageable memory to the GPU",
          per(work_calls_here(), counters.memops_here(), N), 2, 0, 1);
    assert_int_equal(counters.calls_here("cuMemcpyAsync"), N);
    assert_int_equal(counters.calls("cuMemHostAlloc"), 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
}

/* An allocation and its free on one stream, from memory the pool holds
 * already: no driver call. */
static void test_warm_alloc_free_makes_no_call(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    void *p;
    RT_OK(rill_malloc_async(4096, s, &p));
    RT_OK(rill_free_async(p, s));
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < N; i++) {
        RT_OK(rill_malloc_async(4096, s, &p));
        RT_OK(rill_free_async(p, s));
    }
    check("malloc_async + free_async", per(work_calls(), counters.memops(), N), 0, 0, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

/* A copy between device buffers and a memset of device memory are one
 * driver call each (cudaMemcpyAsync, cudaMemsetAsync). */
static void test_copy_and_memset_are_one_call(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    void *a, *b;
    RT_OK(rill_malloc_async(4096, s, &a));
    RT_OK(rill_malloc_async(4096, s, &b));
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < N; i++) {
        RT_OK(rill_memset_async(a, i, 4096, s));
        RT_OK(rill_memcpy_async(b, a, 4096, s));
    }
    check("memset + copy", per(work_calls_here(), counters.memops_here(), N), 2, 0, 2);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free_async(a, s));
    RT_OK(rill_free_async(b, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

static _Atomic int host_runs;

static void count_run(void *arg) {
    (void)arg;
    atomic_fetch_add(&host_runs, 1);
}

/* A host function queued after a kernel: at most two driver calls
 * (cudaLaunchHostFunc is one), the kernel's launch aside; one synchronize
 * at the end. */
static void test_host_function_calls(void **state) {
    (void)state;
    rill_kernel *k = make_kernel("calls_empty");
    rill_stream *s = new_stream();
    launch(s, k);
    RT_OK(rill_stream_synchronize(s));
    atomic_store(&host_runs, 0);
    counters.reset();
    for (int i = 0; i < N; i++) {
        launch(s, k);
        RT_OK(rill_launch_host_func(s, count_run, NULL));
    }
    RT_OK(rill_stream_synchronize(s));
    uint64_t calls = work_calls() - counters.calls("cuLaunchKernel");
    check("host function", per(calls, counters.memops(), N), 2, -1, 2);
    assert_int_equal(atomic_load(&host_runs), N);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
}

/* A launch of a graph of 1,000 kernels and a synchronize of its stream:
 * at most two driver calls (cudaGraphLaunch + cudaStreamSynchronize are
 * two), its instantiation and first launch aside: the exec is one CUDA
 * graph, launched with one cuGraphLaunch. The stand-in runs the 1,000
 * kernels on the CPU, which may take more than the millisecond after which
 * the pump checks a stream without progress for a fault (cuStreamQuery):
 * those checks are left out of the count. */
static void test_graph_launch_calls(void **state) {
    (void)state;
    enum { NODES = 1000, ROUNDS = 20 };
    rill_kernel *k = make_kernel("calls_empty");
    rill_stream *s = new_stream();
    rill_graph *g;
    rill_graph_exec *x;
    rill_graph_node *prev = NULL;
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, NULL, 0, NULL, 0};
    RT_OK(rill_graph_create(&g));
    for (int i = 0; i < NODES; i++) {
        rill_graph_node *node;
        RT_OK(
            rill_graph_add_kernel_node(g, prev != NULL ? &prev : NULL, prev != NULL, k, &l, &node));
        prev = node;
    }
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    for (int i = 0; i < ROUNDS; i++) {
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_stream_synchronize(s));
    }
    uint64_t calls = work_calls() - counters.calls("cuStreamQuery");
    check("graph launch of 1000 kernels + synchronize", per(calls, counters.memops(), ROUNDS), 2,
          -1, 1);
    assert_int_equal(counters.calls("cuGraphLaunch"), ROUNDS);
    assert_int_equal(counters.calls("cuLaunchKernel"), 0);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_is_one_call),
        cmocka_unit_test(test_launch_and_synchronize),
        cmocka_unit_test(test_event_wait_is_two_calls),
        cmocka_unit_test(test_native_event_record_is_one_call),
        cmocka_unit_test(test_pageable_copy_to_the_gpu_calls),
        cmocka_unit_test(test_warm_alloc_free_makes_no_call),
        cmocka_unit_test(test_copy_and_memset_are_one_call),
        cmocka_unit_test(test_host_function_calls),
        cmocka_unit_test(test_graph_launch_calls),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests_name("cuda_calls", tests, open_counters, NULL);
}
