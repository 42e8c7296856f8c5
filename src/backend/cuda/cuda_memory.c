/* SPDX-License-Identifier: MIT */
/* Device memory, pinned host memory and kernels of the CUDA backend. A
 * pool segment is a range of address space (cuMemAddressReserve) that the
 * pool commits granule by granule: each granule is its own physical
 * allocation (cuMemCreate), mapped into the range and made readable and
 * writable by the device, so any whole granule can be given back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_ops.h"
#include "util/alloc.h"
#include "util/status.h"

typedef struct cuda_segment {
    CUdeviceptr base;
    size_t bytes;
    CUmemGenericAllocationHandle granules[]; /* 0 where not committed */
} cuda_segment;

static rill_status mem_alloc_in(rill__device *dev, size_t bytes, void **out, void **handle) {
    cuda_device *d = cuda_device_of(dev);
    size_t count = (bytes + RILL__CUDA_GRANULE - 1) / RILL__CUDA_GRANULE;
    cuda_segment *seg = rill__calloc(1, sizeof *seg + count * sizeof seg->granules[0]);
    if (seg == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory for a segment's record");
    seg->bytes = count * RILL__CUDA_GRANULE;
    CUresult r = d->drv->cuMemAddressReserve(&seg->base, seg->bytes, RILL__CUDA_GRANULE, 0, 0);
    if (r != CUDA_SUCCESS) {
        char why[256];
        rill__cuda_describe(d, r, "cuMemAddressReserve", why, sizeof why);
        rill__free(seg);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "the GPU could not reserve %zu bytes of address space (%s)", bytes, why);
    }
    atomic_fetch_add(&d->refs, 1);
    *out = (void *)(uintptr_t)seg->base;
    *handle = seg;
    return RILL_OK;
}

rill_status rill__cuda_mem_alloc(rill__device *dev, size_t bytes, void **out, void **handle) {
    cuda_device *d = cuda_device_of(dev);
    CUcontext prev = rill__cuda_enter(d);
    rill_status st = mem_alloc_in(dev, bytes, out, handle);
    rill__cuda_leave(d, prev);
    return st;
}

/* Unmaps and releases the committed granules in [first, end). */
static void release_granules(cuda_device *d, cuda_segment *seg, size_t first, size_t end) {
    for (size_t g = first; g < end; g++) {
        if (seg->granules[g] == 0)
            continue;
        (void)d->drv->cuMemUnmap(seg->base + g * RILL__CUDA_GRANULE, RILL__CUDA_GRANULE);
        (void)d->drv->cuMemRelease(seg->granules[g]);
        seg->granules[g] = 0;
    }
}

void rill__cuda_mem_free(rill__device *dev, void *ptr, size_t bytes, void *handle) {
    cuda_device *d = cuda_device_of(dev);
    cuda_segment *seg = handle;
    (void)ptr;
    (void)bytes;
    CUcontext prev = rill__cuda_enter(d);
    release_granules(d, seg, 0, seg->bytes / RILL__CUDA_GRANULE);
    (void)d->drv->cuMemAddressFree(seg->base, seg->bytes);
    rill__cuda_leave(d, prev);
    rill__free(seg);
    rill__cuda_unref(d);
}

/* Backs granule g of seg with physical memory, readable and writable by
 * the device. */
static CUresult commit_granule(cuda_device *d, cuda_segment *seg, size_t g) {
    const rill__cuda_driver *drv = d->drv;
    /* No shareable handle type: nothing exports device memory (ipc_export
     * is not built), and a GPU may not offer one. */
    CUmemAllocationProp prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE,
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d->ordinal},
    };
    CUmemAccessDesc access = {
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d->ordinal},
        .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    CUdeviceptr at = seg->base + g * RILL__CUDA_GRANULE;
    CUmemGenericAllocationHandle h;
    CUresult r = drv->cuMemCreate(&h, RILL__CUDA_GRANULE, &prop, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = drv->cuMemMap(at, RILL__CUDA_GRANULE, 0, h, 0)) != CUDA_SUCCESS) {
        (void)drv->cuMemRelease(h);
        return r;
    }
    seg->granules[g] = h;
    return drv->cuMemSetAccess(at, RILL__CUDA_GRANULE, &access, 1);
}

static rill_status mem_commit_in(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    cuda_device *d = cuda_device_of(dev);
    cuda_segment *seg = handle;
    size_t first = offset / RILL__CUDA_GRANULE;
    size_t end = (offset + bytes + RILL__CUDA_GRANULE - 1) / RILL__CUDA_GRANULE;
    for (size_t g = first; g < end; g++) {
        if (seg->granules[g] != 0)
            continue;
        CUresult r = commit_granule(d, seg, g);
        if (r != CUDA_SUCCESS) {
            char why[256];
            release_granules(d, seg, first, g + 1);
            rill__cuda_describe(d, r, "cuMemCreate", why, sizeof why);
            return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                              "the GPU has no %zu bytes of memory left to back (%s)", bytes, why);
        }
    }
    return RILL_OK;
}

rill_status rill__cuda_mem_commit(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    cuda_device *d = cuda_device_of(dev);
    CUcontext prev = rill__cuda_enter(d);
    rill_status st = mem_commit_in(dev, handle, offset, bytes);
    rill__cuda_leave(d, prev);
    return st;
}

void rill__cuda_mem_decommit(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    cuda_device *d = cuda_device_of(dev);
    cuda_segment *seg = handle;
    /* The whole granules inside the range only. */
    size_t first = (offset + RILL__CUDA_GRANULE - 1) / RILL__CUDA_GRANULE;
    size_t end = (offset + bytes) / RILL__CUDA_GRANULE;
    if (first >= end)
        return;
    CUcontext prev = rill__cuda_enter(d);
    release_granules(d, seg, first, end);
    rill__cuda_leave(d, prev);
}

/* Memory rill did not allocate, as the driver knows it: page-locked host
 * memory and managed memory every GPU reaches, device memory only its own
 * GPU (rill enables no peer access), pageable host memory none. */
static rill_status mem_reachable_in(rill__device *dev, const void *p, size_t bytes, char *why,
                                    size_t why_size) {
    (void)bytes;
    cuda_device *d = cuda_device_of(dev);
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)p;
    unsigned int type = rill__cuda_memory_type(d, p);
    if (type == 0) {
        snprintf(why, why_size, "host memory that CUDA has not page-locked (malloc, numpy)");
        return RILL_ERROR_DEVICE_MISMATCH;
    }
    if (type != CU_MEMORYTYPE_DEVICE)
        return RILL_OK;
    int managed = 0, ordinal = -1;
    if (d->drv->cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, at) ==
            CUDA_SUCCESS &&
        managed)
        return RILL_OK;
    if (d->drv->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, at) ==
            CUDA_SUCCESS &&
        ordinal == d->ordinal)
        return RILL_OK;
    snprintf(why, why_size, "memory of CUDA GPU %d, and rill enables no peer access between GPUs",
             ordinal);
    return RILL_ERROR_DEVICE_MISMATCH;
}

rill_status rill__cuda_mem_reachable(rill__device *dev, const void *p, size_t bytes, char *why,
                                     size_t why_size) {
    cuda_device *d = cuda_device_of(dev);
    CUcontext prev = rill__cuda_enter(d);
    rill_status st = mem_reachable_in(dev, p, bytes, why, why_size);
    rill__cuda_leave(d, prev);
    return st;
}

void *rill__cuda_host_alloc(rill__device *dev, size_t bytes) {
    cuda_device *d = cuda_device_of(dev);
    void *p = NULL;
    CUcontext prev = rill__cuda_enter(d);
    CUresult r = d->drv->cuMemHostAlloc(&p, bytes > 0 ? bytes : 1,
                                        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    rill__cuda_leave(d, prev);
    if (r != CUDA_SUCCESS) {
        char why[256];
        rill__cuda_describe(d, r, "cuMemHostAlloc", why, sizeof why);
        rill__fail(RILL_ERROR_OUT_OF_MEMORY, "no %zu bytes of page-locked host memory (%s)", bytes,
                   why);
        return NULL;
    }
    atomic_fetch_add(&d->refs, 1);
    return p;
}

void rill__cuda_host_free(rill__device *dev, void *ptr, size_t bytes) {
    cuda_device *d = cuda_device_of(dev);
    (void)bytes;
    CUcontext prev = rill__cuda_enter(d);
    (void)d->drv->cuMemFreeHost(ptr);
    rill__cuda_leave(d, prev);
    rill__cuda_unref(d);
}

/* A built-in op's body: a kernel of the ops' module (their fatbin, loaded
 * once per device), or the library that runs it. */
static rill_status load_op(cuda_device *d, const rill__kernel_image *k, cuda_loaded *l) {
    char why[320];
    l->op = k->op;
    if (rill__cuda_op_uses_library(k->op)) {
        rill_status st = rill__cuda_libs_prepare(&d->libs, k->op, why, sizeof why);
        return st == RILL_OK ? RILL_OK : rill__fail(st, "op '%s': %s", k->name, why);
    }
    const char *image = rill__cuda_op_image(), *entry = rill__cuda_op_entry(k->op);
    if (image == NULL || entry == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "op '%s' has no CUDA body in this build of rill (built without "
                          "nvcc); run it on a CPU device's stream",
                          k->name);
    CUresult r = CUDA_SUCCESS;
    rill__mutex_lock(&d->lock);
    if (d->op_module == NULL)
        r = d->drv->cuModuleLoadData(&d->op_module, image);
    if (r == CUDA_SUCCESS)
        r = d->drv->cuModuleGetFunction(&l->fn, d->op_module, entry);
    rill__mutex_unlock(&d->lock);
    if (r != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "loading the built-in ops' kernels", why, sizeof why);
        return rill__fail(RILL_ERROR_NOT_SUPPORTED, "op '%s' cannot run on this GPU (%s)", k->name,
                          why);
    }
    return RILL_OK;
}

/* Loads k: a built-in op's body, or image, its PTX. */
static rill_status kernel_load_in(rill__device *dev, const rill__kernel_image *k,
                                  const rill_kernel_image *image, void **loaded) {
    cuda_device *d = cuda_device_of(dev);
    if (k->op == RILL__OP_NONE && image->entry == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "kernel '%s': its PTX image names no entry point; set its entry",
                          k->name);
    cuda_loaded *l = rill__calloc(1, sizeof *l);
    if (l == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory loading kernel '%s'",
                          k->name);
    if (k->op != RILL__OP_NONE) {
        rill_status st = load_op(d, k, l);
        if (st != RILL_OK) {
            rill__free(l);
            return st;
        }
        *loaded = l;
        return RILL_OK;
    }
    char why[256];
    CUresult r = d->drv->cuModuleLoadData(&l->module, image->bytes);
    if (r != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "cuModuleLoadData", why, sizeof why);
        rill__free(l);
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "kernel '%s': the CUDA driver could not load its PTX (%s)", k->name, why);
    }
    if ((r = d->drv->cuModuleGetFunction(&l->fn, l->module, image->entry)) != CUDA_SUCCESS) {
        rill__cuda_describe(d, r, "cuModuleGetFunction", why, sizeof why);
        (void)d->drv->cuModuleUnload(l->module);
        rill__free(l);
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "kernel '%s': its PTX has no entry point '%s' (%s)", k->name,
                          image->entry, why);
    }
    *loaded = l;
    return RILL_OK;
}

rill_status rill__cuda_kernel_load(rill__device *dev, const rill__kernel_image *k,
                                   const rill_kernel_image *image, void **loaded) {
    cuda_device *d = cuda_device_of(dev);
    CUcontext prev = rill__cuda_enter(d);
    rill_status st = kernel_load_in(dev, k, image, loaded);
    rill__cuda_leave(d, prev);
    return st;
}

void rill__cuda_kernel_unload(rill__device *dev, const rill__kernel_image *k, void *loaded) {
    cuda_device *d = cuda_device_of(dev);
    cuda_loaded *l = loaded;
    (void)k;
    if (l == NULL)
        return;
    CUcontext prev = rill__cuda_enter(d);
    if (l->module != NULL)
        (void)d->drv->cuModuleUnload(l->module);
    rill__cuda_leave(d, prev);
    rill__free(l);
}
