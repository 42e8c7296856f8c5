/* SPDX-License-Identifier: MIT */
/* fork(): the child of a process that used rill gets a fresh runtime (its first synchronize and
 * its rill_shutdown return), the parent's handles are invalid in the child except kernels, and
 * the parent is unaffected; a fork from a host function gives a child that never runs the
 * parent's work.
 *
 * A child reports through its exit status: 0 when every check held, else 1 after printing the
 * failed check and rill_last_error() to stderr. The parent waits for it with a deadline, so a
 * child that hangs fails the test instead of hanging it. */
#include "fixture.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* CHILD_MAY_START_THREADS and FORK_RACING_THREADS_SUPPORTED (what the sanitizers allow a fork):
 * fixture.h. */

/* A thread that AddressSanitizer is starting frees memory too, so under it a fork right after rill
 * started its workers waits until every other thread of the
 * process sleeps (state S in /proc/self/task/TID/stat) on two reads 2 ms apart, or 5 s passed. */
static bool other_threads_sleep(void) {
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return true;
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)syscall(SYS_gettid));
    bool all = true;
    for (struct dirent *d; all && (d = readdir(dir)) != NULL;) {
        if (d->d_name[0] == '.' || strcmp(d->d_name, self) == 0)
            continue;
        char path[300], stat[512] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", d->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread ended */
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = '\0';
        const char *paren = strrchr(stat, ')');
        all = paren == NULL || (paren[1] == ' ' && paren[2] == 'S');
    }
    closedir(dir);
    return all;
}

static void settle_before_fork(void) {
    if (FORK_RACING_THREADS_SUPPORTED)
        return;
    uint64_t deadline = rt_now_ns() + 5000000000ull;
    while (rt_now_ns() < deadline) {
        if (other_threads_sleep()) {
            rt_sleep_us(2000);
            if (other_threads_sleep())
                return;
        }
        rt_sleep_us(1000);
    }
}

#define CHILD_TIMEOUT_NS 20000000000ull

/* In a child: a failed check prints itself and ends the child with status 1. */
#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child, line %d: %s failed (last error: %s)\n", __LINE__, #cond,       \
                    rill_last_error());                                                            \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* Waits for the child with a deadline; returns its wait status, or -1 after killing a child that
 * did not end in time. */
static int wait_child(pid_t pid) {
    uint64_t deadline = rt_now_ns() + CHILD_TIMEOUT_NS;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        if (rt_now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        rt_sleep_us(1000);
    }
}

static void assert_child_succeeded(pid_t pid) {
    assert_true(pid > 0);
    int status = wait_child(pid);
    if (status == -1)
        fail_msg("the child did not end within %llu s (a hang)",
                 (unsigned long long)(CHILD_TIMEOUT_NS / 1000000000ull));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the child failed (status %d; its message is above)", status);
}

typedef struct add_args {
    float *x;
    float value;
} add_args;

static void add_kernel(const rill_block_ctx *ctx, const void *args) {
    add_args a;
    memcpy(&a, args, sizeof a);
    a.x[ctx->block_idx.x] += a.value;
}

static rill_kernel *make_add_kernel(void) {
    rill_kernel_desc desc = {.name = "add", .cpu = add_kernel};
    rill_kernel *k = NULL;
    RT_OK(rill_kernel_create(&desc, &k));
    return k;
}

/* The parent's state at the fork: streams, an event and memory, with work still pending. */
typedef struct parent_state {
    rill_stream *s;
    rill_event *e;
    rill_kernel *k;
    float *x;
    rt_gate gate;
} parent_state;

enum { N = 64 };

static void parent_begin(parent_state *p) {
    RT_OK(rill_stream_create(NULL, 0, &p->s));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &p->e));
    p->k = make_add_kernel();
    RT_OK(rill_malloc(NULL, N * sizeof(float), (void **)&p->x));
    RT_OK(rill_op_fill_f32(p->s, p->x, 1.0f, N));
    RT_OK(rill_stream_synchronize(p->s));
    rt_gate_reset(&p->gate);
    RT_OK(rill_launch_host_func(p->s, rt_gate_fn, &p->gate));
    add_args a = {p->x, 2.0f};
    rill_launch launch = {.grid = {N, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    RT_OK(rill_launch_kernel(p->s, p->k, &launch));
    RT_OK(rill_event_record(p->e, p->s));
    assert_true(rt_gate_wait_entered(&p->gate));
}

/* The parent goes on as if nothing happened: its pending work runs, once. */
static void parent_end(parent_state *p) {
    rt_gate_open(&p->gate);
    RT_OK(rill_event_synchronize(p->e));
    RT_OK(rill_stream_synchronize(p->s));
    assert_false(atomic_load(&p->gate.timed_out));
    for (int i = 0; i < N; i++)
        assert_true(p->x[i] == 3.0f);
    RT_OK(rill_free(p->x));
    RT_OK(rill_event_destroy(p->e));
    RT_OK(rill_stream_destroy(p->s));
    RT_OK(rill_kernel_destroy(p->k));
}

/* In a child: the library works, on a fresh runtime, with the kernel carried over. */
static void child_runs_work(rill_kernel *k) {
    CHILD_CHECK(rill_device_synchronize(NULL) == RILL_OK);
    rill_stream *s = NULL;
    CHILD_CHECK(rill_stream_create(NULL, 0, &s) == RILL_OK);
    float *y = NULL;
    CHILD_CHECK(rill_malloc(NULL, N * sizeof(float), (void **)&y) == RILL_OK);
    CHILD_CHECK(rill_op_fill_f32(s, y, 5.0f, N) == RILL_OK);
    add_args a = {y, 1.0f};
    rill_launch launch = {.grid = {N, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    CHILD_CHECK(rill_launch_kernel(s, k, &launch) == RILL_OK);
    rill_event *e = NULL;
    CHILD_CHECK(rill_event_create(RILL_EVENT_DEFAULT, &e) == RILL_OK);
    CHILD_CHECK(rill_event_record(e, s) == RILL_OK);
    CHILD_CHECK(rill_event_synchronize(e) == RILL_OK);
    CHILD_CHECK(rill_stream_synchronize(s) == RILL_OK);
    for (int i = 0; i < N; i++)
        CHILD_CHECK(y[i] == 6.0f);
    CHILD_CHECK(rill_free(y) == RILL_OK);
    CHILD_CHECK(rill_event_destroy(e) == RILL_OK);
    CHILD_CHECK(rill_stream_destroy(s) == RILL_OK);
    CHILD_CHECK(rill_device_synchronize(NULL) == RILL_OK);
}

/* rill.h (fork): "the child gets a fresh runtime": with work of the parent still pending at the
 * fork, the child's calls on the parent's streams, events and memory return
 * RILL_ERROR_INVALID_ARGUMENT instead of waiting for work that will never run there; new work
 * runs, with a kernel created before the fork; rill_shutdown returns. The parent's work runs as if
 * nothing happened. */
static void test_fork_child_gets_a_fresh_runtime_and_parent_is_unaffected(void **state) {
    (void)state;
    static parent_state p;
    parent_begin(&p);
    settle_before_fork();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        CHILD_CHECK(rill_stream_synchronize(p.s) == RILL_ERROR_INVALID_ARGUMENT);
        CHILD_CHECK(rill_stream_query(p.s) == RILL_ERROR_INVALID_ARGUMENT);
        CHILD_CHECK(rill_event_synchronize(p.e) == RILL_ERROR_INVALID_ARGUMENT);
        CHILD_CHECK(rill_launch_host_func(p.s, rt_gate_fn, &p.gate) == RILL_ERROR_INVALID_ARGUMENT);
        if (CHILD_MAY_START_THREADS) {
            CHILD_CHECK(rill_free(p.x) == RILL_ERROR_INVALID_ARGUMENT);
            child_runs_work(p.k);
            CHILD_CHECK(rill_kernel_destroy(p.k) == RILL_OK);
        }
        CHILD_CHECK(rill_shutdown() == RILL_OK);
        if (CHILD_MAY_START_THREADS) {
            /* and the library starts again after that */
            int count = 0;
            CHILD_CHECK(rill_device_count(&count) == RILL_OK && count >= 1);
            CHILD_CHECK(rill_shutdown() == RILL_OK);
        }
        _exit(0);
    }
    parent_end(&p);
    assert_child_succeeded(pid);
}

/* rill.h (fork): a child that only shuts down: rill_shutdown returns at once (the parent's pending
 * work is not the child's to wait for). */
static void test_fork_child_shutdown_returns_with_parent_work_pending(void **state) {
    (void)state;
    static parent_state p;
    parent_begin(&p);
    settle_before_fork();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        CHILD_CHECK(rill_shutdown() == RILL_OK);
        _exit(0);
    }
    parent_end(&p);
    assert_child_succeeded(pid);
}

/* ---- fork while other threads use rill ---- */

typedef struct churn {
    atomic_int stop;
    atomic_int rounds;
    atomic_int failures;
} churn;

static void *churn_thread(void *arg) {
    churn *c = arg;
    rill_kernel *k = make_add_kernel();
    float *x = NULL;
    if (rill_malloc(NULL, N * sizeof(float), (void **)&x) != RILL_OK)
        atomic_fetch_add(&c->failures, 1);
    add_args a = {x, 1.0f};
    rill_launch launch = {.grid = {N, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
    while (!atomic_load(&c->stop) && x != NULL) {
        rill_stream *s = NULL;
        rill_event *e = NULL;
        rill_status st = rill_stream_create(NULL, 0, &s);
        if (st == RILL_OK)
            st = rill_event_create(RILL_EVENT_DEFAULT, &e);
        if (st == RILL_OK)
            st = rill_launch_kernel(s, k, &launch);
        if (st == RILL_OK)
            st = rill_event_record(e, s);
        if (st == RILL_OK)
            st = rill_device_synchronize(NULL);
        if (e != NULL && rill_event_destroy(e) != RILL_OK)
            st = RILL_ERROR_INTERNAL;
        if (s != NULL && rill_stream_destroy(s) != RILL_OK)
            st = RILL_ERROR_INTERNAL;
        if (st != RILL_OK)
            atomic_fetch_add(&c->failures, 1);
        atomic_fetch_add(&c->rounds, 1);
    }
    if (x != NULL && rill_free(x) != RILL_OK)
        atomic_fetch_add(&c->failures, 1);
    if (rill_kernel_destroy(k) != RILL_OK)
        atomic_fetch_add(&c->failures, 1);
    return NULL;
}

/* fork() at any moment of other threads' rill calls gives a child whose fresh runtime works: the
 * parent's locks and lists are whole at the fork. */
static void test_fork_while_other_threads_use_rill_gives_a_working_child(void **state) {
    (void)state;
    if (!FORK_RACING_THREADS_SUPPORTED)
        skip();
    enum { THREADS = 2, FORKS = 12 };
    static churn c;
    memset(&c, 0, sizeof c);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, churn_thread, &c), 0);
    rill_kernel *k = make_add_kernel();
    for (int f = 0; f < FORKS; f++) {
        int seen = atomic_load(&c.rounds);
        while (atomic_load(&c.rounds) < seen + 2)
            sched_yield();
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            if (CHILD_MAY_START_THREADS)
                child_runs_work(k);
            CHILD_CHECK(rill_shutdown() == RILL_OK);
            _exit(0);
        }
        assert_child_succeeded(pid);
    }
    atomic_store(&c.stop, 1);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(atomic_load(&c.failures), 0);
    RT_OK(rill_kernel_destroy(k));
}

/* ---- fork from a host function ---- */

typedef struct forking_fn {
    pid_t pid;
    int *counter; /* device memory: shared with the child */
} forking_fn;

static void fork_in_host_fn(void *user_data) {
    forking_fn *f = user_data;
    f->pid = fork();
    /* The child returns from the host function too, as a careless program would. */
}

static void count_in_device_memory(void *user_data) {
    forking_fn *f = user_data;
    __atomic_fetch_add(f->counter, 1, __ATOMIC_SEQ_CST);
}

/* rill.h (fork): a child forked inside a host function must exec or _exit before the function
 * returns; if it returns, the child's copy of the worker ends there, and never runs the parent's
 * work (here a host function that counts in device memory, which the child shares). */
static void test_fork_in_host_function_child_never_runs_parent_work(void **state) {
    (void)state;
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(NULL, 0, &s));
    static forking_fn f;
    RT_OK(rill_malloc(NULL, sizeof(int), (void **)&f.counter));
    *f.counter = 0;
    f.pid = -1;
    fflush(NULL);
    RT_OK(rill_launch_host_func(s, fork_in_host_fn, &f));
    RT_OK(rill_launch_host_func(s, count_in_device_memory, &f));
    RT_OK(rill_stream_synchronize(s));
    assert_true(f.pid > 0);
    /* Only the child's end counts, not its status: a child that ends this way exits through the
     * process's exit handlers, where a leak checker may report what it inherited. */
    int status = wait_child(f.pid);
    if (status == -1)
        fail_msg("the child forked in a host function did not end (a hang)");
    assert_int_equal(__atomic_load_n(f.counter, __ATOMIC_SEQ_CST), 1);
    RT_OK(rill_free(f.counter));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_child_gets_a_fresh_runtime_and_parent_is_unaffected),
        cmocka_unit_test(test_fork_child_shutdown_returns_with_parent_work_pending),
        cmocka_unit_test(test_fork_while_other_threads_use_rill_gives_a_working_child),
        cmocka_unit_test(test_fork_in_host_function_child_never_runs_parent_work),
    };
    return RT_RUN(tests);
}
