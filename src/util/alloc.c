/* SPDX-License-Identifier: MIT */
/* Internal allocation with a fault hook (libuv's loop_init_oom tests): the
 * hook is an atomic countdown read on every call, so it costs one relaxed
 * load when unused. */
#include "util/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic long fail_countdown; /* 0: never fail */

static int should_fail(void) {
    /* relaxed: a test sets the hook before the calls it wants to fail. */
    long c = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (c == 0)
        return 0;
    if (c == 1)
        return 1;
    atomic_compare_exchange_strong(&fail_countdown, &c, c - 1);
    return 0;
}

void *rill__malloc(size_t bytes) {
    return should_fail() ? NULL : malloc(bytes);
}

void *rill__calloc(size_t count, size_t bytes) {
    return should_fail() ? NULL : calloc(count, bytes);
}

void *rill__realloc(void *p, size_t bytes) {
    return should_fail() ? NULL : realloc(p, bytes);
}

void *rill__malloc_lines(size_t bytes) {
    /* aligned_alloc takes a multiple of the alignment. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return should_fail() || rounded < bytes ? NULL : aligned_alloc(64, rounded);
}

void rill__free(void *p) {
    free(p);
}

char *rill__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = rill__malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void rill__alloc_fail_after(long countdown) {
    atomic_store(&fail_countdown, countdown);
}
