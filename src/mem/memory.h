/* SPDX-License-Identifier: MIT */
/* Per-device memory state: statistics and frees deferred until the work
 * that may still use the memory has completed.
 *
 * A deferred free holds (stream, seq) pairs: the block is released once
 * every stream has completed its pair, which is checked by comparing
 * sequence counters (rill__mem_reap), never by polling events. */
#ifndef RILL_MEM_MEMORY_H
#define RILL_MEM_MEMORY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/thread.h"
#include "rill.h"

typedef struct rill__mem_dep {
    rill_stream *stream; /* ref */
    uint64_t seq;
} rill__mem_dep;

typedef struct rill__mem_deferred {
    struct rill__mem_deferred *next;
    void *ptr;
    size_t bytes;
    size_t num_deps;
    rill__mem_dep deps[];
} rill__mem_deferred;

typedef struct rill__mem_device {
    rill__mutex lock;
    /* guarded by lock */
    rill_mem_stats stats;
    rill__mem_deferred *deferred; /* owned */
    size_t limit_bytes;           /* cap on reserved_bytes; 0: none */
    /* atomic: entries in deferred, read without the lock as a hint */
    _Atomic size_t num_deferred;
} rill__mem_device;

void rill__mem_device_init(rill__mem_device *m);
/* Releases deferred frees whose work has completed. Any thread. */
void rill__mem_reap(rill_device *dev);
/* Releases everything dev still holds (rill_shutdown, after draining). */
void rill__mem_device_shutdown(rill_device *dev);
/* Frees all page-locked host memory still allocated (rill_shutdown). */
void rill__mem_host_shutdown(void);

#endif
