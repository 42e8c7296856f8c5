/* SPDX-License-Identifier: MIT */
/* The calls a capture forbids (rill.h's rule): synchronizing or querying
 * a capturing stream, an event recorded in a capture, or the device, in
 * every mode; unsafe calls (rill_malloc, rill_memcpy, freeing memory a
 * capture uses, ...) by the calling thread's mode and each capture's
 * mode; and the thread's mode itself. A forbidden call invalidates the
 * captures it concerns. The checks cost one relaxed load when no capture
 * is active. Also the status a stream's capture reports
 * (rill_stream_get_capture_status), which callers read to keep the rule. */
#include <stdio.h>

#include "core/calls.h"
#include "core/event.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "graph/capture_internal.h"
#include "mem/pool.h"
#include "util/status.h"

/* True when the calling thread may not make an unsafe call because of c. */
static bool forbids(const rill__capture *c) {
    if (c->mode == RILL_CAPTURE_GLOBAL && rill__thread_capture_mode == RILL_CAPTURE_GLOBAL)
        return true;
    return c->mode != RILL_CAPTURE_RELAXED && rill__thread_capture_mode != RILL_CAPTURE_RELAXED &&
           c->thread == rill__thread_id();
}

rill_status rill__cap_check_stream_sync(rill__stream *s, const char *fn) {
    if (!rill__stream_capturing(s))
        return RILL_OK;
    rill__capture *c = rill__cap_lock_of(s);
    if (c == NULL)
        return RILL_OK;
    rill__cap_invalidate(c, fn, s);
    rill_status st = rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                                "%s: the stream is capturing, and its captured work does not run "
                                "until the graph is launched; the capture is now invalidated. "
                                "Synchronize after rill_stream_end_capture",
                                fn);
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

RILL_HOT rill_status rill__cap_check_event_sync(rill__event *e, const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&e->lock);
    uint64_t cap_id = e->cap_id;
    rill__spinlock_unlock(&e->lock);
    if (cap_id == 0)
        return RILL_OK;
    rill__spinlock_lock(&rill__caps_lock);
    rill__capture *c = rill__cap_find(cap_id);
    rill_status st = RILL_OK;
    if (c != NULL) {
        rill__cap_invalidate(c, fn, NULL);
        st = rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                        "%s: the event was recorded inside an active capture, whose work does "
                        "not run until the graph is launched; the capture is now invalidated",
                        fn);
    }
    rill__spinlock_unlock(&rill__caps_lock);
    return st;
}

rill_status rill__cap_check_device_sync(rill__device *dev, const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&rill__caps_lock);
    int n = 0;
    char name[80] = "";
    for (rill__capture *c = rill__cap_at(rill__caps); c != NULL; c = rill__cap_at(c->link.next)) {
        if (c->origin->q.dev != dev)
            continue;
        if (n++ == 0)
            rill__stream_name(c->origin, name, sizeof name);
        rill__cap_invalidate(c, fn, NULL);
    }
    rill__spinlock_unlock(&rill__caps_lock);
    if (n == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: %d capture(s) are active on the device (one begun on stream %s), and "
                      "captured work does not run until launched; they are now invalidated",
                      fn, n, name);
}

/* Invalidates the captures in which the calling thread may not make an
 * unsafe call (all, or those using [lo, hi)); returns how many. */
static int forbid(const char *fn, uintptr_t lo, uintptr_t hi, char *name, size_t size) {
    int n = 0;
    for (rill__capture *c = rill__cap_at(rill__caps); c != NULL; c = rill__cap_at(c->link.next)) {
        if (!forbids(c))
            continue;
        if (hi != 0) {
            bool used = false;
            for (size_t i = 0; i < c->num_uses && !used; i++)
                used = c->uses[i].lo < hi && lo < c->uses[i].hi;
            if (!used)
                continue;
        }
        if (n++ == 0)
            rill__stream_name(c->origin, name, size);
        rill__cap_invalidate(c, fn, NULL);
    }
    return n;
}

rill_status rill__cap_check_unsafe(const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0)
        return RILL_OK;
    char name[80] = "";
    rill__spinlock_lock(&rill__caps_lock);
    int n = forbid(fn, 0, 0, name, sizeof name);
    rill__spinlock_unlock(&rill__caps_lock);
    if (n == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: not allowed while the capture begun on stream %s is active (a graph "
                      "could not replay it); the capture is now invalidated. Call it before "
                      "the capture, or switch this thread to RILL_CAPTURE_RELAXED with "
                      "rill_thread_exchange_capture_mode to run it once, uncaptured",
                      fn, name);
}

rill_status rill__cap_check_free(void *ptr, const char *fn) {
    if (atomic_load_explicit(&rill__captures_active, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&rill__gpools_live, memory_order_relaxed) == 0)
        return RILL_OK;
    rill__spinlock_lock(&rill__caps_lock);
    uint32_t unused;
    if (rill__ptrmap_get(&rill__gmem_index, ptr, &unused)) {
        rill__spinlock_unlock(&rill__caps_lock);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p was allocated during a capture and belongs to its graph; "
                          "free it with rill_free_async on a capturing stream, or it is "
                          "released with the graph and its execs",
                          fn, ptr);
    }
    rill__device *dev;
    size_t bytes = 0;
    int n = 0;
    char name[80] = "";
    if (rill__caps != NULL && rill__pool_find(ptr, &dev, &bytes))
        n = forbid(fn, (uintptr_t)ptr, (uintptr_t)ptr + bytes, name, sizeof name);
    rill__spinlock_unlock(&rill__caps_lock);
    if (n == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_CAPTURE_UNSUPPORTED,
                      "%s: %p is used by the capture begun on stream %s, whose graph would use "
                      "it at every launch; the capture is now invalidated. Free it after the "
                      "graph's last launch",
                      fn, ptr, name);
}

RILL_HOT rill_status rill_thread_exchange_capture_mode(rill_capture_mode *mode) {
    if (mode == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_thread_exchange_capture_mode: mode is NULL; pass the address of a "
                          "rill_capture_mode holding the new mode, which receives the old one");
    if (*mode != RILL_CAPTURE_GLOBAL && *mode != RILL_CAPTURE_THREAD_LOCAL &&
        *mode != RILL_CAPTURE_RELAXED)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_thread_exchange_capture_mode: %d is not a capture mode; use "
                          "RILL_CAPTURE_GLOBAL, RILL_CAPTURE_THREAD_LOCAL or RILL_CAPTURE_RELAXED",
                          (int)*mode);
    rill_capture_mode old = rill__thread_capture_mode;
    rill__thread_capture_mode = *mode;
    *mode = old;
    return RILL_OK;
}

rill_status rill_stream_get_capture_status(rill_stream *stream_h, rill_capture_status *out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_stream_get_capture_status";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_capture_status to receive the status", fn);
    *out = RILL_CAPTURE_NONE;
    rill__stream *stream;
    rill_status st = rill__stream_resolve(stream_h, fn, &stream);
    if (st != RILL_OK)
        return st;
    /* Not capturing: what every submission to the stream reads, no lock
     * (an allocator asks this of each allocation). */
    if (!rill__stream_capturing(stream))
        return RILL_OK;
    rill__capture *c = rill__cap_lock_of(stream);
    if (c == NULL)
        return RILL_OK;
    *out = c->invalidated ? RILL_CAPTURE_INVALIDATED : RILL_CAPTURE_ACTIVE;
    rill__spinlock_unlock(&rill__caps_lock);
    return RILL_OK;
}
