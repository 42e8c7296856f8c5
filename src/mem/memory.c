/* SPDX-License-Identifier: MIT */
/* The public memory calls: device memory (through the device's pool,
 * src/mem/pool.c), page-locked host memory, copies and fills in stream
 * order, which the pool is told about as uses of the memory they touch,
 * statistics, the reservation limit and the memory summary; and the check
 * that a declared access stays inside its allocation, which copies, fills
 * and the built-in ops share. */
#include "mem/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/queue_limit.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "mem/ipc.h"
#include "mem/pool.h"
#include "mem/registry.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/status.h"

static void free_host_block(const rill__mem_block *b, void *ctx) {
    (void)ctx;
    b->dev->ops->host_free(b->dev, (void *)b->base, b->bytes);
}

void rill__mem_host_shutdown(rill__runtime *rt) {
    for (int i = 0; i < rt->num_devices; i++)
        rill__registry_drain(rt->devices[i], RILL__MEM_HOST, free_host_block, NULL);
}

/* ------------------------------------------------------------ subsystem */

static const rill__mem_hooks hooks = {.note_use = rill__pool_note_use,
                                      .check_reach = rill__mem_check_reach};

static void mem_start(rill__runtime *rt) {
    (void)rt;
    rill__registry_init();
    atomic_store_explicit(&rill__mem, &hooks, memory_order_relaxed);
}

static void mem_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    if (phase == RILL__SHUTDOWN_STOPPED) {
        rill__ipc_mem_shutdown(rt);
        rill__mem_host_shutdown(rt); /* while the devices that made it exist */
    } else if (phase == RILL__SHUTDOWN_DEVICES) {
        rill__registry_shutdown();
    }
}

static void mem_fork_child(rill__runtime *rt) {
    (void)rt;
    rill__registry_init(); /* its lock may have been held at the fork */
}

const rill__subsystem rill__mem_subsystem = {
    .name = "memory",
    .start = mem_start,
    .device_init = rill__pool_create,
    .device_fini = rill__pool_destroy,
    .shutdown = mem_shutdown,
    .fork_child = mem_fork_child,
};

/* ---------------------------------------------------------------- traces */

/* The memory counters of every device, after an allocation or a free
 * changed them (while a trace records). */
static rill_status trace_memory(rill_status st) {
    rill__runtime *rt;
    if (st != RILL_OK || rill__runtime_get(&rt) != RILL_OK)
        return st;
    for (int i = 0; i < rt->num_devices; i++) {
        rill_mem_stats ms;
        rill__pool_get_stats(rt->devices[i], &ms);
        rill__trace_rec r;
        memset(&r, 0, sizeof r);
        r.type = RILL__TRACE_COUNTER;
        r.device = (int8_t)rt->devices[i]->base.info.ordinal;
        r.t0 = rill__trace_now();
        r.a = ms.allocated_bytes;
        r.b = ms.reserved_bytes;
        rill__trace_emit(&r);
    }
    return st;
}

/* ---------------------------------------------------------------- public */

rill_status rill_malloc(rill_device *dev_h, size_t bytes, void **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_malloc: out is NULL; pass the address of a void * to receive the pointer");
    *out = NULL;
    if (bytes == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_malloc: bytes is 0; allocate at least one byte");
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_malloc", &dev);
    if (st != RILL_OK)
        return st;
    st = rill__capture_check_unsafe("rill_malloc");
    if (st != RILL_OK)
        return st;
    /* The memory belongs to the calling thread's current stream of dev:
     * work there is ordered with the free, uses elsewhere are tracked. */
    rill__stream *s;
    st = rill__thread_current_stream(dev, "rill_malloc", &s);
    if (st != RILL_OK)
        return st;
    st = rill__pool_alloc(s, bytes, "rill_malloc", out);
    return rill__tracing() ? trace_memory(st) : st;
}

rill_status rill_free(void *ptr) {
    RILL_CALL_SCOPE();
    if (ptr == NULL)
        return RILL_OK;
    rill__runtime_enter();
    rill_status st = rill__capture_check_free(ptr, "rill_free");
    if (st != RILL_OK)
        return st;
    if (rill__san_active())
        rill__san()->free(ptr, NULL);
    st = rill__pool_free(ptr, NULL, "rill_free");
    return rill__tracing() ? trace_memory(st) : st;
}

rill_status rill_malloc_async(size_t bytes, rill_stream *stream_h, void **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_malloc_async: out is NULL; pass the address of a void * to receive the pointer");
    *out = NULL;
    if (bytes == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_malloc_async: bytes is 0; allocate at least one byte");
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_malloc_async", &stream);
    if (st != RILL_OK)
        return st;
    return rill__mem_alloc_async(stream, bytes, out);
}

rill_status rill__mem_alloc_async(rill__stream *stream, size_t bytes, void **out) {
    if (rill__stream_capturing(stream))
        return rill__capture_malloc(stream, bytes, out);
    rill_status st = rill__pool_alloc_async(stream, bytes, "rill_malloc_async", out);
    return rill__tracing() ? trace_memory(st) : st;
}

rill_status rill_free_async(void *ptr, rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_free_async", &stream);
    if (st != RILL_OK)
        return st;
    return rill__mem_free_async(ptr, stream);
}

rill_status rill__mem_free_async(void *ptr, rill__stream *stream) {
    if (ptr == NULL)
        return RILL_OK;
    rill_status st;
    if (rill__stream_capturing(stream)) {
        /* Memory of the capture's graph is freed inside the graph; other
         * memory would be freed once, at capture time: an unsafe call. */
        bool handled;
        st = rill__capture_free(stream, ptr, &handled);
        if (handled)
            return st;
        st = rill__capture_check_unsafe("rill_free_async");
    } else {
        st = rill__capture_check_free(ptr, "rill_free_async");
    }
    if (st != RILL_OK)
        return st;
    if (rill__san_active())
        rill__san()->free(ptr, stream);
    st = rill__pool_free(ptr, stream, "rill_free_async");
    return rill__tracing() ? trace_memory(st) : st;
}

rill_status rill_record_stream(void *ptr, rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, "rill_record_stream", &stream);
    if (st != RILL_OK)
        return st;
    st = rill__pool_record_stream(ptr, stream, "rill_record_stream");
    if (st == RILL_OK && rill__san_active())
        rill__san()->record_stream(ptr, stream);
    return st;
}

rill_status rill_malloc_host(size_t bytes, void **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "rill_malloc_host: out is NULL; pass the address of a void * to receive the pointer");
    *out = NULL;
    if (bytes == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_malloc_host: bytes is 0; allocate at least one byte");
    /* Host memory for the current device's copies, as cudaMallocHost
     * pins memory for the current context's. */
    rill__device *dev;
    rill_status st = rill__device_resolve(NULL, "rill_malloc_host", &dev);
    if (st != RILL_OK)
        return st;
    st = rill__mem_host_alloc(dev, bytes, out);
    return st == RILL_OK ? st : rill__fail_from(st, "rill_malloc_host");
}

rill_status rill__mem_host_alloc(rill__device *dev, size_t bytes, void **out) {
    *out = NULL;
    void *p = dev->ops->host_alloc(dev, bytes);
    if (p == NULL)
        return RILL_ERROR_OUT_OF_MEMORY; /* the backend's sentence */
    rill__mem_block b = {(uintptr_t)p, bytes, dev, RILL__MEM_HOST, NULL};
    if (rill__registry_insert(&b) != RILL_OK) {
        dev->ops->host_free(dev, p, bytes);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = p;
    return RILL_OK;
}

rill_status rill_free_host(void *ptr) {
    RILL_CALL_SCOPE();
    if (ptr == NULL)
        return RILL_OK;
    rill__runtime_enter();
    rill__mem_block b;
    if (!rill__registry_remove(ptr, RILL__MEM_HOST, &b))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_free_host: %p is not host memory from "
                          "rill_malloc_host (or was already freed)",
                          ptr);
    b.dev->ops->host_free(b.dev, ptr, b.bytes);
    return RILL_OK;
}

rill_status rill__mem_check_access(const char *fn, const char *what, const char *shape,
                                   const void *p, size_t bytes, rill__device **dev) {
    size_t to_end = 0;
    rill__mem_block b;
    *dev = NULL;
    if (rill__pool_find(p, dev, &to_end)) {
        /* device memory: an allocated block of a pool */
    } else if (!rill__registry_find(p, &b)) {
        return RILL_OK; /* ordinary host memory */
    } else if (b.kind == RILL__MEM_DEVICE) {
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s (%p) is device memory that is not allocated (freed?); pass "
                          "memory that is allocated until the work completes",
                          fn, what, p);
    } else {
        to_end = b.base + b.bytes - (uintptr_t)p;
        if (b.kind == RILL__MEM_IPC)
            *dev = b.dev;
    }
    if (bytes > to_end)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s (%p) covers %zu bytes%s%s%s, but its allocation has %zu bytes "
                          "from %s to its end; pass sizes that fit the allocation",
                          fn, what, p, bytes, shape != NULL ? " (" : "", shape != NULL ? shape : "",
                          shape != NULL ? ")" : "", to_end, what);
    return RILL_OK;
}

/* "device 1 (CPU (AMD EPYC))": for sentences. */
static void name_device(const rill__device *dev, char *buf, size_t size) {
    snprintf(buf, size, "device %d (%s)", dev->base.info.ordinal, dev->base.info.name);
}

rill_status rill__mem_reach(const char *fn, const char *what, int index, const void *p,
                            size_t bytes, rill__device *dev, rill__device *user) {
    if (dev == user)
        return RILL_OK;
    char why[160];
    if (dev != NULL) {
        if ((dev->ops->mem_caps & user->ops->mem_caps & RILL__MEMCAP_HOST) != 0)
            return RILL_OK; /* host memory, both */
    } else if (user->ops->mem_reachable == NULL ||
               user->ops->mem_reachable(user, p, bytes, why, sizeof why) == RILL_OK) {
        return RILL_OK;
    }
    /* Refused: the sentence. */
    char arg[112], mine[160], theirs[160];
    if (index >= 0)
        snprintf(arg, sizeof arg, "kernel '%s' access %d", what, index);
    else
        snprintf(arg, sizeof arg, "%s", what);
    name_device(user, mine, sizeof mine);
    if (dev == NULL)
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "%s: %s (%p) is %s, which the stream's %s cannot reach; copy it into the "
                          "device's memory (rill_malloc_async, rill_memcpy_async) or page-locked "
                          "host memory (rill_malloc_host) first",
                          fn, arg, p, why, mine);
    name_device(dev, theirs, sizeof theirs);
    return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                      "%s: %s (%p) is memory of %s, and the stream is of %s, which cannot reach "
                      "it; copy it to %s first (rill_memcpy_async into its memory)",
                      fn, arg, p, theirs, mine, mine);
}

rill_status rill__mem_check_reach(const char *fn, const char *what, int index, const void *p,
                                  size_t bytes, rill__device *user) {
    rill__mem_block b;
    rill__device *dev = rill__registry_find(p, &b) && b.kind != RILL__MEM_HOST ? b.dev : NULL;
    return rill__mem_reach(fn, what, index, p, bytes, dev, user);
}

rill_status rill__mem_check_copy(void *dst, const void *src, size_t bytes, const char *fn,
                                 rill__device **src_dev, rill__device **dst_dev) {
    if (dst == NULL || src == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL; pass the %s of the copy",
                          fn, dst == NULL ? "dst" : "src", dst == NULL ? "destination" : "source");
    rill_status st = rill__mem_check_access(fn, "dst", NULL, dst, bytes, dst_dev);
    if (st == RILL_OK)
        st = rill__mem_check_access(fn, "src", NULL, src, bytes, src_dev);
    return st;
}

/* Whether a copy or fill on a stream of user may touch memory of dev (NULL:
 * not a device's memory): its own memory, host memory (every device copies
 * it) and another device of its backend's (which it copies as a peer); a
 * CPU device cannot read a GPU's memory. */
static bool copy_reaches(const rill__device *dev, const rill__device *user) {
    return dev == NULL || dev->ops == user->ops || (dev->ops->mem_caps & RILL__MEMCAP_HOST) != 0;
}

/* The refusal of a copy or fill on stream that touches memory of dev
 * (what: "dst" or "src"), or RILL_OK. */
static rill_status check_copy_reach(const char *fn, const char *what, const void *p,
                                    const rill__device *dev, const rill__stream *stream) {
    const rill__device *user = stream->q.dev;
    if (copy_reaches(dev, user))
        return RILL_OK;
    char mine[160], theirs[160];
    name_device(user, mine, sizeof mine);
    name_device(dev, theirs, sizeof theirs);
    return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                      "%s: %s (%p) is memory of %s, which a stream of %s cannot reach; pass a "
                      "stream of %s (rill_memcpy chooses one itself)",
                      fn, what, p, theirs, mine, theirs);
}

rill_status rill_memcpy_async(void *dst, const void *src, size_t bytes, rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_memcpy_async";
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    st = rill__stream_make_room(stream, RILL_CALL_OUTERMOST(), fn);
    if (st != RILL_OK)
        return st;
    rill__device *sd = NULL, *dd = NULL;
    st = rill__mem_check_copy(dst, src, bytes, fn, &sd, &dd);
    if (st == RILL_OK)
        st = check_copy_reach(fn, "dst", dst, dd, stream);
    if (st == RILL_OK)
        st = check_copy_reach(fn, "src", src, sd, stream);
    if (st != RILL_OK || bytes == 0)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_COPY};
    cmd.u.copy.dst = dst;
    cmd.u.copy.src = src;
    cmd.u.copy.bytes = bytes;
    cmd.u.copy.dst_dev = dd;
    cmd.u.copy.src_dev = sd;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    if (st == RILL_OK) {
        if (dd != NULL)
            rill__pool_note_use(stream, seq, dst, bytes);
        if (sd != NULL)
            rill__pool_note_use(stream, seq, src, bytes);
        if (seq != 0 && rill__san_active())
            rill__san()->command(stream, seq, &cmd, 0);
    }
    return st;
}

rill_status rill_memcpy(void *dst, const void *src, size_t bytes) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_memcpy";
    rill__runtime_enter();
    rill__device *sd = NULL, *dd = NULL;
    rill_status st = rill__mem_check_copy(dst, src, bytes, fn, &sd, &dd);
    if (st != RILL_OK || bytes == 0)
        return st;
    /* src's device, else dst's; but a device that reaches the other's
     * memory where the first cannot (a GPU, which copies host memory). */
    rill__device *dev = sd != NULL ? sd : dd;
    if (dev == NULL) {
        memmove(dst, src, bytes); /* host to host: nothing to order with */
        return RILL_OK;
    }
    if (dev == sd && !copy_reaches(dd, sd) && copy_reaches(sd, dd))
        dev = dd;
    st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    /* An unsafe call under capture: when allowed it runs at once, even on a
     * capturing stream, and is not captured. */
    st = rill__capture_check_unsafe(fn);
    if (st != RILL_OK)
        return st;
    rill__stream *s;
    st = rill__thread_current_stream(dev, fn, &s);
    if (st == RILL_OK)
        st = check_copy_reach(fn, dev == sd ? "dst" : "src", dev == sd ? dst : src,
                              dev == sd ? dd : sd, s);
    if (st != RILL_OK)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_COPY};
    cmd.u.copy.dst = dst;
    cmd.u.copy.src = src;
    cmd.u.copy.bytes = bytes;
    cmd.u.copy.dst_dev = dd;
    cmd.u.copy.src_dev = sd;
    uint64_t seq;
    st = rill__stream_submit_now(s, &cmd, &seq);
    if (st != RILL_OK)
        return st;
    if (dd != NULL)
        rill__pool_note_use(s, seq, dst, bytes);
    if (sd != NULL)
        rill__pool_note_use(s, seq, src, bytes);
    if (rill__san_active())
        rill__san()->command(s, seq, &cmd, RILL__SAN_HOST);
    if (!rill__tracing())
        return rill__stream_wait_status(s, seq, 0, UINT64_MAX, fn);
    uint64_t t0 = rill__trace_now();
    st = rill__stream_wait_status(s, seq, 0, UINT64_MAX, fn);
    rill__stream_trace_track(s);
    rill__trace_host_slice(fn, s->q.id, t0);
    return st;
}

rill_status rill_memset_async(void *dst, int value, size_t bytes, rill_stream *stream_h) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_memset_async";
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    st = rill__stream_make_room(stream, RILL_CALL_OUTERMOST(), fn);
    if (st != RILL_OK)
        return st;
    if (dst == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: dst is NULL; pass the memory to set",
                          fn);
    rill__device *dd;
    st = rill__mem_check_access(fn, "dst", NULL, dst, bytes, &dd);
    if (st == RILL_OK)
        st = check_copy_reach(fn, "dst", dst, dd, stream);
    if (st != RILL_OK || bytes == 0)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_SET};
    cmd.u.set.dst = dst;
    cmd.u.set.value = value;
    cmd.u.set.bytes = bytes;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    if (st == RILL_OK && dd != NULL)
        rill__pool_note_use(stream, seq, dst, bytes);
    if (st == RILL_OK && seq != 0 && rill__san_active())
        rill__san()->command(stream, seq, &cmd, 0);
    return st;
}

rill_status rill_mem_get_stats(rill_device *dev_h, rill_mem_stats *out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_mem_get_stats: out is NULL; pass the address of a rill_mem_stats "
                          "to receive the statistics");
    memset(out, 0, sizeof *out);
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_get_stats", &dev);
    if (st != RILL_OK)
        return st;
    rill__pool_get_stats(dev, out);
    return RILL_OK;
}

rill_status rill_mem_get_pool_stats(rill_device *dev_h, rill_mem_pool pool,
                                    rill_mem_pool_stats *out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_mem_get_pool_stats";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_mem_pool_stats to receive the statistics",
            fn);
    memset(out, 0, sizeof *out);
    if (pool != RILL_MEM_POOL_SMALL && pool != RILL_MEM_POOL_LARGE)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: pool is %d; pass RILL_MEM_POOL_SMALL or RILL_MEM_POOL_LARGE", fn,
                          (int)pool);
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, fn, &dev);
    if (st != RILL_OK)
        return st;
    rill_mem_pool_stats both[2];
    rill__pool_get_pool_stats(dev, both);
    *out = both[pool];
    return RILL_OK;
}

bool rill__mem_check(rill_device *dev_h, char *why, size_t cap) {
    rill__device *dev;
    if (rill__device_resolve(dev_h, "rill__mem_check", &dev) != RILL_OK) {
        if (why != NULL && cap > 0)
            snprintf(why, cap, "%s", rill_last_error());
        return false;
    }
    return rill__pool_check(dev, why, cap);
}

void rill__mem_describe(rill_device *dev_h, const void *ptr, char *out, size_t cap) {
    rill__device *dev;
    if (rill__device_resolve(dev_h, "rill__mem_describe", &dev) != RILL_OK) {
        snprintf(out, cap, "%s", rill_last_error());
        return;
    }
    rill__pool_describe(dev, ptr, out, cap);
}

rill_status rill_mem_empty_cache(rill_device *dev_h) {
    RILL_CALL_SCOPE();
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_empty_cache", &dev);
    if (st != RILL_OK)
        return st;
    rill__pool_empty_cache(dev);
    return RILL_OK;
}

rill_status rill_mem_set_limit(rill_device *dev_h, size_t max_reserved_bytes) {
    RILL_CALL_SCOPE();
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_set_limit", &dev);
    if (st != RILL_OK)
        return st;
    rill__pool_set_limit(dev, max_reserved_bytes);
    return RILL_OK;
}

rill_status rill_mem_get_limit(rill_device *dev_h, size_t *max_reserved_bytes) {
    RILL_CALL_SCOPE();
    if (max_reserved_bytes == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_mem_get_limit: max_reserved_bytes is NULL; pass where to store "
                          "the limit");
    *max_reserved_bytes = 0;
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_get_limit", &dev);
    if (st != RILL_OK)
        return st;
    *max_reserved_bytes = rill__pool_limit(dev);
    return RILL_OK;
}

rill_status rill_mem_reset_peak_stats(rill_device *dev_h) {
    RILL_CALL_SCOPE();
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_reset_peak_stats", &dev);
    if (st != RILL_OK)
        return st;
    rill__pool_reset_peak_stats(dev);
    return RILL_OK;
}

rill_status rill_mem_set_reuse_policy(rill_device *dev_h, unsigned flags) {
    RILL_CALL_SCOPE();
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_set_reuse_policy", &dev);
    if (st != RILL_OK)
        return st;
    if ((flags & ~(unsigned)RILL_MEM_REUSE_INTERNAL_WAITS) != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_mem_set_reuse_policy: flags 0x%x include unknown bits; pass 0 or "
                          "RILL_MEM_REUSE_INTERNAL_WAITS",
                          flags);
    rill__pool_set_reuse_flags(dev, flags);
    return RILL_OK;
}

rill_status rill_mem_get_reuse_policy(rill_device *dev_h, unsigned *flags) {
    RILL_CALL_SCOPE();
    if (flags == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_mem_get_reuse_policy: flags is NULL; pass the address of an "
                          "unsigned to receive the policy's flags");
    *flags = 0;
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_get_reuse_policy", &dev);
    if (st != RILL_OK)
        return st;
    *flags = rill__pool_reuse_flags(dev);
    return RILL_OK;
}

rill_status rill_mem_summary(rill_device *dev_h, FILE *out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_mem_summary: out is NULL; pass a FILE such as stdout");
    rill__device *dev;
    rill_status st = rill__device_resolve(dev_h, "rill_mem_summary", &dev);
    if (st != RILL_OK)
        return st;
    rill__pool_summary(dev, out);
    return RILL_OK;
}
