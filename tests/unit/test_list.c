/* SPDX-License-Identifier: MIT */
/* The intrusive list (src/util/list.h): push puts a link first, remove
 * takes any link off and clears it, RILL__OWNER finds the element, and
 * the list keeps its invariant through any order of pushes and removes. */
#include "fixture.h"

#include "util/list.h"

typedef struct item {
    int value;
    rill__link link;
} item;

/* Checks the invariant of list.h and returns the values front to back. */
static size_t walk(rill__link *head, int *values, size_t max) {
    size_t n = 0;
    assert_true(head == NULL || head->prev == NULL);
    for (rill__link *l = head; l != NULL; l = l->next) {
        if (l->next != NULL)
            assert_ptr_equal(l->next->prev, l);
        assert_true(n < max);
        values[n++] = RILL__OWNER(l, item, link)->value;
    }
    return n;
}

static void test_list_push_puts_first_and_remove_takes_any(void **state) {
    (void)state;
    item items[4] = {{0, {0}}, {1, {0}}, {2, {0}}, {3, {0}}};
    rill__link *head = NULL;
    for (int i = 0; i < 4; i++)
        rill__list_push(&head, &items[i].link);
    int v[8];
    assert_int_equal(walk(head, v, 8), 4);
    assert_int_equal(v[0], 3);
    assert_int_equal(v[3], 0);
    rill__list_remove(&head, &items[2].link); /* middle */
    assert_null(items[2].link.next);
    assert_null(items[2].link.prev);
    rill__list_remove(&head, &items[3].link); /* first */
    rill__list_remove(&head, &items[0].link); /* last */
    assert_int_equal(walk(head, v, 8), 1);
    assert_int_equal(v[0], 1);
    rill__list_remove(&head, &items[1].link);
    assert_null(head);
}

/* A seeded random mix of pushes and removes keeps the invariant and the
 * same members as a plain array would. */
static void test_list_random_mix_keeps_its_invariant(void **state) {
    (void)state;
    enum { N = 64 };
    item items[N];
    int on[N] = {0};
    rill__link *head = NULL;
    uint32_t x = 12345;
    for (int i = 0; i < N; i++)
        items[i] = (item){.value = i};
    for (int step = 0; step < 10000; step++) {
        x = x * 1664525u + 1013904223u;
        int i = (int)(x >> 26);
        if (on[i])
            rill__list_remove(&head, &items[i].link);
        else
            rill__list_push(&head, &items[i].link);
        on[i] = !on[i];
        if (step % 97 == 0) {
            int v[N];
            size_t n = walk(head, v, N);
            size_t members = 0;
            for (int k = 0; k < N; k++)
                members += (size_t)on[k];
            assert_int_equal(n, members);
            for (size_t k = 0; k < n; k++)
                assert_true(on[v[k]]);
        }
    }
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_push_puts_first_and_remove_takes_any),
        cmocka_unit_test(test_list_random_mix_keeps_its_invariant),
    };
    return RT_RUN(tests);
}
