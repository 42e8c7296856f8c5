/* SPDX-License-Identifier: MIT */
/* The pool's segments (segment.c). pool->lock held for all of them. */
#ifndef RILL_MEM_SEGMENT_H
#define RILL_MEM_SEGMENT_H

#include "mem/pool_internal.h"

/* Commits memory for a request of size bytes on s when no free block
 * serves it: next to a free block that s may take after waits costing at
 * most max_cost (rill__block_wait_cost; 0: no wait), in an existing
 * segment, or in a new one. Returns a free block in its bin that holds at
 * least size bytes and that s may take after such waits, or NULL when the
 * limit or the device says no. */
block *rill__segment_grow(rill__device *dev, rill__pool *p, int small, rill__stream *s, size_t size,
                          uint64_t max_cost);
/* Returns segment g, one unmapped block, to the backend. */
void rill__segment_release(rill__device *dev, rill__pool *p, segment *g);
/* Merges adjacent free mapped blocks (frees do not, so that a hot
 * allocate/free pair neither splits nor merges). Run when an allocation
 * misses and before the cache is emptied. */
void rill__segment_coalesce_all(rill__pool *p);
/* Decommits every free block with nothing pending and returns the
 * segments left with nothing committed. */
void rill__segment_empty_cache_locked(rill__device *dev, rill__pool *p);
/* Adds block k, new at k->ptr in k->seg, to the segment's index. */
void rill__segment_index_add(block *k);
/* The block of seg that contains address a (NULL when a is outside). */
block *rill__segment_block_at(const segment *g, uintptr_t a);

#endif
