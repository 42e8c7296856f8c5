/* SPDX-License-Identifier: MIT */
/* What the device under test (contract.h) shares with code built on its
 * own API, and its copies with pageable host memory: rill_event_native is
 * a CUevent on a CUDA device, which a stream of the driver's own waits for
 * (through the driver that rill loads: RILL_CUDA_DRIVER, else
 * libcuda.so.1), and RILL_ERROR_NOT_SUPPORTED elsewhere; copies between
 * pageable host memory and the device keep stream order both ways, with
 * host functions between them, at sizes that a CUDA device stages whole,
 * in parts, or through several buffers. */
#include "contract.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- the driver */

/* The few driver entry points the test calls, by the driver's ABI: a
 * CUresult is an int (0: CUDA_SUCCESS), handles are pointers, a device
 * pointer is 64 bits. */
static struct {
    int (*retain)(void **ctx, int dev);
    int (*release)(int dev);
    int (*set_current)(void *ctx);
    int (*stream_create)(void **stream, unsigned flags);
    int (*stream_destroy)(void *stream);
    int (*stream_synchronize)(void *stream);
    int (*wait_event)(void *stream, void *event, unsigned flags);
    int (*event_query)(void *event);
    int (*memcpy_async)(uint64_t dst, uint64_t src, size_t bytes, void *stream);
} drv;

static void *entry(int (*get)(const char *, void **, int, unsigned long long, int *),
                   const char *name) {
    void *p = NULL;
    if (get(name, &p, 12000, 0, NULL) != 0 || p == NULL)
        fail_msg("the CUDA driver has no %s", name);
    return p;
}

/* The driver rill loaded, with the GPU's primary context current on the
 * calling thread (rill's first CUDA device is the driver's device 0). */
static void driver_enter(void) {
    const char *path = getenv("RILL_CUDA_DRIVER");
    void *so = dlopen(path != NULL ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (so == NULL)
        fail_msg("rill lists a CUDA device, but %s does not load: %s",
                 path != NULL ? path : "libcuda.so.1", dlerror());
    int (*get)(const char *, void **, int, unsigned long long, int *);
    *(void **)&get = dlsym(so, "cuGetProcAddress_v2");
    if (get == NULL)
        fail_msg("the CUDA driver has no cuGetProcAddress_v2");
    *(void **)&drv.retain = entry(get, "cuDevicePrimaryCtxRetain");
    *(void **)&drv.release = entry(get, "cuDevicePrimaryCtxRelease");
    *(void **)&drv.set_current = entry(get, "cuCtxSetCurrent");
    *(void **)&drv.stream_create = entry(get, "cuStreamCreate");
    *(void **)&drv.stream_destroy = entry(get, "cuStreamDestroy");
    *(void **)&drv.stream_synchronize = entry(get, "cuStreamSynchronize");
    *(void **)&drv.wait_event = entry(get, "cuStreamWaitEvent");
    *(void **)&drv.event_query = entry(get, "cuEventQuery");
    *(void **)&drv.memcpy_async = entry(get, "cuMemcpyAsync");
    void *ctx = NULL;
    assert_int_equal(drv.retain(&ctx, 0), 0);
    assert_int_equal(drv.set_current(ctx), 0);
}

static void driver_leave(void) {
    assert_int_equal(drv.set_current(NULL), 0);
    assert_int_equal(drv.release(0), 0);
}

/* ---------------------------------------------------- rill_event_native */

/* "The event's CUevent ...: cuStreamWaitEvent on it makes their stream
 * wait for the event's latest record, cuEventQuery and cuEventSynchronize
 * see it complete"; "RILL_ERROR_NOT_SUPPORTED for an event bound to a
 * device whose events have no native handle". A kernel adds 1 to x after
 * 50 ms; the driver's own stream waits for the event and then copies x:
 * it sees the kernel's 1, and after a second record its 2. */
static void test_event_native_orders_a_stream_of_the_driver(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    rill_event *e;
    uint32_t *x, *out;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_malloc_async(sizeof *x, s, (void **)&x));
    RT_OK(rill_memset_async(x, 0, sizeof *x, s));
    RT_OK(contract_spin(s, x, 50000000));
    RT_OK(rill_event_record(e, s));
    void *native = (void *)&native;
    rill_status st = rill_event_native(e, &native);
    if (contract_kind(dev) != RILL_DEVICE_CUDA) {
        assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
        assert_null(native);
        assert_non_null(strstr(rill_last_error(), "no native handle"));
    } else {
        RT_OK(st);
        assert_non_null(native);
        RT_OK(rill_set_device(dev));
        RT_OK(rill_malloc_host(sizeof *out, (void **)&out));
        driver_enter();
        void *theirs = NULL;
        assert_int_equal(drv.stream_create(&theirs, 1 /* CU_STREAM_NON_BLOCKING */), 0);
        for (uint32_t round = 1; round <= 2; round++) {
            if (round == 2) {
                RT_OK(contract_spin(s, x, 50000000));
                RT_OK(rill_event_record(e, s)); /* records the CUevent too */
            }
            *out = 0;
            assert_int_equal(drv.wait_event(theirs, native, 0), 0);
            assert_int_equal(drv.memcpy_async((uint64_t)(uintptr_t)out, (uint64_t)(uintptr_t)x,
                                              sizeof *x, theirs),
                             0);
            assert_int_equal(drv.stream_synchronize(theirs), 0);
            assert_int_equal(*out, round);
            RT_OK(rill_stream_synchronize(s));
            assert_int_equal(drv.event_query(native), 0);
        }
        assert_int_equal(drv.stream_destroy(theirs), 0);
        driver_leave();
        RT_OK(rill_free_host(out));
    }
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

/* ------------------------------------------- copies with pageable memory */

typedef struct fill_args {
    uint32_t *p;
    size_t n;
    uint32_t seed;
    _Atomic int *bad; /* check: set when p differs from the fill */
} fill_args;

static uint32_t word_of(size_t i, uint32_t seed) {
    return (uint32_t)(i * 2654435761u) ^ seed;
}

static void fill_fn(void *arg) {
    fill_args *a = arg;
    for (size_t i = 0; i < a->n; i++)
        a->p[i] = word_of(i, a->seed);
}

static void check_fn(void *arg) {
    fill_args *a = arg;
    for (size_t i = 0; i < a->n; i++)
        if (a->p[i] != word_of(i, a->seed) + 1) {
            atomic_store(a->bad, 1);
            return;
        }
}

/* "rill_memcpy_async ... as if submitted" in stream order, with pageable
 * host memory on either side: a host function writes the source before
 * the copy to the device, a kernel adds 1, the copy back to host memory
 * is complete before the next host function reads it and before the next
 * copy sends it to the device again; without host functions as well. */
static void test_pageable_copies_keep_stream_order(void **state) {
    (void)state;
    static const size_t sizes[] = {1000, 64 << 10, 200 << 10, ((size_t)3 << 20) + 8};
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int with_host = 0; with_host <= 1; with_host++) {
            size_t bytes = sizes[k], n = bytes / sizeof(uint32_t);
            uint32_t seed = (uint32_t)(k * 2 + (size_t)with_host + 1);
            uint32_t *src = calloc(n, sizeof *src), *mid = calloc(n, sizeof *mid);
            uint32_t *out = calloc(n, sizeof *out);
            assert_non_null(src);
            assert_non_null(mid);
            assert_non_null(out);
            _Atomic int bad = 0;
            fill_args write = {src, n, seed, &bad}, read = {mid, n, seed, &bad};
            if (!with_host)
                fill_fn(&write);
            uint32_t *x, *y;
            RT_OK(rill_malloc_async(bytes, s, (void **)&x));
            RT_OK(rill_malloc_async(bytes, s, (void **)&y));
            if (with_host)
                RT_OK(rill_launch_host_func(s, fill_fn, &write));
            RT_OK(rill_memcpy_async(x, src, bytes, s));
            RT_OK(contract_add(s, x, 1, n));
            RT_OK(rill_memcpy_async(mid, x, bytes, s));
            if (with_host)
                RT_OK(rill_launch_host_func(s, check_fn, &read));
            RT_OK(rill_memcpy_async(y, mid, bytes, s));
            RT_OK(rill_memcpy_async(out, y, bytes, s));
            RT_OK(rill_free_async(x, s));
            RT_OK(rill_free_async(y, s));
            RT_OK(rill_stream_synchronize(s));
            if (atomic_load(&bad))
                fail_msg("%zu bytes: the host function after the copy to host memory saw "
                         "other bytes",
                         bytes);
            for (size_t i = 0; i < n; i++)
                if (out[i] != word_of(i, seed) + 1)
                    fail_msg("%zu bytes%s: word %zu is %#x, %#x expected", bytes,
                             with_host ? " (with host functions)" : "", i, out[i],
                             word_of(i, seed) + 1);
            free(src);
            free(mid);
            free(out);
        }
    }
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_native_orders_a_stream_of_the_driver),
        cmocka_unit_test(test_pageable_copies_keep_stream_order),
    };
    return CONTRACT_RUN(tests);
}
