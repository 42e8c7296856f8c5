/* SPDX-License-Identifier: MIT */
/* Kernels as lists of images (rill.h, rill_kernel_image_desc): each device
 * runs the image in a format its backend loads, the images are copied at
 * create, a kernel with none the device loads is refused at launch with a
 * sentence, and a malformed list is refused at create. */
#include "fixture.h"

#include <stdlib.h>
#include <string.h>

static void add_one(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    atomic_int *x = *(atomic_int *const *)args;
    atomic_fetch_add(x, 1);
}

static rill_status launch_on_cpu(rill_kernel *k, atomic_int *x) {
    rill_device *cpu;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    RT_OK(rill_set_device(cpu));
    rill_launch l = {.grid = {4, 1, 1}, .block = {1, 1, 1}, .args = &x, .args_size = sizeof x};
    return rill_launch_kernel(NULL, k, &l);
}

/* rill.h: "a device runs the first of them (in the list's order) in the
 * format its backend prefers"; the images are "copied (the caller may free
 * them on return)". The PTX image comes first and is freed before the
 * launch: the CPU device runs the CPU function. */
static void test_a_kernel_from_images_runs_on_the_cpu_device(void **state) {
    (void)state;
    char *ptx = strdup("// not PTX a CPU device reads");
    char *entry = strdup("add_one");
    assert_non_null(ptx);
    assert_non_null(entry);
    rill_kernel_image images[] = {
        {.format = RILL_KERNEL_IMAGE_PTX, .bytes = ptx, .entry = entry},
        {.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = add_one},
    };
    rill_kernel_image_desc desc = {
        .struct_size = sizeof desc, .name = "add_one", .images = images, .num_images = 2};
    rill_kernel *k;
    RT_OK(rill_kernel_create_from_images(&desc, &k));
    free(ptx);
    free(entry);
    memset(images, 0, sizeof images);
    atomic_int x = 0;
    RT_OK(launch_on_cpu(k, &x));
    RT_OK(rill_stream_synchronize(NULL));
    assert_int_equal(atomic_load(&x), 4);
    RT_OK(rill_kernel_destroy(k));
}

/* rill.h: "a launch on a device whose backend loads none of the kernel's
 * formats fails with RILL_ERROR_NOT_SUPPORTED, with a sentence naming the
 * kernel, its formats and those the device loads". */
static void test_a_kernel_with_no_image_the_device_loads_is_refused(void **state) {
    (void)state;
    const unsigned other = RILL_KERNEL_IMAGE_BACKEND + 7;
    rill_kernel_image image = {.format = other, .bytes = "\x01\x02", .size = 2};
    rill_kernel_image_desc desc = {
        .struct_size = sizeof desc, .name = "elsewhere", .images = &image, .num_images = 1};
    rill_kernel *k;
    RT_OK(rill_kernel_create_from_images(&desc, &k));
    atomic_int x = 0;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, launch_on_cpu(k, &x));
    const char *why = rill_last_error();
    assert_non_null(strstr(why, "rill_launch_kernel: kernel 'elsewhere' has no image"));
    assert_non_null(strstr(why, "format 65543"));
    assert_non_null(strstr(why, "the cpu backend loads a CPU function"));
    RT_OK(rill_stream_synchronize(NULL));
    assert_int_equal(atomic_load(&x), 0);
    RT_OK(rill_kernel_destroy(k));
}

/* rill.h: RILL_ERROR_INVALID_ARGUMENT "when struct_size is not one this
 * version knows, the list is empty, or an image has no format, no fn
 * (RILL_KERNEL_IMAGE_CPU_FN) or no bytes (other formats)". */
static void test_malformed_image_lists_are_refused_at_create(void **state) {
    (void)state;
    rill_kernel_image fn_image = {.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = add_one};
    rill_kernel_image no_format = {.fn = add_one};
    rill_kernel_image no_fn = {.format = RILL_KERNEL_IMAGE_CPU_FN};
    rill_kernel_image no_bytes = {.format = RILL_KERNEL_IMAGE_PTX, .entry = "k"};
    const size_t size = sizeof(rill_kernel_image_desc);
    const struct {
        rill_kernel_image_desc desc;
        const char *says;
    } bad[] = {
        {{0, "k", &fn_image, 1}, "struct_size is 0"},
        {{size + 8, "k", &fn_image, 1}, "set it to sizeof(rill_kernel_image_desc)"},
        {{size, NULL, &fn_image, 1}, "desc->name is NULL"},
        {{size, "k", NULL, 1}, "has no images"},
        {{size, "k", &fn_image, 0}, "has no images"},
        {{size, "k", &no_format, 1}, "image 0 has format 0"},
        {{size, "k", &no_fn, 1}, "has no fn"},
        {{size, "k", &no_bytes, 1}, "has no bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rill_kernel *k = (rill_kernel *)&bad[i];
        RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_kernel_create_from_images(&bad[i].desc, &k));
        assert_null(k);
        if (strstr(rill_last_error(), bad[i].says) == NULL)
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, rill_last_error(), bad[i].says);
        assert_non_null(strstr(rill_last_error(), "rill_kernel_create_from_images: "));
    }
    rill_kernel *k = (rill_kernel *)&bad[0];
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_kernel_create_from_images(NULL, &k));
    assert_null(k);
    RT_STATUS(
        RILL_ERROR_INVALID_ARGUMENT,
        rill_kernel_create_from_images(&(rill_kernel_image_desc){size, "k", &fn_image, 1}, NULL));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_kernel_from_images_runs_on_the_cpu_device),
        cmocka_unit_test(test_a_kernel_with_no_image_the_device_loads_is_refused),
        cmocka_unit_test(test_malformed_image_lists_are_refused_at_create),
    };
    return RT_RUN(tests);
}
