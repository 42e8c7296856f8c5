/* SPDX-License-Identifier: MIT */
/* Traces: rill_trace_start/stop and RILL_TRACE write Chrome trace-event
 * JSON with a track per stream and per compute unit, a slice per command
 * (name, grid, bytes), arrows from awaited work to the waits, host slices
 * for blocking calls, memory counters, graph launches with their nodes and
 * capture instants; bad paths fail at start with a sentence; recording
 * from many threads while traces start and stop is safe.
 *
 * Each trace is parsed by tests/unit/trace_check.py (Debian's python3),
 * which checks the expectations the test names; without python3 the test
 * is skipped. */
#include "fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* CHILD_MAY_START_THREADS and FORK_RACING_THREADS_SUPPORTED: fixture.h. */

/* ---- kernels ---- */

typedef struct spin_args {
    unsigned us;
} spin_args;

static void spin_body(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    rt_spin_us(((const spin_args *)args)->us);
}

static rill_kernel *make_kernel(const char *name) {
    rill_kernel *k;
    rill_kernel_desc desc = {.name = name, .cpu = spin_body};
    RT_OK(rill_kernel_create(&desc, &k));
    return k;
}

static void launch(rill_stream *s, rill_kernel *k, unsigned blocks, unsigned us, void *mem,
                   size_t bytes) {
    spin_args a = {us};
    rill_access acc = {mem, bytes, RILL_READ_WRITE};
    rill_launch l = {.grid = {blocks, 1, 1},
                     .block = {1, 1, 1},
                     .args = &a,
                     .args_size = sizeof a,
                     .accesses = mem != NULL ? &acc : NULL,
                     .num_accesses = mem != NULL ? 1 : 0};
    RT_OK(rill_launch_kernel(s, k, &l));
}

/* ---- tests ---- */

/* Two named streams ordered by an event, a tagged stream, memory, a
 * blocking copy and a captured graph: every kind of record, in one file. */
static void test_trace_has_tracks_slices_arrows_counters(void **state) {
    (void)state;
    char path[512];
    rt_trace_path(path, sizeof path, "full");
    uint64_t t_lo = rt_now_ns();
    RT_OK(rill_trace_start(path));
    rill_stream *p, *c, *t;
    RT_OK(rill_stream_create(NULL, 0, &p));
    RT_OK(rill_stream_create(NULL, 0, &c));
    RT_OK(rill_stream_set_name(p, "producer"));
    RT_OK(rill_stream_set_name(c, "consumer"));
    RT_OK(rill_stream_get_tagged(NULL, "tagged-io", 0, &t));
    rill_kernel *scale = make_kernel("scale"), *shift = make_kernel("shift");
    void *buf;
    RT_OK(rill_malloc(NULL, 4096, &buf));
    rill_event *e;
    RT_OK(rill_event_create(0, &e));
    /* scale runs long enough that the wait below is queued, not met */
    launch(p, scale, 4, 20000, buf, 4096);
    RT_OK(rill_event_record(e, p));
    RT_OK(rill_stream_wait_event(c, e));
    launch(c, shift, 1, 100, buf, 4096);
    launch(t, shift, 1, 100, NULL, 0);
    void *tmp;
    RT_OK(rill_malloc_async(1 << 20, c, &tmp));
    RT_OK(rill_free_async(tmp, c));
    RT_OK(rill_stream_synchronize(c));
    char host[64];
    RT_OK(rill_memcpy(host, buf, sizeof host));
    /* a captured graph, replayed */
    rill_graph *g;
    rill_graph_exec *x;
    RT_OK(rill_stream_begin_capture(p, RILL_CAPTURE_GLOBAL));
    launch(p, scale, 1, 50, buf, 4096);
    RT_OK(rill_stream_end_capture(p, &g));
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_graph_launch(x, p));
    RT_OK(rill_device_synchronize(NULL));
    uint64_t t_hi = rt_now_ns();
    RT_OK(rill_trace_stop());
    /* the times are CLOCK_MONOTONIC's, in microseconds, whatever the
     * recorder counted in */
    char within[96];
    snprintf(within, sizeof within, "within=%.3f|%.3f", (double)t_lo / 1e3, (double)t_hi / 1e3);
    rt_check_trace(
        path, within, "track=stream producer", "track=stream consumer", "track=stream tagged-io",
        "track=compute unit 0 (device 0)", "slice=stream producer|scale|grid=[4,1,1]|bytes=4096",
        "slice=stream consumer|shift|grid=[1,1,1]|bytes=4096", "slice=stream consumer|wait",
        "slice=stream tagged-io|shift", "flow=stream producer|stream consumer",
        "counter=memory (device 0)|allocated", "counter=memory (device 0)|reserved",
        "host=rill_stream_synchronize", "host=rill_memcpy", "host=rill_device_synchronize",
        "instant=stream producer|capture begin", "instant=stream producer|capture end",
        "slice=stream producer|graph launch", "nested=scale", NULL);
    remove(path);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_free(buf));
    RT_OK(rill_kernel_destroy(scale));
    RT_OK(rill_kernel_destroy(shift));
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(c));
}

/* An interprocess event draws an arrow from its record to the waits it
 * released, named the same in every process (here the exporter and an
 * opener of its handle in one process, so one trace holds both ends). */
static void test_trace_ipc_event_arrow(void **state) {
    (void)state;
    char path[512];
    rt_trace_path(path, sizeof path, "ipc");
    RT_OK(rill_trace_start(path));
    rill_stream *p, *c;
    RT_OK(rill_stream_create(NULL, 0, &p));
    RT_OK(rill_stream_create(NULL, 0, &c));
    RT_OK(rill_stream_set_name(p, "ipc-producer"));
    RT_OK(rill_stream_set_name(c, "ipc-consumer"));
    rill_event *e, *opened;
    RT_OK(rill_event_create(RILL_EVENT_INTERPROCESS, &e));
    rill_ipc_event_handle h;
    RT_OK(rill_event_ipc_handle(e, &h));
    RT_OK(rill_event_open_ipc_handle(&h, &opened));
    rill_kernel *k = make_kernel("before-record");
    launch(p, k, 1, 20000, NULL, 0); /* the wait below is queued, not met */
    RT_OK(rill_event_record(e, p));
    RT_OK(rill_stream_wait_event(c, opened));
    launch(c, k, 1, 10, NULL, 0);
    RT_OK(rill_stream_synchronize(c));
    RT_OK(rill_trace_stop());
    rt_check_trace(path, "ipcflow=stream ipc-producer|stream ipc-consumer", NULL);
    remove(path);
    RT_OK(rill_event_destroy(opened));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(c));
}

/* rill.h: a wait on an event whose work already completed enqueues nothing,
 * so the trace shows no wait and no arrow for it; a wait on pending work
 * shows both. */
static void test_trace_wait_on_completed_event_draws_nothing(void **state) {
    (void)state;
    char path[512];
    rt_trace_path(path, sizeof path, "completed");
    RT_OK(rill_trace_start(path));
    rill_stream *p, *done, *pending;
    RT_OK(rill_stream_create(NULL, 0, &p));
    RT_OK(rill_stream_create(NULL, 0, &done));
    RT_OK(rill_stream_create(NULL, 0, &pending));
    RT_OK(rill_stream_set_name(p, "recorder"));
    RT_OK(rill_stream_set_name(done, "after-completion"));
    RT_OK(rill_stream_set_name(pending, "while-pending"));
    rill_kernel *k = make_kernel("work");
    rill_event *e;
    RT_OK(rill_event_create(0, &e));
    launch(p, k, 1, 10, NULL, 0);
    RT_OK(rill_event_record(e, p));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_stream_wait_event(done, e));
    launch(done, k, 1, 10, NULL, 0);
    launch(p, k, 1, 20000, NULL, 0); /* the wait below is queued, not met */
    RT_OK(rill_event_record(e, p));
    RT_OK(rill_stream_wait_event(pending, e));
    launch(pending, k, 1, 10, NULL, 0);
    RT_OK(rill_device_synchronize(NULL));
    RT_OK(rill_trace_stop());
    rt_check_trace(
        path, "slice=stream after-completion|work", "!slice=stream after-completion|wait",
        "!flow=stream recorder|stream after-completion", "slice=stream while-pending|wait",
        "flow=stream recorder|stream while-pending", NULL);
    remove(path);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(p));
    RT_OK(rill_stream_destroy(done));
    RT_OK(rill_stream_destroy(pending));
}

/* A stream renamed while a trace records takes its new name; work before
 * the trace started is not in it. */
static void test_trace_renamed_stream_and_later_start(void **state) {
    (void)state;
    char path[512];
    rt_trace_path(path, sizeof path, "rename");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, "before"));
    rill_kernel *early = make_kernel("early"), *late = make_kernel("late");
    launch(s, early, 1, 10, NULL, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_start(path));
    launch(s, late, 1, 10, NULL, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_set_name(s, "after"));
    launch(s, late, 1, 10, NULL, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_stop());
    rt_check_trace(path, "track=stream after", "count=stream after|late|2", NULL);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    bool early_seen = false;
    while (fgets(line, sizeof line, f) != NULL)
        early_seen |= strstr(line, "\"early\"") != NULL;
    fclose(f);
    assert_false(early_seen);
    remove(path);
    RT_OK(rill_kernel_destroy(early));
    RT_OK(rill_kernel_destroy(late));
    RT_OK(rill_stream_destroy(s));
}

/* rill_thread_exchange_op_name: the commands a thread submits while it
 * names an op are named after it, with the kernel or kind after it; the
 * previous name comes back; a host function starts with none. */
static const char *op_seen_in_host_fn = "unset";

static void read_op_name(void *user_data) {
    (void)user_data;
    const char *name = "aten::inner";
    RT_OK(rill_thread_exchange_op_name(&name)); /* the worker's own: none */
    op_seen_in_host_fn = name;
}

static void test_trace_names_commands_after_ops(void **state) {
    (void)state;
    char path[512];
    rt_trace_path(path, sizeof path, "ops");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, "ops"));
    rill_kernel *k = make_kernel("body");
    void *mem;
    RT_OK(rill_malloc(NULL, 64, &mem));
    RT_OK(rill_trace_start(path));
    const char *name = "aten::addmm";
    RT_OK(rill_thread_exchange_op_name(&name));
    assert_null(name); /* a thread starts with none */
    launch(s, k, 1, 10, NULL, 0);
    RT_OK(rill_memset_async(mem, 0, 64, s));
    RT_OK(rill_launch_host_func(s, read_op_name, NULL));
    name = NULL;
    RT_OK(rill_thread_exchange_op_name(&name));
    assert_string_equal(name, "aten::addmm");
    launch(s, k, 1, 10, NULL, 0); /* named after its kernel again */
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_stop());
    assert_null(op_seen_in_host_fn);
    rt_check_trace(path, "slice=stream ops|aten::addmm (body)",
                   "slice=stream ops|aten::addmm (memset)",
                   "slice=stream ops|aten::addmm (host function)", "count=stream ops|body|1", NULL);
    assert_int_equal(rill_thread_exchange_op_name(NULL), RILL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(rill_last_error(), "rill_thread_exchange_op_name: name is NULL"));
    remove(path);
    RT_OK(rill_free(mem));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_stream_destroy(s));
}

static void test_trace_bad_input(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_trace_start(NULL));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_trace_start(""));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_trace_start("/nonexistent-dir-of-rill/t.json"));
    assert_non_null(strstr(rill_last_error(), "cannot open '/nonexistent-dir-of-rill/t.json'"));
    assert_non_null(strstr(rill_last_error(), "No such file or directory"));
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_trace_start("/"));
    char path[512];
    rt_trace_path(path, sizeof path, "twice");
    RT_OK(rill_trace_start(path));
    RT_STATUS(RILL_ERROR_NOT_PERMITTED, rill_trace_start(path));
    assert_non_null(strstr(rill_last_error(), "rill_trace_stop"));
    RT_OK(rill_trace_stop());
    RT_OK(rill_trace_stop());   /* none records: nothing to do */
    rt_check_trace(path, NULL); /* an empty trace is still a trace */
    remove(path);
}

/* ---- many threads while traces start and stop ---- */

#define THREADS    4
#define PER_THREAD 300
static atomic_int go;

static void *launcher(void *arg) {
    rill_kernel *k = arg;
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    while (!atomic_load(&go))
        ;
    for (int i = 0; i < PER_THREAD; i++) {
        launch(s, k, (unsigned)(i % 3) + 1, 0, NULL, 0);
        if (i % 50 == 0)
            RT_OK(rill_stream_synchronize(s));
    }
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_destroy(s));
    return NULL;
}

static void test_trace_threads(void **state) {
    (void)state;
    char path[512];
    rt_trace_path(path, sizeof path, "threads");
    rill_kernel *k = make_kernel("tiny");
    pthread_t th[THREADS];
    /* whole: every launch of every thread lands in the trace */
    RT_OK(rill_trace_start(path));
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, launcher, k), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    RT_OK(rill_trace_stop());
    char count[64];
    /* the streams' names are their ids; count over all of them */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int tiny_on_streams = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, "\"name\":\"tiny\",\"cat\":\"kernel\"") != NULL &&
            strstr(line, "\"tid\":100") != NULL)
            tiny_on_streams++;
    fclose(f);
    assert_int_equal(tiny_on_streams, THREADS * PER_THREAD);
    snprintf(count, sizeof count, "track=compute unit 0 (device 0)");
    rt_check_trace(path, count, "host=rill_stream_synchronize", NULL);
    /* traces starting and stopping while the threads launch */
    atomic_store(&go, 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, launcher, k), 0);
    atomic_store(&go, 1);
    for (int round = 0; round < 5; round++) {
        RT_OK(rill_trace_start(path));
        rt_sleep_us(2000);
        RT_OK(rill_trace_stop());
        rt_check_trace(path, NULL);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    remove(path);
    RT_OK(rill_kernel_destroy(k));
}

/* RILL_TRACE starts a trace when the library starts; rill_shutdown writes
 * it. A trace still recording at exit is written by the exit. */
static void test_trace_env_and_exit(void **state) {
    (void)state;
    char path[512], exit_path[512];
    rt_trace_path(path, sizeof path, "env");
    rt_trace_path(exit_path, sizeof exit_path, "exit");
    RT_OK(rill_shutdown());
    setenv("RILL_TRACE", path, 1);
    rill_kernel *k = make_kernel("from_env");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, "env"));
    launch(s, k, 2, 10, NULL, 0);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_shutdown());
    unsetenv("RILL_TRACE");
    rt_check_trace(path, "slice=stream env|from_env|grid=[2,1,1]", NULL);
    remove(path);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        rill_kernel *ck;
        rill_kernel_desc desc = {.name = "at_exit", .cpu = spin_body};
        spin_args a = {10};
        rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
        if (rill_trace_start(exit_path) != RILL_OK || rill_kernel_create(&desc, &ck) != RILL_OK ||
            rill_launch_kernel(NULL, ck, &l) != RILL_OK || rill_device_synchronize(NULL) != RILL_OK)
            _exit(3);
        exit(0); /* no rill_trace_stop, no rill_shutdown */
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    rt_check_trace(exit_path, "slice=stream default|at_exit|grid=[1,1,1]", NULL);
    remove(exit_path);

    /* RILL_TRACE naming a path that cannot be written, in a fresh process
     * (RILL_TRACE is read once per process): the library starts and works,
     * says why on stderr, and exits cleanly */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dup2(fds[1], 2);
        setenv("RILL_TRACE", "/nonexistent-dir-of-rill/t.json", 1);
        execl("/proc/self/exe", "unit_test_trace", "--bad-env-child", (char *)NULL);
        _exit(4);
    }
    close(fds[1]);
    char err[1024] = {0};
    size_t got = 0;
    ssize_t n;
    while (got < sizeof err - 1 && (n = read(fds[0], err + got, sizeof err - 1 - got)) > 0)
        got += (size_t)n;
    close(fds[0]);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(strstr(err, "rill: RILL_TRACE: cannot open '/nonexistent-dir-of-rill/t.json' "
                                "for writing (No such file or directory); no trace is written"));
}

/* A fork while the parent traces (and its workers record): the parent's
 * trace stays the parent's; the child may start one of its own. */
static void test_trace_fork_child_traces_on_its_own(void **state) {
    (void)state;
    if (!FORK_RACING_THREADS_SUPPORTED)
        skip();
    char path[512], child_path[512];
    rt_trace_path(path, sizeof path, "fork-parent");
    rt_trace_path(child_path, sizeof child_path, "fork-child");
    rill_kernel *k = make_kernel("in_parent");
    rill_stream *s;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_stream_set_name(s, "parent"));
    RT_OK(rill_trace_start(path));
    for (int i = 0; i < 200; i++)
        launch(s, k, 1, 0, NULL, 0);
    pid_t child = fork(); /* while the workers may be recording */
    assert_true(child >= 0);
    if (child == 0) {
        rill_kernel *ck;
        rill_kernel_desc desc = {.name = "in_child", .cpu = spin_body};
        spin_args a = {10};
        rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args = &a, .args_size = sizeof a};
        if (!CHILD_MAY_START_THREADS) /* a trace of nothing, collected past the parent's buffers */
            _exit(rill_trace_start(child_path) != RILL_OK || rill_trace_stop() != RILL_OK ? 3 : 0);
        if (rill_trace_start(child_path) != RILL_OK || rill_kernel_create(&desc, &ck) != RILL_OK ||
            rill_launch_kernel(NULL, ck, &l) != RILL_OK ||
            rill_device_synchronize(NULL) != RILL_OK || rill_trace_stop() != RILL_OK)
            _exit(3);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_trace_stop());
    rt_check_trace(path, "count=stream parent|in_parent|200", NULL);
    if (CHILD_MAY_START_THREADS)
        rt_check_trace(child_path, "slice=stream default|in_child|grid=[1,1,1]", NULL);
    else
        rt_check_trace(child_path, NULL);
    FILE *f = fopen(child_path, "r");
    assert_non_null(f);
    char line[4096];
    bool parent_seen = false;
    while (fgets(line, sizeof line, f) != NULL)
        parent_seen |= strstr(line, "\"in_parent\"") != NULL;
    fclose(f);
    assert_false(parent_seen);
    remove(path);
    remove(child_path);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(k));
}

/* The fresh process of test_trace_env_and_exit: works with a RILL_TRACE it
 * cannot write. */
static int bad_env_child(void) {
    int count = 0;
    rill_kernel *k = make_kernel("unwritten");
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    spin_args a = {10};
    l.args = &a;
    l.args_size = sizeof a;
    if (rill_device_count(&count) != RILL_OK || count < 1 ||
        rill_launch_kernel(NULL, k, &l) != RILL_OK || rill_device_synchronize(NULL) != RILL_OK ||
        rill_kernel_destroy(k) != RILL_OK || rill_shutdown() != RILL_OK)
        return 3;
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--bad-env-child") == 0)
        return bad_env_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_has_tracks_slices_arrows_counters),
        cmocka_unit_test(test_trace_renamed_stream_and_later_start),
        cmocka_unit_test(test_trace_ipc_event_arrow),
        cmocka_unit_test(test_trace_wait_on_completed_event_draws_nothing),
        cmocka_unit_test(test_trace_names_commands_after_ops),
        cmocka_unit_test(test_trace_bad_input),
        cmocka_unit_test(test_trace_threads),
        cmocka_unit_test(test_trace_fork_child_traces_on_its_own),
        cmocka_unit_test(test_trace_env_and_exit),
    };
    return RT_RUN(tests);
}
