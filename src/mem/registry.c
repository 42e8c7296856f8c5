/* SPDX-License-Identifier: MIT */
/* The pointer registry (see registry.h): a sorted array of disjoint
 * ranges, so that "which allocation contains p" is a binary search. The
 * caching pool replaces the system allocator behind it, not this map. */
#include "mem/registry.h"

#include <string.h>

#include "platform/thread.h"
#include "util/alloc.h"

static rill__mutex lock;
/* guarded by lock */
static rill__mem_block *blocks; /* owned */
static size_t count, capacity;

void rill__registry_init(void) {
    rill__mutex_init_ranked(&lock, RILL__RANK_REGISTRY);
    blocks = NULL;
    count = capacity = 0;
}

void rill__registry_shutdown(void) {
    rill__free(blocks);
    blocks = NULL;
    count = capacity = 0;
    rill__mutex_destroy(&lock);
}

/* Index of the first block whose base is greater than p. */
static size_t upper_bound_locked(uintptr_t p) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (blocks[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

rill_status rill__registry_insert(const rill__mem_block *b) {
    rill__mutex_lock(&lock);
    if (count == capacity) {
        size_t cap = capacity != 0 ? capacity * 2 : 64;
        rill__mem_block *nb = rill__malloc(cap * sizeof *nb);
        if (nb == NULL) {
            rill__mutex_unlock(&lock);
            return RILL_ERROR_OUT_OF_MEMORY;
        }
        if (count > 0)
            memcpy(nb, blocks, count * sizeof *nb);
        rill__free(blocks);
        blocks = nb;
        capacity = cap;
    }
    size_t i = upper_bound_locked(b->base);
    memmove(&blocks[i + 1], &blocks[i], (count - i) * sizeof *blocks);
    blocks[i] = *b;
    count++;
    rill__mutex_unlock(&lock);
    return RILL_OK;
}

bool rill__registry_find(const void *p, rill__mem_block *out) {
    uintptr_t a = (uintptr_t)p;
    bool found = false;
    rill__mutex_lock(&lock);
    size_t i = upper_bound_locked(a);
    if (i > 0 && a < blocks[i - 1].base + blocks[i - 1].bytes) {
        *out = blocks[i - 1];
        found = true;
    }
    rill__mutex_unlock(&lock);
    return found;
}

bool rill__registry_remove(const void *base, rill__mem_kind kind, rill__mem_block *out) {
    uintptr_t a = (uintptr_t)base;
    bool found = false;
    rill__mutex_lock(&lock);
    size_t i = upper_bound_locked(a);
    if (i > 0 && blocks[i - 1].base == a && blocks[i - 1].kind == kind) {
        *out = blocks[i - 1];
        memmove(&blocks[i - 1], &blocks[i], (count - i) * sizeof *blocks);
        count--;
        found = true;
    }
    rill__mutex_unlock(&lock);
    return found;
}

void rill__registry_drain(rill__device *dev, rill__mem_kind kind,
                          void (*fn)(const rill__mem_block *b, void *ctx), void *ctx) {
    rill__mutex_lock(&lock);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (blocks[i].dev == dev && blocks[i].kind == kind)
            fn(&blocks[i], ctx);
        else
            blocks[kept++] = blocks[i];
    }
    count = kept;
    rill__mutex_unlock(&lock);
}
