/* SPDX-License-Identifier: MIT */
/* The runtime: the library's global state (devices, event and kernel
 * lists), initialised on first use and torn down by rill_shutdown, and the
 * per-thread state (current device, current streams, worker flag). */
#ifndef RILL_CORE_RUNTIME_H
#define RILL_CORE_RUNTIME_H

#include <stdatomic.h>

#include "backend/backend.h"
#include "platform/thread.h"
#include "rill.h"
#include "util/list.h"

#define RILL__MAX_DEVICES 16

/* An object's state word: live, or dead once destroyed (users' handles are
 * checked through the handle table, src/core/handle.h; this word tells
 * internal code, which holds objects, whether one was destroyed). */
#define RILL__MAGIC_DEVICE 0x52444556u /* "RDEV" */
#define RILL__MAGIC_STREAM 0x5253544du /* "RSTM" */
#define RILL__MAGIC_EVENT  0x52455654u /* "REVT" */
#define RILL__MAGIC_KERNEL 0x524b524eu /* "RKRN" */
#define RILL__MAGIC_DEAD   0xdeadbeefu

/* The work of stream up to seq: the unit in which the library says "after
 * this work". */
typedef struct rill__mem_dep {
    rill__stream *stream; /* ref */
    uint64_t seq;
} rill__mem_dep;

typedef struct rill__tagged_stream {
    struct rill__tagged_stream *next;
    char *tag;            /* owned */
    rill__stream *stream; /* owned by the device */
} rill__tagged_stream;

struct rill__device {
    /* what the backend reads (backend.h): info, and the backend's state;
     * first, so rill__device_base_of can find it */
    rill__device_base base;
    _Atomic uint32_t magic; /* see RILL__MAGIC_DEVICE */
    /* immutable after init */
    rill_device *handle; /* its handle (handle.h), open until rill_shutdown */
    const rill__backend_ops *ops;
    rill__stream *default_stream; /* owned */
    /* guarded by lock */
    rill__mutex lock;
    rill__link *streams; /* by dev_link: the streams not yet freed, default and tagged ones too */
    rill__tagged_stream *tagged;
    /* owned by the memory layer (src/mem/pool.c), guarded by its lock */
    struct rill__pool *pool;
    /* atomic: the extra_bytes of the commands queued on its streams
     * (core/queue_limit.h); touched only by kernels with large arguments */
    _Atomic size_t queued_extra_bytes;
    /* atomic (relaxed, hints): the bytes of its streams' queued commands
     * without the extra ones, as last summed over its streams, and when
     * (core/queue_limit.c: at most once per SUM_EVERY_NS unless full) */
    _Atomic size_t queued_summed_bytes;
    _Atomic uint64_t queued_summed_ns;
};

typedef struct rill__tagged_event {
    struct rill__tagged_event *next;
    char *tag;          /* owned */
    rill__event *event; /* owned by the runtime */
} rill__tagged_event;

typedef struct rill__runtime {
    /* immutable after init */
    int num_devices;
    rill__device *devices[RILL__MAX_DEVICES]; /* owned */
    rill__device *initial_device;             /* NULL when RILL_DEVICE names none */
    bool device_memory;   /* a device whose memory is not host memory exists (mem_caps) */
    char init_error[256]; /* why a device is missing, or "" */
    /* per backend (index in rill__backends): why it has no device */
    char none_why[RILL__MAX_BACKENDS][256];
    uint64_t epoch; /* distinguishes successive inits */
    /* guarded by lock */
    rill__mutex lock;
    /* lists by rt_link (util/list.h) */
    rill__link *events;         /* every live event, for rill_shutdown */
    rill__link *kernels;        /* live kernels (src/core/kernel.h) */
    rill__link *zombie_kernels; /* destroyed kernels not yet freed (rt_link.next only) */
    rill__link *graphs;         /* every graph not destroyed */
    rill__link *execs;          /* every exec not yet freed */
    rill__tagged_event *tagged_events;
} rill__runtime;

/* The rill_shutdowns that began releasing a runtime so far (tests). */
uint64_t rill__shutdown_count(void);
/* The runtime while it is up: NULL before the first call and from the
 * start of rill_shutdown (device.c). */
extern _Atomic(rill__runtime *) rill__runtime_up;
/* rill__runtime_get when the runtime is not up: the dying one for its own
 * threads, else a new one. */
rill_status rill__runtime_get_slow(rill__runtime **out);
/* The runtime, initialised on first use. */
static inline rill_status rill__runtime_get(rill__runtime **out) {
    /* acquire: pairs with the release store that publishes the runtime. */
    rill__runtime *rt = atomic_load_explicit(&rill__runtime_up, memory_order_acquire);
    if (rt != NULL) {
        *out = rt;
        return RILL_OK;
    }
    return rill__runtime_get_slow(out);
}
/* Whether the runtime has a device whose memory is not host memory
 * (rill__backend_ops.mem_caps): where it has none, every device reaches
 * all host memory and checks of reach pass. */
bool rill__runtime_has_device_memory(void);
/* The first step, after RILL_CALL_SCOPE(), of a public call that reaches
 * the runtime's state through a pointer rather than a handle (rill_free,
 * rill_memcpy, ...): a rill_shutdown on another thread then waits for the
 * call, or the call for the shutdown (core/calls.h), as a handle lookup
 * would make it. */
static inline void rill__runtime_enter(void) {
    rill__runtime *rt;
    (void)rill__runtime_get(&rt);
}

/* Resolves a device argument: NULL means the calling thread's current
 * device. fn names the public call for the error sentence. */
rill_status rill__device_resolve(rill_device *handle, const char *fn, rill__device **out);
/* For tests and debugging: rill__stream_check on every stream of dev (NULL:
 * the calling thread's current device), default and tagged ones included.
 * False with a sentence in why (cap bytes) when an invariant does not
 * hold, dev is not a device, or there is no memory to list the streams. */
bool rill__device_check_streams(rill_device *dev, char *why, size_t cap);
/* The first device of kind, or NULL (the runtime is initialised). */
rill__device *rill__device_of_kind(rill_device_kind kind);
/* The backend of kind in rill__backends and its index there in *index, or
 * NULL when this build has none. Needs no runtime. */
const rill__backend_ops *rill__backend_of_kind(rill_device_kind kind, int *index);
/* The backend that name names ("cpu"), or NULL. Needs no runtime. */
const rill__backend_ops *rill__backend_named(const char *name, size_t len);
/* The backends' names as "'cpu', 'cuda'", for sentences. */
void rill__backend_names(char *buf, size_t size);
/* RILL_ERROR_NO_DEVICE for fn, with the reason the runtime found no device
 * (a backend's probe, a device that did not start, RILL_DEVICE) when it
 * knows one. */
rill_status rill__no_device(rill__runtime *rt, const char *fn);
/* Fills deps with (stream, submitted seq) of every stream of dev that has
 * work pending (proxy streams aside: they run no work), taking a reference
 * on each stream, and returns how many;
 * *overflow is set when more than cap streams had work pending. */
size_t rill__device_pending(rill__device *dev, rill__mem_dep *deps, size_t cap, int *overflow);
/* Waits for the work submitted so far to every stream of dev (destroyed
 * streams included) and returns RILL_ERROR_KERNEL_FAILED, with a sentence
 * naming fn, when some stream has failed. No capture or worker check: for
 * the library's own waits (rill_device_synchronize makes both first). */
rill_status rill__device_drain(rill__device *dev, const char *fn);
/* True when every pair in deps has completed. */
int rill__deps_done(const rill__mem_dep *deps, size_t n);

/* Adds s to or removes it from dev's list of live streams. */
void rill__device_add_stream(rill__device *dev, rill__stream *s);
void rill__device_remove_stream(rill__device *dev, rill__stream *s);

/* The calling thread's current stream for dev (its default stream unless
 * rill_set_current_stream changed it). When that stream was destroyed, the
 * default stream, made to wait for the destroyed stream's work first; a
 * failure to queue that wait (fn names the call) is returned, *out NULL. */
rill_status rill__thread_current_stream(rill__device *dev, const char *fn, rill__stream **out);

/* RILL_ERROR_NOT_PERMITTED with a sentence when called on a worker. */
rill_status rill__check_may_block(const char *fn);

/* The calling thread's capture mode (rill_thread_exchange_capture_mode,
 * src/graph): thread state that the core keeps, so that a host thread
 * running work as a worker (rill__thread_enter_worker) sets it aside with
 * the rest. */
extern _Thread_local rill_capture_mode rill__thread_capture_mode;

#endif
