/* SPDX-License-Identifier: MIT */
/* Devices: enumeration, the CPU device and its info, the per-thread current device, and
 * rill_device_synchronize. */
#include "fixture.h"

#include "core/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rill_device *cpu_device(void) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    assert_non_null(dev);
    return dev;
}

/* The number of compute units the first CPU device must have: RILL_CPU_WORKERS when set, else
 * "the number of processors the process may run on", or its share of them when RILL_CPU_DEVICES
 * splits them (the first n / N). */
static int expected_cpu_workers(void) {
    const char *env = getenv("RILL_CPU_WORKERS");
    if (env != NULL && env[0] != '\0')
        return atoi(env);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    const char *devices = getenv("RILL_CPU_DEVICES");
    int n = devices != NULL && devices[0] != '\0' ? atoi(devices) : 1;
    return CPU_COUNT(&set) / n;
}

/* How many CPU devices there are. */
static int cpu_device_count(void) {
    int count = 0, cpus = 0;
    RT_OK(rill_device_count(&count));
    for (int i = 0; i < count; i++) {
        rill_device *dev = NULL;
        rill_device_info info;
        RT_OK(rill_device_get(i, &dev));
        RT_OK(rill_device_get_info(dev, &info));
        cpus += info.kind == RILL_DEVICE_CPU;
    }
    return cpus;
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

/* "Ordinals: CUDA devices first, then the CPU devices": every ordinal names a device whose
 * info.ordinal is that ordinal, and no CUDA device follows a CPU device. */
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
        if (i >= count - cpu_device_count())
            assert_int_equal(info.kind, RILL_DEVICE_CPU);
        else
            assert_int_equal(info.kind, RILL_DEVICE_CUDA);
    }
    rill_device *first_cpu = NULL;
    RT_OK(rill_device_get(count - cpu_device_count(), &first_cpu));
    assert_ptr_equal(first_cpu, cpu_device());
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
    RT_STATUS(RILL_ERROR_NO_DEVICE,
              rill_device_get_by_kind(RILL_DEVICE_CPU, cpu_device_count(), &dev));
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

typedef struct resubmitting {
    rill_stream *stream;
    atomic_int runs;
    atomic_int stop;
} resubmitting;

/* Runs again on its stream until told to stop: a host function that keeps
 * submitting. */
static void resubmit(void *p) {
    resubmitting *r = p;
    atomic_fetch_add(&r->runs, 1);
    rt_spin_us(200);
    if (!atomic_load(&r->stop))
        RT_OK(rill_launch_host_func(r->stream, resubmit, r));
}

/* rill.h: rill_device_synchronize waits for the work submitted before the
 * call, not for work that host functions submit while it waits: it returns
 * while a host function keeps submitting more. */
static void test_device_synchronize_ends_while_host_functions_submit(void **state) {
    (void)state;
    static resubmitting r;
    RT_OK(rill_stream_create(cpu_device(), 0, &r.stream));
    atomic_store(&r.runs, 0);
    atomic_store(&r.stop, 0);
    RT_OK(rill_launch_host_func(r.stream, resubmit, &r));
    RT_OK(rill_device_synchronize(cpu_device()));
    assert_true(atomic_load(&r.runs) >= 1);
    /* Each link submits the next before it completes: the chain goes on. */
    RT_STATUS(RILL_NOT_READY, rill_stream_query(r.stream));
    atomic_store(&r.stop, 1);
    /* A link that read stop before the store submits one more, which stops. */
    RT_OK(rill_device_synchronize(cpu_device()));
    RT_OK(rill_device_synchronize(cpu_device()));
    RT_OK(rill_stream_query(r.stream));
    RT_OK(rill_stream_destroy(r.stream));
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

typedef struct churn_failed {
    rill_kernel *kernel;
    atomic_int done;
    atomic_int errors;
} churn_failed;

static void *create_fail_destroy(void *arg) {
    churn_failed *c = arg;
    rill_launch launch = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    uint64_t deadline = rt_now_ns() + 500000000ull;
    for (int i = 0; i < 20000 && rt_now_ns() < deadline; i++) {
        rill_stream *s = NULL;
        if (rill_stream_create(NULL, 0, &s) != RILL_OK ||
            rill_launch_kernel(s, c->kernel, &launch) != RILL_OK ||
            rill_stream_destroy(s) != RILL_OK)
            atomic_fetch_add(&c->errors, 1);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

/* rill_device_synchronize racing the destroy of streams whose work failed: a destroyed stream
 * leaves the device once its work is done, and a synchronize that finds it on the device's list
 * at that moment must not take it back (under AddressSanitizer or ThreadSanitizer this was a
 * use after free, and a double free). Every synchronize returns OK or the streams' failure. */
static void test_device_synchronize_racing_destroy_of_failed_streams(void **state) {
    (void)state;
    static churn_failed c;
    atomic_store(&c.done, 0);
    atomic_store(&c.errors, 0);
    rill_kernel_desc desc = {.name = "failing_kernel", .cpu = failing_kernel};
    RT_OK(rill_kernel_create(&desc, &c.kernel));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, create_fail_destroy, &c), 0);
    int syncs = 0;
    while (!atomic_load(&c.done)) {
        rill_status st = rill_device_synchronize(NULL);
        assert_true(st == RILL_OK || st == RILL_ERROR_KERNEL_FAILED);
        syncs++;
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&c.errors), 0);
    assert_true(syncs > 0);
    rill_status st = rill_device_synchronize(NULL);
    assert_true(st == RILL_OK || st == RILL_ERROR_KERNEL_FAILED);
    RT_OK(rill_kernel_destroy(c.kernel));
}

/* ---- rill_shutdown from several threads ---- */

#define SHORT_WAIT_NS 100000000ull /* 100 ms: room for a wrong interleaving to show itself */
#define LONG_WAIT_NS  10000000000ull

/* Waits until *flag reaches at least `value`, or timeout_ns passes; returns whether it did. */
static bool wait_at_least(atomic_int *flag, int value, uint64_t timeout_ns) {
    uint64_t deadline = rt_now_ns() + timeout_ns;
    while (atomic_load(flag) < value) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* The shutdowns that began releasing a runtime since arm_shutdown_count. */
static _Atomic uint64_t shutdowns_before;

static void arm_shutdown_count(void) {
    atomic_store(&shutdowns_before, rill__shutdown_count());
}

static int shutdowns_since_armed(void) {
    return (int)(rill__shutdown_count() - atomic_load(&shutdowns_before));
}

/* Waits until at least n shutdowns began since arm_shutdown_count, or timeout_ns passes. */
static bool wait_shutdowns(int n, uint64_t timeout_ns) {
    uint64_t deadline = rt_now_ns() + timeout_ns;
    while (shutdowns_since_armed() < n) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

typedef struct shutdown_call {
    atomic_int calling;
    atomic_int returned;
    rill_status status;
} shutdown_call;

static void *shutdown_thread(void *arg) {
    shutdown_call *c = arg;
    atomic_store(&c->calling, 1);
    c->status = rill_shutdown();
    atomic_store(&c->returned, 1);
    return NULL;
}

/* Leaves work pending on a stream, an event and memory, held by a gate until the test opens it,
 * so that rill_shutdown has work to wait for. */
static void leave_gated_work(rt_gate *gate) {
    rill_stream *s = NULL;
    rill_event *e = NULL;
    void *mem = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_malloc(NULL, 4096, &mem));
    rt_gate_reset(gate);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, gate));
    RT_OK(rill_memset_async(mem, 0, 4096, s));
    RT_OK(rill_event_record(e, s));
    assert_true(rt_gate_wait_entered(gate));
}

/* rill_shutdown: two threads may call it at once; one releases everything, the other waits for it,
 * and both return RILL_OK; the library then initialises afresh. */
static void test_device_concurrent_shutdowns_release_once_and_both_return_ok(void **state) {
    (void)state;
    static rt_gate gate;
    leave_gated_work(&gate);
    arm_shutdown_count();
    static shutdown_call calls[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        memset(&calls[i], 0, sizeof calls[i]);
        assert_int_equal(pthread_create(&threads[i], NULL, shutdown_thread, &calls[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        assert_true(wait_at_least(&calls[i].calling, 1, LONG_WAIT_NS));
    /* Both are under way; a second release of the runtime would show here. */
    wait_shutdowns(2, SHORT_WAIT_NS);
    rt_gate_open(&gate);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_false(atomic_load(&gate.timed_out));
    for (int i = 0; i < 2; i++)
        assert_int_equal(calls[i].status, RILL_OK);
    assert_int_equal(shutdowns_since_armed(), 1);
    int count = 0;
    RT_OK(rill_device_count(&count));
    assert_true(count >= 1);
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
}

typedef struct late_call {
    atomic_int calling;
    atomic_int created;
    atomic_int may_use;
    atomic_int ran;
    rill_status create, launch, sync, destroy;
} late_call;

static void count_host_fn(void *user_data) {
    atomic_fetch_add((atomic_int *)user_data, 1);
}

/* Begins a call once a shutdown is under way, and uses what it created once the test says so. */
static void *late_thread(void *arg) {
    late_call *c = arg;
    if (!wait_shutdowns(1, LONG_WAIT_NS))
        return NULL;
    atomic_store(&c->calling, 1);
    rill_stream *s = NULL;
    c->create = rill_stream_create(NULL, 0, &s);
    atomic_store(&c->created, 1);
    if (c->create != RILL_OK || !wait_at_least(&c->may_use, 1, LONG_WAIT_NS))
        return NULL;
    c->launch = rill_launch_host_func(s, count_host_fn, &c->ran);
    c->sync = rill_stream_synchronize(s);
    c->destroy = rill_stream_destroy(s);
    return NULL;
}

/* rill_shutdown: a call that another thread begins while rill_shutdown runs waits for it, then
 * runs on a freshly initialised library (here: creates a stream and runs work on it). */
static void test_device_call_begun_during_shutdown_runs_on_a_fresh_runtime(void **state) {
    (void)state;
    static rt_gate gate;
    leave_gated_work(&gate);
    arm_shutdown_count();
    static late_call late;
    memset(&late, 0, sizeof late);
    static shutdown_call call;
    memset(&call, 0, sizeof call);
    pthread_t late_t, shutdown_t;
    assert_int_equal(pthread_create(&late_t, NULL, late_thread, &late), 0);
    assert_int_equal(pthread_create(&shutdown_t, NULL, shutdown_thread, &call), 0);
    assert_true(wait_at_least(&late.calling, 1, LONG_WAIT_NS));
    /* A stream created on the runtime being released would be ready at once. */
    wait_at_least(&late.created, 1, SHORT_WAIT_NS);
    rt_gate_open(&gate);
    assert_int_equal(pthread_join(shutdown_t, NULL), 0);
    atomic_store(&late.may_use, 1);
    assert_int_equal(pthread_join(late_t, NULL), 0);
    assert_false(atomic_load(&gate.timed_out));
    assert_int_equal(call.status, RILL_OK);
    assert_int_equal(late.create, RILL_OK);
    assert_int_equal(late.launch, RILL_OK);
    assert_int_equal(late.sync, RILL_OK);
    assert_int_equal(late.destroy, RILL_OK);
    assert_int_equal(atomic_load(&late.ran), 1);
    assert_int_equal(shutdowns_since_armed(), 1);
}

typedef struct in_flight {
    rill_stream *stream;
    atomic_int calling;
    rill_status status;
    char error[512];
} in_flight;

static void *sync_in_flight(void *arg) {
    in_flight *c = arg;
    atomic_store(&c->calling, 1);
    c->status = rill_stream_synchronize(c->stream);
    snprintf(c->error, sizeof c->error, "%s", rill_last_error());
    return NULL;
}

/* rill_shutdown while another thread is in a call that found its handles: the shutdown waits for
 * the call, which returns as if it came first (RILL_OK), and meanwhile refuses the handles to
 * other threads with a sentence that names rill_shutdown. (Before, the shutdown freed the stream
 * under the call.) */
static void test_device_shutdown_waits_for_calls_in_flight_and_refuses_new_ones(void **state) {
    (void)state;
    static rt_gate gate;
    rt_gate_reset(&gate);
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &gate));
    assert_true(rt_gate_wait_entered(&gate));
    static in_flight call;
    memset(&call, 0, sizeof call);
    call.stream = s;
    static shutdown_call shut;
    memset(&shut, 0, sizeof shut);
    pthread_t sync_t, shutdown_t;
    assert_int_equal(pthread_create(&sync_t, NULL, sync_in_flight, &call), 0);
    assert_true(wait_at_least(&call.calling, 1, LONG_WAIT_NS));
    rt_sleep_us(200000); /* in rill_stream_synchronize, waiting for the gate */
    assert_int_equal(pthread_create(&shutdown_t, NULL, shutdown_thread, &shut), 0);
    /* The shutdown cannot end while the gate holds the work: its handles are refused. */
    uint64_t deadline = rt_now_ns() + LONG_WAIT_NS;
    rill_status st;
    while ((st = rill_stream_query(s)) == RILL_NOT_READY && rt_now_ns() < deadline)
        sched_yield();
    assert_int_equal(st, RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_shutdown is ending"));
    assert_false(atomic_load(&shut.returned));
    rt_gate_open(&gate);
    assert_int_equal(pthread_join(shutdown_t, NULL), 0);
    assert_int_equal(pthread_join(sync_t, NULL), 0);
    assert_false(atomic_load(&gate.timed_out));
    assert_int_equal(shut.status, RILL_OK);
    if (call.status != RILL_OK)
        fail_msg("the call in flight returned %s: %s", rill_status_name(call.status), call.error);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_query(s)); /* stale once it returned */
}

/* Threads that call on their own objects (and on the current stream) while rill_shutdown runs
 * again and again: every call returns RILL_OK, RILL_NOT_READY or RILL_ERROR_INVALID_ARGUMENT
 * (a handle of the runtime being shut down), and nothing is used after it is freed
 * (AddressSanitizer). */
typedef struct racing_caller {
    atomic_int stop;
    atomic_int bad; /* statuses outside those allowed */
    long calls;
} racing_caller;

static void racing_host_fn(void *user_data) {
    (void)user_data;
}

static void note_status(racing_caller *c, rill_status st) {
    c->calls++;
    if (st != RILL_OK && st != RILL_NOT_READY && st != RILL_ERROR_INVALID_ARGUMENT)
        atomic_fetch_add(&c->bad, 1);
}

static void *racing_calls(void *arg) {
    racing_caller *c = arg;
    rill_stream *s = NULL;
    rill_event *e = NULL;
    note_status(c, rill_stream_create(NULL, 0, &s));
    note_status(c, rill_event_create(RILL_EVENT_DEFAULT, &e));
    while (!atomic_load(&c->stop)) {
        void *mem = NULL;
        note_status(c, rill_launch_host_func(s, racing_host_fn, NULL));
        note_status(c, rill_launch_host_func(NULL, racing_host_fn, NULL));
        note_status(c, rill_event_record(e, s));
        note_status(c, rill_stream_query(s));
        note_status(c, rill_event_synchronize(e));
        note_status(c, rill_malloc(NULL, 256, &mem));
        note_status(c, rill_free(mem));
        rill_event *tmp = NULL;
        if (rill_event_create(RILL_EVENT_DEFAULT, &tmp) == RILL_OK)
            note_status(c, rill_event_destroy(tmp));
    }
    rill_stream_destroy(s); /* stale after a shutdown: refused, which is fine */
    rill_event_destroy(e);
    return NULL;
}

static void test_device_shutdowns_racing_calls_of_other_threads(void **state) {
    (void)state;
    enum { ROUNDS = 8, THREADS = 2 };
    for (int r = 0; r < ROUNDS; r++) {
        static racing_caller callers[THREADS];
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++) {
            memset(&callers[i], 0, sizeof callers[i]);
            assert_int_equal(pthread_create(&t[i], NULL, racing_calls, &callers[i]), 0);
        }
        rt_sleep_us(2000);
        RT_OK(rill_shutdown());
        rt_sleep_us(2000);
        for (int i = 0; i < THREADS; i++) {
            atomic_store(&callers[i].stop, 1);
            assert_int_equal(pthread_join(t[i], NULL), 0);
            assert_int_equal(atomic_load(&callers[i].bad), 0);
            assert_true(callers[i].calls > 0);
        }
    }
    RT_OK(rill_device_synchronize(NULL));
}

/* Two threads that start together: one makes its first calls, the other shuts down. */
typedef struct first_use_race {
    atomic_int start;
    rill_status shutdown, count, get;
    int devices;
} first_use_race;

static void race_start(first_use_race *r) {
    atomic_fetch_add(&r->start, 1);
    while (atomic_load(&r->start) < 2)
        sched_yield();
}

static void *first_use_thread(void *arg) {
    first_use_race *r = arg;
    race_start(r);
    rill_device *dev = NULL;
    r->count = rill_device_count(&r->devices);
    r->get = rill_get_device(&dev);
    return NULL;
}

static void *racing_shutdown_thread(void *arg) {
    first_use_race *r = arg;
    race_start(r);
    r->shutdown = rill_shutdown();
    return NULL;
}

/* rill_shutdown racing another thread's first call, which initialises the library: both return
 * RILL_OK, whichever comes first, and the library works afterwards. */
static void test_device_shutdown_racing_first_use_initialisation_is_safe(void **state) {
    (void)state;
    enum { ROUNDS = 20 };
    for (int r = 0; r < ROUNDS; r++) {
        RT_OK(rill_shutdown()); /* no runtime: the next call initialises */
        static first_use_race race;
        memset(&race, 0, sizeof race);
        pthread_t a, b;
        assert_int_equal(pthread_create(&a, NULL, first_use_thread, &race), 0);
        assert_int_equal(pthread_create(&b, NULL, racing_shutdown_thread, &race), 0);
        assert_int_equal(pthread_join(a, NULL), 0);
        assert_int_equal(pthread_join(b, NULL), 0);
        assert_int_equal(race.shutdown, RILL_OK);
        assert_int_equal(race.count, RILL_OK);
        assert_int_equal(race.get, RILL_OK);
        assert_true(race.devices >= 1);
    }
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
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
        cmocka_unit_test(test_device_synchronize_ends_while_host_functions_submit),
        cmocka_unit_test(test_device_synchronize_with_many_failed_streams_returns_kernel_failed),
        cmocka_unit_test(test_device_synchronize_racing_destroy_of_failed_streams),
        cmocka_unit_test(test_device_concurrent_shutdowns_release_once_and_both_return_ok),
        cmocka_unit_test(test_device_call_begun_during_shutdown_runs_on_a_fresh_runtime),
        cmocka_unit_test(test_device_shutdown_waits_for_calls_in_flight_and_refuses_new_ones),
        cmocka_unit_test(test_device_shutdowns_racing_calls_of_other_threads),
        cmocka_unit_test(test_device_shutdown_racing_first_use_initialisation_is_safe),
    };
    return RT_RUN(tests);
}
