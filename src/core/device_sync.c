/* SPDX-License-Identifier: MIT */
/* Waiting for a device (part of the core's devices, runtime.h): the work
 * pending on its streams, rill_device_synchronize and
 * rill_device_synchronize_for, and the drains that rill_shutdown and the
 * library's own waits make. Devices live until rill_shutdown, which waits
 * for a parked call too; the streams waited for are held by references. */
#include "core/calls.h"
#include "core/hooks.h"
#include "core/kernel.h"
#include "core/stream.h"
#include "core/trace_api.h"
#include "util/status.h"

size_t rill__device_pending(rill__device *dev, rill__mem_dep *deps, size_t cap, int *overflow) {
    size_t n = 0;
    *overflow = 0;
    rill__mutex_lock(&dev->lock);
    for (rill__stream *s = rill__stream_of_dev_link(dev->streams); s != NULL;
         s = rill__stream_of_dev_link(s->dev_link.next)) {
        if (s->kind == RILL__STREAM_PROXY)
            continue; /* it runs no work: its numbers stand for other processes' work */
        /* acquire: pairs with the submit that assigned the number. */
        uint64_t seq = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
        if (atomic_load_explicit(&s->q.done_seq, memory_order_acquire) >= seq)
            continue;
        if (n == cap) {
            *overflow = 1;
            break;
        }
        if (!rill__stream_try_ref(s))
            continue; /* its last command just completed and it is being freed */
        deps[n].stream = s;
        deps[n++].seq = seq;
    }
    rill__mutex_unlock(&dev->lock);
    return n;
}

int rill__deps_done(const rill__mem_dep *deps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (atomic_load_explicit(&deps[i].stream->q.done_seq, memory_order_acquire) < deps[i].seq)
            return 0;
    return 1;
}

/* Waits for every stream of dev, destroyed ones with pending work
 * included, and returns the first failure. One pass over the stream list in
 * batches: each batch is taken under the lock and waited for without it, so
 * that other threads keep submitting; the last stream of a batch holds a
 * reference, so it stays listed and marks where the next batch starts
 * (streams created meanwhile go to the front and are not waited for). Proxy
 * streams are passed by: they run no work, a stream that waits for one is
 * waited for itself, and a failure they record belongs to the waits that
 * saw it (which a clear of the waiting stream ends), not to the device.
 * flags as for rill__stream_wait_status: RILL__WAIT_PARKS only when the
 * caller uses, after this, no object that it found through a handle without
 * holding a reference to it. RILL_NOT_READY when deadline_ns (UINT64_MAX:
 * none) comes before the work does. */
static rill_status sync_device(rill__device *dev, unsigned flags, uint64_t deadline_ns,
                               const char *fn) {
    enum { BATCH = 64 };
    rill_status first = RILL_OK;
    rill__stream *mark = NULL; /* ref: the next batch starts after it */
    do {
        rill__mem_dep deps[BATCH];
        size_t n = 0;
        rill__mutex_lock(&dev->lock);
        rill__stream *s =
            rill__stream_of_dev_link(mark != NULL ? mark->dev_link.next : dev->streams);
        for (; s != NULL && n < BATCH; s = rill__stream_of_dev_link(s->dev_link.next)) {
            if (s->kind == RILL__STREAM_PROXY)
                continue;
            /* acquire: pairs with the submit that assigned the number. */
            uint64_t seq = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
            if (atomic_load_explicit(&s->q.done_seq, memory_order_acquire) >= seq &&
                !atomic_load(&s->has_failed))
                continue;
            /* A failed stream that its owner destroyed, or one whose last
             * command just completed, may be on its way out. */
            if (!rill__stream_try_ref(s))
                continue;
            deps[n].stream = s;
            deps[n++].seq = seq;
        }
        rill__stream *next_mark = s != NULL ? deps[n - 1].stream : NULL;
        if (next_mark != NULL)
            rill__stream_ref(next_mark);
        rill__mutex_unlock(&dev->lock);
        if (mark != NULL)
            rill__stream_unref(mark);
        mark = next_mark;
        for (size_t i = 0; i < n; i++) {
            /* deps and mark hold their streams, and devices live until
             * rill_shutdown, which waits for a parked call too. Past the
             * deadline, the rest is not waited for. */
            rill_status r =
                first == RILL_NOT_READY
                    ? RILL_NOT_READY
                    : rill__stream_wait_status(deps[i].stream, deps[i].seq, flags, deadline_ns, fn);
            if (r == RILL_NOT_READY || (r != RILL_OK && first == RILL_OK))
                first = r;
            rill__stream_unref(deps[i].stream);
        }
    } while (mark != NULL && first != RILL_NOT_READY);
    if (mark != NULL)
        rill__stream_unref(mark);
    if (first == RILL_NOT_READY)
        return first;
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__kernels_reap(rt);
    return first;
}

rill_status rill__device_drain(rill__device *dev, const char *fn) {
    return sync_device(dev, 0, UINT64_MAX, fn);
}

/* rill_device_synchronize and rill_device_synchronize_for (deadline
 * UINT64_MAX: none); outermost: RILL_CALL_OUTERMOST() of the call. */
static rill_status device_sync(rill_device *handle, uint64_t deadline_ns, bool outermost,
                               const char *fn) {
    rill__device *dev;
    rill_status st = rill__device_resolve(handle, fn, &dev);
    if (st != RILL_OK)
        return st;
    st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    st = rill__capture_check_device_sync(dev, fn);
    if (st != RILL_OK)
        return st;
    uint64_t t0 = rill__tracing() ? rill__trace_now() : 0;
    st = sync_device(dev, outermost ? RILL__WAIT_PARKS : 0, deadline_ns, fn);
    if (t0 != 0)
        rill__trace_blocked(fn, NULL, t0);
    if (st != RILL_NOT_READY && rill__san_active())
        rill__san()->observed_device(dev);
    return st;
}

rill_status rill_device_synchronize(rill_device *handle) {
    RILL_CALL_SCOPE();
    return device_sync(handle, UINT64_MAX, RILL_CALL_OUTERMOST(), "rill_device_synchronize");
}

rill_status rill_device_synchronize_for(rill_device *handle, uint64_t timeout_ns) {
    RILL_CALL_SCOPE();
    return device_sync(handle, rill__deadline_after(timeout_ns), RILL_CALL_OUTERMOST(),
                       "rill_device_synchronize_for");
}
