/* SPDX-License-Identifier: MIT */
/* Handles. The table (src/core/handle.h): a handle resolves to its object
 * until it is closed, and never after, even once its slot serves a new
 * object; handles of another kind, garbage and NULL resolve to nothing;
 * lookups race safely with opens and closes of other handles. The public
 * calls: a destroyed handle used again is RILL_ERROR_INVALID_ARGUMENT with a
 * sentence, without reading freed memory (AddressSanitizer checks that),
 * and never reaches the object created after it. */
#include "fixture.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/handle.h"
#include "util/alloc.h"

static void test_handle_resolves_until_closed(void **state) {
    (void)state;
    int a, b;
    void *ha, *hb;
    assert_true(rill__handle_open(RILL__HANDLE_STREAM, &a, &ha));
    assert_true(rill__handle_open(RILL__HANDLE_EVENT, &b, &hb));
    assert_ptr_equal(rill__handle_get(ha, RILL__HANDLE_STREAM), &a);
    assert_ptr_equal(rill__handle_get(hb, RILL__HANDLE_EVENT), &b);
    assert_int_equal(rill__handle_kind_of(hb), RILL__HANDLE_EVENT);
    rill__handle_close(ha);
    assert_null(rill__handle_get(ha, RILL__HANDLE_STREAM));
    rill__handle_close(ha); /* closing twice does nothing */
    assert_ptr_equal(rill__handle_get(hb, RILL__HANDLE_EVENT), &b);
    rill__handle_close(hb);
}

/* A stale handle stays stale when a new object takes its slot (the next
 * open reuses the slot just closed) or its address. */
static void test_handle_stale_after_slot_and_address_reuse(void **state) {
    (void)state;
    int obj;
    void *old, *fresh;
    assert_true(rill__handle_open(RILL__HANDLE_STREAM, &obj, &old));
    rill__handle_close(old);
    assert_true(rill__handle_open(RILL__HANDLE_STREAM, &obj, &fresh));
    assert_true(fresh != old);
    assert_null(rill__handle_get(old, RILL__HANDLE_STREAM));
    assert_ptr_equal(rill__handle_get(fresh, RILL__HANDLE_STREAM), &obj);
    rill__handle_close(old); /* a stale close leaves the new owner alone */
    assert_ptr_equal(rill__handle_get(fresh, RILL__HANDLE_STREAM), &obj);
    rill__handle_close(fresh);
}

/* Another kind, NULL, addresses that were never handles, and bits with a
 * valid shape but a slot never handed out resolve to NULL. */
static void test_handle_wrong_kind_and_garbage_resolve_to_null(void **state) {
    (void)state;
    int obj;
    void *h;
    assert_true(rill__handle_open(RILL__HANDLE_KERNEL, &obj, &h));
    assert_null(rill__handle_get(h, RILL__HANDLE_STREAM));
    assert_null(rill__handle_get(NULL, RILL__HANDLE_KERNEL));
    assert_null(rill__handle_get(&obj, RILL__HANDLE_KERNEL));
    void *heap = malloc(64);
    assert_null(rill__handle_get(heap, RILL__HANDLE_KERNEL));
    free(heap);
    uintptr_t far = ((uintptr_t)1 << 32) | ((uintptr_t)((1u << 26) - 1) << 4) | RILL__HANDLE_KERNEL;
    assert_null(rill__handle_get((void *)far, RILL__HANDLE_KERNEL));
    uintptr_t kind_too_big = ((uintptr_t)1 << 32) | 0xf;
    assert_int_equal(rill__handle_kind_of((void *)kind_too_big), 0);
    rill__handle_close((void *)far);
    rill__handle_close(&obj);
    assert_ptr_equal(rill__handle_get(h, RILL__HANDLE_KERNEL), &obj);
    rill__handle_close(h);
}

/* rill__handle_close_all makes every open handle stale. */
static void test_handle_close_all(void **state) {
    (void)state;
    int objs[100];
    void *hs[100];
    uint64_t before = rill__handle_count();
    for (int i = 0; i < 100; i++)
        assert_true(rill__handle_open(RILL__HANDLE_GRAPH, &objs[i], &hs[i]));
    assert_int_equal(rill__handle_count(), before + 100);
    rill__handle_close_all(0);
    assert_int_equal(rill__handle_count(), 0);
    for (int i = 0; i < 100; i++)
        assert_null(rill__handle_get(hs[i], RILL__HANDLE_GRAPH));
}

/* More handles than one chunk holds, and out of memory when a new chunk
 * is needed: open fails cleanly and the table stays usable. */
static void test_handle_many_and_out_of_memory(void **state) {
    (void)state;
    enum { N = 10000 };
    static int objs[N];
    static void *hs[N];
    for (int i = 0; i < N; i++)
        assert_true(rill__handle_open(RILL__HANDLE_NODE, &objs[i], &hs[i]));
    for (int i = 0; i < N; i++)
        assert_ptr_equal(rill__handle_get(hs[i], RILL__HANDLE_NODE), &objs[i]);
    /* Every closed slot is reused before a new chunk is made. */
    for (int i = 0; i < N; i++)
        rill__handle_close(hs[i]);
    rill__alloc_fail_after(1);
    for (int i = 0; i < N; i++)
        assert_true(rill__handle_open(RILL__HANDLE_NODE, &objs[i], &hs[i]));
    /* The rest of the last chunk opens; the next handle needs a chunk. */
    enum { MORE = 8192 };
    static void *more[MORE];
    int opened = 0, refused = 0;
    while (opened < MORE && !refused) {
        if (rill__handle_open(RILL__HANDLE_NODE, &objs[0], &more[opened]))
            opened++;
        else
            refused = 1;
    }
    assert_true(refused);
    rill__alloc_fail_after(0);
    void *extra;
    assert_true(rill__handle_open(RILL__HANDLE_NODE, &objs[0], &extra)); /* grows now */
    rill__handle_close(extra);
    for (int i = 0; i < opened; i++)
        rill__handle_close(more[i]);
    for (int i = 0; i < N; i++)
        rill__handle_close(hs[i]);
}

typedef struct churn {
    atomic_int stop;
    atomic_int bad;
} churn;

static void *churn_thread(void *arg) {
    churn *c = arg;
    int obj;
    while (!atomic_load(&c->stop)) {
        void *h;
        if (!rill__handle_open(RILL__HANDLE_EVENT, &obj, &h))
            continue;
        if (rill__handle_get(h, RILL__HANDLE_EVENT) != &obj)
            atomic_store(&c->bad, 1);
        rill__handle_close(h);
        if (rill__handle_get(h, RILL__HANDLE_EVENT) != NULL)
            atomic_store(&c->bad, 1);
    }
    return NULL;
}

/* Threads that open, look up and close their own handles never see
 * another thread's object (ThreadSanitizer checks the lock-free path). */
static void test_handle_threads_never_see_each_others_objects(void **state) {
    (void)state;
    churn c = {0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn_thread, &c), 0);
    rt_sleep_us(100000);
    atomic_store(&c.stop, 1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(atomic_load(&c.bad), 0);
}

/* ---- through the public calls ---- */

static void nothing(void *user_data) {
    (void)user_data;
}

static void body(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

/* Asserts an INVALID_ARGUMENT whose sentence contains needle. */
static void expect_stale(rill_status st, const char *needle) {
    if (st != RILL_ERROR_INVALID_ARGUMENT)
        fail_msg("returned %s, expected RILL_ERROR_INVALID_ARGUMENT (%s)", rill_status_name(st),
                 rill_last_error());
    if (strstr(rill_last_error(), needle) == NULL)
        fail_msg("\"%s\" does not mention \"%s\"", rill_last_error(), needle);
}

/* A destroyed stream, event, kernel, graph or exec handle passed again to
 * any call is refused as destroyed; ASan sees no read of freed memory. */
static void test_handle_destroyed_handles_are_refused_without_reading_them(void **state) {
    (void)state;
    rill_stream *s;
    rill_event *e;
    rill_kernel *k;
    rill_graph *g;
    rill_graph_exec *x;
    rill_kernel_desc d = {.name = "nothing", .cpu = body};
    RT_OK(rill_stream_create(NULL, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_kernel_create(&d, &k));
    RT_OK(rill_graph_create(&g));
    rill_graph_node *n;
    RT_OK(rill_graph_add_empty_node(g, NULL, 0, &n));
    RT_OK(rill_graph_instantiate(g, &x));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_kernel_destroy(k));
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    rill_launch l = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    expect_stale(rill_stream_synchronize(s), "stream that was destroyed");
    expect_stale(rill_stream_destroy(s), "stream that was destroyed");
    expect_stale(rill_launch_host_func(s, nothing, NULL), "rill_launch_host_func");
    expect_stale(rill_event_record(e, NULL), "event that was destroyed");
    expect_stale(rill_event_destroy(e), "event that was destroyed");
    expect_stale(rill_launch_kernel(NULL, k, &l), "kernel that was destroyed");
    expect_stale(rill_kernel_destroy(k), "kernel that was destroyed");
    expect_stale(rill_graph_launch(x, NULL), "exec that was destroyed");
    expect_stale(rill_graph_exec_destroy(x), "exec that was destroyed");
    expect_stale(rill_graph_destroy(g), "graph that was destroyed");
    rill_graph *g2;
    rill_graph_node *n2 = NULL;
    RT_OK(rill_graph_create(&g2));
    expect_stale(rill_graph_add_empty_node(g2, &n, 1, &n2), "dependency 0");
    assert_null(n2);
    RT_OK(rill_graph_destroy(g2));
}

/* A stale handle never reaches the object created after it, even when the
 * new object has the old one's address (it did: destroying a stale stream
 * handle destroyed the newer stream). */
static void test_handle_stale_stream_never_reaches_a_newer_stream(void **state) {
    (void)state;
    for (int i = 0; i < 50; i++) {
        rill_stream *old, *fresh;
        RT_OK(rill_stream_create(NULL, 0, &old));
        RT_OK(rill_stream_destroy(old));
        RT_OK(rill_stream_create(NULL, 0, &fresh));
        assert_true(fresh != old);
        expect_stale(rill_stream_destroy(old), "destroyed");
        RT_OK(rill_launch_host_func(fresh, nothing, NULL));
        RT_OK(rill_stream_synchronize(fresh));
        RT_OK(rill_stream_destroy(fresh));
    }
}

/* A handle of one kind where another is needed, and pointers that were
 * never handles, are named as such. */
static void test_handle_wrong_kind_and_foreign_pointers_are_named(void **state) {
    (void)state;
    rill_event *e;
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    expect_stale(rill_stream_synchronize((rill_stream *)(void *)e),
                 "an event handle where a stream is needed");
    int local = 0;
    expect_stale(rill_stream_query((rill_stream *)(void *)&local), "not a handle that rill gave");
    void *heap = malloc(256);
    assert_non_null(heap);
    memset(heap, 0xab, 256);
    expect_stale(rill_event_synchronize((rill_event *)heap), "not a handle that rill gave");
    expect_stale(rill_kernel_destroy((rill_kernel *)heap), "kernel");
    free(heap);
    expect_stale(rill_event_destroy(NULL), "is NULL");
    RT_OK(rill_event_destroy(e));
}

/* Handles from before rill_shutdown are stale after it, also once a new
 * runtime gave out new handles: devices, default streams and tagged
 * events included. */
static void test_handle_handles_from_before_shutdown_are_stale(void **state) {
    (void)state;
    rill_device *dev;
    rill_stream *def, *tagged;
    rill_event *te;
    RT_OK(rill_device_get(0, &dev));
    def = rill_default_stream(dev);
    assert_non_null(def);
    RT_OK(rill_stream_get_tagged(dev, "t", 0, &tagged));
    RT_OK(rill_event_get_tagged("e", &te));
    RT_OK(rill_shutdown());
    rill_device *dev2;
    RT_OK(rill_device_get(0, &dev2));
    rill_device_info info;
    expect_stale(rill_device_get_info(dev, &info), "device that was destroyed");
    expect_stale(rill_stream_synchronize(def), "stream that was destroyed");
    expect_stale(rill_stream_synchronize(tagged), "stream that was destroyed");
    expect_stale(rill_event_query(te), "event that was destroyed");
    rill_device *bound;
    expect_stale(rill_event_get_device(te, &bound), "event that was destroyed");
    RT_OK(rill_device_get_info(dev2, &info));
    RT_OK(rill_stream_synchronize(rill_default_stream(dev2)));
}

/* "The same tag on the same device always names the same stream": the
 * same handle; the current stream and rill_stream_get_device give handles
 * that the other calls accept. */
static void test_handle_getters_give_handles_that_calls_accept(void **state) {
    (void)state;
    rill_device *dev, *of;
    rill_stream *a, *b, *s;
    RT_OK(rill_get_device(&dev));
    RT_OK(rill_stream_get_tagged(dev, "same", 0, &a));
    RT_OK(rill_stream_get_tagged(NULL, "same", 0, &b));
    assert_ptr_equal(a, b);
    RT_OK(rill_stream_create(dev, 0, &s));
    rill_stream *prev = rill_set_current_stream(s);
    assert_ptr_equal(prev, rill_default_stream(dev));
    assert_ptr_equal(rill_current_stream(NULL), s);
    RT_OK(rill_stream_get_device(rill_current_stream(dev), &of));
    assert_ptr_equal(of, dev);
    assert_ptr_equal(rill_set_current_stream(prev), s);
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handle_resolves_until_closed),
        cmocka_unit_test(test_handle_stale_after_slot_and_address_reuse),
        cmocka_unit_test(test_handle_wrong_kind_and_garbage_resolve_to_null),
        cmocka_unit_test(test_handle_close_all),
        cmocka_unit_test(test_handle_many_and_out_of_memory),
        cmocka_unit_test(test_handle_threads_never_see_each_others_objects),
        cmocka_unit_test(test_handle_destroyed_handles_are_refused_without_reading_them),
        cmocka_unit_test(test_handle_stale_stream_never_reaches_a_newer_stream),
        cmocka_unit_test(test_handle_wrong_kind_and_foreign_pointers_are_named),
        cmocka_unit_test(test_handle_handles_from_before_shutdown_are_stale),
        cmocka_unit_test(test_handle_getters_give_handles_that_calls_accept),
    };
    return RT_RUN(tests);
}
