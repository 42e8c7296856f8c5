/* SPDX-License-Identifier: MIT */
/* Idle workers sleep: a process whose device has no work uses no CPU a
 * few milliseconds after its last command, and wakes again for new work. */
#include "fixture.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* CPU time, in nanoseconds, of the CPU device's worker threads (named
 * rill-cpu-N), from /proc/self/task/<tid>/schedstat. Counting only the
 * workers keeps sanitizer threads out of the figure. */
static uint64_t workers_cpu_ns(int *num_workers) {
    uint64_t total = 0;
    *num_workers = 0;
    DIR *dir = opendir("/proc/self/task");
    assert_non_null(dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char path[300], comm[64] = "";
        unsigned long long run_ns = 0;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = '\0';
        fclose(f);
        if (strncmp(comm, "rill-cpu-", 9) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fscanf(f, "%llu", &run_ns) == 1) {
            total += run_ns;
            (*num_workers)++;
        }
        fclose(f);
    }
    closedir(dir);
    return total;
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
    int workers;
    uint64_t cpu0 = workers_cpu_ns(&workers);
    assert_int_equal(workers, 4); /* ctest runs the tests with RILL_CPU_WORKERS=4 */
    rt_sleep_us(200000);
    uint64_t used = workers_cpu_ns(&workers) - cpu0;
    /* Four sleeping workers: well under 1% of the 200 ms window (one
     * spinning worker would use all of it). */
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
