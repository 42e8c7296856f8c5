/* SPDX-License-Identifier: MIT */
/* A CUDA device's context and lifetime, which the backend's other files
 * share: making the primary context current, sentences for driver
 * results, timestamps, and the last reference that frees the device. */
#include <stdio.h>

#include "backend/cuda/cuda.h"
#include "util/alloc.h"

CUcontext rill__cuda_enter(cuda_device *d) {
    CUcontext prev = NULL;
    if (d->drv->cuCtxGetCurrent(&prev) != CUDA_SUCCESS)
        prev = NULL;
    if (prev != d->ctx)
        (void)d->drv->cuCtxSetCurrent(d->ctx);
    return prev;
}

void rill__cuda_leave(cuda_device *d, CUcontext prev) {
    if (prev != d->ctx)
        (void)d->drv->cuCtxSetCurrent(prev);
}

void rill__cuda_describe(const cuda_device *d, CUresult r, const char *what, char *buf,
                         size_t size) {
    char text[200];
    rill__cuda_result_text(d->drv, r, text, sizeof text);
    snprintf(buf, size, "%s: %s", what, text);
}

/* Keeps ev for reuse, or destroys it when the pool is full (stamp_lock
 * held). */
static void put_locked(cuda_device *d, CUevent ev) {
    if (d->num_timing < CUDA_TIMING_EVENTS)
        d->timing[d->num_timing++] = ev;
    else
        (void)d->drv->cuEventDestroy(ev);
}

CUevent rill__cuda_timing_event(cuda_device *d) {
    CUevent ev = NULL;
    rill__mutex_lock(&d->stamp_lock);
    if (d->num_timing > 0)
        ev = d->timing[--d->num_timing];
    rill__mutex_unlock(&d->stamp_lock);
    if (ev == NULL && d->drv->cuEventCreate(&ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        ev = NULL;
    return ev;
}

void rill__cuda_timing_event_put(cuda_device *d, CUevent ev) {
    rill__mutex_lock(&d->stamp_lock);
    put_locked(d, ev);
    rill__mutex_unlock(&d->stamp_lock);
}

uint64_t rill__cuda_stamp(cuda_device *d, CUevent ev) {
    float ms = 0;
    uint64_t ns;
    rill__mutex_lock(&d->stamp_lock);
    if (d->drv->cuEventElapsedTime(&ms, d->anchor, ev) != CUDA_SUCCESS) {
        ns = rill__now_ns();
        put_locked(d, ev);
    } else if (ms < 0) {
        /* Before the anchor (another stream's point, stamped first). */
        uint64_t back = (uint64_t)(-(double)ms * 1e6 + 0.5);
        ns = back < d->anchor_ns ? d->anchor_ns - back : 0;
        put_locked(d, ev);
    } else {
        ns = d->anchor_ns + (uint64_t)((double)ms * 1e6 + 0.5);
        put_locked(d, d->anchor);
        d->anchor = ev;
        d->anchor_ns = ns;
    }
    rill__mutex_unlock(&d->stamp_lock);
    return ns;
}

void rill__cuda_unref(cuda_device *d) {
    /* acq_rel: the last one sees every other holder's work. */
    if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1)
        return;
    CUcontext prev = rill__cuda_enter(d);
    rill__cuda_libs_fini(&d->libs);
    if (d->op_module != NULL)
        (void)d->drv->cuModuleUnload(d->op_module);
    (void)d->drv->cuEventDestroy(d->anchor);
    for (unsigned i = 0; i < d->num_timing; i++)
        (void)d->drv->cuEventDestroy(d->timing[i]);
    (void)d->drv->cuStreamDestroy(d->aside);
    rill__cuda_stage_fini(d);
    rill__cuda_leave(d, prev);
    (void)d->drv->cuDevicePrimaryCtxRelease(d->cu_dev);
    rill__mutex_destroy(&d->stamp_lock);
    rill__mutex_destroy(&d->stage_lock);
    rill__mutex_destroy(&d->lock);
    rill__mutex_destroy(&d->run_lock);
    rill__free(d->active);
    rill__free(d);
}
