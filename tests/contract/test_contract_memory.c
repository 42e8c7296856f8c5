/* SPDX-License-Identifier: MIT */
/* Memory on the device under test (contract.h): an allocation larger than
 * the device is refused at once with a sentence and leaves the device
 * working; a device's memory fills and empties again; copies between
 * page-locked host memory and the device round-trip in stream order. */
#include "contract.h"

#include <string.h>

/* More than the device has: RILL_ERROR_OUT_OF_MEMORY, quickly, with a
 * sentence; smaller allocations work afterwards. */
static void test_more_than_the_device_has_is_refused_at_once(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    void *p = NULL;
    uint64_t t0 = rt_now_ns();
    RT_STATUS(RILL_ERROR_OUT_OF_MEMORY, rill_malloc(dev, info.memory_bytes + 1, &p));
    uint64_t ms = (rt_now_ns() - t0) / 1000000;
    assert_null(p);
    assert_non_null(strstr(rill_last_error(), "has in all"));
    if (ms > 1000)
        fail_msg("refusing took %llu ms", (unsigned long long)ms);
    RT_OK(rill_malloc(dev, 1 << 20, &p));
    RT_OK(rill_free(p));
}

/* Allocations of a quarter of the device each: at most four fit; once
 * freed, they fit again. */
static void test_the_device_fills_and_empties(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    if (info.memory_bytes > ((size_t)8 << 30))
        skip(); /* filling a large device takes longer than this test may */
    size_t quarter = info.memory_bytes / 4 / (2u << 20) * (2u << 20);
    void *p[5] = {0};
    int got = 0;
    rill_status st = RILL_OK;
    while (got < 5 && (st = rill_malloc(dev, quarter, &p[got])) == RILL_OK)
        got++;
    assert_int_equal(st, RILL_ERROR_OUT_OF_MEMORY);
    assert_true(got >= 1 && got <= 4);
    for (int i = 0; i < got; i++)
        RT_OK(rill_free(p[i]));
    RT_OK(rill_mem_empty_cache(dev));
    for (int i = 0; i < got; i++)
        RT_OK(rill_malloc(dev, quarter, &p[i]));
    for (int i = 0; i < got; i++)
        RT_OK(rill_free(p[i]));
    RT_OK(rill_mem_empty_cache(dev));
}

/* Host to device, a kernel, device to host, all queued at once. */
static void test_copies_round_trip_in_stream_order(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    enum { N = 1 << 16 };
    uint32_t *in = NULL, *out = NULL;
    RT_OK(rill_malloc_host(N * sizeof *in, (void **)&in));
    RT_OK(rill_malloc_host(N * sizeof *out, (void **)&out));
    for (uint32_t i = 0; i < N; i++)
        in[i] = i;
    memset(out, 0, N * sizeof *out);
    void *x = NULL;
    RT_OK(rill_malloc_async(N * sizeof *in, s, &x));
    RT_OK(rill_memcpy_async(x, in, N * sizeof *in, s));
    RT_OK(contract_scale(s, x, x, 3, N));
    RT_OK(rill_memcpy_async(out, x, N * sizeof *out, s));
    RT_OK(rill_free_async(x, s));
    RT_OK(rill_stream_synchronize(s));
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(out[i], 3 * i);
    RT_OK(rill_free_host(in));
    RT_OK(rill_free_host(out));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_more_than_the_device_has_is_refused_at_once),
        cmocka_unit_test(test_the_device_fills_and_empties),
        cmocka_unit_test(test_copies_round_trip_in_stream_order),
    };
    return CONTRACT_RUN(tests);
}
