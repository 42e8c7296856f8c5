/* SPDX-License-Identifier: MIT */
/* A map from pointers to uint32_t values: open addressing with linear
 * probing in a power-of-two table kept at most half full, so a lookup
 * costs O(1) on average. Keys are only compared, never read through, and
 * never NULL. Entries are added, overwritten and removed (a removal moves
 * the entries after it back, so that no probe chain has a hole). Not
 * thread-safe: its owner's lock guards it.
 *
 * Invariant: count <= cap / 2, cap is 0 or a power of two, and every key
 * sits at or after its home slot hash(key) & (cap - 1) with no empty slot
 * between them (cyclically). */
#ifndef RILL_UTIL_PTRMAP_H
#define RILL_UTIL_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rill__ptrmap {
    const void **keys; /* owned; NULL marks an empty slot */
    uint32_t *vals;    /* owned */
    size_t cap, count;
} rill__ptrmap;

/* A zeroed rill__ptrmap is an empty map. */
#define RILL__PTRMAP_INIT                                                                          \
    { 0 }

/* Maps key to val (replacing what key mapped to); false when out of
 * memory, and the map is then as it was. */
bool rill__ptrmap_put(rill__ptrmap *m, const void *key, uint32_t val);
/* True and *val when key is in the map. */
bool rill__ptrmap_get(const rill__ptrmap *m, const void *key, uint32_t *val);
/* Removes key (nothing when it is absent); never allocates. */
void rill__ptrmap_remove(rill__ptrmap *m, const void *key);
/* Frees the table; the map is empty again. */
void rill__ptrmap_free(rill__ptrmap *m);

#endif
