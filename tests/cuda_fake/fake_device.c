/* SPDX-License-Identifier: MIT */
/* The stand-in driver's GPUs as the driver describes them (see
 * fake_cuda.c): their count, names, memory and attributes, and the
 * driver's version and error names. */
#include <cuda.h>
#include <stdio.h>

#include "fake_cuda.h"

CUresult fake_cuDriverGetVersion(int *v) {
    CALLED();
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult fake_cuGetErrorName(CUresult r, const char **out) {
    CALLED();
    *out = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}

CUresult fake_cuGetErrorString(CUresult r, const char **out) {
    CALLED();
    (void)r;
    *out = "an error of the stand-in driver";
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetCount(int *n) {
    CALLED();
    *n = fake_gpus();
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice *d, int ordinal) {
    CALLED();
    if (ordinal < 0 || ordinal >= fake_gpus())
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char *name, int len, CUdevice d) {
    CALLED();
    if (d == 0)
        snprintf(name, (size_t)len, "stand-in GPU");
    else
        snprintf(name, (size_t)len, "stand-in GPU %d", (int)d);
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
    CALLED();
    (void)d;
    *bytes = TOTAL_MEMORY;
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    CALLED();
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *v = 4;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        *v = 2048;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        *v = (int)MAX_BLOCK_THREADS;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        *v = 64;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        *v = 0x7fffffff;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        *v = 65535;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        *v = 1;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}
