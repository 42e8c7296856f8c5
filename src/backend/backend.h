/* SPDX-License-Identifier: MIT */
/* The device interface: the table of operations every backend implements.
 * The core owns the semantics (sequence numbers, events, sticky errors,
 * waits); a backend owns the mechanism that runs commands. Backends see
 * the core only through this header and the functions it names.
 *
 * Sequence numbers: each stream numbers its commands 1, 2, 3, ... in
 * submission order. stream->sub_seq is the last number handed out (the
 * backend assigns it inside submit), stream->done_seq the last command
 * completed. A backend completes commands strictly in order by calling
 * rill__stream_complete(stream, seq) for each. */
#ifndef RILL_BACKEND_H
#define RILL_BACKEND_H

#include "core/cmd.h"
#include "core/handle.h"
#include "platform/shm.h"
#include "rill.h"

typedef struct rill__backend_ops {
    const char *name;
    /* Bytes of backend state that rill__stream_backend(s) points at. */
    size_t stream_state_bytes;

    /* Fills dev->info (except ordinal) and creates the backend's state in
     * dev->backend. Called once, on the initialising thread, no locks held.
     * RILL_ERROR_NO_DEVICE with a sentence when the device cannot start. */
    rill_status (*device_init)(rill__device *dev);
    /* Stops the device's threads and frees dev->backend. Called by
     * rill_shutdown after every stream has drained; no locks held. */
    void (*device_shutdown)(rill__device *dev);

    /* Prepares or releases a stream's backend state. Any thread, no locks
     * held; stream_fini runs only when the stream has no pending work. A
     * failure's sentence names no public call (the caller names its own). */
    rill_status (*stream_init)(rill__stream *s);
    void (*stream_fini)(rill__stream *s);

    /* Appends cmd to s in stream order, assigns it the next sequence number
     * (stored in *seq), and arranges for it to run. Takes over the
     * references in cmd and copies what cmd borrows. When cmd->flags has
     * RILL__CMD_OPAQUE, stores the number in s->opaque_seq before it
     * publishes s->sub_seq (release). A WAIT runs even while the stream
     * skips work after a failure; it fails the stream only when the
     * awaited work failed, the stream is not failing already, and the WAIT
     * is not RILL__CMD_ORDER_ONLY. Any thread, no locks held; never blocks
     * on other work. RILL_ERROR_OUT_OF_MEMORY when the command cannot be
     * stored (nothing was submitted then), with a sentence that names no
     * public call. */
    rill_status (*submit)(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
    /* Runs work of s, up to the command numbered seq, on the calling thread
     * when no awake worker has taken it. The caller is a host thread about
     * to wait for seq (not a worker, not inside a kernel or host function),
     * with no locks held. It runs that work as a worker would, kernels and
     * host functions included (between rill__thread_enter_worker and
     * rill__thread_leave_worker), in stream order and with the stream's
     * sticky errors, and gives the stream back to the device before it
     * returns. Returns true when it ran some of the work (the caller checks
     * seq again, and may call again), false when it found nothing it may run
     * now. May block as long as the work it runs. NULL when the device's
     * work never runs on host threads. */
    bool (*host_help)(rill__stream *s, uint64_t seq);
    /* Makes sure that work of s's device which no worker has taken gets
     * one: a host thread is about to wait or poll for s's work and does not
     * run it itself (submit may leave the wake-up of a sleeping worker for
     * later, when the submitting thread is expected to come back for its
     * work). Any thread, no locks held; never blocks beyond waking a
     * thread; cheap when there is nothing to do. NULL when submit always
     * wakes. */
    void (*kick)(rill__stream *s);

    /* Reserves a segment of device memory for the pool (src/mem/pool.c),
     * bytes of address space that the pool commits piece by piece: the
     * device provides memory for a page when it is first touched (the CPU
     * device's shared memory objects are sparse), so a segment costs
     * nothing until it is used. *handle receives what the backend keeps
     * with the segment (for the CPU device, what makes it shareable with
     * other processes); it is passed back to mem_free and mem_decommit.
     * Any thread; the pool's lock may be held; RILL_ERROR_OUT_OF_MEMORY
     * when the device cannot reserve that much. */
    rill_status (*mem_alloc)(rill__device *dev, size_t bytes, void **out, void **handle);
    void (*mem_free)(rill__device *dev, void *ptr, size_t bytes, void *handle);
    /* Gives the memory behind [offset, offset + bytes) of a segment back to
     * the device (the whole pages inside it); the range stays reserved and
     * reads as zeros when touched again. NULL when the device cannot. Any
     * thread; the pool's lock may be held; never blocks on other work. */
    void (*mem_decommit)(rill__device *dev, void *handle, size_t offset, size_t bytes);
    /* The shared memory object behind a segment from mem_alloc, which other
     * processes may map (src/mem/ipc.c), or NULL when that segment cannot
     * be shared. NULL as an op on devices whose memory is not host shared
     * memory. Any thread, no lock needed; never blocks. */
    const rill__shm *(*mem_shared)(rill__device *dev, void *handle);
} rill__backend_ops;

extern const rill__backend_ops rill__cpu_backend;

#endif
