/* SPDX-License-Identifier: MIT */
/* Internal allocation: every allocation the library makes for itself goes
 * through here, so tests can inject allocation failures. */
#ifndef RILL_UTIL_ALLOC_H
#define RILL_UTIL_ALLOC_H

#include <stddef.h>

void *rill__malloc(size_t bytes);
void *rill__calloc(size_t count, size_t bytes);
/* NULL on failure, leaving p as it was (like realloc). */
void *rill__realloc(void *p, size_t bytes);
/* bytes starting on a cache line (64 bytes), so that the alignas(64)
 * members that keep one thread's writes off another's lines land on lines
 * of their own; freed with rill__free. */
void *rill__malloc_lines(size_t bytes);
void rill__free(void *p);
char *rill__strdup(const char *s);

/* Test hook: the next `countdown`-th internal allocation (1 = the next one)
 * and every one after it fails, until called again with 0. */
void rill__alloc_fail_after(long countdown);

#endif
