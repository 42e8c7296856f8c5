/* SPDX-License-Identifier: MIT */
/* What the capture's files share (src/graph: capture.c, the capture
 * itself; capture_rules.c, the calls a capture forbids; gmem.c, the
 * memory private to a graph): the structures of a capture and of a graph
 * memory pool, the lock that guards them all, and the helpers the three
 * files use. Everything here is guarded by rill__caps_lock unless it says
 * otherwise. */
#ifndef RILL_GRAPH_CAPTURE_INTERNAL_H
#define RILL_GRAPH_CAPTURE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "util/list.h"
#include "util/ptrmap.h"

/* A tail may hold a node more than once: merging appends, and the tail is
 * sorted and rid of duplicates when it has doubled since that was last
 * done (num_unique), so n merges cost O(n log n), not O(n^2). */
typedef struct cap_stream {
    rill__stream *s; /* ref */
    uint32_t *tail;  /* owned */
    uint32_t num_tail, cap_tail;
    uint32_t num_unique; /* tail[0, num_unique) is sorted, without duplicates */
} cap_stream;

typedef struct cap_record {
    rill__event *e;  /* ref */
    uint32_t *nodes; /* owned: the recording stream's tail */
    uint32_t num_nodes;
} cap_record;

typedef struct cap_use {
    uintptr_t lo, hi;
    uint32_t node;
} cap_use;

struct rill__capture {
    uint64_t id;
    rill__link link; /* on rill__caps */
    rill_capture_mode mode;
    uint64_t thread; /* rill__thread_id() of the beginning thread */
    rill__stream *origin;
    rill__graph *graph; /* owned until end_capture hands it out */
    int invalidated;
    char why[320];
    cap_stream *streams;
    size_t num_streams, cap_streams;
    rill__ptrmap stream_index; /* stream -> its index in streams */
    cap_record *records;
    size_t num_records, cap_records;
    rill__ptrmap record_index; /* event -> its index in records */
    cap_use *uses;
    size_t num_uses, cap_uses;
};

typedef struct gblock {
    void *ptr;
    size_t bytes;
    int freed;
    uint32_t *deps; /* owned: the nodes a reuse must come after */
    uint32_t num_deps;
} gblock;

struct rill__gpool {
    _Atomic int refs;
    rill__stream *stream;       /* the library-owned allocation stream */
    _Atomic uint64_t ready_seq; /* launches wait for stream to reach it */
    gblock *blocks;             /* guarded by rill__caps_lock */
    size_t num_blocks, cap_blocks;
};

/* The lock of every capture and graph memory pool, the active captures,
 * and the index of the blocks of every live pool: rill_free and
 * rill_free_async look a pointer up there in O(1), however many graphs
 * live (rill__gpools_live counts the pools, read without the lock as a
 * hint that there are none). Invariant: rill__gmem_index holds b->ptr for
 * each block b of each pool whose refs are above 0, and nothing else. */
extern rill__spinlock rill__caps_lock;
extern rill__link *rill__caps; /* captures, by link */
extern rill__ptrmap rill__gmem_index;
extern _Atomic int rill__gpools_live;

/* The capture of a list's link l (NULL for NULL). */
static inline rill__capture *rill__cap_at(rill__link *l) {
    return l != NULL ? RILL__OWNER(l, rill__capture, link) : NULL;
}

/* Grows *arr to hold need elements of elem bytes (doubling); false when
 * out of memory, *arr unchanged. */
bool rill__cap_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* The capture's entry for s, or NULL when s is not in it. */
cap_stream *rill__cap_stream_of(rill__capture *c, rill__stream *s);
/* The active capture with id, or NULL. */
rill__capture *rill__cap_find(uint64_t id);
/* Marks the ancestors of nodes (and the nodes) in mark[]; stack holds
 * g->num_nodes entries. */
void rill__cap_mark_ancestors(rill__graph *g, const uint32_t *nodes, uint32_t n,
                              unsigned char *mark, uint32_t *stack);
/* Invalidates c because fmt_fn was called (on capturing stream s, or NULL). */
void rill__cap_invalidate(rill__capture *c, const char *fmt_fn, rill__stream *s);
/* RILL_ERROR_CAPTURE_UNSUPPORTED for a call fn on invalidated capture c. */
rill_status rill__cap_fail_invalidated(rill__capture *c, const char *fn);
/* The capture s belongs to, with rill__caps_lock held; NULL (lock not
 * held) when there is none. */
rill__capture *rill__cap_lock_of(rill__stream *s);
/* The block of graph memory pool p that starts at ptr, or NULL. */
gblock *rill__gpool_find(rill__gpool *p, const void *ptr);

/* The capture hooks (core/hooks.h says what each does). */
rill_status rill__cap_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
rill_status rill__cap_event_record(rill__event *e, rill__stream *s, bool *handled);
rill_status rill__cap_wait_event(rill__stream *s, rill__event *e, bool *handled);
rill_status rill__cap_wait_stream(rill__stream *s, rill__stream *other, bool *handled);
rill_status rill__cap_check_stream_sync(rill__stream *s, const char *fn);
rill_status rill__cap_check_event_sync(rill__event *e, const char *fn);
rill_status rill__cap_check_device_sync(rill__device *dev, const char *fn);
rill_status rill__cap_check_unsafe(const char *fn);
rill_status rill__cap_check_free(void *ptr, const char *fn);
rill_status rill__cap_malloc(rill__stream *s, size_t bytes, void **out);
rill_status rill__cap_free(rill__stream *s, void *ptr, bool *handled);
void rill__cap_stream_destroyed(rill__stream *s);

#endif
