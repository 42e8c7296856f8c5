/* SPDX-License-Identifier: MIT */
/* What the CUDA backend shares with code built on the CUDA driver, and its
 * copies with pageable host memory, on the stand-in driver (fake_cuda.c):
 * the CUevent of rill_event_native as the stand-in's own cuEventQuery and
 * cuStreamWaitEvent see it, its errors and lifetime; copies to the GPU
 * staged when they are submitted, copies from it staged and completed in
 * stream order, large ones through several staging buffers, the buffers'
 * bound and reuse, and copies without page-locked memory. The kernels'
 * bodies are exported under their entries' names followed by "_host". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "fake_cuda_counts.h"
#include "fixture.h"

/* ------------------------------------------------------ the stand-in */

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

static fake_cuda_counters counters;
static struct {
    CUresult (*set_current)(CUcontext);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*wait_event)(CUstream, CUevent, unsigned int);
    CUresult (*event_query)(CUevent);
    CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    void (*refuse_host_allocs)(int);
} drv;

static void *entry(get_proc_fn get, const char *name) {
    void *p = NULL;
    if (get(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS)
        fail_msg("the stand-in driver has no %s", name);
    return p;
}

/* The library that RILL_CUDA_DRIVER names: the one rill loads too. */
static int load_fake(void **state) {
    (void)state;
    const char *path = getenv("RILL_CUDA_DRIVER");
    void *so = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (so == NULL || fake_cuda_counters_open(&counters) != 0)
        return -1;
    get_proc_fn get;
    *(void **)&get = dlsym(so, "cuGetProcAddress_v2");
    *(void **)&drv.refuse_host_allocs = dlsym(so, "fake_cuda_refuse_host_allocs");
    if (get == NULL || drv.refuse_host_allocs == NULL)
        return -1;
    *(void **)&drv.set_current = entry(get, "cuCtxSetCurrent");
    *(void **)&drv.retain = entry(get, "cuDevicePrimaryCtxRetain");
    *(void **)&drv.release = entry(get, "cuDevicePrimaryCtxRelease");
    *(void **)&drv.stream_create = entry(get, "cuStreamCreate");
    *(void **)&drv.stream_destroy = entry(get, "cuStreamDestroy");
    *(void **)&drv.stream_synchronize = entry(get, "cuStreamSynchronize");
    *(void **)&drv.wait_event = entry(get, "cuStreamWaitEvent");
    *(void **)&drv.event_query = entry(get, "cuEventQuery");
    *(void **)&drv.memcpy_async = entry(get, "cuMemcpyAsync");
    return 0;
}

/* The GPU's primary context, current on the calling thread, as a program
 * built on the CUDA runtime has it; with a stream of the program's own. */
static CUstream their_stream(void) {
    CUcontext ctx = NULL;
    CUstream st = NULL;
    assert_int_equal(drv.retain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(drv.set_current(ctx), CUDA_SUCCESS);
    assert_int_equal(drv.stream_create(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return st;
}

static void their_stream_destroy(CUstream st) {
    assert_int_equal(drv.stream_destroy(st), CUDA_SUCCESS);
    assert_int_equal(drv.set_current(NULL), CUDA_SUCCESS);
    assert_int_equal(drv.release(0), CUDA_SUCCESS);
}

static rill_device *gpu(void) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &dev));
    return dev;
}

static rill_stream *new_stream(void) {
    rill_stream *s;
    RT_OK(rill_stream_create(gpu(), 0, &s));
    return s;
}

/* ---------------------------------------------------------- the gate */

/* A kernel that holds its stream (on the GPU: rill sees a kernel that
 * finishes on its own) until the test opens the gate, or 10 s pass. */
static _Atomic int gate_open;

__attribute__((visibility("default"))) void interop_gate_host(const rill_block_ctx *ctx,
                                                              const void *args);
void interop_gate_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    uint64_t end = rt_now_ns() + 10000000000ull;
    while (!atomic_load(&gate_open) && rt_now_ns() < end)
        rt_sleep_us(50);
}

static void launch_gate(rill_stream *s) {
    rill_kernel *k;
    rill_kernel_desc desc = {"interop_gate", NULL, "// stand-in", "interop_gate"};
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, NULL, 0, NULL, 0};
    atomic_store(&gate_open, 0);
    RT_OK(rill_kernel_create(&desc, &k));
    RT_OK(rill_launch_kernel(s, k, &l));
    RT_OK(rill_kernel_destroy(k)); /* lives until the launch is done */
}

/* Opens the gate after delay_us on a thread of its own: a test that would
 * otherwise block for good on a broken build fails instead. */
static void *open_later(void *arg) {
    rt_sleep_us((unsigned)(uintptr_t)arg);
    atomic_store(&gate_open, 1);
    return NULL;
}

/* --------------------------------------------------- rill_event_native */

/* "The event's CUevent ...: cuStreamWaitEvent on it makes their stream
 * wait for the event's latest record, cuEventQuery ... see it complete";
 * "the same handle every time"; "Every rill_event_record after the first
 * call records it too". */
static void test_event_native_is_a_cuevent_other_code_waits_for(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *e;
    uint64_t *from, *to;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_set_device(gpu()));
    RT_OK(rill_malloc_host(sizeof *from, (void **)&from));
    RT_OK(rill_malloc_host(sizeof *to, (void **)&to));
    *to = 0;
    CUstream theirs = their_stream();
    for (uint64_t round = 1; round <= 2; round++) {
        /* Round 1 asks for the handle after the record (its first call
         * records it at the end of s); round 2 records an event that has
         * one. */
        launch_gate(s);
        RT_OK(rill_event_record(e, s));
        void *native = NULL, *again = NULL;
        RT_OK(rill_event_native(e, &native));
        assert_non_null(native);
        RT_OK(rill_event_native(e, &again));
        assert_ptr_equal(native, again);
        assert_int_equal(drv.event_query(native), CUDA_ERROR_NOT_READY);
        *from = round;
        assert_int_equal(drv.wait_event(theirs, native, 0), CUDA_SUCCESS);
        assert_int_equal(drv.memcpy_async((CUdeviceptr)(uintptr_t)to, (CUdeviceptr)(uintptr_t)from,
                                          sizeof *to, theirs),
                         CUDA_SUCCESS);
        rt_sleep_us(20000);
        /* Their copy waits behind rill's gate. */
        assert_int_equal(*to, round - 1);
        assert_int_equal(drv.event_query(native), CUDA_ERROR_NOT_READY);
        atomic_store(&gate_open, 1);
        assert_int_equal(drv.stream_synchronize(theirs), CUDA_SUCCESS);
        assert_int_equal(*to, round);
        RT_OK(rill_event_synchronize(e));
        assert_int_equal(drv.event_query(native), CUDA_SUCCESS);
    }
    their_stream_destroy(theirs);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free_host(from));
    RT_OK(rill_free_host(to));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

/* "one that completed already needs nothing (a CUevent never recorded
 * reports complete)": nothing is queued for it. */
static void test_event_native_of_a_completed_record_is_complete(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *e;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_synchronize(e));
    counters.reset();
    void *native = NULL;
    RT_OK(rill_event_native(e, &native));
    assert_non_null(native);
    assert_int_equal(counters.calls("cuEventRecord"), 0);
    CUstream theirs = their_stream();
    assert_int_equal(drv.event_query(native), CUDA_SUCCESS);
    assert_int_equal(drv.wait_event(theirs, native, 0), CUDA_SUCCESS);
    assert_int_equal(drv.stream_synchronize(theirs), CUDA_SUCCESS);
    their_stream_destroy(theirs);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

/* "RILL_ERROR_NOT_RECORDED for an event never recorded";
 * "RILL_ERROR_NOT_SUPPORTED for an event bound to a device whose events
 * have no native handle (a CPU device)"; "both with a sentence". */
static void test_event_native_needs_a_record_on_a_cuda_stream(void **state) {
    (void)state;
    rill_device *cpu;
    rill_stream *c;
    rill_event *e;
    void *native = (void *)&native;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    RT_OK(rill_stream_create(cpu, 0, &c));
    RT_OK(rill_event_create(0, &e));
    RT_STATUS(RILL_ERROR_NOT_RECORDED, rill_event_native(e, &native));
    assert_null(native);
    assert_non_null(strstr(rill_last_error(), "record it on a stream of a CUDA device"));
    RT_OK(rill_event_record(e, c));
    native = (void *)&native;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_event_native(e, &native));
    assert_null(native);
    assert_non_null(strstr(rill_last_error(), "no native handle"));
    RT_OK(rill_stream_synchronize(c));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_shutdown());
}

/* "behind work rill holds back on the host (a host function ...), once
 * that work let it through; until then, a wait on the CUevent waits for
 * its previous record only": a record behind a host function and a gate
 * kernel reaches the CUevent once the host function ran, after the
 * kernel. */
static void test_event_native_record_behind_a_host_function(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *e;
    void *native = NULL;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_event_native(e, &native));
    assert_non_null(native);
    static rt_gate held;
    rt_gate_reset(&held);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &held));
    launch_gate(s);
    RT_OK(rill_event_record(e, s));
    CUstream theirs = their_stream();
    /* Not on the GPU's queue yet: the previous record, complete. */
    assert_int_equal(drv.event_query(native), CUDA_SUCCESS);
    rt_gate_open(&held);
    uint64_t end = rt_now_ns() + 3000000000ull;
    CUresult r;
    while ((r = drv.event_query(native)) == CUDA_SUCCESS && rt_now_ns() < end)
        rt_sleep_us(1000);
    assert_int_equal(r, CUDA_ERROR_NOT_READY); /* recorded, behind the gate kernel */
    assert_int_equal(drv.wait_event(theirs, native, 0), CUDA_SUCCESS);
    atomic_store(&gate_open, 1);
    assert_int_equal(drv.stream_synchronize(theirs), CUDA_SUCCESS);
    assert_int_equal(drv.event_query(native), CUDA_SUCCESS);
    their_stream_destroy(theirs);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

/* "owned by the event: ... valid until the event is freed
 * (rill_event_destroy, once its records completed ...)": destroyed once,
 * when the last record completes. */
static void test_event_native_lives_as_long_as_the_event(void **state) {
    (void)state;
    rill_stream *s = new_stream();
    rill_event *e;
    void *native = NULL;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_native(e, &native));
    launch_gate(s);
    RT_OK(rill_event_record(e, s));
    counters.reset();
    RT_OK(rill_event_destroy(e));
    assert_int_equal(counters.calls("cuEventDestroy"), 0); /* its record is pending */
    atomic_store(&gate_open, 1);
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(counters.calls("cuEventDestroy"), 1);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
}

/* ------------------------------------------- copies with pageable memory */

/* A copy from pageable memory of at most 64 KiB, submitted behind work on
 * the GPU only, has read its source when the call returns: the call
 * returns before the GPU reached the copy, and the caller may overwrite
 * its memory at once. */
static void test_small_copy_to_the_gpu_returns_at_once(void **state) {
    (void)state;
    enum { N = 4096 };
    unsigned char *src = malloc(N), *out = malloc(N);
    assert_non_null(src);
    assert_non_null(out);
    rill_stream *s = new_stream();
    void *x;
    RT_OK(rill_malloc_async(N, s, &x));
    launch_gate(s);
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_later, (void *)(uintptr_t)2000000), 0);
    memset(src, 0x5a, N);
    RT_OK(rill_memcpy_async(x, src, N, s));
    int returned_first = !atomic_load(&gate_open);
    memset(src, 0xa5, N); /* reused at once */
    atomic_store(&gate_open, 1);
    RT_OK(rill_memcpy_async(out, x, N, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(pthread_join(opener, NULL), 0);
    if (!returned_first)
        fail_msg("rill_memcpy_async of %d bytes of pageable memory returned only once the GPU "
                 "reached it",
                 N);
    for (size_t i = 0; i < N; i++)
        if (out[i] != 0x5a)
            fail_msg("byte %zu: %#x, 0x5a expected (the source when the call was made)", i, out[i]);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
    free(src);
    free(out);
}

static _Atomic int host_ran;

static void note_run(void *arg) {
    (void)arg;
    atomic_store(&host_ran, 1);
}

/* A copy into pageable memory that the device's pump issues (behind a wait
 * for a CPU stream) does not hold the pump while the GPU gets there: a
 * host function of another stream, which the pump hands to a runner once
 * the kernel before it is reported, runs meanwhile. */
static void test_copy_to_pageable_memory_leaves_the_pump_free(void **state) {
    (void)state;
    enum { N = 8192 };
    unsigned char *out = calloc(1, N), *src = malloc(N);
    assert_non_null(out);
    assert_non_null(src);
    memset(src, 0x3c, N);
    rill_device *cpu;
    rill_stream *c, *a = new_stream(), *b = new_stream();
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    RT_OK(rill_stream_create(cpu, 0, &c));
    void *x;
    RT_OK(rill_malloc_async(N, a, &x));
    RT_OK(rill_memcpy_async(x, src, N, a));
    RT_OK(rill_stream_synchronize(a));
    static rt_gate held;
    rt_gate_reset(&held);
    RT_OK(rill_launch_host_func(c, rt_gate_fn, &held));
    launch_gate(a);
    RT_OK(rill_stream_wait_stream(a, c));
    RT_OK(rill_memcpy_async(out, x, N, a)); /* held behind the wait */
    rt_gate_open(&held);
    RT_OK(rill_stream_synchronize(c));
    rt_sleep_us(100000); /* the pump issues the copy */
    atomic_store(&host_ran, 0);
    rill_kernel *k;
    rill_kernel_desc desc = {"interop_nop", NULL, "// stand-in", "interop_nop"};
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, NULL, 0, NULL, 0};
    RT_OK(rill_kernel_create(&desc, &k));
    RT_OK(rill_launch_kernel(b, k, &l));
    RT_OK(rill_launch_host_func(b, note_run, NULL));
    uint64_t end = rt_now_ns() + 3000000000ull;
    while (!atomic_load(&host_ran) && rt_now_ns() < end)
        rt_sleep_us(1000);
    int ran = atomic_load(&host_ran);
    atomic_store(&gate_open, 1);
    RT_OK(rill_stream_synchronize(a));
    RT_OK(rill_stream_synchronize(b));
    if (!ran)
        fail_msg("another stream's host function did not run in 3 s while a copy to pageable "
                 "memory waited for the GPU");
    for (size_t i = 0; i < N; i++)
        if (out[i] != 0x3c)
            fail_msg("byte %zu: %#x, 0x3c expected", i, out[i]);
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_free_async(x, a));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
    RT_OK(rill_stream_destroy(c));
    RT_OK(rill_shutdown());
    free(out);
    free(src);
}

__attribute__((visibility("default"))) void interop_nop_host(const rill_block_ctx *ctx,
                                                             const void *args);
void interop_nop_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + seed + (i >> 12));
}

static void check_filled(const unsigned char *p, size_t n, unsigned seed, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + seed + (i >> 12)))
            fail_msg("%s: byte %zu of %zu is %#x, %#x expected", what, i, n, p[i],
                     (unsigned char)(i * 7 + seed + (i >> 12)));
}

/* A copy of 3 MiB each way between pageable memory and the GPU goes
 * through the staging buffers in parts of 256 KiB, at most 16 buffers are
 * made, and a second round makes none. */
static void test_large_copies_go_through_several_buffers(void **state) {
    (void)state;
    const size_t n = ((size_t)3 << 20) + 100;
    unsigned char *src = malloc(n), *out = malloc(n);
    assert_non_null(src);
    assert_non_null(out);
    rill_stream *s = new_stream();
    void *x;
    RT_OK(rill_malloc_async(n, s, &x));
    RT_OK(rill_stream_synchronize(s));
    uint64_t made = 0;
    for (unsigned round = 0; round < 2; round++) {
        fill(src, n, round);
        memset(out, 0, n);
        counters.reset();
        RT_OK(rill_memcpy_async(x, src, n, s));
        RT_OK(rill_memcpy_async(out, x, n, s));
        RT_OK(rill_stream_synchronize(s));
        check_filled(out, n, round, "round trip");
        uint64_t parts = counters.calls("cuMemcpyAsync");
        printf("round %u: %llu cuMemcpyAsync, %llu cuMemHostAlloc\n", round,
               (unsigned long long)parts, (unsigned long long)counters.calls("cuMemHostAlloc"));
        assert_true(parts >= 2 * (n / (256 << 10) + 1));
        made += counters.calls("cuMemHostAlloc");
        if (round == 1)
            assert_int_equal(counters.calls("cuMemHostAlloc"), 0);
    }
    assert_true(made >= 1 && made <= 16);
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
    free(src);
    free(out);
}

/* Many small copies in flight share the staging buffers: at most 16 are
 * made, what does not fit waits its turn, every copy lands, and the next
 * round reuses them. */
static void test_staging_buffers_are_bounded_and_reused(void **state) {
    (void)state;
    enum { COPIES = 300, BYTES = 16 << 10 };
    unsigned char *src = malloc((size_t)COPIES * BYTES), *out = malloc((size_t)COPIES * BYTES);
    assert_non_null(src);
    assert_non_null(out);
    rill_stream *s = new_stream();
    unsigned char *x;
    RT_OK(rill_malloc_async((size_t)COPIES * BYTES, s, (void **)&x));
    RT_OK(rill_stream_synchronize(s));
    for (unsigned round = 0; round < 2; round++) {
        fill(src, (size_t)COPIES * BYTES, round + 3);
        counters.reset();
        launch_gate(s);
        for (size_t i = 0; i < COPIES; i++)
            RT_OK(rill_memcpy_async(x + i * BYTES, src + i * BYTES, BYTES, s));
        uint64_t made = counters.calls("cuMemHostAlloc");
        atomic_store(&gate_open, 1);
        RT_OK(rill_memcpy_async(out, x, (size_t)COPIES * BYTES, s));
        RT_OK(rill_stream_synchronize(s));
        check_filled(out, (size_t)COPIES * BYTES, round + 3, "small copies");
        printf("round %u: %llu staging buffers made\n", round, (unsigned long long)made);
        assert_true(made <= 16);
        if (round == 0)
            assert_true(made >= 1);
        else
            assert_int_equal(counters.calls("cuMemHostAlloc"), 0);
    }
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
    free(src);
    free(out);
}

/* Without page-locked memory (cuMemHostAlloc refused), copies of every
 * size and direction are still right, and a small one to the GPU still
 * leaves the caller's memory free on return. */
static void test_copies_without_page_locked_memory(void **state) {
    (void)state;
    const size_t sizes[] = {100, 64 << 10, 200 << 10, ((size_t)1 << 20) + 3};
    const size_t most = ((size_t)1 << 20) + 3;
    unsigned char *src = malloc(most), *out = malloc(most);
    assert_non_null(src);
    assert_non_null(out);
    rill_stream *s = new_stream();
    void *x;
    RT_OK(rill_malloc_async(most, s, &x));
    RT_OK(rill_stream_synchronize(s));
    counters.reset();
    drv.refuse_host_allocs(1 << 20);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        fill(src, sizes[i], (unsigned)i);
        memset(out, 0, sizes[i]);
        RT_OK(rill_memcpy_async(x, src, sizes[i], s));
        if (sizes[i] <= (64 << 10))
            memset(src, 0, sizes[i]); /* read when the call was made */
        RT_OK(rill_memcpy_async(out, x, sizes[i], s));
        RT_OK(rill_stream_synchronize(s));
        check_filled(out, sizes[i], (unsigned)i, "without page-locked memory");
    }
    drv.refuse_host_allocs(0);
    assert_true(counters.calls("cuMemHostAlloc") >= 1); /* asked, and refused */
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_shutdown());
    free(src);
    free(out);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_native_is_a_cuevent_other_code_waits_for),
        cmocka_unit_test(test_event_native_of_a_completed_record_is_complete),
        cmocka_unit_test(test_event_native_needs_a_record_on_a_cuda_stream),
        cmocka_unit_test(test_event_native_record_behind_a_host_function),
        cmocka_unit_test(test_event_native_lives_as_long_as_the_event),
        cmocka_unit_test(test_small_copy_to_the_gpu_returns_at_once),
        cmocka_unit_test(test_copy_to_pageable_memory_leaves_the_pump_free),
        cmocka_unit_test(test_large_copies_go_through_several_buffers),
        cmocka_unit_test(test_staging_buffers_are_bounded_and_reused),
        cmocka_unit_test(test_copies_without_page_locked_memory),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests_name("cuda_interop", tests, load_fake, NULL);
}
