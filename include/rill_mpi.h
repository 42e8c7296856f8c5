/* rill_mpi.h - the contract for stream-ordered collectives over MPI.
 *
 * A collective is a command of the stream it is issued on: it starts when
 * the stream's earlier work is done, the stream's later work waits for it,
 * and events and rill_stream_wait_* order it with other streams exactly like
 * a kernel. Its start, progress and completion need no compute unit: once
 * the stream's earlier work is done, it starts and completes while every
 * compute unit runs other streams' work. Buffers are device memory
 * (rill_malloc / rill_malloc_async) and count as declared accesses: recv is
 * written, send is read. An MPI failure, or no completion within
 * RILL_COMM_TIMEOUT seconds (unset: no limit), fails the command: the
 * stream's sticky error, with a sentence naming the collective, the rank and
 * MPI's error string. Collectives captured from a stream replay with the
 * graph. Built when MPI is found; otherwise every call returns
 * RILL_ERROR_NOT_SUPPORTED with a sentence saying how to build with MPI.
 * Every rank must issue the same collectives on a communicator in the same
 * order, as with MPI itself.
 *
 * The library: librill_mpi (pkg-config rill_mpi; in CMake,
 * find_package(rill COMPONENTS mpi) and rill::rill_mpi), apart from librill
 * so that a program that uses no MPI does not link MPI.
 *
 * What this version adds to the rules above:
 *  - One communication thread per process makes every MPI call after
 *    MPI_Init, rill_comm_create_mpi's and rill_comm_destroy's included. It
 *    makes MPI calls only while a communicator is being created or
 *    destroyed, collectives are pending (issued and not complete), or a
 *    communicator not yet destroyed has a collective that failed with its
 *    buffers still in MPI's hands (see the timeout below). MPI must provide
 *    MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (MPI_Init_thread); at
 *    MPI_THREAD_SERIALIZED the program must make no MPI call of its own
 *    while rill does (synchronize the streams that issued collectives
 *    first).
 *  - A communicator starts its collectives in issue order, each once its
 *    stream has reached it and every collective issued before it on the
 *    communicator has started (not finished): MPI matches them in the order
 *    they are called, whatever the streams. So the stream of a collective
 *    must not wait for a collective issued later on the same communicator.
 *  - Sends and receives of a pair of ranks match in issue order, with one
 *    tag. A receive must get as many bytes as it asks for: a shorter
 *    message fails it, a longer one fails it as MPI truncates it.
 *  - A failure breaks the communicator: when a collective fails, times out,
 *    or is skipped because its stream had failed (as a kernel is), the other
 *    ranks' next collectives would not match this rank's, so every later
 *    collective on the communicator fails at once, naming the first
 *    failure. Destroy it on every rank and create another, or end the job
 *    with MPI_Abort. The other ranks' matching collective fails at their
 *    RILL_COMM_TIMEOUT, or waits without one.
 *  - A collective that timed out cannot be cancelled in MPI (sends and
 *    receives are): MPI may still write its buffers if the other ranks
 *    issue it late, so rill hands that memory out again only once MPI has
 *    completed it, which it keeps testing until the communicator is
 *    destroyed (and after that, never).
 *  - Collectives run on streams of the CPU device and of CUDA devices, on
 *    memory of the stream's device. On a CUDA device's memory, a
 *    communicator whose MPI is CUDA-aware (rill_comm_cuda_aware) hands the
 *    device's pointers to MPI as they are, once the stream's earlier work
 *    is done, and an average is divided on the device after it, on the
 *    stream; otherwise the stream copies the bytes into page-locked host
 *    memory, MPI works there, and the stream copies the result back. Either
 *    way it all runs in stream order, none of it waits on the calling
 *    thread, and the host never touches the device's memory. Several
 *    processes may share one GPU. RILL_MPI_CUDA_AWARE, read when a
 *    communicator is created: 1 hands device pointers to MPI, 0 stages
 *    them (a CUDA-aware MPI that fails), unset or empty asks MPI (Open
 *    MPI's MPIX_Query_cuda_support); another value is
 *    RILL_ERROR_INVALID_ARGUMENT from rill_comm_create_mpi. A staged
 *    collective cannot be captured into a graph: RILL_ERROR_NOT_SUPPORTED
 *    on a capturing stream. Staging memory of a size is allocated at its
 *    first use, reused once its copies and MPI are done with it, and freed
 *    by rill_comm_destroy when idle.
 *  - A collective issued on a capturing stream is checked as usual and
 *    becomes a node of the graph; nothing reaches MPI until a launch runs
 *    it. Each rill_graph_launch issues the graph's collectives at once, in
 *    capture order, so the issue-order rule above holds with the launching
 *    call in the place of the capturing ones: every rank must capture the
 *    same collectives in the same order and launch in the same order
 *    relative to its other collectives. A collective starts when the run
 *    reaches its node, holding no compute unit while it is under way, and
 *    the nodes after it run once it completes. A failure or timeout fails
 *    the launch (the stream's sticky error names the graph node and the
 *    collective) and skips the nodes after it; the collectives of a launch
 *    that is skipped, or whose earlier node failed, are skipped and break
 *    the communicator, as on a stream. A graph names its communicator:
 *    once that is destroyed, rill_graph_launch fails with
 *    RILL_ERROR_INVALID_ARGUMENT and runs nothing. rill_graph_exec_update
 *    takes collectives with other buffers or counts.
 *  - One call moves at most INT_MAX elements (MPI's count): floats for the
 *    _f32 calls, elements of its dtype for rill_allreduce, bytes for the
 *    others.
 *  - RILL_COMM_TIMEOUT is read when a communicator is created, in seconds
 *    (0.5 is allowed); unset, empty or 0 means no limit.
 *  - RILL_COMM_CHECK=1, read when a communicator is created, is a debug
 *    mode for mismatched arguments, which MPI itself may not detect (it
 *    may hang, or read and write past the buffers). Each collective on the
 *    communicator first makes one small extra allreduce of its kind,
 *    count, op, root and dtype, in its stream's order on the communication
 *    thread, and the next collective waits for it. A collective whose
 *    count (count, count_per_rank, bytes_per_rank, bytes), op, root, dtype
 *    or kind differs between ranks then fails on every rank, before any rank
 *    starts it, with a sentence that names the collective, this rank's
 *    value and another rank's, and says to pass the same on every rank;
 *    it breaks the communicator as any failure does. Set it on every rank
 *    or on none: a rank without the check would match another's check
 *    with its collective. Sends and receives are not checked (a receive
 *    already fails when the byte counts differ). Unset, empty or 0: no
 *    check and no extra call; another value is RILL_ERROR_INVALID_ARGUMENT
 *    from rill_comm_create_mpi.
 *  - Under Open MPI, the first rill_comm_create_mpi of a process selects
 *    libnbc's Rabenseifner algorithm for MPI_Iallreduce (the control
 *    variable coll_libnbc_iallreduce_algorithm, set through the MPI tool
 *    interface) unless the program or the environment chose one: its
 *    default on few ranks reaches less than half the blocking
 *    MPI_Allreduce's bandwidth. The variable is the process's: the
 *    program's own MPI_Iallreduce calls use it too.
 *  - rill_shutdown destroys the communicators left, waiting for their
 *    collectives; after MPI_Finalize it releases only rill's part of them.
 *  - The program that calls rill_comm_create_mpi may fork, but the child
 *    cannot use the parent's communicators (RILL_ERROR_INVALID_ARGUMENT). */
#ifndef RILL_MPI_H
#define RILL_MPI_H

#include <mpi.h>
#include <stddef.h>

#include "rill.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rill_comm rill_comm;

typedef enum rill_reduce_op {
    RILL_REDUCE_SUM,
    RILL_REDUCE_MAX,
    RILL_REDUCE_MIN,
    RILL_REDUCE_AVG,
    RILL_REDUCE_PROD /* the product: every reduction takes it */
} rill_reduce_op;

/* The element types of rill_allreduce. */
typedef enum rill_dtype {
    RILL_DTYPE_F32, /* float */
    RILL_DTYPE_F64, /* double */
    RILL_DTYPE_I32, /* int32_t */
    RILL_DTYPE_I64  /* int64_t */
} rill_dtype;

/* Duplicates comm (MPI_Comm_dup), so rill's traffic never mixes with the
 * caller's. MPI must be initialised (MPI_THREAD_MULTIPLE is not required).
 * Collective over comm, as MPI_Comm_dup is, and blocks until every rank has
 * called it; RILL_ERROR_NOT_PERMITTED from a kernel or host function. The
 * duplicate returns MPI's errors to rill (MPI_ERRORS_RETURN). Statuses:
 * RILL_ERROR_INVALID_ARGUMENT for MPI_COMM_NULL, MPI not initialised or
 * already finalised, a RILL_COMM_TIMEOUT that is not a number, or a
 * RILL_COMM_CHECK other than 0 or 1;
 * RILL_ERROR_NOT_SUPPORTED below MPI_THREAD_SERIALIZED;
 * RILL_ERROR_INTERNAL when MPI cannot duplicate comm, or the other ranks do
 * not within RILL_COMM_TIMEOUT. */
rill_status rill_comm_create_mpi(MPI_Comm comm, rill_comm **out);
/* Waits for the communicator's pending collectives, then frees it. Blocks
 * (RILL_ERROR_NOT_PERMITTED from a kernel or host function); a collective
 * that failed or timed out is not pending. */
rill_status rill_comm_destroy(rill_comm *comm);
rill_status rill_comm_rank(rill_comm *comm, int *out);
rill_status rill_comm_size(rill_comm *comm, int *out);
/* *out = 1 when comm hands memory of CUDA devices to MPI as it is (a
 * CUDA-aware MPI, or RILL_MPI_CUDA_AWARE=1), 0 when it stages that memory
 * through page-locked host memory. */
rill_status rill_comm_cuda_aware(rill_comm *comm, int *out);

/* None of the calls below blocks. Each refuses, with
 * RILL_ERROR_INVALID_ARGUMENT and before anything is issued, a NULL or
 * destroyed handle, a NULL buffer where bytes are moved (one of 0 bytes
 * may be NULL), a count above INT_MAX or whose bytes do not fit in memory,
 * a buffer that is not device memory of the stream's device (memory of
 * another device: RILL_ERROR_DEVICE_MISMATCH) or that the bytes run past
 * the end of, overlapping recv and send (but recv == send in allreduce),
 * and a root or peer that is not a rank of comm. */

/* recv[i] = op over the ranks of send[i]; recv may equal send (in place). */
rill_status rill_allreduce_f32(rill_stream *s, rill_comm *comm, float *recv, const float *send,
                               size_t count, rill_reduce_op op);
/* rill_allreduce_f32 of count elements of dtype (count, not bytes), in
 * MPI's arithmetic (MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T). An average
 * of integers is RILL_ERROR_INVALID_ARGUMENT (reduce with
 * RILL_REDUCE_SUM and divide), as is a dtype that is not a rill_dtype;
 * an average of RILL_DTYPE_F64 on a CUDA device's memory handed to a
 * CUDA-aware MPI is RILL_ERROR_NOT_SUPPORTED (the division on the device
 * is of floats only). Under RILL_COMM_CHECK, a dtype that differs between
 * ranks fails the collective as a count does. */
rill_status rill_allreduce(rill_stream *s, rill_comm *comm, void *recv, const void *send,
                           size_t count, rill_dtype dtype, rill_reduce_op op);
/* buf on every rank becomes root's buf. */
rill_status rill_broadcast(rill_stream *s, rill_comm *comm, void *buf, size_t bytes, int root);
/* recv (size * bytes_per_rank) holds every rank's send, in rank order. */
rill_status rill_allgather(rill_stream *s, rill_comm *comm, void *recv, const void *send,
                           size_t bytes_per_rank);
/* Reduces send (size * count_per_rank) over the ranks; rank r keeps block r in recv. */
rill_status rill_reduce_scatter_f32(rill_stream *s, rill_comm *comm, float *recv, const float *send,
                                    size_t count_per_rank, rill_reduce_op op);
/* Point to point; a send and its recv match in issue order per pair of ranks. */
rill_status rill_send(rill_stream *s, rill_comm *comm, const void *buf, size_t bytes, int peer);
rill_status rill_recv(rill_stream *s, rill_comm *comm, void *buf, size_t bytes, int peer);

#ifdef __cplusplus
}
#endif

#endif /* RILL_MPI_H */
