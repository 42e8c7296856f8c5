/* SPDX-License-Identifier: MIT */
/* Handles: the values that rill.h's opaque pointers carry. A handle is
 * not the object's address: it names a slot of one process-wide table and
 * the slot's generation at the time the object was created,
 *
 *     bits 63..32  generation (never 0)
 *     bits 31..4   slot index
 *     bits  3..0   kind (enum rill__handle_kind, never 0)
 *
 * so that a handle whose object was destroyed is told apart from a live
 * one without reading the object's memory (the slot's generation moved
 * on), even when a new object of the same kind took the same address or
 * the same slot. A NULL pointer, a pointer that was never a handle (its
 * low bits are no kind, or its slot is not in use), a handle of another
 * kind and a stale handle all resolve to NULL.
 *
 * The table grows in chunks that are never freed or moved, so lookups
 * take no lock: a lookup reads the chunk, the slot's tag and the object.
 * Opening and closing take a spin lock (creation and destruction, never
 * a launch, record or allocation). rill_shutdown closes every handle
 * (rill__handle_close_all); the table itself lives as long as the
 * process, so that handles from before a shutdown are still told stale.
 *
 * Invariant: a slot's tag is (generation << 4 | kind) while in use and
 * (generation << 4) while free; closing a slot increments its generation
 * (skipping 0). A lookup that races with the close of the same handle may
 * return the object being destroyed: using a handle while another thread
 * destroys it is a caller error that this detects only once the destroy
 * has returned. */
#ifndef RILL_CORE_HANDLE_H
#define RILL_CORE_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

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
/* The kind that handle's bits name, or 0 when they name none (for
 * sentences such as "an event was passed where a stream is needed"); the
 * handle may be stale. */
rill__handle_kind rill__handle_kind_of(const void *handle);
/* Closes handle: later lookups of it return NULL. Closing a handle that is
 * not open does nothing. */
void rill__handle_close(const void *handle);
/* Closes every open handle (rill_shutdown). */
void rill__handle_close_all(void);
/* Handles open now, of every kind (tests). */
uint64_t rill__handle_count(void);

#endif
