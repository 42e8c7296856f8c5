// SPDX-License-Identifier: MIT
// The kernels that bench_cuda_baseline runs on both sides. nvcc compiles
// this file twice: into the program, where the CUDA runtime side launches
// the kernels through the pointers below, and into PTX (kernels_ptx.c, made
// by embed_ptx.cmake), which the rill side hands to rill_kernel_create as
// rill_kernel_desc.cuda_ptx. Both sides therefore run the same code. The
// entry points are extern "C" so that their PTX names are the plain names
// in kernels.h. Parameter lists match the argument structs of kernels.h
// field for field, with no padding, since rill passes a launch's arguments
// as CUDA's packed parameter buffer.
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels.h"

extern "C" __global__ void bench_cuda_empty(void) {}

// Spins one thread until ns nanoseconds of the GPU's global timer passed.
extern "C" __global__ void bench_cuda_spin(unsigned long long ns) {
    if (threadIdx.x != 0)
        return;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// The value of element i of a buffer filled with seed, as the CPU body in
// rill_side.c computes it: a hash of (i, seed) scaled to [-1, 1).
__device__ static float fill_value(unsigned long long i, unsigned long long seed) {
    unsigned long long s = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    s ^= s >> 31;
    s *= 0xBF58476D1CE4E5B9ull;
    s ^= s >> 29;
    return (float)(s >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

extern "C" __global__ void bench_cuda_fill_f32(float *x, unsigned long long n,
                                               unsigned long long seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride)
        x[i] = fill_value(i, seed);
}

extern "C" __global__ void bench_cuda_fill_f16(__half *x, unsigned long long n,
                                               unsigned long long seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride)
        x[i] = __float2half(fill_value(i, seed));
}

extern "C" const void *bench_cuda_kernel(bench_cuda_kernel_id id) {
    switch (id) {
    case BENCH_CUDA_EMPTY:
        return (const void *)bench_cuda_empty;
    case BENCH_CUDA_SPIN:
        return (const void *)bench_cuda_spin;
    case BENCH_CUDA_FILL_F32:
        return (const void *)bench_cuda_fill_f32;
    case BENCH_CUDA_FILL_F16:
        return (const void *)bench_cuda_fill_f16;
    }
    return nullptr;
}
