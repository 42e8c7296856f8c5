/* SPDX-License-Identifier: MIT */
/* The kernels of kernels.cu, as the two sides of bench_cuda_baseline see
 * them: the CUDA runtime side takes their host-side pointers, the rill side
 * their PTX and entry names. Each argument struct is the kernel's parameter
 * list, field for field, so that it is also CUDA's packed parameter buffer
 * (no padding: static_asserts in rill_side.c). */
#ifndef RILL_BENCH_CUDA_KERNELS_H
#define RILL_BENCH_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bench_cuda_kernel_id {
    BENCH_CUDA_EMPTY,    /* no parameters */
    BENCH_CUDA_SPIN,     /* bench_cuda_spin_args */
    BENCH_CUDA_FILL_F32, /* bench_cuda_fill_args, float elements */
    BENCH_CUDA_FILL_F16  /* bench_cuda_fill_args, half elements (no rill entry: see rill_side.c) */
} bench_cuda_kernel_id;

typedef struct bench_cuda_spin_args {
    uint64_t ns; /* how long the kernel's one thread spins on the GPU's timer */
} bench_cuda_spin_args;

typedef struct bench_cuda_fill_args {
    void *x; /* n elements */
    uint64_t n;
    uint64_t seed;
} bench_cuda_fill_args;

/* Threads per block of the fill kernels; their grids are grid-stride loops. */
enum { BENCH_CUDA_FILL_THREADS = 256 };

/* The kernel's host-side pointer for cudaLaunchKernel and graph nodes. */
const void *bench_cuda_kernel(bench_cuda_kernel_id id);

/* kernels.cu compiled to PTX, NUL-terminated (kernels_ptx.c, generated),
 * and the PTX names of its entry points. */
extern const char bench_cuda_ptx[];
#define BENCH_CUDA_ENTRY_EMPTY    "bench_cuda_empty"
#define BENCH_CUDA_ENTRY_SPIN     "bench_cuda_spin"
#define BENCH_CUDA_ENTRY_FILL_F32 "bench_cuda_fill_f32"

#ifdef __cplusplus
}
#endif

#endif
