/* SPDX-License-Identifier: MIT */
/* The pointer registry: which device (or page-locked host memory) an
 * address belongs to. A sorted array of disjoint ranges searched by
 * binary search under one mutex.
 *
 * Invariant: blocks[i].base + blocks[i].bytes <= blocks[i+1].base. */
#ifndef RILL_MEM_REGISTRY_H
#define RILL_MEM_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/handle.h"
#include "rill.h"

typedef enum rill__mem_kind {
    RILL__MEM_DEVICE = 1, /* a segment of a device's pool; owner: rill__segment */
    RILL__MEM_HOST,       /* rill_malloc_host, dev: its host_alloc's; owner: NULL */
    RILL__MEM_IPC         /* memory of another process opened here; owner: the mapping */
} rill__mem_kind;

typedef struct rill__mem_block {
    uintptr_t base;
    size_t bytes;
    rill__device
        *dev; /* the device whose memory it is (rill_malloc_host: whose host_alloc made it) */
    rill__mem_kind kind;
    void *owner; /* see rill__mem_kind */
} rill__mem_block;

void rill__registry_init(void);
void rill__registry_shutdown(void);
/* RILL_ERROR_OUT_OF_MEMORY when the registry cannot grow. */
rill_status rill__registry_insert(const rill__mem_block *b);
/* Finds the block that contains p. */
bool rill__registry_find(const void *p, rill__mem_block *out);
/* Removes the block that starts exactly at base and kind matches. */
bool rill__registry_remove(const void *base, rill__mem_kind kind, rill__mem_block *out);
/* Removes and returns (through fn) every block of dev (NULL: host blocks). */
void rill__registry_drain(rill__device *dev, rill__mem_kind kind,
                          void (*fn)(const rill__mem_block *b, void *ctx), void *ctx);

#endif
