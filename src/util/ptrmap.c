/* SPDX-License-Identifier: MIT */
/* Pointer maps (ptrmap.h): a table of keys and one of values, grown by
 * doubling and rehashing, so n insertions cost O(n) in all; a removal
 * never shrinks them. */
#include "util/ptrmap.h"

#include "util/alloc.h"

/* Fibonacci hashing: the multiply spreads the pointer's middle bits (its
 * low bits are alignment) into the top bits, which the shift keeps. */
static size_t slot_of(const void *key, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)key * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(h >> 32) & (cap - 1);
}

static size_t find_slot(const void **keys, size_t cap, const void *key) {
    size_t i = slot_of(key, cap);
    while (keys[i] != NULL && keys[i] != key)
        i = (i + 1) & (cap - 1);
    return i;
}

static bool grow(rill__ptrmap *m) {
    size_t cap = m->cap == 0 ? 16 : 2 * m->cap;
    const void **keys = rill__calloc(cap, sizeof *keys);
    uint32_t *vals = rill__malloc(cap * sizeof *vals);
    if (keys == NULL || vals == NULL) {
        rill__free(keys);
        rill__free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == NULL)
            continue;
        size_t j = find_slot(keys, cap, m->keys[i]);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    rill__free(m->keys);
    rill__free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

bool rill__ptrmap_put(rill__ptrmap *m, const void *key, uint32_t val) {
    if (m->cap > 0) {
        size_t i = find_slot(m->keys, m->cap, key);
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return true;
        }
    }
    if (2 * (m->count + 1) > m->cap && !grow(m))
        return false;
    size_t i = find_slot(m->keys, m->cap, key);
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return true;
}

bool rill__ptrmap_get(const rill__ptrmap *m, const void *key, uint32_t *val) {
    if (m->cap == 0)
        return false;
    size_t i = find_slot(m->keys, m->cap, key);
    if (m->keys[i] != key)
        return false;
    *val = m->vals[i];
    return true;
}

void rill__ptrmap_remove(rill__ptrmap *m, const void *key) {
    if (m->cap == 0)
        return;
    size_t mask = m->cap - 1;
    size_t hole = find_slot(m->keys, m->cap, key);
    if (m->keys[hole] != key)
        return;
    /* Backward shift: an entry after the hole whose home slot is not
     * cyclically in (hole, its slot] would no longer be found past the
     * hole; it moves into the hole, which moves to where it was. */
    for (size_t i = (hole + 1) & mask; m->keys[i] != NULL; i = (i + 1) & mask) {
        size_t home = slot_of(m->keys[i], m->cap);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            m->keys[hole] = m->keys[i];
            m->vals[hole] = m->vals[i];
            hole = i;
        }
    }
    m->keys[hole] = NULL;
    m->count--;
}

void rill__ptrmap_free(rill__ptrmap *m) {
    rill__free(m->keys);
    rill__free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->count = 0;
}
