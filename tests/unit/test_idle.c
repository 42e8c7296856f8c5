/* SPDX-License-Identifier: MIT */
/* Idle workers sleep: a process whose device has no work uses no CPU a
 * few milliseconds after its last command, and wakes again for new work. */
#include "fixture.h"

#include <stdatomic.h>
#include <time.h>

static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count(void *p) {
    atomic_fetch_add((_Atomic int *)p, 1);
}

static void burst(rill_stream *s, _Atomic int *counter, int n) {
    for (int i = 0; i < n; i++)
        RT_OK(rill_launch_host_func(s, count, counter));
    RT_OK(rill_stream_synchronize(s));
}

/* "Idle workers sleep: an idle process uses no CPU a few milliseconds after
 * its last command." (the CPU device's promise in the README) */
static void test_idle_workers_use_no_cpu(void **state) {
    (void)state;
    _Atomic int counter = 0;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    burst(s, &counter, 1000);
    rt_sleep_us(20000); /* past the spin and yield windows */
    uint64_t cpu0 = process_cpu_ns();
    rt_sleep_us(200000);
    uint64_t used = process_cpu_ns() - cpu0;
    /* Four sleeping workers and a sleeping main thread: well under 1% of
     * the 200 ms window (a spinning worker would use all of it). */
    print_message("cpu used while idle: %llu ns\n", (unsigned long long)used);
    assert_true(used < 2000000u);
    /* Sleeping workers wake for new work. */
    burst(s, &counter, 1000);
    assert_int_equal(atomic_load(&counter), 2000);
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_workers_use_no_cpu),
    };
    return RT_RUN(tests);
}
