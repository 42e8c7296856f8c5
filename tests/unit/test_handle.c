/* SPDX-License-Identifier: MIT */
/* The handle table (src/core/handle.h): a handle resolves to its object
 * until it is closed, and never after, even once its slot serves a new
 * object; handles of another kind, garbage and NULL resolve to nothing;
 * lookups race safely with opens and closes of other handles. */
#include "fixture.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/handle.h"

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
    rill__handle_close_all();
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

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handle_resolves_until_closed),
        cmocka_unit_test(test_handle_stale_after_slot_and_address_reuse),
        cmocka_unit_test(test_handle_wrong_kind_and_garbage_resolve_to_null),
        cmocka_unit_test(test_handle_close_all),
        cmocka_unit_test(test_handle_many_and_out_of_memory),
        cmocka_unit_test(test_handle_threads_never_see_each_others_objects),
    };
    return RT_RUN(tests);
}
