/* SPDX-License-Identifier: MIT */
/* Stream priorities on a CPU device with a single worker (RILL_CPU_WORKERS=1, set in main()
 * before the library's first use): with the worker occupied, work of a higher-priority stream
 * queued after work of a lower-priority stream starts first once the worker frees up. */
#include "fixture.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SEC_NS          1000000000ull
#define WAIT_TIMEOUT_NS (10 * SEC_NS)

static void marker_fn(void *user_data) {
    atomic_store((_Atomic uint64_t *)user_data, rt_take_ticket());
}

typedef struct marker_args {
    _Atomic uint64_t *slot;
} marker_args;

/* Every block stores a ticket; the slot keeps the first (smallest) one, the command's start. */
static void marker_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    marker_args a;
    memcpy(&a, args, sizeof a);
    uint64_t t = rt_take_ticket();
    uint64_t expected = 0;
    while (!atomic_compare_exchange_weak(a.slot, &expected, t)) {
        if (expected != 0 && expected < t)
            break;
    }
}

static bool wait_int(atomic_int *v) {
    uint64_t deadline = rt_now_ns() + WAIT_TIMEOUT_NS;
    while (atomic_load(v) == 0) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* The environment this file sets up: one compute unit and the CPU priority range [-5, 0]. */
static void test_priority_device_has_one_worker(void **state) {
    (void)state;
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    assert_int_equal(info.compute_units, 1);
    assert_int_equal(info.greatest_priority, -5);
    assert_int_equal(info.least_priority, 0);
}

enum { PER_STREAM = 3 };

typedef enum work_kind { HOST_WORK, KERNEL_WORK } work_kind;

static rill_status submit_marker(rill_stream *s, work_kind kind, rill_kernel *k,
                                 _Atomic uint64_t *slot, uint32_t blocks) {
    if (kind == HOST_WORK)
        return rill_launch_host_func(s, marker_fn, (void *)slot);
    marker_args a = {slot};
    rill_launch launch = {
        .grid = {blocks, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    return rill_launch_kernel(s, k, &launch);
}

/* Occupies the single worker, queues PER_STREAM commands on a least-priority stream and then on
 * a greatest-priority stream, releases the worker and checks that every high-priority command
 * started before every low-priority one. */
static void run_priority_case(work_kind kind) {
    static rt_gate g;
    static _Atomic uint64_t low[PER_STREAM], high[PER_STREAM];
    memset(&g, 0, sizeof g);
    for (int i = 0; i < PER_STREAM; i++) {
        atomic_store(&low[i], 0);
        atomic_store(&high[i], 0);
    }
    rill_device_info info;
    RT_OK(rill_device_get_info(NULL, &info));
    rill_kernel_desc desc = {.name = "marker_kernel", .cpu = marker_kernel};
    rill_kernel *k = NULL;
    RT_OK(rill_kernel_create(&desc, &k));
    rill_stream *blocker = NULL, *lo = NULL, *hi = NULL;
    RT_OK(rill_stream_create(NULL, 0, &blocker));
    RT_OK(rill_stream_create(NULL, info.least_priority, &lo));
    RT_OK(rill_stream_create(NULL, info.greatest_priority, &hi));

    RT_OK(rill_launch_host_func(blocker, rt_gate_fn, &g));
    bool occupied = wait_int(&g.entered);
    rill_status submitted = RILL_OK;
    for (int i = 0; i < PER_STREAM && submitted == RILL_OK; i++)
        submitted = submit_marker(lo, kind, k, &low[i], 2);
    for (int i = 0; i < PER_STREAM && submitted == RILL_OK; i++)
        submitted = submit_marker(hi, kind, k, &high[i], 1);
    atomic_store(&g.open, 1);
    RT_OK(rill_stream_synchronize(blocker));
    RT_OK(rill_stream_synchronize(lo));
    RT_OK(rill_stream_synchronize(hi));

    assert_true(occupied);
    assert_int_equal(submitted, RILL_OK);
    assert_false(atomic_load(&g.timed_out));
    uint64_t last_high = 0, first_low = UINT64_MAX;
    for (int i = 0; i < PER_STREAM; i++) {
        assert_true(atomic_load(&high[i]) != 0);
        assert_true(atomic_load(&low[i]) != 0);
        if (atomic_load(&high[i]) > last_high)
            last_high = atomic_load(&high[i]);
        if (atomic_load(&low[i]) < first_low)
            first_low = atomic_load(&low[i]);
    }
    if (last_high > first_low)
        fail_msg("a low-priority command started (ticket %llu) before the last high-priority "
                 "one (ticket %llu)",
                 (unsigned long long)first_low, (unsigned long long)last_high);

    RT_OK(rill_stream_destroy(blocker));
    RT_OK(rill_stream_destroy(lo));
    RT_OK(rill_stream_destroy(hi));
    RT_OK(rill_kernel_destroy(k));
}

/* "When several streams have work ready, the device starts work of the stream with the higher
 * priority (the lower number) first": host functions. */
static void test_priority_high_stream_host_work_starts_first(void **state) {
    (void)state;
    run_priority_case(HOST_WORK);
}

/* "When several streams have work ready, the device starts work of the stream with the higher
 * priority (the lower number) first": kernels. */
static void test_priority_high_stream_kernels_start_first(void **state) {
    (void)state;
    run_priority_case(KERNEL_WORK);
}

int main(int argc, char **argv) {
    /* Workers are read when the library initialises itself: set them before any rill call. */
    setenv("RILL_CPU_WORKERS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_device_has_one_worker),
        cmocka_unit_test(test_priority_high_stream_host_work_starts_first),
        cmocka_unit_test(test_priority_high_stream_kernels_start_first),
    };
    return RT_RUN(tests);
}
