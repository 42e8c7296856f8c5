/* SPDX-License-Identifier: MIT */
/* The element-wise ops into new memory (rill_op_*_f32_new, and the maps'
 * rill_op_map_f32_new): the values of
 * the ops they stand for, in stream order on the stream given, the event
 * recorded after the op, and every bad argument refused with nothing
 * allocated, launched or recorded. */
#include "ops_support.h"

#include <math.h>
#include <stdlib.h>

/* ---- helpers ---- */

/* n floats of value in new device memory, filled and complete. */
static float *dev_filled(size_t n, float value) {
    void *p = NULL;
    RT_OK(rill_malloc(cpu_device(), n * sizeof(float), &p));
    RT_OK(rill_op_fill_f32(NULL, p, value, n));
    RT_OK(rill_device_synchronize(NULL));
    return p;
}

/* Fails unless every one of the n floats at dev (once complete) is want. */
static void expect_all(const float *dev, size_t n, float want) {
    float *host = malloc(n * sizeof(float));
    assert_non_null(host);
    RT_OK(rill_memcpy(host, dev, n * sizeof(float)));
    for (size_t i = 0; i < n; i++)
        if (host[i] != want)
            fail_msg("out[%zu] = %.9g, expected %.9g", i, (double)host[i], (double)want);
    free(host);
}

static size_t allocated_bytes(void) {
    rill_mem_stats stats;
    RT_OK(rill_mem_get_stats(cpu_device(), &stats));
    return stats.allocated_bytes;
}

/* ---- values ---- */

/* rill.h: "rill_malloc_async of n floats on s, the op ... into that memory
 * on s ... (s NULL: the calling thread's current stream, as for the ops)"
 * — each computes what its op computes. */
static void test_new_ops_compute_their_ops(void **state) {
    (void)state;
    size_t n = 1001;
    float *a = dev_filled(n, 1.5f), *b = dev_filled(n, 2.0f);
    rill_stream *s = rill_current_stream(NULL);
    float *sum = NULL, *prod = NULL, *shifted = NULL, *scaled = NULL, *negated = NULL;
    float *rsub = NULL;
    RT_OK(rill_op_add_f32_new(s, a, b, -0.5f, n, NULL, &sum));
    RT_OK(rill_op_mul_f32_new(s, a, b, n, NULL, &prod));
    RT_OK(rill_op_add_scalar_f32_new(NULL, a, 4.0f, n, NULL, &shifted)); /* s, the current one */
    RT_OK(rill_op_map_f32_new(s, RILL_MAP_SCALE, a, -3.0f, n, NULL, &scaled));
    RT_OK(rill_op_map_f32_new(s, RILL_MAP_NEG, b, 0.0f, n, NULL, &negated));
    RT_OK(rill_op_map_f32_new(NULL, RILL_MAP_RSUB, a, 10.0f, n, NULL, &rsub));
    assert_non_null(sum);
    assert_non_null(prod);
    assert_non_null(shifted);
    assert_non_null(scaled);
    assert_non_null(negated);
    assert_non_null(rsub);
    RT_OK(rill_stream_synchronize(s));
    expect_all(sum, n, 0.5f);
    expect_all(prod, n, 3.0f);
    expect_all(shifted, n, 5.5f);
    expect_all(scaled, n, -4.5f);
    expect_all(negated, n, -2.0f);
    expect_all(rsub, n, 8.5f);
    RT_OK(rill_free_async(sum, s));
    RT_OK(rill_free_async(prod, s));
    RT_OK(rill_free_async(shifted, s));
    RT_OK(rill_free_async(scaled, s));
    RT_OK(rill_free_async(negated, s));
    RT_OK(rill_free_async(rsub, s));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
}

/* rill.h: "then, when event is not NULL, rill_event_record(event, s) after
 * it" — once the event completes, the output is written, and work ordered
 * after it on another stream sees it. */
static void test_new_op_records_the_event_after_the_op(void **state) {
    (void)state;
    size_t n = 4096;
    float *a = dev_filled(n, 3.0f), *b = dev_filled(n, 4.0f);
    rill_stream *s = NULL, *other = NULL;
    RT_OK(rill_stream_create(cpu_device(), 0, &s));
    RT_OK(rill_stream_create(cpu_device(), 0, &other));
    rill_event *ev = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &ev));
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rt_launch_gate_kernel(s, &gate)); /* holds s until opened */
    float *out = NULL;
    RT_OK(rill_op_mul_f32_new(s, a, b, n, ev, &out));
    assert_int_equal(rill_event_query(ev), RILL_NOT_READY); /* recorded behind the gate */
    float *copy = NULL;
    RT_OK(rill_stream_wait_event(other, ev));
    RT_OK(rill_op_add_scalar_f32_new(other, out, 1.0f, n, NULL, &copy));
    rt_gate_open(&gate);
    RT_OK(rill_event_synchronize(ev));
    expect_all(out, n, 12.0f);
    RT_OK(rill_stream_synchronize(other));
    expect_all(copy, n, 13.0f);
    assert_false(gate.timed_out);
    RT_OK(rill_free_async(copy, other));
    RT_OK(rill_free_async(out, s));
    RT_OK(rill_event_destroy(ev));
    RT_OK(rill_stream_destroy(other));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
}

/* ---- refusals ---- */

/* rill.h: "Every argument is checked before anything happens ... On any
 * failure *out is NULL and nothing stays allocated." */
static void test_new_ops_reject_bad_arguments(void **state) {
    (void)state;
    size_t n = 8;
    float *a = dev_filled(n, 1.0f);
    rill_stream *s = rill_current_stream(NULL);
    rill_event *dead = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &dead));
    RT_OK(rill_event_destroy(dead));
    size_t before = allocated_bytes();
    float *out = a; /* a refusal must set it to NULL */
    expect_invalid(rill_op_add_f32_new(s, a, a, 1.0f, n, NULL, NULL),
                   "rill_op_add_f32_new: out is NULL");
    expect_invalid(rill_op_add_f32_new(s, NULL, a, 1.0f, n, NULL, &out),
                   "rill_op_add_f32_new: a is NULL");
    assert_null(out);
    expect_invalid(rill_op_mul_f32_new(s, a, NULL, n, NULL, &out),
                   "rill_op_mul_f32_new: b is NULL");
    expect_invalid(rill_op_add_scalar_f32_new(s, a, 1.0f, 0, NULL, &out),
                   "rill_op_add_scalar_f32_new: n is 0");
    expect_invalid(rill_op_add_f32_new(s, a, a, 1.0f, n + 1, NULL, &out), "rill_op_add_f32_new: a");
    expect_invalid(rill_op_mul_f32_new(s, a, a, n, dead, &out), "rill_op_mul_f32_new");
    expect_invalid(rill_op_add_scalar_f32_new((rill_stream *)a, a, 1.0f, n, NULL, &out),
                   "rill_op_add_scalar_f32_new");
    assert_null(out);
    out = a;
    expect_invalid(rill_op_map_f32_new(s, (rill_map_op)99, a, 1.0f, n, NULL, &out),
                   "rill_op_map_f32_new: op is 99");
    assert_null(out);
    expect_invalid(rill_op_map_f32_new(s, RILL_MAP_NEG, NULL, 0.0f, n, NULL, &out),
                   "rill_op_map_f32_new: a is NULL");
    expect_invalid(rill_op_map_f32_new(s, RILL_MAP_SCALE, a, 2.0f, n + 1, NULL, &out),
                   "rill_op_map_f32_new: a");
    expect_invalid(rill_op_map_f32_new(s, RILL_MAP_SCALE, a, 2.0f, n, dead, &out),
                   "rill_op_map_f32_new");
    expect_invalid(rill_op_map_f32_new(s, RILL_MAP_NEG, a, 0.0f, n, NULL, NULL),
                   "rill_op_map_f32_new: out is NULL");
    assert_null(out);
    assert_int_equal(allocated_bytes(), before);
    /* a was never written: 1.0 everywhere still */
    RT_OK(rill_device_synchronize(NULL));
    expect_all(a, n, 1.0f);
    RT_OK(rill_free(a));
}

/* rill.h: "A status of the record ... comes after the op was submitted:
 * its memory is then freed in stream order after it." An event bound to
 * the second CPU device (main asks for two) cannot be recorded on the
 * first's stream. */
static void test_new_op_frees_its_memory_when_the_record_fails(void **state) {
    (void)state;
    int count = 0;
    RT_OK(rill_device_count(&count));
    rill_device *second = NULL;
    for (int i = 0; i < count && second == NULL; i++) {
        rill_device *d = NULL;
        RT_OK(rill_device_get(i, &d));
        if (d != cpu_device())
            second = d;
    }
    assert_non_null(second);
    rill_stream *far = rill_default_stream(second);
    rill_event *ev = NULL;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &ev));
    RT_OK(rill_event_record(ev, far)); /* binds ev to the second device */
    size_t n = 16;
    float *a = dev_filled(n, 2.0f);
    size_t before = allocated_bytes();
    float *out = a;
    rill_stream *s = rill_default_stream(cpu_device());
    rill_status st = rill_op_add_scalar_f32_new(s, a, 1.0f, n, ev, &out);
    assert_int_equal(st, RILL_ERROR_DEVICE_MISMATCH);
    assert_null(out);
    RT_OK(rill_device_synchronize(cpu_device()));
    assert_int_equal(allocated_bytes(), before);
    RT_OK(rill_event_destroy(ev));
    RT_OK(rill_free(a));
}

int main(int argc, char **argv) {
    setenv("RILL_CPU_DEVICES", "2", 0); /* a second device for the record that fails */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_ops_compute_their_ops),
        cmocka_unit_test(test_new_op_records_the_event_after_the_op),
        cmocka_unit_test(test_new_ops_reject_bad_arguments),
        cmocka_unit_test(test_new_op_frees_its_memory_when_the_record_fails),
    };
    return RT_RUN(tests);
}
