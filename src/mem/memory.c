/* SPDX-License-Identifier: MIT */
/* Device and page-locked host memory: allocation, frees deferred until the
 * work that may still use the memory completes, copies and fills in stream
 * order, statistics and the reservation limit.
 *
 * A free (rill_free or rill_free_async) snapshots (stream, submitted seq)
 * of every stream of the device that still has work pending; the memory
 * goes back to the system only once each has completed its snapshot, so
 * no stream ever sees its memory handed out again while it may touch it.
 * Invariant: stats.reserved_bytes = stats.allocated_bytes + bytes held by
 * deferred frees. */
#include "mem/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/runtime.h"
#include "core/status.h"
#include "core/stream.h"
#include "mem/registry.h"

void rill__mem_device_init(rill__mem_device *m) {
    memset(m, 0, sizeof *m);
    rill__mutex_init(&m->lock);
}

static int deps_done(const rill__mem_deferred *d) {
    for (size_t i = 0; i < d->num_deps; i++) {
        rill_stream *s = d->deps[i].stream;
        if (atomic_load_explicit(&s->done_seq, memory_order_acquire) < d->deps[i].seq)
            return 0;
    }
    return 1;
}

static void release_deferred(rill_device *dev, rill__mem_deferred *d) {
    dev->ops->mem_free(dev, d->ptr);
    for (size_t i = 0; i < d->num_deps; i++)
        rill__stream_unref(d->deps[i].stream);
    rill__free(d);
}

/* Unlinks the deferred frees that are done (all of them when `all`). */
static rill__mem_deferred *collect(rill_device *dev, int all) {
    rill__mem_deferred *done = NULL;
    rill__mutex_lock(&dev->mem.lock);
    for (rill__mem_deferred **p = &dev->mem.deferred; *p != NULL;) {
        rill__mem_deferred *d = *p;
        if (all || deps_done(d)) {
            *p = d->next;
            atomic_fetch_sub_explicit(&dev->mem.num_deferred, 1, memory_order_relaxed);
            dev->mem.stats.reserved_bytes -= d->bytes;
            d->next = done;
            done = d;
        } else {
            p = &d->next;
        }
    }
    rill__mutex_unlock(&dev->mem.lock);
    return done;
}

void rill__mem_reap(rill_device *dev) {
    /* relaxed: a hint; collect re-reads the list under the lock. */
    if (atomic_load_explicit(&dev->mem.num_deferred, memory_order_relaxed) == 0)
        return;
    rill__mem_deferred *d = collect(dev, 0);
    while (d != NULL) {
        rill__mem_deferred *next = d->next;
        release_deferred(dev, d);
        d = next;
    }
}

/* Waits for every deferred free of dev, then releases them (OOM path). */
static int drain_deferred(rill_device *dev) {
    rill__mutex_lock(&dev->mem.lock);
    int any = dev->mem.deferred != NULL;
    rill__mutex_unlock(&dev->mem.lock);
    if (!any || rill__thread_is_worker())
        return 0;
    rill__mem_deferred *d = collect(dev, 1);
    while (d != NULL) {
        rill__mem_deferred *next = d->next;
        for (size_t i = 0; i < d->num_deps; i++)
            rill__stream_host_wait(d->deps[i].stream, d->deps[i].seq, 1);
        release_deferred(dev, d);
        d = next;
    }
    return 1;
}

static void free_block(const rill__mem_block *b, void *ctx) {
    rill_device *dev = ctx;
    dev->ops->mem_free(dev, (void *)b->base);
}

void rill__mem_device_shutdown(rill_device *dev) {
    rill__mem_deferred *d = collect(dev, 1);
    while (d != NULL) {
        rill__mem_deferred *next = d->next;
        release_deferred(dev, d);
        d = next;
    }
    rill__registry_drain(dev, RILL__MEM_DEVICE, free_block, dev);
}

static void free_host_block(const rill__mem_block *b, void *ctx) {
    (void)ctx;
    free((void *)b->base);
}

void rill__mem_host_shutdown(void) {
    rill__registry_drain(NULL, RILL__MEM_HOST, free_host_block, NULL);
}

/* ------------------------------------------------------------ allocation */

static int over_limit_locked(rill_device *dev, size_t bytes) {
    size_t limit = dev->mem.limit_bytes;
    return limit != 0 && (bytes > limit || dev->mem.stats.reserved_bytes > limit - bytes);
}

static rill_status try_alloc(rill_device *dev, size_t bytes, void **out) {
    rill__mutex_lock(&dev->mem.lock);
    int over = over_limit_locked(dev, bytes);
    rill__mutex_unlock(&dev->mem.lock);
    if (over)
        return RILL_ERROR_OUT_OF_MEMORY;
    return dev->ops->mem_alloc(dev, bytes, out);
}

static rill_status device_alloc(rill_device *dev, size_t bytes, const char *fn, void **out) {
    rill__mem_reap(dev);
    void *p = NULL;
    int recovered = 0;
    rill_status st = try_alloc(dev, bytes, &p);
    if (st == RILL_ERROR_OUT_OF_MEMORY && drain_deferred(dev)) {
        st = try_alloc(dev, bytes, &p);
        recovered = st == RILL_OK;
    }
    if (st != RILL_OK) {
        rill_mem_stats stats;
        rill__mutex_lock(&dev->mem.lock);
        stats = dev->mem.stats;
        size_t limit = dev->mem.limit_bytes;
        rill__mutex_unlock(&dev->mem.lock);
        char lim[48];
        if (limit != 0)
            snprintf(lim, sizeof lim, "%zu bytes", limit);
        else
            snprintf(lim, sizeof lim, "none");
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: cannot allocate %zu bytes on device %d (limit %s, %zu bytes "
                          "allocated, %zu bytes held by pending frees); free memory, raise the "
                          "limit with rill_mem_set_limit, or allocate less",
                          fn, bytes, dev->info.ordinal, lim, stats.allocated_bytes,
                          stats.reserved_bytes - stats.allocated_bytes);
    }
    rill__mem_block b = {(uintptr_t)p, bytes, dev, RILL__MEM_DEVICE};
    if (rill__registry_insert(&b) != RILL_OK) {
        dev->ops->mem_free(dev, p);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of host memory registering %zu bytes",
                          fn, bytes);
    }
    rill__mutex_lock(&dev->mem.lock);
    rill_mem_stats *s = &dev->mem.stats;
    s->allocated_bytes += bytes;
    s->reserved_bytes += bytes;
    if (s->allocated_bytes > s->peak_allocated_bytes)
        s->peak_allocated_bytes = s->allocated_bytes;
    if (s->reserved_bytes > s->peak_reserved_bytes)
        s->peak_reserved_bytes = s->reserved_bytes;
    s->allocations++;
    s->oom_recoveries += (uint64_t)recovered;
    rill__mutex_unlock(&dev->mem.lock);
    *out = p;
    return RILL_OK;
}

/* Frees device memory once every stream of its device has completed the
 * work submitted so far. */
static rill_status device_free(void *ptr, const char *fn) {
    rill__mem_block b;
    if (!rill__registry_remove(ptr, RILL__MEM_DEVICE, &b)) {
        rill__mem_block inside;
        if (rill__registry_find(ptr, &inside))
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: %p is %zu bytes into an allocation that starts at %p; pass "
                              "the pointer that the allocation returned",
                              fn, ptr, (size_t)((uintptr_t)ptr - inside.base), (void *)inside.base);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p is not device memory from rill_malloc or rill_malloc_async (or "
                          "was already freed)",
                          fn, ptr);
    }
    rill_device *dev = b.dev;
    rill__mem_dep deps[32];
    size_t n = 0;
    int overflow = 0;
    rill__mutex_lock(&dev->lock);
    for (rill_stream *s = dev->streams; s != NULL; s = s->dev_next) {
        uint64_t seq = atomic_load_explicit(&s->sub_seq, memory_order_acquire);
        if (atomic_load_explicit(&s->done_seq, memory_order_acquire) >= seq)
            continue;
        if (n == sizeof deps / sizeof deps[0]) {
            overflow = 1;
            continue;
        }
        rill__stream_ref(s);
        deps[n].stream = s;
        deps[n++].seq = seq;
    }
    rill__mutex_unlock(&dev->lock);
    rill__mem_deferred *d = NULL;
    if (n > 0 || overflow) {
        d = rill__malloc(sizeof *d + n * sizeof d->deps[0]);
        if (d == NULL || overflow) {
            /* Cannot track every stream: fall back to waiting for the
             * device (never hand out memory that may be in use). */
            for (size_t i = 0; i < n; i++)
                rill__stream_unref(deps[i].stream);
            rill__free(d);
            d = NULL;
            rill_status st = rill__check_may_block(fn);
            if (st != RILL_OK) {
                rill__registry_insert(&b);
                return st;
            }
            rill_device_synchronize(dev);
        }
    }
    rill__mutex_lock(&dev->mem.lock);
    dev->mem.stats.allocated_bytes -= b.bytes;
    dev->mem.stats.frees++;
    if (d != NULL) {
        d->ptr = ptr;
        d->bytes = b.bytes;
        d->num_deps = n;
        memcpy(d->deps, deps, n * sizeof deps[0]);
        d->next = dev->mem.deferred;
        dev->mem.deferred = d;
        atomic_fetch_add_explicit(&dev->mem.num_deferred, 1, memory_order_relaxed);
        dev->mem.stats.deferred_frees++;
    } else {
        dev->mem.stats.reserved_bytes -= b.bytes;
    }
    rill__mutex_unlock(&dev->mem.lock);
    if (d == NULL)
        dev->ops->mem_free(dev, ptr);
    return RILL_OK;
}

/* ---------------------------------------------------------------- public */

rill_status rill_malloc(rill_device *dev, size_t bytes, void **out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_malloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_malloc: bytes is 0; allocate at least one byte");
    rill_status st = rill__device_resolve(dev, "rill_malloc", &dev);
    if (st != RILL_OK)
        return st;
    return device_alloc(dev, bytes, "rill_malloc", out);
}

rill_status rill_free(void *ptr) {
    if (ptr == NULL)
        return RILL_OK;
    return device_free(ptr, "rill_free");
}

rill_status rill_malloc_async(size_t bytes, rill_stream *stream, void **out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_malloc_async: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_malloc_async: bytes is 0; allocate at least one byte");
    rill_status st = rill__stream_resolve(stream, "rill_malloc_async", &stream);
    if (st != RILL_OK)
        return st;
    return device_alloc(stream->dev, bytes, "rill_malloc_async", out);
}

rill_status rill_free_async(void *ptr, rill_stream *stream) {
    rill_status st = rill__stream_resolve(stream, "rill_free_async", &stream);
    if (st != RILL_OK)
        return st;
    if (ptr == NULL)
        return RILL_OK;
    rill__mem_block b;
    if (rill__registry_find(ptr, &b) && b.kind == RILL__MEM_DEVICE && b.dev != stream->dev)
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "rill_free_async: %p belongs to device %d but the stream to device %d; "
                          "free it on a stream of its own device",
                          ptr, b.dev->info.ordinal, stream->dev->info.ordinal);
    return device_free(ptr, "rill_free_async");
}

rill_status rill_record_stream(void *ptr, rill_stream *stream) {
    rill_status st = rill__stream_resolve(stream, "rill_record_stream", &stream);
    if (st != RILL_OK)
        return st;
    rill__mem_block b;
    if (ptr == NULL || !rill__registry_find(ptr, &b) || b.kind != RILL__MEM_DEVICE)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_record_stream: %p is not device memory from rill_malloc or "
                          "rill_malloc_async",
                          ptr);
    /* Every free already waits for the work pending on all streams of the
     * device at the time of the free, which covers this stream's uses. */
    return RILL_OK;
}

rill_status rill_malloc_host(size_t bytes, void **out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_malloc_host: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_malloc_host: bytes is 0; allocate at least one byte");
    rill__runtime *rt;
    rill__runtime_get(&rt);
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes) != 0)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "rill_malloc_host: cannot allocate %zu bytes of host memory", bytes);
    rill__mem_block b = {(uintptr_t)p, bytes, NULL, RILL__MEM_HOST};
    if (rill__registry_insert(&b) != RILL_OK) {
        free(p);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_malloc_host: out of host memory");
    }
    *out = p;
    return RILL_OK;
}

rill_status rill_free_host(void *ptr) {
    if (ptr == NULL)
        return RILL_OK;
    rill__mem_block b;
    if (!rill__registry_remove(ptr, RILL__MEM_HOST, &b))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_free_host: %p is not page-locked host memory from "
                          "rill_malloc_host (or was already freed)",
                          ptr);
    free(ptr);
    return RILL_OK;
}

/* Checks that [p, p + bytes) stays inside its allocation, if p is in one;
 * *dev receives the device whose memory p is (NULL for host memory). */
static rill_status check_range(const void *p, size_t bytes, const char *fn, const char *what,
                               rill_device **dev) {
    rill__mem_block b;
    *dev = NULL;
    if (!rill__registry_find(p, &b))
        return RILL_OK;
    size_t offset = (size_t)((uintptr_t)p - b.base);
    if (bytes > b.bytes - offset)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s %p plus %zu bytes runs past the end of its %zu-byte allocation "
                          "(starting at %p) by %zu bytes",
                          fn, what, p, bytes, b.bytes, (void *)b.base, bytes - (b.bytes - offset));
    if (b.kind == RILL__MEM_DEVICE)
        *dev = b.dev;
    return RILL_OK;
}

static rill_status check_copy(void *dst, const void *src, const char *fn, rill_device **src_dev,
                              rill_device **dst_dev, size_t bytes) {
    if (dst == NULL || src == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                          dst == NULL ? "dst" : "src");
    rill_status st = check_range(dst, bytes, fn, "dst", dst_dev);
    if (st == RILL_OK)
        st = check_range(src, bytes, fn, "src", src_dev);
    return st;
}

rill_status rill_memcpy_async(void *dst, const void *src, size_t bytes, rill_stream *stream) {
    static const char fn[] = "rill_memcpy_async";
    rill_status st = rill__stream_resolve(stream, fn, &stream);
    if (st != RILL_OK)
        return st;
    rill_device *sd = NULL, *dd = NULL;
    st = check_copy(dst, src, fn, &sd, &dd, bytes);
    if (st != RILL_OK || bytes == 0)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_COPY};
    cmd.u.copy.dst = dst;
    cmd.u.copy.src = src;
    cmd.u.copy.bytes = bytes;
    return rill__stream_submit(stream, &cmd, NULL);
}

rill_status rill_memcpy(void *dst, const void *src, size_t bytes) {
    static const char fn[] = "rill_memcpy";
    rill_device *sd = NULL, *dd = NULL;
    rill_status st = check_copy(dst, src, fn, &sd, &dd, bytes);
    if (st != RILL_OK || bytes == 0)
        return st;
    rill_device *dev = sd != NULL ? sd : dd;
    if (dev == NULL) {
        memmove(dst, src, bytes); /* host to host: nothing to order with */
        return RILL_OK;
    }
    st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    rill_stream *s = rill__thread_current_stream(dev);
    rill__cmd cmd = {.kind = RILL__CMD_COPY};
    cmd.u.copy.dst = dst;
    cmd.u.copy.src = src;
    cmd.u.copy.bytes = bytes;
    uint64_t seq;
    st = rill__stream_submit(s, &cmd, &seq);
    if (st != RILL_OK)
        return st;
    return rill__stream_wait_status(s, seq, 0, fn);
}

rill_status rill_memset_async(void *dst, int value, size_t bytes, rill_stream *stream) {
    static const char fn[] = "rill_memset_async";
    rill_status st = rill__stream_resolve(stream, fn, &stream);
    if (st != RILL_OK)
        return st;
    if (dst == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    rill_device *dd;
    st = check_range(dst, bytes, fn, "dst", &dd);
    if (st != RILL_OK || bytes == 0)
        return st;
    rill__cmd cmd = {.kind = RILL__CMD_SET};
    cmd.u.set.dst = dst;
    cmd.u.set.value = value;
    cmd.u.set.bytes = bytes;
    return rill__stream_submit(stream, &cmd, NULL);
}

rill_status rill_mem_get_stats(rill_device *dev, rill_mem_stats *out) {
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_mem_get_stats: out is NULL");
    memset(out, 0, sizeof *out);
    rill_status st = rill__device_resolve(dev, "rill_mem_get_stats", &dev);
    if (st != RILL_OK)
        return st;
    rill__mem_reap(dev);
    rill__mutex_lock(&dev->mem.lock);
    *out = dev->mem.stats;
    rill__mutex_unlock(&dev->mem.lock);
    return RILL_OK;
}

rill_status rill_mem_empty_cache(rill_device *dev) {
    rill_status st = rill__device_resolve(dev, "rill_mem_empty_cache", &dev);
    if (st != RILL_OK)
        return st;
    rill__mem_reap(dev);
    return RILL_OK;
}

rill_status rill_mem_set_limit(rill_device *dev, size_t max_reserved_bytes) {
    rill_status st = rill__device_resolve(dev, "rill_mem_set_limit", &dev);
    if (st != RILL_OK)
        return st;
    rill__mutex_lock(&dev->mem.lock);
    dev->mem.limit_bytes = max_reserved_bytes;
    rill__mutex_unlock(&dev->mem.lock);
    return RILL_OK;
}
