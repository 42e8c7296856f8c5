/* SPDX-License-Identifier: MIT */
#include "fixture.h"

#include <time.h>

uint64_t rt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rt_sleep_us(unsigned us) {
    struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void rt_spin_us(unsigned us) {
    uint64_t end = rt_now_ns() + (uint64_t)us * 1000u;
    while (rt_now_ns() < end) {
    }
}

int rt_run(const char *group_name, const struct CMUnitTest *tests, size_t count, int argc,
           char **argv) {
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return _cmocka_run_group_tests(group_name, tests, count, NULL, rt_teardown_shutdown);
}

int rt_teardown_shutdown(void **state) {
    (void)state;
    return rill_shutdown() == RILL_OK ? 0 : -1;
}
