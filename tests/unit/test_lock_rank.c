/* SPDX-License-Identifier: MIT */
/* Lock ranks (src/platform/lock_rank.h): in debug builds, taking a lock of an equal or lower rank
 * than one the thread holds aborts with a message naming both, unless the two are siblings taken
 * with a sibling call; locks taken in rank order, and unranked locks, pass. In release builds the
 * check is compiled out, and these tests are skipped.
 *
 * A wrong order runs in a child process (no rill thread runs: the runtime is never started), which
 * the parent expects to end by SIGABRT with the message on its stderr. */
#include "fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/thread.h"

#define CHILD_DEADLINE_NS 10000000000ull

typedef void (*child_fn)(void);

/* Runs fn in a child whose stderr goes to a pipe; returns its wait status (or -1 when it did not
 * end within the deadline, after killing it) and its first bytes of stderr in err. */
static int run_child(child_fn fn, char *err, size_t cap) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    int status = -1;
    uint64_t deadline = rt_now_ns() + CHILD_DEADLINE_NS;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (rt_now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            status = -1;
            break;
        }
        usleep(1000);
    }
    ssize_t n = read(fds[0], err, cap - 1);
    err[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    return status;
}

static bool aborted(int status) {
    return status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void skip_in_release(void) {
    if (!RILL_LOCK_RANKS)
        skip();
}

/* ---- in order ---- */

/* Every ranked kind of lock, taken in rank order and released in any order, passes; so do
 * unranked locks, whatever the thread holds. */
static void test_lock_rank_in_rank_order_passes(void **state) {
    (void)state;
    skip_in_release();
    rill__mutex runtime, device, unranked;
    rill__spinlock event, queue;
    rill__mutex_init_ranked(&runtime, RILL__RANK_RUNTIME);
    rill__mutex_init_ranked(&device, RILL__RANK_DEVICE);
    rill__mutex_init(&unranked);
    rill__spinlock_init(&event, RILL__RANK_EVENT);
    rill__spinlock_init(&queue, RILL__RANK_QUEUE);
    rill__mutex_lock(&runtime);
    rill__spinlock_lock(&event);
    rill__spinlock_lock(&queue);
    rill__mutex_lock(&unranked);
    rill__spinlock_unlock(&event); /* not the last taken */
    rill__mutex_lock(&device);
    rill__mutex_unlock(&device);
    rill__mutex_unlock(&unranked);
    rill__spinlock_unlock(&queue);
    rill__mutex_unlock(&runtime);
    /* Released: the same locks again, from the start. */
    rill__spinlock_lock(&event);
    rill__spinlock_unlock(&event);
    rill__mutex_lock(&runtime);
    rill__mutex_unlock(&runtime);
    rill__mutex_destroy(&runtime);
    rill__mutex_destroy(&device);
    rill__mutex_destroy(&unranked);
}

/* ---- out of order ---- */

static void take_lower_after_higher(void) {
    rill__mutex device, runtime;
    rill__mutex_init_ranked(&device, RILL__RANK_DEVICE);
    rill__mutex_init_ranked(&runtime, RILL__RANK_RUNTIME);
    rill__mutex_lock(&device);
    rill__mutex_lock(&runtime); /* rt->lock comes before dev->lock */
}

/* A lock of a lower rank than one held aborts, naming both. */
static void test_lock_rank_lower_after_higher_aborts(void **state) {
    (void)state;
    skip_in_release();
    char err[512];
    int status = run_child(take_lower_after_higher, err, sizeof err);
    assert_true(aborted(status));
    assert_non_null(strstr(err, "lock order broken: taking rt->lock"));
    assert_non_null(strstr(err, "while holding dev->lock"));
}

static void take_spin_after_mutex(void) {
    rill__mutex stream_lock;
    rill__spinlock event;
    rill__mutex_init_ranked(&stream_lock, RILL__RANK_STREAM);
    rill__spinlock_init(&event, RILL__RANK_EVENT);
    rill__mutex_lock(&stream_lock);
    rill__spinlock_lock(&event);
}

/* Spin locks are checked as mutexes are. */
static void test_lock_rank_spin_lock_after_higher_mutex_aborts(void **state) {
    (void)state;
    skip_in_release();
    char err[512];
    assert_true(aborted(run_child(take_spin_after_mutex, err, sizeof err)));
    assert_non_null(strstr(err, "taking event->lock"));
}

static void take_two_devices(void) {
    rill__mutex a, b;
    rill__mutex_init_ranked(&a, RILL__RANK_DEVICE);
    rill__mutex_init_ranked(&b, RILL__RANK_DEVICE);
    rill__mutex_lock(&a);
    rill__mutex_lock(&b);
}

static void take_two_devices_as_siblings(void) {
    rill__mutex a, b;
    rill__mutex_init_ranked(&a, RILL__RANK_DEVICE);
    rill__mutex_init_ranked(&b, RILL__RANK_DEVICE);
    rill__mutex_lock(&a);
    rill__mutex_lock_sibling(&b);
    rill__mutex_unlock(&b);
    rill__mutex_unlock(&a);
}

/* Two locks of one rank: an abort, unless the second is taken as a sibling. */
static void test_lock_rank_equal_rank_aborts_unless_sibling(void **state) {
    (void)state;
    skip_in_release();
    char err[512];
    assert_true(aborted(run_child(take_two_devices, err, sizeof err)));
    assert_non_null(strstr(err, "taking dev->lock"));
    int status = run_child(take_two_devices_as_siblings, err, sizeof err);
    assert_true(status != -1 && WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(err, "");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_rank_in_rank_order_passes),
        cmocka_unit_test(test_lock_rank_lower_after_higher_aborts),
        cmocka_unit_test(test_lock_rank_spin_lock_after_higher_mutex_aborts),
        cmocka_unit_test(test_lock_rank_equal_rank_aborts_unless_sibling),
    };
    return RT_RUN(tests);
}
