/* SPDX-License-Identifier: MIT */
/* A backend the library was not built with (tests/backend_null), added to
 * the backend list by the test program: its kind and name come from its
 * table, RILL_DEVICE names its devices, kernels reach it through the image
 * formats it loads, and collectives take its memory by what the memory is
 * (mem_caps), not by its kind. The program runs with RILL_NULL_DEVICES=1
 * and RILL_DEVICE=null:0 (tests/unit/CMakeLists.txt). */
#include "fixture.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "null_backend.h"

static rill_device_kind null_kind(void) {
    rill_device_kind kind = 0;
    RT_OK(rill_device_kind_from_name("null", &kind));
    return kind;
}

/* rill.h: "RILL_DEVICE=NAME:N in the environment, NAME a kind's name ...,
 * chooses the initial current device". */
static void test_rill_device_names_a_device_of_the_added_backend(void **state) {
    (void)state;
    rill_device *dev = NULL;
    RT_OK(rill_get_device(&dev));
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    assert_int_equal(info.kind, null_kind());
    assert_string_equal(info.name, "null device 0");
    int count = -1;
    char why[128];
    RT_OK(rill_device_count_of_kind(info.kind, &count, why, sizeof why));
    assert_int_equal(count, 1);
    rill_device *same = NULL;
    RT_OK(rill_device_get_by_kind(info.kind, 0, &same));
    assert_ptr_equal(same, dev);
}

/* rill.h: rill_device_kind_from_name gives RILL_ERROR_NO_DEVICE "with the
 * names it knows when none does". */
static void test_an_unknown_kind_name_is_refused_with_the_known_names(void **state) {
    (void)state;
    rill_device_kind kind = (rill_device_kind)7;
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_device_kind_from_name("tpu", &kind));
    assert_int_equal(kind, 0);
    assert_non_null(strstr(rill_last_error(), "'tpu'"));
    assert_non_null(strstr(rill_last_error(), "'cpu'"));
    assert_non_null(strstr(rill_last_error(), "'null'"));
    RT_OK(rill_device_kind_from_name("cpu", &kind));
    assert_int_equal(kind, RILL_DEVICE_CPU);
}

static void add_one(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    int *x = *(int *const *)args;
    *x += 1;
}

/* A kernel from a list of images runs on the added device from the image
 * in the format it loads (a CPU function), skipping one it does not. */
static void test_a_kernel_from_images_runs_on_the_added_device(void **state) {
    (void)state;
    rill_kernel_image images[] = {
        {.format = RILL_KERNEL_IMAGE_BACKEND + 5, .bytes = "not for this device"},
        {.format = RILL_KERNEL_IMAGE_CPU_FN, .fn = add_one},
    };
    rill_kernel_image_desc desc = {
        .struct_size = sizeof desc, .name = "add_one", .images = images, .num_images = 2};
    rill_kernel *k;
    RT_OK(rill_kernel_create_from_images(&desc, &k));
    int *x;
    RT_OK(rill_malloc_host(sizeof *x, (void **)&x));
    *x = 41;
    rill_launch l = {.grid = {3, 1, 1}, .block = {1, 1, 1}, .args = &x, .args_size = sizeof x};
    RT_OK(rill_launch_kernel(NULL, k, &l));
    RT_OK(rill_stream_synchronize(NULL));
    assert_int_equal(*x, 44);
    RT_OK(rill_free_host(x));
    RT_OK(rill_kernel_destroy(k));
}

/* ---- collectives by what memory is ---- */

static rill_status world_start(void *ctx, rill__comm_op *op, char *why, size_t size) {
    (void)ctx;
    (void)op;
    (void)why;
    (void)size;
    return RILL_OK;
}

/* A world of one rank: every operation is done at its first test. */
static rill__comm_test world_test(void *ctx, rill__comm_op *op, char *why, size_t size) {
    (void)why;
    (void)size;
    atomic_fetch_add((atomic_int *)ctx, 1);
    if (op->a.kind == RILL__COMM_OPEN) {
        op->rank = 0;
        op->size = 1;
        op->cuda_aware = false;
    } else if (op->a.kind == RILL__COMM_ALLREDUCE && op->a.recv != op->a.send) {
        memcpy(op->a.recv, op->a.send, op->a.count * sizeof(float));
    }
    return RILL__COMM_DONE;
}

static void world_cancel(void *ctx, rill__comm_op *op) {
    (void)ctx;
    (void)op;
}

static void world_release(void *ctx) {
    (void)ctx;
}

static const rill__comm_transport world = {
    .name = "ONE",
    .max_count = 1u << 20,
    .start = world_start,
    .test = world_test,
    .cancel = world_cancel,
    .release = world_release,
};

/* Issues an allreduce of n floats of the current device on its stream. */
static rill_status allreduce_on(rill_comm *c, float *x, size_t n) {
    rill__comm_args a = {.kind = RILL__COMM_ALLREDUCE,
                         .fn = "rill_allreduce_f32",
                         .recv = x,
                         .send = x,
                         .count = n,
                         .reduce = RILL__REDUCE_SUM};
    return rill__comm_issue(NULL, c, &a);
}

/* Collectives route a device's memory by its backend's mem_caps: the added
 * device's memory, while it is host memory, goes to the transport as it
 * is; once the backend says it is neither host nor CUDA memory, a
 * collective on it is refused with a sentence, before anything is queued,
 * instead of handing the transport memory it cannot read. */
static void test_collectives_route_by_what_the_memory_is_not_by_kind(void **state) {
    (void)state;
    for (int round = 0; round < 2; round++) {
        bool host = round == 0;
        RT_OK(rill_shutdown());
        null_backend_use(1, host ? RILL__MEMCAP_HOST : 0);
        atomic_int tests = 0;
        rill_comm *c = NULL;
        RT_OK(rill__comm_open(&world, &tests, "rill_comm_create_mpi", &c));
        float *x;
        RT_OK(rill_malloc_async(4 * sizeof *x, NULL, (void **)&x));
        int before = atomic_load(&tests);
        rill_status st = allreduce_on(c, x, 4);
        if (host) {
            RT_OK(st);
            RT_OK(rill_stream_synchronize(NULL));
            assert_true(atomic_load(&tests) > before);
        } else {
            assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
            assert_non_null(strstr(rill_last_error(), "rill_allreduce_f32"));
            assert_non_null(strstr(rill_last_error(), "null device 0"));
            assert_non_null(strstr(rill_last_error(), "neither host memory nor"));
            RT_OK(rill_stream_synchronize(NULL));
            assert_int_equal(atomic_load(&tests), before); /* nothing reached the transport */
        }
        RT_OK(rill_free_async(x, NULL));
        RT_OK(rill__comm_close(c, "rill_comm_destroy"));
    }
    null_backend_use(1, RILL__MEMCAP_HOST);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rill_device_names_a_device_of_the_added_backend),
        cmocka_unit_test(test_an_unknown_kind_name_is_refused_with_the_known_names),
        cmocka_unit_test(test_a_kernel_from_images_runs_on_the_added_device),
        cmocka_unit_test(test_collectives_route_by_what_the_memory_is_not_by_kind),
    };
    return RT_RUN(tests);
}
