/* SPDX-License-Identifier: MIT */
/* What the files of the CUDA backend share. Every rill stream is a
 * non-blocking CUstream of the device's primary context. A command is
 * issued to the driver as soon as nothing before it holds it back: a
 * launch, copy or memset is one driver call, and a graph launch is CUDA
 * graphs (cuda_graph.c): one cuGraphLaunch when the exec has no node the
 * host runs. The GPU reports how far it got by writing a sequence number
 * into the stream's done word (cuStreamWriteValue64 into page-locked host
 * memory), which the backend queues only where the host needs to know
 * (cuda_stream.c, flush): a host thread waits for or queries the stream, a
 * record of a timing or interprocess event, work held on the host behind
 * GPU work, a stream quiet for a while with work unreported, and every
 * CUDA_FLUSH_EVERY commands. The device's pump thread, or a host thread
 * about to wait, reads the done words and reports completions in order
 * (cuda_complete.c). What the GPU cannot order by itself holds the
 * commands behind it on the host: a host function or a graph launch with
 * host nodes (run by a runner thread once everything before it completed,
 * cuda_runner.c), a large copy with pageable host memory (cuda_stage.c),
 * and a wait for a stream of another device or backend, or
 * for work not issued yet (met through a rill__waiter). A wait for issued
 * work of a stream of the same device is the awaited stream's own event
 * (its mark), recorded there when needed and waited for by the GPU. */
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
/* At least sizeof(cuda_cmd) (checked below): what the queue bounds count
 * per command (rill__backend_ops.cmd_bytes). */
#define CUDA_CMD_BYTES 256

/* A stream's done word is written at least once every this many commands
 * issued to the GPU, so that completions are reported in batches no larger
 * (backend.h allows batches). */
#define CUDA_FLUSH_EVERY 256
/* The most commands a stream keeps for reuse (their memory, with room for
 * RILL__QUEUE_INLINE_BYTES of arguments). */
#define CUDA_FREE_CMDS 256

/* The most bytes of parameters a kernel takes (CUDA 12.1 and later, on
 * every GPU rill takes). */
#define CUDA_MAX_PARAM_BYTES 32764u
/* The most timing events a device keeps for reuse. */
#define CUDA_TIMING_EVENTS 32

/* Staging of copies between a GPU's memory and pageable host memory
 * (cuda_stage.c): a device keeps up to CUDA_STAGE_BUFFERS page-locked
 * buffers of CUDA_STAGE_BYTES; a copy to the GPU of up to
 * CUDA_STAGE_EAGER_BYTES is staged when it is submitted. */
#define CUDA_STAGE_BYTES       ((size_t)256 << 10)
#define CUDA_STAGE_BUFFERS     16
#define CUDA_STAGE_EAGER_BYTES ((size_t)64 << 10)
/* The most buffers one large copy cycles through. */
#define CUDA_STAGE_RUN_BUFFERS 4

typedef struct cuda_stage cuda_stage;

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
    CUmodule op_module;   /* the built-in ops' kernels, loaded at the first op (guarded by lock) */
    /* what the GPU launches (device attributes, immutable after init) */
    unsigned max_block[3], max_block_threads, max_grid[3];
    /* timestamps (rill__cuda_stamp), guarded by stamp_lock: the last
     * timing event stamped (at first one recorded at init) and its stamp,
     * in rill__now_ns's clock */
    rill__mutex stamp_lock;
    CUevent anchor; /* owned */
    uint64_t anchor_ns;
    /* timing events for reuse (owned), num_timing of them */
    CUevent timing[CUDA_TIMING_EVENTS];
    unsigned num_timing;
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
    /* staging buffers (cuda_stage.c), guarded by stage_lock, a leaf lock
     * (taken with a stream's lock held): those nobody holds a part of, the
     * one small copies take parts of, and every one made (owned, freed by
     * the last reference) */
    rill__mutex stage_lock;
    cuda_stage *stage_free;
    cuda_stage *stage_fill;
    cuda_stage *stages[CUDA_STAGE_BUFFERS];
    unsigned num_stages;
    /* guarded by lock: the streams with work not completed yet */
    rill__mutex lock;
    rill__stream **active;
    size_t num_active, cap_active;
} cuda_device;

typedef struct cuda_stream {
    rill__stream *self;
    CUstream cu;
    _Atomic uint64_t *done_word; /* host memory the GPU writes */
    CUdeviceptr done_dev;        /* the same word, as the GPU sees it */
    /* guarded by mark_lock, a leaf lock (taken with another stream's lock
     * held, never the other way round): an event of the stream, recorded
     * for waits of other streams of the device; mark_seq is the last
     * command issued before its latest record (0: never recorded) */
    rill__mutex mark_lock;
    CUevent mark; /* owned, CU_EVENT_DISABLE_TIMING */
    uint64_t mark_seq;
    /* guarded by lock */
    rill__mutex lock;
    cuda_cmd *head, *tail; /* not completed yet, in stream order */
    cuda_cmd *next_issue;  /* the first command not issued, or NULL */
    cuda_cmd *free_cmds;   /* commands for reuse: num_free of them */
    unsigned num_free;
    bool active;        /* on the device's active list */
    int skipping;       /* issue skips work: a failure is open and no CLEAR followed */
    uint64_t clear_seq; /* the last CLEAR issued */
    uint64_t gpu_seq;   /* the last command issued to the GPU */
    uint64_t written;   /* the last number whose write to the done word is queued */
    unsigned unwritten; /* commands issued to the GPU since that write */
    uint64_t issued_ns; /* when the last command was issued (rill__now_ns) */
    bool job_deferred;  /* a runner's command, first, waited for a completer */
    /* every command from head to quiet_last (number quiet_seq) neither
     * reads nor writes host memory any more (cuda_stage.c); stale once
     * head's number passed quiet_seq */
    cuda_cmd *quiet_last;
    uint64_t quiet_seq;
    /* a write of the done word is wanted (another stream's completion
     * waits for this one's): the pump queues it at its next look */
    _Atomic int want_flush;
    /* written under lock (release): the last command issued to the GPU or
     * settled on the host; other streams' waits read it */
    _Atomic uint64_t issued_seq;
    /* 1 while a thread completes the stream's commands (complete_done):
     * failing and ls belong to it then, or to the runner of the command
     * that is first (cuda_stream.c), which no runner takes meanwhile: the
     * command before it may still be finishing (a carried failure sets
     * failing) */
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
 * never the device's age. Takes ev (it becomes the anchor, or goes back
 * to the pool of timing events, as the anchor it replaces does). Any
 * thread, with the context current. */
uint64_t rill__cuda_stamp(cuda_device *d, CUevent ev);
/* A timing event (CU_EVENT_DEFAULT) from d's pool, made when the pool is
 * empty; NULL when the driver makes none. _put gives one back. Any
 * thread, with the context current. */
CUevent rill__cuda_timing_event(cuda_device *d);
void rill__cuda_timing_event_put(cuda_device *d, CUevent ev);

/* A copy with pageable host memory, which the GPU cannot reach by DMA:
 * it goes through staging buffers (cuda_stage.c). */
enum cuda_staged {
    CUDA_STAGED_NONE = 0,
    CUDA_STAGED_H2D, /* from pageable host memory to a GPU's memory */
    CUDA_STAGED_D2H  /* from a GPU's memory to pageable host memory */
};

/* A command of a stream, from submission to completion. */
enum cuda_cmd_state {
    CUDA_QUEUED = 0, /* not issued: held back by a command before it */
    CUDA_ON_GPU,     /* issued; complete once the done word reaches its number */
    CUDA_MET,        /* nothing left on the GPU: complete once the ones before it are */
    CUDA_RUNNING     /* a host function or graph launch a runner runs */
};

struct cuda_cmd {
    cuda_cmd *next;
    rill__cmd c; /* kernel args point into args, the command's own copy */
    uint64_t seq;
    enum cuda_cmd_state state;
    CUresult error;       /* an issue that failed: the command fails the stream */
    char *why;            /* owned: a library's sentence for error, or NULL */
    CUevent ev;           /* a RECORD: the point's time (owned until stamped) */
    CUevent trace_ev[2];  /* while a trace records: the GPU's times before and after it */
    void *graph_run;      /* owned: a graph launch's, for its completion (cuda_graph.h) */
    bool gpu_wait;        /* a WAIT the GPU does, on the awaited stream's mark */
    bool waiting;         /* a WAIT or graph launch with its waiter registered */
    bool carried;         /* a WAIT that took on the awaited work's failure when issued */
    bool on_host;         /* a SET the GPU cannot do, or a staged COPY: a runner does it */
    bool pooled;          /* from the stream's free list (room for the inline arguments) */
    unsigned char staged; /* a COPY: enum cuda_staged */
    bool heap_copy;       /* stage_at is the source's copy on the heap (owned) */
    cuda_stage *stage;    /* ref: the staging buffer of stage_at, or NULL */
    void *stage_at;       /* the copy's part of it, or its heap copy */
    _Atomic int met;      /* ... and the waiter was called */
    cuda_device *d;       /* for the waiter */
    cuda_stream *cs;      /* its stream, for a runner */
    cuda_cmd *job_next;   /* on the device's list of jobs for the runners */
    rill__waiter waiter;
    alignas(16) unsigned char args[]; /* kernel args, aligned for any parameter */
};
_Static_assert(sizeof(struct cuda_cmd) <= CUDA_CMD_BYTES, "cuda_cmd: raise CUDA_CMD_BYTES");

/* cuda_trace.c: commands in traces (src/trace/trace.h). What the GPU runs
 * is timed by events recorded before and after it (begin, then end once
 * issued, or not), and recorded when it completes (finish); what a runner
 * runs is timed on the host (host, from t0 to now). */
void rill__cuda_trace_begin(cuda_device *d, cuda_stream *cs, cuda_cmd *n);
void rill__cuda_trace_end(cuda_device *d, cuda_stream *cs, cuda_cmd *n, bool issued);
void rill__cuda_trace_finish(cuda_device *d, cuda_stream *cs, cuda_cmd *n);
void rill__cuda_trace_host(cuda_stream *cs, const cuda_cmd *n, uint64_t t0);

/* cuda_stream.c: submission and issue */
rill_status rill__cuda_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
/* Issues what nothing holds back any more (cs->lock held); a write of the
 * done word follows when flush is set and work on the GPU is unreported. */
void rill__cuda_issue_ready(cuda_device *d, cuda_stream *cs, bool flush);
/* Queues a write of the done word after the work issued to the GPU, when
 * some of it is not covered by one yet (cs->lock held). */
void rill__cuda_flush_locked(cuda_device *d, cuda_stream *cs);
/* Gives a command back to its stream's free list, or to the allocator. */
void rill__cuda_cmd_free(cuda_stream *cs, cuda_cmd *n);
/* Frees the stream's free list (stream_fini). */
void rill__cuda_cmds_fini(cuda_stream *cs);
/* A copy, and a memset of device memory, on stream (one driver call). */
static inline CUresult rill__cuda_copy(cuda_device *d, CUstream stream, const rill__copy_call *c) {
    return d->drv->cuMemcpyAsync((CUdeviceptr)(uintptr_t)c->dst, (CUdeviceptr)(uintptr_t)c->src,
                                 c->bytes, stream);
}
CUresult rill__cuda_set(cuda_device *d, CUstream stream, const rill__set_call *c);
/* Whether the GPU can set p's memory with cuMemsetD8Async: device memory. */
bool rill__cuda_gpu_settable(cuda_device *d, const void *p);
/* The driver's CU_MEMORYTYPE_* of p's memory, 0 for memory it does not
 * know (pageable host memory): cuPointerGetAttributes, which answers for
 * such memory without an error (cuPointerGetAttribute fails, and tools
 * that watch the driver's calls report each failure). */
static inline unsigned int rill__cuda_memory_type(cuda_device *d, const void *p) {
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    unsigned int type = 0;
    void *data = &type;
    if (d->drv->cuPointerGetAttributes(1, &attribute, &data, (CUdeviceptr)(uintptr_t)p) !=
        CUDA_SUCCESS)
        return 0;
    return type;
}

/* cuda_complete.c: completion and the pump */
/* host_help: completes what the GPU finished on s, on a host thread about
 * to wait for it, after asking the GPU to say how far it got. */
bool rill__cuda_host_help(rill__stream *s, uint64_t seq);
/* kick: a host thread polls s; the GPU is asked to say how far it got. */
void rill__cuda_kick(rill__stream *s);
void rill__cuda_pump(void *arg);
void rill__cuda_ring(cuda_device *d);
/* Completes, in order, the commands of cs that are done (no lock held);
 * false, doing nothing, when another thread is at it. */
bool rill__cuda_complete_done(cuda_device *d, cuda_stream *cs);
/* Opens a failure window at seq: what failed on s, and why. */
void rill__cuda_fail_stream(cuda_stream *cs, uint64_t seq, const char *what, const char *detail);
/* Whether r leaves the context unusable (a fault on the GPU). */
bool rill__cuda_ends_context(CUresult r);
/* Registers n's waiter for t's seq; true when that is done already. */
bool rill__cuda_wait_for(cuda_cmd *n, rill__stream *t, uint64_t seq);

/* cuda_runner.c: host functions, memsets on the host, graph launches */
/* The command first in cs that a runner runs, now marked CUDA_RUNNING, or
 * NULL (cs->lock held); NULL too while a completer finishes the commands
 * before it, which then rings the pump to hand it over. */
cuda_cmd *rill__cuda_take_job_locked(cuda_stream *cs);
/* Gives n (taken by rill__cuda_take_job_locked) to a runner; no lock held. */
void rill__cuda_hand_over(cuda_device *d, cuda_cmd *n);
/* Stops the runners (device_shutdown, after the pump), or at the
 * process's exit only tells them to stop (d->exiting set). */
void rill__cuda_runners_stop(cuda_device *d);
void rill__cuda_runners_wake(cuda_device *d);
/* A kernel call on stream; a built-in op that a library runs goes there,
 * and a failure of the library's leaves its sentence in *why (owned). */
CUresult rill__cuda_launch(cuda_device *d, CUstream stream, const rill__kernel_call *k, char **why);

/* cuda_stage.c: copies with pageable host memory */
/* Which staging a copy on d needs (one rill__cuda_memory_type for the host
 * side of a copy between host memory and a GPU's memory). Any thread,
 * the context current. */
enum cuda_staged rill__cuda_stage_kind(cuda_device *d, const rill__copy_call *c);
/* A copy to the GPU of up to CUDA_STAGE_EAGER_BYTES, being submitted:
 * where reading its source now keeps stream order (nothing before it
 * runs on the host or writes host memory), the source is copied into a
 * staging buffer's part (or, where none is to be had, onto the heap, and
 * a runner copies it), so the caller may reuse it at once; else a runner
 * reads it in stream order. false when no memory holds it (cs->lock
 * held). */
bool rill__cuda_stage_submit_locked(cuda_device *d, cuda_stream *cs, cuda_cmd *n);
/* A staged copy being issued (cs->lock held, not skipping): false when a
 * runner must do it once it is first in its stream; true when it went to
 * the GPU or failed (n->error). */
bool rill__cuda_stage_issue_locked(cuda_device *d, cuda_stream *cs, cuda_cmd *n);
/* A staged copy that completed (cs->lock held): a copy to host memory
 * copies its part out, in stream order. */
void rill__cuda_stage_complete_locked(cuda_cmd *n);
/* A runner's staged copy, first in its stream: through up to
 * CUDA_STAGE_RUN_BUFFERS buffers, each cycle waited for
 * (cuStreamSynchronize); without any, the driver's own copy of pageable
 * memory. Returns whether it is settled (nothing of it left on the GPU). */
bool rill__cuda_stage_run(cuda_device *d, cuda_stream *cs, cuda_cmd *n);
/* Gives back what a command holds of staging (its completion). */
void rill__cuda_stage_release(cuda_device *d, cuda_cmd *n);
/* Frees the staging buffers (the device's last reference, context
 * current). */
void rill__cuda_stage_fini(cuda_device *d);

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
