// SPDX-License-Identifier: MIT
// The CUDA bodies of ddp_train's kernels (ddp_train.c has the CPU bodies
// and the argument structs, which these mirror): each takes its argument
// struct by value and is correct for any grid.
#include <stddef.h>

struct relu_args {
    float *out;
    const float *in;
    const float *gate;
    size_t n;
};

struct transpose_args {
    float *out;
    const float *in;
    size_t rows, cols;
};

// Forward: out = max(in, 0). Backward: out = gate > 0 ? in : 0.
extern "C" __global__ void relu(relu_args a) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < a.n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gate = a.gate != nullptr ? a.gate[i] : a.in[i];
        a.out[i] = gate > 0.0f ? a.in[i] : 0.0f;
    }
}

// out [cols, rows] = in [rows, cols] transposed.
extern "C" __global__ void transpose(transpose_args a) {
    size_t n = a.rows * a.cols;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / a.cols, j = k % a.cols;
        a.out[j * a.rows + i] = a.in[k];
    }
}
