/* SPDX-License-Identifier: MIT */
/* Kernels and the state a running block sees. Launches hold no reference
 * on their kernel (a counter shared by the submitting and the executing
 * core would bounce between them on every launch): a destroyed kernel
 * waits, like a deferred free, for the work pending at its destruction. */
#ifndef RILL_CORE_KERNEL_H
#define RILL_CORE_KERNEL_H

#include "core/runtime.h"

struct rill__kernel {
    _Atomic uint32_t magic;
    /* immutable after create */
    rill_kernel *handle; /* its handle (handle.h), closed by destroy or free */
    char name[64];
    rill_cpu_kernel_fn cpu;
    char *cuda_ptx;   /* owned, or NULL */
    char *cuda_entry; /* owned, or NULL */
    /* guarded by rt->lock: a live kernel is on rt->kernels (both links); a
     * destroyed one is on rt->zombie_kernels (rt_link.next only) together with
     * the work that may still launch it, and is freed once every pair of
     * pending has completed and graph_refs is 0. Destroy moves the kernel
     * and sets pending in one critical section, so no reap ever sees a
     * destroyed kernel without its pending work. */
    rill__link rt_link;
    rill__mem_dep *pending; /* owned, refs on the streams */
    size_t num_pending;
    /* atomic: graph and exec nodes that name it */
    _Atomic int graph_refs;
};

/* What rill_block_ctx.state points at while a launch runs: the backend
 * provides it; rill_kernel_fail records the first message. */
typedef struct rill__launch_state {
    _Atomic int failed;
    char message[256];
} rill__launch_state;

/* Records message as the failure of the launch with state ls, unless one
 * is recorded already; returns whether this call recorded it. */
bool rill__launch_state_fail(rill__launch_state *ls, const char *message);
/* True, once, when a kernel body that ran on the calling thread since the
 * last call recorded its launch's failure (its rill_kernel_fail came
 * first): the graph runner names that node, not another that finished
 * later. */
bool rill__took_kernel_failure(void);
/* Runs fn(user_data) as a host function whose rill_host_func_fail writes
 * into *ls (reset first); returns whether it failed. Worker threads only. */
bool rill__host_run(rill_host_fn fn, void *user_data, rill__launch_state *ls);

/* Frees destroyed kernels whose pending work has completed. */
void rill__kernels_reap(rill__runtime *rt);
/* Frees every kernel (rill_shutdown), live and destroyed. */
void rill__kernels_shutdown(rill__runtime *rt);

/* Checks a kernel launch description, the same for rill_launch_kernel and
 * graph kernel nodes: the kernel (live), the grid, args and accesses
 * (non-NULL pointers, known modes). *out receives the kernel; a failure is
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming fn. Whether the
 * kernel has a body for the device is the caller's check. */
rill_status rill__launch_check(rill_kernel *handle, const rill_launch *launch, const char *fn,
                               rill__kernel **out);
/* The kernel that handle names (live: not destroyed);
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming fn otherwise. */
rill_status rill__kernel_resolve(rill_kernel *handle, const char *fn, rill__kernel **out);

#endif
