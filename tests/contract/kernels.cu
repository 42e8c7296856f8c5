// SPDX-License-Identifier: MIT
// The PTX bodies of the contract tests' kernels (contract.h); each takes
// its argument struct, the packed parameter buffer, by value, and is
// correct for any grid.
#include <stdint.h>

struct contract_add_args {
    uint32_t *x;
    uint32_t value;
    uint64_t n;
};
struct contract_scale_args {
    uint32_t *out;
    const uint32_t *in;
    uint32_t factor;
    uint64_t n;
};
struct contract_fault_args {
    uint64_t address;
};
struct contract_spin_args {
    uint32_t *x;
    uint64_t ns;
};

static __device__ uint64_t now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void contract_add(contract_add_args a) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (uint64_t)gridDim.x * blockDim.x)
        a.x[i] += a.value;
}

extern "C" __global__ void contract_scale(contract_scale_args a) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (uint64_t)gridDim.x * blockDim.x)
        a.out[i] = a.in[i] * a.factor;
}

extern "C" __global__ void contract_fault(contract_fault_args a) {
    *(volatile uint32_t *)a.address = 1;
}

extern "C" __global__ void contract_spin(contract_spin_args a) {
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    uint64_t end = now_ns() + a.ns;
    while (now_ns() < end) {
    }
    a.x[0] += 1;
}
