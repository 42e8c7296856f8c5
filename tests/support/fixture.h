/* SPDX-License-Identifier: MIT */
/* Test fixtures: common includes for cmocka tests, a deadline helper and a
 * way to assert a status together with rill_last_error(). No assertions of
 * its own live here beyond the macros; tests own their checks. */
#ifndef RILL_TEST_FIXTURE_H
#define RILL_TEST_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* after the headers above, which it needs and does not include */
#include <cmocka.h>

#include "rill.h"

/* fork() under the sanitizers (tests/unit/test_fork.c).
 * CHILD_MAY_START_THREADS: ThreadSanitizer cannot follow a child of a
 * multithreaded process that starts threads (it finds the ids of the
 * parent's threads taken), so under it a child checks only what starts no
 * thread (a call that builds the child's runtime starts its workers).
 * FORK_RACING_THREADS_SUPPORTED: GCC 12's AddressSanitizer does not take
 * its allocator's locks around fork(), so a child forked while another
 * thread is inside malloc or free (or while ASan starts a thread, which
 * frees) may wait forever on the first allocation of that size; glibc's
 * malloc takes its locks, so tests that fork while other threads run rill
 * run in the other builds. */
#if defined(__SANITIZE_THREAD__)
#define CHILD_MAY_START_THREADS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILD_MAY_START_THREADS 0
#endif
#endif
#ifndef CHILD_MAY_START_THREADS
#define CHILD_MAY_START_THREADS 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FORK_RACING_THREADS_SUPPORTED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORK_RACING_THREADS_SUPPORTED 0
#endif
#endif
#ifndef FORK_RACING_THREADS_SUPPORTED
#define FORK_RACING_THREADS_SUPPORTED 1
#endif

/* Asserts that `call` returns RILL_OK; on failure prints rill_last_error(). */
#define RT_OK(call)                                                                                \
    do {                                                                                           \
        rill_status rt_st_ = (call);                                                               \
        if (rt_st_ != RILL_OK)                                                                     \
            fail_msg("%s returned %s: %s", #call, rill_status_name(rt_st_), rill_last_error());    \
    } while (0)

/* Asserts that `call` returns `status` and leaves a non-empty sentence. */
#define RT_STATUS(status, call)                                                                    \
    do {                                                                                           \
        rill_status rt_st_ = (call);                                                               \
        if (rt_st_ != (status))                                                                    \
            fail_msg("%s returned %s, expected %s (%s)", #call, rill_status_name(rt_st_),          \
                     rill_status_name(status), rill_last_error());                                 \
        if ((status) != RILL_OK && (status) != RILL_NOT_READY)                                     \
            assert_true(rill_last_error()[0] != '\0');                                             \
    } while (0)

/* Monotonic clock in nanoseconds. */
uint64_t rt_now_ns(void);
/* Sleeps the calling thread for `us` microseconds. */
void rt_sleep_us(unsigned us);
/* Busy-waits `us` microseconds (keeps a worker occupied in a kernel). */
void rt_spin_us(unsigned us);
/* Runs the cmocka group, passing argv[1] as a test filter when given. */
int rt_run(const char *group_name, const struct CMUnitTest *tests, size_t count, int argc,
           char **argv);
/* Group teardown helper: calls rill_shutdown so leak checkers see leaks. */
int rt_teardown_shutdown(void **state);

/* ---- values for numeric tests ---- */

/* count floats from malloc (at least one), failing the test when there
 * are none. */
float *rt_floats(size_t count);
/* Deterministic values in [-1, 1), the same for the same seed. */
void rt_fill_uniform(float *x, size_t count, uint64_t seed);

/* ---- randomized stress tests ---- */

/* xorshift64*: the next number of the sequence whose state is *state (not 0). */
uint64_t rt_next_random(uint64_t *state);
/* RILL_STRESS_SEED (decimal, or hexadecimal with 0x) when set, else
 * fallback; printed, so that a failing run can be repeated. */
uint64_t rt_stress_seed(uint64_t fallback);
/* Runs op(states + i * stride) on n threads at once, each until it has run
 * iterations times or run_ns has passed (read every 64 operations), and
 * joins them. */
void rt_stress_threads(int n, void *states, size_t stride, void (*op)(void *state), int iterations,
                       uint64_t run_ns);

/* The failures of a test whose threads go on after one: how many, and the
 * sentence of the first (written once, by the thread that claims it).
 * Zero-initialised. */
typedef struct rt_failures {
    atomic_int count;
    atomic_int claimed;
    char first[1024];
} rt_failures;
void rt_failure(rt_failures *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fails the test, with the first sentence, when any failure was noted. */
void rt_failures_assert_none(rt_failures *f);

/* A number larger than every ticket taken before, in any thread: tickets
 * taken by host functions and kernels tell the order in which they ran. */
uint64_t rt_take_ticket(void);

/* A gate is a host function (rt_gate_fn, user_data the gate) that holds
 * its stream, and the worker running it, until the test opens it, or until
 * RT_GATE_TIMEOUT_NS passes (timed_out is then set, so a broken test fails
 * instead of hanging). end_ticket is taken as the function returns. */
#define RT_GATE_TIMEOUT_NS 10000000000ull
typedef struct rt_gate {
    atomic_int entered;
    atomic_int open;
    atomic_int timed_out;
    atomic_int done;
    _Atomic uint64_t end_ticket;
} rt_gate;

void rt_gate_reset(rt_gate *g);
void rt_gate_fn(void *gate);
void rt_gate_open(rt_gate *g);
/* Waits (up to RT_GATE_TIMEOUT_NS) until the gate's function has started;
 * returns whether it did. */
bool rt_gate_wait_entered(rt_gate *g);

/* Launches on s a one-block kernel that runs rt_gate_fn(g): a gate that
 * the library sees as a kernel (which finishes on its own), not as a host
 * function (which may wait for anything). Returns the launch's status. */
rill_status rt_launch_gate_kernel(rill_stream *s, rt_gate *g);

/* A path for a test's trace: $TMPDIR (or /tmp)/rill-test-trace-PID-what.json. */
void rt_trace_path(char *buf, size_t size, const char *what);
/* Runs tests/unit/trace_check.py (with Debian's python3; the test is
 * skipped without it) on path with the expectations that follow, ending
 * with NULL; fails the test with the checker's output when one does not
 * hold. */
void rt_check_trace(const char *path, ...);

#define RT_RUN(tests) rt_run(__FILE__, tests, sizeof(tests) / sizeof((tests)[0]), argc, argv)

#endif
