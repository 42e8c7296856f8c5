/* SPDX-License-Identifier: MIT */
/* Pointer maps (src/util/ptrmap.h): lookups after many insertions and
 * growths, overwrites, absent keys, a failed growth that leaves the map
 * as it was, and removals among many collisions. */
#include "fixture.h"

#include "util/alloc.h"
#include "util/ptrmap.h"

#include <stdlib.h>

/* "Maps key to val (replacing what key mapped to)": 100,000 keys, each
 * found with its value after every growth; absent keys are not found. */
static void test_ptrmap_finds_every_key_put(void **state) {
    (void)state;
    enum { N = 100000 };
    char *base = malloc(N * 2);
    assert_non_null(base);
    rill__ptrmap m = RILL__PTRMAP_INIT;
    uint32_t v;
    assert_false(rill__ptrmap_get(&m, base, &v));
    for (uint32_t i = 0; i < N; i++)
        assert_true(rill__ptrmap_put(&m, base + 2 * i, i));
    assert_int_equal(m.count, N);
    for (uint32_t i = 0; i < N; i++) {
        assert_true(rill__ptrmap_get(&m, base + 2 * i, &v));
        assert_int_equal(v, i);
        assert_false(rill__ptrmap_get(&m, base + 2 * i + 1, &v));
    }
    assert_true(rill__ptrmap_put(&m, base, 7)); /* overwrite: no new entry */
    assert_int_equal(m.count, N);
    assert_true(rill__ptrmap_get(&m, base, &v));
    assert_int_equal(v, 7);
    rill__ptrmap_free(&m);
    assert_false(rill__ptrmap_get(&m, base, &v));
    free(base);
}

/* "false when out of memory, and the map is then as it was". */
static void test_ptrmap_failed_growth_leaves_map_as_it_was(void **state) {
    (void)state;
    static char keys[64];
    rill__ptrmap m = RILL__PTRMAP_INIT;
    uint32_t i = 0;
    while (2 * (m.count + 1) <= m.cap || m.cap == 0) {
        assert_true(rill__ptrmap_put(&m, &keys[i], i));
        i++;
    }
    size_t cap = m.cap, count = m.count;
    rill__alloc_fail_after(1);
    bool ok = rill__ptrmap_put(&m, &keys[i], i);
    rill__alloc_fail_after(0);
    assert_false(ok);
    assert_int_equal(m.cap, cap);
    assert_int_equal(m.count, count);
    uint32_t v;
    assert_false(rill__ptrmap_get(&m, &keys[i], &v));
    for (uint32_t k = 0; k < i; k++) {
        assert_true(rill__ptrmap_get(&m, &keys[k], &v));
        assert_int_equal(v, k);
    }
    assert_true(rill__ptrmap_put(&m, &keys[i], i));
    rill__ptrmap_free(&m);
}

/* "Removes key (nothing when it is absent)": 200,000 random puts and
 * removals of 4,096 keys (a table of many collisions), checked after each
 * against an array of what the map holds; a removal keeps every other key
 * findable. */
static void test_ptrmap_remove_keeps_every_other_key(void **state) {
    (void)state;
    enum { KEYS = 4096, STEPS = 200000 };
    static char keys[KEYS];
    static uint32_t want[KEYS]; /* 0: absent, else value + 1 */
    rill__ptrmap m = RILL__PTRMAP_INIT;
    rill__ptrmap_remove(&m, &keys[0]); /* empty map: nothing */
    uint64_t x = 88172645463325252u;
    size_t count = 0;
    for (uint32_t step = 0; step < STEPS; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t k = (uint32_t)(x % KEYS);
        if ((x >> 32) % 3 != 0) {
            assert_true(rill__ptrmap_put(&m, &keys[k], step));
            count += want[k] == 0;
            want[k] = step + 1;
        } else {
            rill__ptrmap_remove(&m, &keys[k]);
            count -= want[k] != 0;
            want[k] = 0;
        }
        assert_int_equal(m.count, count);
        if (step % 4096 == 0 || step == STEPS - 1) {
            for (uint32_t j = 0; j < KEYS; j++) {
                uint32_t v;
                bool found = rill__ptrmap_get(&m, &keys[j], &v);
                assert_int_equal(found, want[j] != 0);
                if (found)
                    assert_int_equal(v, want[j] - 1);
            }
        }
    }
    for (uint32_t j = 0; j < KEYS; j++)
        rill__ptrmap_remove(&m, &keys[j]);
    assert_int_equal(m.count, 0);
    rill__ptrmap_free(&m);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptrmap_finds_every_key_put),
        cmocka_unit_test(test_ptrmap_failed_growth_leaves_map_as_it_was),
        cmocka_unit_test(test_ptrmap_remove_keeps_every_other_key),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, rt_teardown_shutdown);
}
