/* SPDX-License-Identifier: MIT */
/* The device interface (src/backend/backend.h), checked for every backend
 * the assembly lists: the operations it must fill, the memory granule, the
 * clock, per-device kernel state, graph state, and the kernel without a
 * body for the device that the core refuses through kernel_load. A second
 * backend passes these before anything else of it runs. */
#include "fixture.h"

#include "backend/backend.h"
#include "core/kernel_image.h"
#include "core/runtime.h"
#include "util/status.h"

#include <stdlib.h>
#include <string.h>

/* Every backend the assembly lists, and the devices the runtime made. */
static void test_every_backend_fills_the_operations_the_core_calls(void **state) {
    (void)state;
    int backends = 0;
    for (int b = 0; rill__backends[b] != NULL; b++, backends++) {
        const rill__backend_ops *ops = rill__backends[b];
        assert_non_null(ops->name);
        assert_true(ops->kind > 0);
        /* Kinds and their names are the backends': each one's own. */
        for (int other = 0; other < b; other++) {
            assert_int_not_equal(rill__backends[other]->kind, ops->kind);
            assert_string_not_equal(rill__backends[other]->name, ops->name);
        }
        assert_int_equal(ops->mem_caps & ~(unsigned)(RILL__MEMCAP_HOST | RILL__MEMCAP_CUDA), 0);
        assert_non_null(ops->image_formats);
        assert_true(ops->image_formats[0].format != 0);
        assert_non_null(ops->probe);
        assert_non_null(ops->device_init);
        assert_non_null(ops->device_shutdown);
        assert_non_null(ops->timestamp_ns);
        assert_non_null(ops->stream_init);
        assert_non_null(ops->stream_fini);
        assert_non_null(ops->submit);
        assert_non_null(ops->kernel_load);
        assert_non_null(ops->graph_prepare);
        assert_non_null(ops->graph_release);
        assert_non_null(ops->mem_alloc);
        assert_non_null(ops->mem_free);
        assert_non_null(ops->host_alloc);
        assert_non_null(ops->host_free);
        /* The pool commits whole granules: a power of two, a page at least. */
        assert_true(ops->mem_granule >= 4096);
        assert_int_equal(ops->mem_granule & (ops->mem_granule - 1), 0);
        /* Interprocess memory: all three operations or none. */
        bool any = ops->ipc_export != NULL || ops->ipc_map != NULL || ops->ipc_unmap != NULL;
        bool all = ops->ipc_export != NULL && ops->ipc_map != NULL && ops->ipc_unmap != NULL;
        assert_true(any == all);
    }
    assert_true(backends >= 1);
    /* The CPU backend is always built, and makes RILL_CPU_DEVICES devices (one per NUMA node
     * when unset, at least one). */
    char why[128] = "";
    const char *env = getenv("RILL_CPU_DEVICES");
    if (env != NULL && env[0] != '\0')
        assert_int_equal(rill__cpu_backend.probe(why, sizeof why), atoi(env));
    else
        assert_true(rill__cpu_backend.probe(why, sizeof why) >= 1);
}

/* Devices get their ordinals in the order of their backends, and each
 * device's info is what its backend's device_init wrote. */
static void test_devices_are_numbered_in_backend_order(void **state) {
    (void)state;
    rill__runtime *rt;
    RT_OK(rill__runtime_get(&rt));
    assert_true(rt->num_devices >= 1);
    for (int i = 0; i < rt->num_devices; i++) {
        rill__device *dev = rt->devices[i];
        const rill_device_info *info = &rill__device_base_of(dev)->info;
        assert_int_equal(info->ordinal, i);
        assert_int_equal(info->kind, dev->ops->kind);
        assert_true(info->compute_units >= 1);
        assert_true(info->greatest_priority <= info->least_priority);
        assert_non_null(rill__device_base_of(dev)->state);
    }
}

/* timestamp_ns is the clock of timing events: it never runs backwards. */
static void test_device_clock_never_runs_backwards(void **state) {
    (void)state;
    rill__runtime *rt;
    RT_OK(rill__runtime_get(&rt));
    rill__device *dev = rt->devices[0];
    uint64_t last = dev->ops->timestamp_ns(dev);
    for (int i = 0; i < 100000; i++) {
        uint64_t now = dev->ops->timestamp_ns(dev);
        assert_true(now >= last);
        last = now;
    }
}

/* The core hands kernel_load only an image in a format the device's
 * backend lists (image_formats); a kernel with none is refused before it,
 * naming the kernel and the formats, and no public call (the core puts the
 * call in front). Checked on every device, with a format of each other
 * backend that this one does not load. */
static void test_a_kernel_without_an_image_the_device_loads_is_refused(void **state) {
    (void)state;
    rill__runtime *rt;
    RT_OK(rill__runtime_get(&rt));
    for (int i = 0; i < rt->num_devices; i++) {
        rill__device *dev = rt->devices[i];
        for (int b = 0; rill__backends[b] != NULL; b++) {
            unsigned format = rill__backends[b]->image_formats[0].format;
            bool loads = false;
            for (const rill__image_format *f = dev->ops->image_formats; f->format != 0; f++)
                loads |= f->format == format;
            rill_kernel_image im = {.format = format, .bytes = "x", .entry = "x"};
            rill__kernel_image k = {.name = "other_only", .images = &im, .num_images = 1};
            const rill_kernel_image *chosen = NULL;
            rill__clear_error();
            rill_status st = rill__kernel_image_choose(&k, dev, &chosen);
            if (loads) {
                RT_OK(st);
                assert_ptr_equal(chosen, &im);
                continue;
            }
            assert_int_equal(st, RILL_ERROR_NOT_SUPPORTED);
            assert_null(chosen);
            assert_non_null(strstr(rill_last_error(), "'other_only'"));
            assert_non_null(strstr(rill_last_error(), rill__backends[b]->image_formats[0].name));
            assert_null(strstr(rill_last_error(), "rill_"));
        }
    }
}

/* graph_prepare makes state for an exec's topology and first nodes,
 * graph_release frees it (under ASan: no leak, no use after free); an
 * empty exec is allowed. */
static void test_graph_state_is_made_and_released_per_exec(void **state) {
    (void)state;
    rill__runtime *rt;
    RT_OK(rill__runtime_get(&rt));
    rill__device *dev = rt->devices[0];
    const uint32_t succ[] = {1, 2, 2}, roots[] = {0};
    const rill__gprog progs[] = {
        {.num_nodes = 3, .succ = succ, .roots = roots, .num_roots = 1},
        {.num_nodes = 0, .succ = succ, .roots = roots, .num_roots = 0},
    };
    /* 0 -> 1 -> 2 and 0 -> 2, empty nodes */
    const rill__xnode nodes[] = {
        {.p.kind = RILL__GNODE_EMPTY, .succ_begin = 0, .num_succ = 2},
        {.p.kind = RILL__GNODE_EMPTY, .num_preds = 1, .succ_begin = 2, .num_succ = 1},
        {.p.kind = RILL__GNODE_EMPTY, .num_preds = 2, .succ_begin = 3},
    };
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        void *st = NULL;
        RT_OK(dev->ops->graph_prepare(dev, &progs[i], nodes, &st));
        assert_non_null(st);
        dev->ops->graph_release(dev, st);
    }
}

/* rill_malloc_host goes through the current device's host_alloc; the
 * memory is usable for copies both ways, and rill_free_host frees it once. */
static void test_host_memory_comes_from_the_current_device(void **state) {
    (void)state;
    float *h = NULL, *d = NULL;
    RT_OK(rill_malloc_host(1000 * sizeof *h, (void **)&h));
    assert_int_equal((uintptr_t)h % 256, 0);
    RT_OK(rill_malloc(NULL, 1000 * sizeof *d, (void **)&d));
    for (int i = 0; i < 1000; i++)
        h[i] = (float)i;
    RT_OK(rill_memcpy(d, h, 1000 * sizeof *h));
    memset(h, 0, 1000 * sizeof *h);
    RT_OK(rill_memcpy(h, d, 1000 * sizeof *h));
    for (int i = 0; i < 1000; i++)
        assert_true(h[i] == (float)i);
    RT_OK(rill_free(d));
    RT_OK(rill_free_host(h));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_free_host(h));
    assert_non_null(strstr(rill_last_error(), "rill_malloc_host"));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_backend_fills_the_operations_the_core_calls),
        cmocka_unit_test(test_devices_are_numbered_in_backend_order),
        cmocka_unit_test(test_device_clock_never_runs_backwards),
        cmocka_unit_test(test_a_kernel_without_an_image_the_device_loads_is_refused),
        cmocka_unit_test(test_graph_state_is_made_and_released_per_exec),
        cmocka_unit_test(test_host_memory_comes_from_the_current_device),
    };
    return RT_RUN(tests);
}
