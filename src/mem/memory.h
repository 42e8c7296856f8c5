/* SPDX-License-Identifier: MIT */
/* Per-device memory state, and (stream, seq) pairs: the unit in which the
 * library says "after this work". */
#ifndef RILL_MEM_MEMORY_H
#define RILL_MEM_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"

/* The work of stream up to seq. */
typedef struct rill__mem_dep {
    rill_stream *stream; /* ref */
    uint64_t seq;
} rill__mem_dep;

typedef struct rill__pool rill__pool;

typedef struct rill__mem_device {
    rill__pool *pool; /* owned: src/mem/pool.c */
} rill__mem_device;

/* Frees all page-locked host memory still allocated (rill_shutdown). */
void rill__mem_host_shutdown(void);

#endif
