/* SPDX-License-Identifier: MIT */
/* The CUDA driver API, loaded at run time: rill never links libcuda, so
 * it builds and runs where no NVIDIA driver is installed. The library is
 * opened once per process with dlopen (libcuda.so.1, or the file named by
 * RILL_CUDA_DRIVER), and every entry point is asked of cuGetProcAddress
 * for the ABI of the headers rill was built with (CUDA_VERSION). The
 * types come from the toolkit's cuda.h; the field of each entry point has
 * the name cuda.h gives the function, so calls read as the driver API.
 * The table names each function as cuda.h declares it, less a _vN suffix:
 * cuGraphInstantiateWithFlags, not cuGraphInstantiate, a name the driver
 * answers with its old five-argument ABI. */
#ifndef RILL_CUDA_DRIVER_H
#define RILL_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>

/* The entry points the backend calls. */
#define RILL__CUDA_DRIVER_FUNCS(X)                                                                 \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxGetStreamPriorityRange)                                                                 \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuStreamCreate)                                                                              \
    X(cuStreamCreateWithPriority)                                                                  \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamQuery)                                                                               \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamWaitEvent)                                                                           \
    X(cuStreamWriteValue64)                                                                        \
    X(cuEventCreate)                                                                               \
    X(cuEventDestroy)                                                                              \
    X(cuEventRecord)                                                                               \
    X(cuEventSynchronize)                                                                          \
    X(cuEventElapsedTime)                                                                          \
    X(cuLaunchKernel)                                                                              \
    X(cuMemcpyAsync)                                                                               \
    X(cuMemsetD8Async)                                                                             \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleGetFunction)                                                                         \
    X(cuModuleUnload)                                                                              \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemSetAccess)                                                                              \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemHostGetDevicePointer)                                                                   \
    X(cuPointerGetAttribute)                                                                       \
    X(cuPointerGetAttributes)                                                                      \
    RILL__CUDA_GRAPH_FUNCS(X)

/* The entry points of CUDA graphs (cuda_graph.c). */
#define RILL__CUDA_GRAPH_FUNCS(X)                                                                  \
    X(cuGraphCreate)                                                                               \
    X(cuGraphDestroy)                                                                              \
    X(cuGraphAddKernelNode)                                                                        \
    X(cuGraphAddMemcpyNode)                                                                        \
    X(cuGraphAddMemsetNode)                                                                        \
    X(cuGraphAddEmptyNode)                                                                         \
    X(cuGraphAddEventRecordNode)                                                                   \
    X(cuGraphInstantiateWithFlags)                                                                 \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphExecKernelNodeSetParams)                                                              \
    X(cuGraphExecMemcpyNodeSetParams)                                                              \
    X(cuGraphExecMemsetNodeSetParams)                                                              \
    X(cuGraphExecEventRecordNodeSetEvent)

typedef struct rill__cuda_driver {
#define RILL__CUDA_FIELD(fn) __typeof__(&fn) fn;
    RILL__CUDA_DRIVER_FUNCS(RILL__CUDA_FIELD)
#undef RILL__CUDA_FIELD
    int version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
} rill__cuda_driver;

/* The driver's entry points, loaded and initialised (cuInit) at the first
 * call; NULL, with a sentence saying why in why (size bytes), when there
 * is no driver, it is too old, or it found no usable GPU. Later calls give
 * the same answer. Any thread. */
const rill__cuda_driver *rill__cuda_driver_load(char *why, size_t size);

/* Writes "NAME (description)" for a driver result into buf. */
void rill__cuda_result_text(const rill__cuda_driver *drv, CUresult r, char *buf, size_t size);

#endif
