/* SPDX-License-Identifier: MIT */
/* The stream-ordered caching pool of a device (one per device): segments
 * that grow in place, blocks rounded into size classes, free blocks that
 * remember the (stream, seq) points a taking stream must be past, and the
 * per-thread cache in front of it (tcache.c). The rules for reuse, internal
 * waits, growth and out-of-memory recovery: docs/design.md, "Memory". */

/* Invariants (pool->lock held):
 *   reserved_bytes  = the committed bytes of all segments
 *   allocated_bytes = sum of allocated block sizes, blocks that thread
 *                     caches hold included (rill_mem_get_stats subtracts
 *                     their cached_bytes)
 *   the blocks of a segment tile it exactly, in address order; adjacent
 *   free blocks merge when an allocation misses or the cache is emptied,
 *   which also decommits every free block with nothing pending. */
#ifndef RILL_MEM_POOL_H
#define RILL_MEM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/handle.h"
#include "rill.h"

/* Where a pointer lives inside its segment (for inter-process handles). */
typedef struct rill__pool_location {
    void *segment_base;   /* start of the segment */
    size_t segment_bytes; /* its size */
    size_t offset;        /* of the block's start from segment_base */
    size_t block_bytes;   /* the block's size */
    void *backend_handle; /* what the backend returned with the segment */
} rill__pool_location;

/* Allocates bytes for use on stream (its device's pool), usable at once
 * by any stream (rill_malloc): no internal wait; when the pool cannot
 * grow, blocks until pending frees complete (except on a worker, which
 * may not wait). */
rill_status rill__pool_alloc(rill__stream *stream, size_t bytes, const char *fn, void **out);
/* Allocates bytes for use in stream order on stream (rill_malloc_async,
 * and graph memory on the pool's stream): before growing, the pool may
 * hand out a block that other streams' pending work still holds, making
 * stream wait for that work. Never blocks: RILL_ERROR_OUT_OF_MEMORY at
 * once when stream order cannot provide the memory. */
rill_status rill__pool_alloc_async(rill__stream *stream, size_t bytes, const char *fn, void **out);
/* Frees ptr: on stream (stream-ordered) or, when stream is NULL, at the
 * current end of the work of its allocation stream. */
rill_status rill__pool_free(void *ptr, rill__stream *stream, const char *fn);
/* Notes that the command seq of stream touches [ptr, ptr + bytes). */
void rill__pool_note_use(rill__stream *stream, uint64_t seq, const void *ptr, size_t bytes);
/* rill_record_stream: ptr is used by all work submitted to stream until
 * ptr is freed. */
rill_status rill__pool_record_stream(void *ptr, rill__stream *stream, const char *fn);

/* The allocated block that contains p: its device and the bytes from p to
 * the block's end. False when p is not in an allocated block. */
bool rill__pool_find(const void *p, rill__device **dev, size_t *bytes_to_end);
/* The allocated block starting at ptr: its allocation stream (a reference
 * for the caller to drop) and its requested bytes (for the stream
 * sanitizer). */
bool rill__pool_owner(const void *ptr, rill__stream **stream, size_t *bytes);
/* The segment and block of the allocated block starting at ptr. */
bool rill__pool_locate(const void *ptr, rill__pool_location *out);

void rill__pool_get_stats(rill__device *dev, rill_mem_stats *out);
/* The figures of both pools, indexed by rill_mem_pool, after taking the
 * thread caches' blocks back (rill_mem_get_pool_stats). Takes the pool's
 * lock and walks every block. */
void rill__pool_get_pool_stats(rill__device *dev, rill_mem_pool_stats out[2]);
/* Checks the invariants above, and those of segment.c and block.c, on
 * every block of dev's pool after taking the thread caches' blocks back
 * (pool_check.c): false, with a sentence naming the first broken one in
 * why (cap bytes), when one does not hold. Takes the pool's lock; walks
 * every block, so it is for tests and debugging, not for hot paths. */
bool rill__pool_check(rill__device *dev, char *why, size_t cap);
/* Describes, into out (cap bytes), the block and segment of dev's pool
 * that hold ptr, as the pool sees them now (pool_check.c; for tests and
 * debugging). Takes the pool's lock. */
void rill__pool_describe(rill__device *dev, const void *ptr, char *out, size_t cap);
/* Returns unused segments whose pending work has completed to the system. */
void rill__pool_empty_cache(rill__device *dev);
/* Lowers both peaks to the current figures (rill_mem_reset_peak_stats). */
void rill__pool_reset_peak_stats(rill__device *dev);
void rill__pool_set_limit(rill__device *dev, size_t max_reserved_bytes);
size_t rill__pool_limit(rill__device *dev); /* 0: none */
/* The reuse policy (enum rill_mem_reuse_flags; rill_mem_set_reuse_policy). */
void rill__pool_set_reuse_flags(rill__device *dev, unsigned flags);
unsigned rill__pool_reuse_flags(rill__device *dev);
/* Writes the memory summary table (rill_mem_summary). */
void rill__pool_summary(rill__device *dev, FILE *out);

/* Creates and destroys the pool of dev (device init and rill_shutdown,
 * after all work has drained). */
rill_status rill__pool_create(rill__device *dev);
void rill__pool_destroy(rill__device *dev);

#endif
