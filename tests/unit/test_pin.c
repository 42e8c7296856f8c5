/* SPDX-License-Identifier: MIT */
/* RILL_CPU_PIN (docs/environment.md, docs/cpu.md): 1 pins each worker of a CPU device with a
 * worker per processor to a processor of its own; unset or 0 leaves their placement to the
 * system; any other value keeps the CPU device from starting, with a sentence that names it.
 * Each case starts the library afresh (rill_shutdown) with the setting it needs. */
#include "fixture.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCKS = 64 };

/* How many processors the thread that ran each block may run on. */
static int allowed[BLOCKS];

static void affinity_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)args;
    cpu_set_t set;
    CPU_ZERO(&set);
    uint32_t b = ctx->block_idx.x;
    allowed[b] = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

/* The processors this process may run on. */
static int process_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

/* Starts the library with RILL_CPU_PIN=value (NULL: unset), runs a kernel of BLOCKS blocks
 * on the workers only (a blocking-sync event: the waiting thread runs none of them) and
 * returns the device's compute units. */
static int run_blocks_with(const char *value) {
    RT_OK(rill_shutdown());
    if (value != NULL)
        setenv("RILL_CPU_PIN", value, 1);
    else
        unsetenv("RILL_CPU_PIN");
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev));
    rill_device_info info;
    RT_OK(rill_device_get_info(dev, &info));
    rill_stream *s = NULL;
    rill_kernel *k = NULL;
    rill_event *e = NULL;
    const rill_kernel_desc desc = {.name = "affinity", .cpu = affinity_kernel};
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_kernel_create(&desc, &k));
    RT_OK(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &e));
    memset(allowed, 0, sizeof allowed);
    const rill_launch launch = {.grid = {BLOCKS, 1, 1}, .block = {1, 1, 1}};
    RT_OK(rill_launch_kernel(s, k, &launch));
    RT_OK(rill_event_record(e, s));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
    unsetenv("RILL_CPU_PIN");
    return info.compute_units;
}

/* RILL_CPU_PIN=1 with a worker per processor: every block ran on a thread that may run on one
 * processor only. */
static void test_pin_one_pins_each_worker(void **state) {
    (void)state;
    int units = run_blocks_with("1");
    if (units != process_cpus())
        skip(); /* RILL_CPU_WORKERS set otherwise: nothing is pinned */
    for (int b = 0; b < BLOCKS; b++)
        assert_int_equal(allowed[b], 1);
}

/* Unset, and 0: the workers of the one CPU device may run on every processor of the process.
 * (Several CPU devices, RILL_CPU_DEVICES, keep each device's workers on its own processors.) */
static void test_pin_unset_or_zero_leaves_placement_to_the_system(void **state) {
    (void)state;
    const char *values[] = {NULL, "0"};
    for (int v = 0; v < 2; v++) {
        run_blocks_with(values[v]);
        int devices = 0;
        char why[256];
        RT_OK(rill_device_count_of_kind(RILL_DEVICE_CPU, &devices, why, sizeof why));
        if (devices > 1)
            skip();
        for (int b = 0; b < BLOCKS; b++)
            assert_int_equal(allowed[b], process_cpus());
    }
}

/* Another value: the CPU devices do not start, and the sentence names the setting. */
static void test_pin_bad_value_is_no_device(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    setenv("RILL_CPU_PIN", "yes", 1);
    rill_device *dev = (rill_device *)&dev;
    rill_status st = rill_device_get(0, &dev);
    char sentence[1024];
    snprintf(sentence, sizeof sentence, "%s", rill_last_error());
    unsetenv("RILL_CPU_PIN");
    RT_OK(rill_shutdown());
    assert_int_equal(st, RILL_ERROR_NO_DEVICE);
    assert_null(dev);
    assert_non_null(strstr(sentence, "RILL_CPU_PIN='yes'"));
    RT_OK(rill_device_get(0, &dev)); /* unset, the device starts again */
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pin_one_pins_each_worker),
        cmocka_unit_test(test_pin_unset_or_zero_leaves_placement_to_the_system),
        cmocka_unit_test(test_pin_bad_value_is_no_device),
    };
    return RT_RUN(tests);
}
