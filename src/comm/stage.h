/* SPDX-License-Identifier: MIT */
/* Staging buffers (src/comm/stage.c): page-locked host memory through
 * which a collective on memory of a CUDA device passes when the transport
 * takes host memory only (an MPI that is not CUDA-aware). The stream copies
 * the device's bytes into the buffer, the transport works on the buffer,
 * and the stream copies the result back; the host never touches the
 * device's memory.
 *
 * A buffer in use has two holds: the stream's (its last command that uses
 * the buffer, a copy or the operation's WAIT) and the transport's (until
 * the engine's proxy number k + 1, which says the transport let go of it).
 * It is reused only once both are let go, so neither a copy still under
 * way nor an operation that MPI completes late (after a timeout) ever sees
 * it handed to another operation. Idle buffers are kept for reuse and
 * freed by rill_comm_destroy; the runtime frees what is left at
 * rill_shutdown, as it frees all rill_malloc_host memory. */
#ifndef RILL_COMM_STAGE_H
#define RILL_COMM_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/stream.h"

typedef struct rill__comm_stage rill__comm_stage;

/* A buffer of at least bytes (> 0) of page-locked host memory for dev's
 * copies, held twice (stream and transport). RILL_ERROR_OUT_OF_MEMORY
 * with a sentence that names no public call. Never waits for any work. */
rill_status rill__comm_stage_take(rill__device *dev, size_t bytes, rill__comm_stage **out);
/* The buffer's memory. */
void *rill__comm_stage_host(const rill__comm_stage *st);
/* Lets go of the stream's hold once s has completed seq (at once when it
 * has, or seq is 0). */
void rill__comm_stage_release_after(rill__comm_stage *st, rill__stream *s, uint64_t seq);
/* Lets go of the transport's hold. */
void rill__comm_stage_release(rill__comm_stage *st);
/* The transport may use st for good (a collective that never completed
 * before its communicator was destroyed): it is never reused, and its
 * memory goes at rill_shutdown. */
void rill__comm_stage_lose(rill__comm_stage *st);
/* Frees the idle buffers (rill_comm_destroy: a blocking call, which may
 * free page-locked memory). */
void rill__comm_stage_trim(void);
/* rill_shutdown, before the streams drain: forgets the idle buffers (the
 * runtime frees their memory with the rest of rill_malloc_host's) and
 * drops those still in use once they are let go. */
void rill__comm_stage_shutdown(void);
/* In the child of a fork: forgets the parent's buffers, without freeing or
 * locking anything. */
void rill__comm_stage_forget(void);

#endif
