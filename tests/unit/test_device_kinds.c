/* SPDX-License-Identifier: MIT */
/* rill_device_count_of_kind: how many devices of each kind, and why there
 * are none. The CUDA backend's sentence is checked against
 * RILL_TEST_CUDA_WHY (a phrase it must contain), which the test's ctest
 * entries set beside RILL_CUDA_DRIVER: no driver, the toolkit's stub
 * library, and the machine's own driver. */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counts the devices of kind through rill_device_get. */
static int listed(rill_device_kind kind) {
    int count = 0, n = 0;
    RT_OK(rill_device_count(&count));
    for (int i = 0; i < count; i++) {
        rill_device *dev = NULL;
        rill_device_info info;
        RT_OK(rill_device_get(i, &dev));
        RT_OK(rill_device_get_info(dev, &info));
        n += info.kind == kind;
    }
    return n;
}

/* The CPU devices are always present, with no sentence. */
static void test_cpu_devices_are_counted_with_no_reason(void **state) {
    (void)state;
    int count = -1;
    char why[256] = "untouched";
    RT_OK(rill_device_count_of_kind(RILL_DEVICE_CPU, &count, why, sizeof why));
    assert_true(count >= 1);
    assert_int_equal(count, listed(RILL_DEVICE_CPU));
    assert_string_equal(why, "");
}

/* The CUDA count agrees with the list; when it is 0, the sentence says
 * why, and contains what this run's environment makes it say. */
static void test_cuda_devices_are_counted_or_the_reason_given(void **state) {
    (void)state;
    int count = -1;
    char why[512] = "";
    RT_OK(rill_device_count_of_kind(RILL_DEVICE_CUDA, &count, why, sizeof why));
    assert_int_equal(count, listed(RILL_DEVICE_CUDA));
    const char *expect = getenv("RILL_TEST_CUDA_WHY");
    if (count > 0) {
        assert_string_equal(why, "");
        return;
    }
    assert_true(strlen(why) > 20);
    if (expect != NULL && expect[0] != '\0' && strstr(why, expect) == NULL)
        fail_msg("the reason \"%s\" lacks \"%s\"", why, expect);
}

/* A small buffer gets the sentence cut to fit, ending in "..." (or cut
 * short below 4 bytes); size 0 with a NULL buffer asks for the count
 * alone. */
static void test_the_reason_is_cut_to_the_buffer(void **state) {
    (void)state;
    int count = -1, full_count = -1;
    char full[512] = "", small[16];
    memset(small, 'x', sizeof small);
    RT_OK(rill_device_count_of_kind(RILL_DEVICE_CUDA, &full_count, full, sizeof full));
    RT_OK(rill_device_count_of_kind(RILL_DEVICE_CUDA, &count, small, sizeof small));
    assert_int_equal(count, full_count);
    if (count == 0) {
        size_t len = strlen(small);
        assert_true(len > 3 && len < sizeof small);
        assert_string_equal(small + len - 3, "...");
        assert_int_equal(strncmp(small, full, len - 3), 0);
        char tiny[3];
        RT_OK(rill_device_count_of_kind(RILL_DEVICE_CUDA, &count, tiny, sizeof tiny));
        assert_int_equal(strlen(tiny), 2);
        assert_int_equal(strncmp(tiny, full, 2), 0);
    }
    RT_OK(rill_device_count_of_kind(RILL_DEVICE_CUDA, &count, NULL, 0));
    assert_int_equal(count, full_count);
}

static void test_bad_arguments_are_refused_with_a_sentence(void **state) {
    (void)state;
    int count = 0;
    char why[64];
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_device_count_of_kind((rill_device_kind)7, &count, why, sizeof why));
    assert_non_null(strstr(rill_last_error(), "RILL_DEVICE_CUDA"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_device_count_of_kind(RILL_DEVICE_CPU, NULL, why, sizeof why));
    assert_non_null(strstr(rill_last_error(), "count is NULL"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_device_count_of_kind(RILL_DEVICE_CPU, &count, NULL, 8));
    assert_non_null(strstr(rill_last_error(), "size 0"));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_devices_are_counted_with_no_reason),
        cmocka_unit_test(test_cuda_devices_are_counted_or_the_reason_given),
        cmocka_unit_test(test_the_reason_is_cut_to_the_buffer),
        cmocka_unit_test(test_bad_arguments_are_refused_with_a_sentence),
    };
    return RT_RUN(tests);
}
