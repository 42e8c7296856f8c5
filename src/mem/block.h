/* SPDX-License-Identifier: MIT */
/* The pool's blocks: points, owners, bins and the hash of allocated
 * blocks (block.c). pool->lock held for all of them. */
#ifndef RILL_MEM_BLOCK_H
#define RILL_MEM_BLOCK_H

#include "mem/pool_internal.h"

/* Drops the references of owners with no live blocks. */
void rill__owners_trim(rill__pool *p);

/* Counts one more block allocated on s. False when s cannot be held. */
bool rill__owners_hold(rill__pool *p, rill__stream *s);

void rill__owners_release(rill__pool *p, rill__stream *s);

void rill__points_clear(rill__pool *p, block *k);

/* Adds (s, seq), keeping one point per stream with the larger seq. On
 * allocation failure the block becomes conservative instead. */
void rill__points_add(rill__pool *p, block *k, rill__stream *s, uint64_t seq);

/* Drops the points that have completed. */
void rill__points_prune(rill__pool *p, block *k);

/* May stream s take free block k without waiting? s NULL: may any
 * stream use it at once (every point complete)? */
bool rill__block_safe_for(const block *k, rill__stream *s);

/* What taking free block k costs s in waiting: of the other streams'
 * work that s would come to wait for, beyond what it already waits for,
 * the most commands of one stream (0: safe); UINT64_MAX when k cannot be
 * waited for (conservative, more than MAX_WAITS points, a point on a
 * stream with opaque work pending (rill__stream_opaque_pending), or s
 * NULL and k not safe for every stream). */
uint64_t rill__block_wait_cost(const block *k, rill__stream *s);
/* Copies k's points to r (a split-off remainder). */
void rill__points_copy(rill__pool *p, block *r, const block *k);

/* The points of k that s is not yet ordered after (at most max), each
 * with a reference, into waits; false (nothing held) when there are more. */
bool rill__points_collect_waits(const block *k, rill__stream *s, point *waits, size_t max,
                                size_t *num_waits);

void rill__bin_insert(bins *b, block *k);

void rill__bin_remove(bins *b, block *k);

/* The first non-empty bin at or after i, or NUM_BINS. */
unsigned rill__bin_next(const bins *b, unsigned i);

block *rill__block_new(rill__pool *p);

void rill__block_recycle(rill__pool *p, block *k);

bool rill__hash_grow(rill__pool *p);

block *rill__hash_find(const rill__pool *p, uintptr_t ptr);

void rill__hash_insert(rill__pool *p, block *k);

void rill__hash_remove(rill__pool *p, block *k);

#endif
