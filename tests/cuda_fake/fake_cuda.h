/* SPDX-License-Identifier: MIT */
/* What the files of the stand-in driver share (fake_cuda.c, fake_device.c,
 * fake_memory.c, fake_counts.c), and what it offers its stand-in libraries
 * (fake_libs.c). */
#ifndef RILL_TEST_FAKE_CUDA_H
#define RILL_TEST_FAKE_CUDA_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The GPU's memory: what cuDeviceTotalMem says and cuMemCreate keeps to. */
#define TOTAL_MEMORY ((size_t)4 << 30)
/* The most threads in a block (cuDeviceGetAttribute, cuLaunchKernel). */
#define MAX_BLOCK_THREADS 1024u

/* Queues fn(arg) on s, after the work queued before it: the stream's
 * thread runs it, as the GPU runs a kernel. fn owns arg. */
CUresult fake_stream_call(CUstream s, void (*fn)(void *), void *arg);

/* fake_cuda.c: the GPU of the calling thread's current context, or -1
 * when none is current; and the start of every entry point, which counts
 * the call and, after the driver's teardown at exit, crashes. */
int fake_current_gpu(void);
void fake_check_alive(const char *fn);

/* The start of an entry point that needs a current context. */
#define NEED_CONTEXT()                                                                             \
    do {                                                                                           \
        fake_check_alive(__func__);                                                                \
        if (fake_current_gpu() < 0)                                                                \
            return CUDA_ERROR_INVALID_CONTEXT;                                                     \
    } while (0)

/* The start of an entry point that needs no context: it is counted. */
#define CALLED() fake_count_call(__func__)

/* fake_counts.c: a call of the entry point whose function is named fn
 * (its __func__), and n GPU-side memory operations queued. */
void fake_count_call(const char *fn);
void fake_count_memops(uint64_t n);

/* fake_memory.c: the ranges the driver knows, mapped with cuMemMap (each
 * with the GPU of its allocation) or from cuMemHostAlloc. */
typedef struct fake_range {
    uintptr_t base;
    size_t size;
    int device; /* -1: page-locked host memory */
} fake_range;
/* The range that holds p, or false. */
bool fake_ranges_find(uintptr_t p, fake_range *out);
/* Whether [p, p + n) lies in ranges that follow one another (device
 * memory only: those of cuMemMap). */
bool fake_ranges_cover(uintptr_t p, size_t n, bool device_only);

/* fake_memory.c's entry points. */
CUresult fake_cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align, CUdeviceptr addr,
                                  unsigned long long flags);
CUresult fake_cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult fake_cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags);
CUresult fake_cuMemRelease(CUmemGenericAllocationHandle h);
CUresult fake_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                       unsigned long long flags);
CUresult fake_cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult fake_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                             size_t count);
CUresult fake_cuMemGetAllocationGranularity(size_t *out, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags flags);
CUresult fake_cuMemHostAlloc(void **out, size_t bytes, unsigned int flags);
CUresult fake_cuMemFreeHost(void *p);
CUresult fake_cuMemHostGetDevicePointer(CUdeviceptr *out, void *p, unsigned int flags);
CUresult fake_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
CUresult fake_cuPointerGetAttributes(unsigned int num, CUpointer_attribute *attributes, void **data,
                                     CUdeviceptr ptr);

/* fake_device.c: the GPUs there are (RILL_FAKE_CUDA_DEVICES, 1 to 4), and
 * its entry points. */
int fake_gpus(void);
CUresult fake_cuDriverGetVersion(int *v);
CUresult fake_cuGetErrorName(CUresult r, const char **out);
CUresult fake_cuGetErrorString(CUresult r, const char **out);
CUresult fake_cuDeviceGetCount(int *n);
CUresult fake_cuDeviceGet(CUdevice *d, int ordinal);
CUresult fake_cuDeviceGetName(char *name, int len, CUdevice d);
CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice d);
CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d);

#endif
