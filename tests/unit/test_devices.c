/* SPDX-License-Identifier: MIT */
/* Several CPU devices (RILL_CPU_DEVICES=2, set by ctest) and the rules that
 * cross devices: seed 003's events ("only streams on the same device may
 * record the event; streams on any device can wait on the event"), timing
 * within one device, per-device synchronize, current device and streams per
 * thread, tagged streams per device, memory and copies across devices,
 * capture and graphs on one device. */
#include "fixture.h"

#include "core/runtime.h"
#include "mem/registry.h"
#include "platform/shm.h"
#include "platform/thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static rill_device *device(int i) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get(i, &dev));
    return dev;
}

static rill_stream *new_stream(int dev) {
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(device(dev), 0, &s));
    return s;
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A host function that waits until *flag is set (the test holds a stream
 * back with it). */
static void wait_flag(void *p) {
    atomic_int *flag = p;
    while (!atomic_load(flag))
        sleep_ms(1);
}

static void sleep_then_set(void *p) {
    sleep_ms(30);
    atomic_store((atomic_int *)p, 1);
}

typedef struct check_args {
    atomic_int *flag;
    atomic_int *seen;
} check_args;

static void read_flag(void *p) {
    check_args *a = p;
    atomic_store(a->seen, atomic_load(a->flag));
}

/* RILL_CPU_DEVICES=2 splits the processors: two CPU devices, each with its share, named by its
 * processors. */
static void test_two_cpu_devices_split_the_processors(void **state) {
    (void)state;
    int count = 0;
    RT_OK(rill_device_count(&count));
    assert_int_equal(count, 2);
    rill_device_info a, b;
    RT_OK(rill_device_get_info(device(0), &a));
    RT_OK(rill_device_get_info(device(1), &b));
    assert_int_equal(a.kind, RILL_DEVICE_CPU);
    assert_int_equal(b.kind, RILL_DEVICE_CPU);
    assert_int_equal(a.ordinal, 0);
    assert_int_equal(b.ordinal, 1);
    assert_non_null(strstr(a.name, "processors"));
    assert_string_not_equal(a.name, b.name);
    assert_true(a.compute_units >= 1 && b.compute_units >= 1);
    rill_device *by_kind = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 1, &by_kind));
    assert_ptr_equal(by_kind, device(1));
}

/* "only streams on the same device may record the event": the first record binds it, a record on
 * the other device's stream is RILL_ERROR_DEVICE_MISMATCH and leaves the event as it was. */
static void test_event_binds_to_the_device_of_its_first_record(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    rill_event *e = NULL;
    RT_OK(rill_event_create(0, &e));
    rill_device *bound = device(1);
    RT_OK(rill_event_get_device(e, &bound));
    assert_null(bound); /* "NULL when it is bound to none yet" */
    RT_OK(rill_event_record(e, s0));
    RT_OK(rill_event_get_device(e, &bound));
    assert_ptr_equal(bound, device(0));
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_event_record(e, s1));
    assert_non_null(strstr(rill_last_error(), "device 0"));
    RT_OK(rill_event_record(e, s0)); /* its own device still may */
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

/* Work on `then`, after a wait for `first` (through an event, or
 * rill_stream_wait_stream), runs after first's work: sees its flag set. */
static void expect_ordered(rill_stream *first, rill_stream *then, bool through_event) {
    atomic_int flag = 0, seen = -1;
    check_args args = {&flag, &seen};
    rill_event *e = NULL;
    RT_OK(rill_launch_host_func(first, sleep_then_set, &flag));
    if (through_event) {
        RT_OK(rill_event_create(0, &e));
        RT_OK(rill_event_record(e, first));
        RT_OK(rill_stream_wait_event(then, e));
    } else {
        RT_OK(rill_stream_wait_stream(then, first));
    }
    RT_OK(rill_launch_host_func(then, read_flag, &args));
    RT_OK(rill_stream_synchronize(then));
    assert_int_equal(atomic_load(&seen), 1);
    if (e != NULL)
        RT_OK(rill_event_destroy(e));
}

/* "streams on any device can wait on the event": work on device 1 after the wait runs after the
 * recorded work of device 0. */
static void test_a_stream_of_another_device_waits_for_an_event(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    expect_ordered(s0, s1, true);
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

/* rill_stream_wait_stream across devices orders the same way. */
static void test_wait_stream_across_devices(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    expect_ordered(s1, s0, false);
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

/* Elapsed time compares two events of one device: across devices it is
 * RILL_ERROR_DEVICE_MISMATCH with a sentence; within each device it works. */
static void test_elapsed_time_needs_events_of_one_device(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    rill_event *a = NULL, *b = NULL, *c = NULL;
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &a));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &b));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &c));
    RT_OK(rill_event_record(a, s0));
    RT_OK(rill_event_record(b, s1));
    RT_OK(rill_event_record(c, s0));
    RT_OK(rill_event_synchronize(b));
    RT_OK(rill_event_synchronize(c));
    float ms = -1.0f;
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_event_elapsed_ms(a, b, &ms));
    assert_non_null(strstr(rill_last_error(), "one device"));
    RT_OK(rill_event_elapsed_ms(a, c, &ms));
    assert_true(ms >= 0.0f);
    RT_OK(rill_event_destroy(a));
    RT_OK(rill_event_destroy(b));
    RT_OK(rill_event_destroy(c));
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

/* rill_device_synchronize(dev) waits for dev's streams only: it returns while device 1 is held
 * back. */
static void test_device_synchronize_waits_for_its_own_device_only(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    atomic_int release = 0, flag = 0;
    RT_OK(rill_launch_host_func(s1, wait_flag, &release));
    RT_OK(rill_launch_host_func(s0, sleep_then_set, &flag));
    RT_OK(rill_device_synchronize(device(0)));
    assert_int_equal(atomic_load(&flag), 1);
    assert_int_equal(rill_stream_query(s1), RILL_NOT_READY);
    atomic_store(&release, 1);
    RT_OK(rill_device_synchronize(device(1)));
    assert_int_equal(rill_stream_query(s1), RILL_OK);
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

typedef struct thread_result {
    rill_device *current;
    rill_stream *stream0, *stream1;
} thread_result;

static void *other_thread(void *p) {
    thread_result *r = p;
    rill_get_device(&r->current);
    r->stream0 = rill_current_stream(NULL);
    RT_OK(rill_set_device(device(1)));
    r->stream1 = rill_current_stream(NULL);
    return NULL;
}

/* rill_set_device chooses the calling thread's current device, and the current stream is per
 * thread per device: NULL streams resolve on the current device. */
static void test_current_device_and_stream_are_per_thread(void **state) {
    (void)state;
    RT_OK(rill_set_device(device(1)));
    rill_stream *mine = new_stream(1);
    rill_set_current_stream(mine);
    assert_ptr_equal(rill_current_stream(NULL), mine);
    assert_ptr_equal(rill_current_stream(device(0)), rill_default_stream(device(0)));
    rill_device *got = NULL;
    RT_OK(rill_stream_get_device(rill_current_stream(NULL), &got));
    assert_ptr_equal(got, device(1));
    /* Another thread starts on the initial device with default streams. */
    thread_result r = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &r), 0);
    pthread_join(t, NULL);
    assert_ptr_equal(r.current, device(0));
    assert_ptr_equal(r.stream0, rill_default_stream(device(0)));
    assert_ptr_equal(r.stream1, rill_default_stream(device(1)));
    /* Memory from rill_malloc(NULL, ...) is the current device's. */
    void *p = NULL;
    RT_OK(rill_malloc(NULL, 4096, &p));
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_free_async(p, rill_default_stream(device(0))));
    RT_OK(rill_free_async(p, NULL));
    rill_set_current_stream(NULL);
    RT_OK(rill_set_device(device(0)));
    RT_OK(rill_stream_destroy(mine));
}

/* Tagged streams are per device: one tag names a stream on each device. */
static void test_tagged_streams_are_per_device(void **state) {
    (void)state;
    rill_stream *t0 = NULL, *t1 = NULL, *again = NULL;
    RT_OK(rill_stream_get_tagged(device(0), "comm", 0, &t0));
    RT_OK(rill_stream_get_tagged(device(1), "comm", 0, &t1));
    RT_OK(rill_stream_get_tagged(device(1), "comm", 0, &again));
    assert_ptr_not_equal(t0, t1);
    assert_ptr_equal(t1, again);
    rill_device *d = NULL;
    RT_OK(rill_stream_get_device(t1, &d));
    assert_ptr_equal(d, device(1));
}

typedef struct fill_args {
    float *p;
    float value;
    int n;
} fill_args;

static void fill_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    fill_args a;
    memcpy(&a, args, sizeof a);
    sleep_ms(20); /* a copy that did not wait would see the old values */
    for (int i = 0; i < a.n; i++)
        a.p[i] = a.value;
}

/* Launches one block of fill_kernel on s writing value into a[0, n), with
 * that write declared. The kernel is destroyed at once: it lives until the
 * launch has run. */
static void launch_fill(rill_stream *s, float *a, float value, size_t n) {
    rill_kernel *k = NULL;
    const rill_kernel_desc desc = {.name = "fill", .cpu = fill_kernel};
    RT_OK(rill_kernel_create(&desc, &k));
    fill_args fa = {a, value, (int)n};
    rill_access acc = {a, n * sizeof(float), RILL_WRITE};
    rill_launch l = {.grid = {1, 1, 1},
                     .block = {1, 1, 1},
                     .args = &fa,
                     .args_size = sizeof fa,
                     .accesses = &acc,
                     .num_accesses = 1};
    RT_OK(rill_launch_kernel(s, k, &l));
    RT_OK(rill_kernel_destroy(k));
}

/* A peer copy: rill_memcpy_async between two devices' memory on a stream of device 1 that waits
 * for device 0's kernel writing the source copies what the kernel wrote; a kernel on device 1
 * may declare an access to device 0's memory (allowed, and tracked by the pool). */
static void test_copies_and_kernels_across_devices(void **state) {
    (void)state;
    enum { N = 4096 };
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    float *a = NULL, *b = NULL, host[N];
    RT_OK(rill_malloc(device(0), N * sizeof(float), (void **)&a));
    RT_OK(rill_malloc(device(1), N * sizeof(float), (void **)&b));
    RT_OK(rill_memset_async(a, 0, N * sizeof(float), s0));
    launch_fill(s0, a, 3.0f, N);
    rill_event *e = NULL;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_event_record(e, s0));
    RT_OK(rill_stream_wait_event(s1, e));
    RT_OK(rill_memcpy_async(b, a, N * sizeof(float), s1));
    /* Device 1's kernel writes device 0's memory after the copy read it. */
    launch_fill(s1, a, 5.0f, N);
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_memcpy(host, b, sizeof host));
    for (int i = 0; i < N; i++)
        assert_true(host[i] == 3.0f);
    RT_OK(rill_memcpy(host, a, sizeof host));
    for (int i = 0; i < N; i++)
        assert_true(host[i] == 5.0f);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

/* The pool's cross-stream lifetime holds across devices: a block of device 0 that a kernel on
 * device 1 still touches is not handed out again by rill_malloc on device 0. */
static void test_memory_used_by_another_device_is_not_reused(void **state) {
    (void)state;
    enum { N = 1 << 16 };
    rill_stream *s1 = new_stream(1);
    float *a = NULL;
    RT_OK(rill_malloc(device(0), N * sizeof(float), (void **)&a));
    atomic_int release = 0;
    RT_OK(rill_launch_host_func(s1, wait_flag, &release));
    launch_fill(s1, a, 1.0f, N);
    RT_OK(rill_free(a));
    float *again = NULL;
    RT_OK(rill_malloc(device(0), N * sizeof(float), (void **)&again));
    assert_ptr_not_equal(again, a);
    atomic_store(&release, 1);
    RT_OK(rill_stream_synchronize(s1));
    RT_OK(rill_free(again));
    RT_OK(rill_stream_destroy(s1));
}

/* rill_shutdown after a stream of one device touched memory of another, in every direction
 * between the devices present: a copy from the other device's memory, a fill of it, a kernel
 * declaring an access to it, and a copy from it into memory allocated in order on the stream.
 * The program destroyed the stream, freed the memory and synchronized; each pool still remembers
 * the streams that used its blocks until the teardown, which must not free a stream that another
 * device's pool still refers to (AddressSanitizer saw that as a use-after-free). */
static void test_shutdown_after_streams_touched_other_devices(void **state) {
    (void)state;
    enum { N = 1024 };
    int count = 0;
    RT_OK(rill_device_count(&count));
    assert_true(count >= 2);
    for (int from = 0; from < count; from++) {
        for (int to = 0; to < count; to++) {
            if (from == to)
                continue;
            rill_stream *s = new_stream(from);
            float *mine = NULL, *theirs = NULL, *ordered = NULL;
            RT_OK(rill_malloc(device(from), N * sizeof(float), (void **)&mine));
            RT_OK(rill_malloc(device(to), N * sizeof(float), (void **)&theirs));
            RT_OK(rill_memset_async(theirs, 0, N * sizeof(float), s));
            RT_OK(rill_memcpy_async(mine, theirs, N * sizeof(float), s));
            RT_OK(rill_op_fill_f32(s, theirs, 2.0f, N));
            launch_fill(s, theirs, 3.0f, N);
            RT_OK(rill_memcpy_async(mine, theirs, N * sizeof(float), s));
            RT_OK(rill_malloc_async(N * sizeof(float), s, (void **)&ordered));
            RT_OK(rill_memcpy_async(ordered, theirs, N * sizeof(float), s));
            RT_OK(rill_free_async(ordered, s));
            RT_OK(rill_stream_synchronize(s));
            float host[N];
            RT_OK(rill_memcpy(host, mine, sizeof host));
            for (int i = 0; i < N; i++)
                assert_true(host[i] == 3.0f);
            RT_OK(rill_free(mine));
            RT_OK(rill_free(theirs));
            RT_OK(rill_stream_destroy(s));
            RT_OK(rill_device_synchronize(device(from)));
            RT_OK(rill_device_synchronize(device(to)));
            RT_OK(rill_shutdown());
        }
    }
}

/* A capture takes streams of its origin's device only: a stream of the other device that waits
 * for a captured event is RILL_ERROR_DEVICE_MISMATCH, and the capture goes on; an exec runs on
 * the device it was instantiated for. */
static void test_capture_and_graphs_stay_on_one_device(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1), *s0b = new_stream(0);
    atomic_int flag = 0;
    rill_event *e = NULL;
    RT_OK(rill_event_create(0, &e));
    RT_OK(rill_stream_begin_capture(s0, RILL_CAPTURE_GLOBAL));
    RT_OK(rill_launch_host_func(s0, sleep_then_set, &flag));
    RT_OK(rill_event_record(e, s0));
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_stream_wait_event(s1, e));
    assert_non_null(strstr(rill_last_error(), "one device"));
    RT_OK(rill_stream_wait_event(s0b, e)); /* the same device joins */
    RT_OK(rill_event_record(e, s0b));
    RT_OK(rill_stream_wait_event(s0, e));
    rill_graph *g = NULL;
    RT_OK(rill_stream_end_capture(s0, &g));
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g, &x)); /* for device 0, current */
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_graph_launch(x, s1));
    assert_non_null(strstr(rill_last_error(), "device 0"));
    RT_OK(rill_graph_launch(x, s0));
    RT_OK(rill_stream_synchronize(s0));
    assert_int_equal(atomic_load(&flag), 1);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s0b));
    RT_OK(rill_stream_destroy(s1));
}

/* A device's memory prefers the NUMA node of its processors (mbind), whichever thread touches
 * it first: device 1's pool memory names its node. */
static void test_device_memory_prefers_its_node(void **state) {
    (void)state;
    int cpus[256];
    int n = rill__cpu_list(cpus, 256);
    if (n > 256)
        n = 256;
    int node = rill__cpu_node(cpus[n / 2]); /* device 1: the second half */
    for (int i = n / 2; i < n; i++)
        if (rill__cpu_node(cpus[i]) != node)
            node = -1;
    if (node < 0)
        skip(); /* no NUMA information, or device 1 spans nodes: no preference */
    void *p = NULL;
    RT_OK(rill_malloc(device(1), 1 << 20, &p));
    assert_int_equal(rill__pages_node(p), node);
    RT_OK(rill_free(p));
}

/* IPC handles keep the device they came from: memory of device 1 opened from its handle is
 * device 1's mapping, whatever the opening thread's current device. */
static void test_ipc_memory_keeps_its_device(void **state) {
    (void)state;
    float *p = NULL;
    RT_OK(rill_malloc(device(1), 4096, (void **)&p));
    rill_ipc_mem_handle h;
    RT_OK(rill_ipc_get_mem_handle(p, &h));
    float *q = NULL;
    RT_OK(rill_ipc_open_mem_handle(&h, (void **)&q));
    rill__mem_block b;
    assert_true(rill__registry_find(q, &b));
    assert_int_equal(b.kind, RILL__MEM_IPC);
    assert_ptr_equal(b.dev->handle, device(1));
    RT_OK(rill_ipc_close_mem_handle(q));
    RT_OK(rill_free(p));
}

/* "a never-recorded event is bound to the calling thread's current device first": with device 1
 * current, the handle of a fresh interprocess event names device 1, the event and its opened copy
 * are bound to it, and a stream of device 0 may not record it. An event recorded first keeps its
 * device whatever is current. */
static void test_ipc_handle_binds_a_never_recorded_event_to_the_current_device(void **state) {
    (void)state;
    rill_stream *s0 = new_stream(0), *s1 = new_stream(1);
    RT_OK(rill_set_device(device(1)));
    rill_event *e = NULL, *opened = NULL, *recorded = NULL;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    rill_ipc_event_handle h;
    RT_OK(rill_event_ipc_handle(e, &h));
    rill_device *bound = NULL;
    RT_OK(rill_event_get_device(e, &bound));
    assert_ptr_equal(bound, device(1));
    RT_OK(rill_event_open_ipc_handle(&h, &opened));
    RT_OK(rill_event_get_device(opened, &bound));
    assert_ptr_equal(bound, device(1));
    RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_event_record(e, s0));
    assert_non_null(strstr(rill_last_error(), "interprocess handle"));
    RT_OK(rill_event_record(e, s1));
    RT_OK(rill_stream_wait_event(s0, opened)); /* any device may wait */
    RT_OK(rill_stream_synchronize(s0));

    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &recorded));
    RT_OK(rill_event_record(recorded, s0));
    RT_OK(rill_event_ipc_handle(recorded, &h));
    RT_OK(rill_event_get_device(recorded, &bound));
    assert_ptr_equal(bound, device(0));
    RT_OK(rill_set_device(device(0)));
    RT_OK(rill_event_synchronize(recorded));
    RT_OK(rill_event_destroy(recorded));
    RT_OK(rill_event_destroy(opened));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s0));
    RT_OK(rill_stream_destroy(s1));
}

/* RILL_DEVICE=cpu:N chooses the initial current device, the N-th CPU device; one that names no
 * device makes calls that need a device fail with a sentence naming it. */
static void test_rill_device_chooses_the_initial_device(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    setenv("RILL_DEVICE", "cpu:1", 1);
    rill_device *cur = NULL;
    RT_OK(rill_get_device(&cur));
    assert_ptr_equal(cur, device(1));
    RT_OK(rill_shutdown());
    setenv("RILL_DEVICE", "cpu:2", 1);
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_get_device(&cur));
    assert_non_null(strstr(rill_last_error(), "cpu:2"));
    RT_OK(rill_shutdown());
    unsetenv("RILL_DEVICE");
}

/* A RILL_CPU_DEVICES that names no possible count gives no device, and every call that needs one
 * says why and what to set. */
static void test_bad_cpu_device_count_is_explained(void **state) {
    (void)state;
    const char *bad[] = {"x", "0", "4096"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RT_OK(rill_shutdown());
        setenv("RILL_CPU_DEVICES", bad[i], 1);
        int count = -1;
        RT_OK(rill_device_count(&count));
        assert_int_equal(count, 0);
        rill_device *cur = NULL;
        RT_STATUS(RILL_ERROR_NO_DEVICE, rill_get_device(&cur));
        assert_non_null(strstr(rill_last_error(), "RILL_CPU_DEVICES"));
        assert_non_null(strstr(rill_last_error(), "unset it"));
    }
    RT_OK(rill_shutdown());
    setenv("RILL_CPU_DEVICES", "2", 1);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_cpu_devices_split_the_processors),
        cmocka_unit_test(test_event_binds_to_the_device_of_its_first_record),
        cmocka_unit_test(test_a_stream_of_another_device_waits_for_an_event),
        cmocka_unit_test(test_wait_stream_across_devices),
        cmocka_unit_test(test_elapsed_time_needs_events_of_one_device),
        cmocka_unit_test(test_device_synchronize_waits_for_its_own_device_only),
        cmocka_unit_test(test_current_device_and_stream_are_per_thread),
        cmocka_unit_test(test_tagged_streams_are_per_device),
        cmocka_unit_test(test_copies_and_kernels_across_devices),
        cmocka_unit_test(test_memory_used_by_another_device_is_not_reused),
        cmocka_unit_test(test_shutdown_after_streams_touched_other_devices),
        cmocka_unit_test(test_capture_and_graphs_stay_on_one_device),
        cmocka_unit_test(test_device_memory_prefers_its_node),
        cmocka_unit_test(test_ipc_memory_keeps_its_device),
        cmocka_unit_test(test_ipc_handle_binds_a_never_recorded_event_to_the_current_device),
        cmocka_unit_test(test_rill_device_chooses_the_initial_device),
        cmocka_unit_test(test_bad_cpu_device_count_is_explained),
    };
    return RT_RUN(tests);
}
