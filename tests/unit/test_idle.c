/* SPDX-License-Identifier: MIT */
/* Idle workers sleep: a process whose device has no work uses no CPU a
 * few milliseconds after its last command (the watch, a worker that naps
 * for a while after the device was busy, aside), and wakes again for new
 * work. */
#include "fixture.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

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
 * its last command." (the CPU device's promise in docs/design.md, "Concepts") */
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

/* Processor time of the whole process (every thread) so far, in nanoseconds. */
static uint64_t process_cpu_ns(void) {
    struct rusage r;
    assert_int_equal(getrusage(RUSAGE_SELF, &r), 0);
    return ((uint64_t)r.ru_utime.tv_sec + (uint64_t)r.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)r.ru_utime.tv_usec + (uint64_t)r.ru_stime.tv_usec) * 1000u;
}

static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

/* Idle means idle: with no work for one second, from the moment the last wait returns, the
 * process uses under 1% of a processor (10 ms), whatever ran before: launches that the waiting
 * thread ran itself, launches left to the watch, blocking-sync waits, multi-block kernels. The
 * process typically uses well under a tenth of that (the watch naps a few times, then sleeps);
 * the bound leaves room for a loaded machine and for sanitizers' own threads. */
static void test_idle_process_uses_under_one_percent_of_a_processor(void **state) {
    (void)state;
    _Atomic int counter = 0;
    rill_stream *s;
    rill_event *blocking;
    rill_kernel *k;
    rill_kernel_desc desc = {.name = "empty", .cpu = empty_kernel};
    RT_OK(rill_kernel_create(&desc, &k));
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &blocking));
    rill_launch many = {.grid = {64, 1, 1}, .block = {1, 1, 1}};
    for (int i = 0; i < 20; i++) {
        rt_sleep_us(500);
        RT_OK(rill_launch_host_func(s, count, &counter));
        RT_OK(rill_stream_synchronize(s));
        RT_OK(rill_launch_kernel(s, k, &many));
        RT_OK(rill_event_record(blocking, s));
        RT_OK(rill_event_synchronize(blocking));
    }
    RT_OK(rill_launch_host_func(s, count, &counter)); /* left to the watch, maybe */
    uint64_t deadline = rt_now_ns() + 5000000000ull;
    while (atomic_load(&counter) != 21 && rt_now_ns() < deadline)
        rt_sleep_us(100);
    assert_int_equal(atomic_load(&counter), 21);
    RT_OK(rill_stream_synchronize(s));
    uint64_t cpu0 = process_cpu_ns(), t0 = rt_now_ns();
    rt_sleep_us(1000000);
    uint64_t used = process_cpu_ns() - cpu0, elapsed = rt_now_ns() - t0;
    print_message("idle: %.2f ms of processor time in %.0f ms\n", (double)used / 1e6,
                  (double)elapsed / 1e6);
    assert_true(used < elapsed / 100);
    RT_OK(rill_event_destroy(blocking));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_workers_use_no_cpu),
        cmocka_unit_test(test_idle_process_uses_under_one_percent_of_a_processor),
    };
    return RT_RUN(tests);
}
