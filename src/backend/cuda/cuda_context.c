/* SPDX-License-Identifier: MIT */
/* A CUDA device's context and lifetime, which the backend's other files
 * share: making the primary context current, sentences for driver
 * results, timestamps, and the last reference that frees the device. */
#include <stdio.h>

#include "backend/cuda/cuda.h"
#include "util/alloc.h"

/* The context current on this thread, as far as rill set it. */
static _Thread_local CUcontext tls_context;

void rill__cuda_use(cuda_device *d) {
    if (tls_context != d->ctx && d->drv->cuCtxSetCurrent(d->ctx) == CUDA_SUCCESS)
        tls_context = d->ctx;
}

void rill__cuda_describe(const cuda_device *d, CUresult r, const char *what, char *buf,
                         size_t size) {
    char text[200];
    rill__cuda_result_text(d->drv, r, text, sizeof text);
    snprintf(buf, size, "%s: %s", what, text);
}

uint64_t rill__cuda_stamp(cuda_device *d, CUevent ev) {
    float ms = 0;
    if (d->drv->cuEventElapsedTime(&ms, d->epoch, ev) != CUDA_SUCCESS || ms < 0)
        return rill__now_ns();
    return d->epoch_ns + (uint64_t)((double)ms * 1e6);
}

void rill__cuda_unref(cuda_device *d) {
    /* acq_rel: the last one sees every other holder's work. */
    if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1)
        return;
    rill__cuda_use(d);
    rill__cuda_libs_fini(&d->libs);
    if (d->op_module != NULL)
        (void)d->drv->cuModuleUnload(d->op_module);
    (void)d->drv->cuEventDestroy(d->epoch);
    (void)d->drv->cuStreamDestroy(d->aside);
    (void)d->drv->cuDevicePrimaryCtxRelease(d->cu_dev);
    rill__mutex_destroy(&d->lock);
    rill__mutex_destroy(&d->run_lock);
    rill__free(d->active);
    rill__free(d);
}
