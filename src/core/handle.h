/* SPDX-License-Identifier: MIT */
/* Handles: the values that rill.h's opaque pointers carry, a slot of one
 * process-wide table, the slot's generation and the object's kind
 * (generation << 32 | slot << 4 | kind), so that a stale, foreign or
 * wrong-kind handle resolves to NULL without the object being read. Lookups
 * take no lock; opening and closing take a spin lock. docs/design.md,
 * "Handles", says why. */

/* Invariant: a slot's tag is (generation << 4 | kind) while in use and
 * (generation << 4) while free; closing a slot increments its generation
 * (skipping 0). A lookup reads the tag, the object, then the tag again, so
 * that it never returns another object that took the slot meanwhile. One
 * that races with the close of the same handle may return the object being
 * destroyed: the object then stays whole until the call that looked it up
 * returns (core/calls.h). */
#ifndef RILL_CORE_HANDLE_H
#define RILL_CORE_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "rill.h"

/* The internal objects behind the handles are declared in backend/backend.h. */

typedef enum rill__handle_kind {
    RILL__HANDLE_DEVICE = 1,
    RILL__HANDLE_STREAM,
    RILL__HANDLE_EVENT,
    RILL__HANDLE_KERNEL,
    RILL__HANDLE_GRAPH,
    RILL__HANDLE_NODE,
    RILL__HANDLE_EXEC,
    RILL__HANDLE_COMM, /* rill_comm (src/comm/comm.c) */
    RILL__HANDLE_KINDS /* one past the last */
} rill__handle_kind;

/* Gives obj a handle of the given kind in *out (cast to the public
 * pointer type by the caller). False when the table cannot grow (out of
 * memory, or 2^26 handles open at once). */
bool rill__handle_open(rill__handle_kind kind, void *obj, void **out);
/* The object that handle names, or NULL (see above). Lock-free. */
void *rill__handle_get(const void *handle, rill__handle_kind kind);
/* The kind of the handle that handle was or is, or 0 when it was never
 * one (as far as the table can tell: bits that name a slot never handed
 * out, or a generation the slot never had); for sentences such as "an
 * event was passed where a stream is needed". */
rill__handle_kind rill__handle_kind_of(const void *handle);
/* Closes handle: later lookups of it return NULL. Closing a handle that is
 * not open does nothing. */
void rill__handle_close(const void *handle);
/* Closes every open handle but those of kind keep (0: none): rill_shutdown,
 * and the child of a fork, which keeps its parent's kernels. */
void rill__handle_close_all(rill__handle_kind keep);
/* rill_shutdown: from now on (may_use not NULL) lookups return NULL to
 * the calls of threads for which may_use() is false, and
 * rill__handle_fail says why; NULL ends it. */
void rill__handle_set_closing(bool (*may_use)(void));
/* Handles open now, of every kind (tests). */
uint64_t rill__handle_count(void);

/* The failure of a public call fn given, as its argument arg, a handle
 * that does not resolve to a live object of kind: RILL_ERROR_INVALID_ARGUMENT
 * with a sentence that says whether it is NULL, destroyed, of another kind
 * or no handle at all. */
rill_status rill__handle_fail(const char *fn, const char *arg, const void *handle,
                              rill__handle_kind kind);
/* fork(): the table's lock is taken before the fork and released after it
 * in both processes, so that the child never inherits it held. */
void rill__handle_fork_prepare(void);
void rill__handle_fork_release(void);

#endif
