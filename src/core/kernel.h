/* SPDX-License-Identifier: MIT */
/* Kernels and the state a running block sees. Launches hold no reference
 * on their kernel (a counter shared by the submitting and the executing
 * core would bounce between them on every launch): a destroyed kernel
 * waits, like a deferred free, for the work pending at its destruction. */
#ifndef RILL_CORE_KERNEL_H
#define RILL_CORE_KERNEL_H

#include <stddef.h>

#include "core/hooks.h"
#include "core/runtime.h"

struct rill__kernel {
    /* immutable after create: the name and images (owned), what backends
     * read (backend.h); first, so rill__kernel_image_of can find it */
    rill__kernel_image image;
    _Atomic uint32_t magic;
    /* per device ordinal: what the device's kernel_load returned, valid
     * once bit ordinal of loaded_mask is set (release, under rt->lock);
     * the mask and the first devices' entries share a cache line, the one
     * line a launch reads */
    _Atomic uint32_t loaded_mask;
    void *loaded[RILL__MAX_DEVICES];
    /* immutable after create */
    rill_kernel *handle; /* its handle (handle.h), closed by destroy or free */
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

/* Creates the kernel of a built-in op (src/ops), named name, whose bodies
 * the backends provide (kernel_load); as rill_kernel_create
 * otherwise. */
rill_status rill__kernel_create_op(rill__op op, const char *name, rill_kernel **out);
/* Frees destroyed kernels whose pending work has completed. */
void rill__kernels_reap(rill__runtime *rt);
/* The kernels' part in the runtime's life (core/hooks.h): rill_shutdown
 * frees every kernel, live and destroyed, before the backends stop; a
 * fork's child keeps its parent's live kernels for its next runtime. */
extern const rill__subsystem rill__kernel_subsystem;

/* Checks a kernel launch description, the same for rill_launch_kernel and
 * graph kernel nodes: the kernel (live), the grid, args and accesses
 * (non-NULL pointers, known modes). *out receives the kernel; a failure is
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming fn. Whether the
 * kernel has a body for the device is the caller's check. */
rill_status rill__launch_check(rill_kernel *handle, const rill_launch *launch, const char *fn,
                               rill__kernel **out);
/* What dev's backend made of k for launching it there (kernel_load), made
 * at the first call for that device; the backend's failure (a kernel with
 * no body for the device: RILL_ERROR_NOT_SUPPORTED) with its sentence
 * after "fn: ". */
rill_status rill__kernel_load(rill__kernel *k, rill__device *dev, const char *fn, void **loaded);
/* The kernel that handle names (live: not destroyed);
 * RILL_ERROR_INVALID_ARGUMENT with a sentence naming fn otherwise. */
rill_status rill__kernel_resolve(rill_kernel *handle, const char *fn, rill__kernel **out);
/* rill_launch_kernel on a stream already resolved, whose failures name
 * that call: for a call that makes several commands on one stream (the
 * ops), which must not resolve its handle again and find it destroyed
 * half-way. */
rill_status rill__kernel_launch(rill__stream *stream, rill_kernel *kernel,
                                const rill_launch *launch);
/* rill__kernel_launch with the command's flags (rill__cmd_flags: the ops
 * pass RILL__CMD_SMALL). */
rill_status rill__kernel_launch_flags(rill__stream *stream, rill_kernel *kernel,
                                      const rill_launch *launch, unsigned flags);

#endif
