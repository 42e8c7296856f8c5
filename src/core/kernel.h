/* SPDX-License-Identifier: MIT */
/* Kernels and the state a running block sees. */
#ifndef RILL_CORE_KERNEL_H
#define RILL_CORE_KERNEL_H

#include "core/runtime.h"

struct rill_kernel {
    _Atomic uint32_t magic;
    /* immutable after create */
    char name[64];
    rill_cpu_kernel_fn cpu;
    char *cuda_ptx;   /* owned, or NULL */
    char *cuda_entry; /* owned, or NULL */
    /* guarded by rt->lock */
    rill_kernel *rt_next, *rt_prev;
    /* atomic */
    _Atomic int refs; /* creator plus pending launches */
};

/* What rill_block_ctx.state points at while a launch runs: the backend
 * provides it; rill_kernel_fail records the first message. */
typedef struct rill__launch_state {
    _Atomic int failed;
    char message[256];
} rill__launch_state;

void rill__kernel_ref(rill_kernel *k);
void rill__kernel_unref(rill_kernel *k);
/* Frees every kernel (rill_shutdown). */
void rill__kernels_shutdown(rill__runtime *rt);

#endif
