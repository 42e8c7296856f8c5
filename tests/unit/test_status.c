/* SPDX-License-Identifier: MIT */
/* Status names, status sentences and the per-thread last-error sentence. */
#include "fixture.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/thread.h"
#include "util/alloc.h"
#include "util/status.h"

/* ThreadSanitizer would report the locked mutex that
 * test_broken_lock_aborts_saying_why destroys on purpose (in a child, before it aborts) instead
 * of letting pthread_mutex_destroy fail; nothing else here destroys a locked mutex. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) {
    return "report_destroy_locked=0";
}

static const struct {
    rill_status status;
    const char *name;
} all_statuses[] = {
    {RILL_OK, "RILL_OK"},
    {RILL_NOT_READY, "RILL_NOT_READY"},
    {RILL_ERROR_INVALID_ARGUMENT, "RILL_ERROR_INVALID_ARGUMENT"},
    {RILL_ERROR_OUT_OF_MEMORY, "RILL_ERROR_OUT_OF_MEMORY"},
    {RILL_ERROR_NO_DEVICE, "RILL_ERROR_NO_DEVICE"},
    {RILL_ERROR_DEVICE_MISMATCH, "RILL_ERROR_DEVICE_MISMATCH"},
    {RILL_ERROR_NOT_SUPPORTED, "RILL_ERROR_NOT_SUPPORTED"},
    {RILL_ERROR_NOT_PERMITTED, "RILL_ERROR_NOT_PERMITTED"},
    {RILL_ERROR_TIMING_DISABLED, "RILL_ERROR_TIMING_DISABLED"},
    {RILL_ERROR_NOT_RECORDED, "RILL_ERROR_NOT_RECORDED"},
    {RILL_ERROR_KERNEL_FAILED, "RILL_ERROR_KERNEL_FAILED"},
    {RILL_ERROR_CAPTURE_UNSUPPORTED, "RILL_ERROR_CAPTURE_UNSUPPORTED"},
    {RILL_ERROR_CAPTURE_INVALIDATED, "RILL_ERROR_CAPTURE_INVALIDATED"},
    {RILL_ERROR_CAPTURE_UNJOINED, "RILL_ERROR_CAPTURE_UNJOINED"},
    {RILL_ERROR_CAPTURE_UNMATCHED, "RILL_ERROR_CAPTURE_UNMATCHED"},
    {RILL_ERROR_CAPTURE_ISOLATION, "RILL_ERROR_CAPTURE_ISOLATION"},
    {RILL_ERROR_CAPTURE_WRONG_THREAD, "RILL_ERROR_CAPTURE_WRONG_THREAD"},
    {RILL_ERROR_IPC, "RILL_ERROR_IPC"},
    {RILL_ERROR_INTERNAL, "RILL_ERROR_INTERNAL"},
    {RILL_ERROR_DEVICE_LOST, "RILL_ERROR_DEVICE_LOST"},
};
#define NUM_STATUSES (sizeof(all_statuses) / sizeof(all_statuses[0]))

/* rill_status_name(status): "RILL_ERROR_CAPTURE_UNJOINED" (the enum identifier). */
static void test_status_name_is_enum_identifier(void **state) {
    (void)state;
    assert_int_equal(NUM_STATUSES, RILL_ERROR_DEVICE_LOST + 1);
    for (size_t i = 0; i < NUM_STATUSES; i++) {
        assert_int_equal(all_statuses[i].status, (int)i);
        const char *name = rill_status_name(all_statuses[i].status);
        assert_non_null(name);
        assert_string_equal(name, all_statuses[i].name);
    }
}

/* rill_status_string(status): "a sentence for people": one per status, never empty, and no two
 * statuses share a sentence. */
static void test_status_string_is_nonempty_and_distinct(void **state) {
    (void)state;
    for (size_t i = 0; i < NUM_STATUSES; i++) {
        const char *text = rill_status_string(all_statuses[i].status);
        assert_non_null(text);
        assert_true(strlen(text) > 0);
        assert_string_not_equal(text, all_statuses[i].name);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(text, rill_status_string(all_statuses[j].status));
    }
}

/* A value outside the enum still gets a non-empty name and sentence that no real status has. */
static void test_status_unknown_value_is_handled(void **state) {
    (void)state;
    const rill_status unknown[] = {(rill_status)(RILL_ERROR_DEVICE_LOST + 1), (rill_status)1000,
                                   (rill_status)0x7fffffff};
    for (size_t u = 0; u < sizeof(unknown) / sizeof(unknown[0]); u++) {
        const char *name = rill_status_name(unknown[u]);
        const char *text = rill_status_string(unknown[u]);
        assert_non_null(name);
        assert_non_null(text);
        assert_true(strlen(name) > 0);
        assert_true(strlen(text) > 0);
        for (size_t i = 0; i < NUM_STATUSES; i++) {
            assert_string_not_equal(name, all_statuses[i].name);
            assert_string_not_equal(text, rill_status_string(all_statuses[i].status));
        }
    }
}

/* ---- last error ---- */

typedef struct thread_probe {
    char before[512];     /* rill_last_error() before the thread called anything */
    char after_fail[512]; /* after its own failing call */
    rill_status status;   /* what the failing call returned */
} thread_probe;

static void *probe_new_thread(void *arg) {
    thread_probe *probe = arg;
    snprintf(probe->before, sizeof probe->before, "%s", rill_last_error());
    rill_device *dev = NULL;
    probe->status = rill_device_get(1 << 20, &dev);
    snprintf(probe->after_fail, sizeof probe->after_fail, "%s", rill_last_error());
    return NULL;
}

static void run_probe(thread_probe *probe) {
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, probe_new_thread, probe), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
}

/* rill_last_error(): "Detail of the last failing call made by this thread ("" if none)". */
static void test_last_error_is_empty_on_new_thread(void **state) {
    (void)state;
    /* Make this thread's sentence non-empty first: a new thread must not inherit it. */
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_device_count(NULL));
    thread_probe probe = {0};
    run_probe(&probe);
    assert_string_equal(probe.before, "");
}

/* A second thread that fails, then waits for the main thread to fail, then reads its own
 * sentence again. Stages: 0 start, 1 worker failed, 2 main failed, 3 worker re-read. */
typedef struct pingpong {
    atomic_int stage;
    char own[512];       /* the worker's sentence after its failure */
    char own_later[512]; /* the worker's sentence after the main thread's failure */
    rill_status status;
    bool timed_out;
} pingpong;

static bool await_stage(atomic_int *stage, int value) {
    uint64_t deadline = rt_now_ns() + 10ull * 1000000000ull;
    while (atomic_load(stage) < value) {
        if (rt_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

static void *pingpong_worker(void *arg) {
    pingpong *pp = arg;
    rill_device *dev = NULL;
    pp->status = rill_device_get(1 << 20, &dev);
    snprintf(pp->own, sizeof pp->own, "%s", rill_last_error());
    atomic_store(&pp->stage, 1);
    if (!await_stage(&pp->stage, 2)) {
        pp->timed_out = true;
        return NULL;
    }
    snprintf(pp->own_later, sizeof pp->own_later, "%s", rill_last_error());
    atomic_store(&pp->stage, 3);
    return NULL;
}

/* rill_last_error(): "Detail of the last failing call made by this thread": a failure on
 * another thread does not change this thread's sentence, in either direction. */
static void test_last_error_is_thread_local(void **state) {
    (void)state;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_device_count(NULL));
    char mine[512];
    snprintf(mine, sizeof mine, "%s", rill_last_error());
    assert_true(mine[0] != '\0');

    static pingpong pp;
    memset(&pp, 0, sizeof pp);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, pingpong_worker, &pp), 0);
    bool worker_failed = await_stage(&pp.stage, 1);
    /* The worker's failure left this thread's sentence alone. */
    bool mine_kept = strcmp(rill_last_error(), mine) == 0;
    /* Now fail differently here; the worker's sentence must stay its own. */
    rill_status main_status = rill_stream_create(NULL, 0, NULL);
    char mine_later[512];
    snprintf(mine_later, sizeof mine_later, "%s", rill_last_error());
    atomic_store(&pp.stage, 2);
    bool worker_reread = await_stage(&pp.stage, 3);
    assert_int_equal(pthread_join(thread, NULL), 0);

    assert_true(worker_failed);
    assert_true(worker_reread);
    assert_false(pp.timed_out);
    assert_int_equal(pp.status, RILL_ERROR_NO_DEVICE);
    assert_true(pp.own[0] != '\0');
    assert_string_not_equal(pp.own, mine);
    assert_true(mine_kept);
    assert_int_equal(main_status, RILL_ERROR_INVALID_ARGUMENT);
    assert_string_not_equal(mine_later, pp.own);
    assert_string_equal(pp.own_later, pp.own);
}

/* "On failure out-parameters are left NULL/zero and rill_last_error() explains, in one sentence,
 * what went wrong"; a successful call leaves the sentence of the last failing call in place. */
static void test_last_error_survives_successful_calls(void **state) {
    (void)state;
    rill_device *dev = (rill_device *)&dev;
    RT_STATUS(RILL_ERROR_NO_DEVICE, rill_device_get(1 << 20, &dev));
    assert_null(dev);
    char sentence[512];
    snprintf(sentence, sizeof sentence, "%s", rill_last_error());
    assert_true(sentence[0] != '\0');

    int count = 0;
    RT_OK(rill_device_count(&count));
    RT_OK(rill_device_get(0, &dev));
    assert_string_equal(rill_last_error(), sentence);
}

/* ---- sentences ---- */

/* The number of times needle occurs in hay. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* An argument of a failing call may be the thread's last sentence itself (a layer adding its
 * name to an inner layer's sentence): the new sentence reads as written, not garbled. */
static void test_last_error_may_quote_itself(void **state) {
    (void)state;
    char inner[200];
    rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory storing a command; nothing was "
                                         "submitted");
    snprintf(inner, sizeof inner, "%s", rill_last_error());
    assert_int_equal(
        rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_stream_wait_stream: %s", rill_last_error()),
        RILL_ERROR_OUT_OF_MEMORY);
    char want[300];
    snprintf(want, sizeof want, "rill_stream_wait_stream: %s", inner);
    assert_string_equal(rill_last_error(), want);
    /* The same through rill__fail_from, which names a call once. */
    rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a stream");
    rill__fail_from(RILL_ERROR_OUT_OF_MEMORY, "rill_event_create");
    rill__fail_from(RILL_ERROR_OUT_OF_MEMORY, "rill_event_create");
    assert_string_equal(rill_last_error(), "rill_event_create: out of memory creating a stream");
}

/* rill_last_error(): at most 1023 bytes; "a sentence too long for it is cut at a word, and
 * '...' ends it". */
static void test_last_error_too_long_is_cut_at_a_word(void **state) {
    (void)state;
    static char words[3000], token[1500], accents[1500];
    size_t n = 0;
    for (int i = 0; n + 16 < sizeof words; i++)
        n += (size_t)snprintf(words + n, sizeof words - n, "word%d ", i);
    rill__fail(RILL_ERROR_INTERNAL, "fn: %s", words);
    const char *e = rill_last_error();
    size_t len = strlen(e);
    assert_true(len <= RILL__LAST_ERROR_BYTES - 1);
    assert_true(len > RILL__LAST_ERROR_BYTES - 60); /* cut near the end, not early */
    assert_string_equal(e + len - 3, "...");
    /* What is left is the sentence up to a whole word. */
    assert_memory_equal(e, "fn: ", 4);
    assert_memory_equal(e + 4, words, len - 3 - 4);
    assert_true(words[len - 3 - 4] == ' ');
    assert_true(e[len - 4] != ' ');

    /* One word longer than the buffer is cut inside, with the ellipsis. */
    memset(token, 'x', sizeof token - 1);
    rill__fail(RILL_ERROR_INTERNAL, "fn: %s", token);
    assert_int_equal(strlen(rill_last_error()), RILL__LAST_ERROR_BYTES - 1);
    assert_string_equal(rill_last_error() + RILL__LAST_ERROR_BYTES - 4, "...");

    /* Never inside a UTF-8 character: "é" is two bytes. */
    for (size_t i = 0; i + 2 < sizeof accents; i += 2)
        memcpy(accents + i, "\xc3\xa9", 2);
    rill__fail(RILL_ERROR_INTERNAL, "f: %s", accents);
    e = rill_last_error();
    len = strlen(e);
    assert_string_equal(e + len - 3, "...");
    assert_true((len - 3 - 3) % 2 == 0); /* "f: " then whole characters */
    assert_int_equal((unsigned char)e[len - 4], 0xa9);
}

/* "rill_last_error() explains, in one sentence": a device that cannot start for want of
 * memory is explained by the call that found no device, naming it once, and by the cause. */
static void test_init_failure_names_the_call_once(void **state) {
    (void)state;
    RT_OK(rill_shutdown());
    bool succeeded = false;
    for (long k = 1; k < 200 && !succeeded; k++) {
        rill_device *dev = NULL;
        rill__alloc_fail_after(k);
        rill_status st = rill_device_get(0, &dev);
        rill__alloc_fail_after(0);
        if (st == RILL_OK) {
            succeeded = true;
        } else {
            const char *e = rill_last_error();
            if (st != RILL_ERROR_NO_DEVICE || strncmp(e, "rill_device_get: ", 17) != 0 ||
                count_of(e, "rill_") != 1 || strstr(e, "rill: ") != NULL ||
                strstr(e, "out of memory") == NULL)
                fail_msg("failing allocation %ld: %s: %s", k, rill_status_name(st), e);
        }
        RT_OK(rill_shutdown());
    }
    assert_true(succeeded);
}

/* A child that breaks a lock on purpose: the mutex is destroyed while held. */
static void break_a_lock(void) {
    static rill__mutex m;
    rill__mutex_init(&m);
    rill__mutex_lock(&m);
    rill__mutex_destroy(&m); /* EBUSY: aborts */
}

/* "A failing pthread primitive aborts, as in libuv": and says on stderr which one failed and
 * why, first. */
/* Every call given a NULL out-parameter says what to pass instead: the address of a variable
 * of the type that the call writes. */
static void expect_out_null(rill_status st, const char *fn, const char *type) {
    assert_int_equal(st, RILL_ERROR_INVALID_ARGUMENT);
    char want[160];
    snprintf(want, sizeof want, "%s: out is NULL; pass the address of %s to receive ", fn, type);
    if (strncmp(rill_last_error(), want, strlen(want)) != 0)
        fail_msg("wanted a sentence beginning \"%s\"; got \"%s\"", want, rill_last_error());
}

static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

static void test_null_out_parameters_say_what_to_pass(void **state) {
    (void)state;
    rill_stream *s;
    rill_graph *g;
    void *p;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_malloc(NULL, 64, &p));
    const rill_kernel_desc desc = {.name = "empty", .cpu = empty_kernel};
    expect_out_null(rill_device_get(0, NULL), "rill_device_get", "a rill_device *");
    expect_out_null(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, NULL), "rill_device_get_by_kind",
                    "a rill_device *");
    expect_out_null(rill_device_get_info(NULL, NULL), "rill_device_get_info", "a rill_device_info");
    expect_out_null(rill_get_device(NULL), "rill_get_device", "a rill_device *");
    expect_out_null(rill_stream_create(NULL, 0, NULL), "rill_stream_create", "a rill_stream *");
    expect_out_null(rill_stream_get_device(s, NULL), "rill_stream_get_device", "a rill_device *");
    expect_out_null(rill_stream_get_tagged(NULL, "tag", 0, NULL), "rill_stream_get_tagged",
                    "a rill_stream *");
    expect_out_null(rill_event_create(RILL_EVENT_DEFAULT, NULL), "rill_event_create",
                    "a rill_event *");
    expect_out_null(rill_event_get_tagged("tag", NULL), "rill_event_get_tagged", "a rill_event *");
    rill_event *tagged;
    RT_OK(rill_event_get_tagged("tag", &tagged));
    expect_out_null(rill_event_get_device(tagged, NULL), "rill_event_get_device",
                    "a rill_device *");
    expect_out_null(rill_kernel_create(&desc, NULL), "rill_kernel_create", "a rill_kernel *");
    expect_out_null(rill_malloc(NULL, 64, NULL), "rill_malloc", "a void *");
    expect_out_null(rill_malloc_async(64, s, NULL), "rill_malloc_async", "a void *");
    expect_out_null(rill_malloc_host(64, NULL), "rill_malloc_host", "a void *");
    expect_out_null(rill_mem_get_stats(NULL, NULL), "rill_mem_get_stats", "a rill_mem_stats");
    expect_out_null(rill_ipc_get_mem_handle(p, NULL), "rill_ipc_get_mem_handle",
                    "a rill_ipc_mem_handle");
    expect_out_null(rill_stream_end_capture(s, NULL), "rill_stream_end_capture", "a rill_graph *");
    expect_out_null(rill_stream_get_capture_status(s, NULL), "rill_stream_get_capture_status",
                    "a rill_capture_status");
    expect_out_null(rill_graph_create(NULL), "rill_graph_create", "a rill_graph *");
    expect_out_null(rill_graph_add_empty_node(g, NULL, 0, NULL), "rill_graph_add_empty_node",
                    "a rill_graph_node *");
    expect_out_null(rill_graph_node_count(g, NULL), "rill_graph_node_count", "a size_t");
    expect_out_null(rill_graph_instantiate(g, NULL), "rill_graph_instantiate",
                    "a rill_graph_exec *");
    /* A file that cannot be written says why, as the system put it. */
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT,
              rill_graph_write_dot(g, "/nonexistent-dir-of-rill/graph.dot"));
    assert_non_null(strstr(rill_last_error(), "cannot open '/nonexistent-dir-of-rill/graph.dot' "
                                              "for writing (No such file or directory)"));
    RT_OK(rill_free(p));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_stream_destroy(s));
}

/* The other arguments that a call cannot do without say what to pass too. */
static void expect_says(rill_status st, const char *begins, const char *then) {
    assert_int_equal(st, RILL_ERROR_INVALID_ARGUMENT);
    const char *err = rill_last_error();
    if (strncmp(err, begins, strlen(begins)) != 0 || strstr(err, then) == NULL)
        fail_msg("wanted \"%s...%s...\"; got \"%s\"", begins, then, err);
}

static void test_missing_arguments_say_what_to_pass(void **state) {
    (void)state;
    rill_stream *s;
    rill_kernel *k;
    rill_event *e;
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &e));
    const rill_kernel_desc desc = {.name = "empty", .cpu = empty_kernel};
    RT_OK(rill_kernel_create(&desc, &k));
    expect_says(rill_device_count(NULL), "rill_device_count: count is NULL",
                "; pass the address of an int");
    expect_says(rill_stream_set_name(s, NULL), "rill_stream_set_name: name is NULL",
                "; pass a name");
    expect_says(rill_stream_get_priority(s, NULL), "rill_stream_get_priority: priority is NULL",
                "; pass the address of an int");
    expect_says(rill_event_elapsed_ms(e, e, NULL), "rill_event_elapsed_ms: ms is NULL",
                "; pass the address of a float");
    rill_kernel *none;
    expect_says(rill_kernel_create(NULL, &none), "rill_kernel_create: desc is NULL",
                "; pass a rill_kernel_desc");
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .args_size = 8};
    expect_says(rill_launch_kernel(s, k, &l), "rill_launch_kernel: kernel 'empty' has args_size 8",
                "; pass the arguments, or args_size 0");
    l = (rill_launch){.grid = {1, 1, 1}, .block = {1, 1, 1}, .num_accesses = 2};
    expect_says(rill_launch_kernel(s, k, &l), "rill_launch_kernel: kernel 'empty' has num_accesses",
                "; pass the accesses, or num_accesses 0");
    expect_says(rill_thread_exchange_capture_mode(NULL), "rill_thread_exchange_capture_mode: mode",
                "; pass the address of a rill_capture_mode");
    rill_capture_mode bad = (rill_capture_mode)77;
    expect_says(rill_thread_exchange_capture_mode(&bad),
                "rill_thread_exchange_capture_mode: 77 is not a capture mode",
                "; use RILL_CAPTURE_GLOBAL");
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_stream_destroy(s));
}

static void test_broken_lock_aborts_saying_why(void **state) {
    (void)state;
    int out[2];
    assert_int_equal(pipe(out), 0);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(out[0]);
        if (dup2(out[1], 2) < 0)
            _exit(126);
        break_a_lock();
        _exit(0); /* not reached when it aborts */
    }
    close(out[1]);
    char text[1024];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof text - 1 && (r = read(out[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)r;
    text[got] = '\0';
    close(out[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    char want[200];
    snprintf(want, sizeof want, "rill: pthread_mutex_destroy failed: %s", strerror(EBUSY));
    if (strstr(text, want) == NULL)
        fail_msg("the child's stderr is \"%s\", which does not say \"%s\"", text, want);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_name_is_enum_identifier),
        cmocka_unit_test(test_status_string_is_nonempty_and_distinct),
        cmocka_unit_test(test_status_unknown_value_is_handled),
        cmocka_unit_test(test_last_error_is_empty_on_new_thread),
        cmocka_unit_test(test_last_error_is_thread_local),
        cmocka_unit_test(test_last_error_survives_successful_calls),
        cmocka_unit_test(test_last_error_may_quote_itself),
        cmocka_unit_test(test_last_error_too_long_is_cut_at_a_word),
        cmocka_unit_test(test_init_failure_names_the_call_once),
        cmocka_unit_test(test_null_out_parameters_say_what_to_pass),
        cmocka_unit_test(test_missing_arguments_say_what_to_pass),
        cmocka_unit_test(test_broken_lock_aborts_saying_why),
    };
    return RT_RUN(tests);
}
