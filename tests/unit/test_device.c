/* SPDX-License-Identifier: MIT */
/* Devices: enumeration, the CPU device and its info, the per-thread current device, and
 * rill_device_synchronize. */
#include "fixture.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static rill_device *cpu_device(void) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    assert_non_null(dev);
    return dev;
}

/* The number of compute units the CPU device must have: RILL_CPU_WORKERS when set, else "the
 * number of processors the process may run on". */
static int expected_cpu_workers(void) {
    const char *env = getenv("RILL_CPU_WORKERS");
    if (env != NULL && env[0] != '\0')
        return atoi(env);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    return CPU_COUNT(&set);
}

/* RILL_DEVICE_CPU: "always present": at least one device, and the CPU device is found by kind. */
static void test_device_count_includes_cpu(void **state) {
    (void)state;
    int count = 0;
    RT_OK(rill_device_count(&count));
    assert_true(count >= 1);
    rill_device *dev = cpu_device();
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    assert_int_equal(info.kind, RILL_DEVICE_CPU);
}

/* "Ordinals: CUDA devices first, then the CPU device": every ordinal names a device whose
 * info.ordinal is that ordinal, and the CPU device comes last. */
static void test_device_ordinals_match_info(void **state) {
    (void)state;
    int count = 0;
    RT_OK(rill_device_count(&count));
    for (int i = 0; i < count; i++) {
        rill_device *dev = NULL;
        RT_OK(rill_device_get(i, &dev));
        assert_non_null(dev);
        rill_device_info info;
        RT_OK(rill_device_get_info(dev, &info));
        assert_int_equal(info.ordinal, i);
        if (i < count - 1)
            assert_int_equal(info.kind, RILL_DEVICE_CUDA);
        else
            assert_int_equal(info.kind, RILL_DEVICE_CPU);
    }
    rill_device *last = NULL;
    RT_OK(rill_device_get(count - 1, &last));
    assert_ptr_equal(last, cpu_device());
}

/* compute_units: "CPU: worker threads" (RILL_CPU_WORKERS=N sets them); memory_bytes: "total
 * device memory"; "greatest_priority <= least_priority; default 0" (CPU: -5 and 0). */
static void test_device_cpu_info_fields(void **state) {
    (void)state;
    rill_device_info info;
    memset(&info, 0xff, sizeof info);
    RT_OK(rill_device_get_info(cpu_device(), &info));
    assert_int_equal(info.kind, RILL_DEVICE_CPU);
    assert_true(info.name[0] != '\0');
    assert_non_null(memchr(info.name, '\0', sizeof info.name));
    assert_int_equal(info.compute_units, expected_cpu_workers());
    assert_true(info.memory_bytes > 0);
    assert_true(info.greatest_priority <= info.least_priority);
    assert_int_equal(info.least_priority, 0);
    assert_int_equal(info.greatest_priority, -5);
}

/* RILL_ERROR_NO_DEVICE: "no such device": an ordinal or index past the end (or negative) fails
 * and leaves the out-parameter NULL. */
static void test_device_bad_ordinal_is_no_device(void **state) {
    (void)state;
    int count = 0;
    RT_OK(rill_device_count(&count));
    rill_device *dev = (rill_device *)&dev;
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_device_get(count, &dev));
    assert_null(dev);
    dev = (rill_device *)&dev;
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_device_get(-1, &dev));
    assert_null(dev);
    dev = (rill_device *)&dev;
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_device_get_by_kind(RILL_DEVICE_CPU, 1, &dev));
    assert_null(dev);

    int num_cuda = 0;
    for (int i = 0; i < count; i++) {
        rill_device *d = NULL;
        rill_device_info info;
        RT_OK(rill_device_get(i, &d));
        RT_OK(rill_device_get_info(d, &info));
        num_cuda += info.kind == RILL_DEVICE_CUDA;
    }
    dev = (rill_device *)&dev;
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_device_get_by_kind(RILL_DEVICE_CUDA, num_cuda, &dev));
    assert_null(dev);
}

/* RILL_ERROR_INVALID_ARGUMENT: "NULL where a value is needed". */
static void test_device_null_out_is_invalid_argument(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_device_count(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_device_get(0, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_device_get_by_kind(RILL_DEVICE_CPU, 0, NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_device_get_info(cpu_device(), NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_get_device(NULL));
}

/* "A NULL rill_device* means the calling thread's current device". */
static void test_device_null_means_current_device(void **state) {
    (void)state;
    rill_device *current = NULL;
    RT_OK(rill_get_device(&current));
    assert_non_null(current);
    rill_device_info a, b;
    RT_OK(rill_device_get_info(NULL, &a));
    RT_OK(rill_device_get_info(current, &b));
    assert_int_equal(a.ordinal, b.ordinal);
    assert_int_equal(a.kind, b.kind);
    assert_string_equal(a.name, b.name);
}

typedef struct device_probe {
    rill_device *seen;
    rill_status status;
} device_probe;

static void *probe_current_device(void *arg) {
    device_probe *probe = arg;
    probe->status = rill_get_device(&probe->seen);
    return NULL;
}

/* "RILL_DEVICE=cpu|cuda:N in the environment chooses the initial current device (default:
 * ordinal 0)"; rill_set_device is "for the calling thread". */
static void test_device_set_and_get_current(void **state) {
    (void)state;
    rill_device *first = NULL;
    RT_OK(rill_device_get(0, &first));
    rill_device *initial = NULL;
    RT_OK(rill_get_device(&initial));
    const char *env = getenv("RILL_DEVICE");
    if (env == NULL || env[0] == '\0')
        assert_ptr_equal(initial, first);

    rill_device *cpu = cpu_device();
    RT_OK(rill_set_device(cpu));
    rill_device *now = NULL;
    RT_OK(rill_get_device(&now));
    assert_ptr_equal(now, cpu);

    /* A new thread starts from the initial device, not from this thread's choice. */
    device_probe probe = {NULL, RILL_ERROR_INTERNAL};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, probe_current_device, &probe), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(probe.status, RILL_OK);
    assert_ptr_equal(probe.seen, initial);

    RT_OK(rill_set_device(initial));
    RT_OK(rill_get_device(&now));
    assert_ptr_equal(now, initial);
}

/* ---- device_synchronize ---- */

typedef struct slow_work {
    unsigned spin_us;
    atomic_int *done;
} slow_work;

static void slow_host_fn(void *user_data) {
    slow_work *work = user_data;
    rt_spin_us(work->spin_us);
    atomic_fetch_add(work->done, 1);
}

static void slow_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    slow_work work;
    memcpy(&work, args, sizeof work);
    rt_spin_us(work.spin_us);
    atomic_fetch_add(work.done, 1);
}

/* rill_device_synchronize: "waits for every stream of dev" (created streams, the default stream
 * and tagged streams), host functions and kernels alike. */
static void test_device_synchronize_waits_for_all_streams(void **state) {
    (void)state;
    enum { NUM_STREAMS = 6, PER_STREAM = 3 };
    static atomic_int done;
    atomic_store(&done, 0);
    static slow_work work;
    work.spin_us = 5000;
    work.done = &done;

    rill_device *dev = cpu_device();
    rill_kernel *kernel = NULL;
    rill_kernel_desc desc = {.name = "slow_kernel", .cpu = slow_kernel};
    RT_OK(rill_kernel_create(&desc, &kernel));

    rill_stream *streams[NUM_STREAMS];
    for (int i = 0; i < NUM_STREAMS - 2; i++)
        RT_OK(rill_stream_create(dev, 0, &streams[i]));
    streams[NUM_STREAMS - 2] = rill_default_stream(dev);
    RT_OK(rill_stream_get_tagged(dev, "device-sync-tag", 0, &streams[NUM_STREAMS - 1]));
    assert_non_null(streams[NUM_STREAMS - 2]);

    rill_launch launch = {
        .grid = {2, 1, 1}, .block = {1, 1, 1}, .args = &work, .args_size = sizeof work};
    for (int k = 0; k < PER_STREAM; k++) {
        for (int i = 0; i < NUM_STREAMS; i++) {
            if (k % 2 == 0)
                RT_OK(rill_launch_host_func(streams[i], slow_host_fn, &work));
            else
                RT_OK(rill_launch_kernel(streams[i], kernel, &launch));
        }
    }
    int expected = NUM_STREAMS * (2 + 2); /* two host functions and one 2-block kernel each */
    RT_OK(rill_device_synchronize(dev));
    assert_int_equal(atomic_load(&done), expected);
    for (int i = 0; i < NUM_STREAMS; i++)
        RT_OK(rill_stream_query(streams[i]));

    /* NULL means the current device, the CPU device here. */
    RT_OK(rill_set_device(dev));
    for (int i = 0; i < NUM_STREAMS; i++)
        RT_OK(rill_launch_host_func(streams[i], slow_host_fn, &work));
    RT_OK(rill_device_synchronize(NULL));
    assert_int_equal(atomic_load(&done), expected + NUM_STREAMS);

    /* Work of a stream destroyed with work pending is still the device's work. */
    for (int i = 0; i < NUM_STREAMS - 2; i++)
        RT_OK(rill_launch_host_func(streams[i], slow_host_fn, &work));
    for (int i = 0; i < NUM_STREAMS - 2; i++)
        RT_OK(rill_stream_destroy(streams[i]));
    RT_OK(rill_device_synchronize(dev));
    assert_int_equal(atomic_load(&done), expected + NUM_STREAMS + (NUM_STREAMS - 2));
    RT_OK(rill_kernel_destroy(kernel));
}

static void failing_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    rill_kernel_fail(ctx, "failed on purpose");
}

/* rill_device_synchronize: "waits for every stream of dev", and a stream whose work failed reports
 * RILL_ERROR_KERNEL_FAILED there: with more failed streams than the device looks at in one batch,
 * the call still returns, with the failure, after one pass over the streams. */
static void test_device_synchronize_with_many_failed_streams_returns_kernel_failed(void **state) {
    (void)state;
    enum { NUM_STREAMS = 150 };
    rill_device *dev = cpu_device();
    rill_kernel *kernel = NULL;
    rill_kernel_desc desc = {.name = "failing_kernel", .cpu = failing_kernel};
    RT_OK(rill_kernel_create(&desc, &kernel));
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    static rill_stream *streams[NUM_STREAMS];
    for (int i = 0; i < NUM_STREAMS; i++) {
        RT_OK(rill_stream_create(dev, 0, &streams[i]));
        RT_OK(rill_launch_kernel(streams[i], kernel, &launch));
    }
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_device_synchronize(dev));
    assert_non_null(strstr(rill_last_error(), "failed on purpose"));
    for (int i = 0; i < NUM_STREAMS; i++)
        RT_OK(rill_stream_clear_error(streams[i]));
    RT_OK(rill_device_synchronize(dev));
    for (int i = 0; i < NUM_STREAMS; i++)
        RT_OK(rill_stream_destroy(streams[i]));
    RT_OK(rill_kernel_destroy(kernel));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_count_includes_cpu),
        cmocka_unit_test(test_device_ordinals_match_info),
        cmocka_unit_test(test_device_cpu_info_fields),
        cmocka_unit_test(test_device_bad_ordinal_is_no_device),
        cmocka_unit_test(test_device_null_out_is_invalid_argument),
        cmocka_unit_test(test_device_null_means_current_device),
        cmocka_unit_test(test_device_set_and_get_current),
        cmocka_unit_test(test_device_synchronize_waits_for_all_streams),
        cmocka_unit_test(test_device_synchronize_with_many_failed_streams_returns_kernel_failed),
    };
    return RT_RUN(tests);
}
