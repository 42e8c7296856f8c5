/* SPDX-License-Identifier: MIT */
/* Sticky errors and waits across devices, on the device under test
 * (contract.h): a failed host function skips the rest of its stream and
 * fails the streams that wait on it, until rill_stream_clear_error; work
 * of the device under test and of another device order each other through
 * events both ways. */
#include "contract.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SPIN_NS 5000000ull

static void fail_here(void *message) {
    rill_host_func_fail(message);
}

/* Work queued behind a failed host function is skipped; synchronize says
 * why; after a clear, new work runs. */
static void test_a_failure_skips_the_rest_until_cleared(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    uint32_t *x = contract_words(s, 64, 1);
    RT_OK(rill_launch_host_func(s, fail_here, "the input was bad"));
    RT_OK(contract_add(s, x, 100, 64));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    if (strstr(rill_last_error(), "the input was bad") == NULL)
        fail_msg("the sentence does not carry the host function's message: %s", rill_last_error());
    RT_OK(rill_stream_clear_error(s));
    RT_OK(contract_add(s, x, 10, 64));
    RT_OK(rill_stream_synchronize(s));
    uint32_t host[64];
    contract_read(host, x, 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(host[i], 11);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* A stream that waits on failed work fails too, and skips its work. */
static void test_a_wait_on_failed_work_fails_the_waiter(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *a, *b;
    rill_event *e;
    RT_OK(rill_stream_create(dev, 0, &a));
    RT_OK(rill_stream_create(dev, 0, &b));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    uint32_t *x = contract_words(b, 16, 0);
    RT_OK(rill_stream_synchronize(b));
    RT_OK(contract_spin(a, x, SPIN_NS));
    RT_OK(rill_launch_host_func(a, fail_here, "the producer failed"));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_stream_wait_event(b, e));
    RT_OK(contract_add(b, x, 5, 16));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(a));
    RT_OK(rill_stream_clear_error(a));
    RT_OK(rill_stream_clear_error(b));
    uint32_t host[16];
    contract_read(host, x, 16);
    assert_int_equal(host[0], 1); /* the spin ran; the add did not */
    for (int i = 1; i < 16; i++)
        assert_int_equal(host[i], 0);
    RT_OK(rill_free(x));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* Another device than the one under test: the CPU device for a CUDA one,
 * a second CPU device (RILL_CPU_DEVICES=2) for a CPU one; NULL when there
 * is none. */
static rill_device *other_device(rill_device *dev) {
    int count = 0;
    RT_OK(rill_device_count(&count));
    for (int i = 0; i < count; i++) {
        rill_device *d = NULL;
        RT_OK(rill_device_get(i, &d));
        if (d != dev)
            return d;
    }
    return NULL;
}

/* Work of two devices orders each other through events, both ways, while
 * each side is slow: each read sees the other's write. The data crosses
 * through page-locked host memory, which every device copies; a copy or
 * fill on one device's stream of memory that only the other device
 * reaches (a GPU's, from a CPU device's stream) is refused, and
 * rill_memcpy finds the device that reaches both. */
static void test_events_order_work_across_devices_both_ways(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_device *other = other_device(dev);
    if (other == NULL)
        skip();
    rill_stream *s, *t;
    rill_event *e1, *e2;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_stream_create(other, 0, &t));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e1));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e2));
    enum { N = 4096 };
    const size_t bytes = N * sizeof(uint32_t);
    uint32_t *x = contract_words(s, N, 0), *y = contract_words(t, N, 0), *h;
    RT_OK(rill_malloc_host(bytes, (void **)&h));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_synchronize(t));
    /* s writes x after a spin and hands it over through h; t copies it into
     * its own memory, scales it and hands it back; s copies it into x. */
    RT_OK(contract_spin(s, x, SPIN_NS));
    RT_OK(contract_add(s, x, 3, N));
    RT_OK(rill_memcpy_async(h, x, bytes, s));
    RT_OK(rill_event_record(e1, s));
    RT_OK(rill_stream_wait_event(t, e1));
    RT_OK(rill_memcpy_async(y, h, bytes, t));
    RT_OK(contract_spin(t, y, SPIN_NS));
    RT_OK(contract_scale(t, y, y, 10, N));
    RT_OK(rill_memcpy_async(h, y, bytes, t));
    RT_OK(rill_event_record(e2, t));
    RT_OK(rill_stream_wait_event(s, e2));
    RT_OK(rill_memcpy_async(x, h, bytes, s));
    RT_OK(rill_stream_synchronize(s));
    uint32_t host[N];
    contract_read(host, x, N);
    assert_int_equal(host[0], (1 + 3 + 1) * 10);
    for (int i = 1; i < N; i++)
        assert_int_equal(host[i], 30);
    /* Memory that one side's device does not reach: a GPU's, from a CPU
     * device's stream (GPUs of one kind copy each other's memory). */
    bool kinds = contract_kind(dev) != contract_kind(other);
    if (kinds && !contract_host_memory(other)) {
        RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_memcpy_async(x, y, bytes, s));
        assert_non_null(strstr(rill_last_error(), "cannot reach"));
        RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_memset_async(y, 0, bytes, s));
    }
    if (kinds && !contract_host_memory(dev))
        RT_STATUS(RILL_ERROR_DEVICE_MISMATCH, rill_memcpy_async(y, x, bytes, t));
    /* Between the devices' memory, directly. */
    RT_OK(rill_memset_async(y, 0, bytes, t));
    RT_OK(rill_stream_synchronize(t));
    RT_OK(rill_memcpy(y, x, bytes));
    contract_read(host, y, N);
    assert_int_equal(host[0], 50);
    assert_int_equal(host[N - 1], 30);
    RT_OK(rill_free_host(h));
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_event_destroy(e1));
    RT_OK(rill_event_destroy(e2));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(t));
}

/* An op (and a kernel) refuses memory its device cannot reach, before
 * anything runs:
 * another device's memory unless both are CPU devices (host memory), and
 * on a GPU host memory that is not page-locked; page-locked host memory
 * (rill_malloc_host) every device reaches. */
static void test_ops_refuse_memory_their_device_cannot_reach(void **state) {
    (void)state;
    enum { N = 1024 };
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    bool gpu = !contract_host_memory(dev);
    float *pageable = malloc(N * sizeof *pageable), *pinned;
    assert_non_null(pageable);
    RT_OK(rill_malloc_host(N * sizeof *pinned, (void **)&pinned));
    rill_status st = rill_op_fill_f32(s, pageable, 1.0f, N);
    if (gpu) {
        assert_int_equal(st, RILL_ERROR_DEVICE_MISMATCH);
        assert_non_null(strstr(rill_last_error(), "cannot reach"));
        assert_non_null(strstr(rill_last_error(), "rill_malloc_host"));
    } else {
        RT_OK(st);
    }
    RT_OK(rill_op_fill_f32(s, pinned, 2.0f, N));
    /* A kernel of the user's is held to the same rule. */
    st = contract_add(s, (uint32_t *)pageable, 1, N);
    if (gpu) {
        assert_int_equal(st, RILL_ERROR_DEVICE_MISMATCH);
        assert_non_null(strstr(rill_last_error(), "kernel 'contract_add' access 0"));
    } else {
        RT_OK(st);
    }
    rill_device *other = other_device(dev);
    if (other != NULL) {
        rill_stream *t;
        float *theirs;
        RT_OK(rill_stream_create(other, 0, &t));
        RT_OK(rill_malloc_async(N * sizeof *theirs, t, (void **)&theirs));
        RT_OK(rill_stream_synchronize(t));
        st = rill_op_add_f32(s, pinned, pinned, theirs, 1.0f, N);
        if (gpu || !contract_host_memory(other)) {
            assert_int_equal(st, RILL_ERROR_DEVICE_MISMATCH);
            assert_non_null(strstr(rill_last_error(), "is memory of device"));
        } else {
            RT_OK(st);
        }
        RT_OK(rill_free_async(theirs, t));
        RT_OK(rill_stream_destroy(t));
    }
    RT_OK(rill_stream_synchronize(s));
    float back[N];
    RT_OK(rill_memcpy(back, pinned, sizeof back));
    assert_true(back[0] == 2.0f && back[N - 1] == 2.0f);
    RT_OK(rill_free_host(pinned));
    free(pageable);
    RT_OK(rill_stream_destroy(s));
}

/* A stream destroyed with work pending finishes it. */
static void test_a_destroyed_stream_finishes_its_work(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s, *r;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_stream_create(dev, 0, &r));
    uint32_t *x = contract_words(r, 8, 0);
    RT_OK(rill_stream_synchronize(r));
    RT_OK(contract_spin(s, x, SPIN_NS));
    RT_OK(contract_add(s, x, 7, 8));
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_event_synchronize(e));
    uint32_t host[8];
    contract_read(host, x, 8);
    assert_int_equal(host[0], 8);
    assert_int_equal(host[7], 7);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(r));
}

/* What callbacks saw: how many ran, and the status and stream of each. */
typedef struct seen {
    _Atomic int runs, ok, failed, wrong_stream;
    rill_stream *stream;
} seen;

static void note_callback(rill_stream *stream, rill_status status, void *user_data) {
    seen *w = user_data;
    if (stream != w->stream)
        atomic_fetch_add(&w->wrong_stream, 1);
    if (status == RILL_OK)
        atomic_fetch_add(&w->ok, 1);
    else if (status == RILL_ERROR_KERNEL_FAILED)
        atomic_fetch_add(&w->failed, 1);
    atomic_fetch_add(&w->runs, 1);
}

static void count_run(void *runs) {
    atomic_fetch_add((_Atomic int *)runs, 1);
}

/* A callback whose heap block only it frees: a skipped callback would leak
 * it (the sanitizer builds' leak check says so). */
static void free_block(rill_stream *stream, rill_status status, void *block) {
    (void)stream;
    seen *w = *(seen **)block;
    note_callback(w->stream, status, w);
    free(block);
}

/* A callback runs in stream order with RILL_OK after work that ran, and
 * on a failed stream runs anyway, told so, while host functions there are
 * skipped; after a clear it runs with RILL_OK again. */
static void test_a_callback_runs_even_where_its_stream_skips_work(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    seen w = {.stream = s};
    _Atomic int host_runs = 0;
    uint32_t *x = contract_words(s, 16, 0);
    RT_OK(contract_spin(s, x, SPIN_NS));
    RT_OK(rill_stream_add_callback(s, note_callback, &w));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&w.runs), 1);
    assert_int_equal(atomic_load(&w.ok), 1);

    RT_OK(rill_launch_host_func(s, fail_here, "the input was bad"));
    RT_OK(rill_launch_host_func(s, count_run, &host_runs));
    RT_OK(rill_stream_add_callback(s, note_callback, &w));
    seen **block = malloc(sizeof *block);
    assert_non_null(block);
    *block = &w;
    RT_OK(rill_stream_add_callback(s, free_block, block));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&host_runs), 0);
    assert_int_equal(atomic_load(&w.runs), 3);
    assert_int_equal(atomic_load(&w.failed), 2);

    RT_OK(rill_stream_clear_error(s));
    RT_OK(rill_stream_add_callback(s, note_callback, &w));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&w.runs), 4);
    assert_int_equal(atomic_load(&w.ok), 2);
    assert_int_equal(atomic_load(&w.wrong_stream), 0);
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* A stream that fails by waiting on failed work runs its callbacks with
 * the failure too. */
static void test_a_callback_behind_a_failed_wait_is_told(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *a, *b;
    rill_event *e;
    RT_OK(rill_stream_create(dev, 0, &a));
    RT_OK(rill_stream_create(dev, 0, &b));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    seen w = {.stream = b};
    RT_OK(rill_launch_host_func(a, fail_here, "the producer failed"));
    RT_OK(rill_event_record(e, a));
    RT_OK(rill_stream_wait_event(b, e));
    RT_OK(rill_stream_add_callback(b, note_callback, &w));
    RT_STATUS(RILL_ERROR_KERNEL_FAILED, rill_stream_synchronize(b));
    assert_int_equal(atomic_load(&w.runs), 1);
    assert_int_equal(atomic_load(&w.failed), 1);
    RT_OK(rill_stream_clear_error(a));
    RT_OK(rill_stream_clear_error(b));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(a));
    RT_OK(rill_stream_destroy(b));
}

/* A capture refuses a callback and is invalidated; bad arguments get
 * sentences; nothing runs. */
static void test_a_callback_is_refused_in_a_capture_and_without_fn(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    seen w = {.stream = s};
    RT_OK(rill_stream_begin_capture(s, RILL_CAPTURE_GLOBAL));
    RT_STATUS(RILL_ERROR_CAPTURE_UNSUPPORTED, rill_stream_add_callback(s, note_callback, &w));
    if (strstr(rill_last_error(), "rill_launch_host_func") == NULL)
        fail_msg("the sentence does not say what to capture instead: %s", rill_last_error());
    rill_graph *g = NULL;
    RT_STATUS(RILL_ERROR_CAPTURE_INVALIDATED, rill_stream_end_capture(s, &g));
    assert_null(g);
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_stream_add_callback(s, NULL, &w));
    if (strstr(rill_last_error(), "fn is NULL") == NULL)
        fail_msg("no sentence for a NULL fn: %s", rill_last_error());
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    assert_int_not_equal(rill_stream_add_callback(s, note_callback, &w), RILL_OK);
    assert_int_equal(atomic_load(&w.runs), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_failure_skips_the_rest_until_cleared),
        cmocka_unit_test(test_a_wait_on_failed_work_fails_the_waiter),
        cmocka_unit_test(test_events_order_work_across_devices_both_ways),
        cmocka_unit_test(test_a_destroyed_stream_finishes_its_work),
        cmocka_unit_test(test_ops_refuse_memory_their_device_cannot_reach),
        cmocka_unit_test(test_a_callback_runs_even_where_its_stream_skips_work),
        cmocka_unit_test(test_a_callback_behind_a_failed_wait_is_told),
        cmocka_unit_test(test_a_callback_is_refused_in_a_capture_and_without_fn),
    };
    return CONTRACT_RUN(tests);
}
