/* SPDX-License-Identifier: MIT */
/* What the files of the CUDA backend share. Every rill stream is a
 * non-blocking CUstream of the device's primary context. A command is
 * issued to the driver as soon as nothing before it holds it back, and is
 * followed by a write of its sequence number into the stream's done word
 * (cuStreamWriteValue64 into page-locked host memory). The device's pump
 * thread, or a host thread about to wait, reads the done words and reports
 * completions in order. What the GPU cannot order by itself holds the
 * commands behind it on the host: a host function or graph launch (run by
 * a runner thread once everything before it completed), and a wait for a
 * stream of another device or backend, or for work not issued yet (met
 * through a rill__waiter). A wait for issued work of a stream of the same
 * device is an event recorded there and waited for by the GPU. */
#ifndef RILL_CUDA_H
#define RILL_CUDA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_libs.h"
#include "platform/thread.h"

/* The unit the pool commits device memory in: a multiple of the
 * allocation granularity of every GPU the backend takes (2 MiB on current
 * GPUs; device_init refuses a device whose granularity does not divide
 * it). */
#define RILL__CUDA_GRANULE ((size_t)2 << 20)

typedef struct cuda_cmd cuda_cmd;
/* At least sizeof(cuda_cmd) (checked where it is defined, cuda_stream.c):
 * what the queue bounds count per command (rill__backend_ops.cmd_bytes). */
#define CUDA_CMD_BYTES 256

/* The most host functions and graph launches a device runs at once (one
 * per stream that has one first in line). */
#define RILL__CUDA_MAX_RUNNERS 64

typedef struct cuda_device {
    const rill__cuda_driver *drv;
    CUdevice cu_dev;
    CUcontext ctx;        /* the primary context, retained */
    int ordinal;          /* the CUDA ordinal */
    CUstream aside;       /* the backend's own stream, where the first anchor is recorded */
    rill__cuda_libs libs; /* cuBLAS and cuDNN, for the built-in ops that use them */
    CUmodule op_module;   /* the built-in ops' PTX, loaded at the first op (guarded by lock) */
    /* timestamps (rill__cuda_stamp), guarded by stamp_lock: the last
     * timing event stamped (at first one recorded at init) and its stamp,
     * in rill__now_ns's clock */
    rill__mutex stamp_lock;
    CUevent anchor; /* owned */
    uint64_t anchor_ns;
    /* the pump: completes issued work, runs what holds streams back */
    rill__thread pump;
    _Atomic uint32_t bell; /* bumped to wake the pump */
    _Atomic int sleeping;  /* the pump is asleep on bell */
    _Atomic int stop;
    _Atomic int exiting; /* the process exits: the pump and runners stop at once */
    /* guarded by the list of live devices (cuda_device.c): the next one,
     * the process that started the threads, and whether they were joined */
    struct cuda_device *next_live;
    long pid;
    bool threads_stopped;
    /* the device's, and one per stream, pool segment and pinned host
     * allocation: rill frees those after device_shutdown, which drops the
     * first */
    _Atomic int refs;
    /* runners: threads that run host functions and graph launches, which
     * may take long, so that the pump goes on completing other streams'
     * work; guarded by run_lock */
    rill__mutex run_lock;
    cuda_cmd *jobs, *jobs_tail; /* handed over, not started */
    int num_runners, idle_runners;
    _Atomic uint32_t run_bell;
    rill__thread runners[RILL__CUDA_MAX_RUNNERS];
    /* guarded by lock: the streams with work not completed yet */
    rill__mutex lock;
    rill__stream **active;
    size_t num_active, cap_active;
} cuda_device;

typedef struct cuda_stream {
    rill__stream *self;
    CUstream cu;
    CUevent mark;                /* recorded for waits of other streams of the device */
    _Atomic uint64_t *done_word; /* host memory the GPU writes */
    CUdeviceptr done_dev;        /* the same word, as the GPU sees it */
    /* guarded by lock */
    rill__mutex lock;
    cuda_cmd *head, *tail; /* not completed yet, in stream order */
    cuda_cmd *next_issue;  /* the first command not issued, or NULL */
    bool active;           /* on the device's active list */
    int skipping;          /* issue skips work: a failure is open and no CLEAR followed */
    uint64_t clear_seq;    /* the last CLEAR issued */
    /* written under lock (release): the last command issued to the GPU or
     * settled on the host; other streams' waits read it */
    _Atomic uint64_t issued_seq;
    /* 1 while a thread completes the stream's commands (complete_done):
     * failing and ls belong to it then, or to the runner of the command
     * that is first (cuda_stream.c) */
    _Atomic int completing;
    int failing; /* a failure window is open (closed by a CLEAR's completion) */
    rill__launch_state ls;
} cuda_stream;

static inline cuda_device *cuda_device_of(rill__device *dev) {
    return rill__device_base_of(dev)->state;
}
static inline cuda_stream *cuda_stream_of(rill__stream *s) {
    return rill__queue_of(s)->state;
}

/* Drops a reference to d; the last one releases the context. */
void rill__cuda_unref(cuda_device *d);
/* Makes d's primary context current on the calling thread, whatever the
 * caller (PyTorch, the CUDA runtime) made current, and returns the context
 * that was current (NULL for none), which rill__cuda_leave restores: every
 * entry point of the backend on a caller's thread brackets its driver
 * calls with the two, so that rill never changes the caller's current
 * device. */
CUcontext rill__cuda_enter(cuda_device *d);
void rill__cuda_leave(cuda_device *d, CUcontext prev);
/* A sentence "what failed: NAME (description)" for a driver result. */
void rill__cuda_describe(const cuda_device *d, CUresult r, const char *what, char *buf,
                         size_t size);

/* The time of a timing event that completed, in the device's clock
 * (timestamp_ns), in whole nanoseconds: the stamp of the last event
 * stamped (the anchor) plus cuEventElapsedTime from it, so that the float
 * milliseconds the driver gives span only the time between two stamps,
 * never the device's age. Takes ev (it becomes the anchor, or is
 * destroyed). Any thread, with the context current. */
uint64_t rill__cuda_stamp(cuda_device *d, CUevent ev);

/* cuda_stream.c */
rill_status rill__cuda_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
/* host_help: completes what the GPU finished on s, on a host thread about
 * to wait for it, instead of leaving that to the pump's next look. */
bool rill__cuda_host_help(rill__stream *s, uint64_t seq);
void rill__cuda_pump(void *arg);
/* Stops the runners (device_shutdown, after the pump), or at the
 * process's exit only tells them to stop (d->exiting set). */
void rill__cuda_runners_stop(cuda_device *d);
void rill__cuda_runners_wake(cuda_device *d);
void rill__cuda_ring(cuda_device *d);

/* cuda_memory.c */
rill_status rill__cuda_mem_alloc(rill__device *dev, size_t bytes, void **out, void **handle);
void rill__cuda_mem_free(rill__device *dev, void *ptr, size_t bytes, void *handle);
rill_status rill__cuda_mem_commit(rill__device *dev, void *handle, size_t offset, size_t bytes);
void rill__cuda_mem_decommit(rill__device *dev, void *handle, size_t offset, size_t bytes);
void *rill__cuda_host_alloc(rill__device *dev, size_t bytes);
void rill__cuda_host_free(rill__device *dev, void *ptr, size_t bytes);
rill_status rill__cuda_mem_reachable(rill__device *dev, const void *p, size_t bytes, char *why,
                                     size_t why_size);
rill_status rill__cuda_kernel_load(rill__device *dev, const rill__kernel_image *k,
                                   const rill_kernel_image *image, void **loaded);
void rill__cuda_kernel_unload(rill__device *dev, const rill__kernel_image *k, void *loaded);

/* What kernel_load makes of a kernel. */
typedef struct cuda_loaded {
    CUmodule module; /* NULL when the function belongs to a module shared by others */
    CUfunction fn;   /* NULL for a built-in op that a library runs */
    rill__op op;     /* the built-in op, or RILL__OP_NONE */
} cuda_loaded;

#endif
