/* SPDX-License-Identifier: MIT */
/* Pointer maps (src/util/ptrmap.h): lookups after many insertions and
 * growths, overwrites, absent keys, and a failed growth that leaves the
 * map as it was. */
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

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptrmap_finds_every_key_put),
        cmocka_unit_test(test_ptrmap_failed_growth_leaves_map_as_it_was),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, rt_teardown_shutdown);
}
