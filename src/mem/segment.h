/* SPDX-License-Identifier: MIT */
/* The pool's segments (segment.c). pool->lock held for all of them. */
#ifndef RILL_MEM_SEGMENT_H
#define RILL_MEM_SEGMENT_H

#include "mem/pool_internal.h"

/* Reserves a new segment able to hold size bytes and returns its single
 * free block, or NULL when the limit or the device says no. */
block *rill__segment_grow(rill_device *dev, rill__pool *p, int small, size_t size);

/* Returns segment g, one free block, to the backend. */
void rill__segment_release(rill_device *dev, rill__pool *p, segment *g);

/* Merges adjacent free blocks (frees do not, so that a hot allocate/free
 * pair neither splits nor merges). Run when an allocation misses and
 * before the cache is emptied. */
void rill__segment_coalesce_all(rill__pool *p);

/* Returns every segment that is one free block with nothing pending. */
void rill__segment_empty_cache_locked(rill_device *dev, rill__pool *p);

/* The block of seg that contains address a. */
block *rill__segment_block_at(const segment *g, uintptr_t a);

#endif
