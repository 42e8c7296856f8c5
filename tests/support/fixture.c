/* SPDX-License-Identifier: MIT */
#include "fixture.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer's suppressions for every test. oneDNN (libdnnl, the CPU
 * device's convolutions) is not built with it: what it hands between
 * threads through its own atomics (its cache of compiled primitives) is
 * invisible, so its intercepted calls (memcmp, allocations) read as races.
 * Its calls are left out; rill's own code around them is still checked. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) {
    return "called_from_lib:libdnnl.so.2\n";
}
#endif

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

static _Atomic uint64_t ticket_counter;

float *rt_floats(size_t count) {
    float *x = malloc((count > 0 ? count : 1) * sizeof *x);
    assert_non_null(x);
    return x;
}

void rt_fill_uniform(float *x, size_t count, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15u + 1;
    for (size_t i = 0; i < count; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 40) / 8388608.0 - 1.0);
    }
}

uint64_t rt_next_random(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint64_t rt_stress_seed(uint64_t fallback) {
    const char *env = getenv("RILL_STRESS_SEED");
    uint64_t seed = env != NULL && env[0] != '\0' ? strtoull(env, NULL, 0) : fallback;
    print_message("stress seed: %" PRIu64 " (set RILL_STRESS_SEED to repeat)\n", seed);
    return seed;
}

void rt_failures_assert_none(rt_failures *f) {
    int n = atomic_load(&f->count);
    if (n > 0)
        fail_msg("%d calls broke their contract; the first: %s", n, f->first);
}

typedef struct stress_thread {
    void *state;
    void (*op)(void *state);
    int iterations;
    uint64_t deadline_ns;
} stress_thread;

static void *stress_thread_main(void *arg) {
    stress_thread *t = arg;
    for (int i = 0; i < t->iterations; i++) {
        if (i % 64 == 0 && rt_now_ns() > t->deadline_ns)
            break;
        t->op(t->state);
    }
    return NULL;
}

void rt_stress_threads(int n, void *states, size_t stride, void (*op)(void *state), int iterations,
                       uint64_t run_ns) {
    stress_thread *ts = calloc((size_t)n, sizeof *ts);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    assert_non_null(ts);
    assert_non_null(threads);
    uint64_t deadline_ns = rt_now_ns() + run_ns;
    for (int i = 0; i < n; i++) {
        ts[i] = (stress_thread){(char *)states + (size_t)i * stride, op, iterations, deadline_ns};
        assert_int_equal(pthread_create(&threads[i], NULL, stress_thread_main, &ts[i]), 0);
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    free(threads);
    free(ts);
}

void rt_failure(rt_failures *f, const char *fmt, ...) {
    atomic_fetch_add(&f->count, 1);
    if (atomic_exchange(&f->claimed, 1) != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->first, sizeof f->first, fmt, ap);
    va_end(ap);
}

uint64_t rt_take_ticket(void) {
    return atomic_fetch_add(&ticket_counter, 1) + 1;
}

void rt_gate_reset(rt_gate *g) {
    atomic_store(&g->entered, 0);
    atomic_store(&g->open, 0);
    atomic_store(&g->timed_out, 0);
    atomic_store(&g->done, 0);
    atomic_store(&g->end_ticket, 0);
}

void rt_gate_fn(void *gate) {
    rt_gate *g = gate;
    atomic_store(&g->entered, 1);
    uint64_t deadline = rt_now_ns() + RT_GATE_TIMEOUT_NS;
    while (!atomic_load(&g->open)) {
        if (rt_now_ns() > deadline) {
            atomic_store(&g->timed_out, 1);
            break;
        }
        rt_sleep_us(100);
    }
    atomic_store(&g->end_ticket, rt_take_ticket());
    atomic_store(&g->done, 1);
}

void rt_gate_open(rt_gate *g) {
    atomic_store(&g->open, 1);
}

bool rt_gate_wait_entered(rt_gate *g) {
    uint64_t deadline = rt_now_ns() + RT_GATE_TIMEOUT_NS;
    while (!atomic_load(&g->entered) && rt_now_ns() < deadline)
        rt_sleep_us(100);
    return atomic_load(&g->entered) != 0;
}

static void gate_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    rt_gate *g;
    memcpy(&g, args, sizeof g);
    rt_gate_fn(g);
}

rill_status rt_launch_gate_kernel(rill_stream *s, rt_gate *g) {
    /* One kernel per call: the fixture keeps no state across rill_shutdown. */
    rill_kernel_desc d = {.name = "gate", .cpu = gate_kernel};
    rill_kernel *k;
    rill_status st = rill_kernel_create(&d, &k);
    if (st != RILL_OK)
        return st;
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &g, .args_size = sizeof g};
    st = rill_launch_kernel(s, k, &l);
    rill_kernel_destroy(k); /* lives until the launch is done */
    return st;
}

void rt_trace_path(char *buf, size_t size, const char *what) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, size, "%s/rill-test-trace-%d-%s.json", dir != NULL ? dir : "/tmp", (int)getpid(),
             what);
}

void rt_check_trace(const char *path, ...) {
    static const char python[] = "/usr/bin/python3";
    if (access(python, X_OK) != 0)
        skip();
    char cmd[8192];
    size_t n = (size_t)snprintf(cmd, sizeof cmd, "%s %s '%s'", python, RILL_TRACE_CHECK, path);
    va_list ap;
    va_start(ap, path);
    for (const char *e = va_arg(ap, const char *); e != NULL; e = va_arg(ap, const char *))
        n += (size_t)snprintf(cmd + n, sizeof cmd - n, " '%s'", e);
    va_end(ap);
    assert_true(n < sizeof cmd);
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("trace_check failed on %s (status %d): see its output above", path, rc);
}
