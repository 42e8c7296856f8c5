/* SPDX-License-Identifier: MIT */
/* Kernels, kernel launches and host functions: validation and the command
 * each becomes. A launch copies its arguments and access list (the backend
 * does, inside submit), so the caller may reuse its memory on return. */
#include "core/kernel.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/event.h"
#include "core/status.h"
#include "core/stream.h"
#include "graph/graph.h"
#include "mem/pool.h"

/* Unlinks and frees k; rt->lock held. */
static void kernel_free_locked(rill__runtime *rt, rill_kernel *k) {
    if (k->rt_prev != NULL)
        k->rt_prev->rt_next = k->rt_next;
    else
        rt->kernels = k->rt_next;
    if (k->rt_next != NULL)
        k->rt_next->rt_prev = k->rt_prev;
    for (size_t i = 0; i < k->num_pending; i++)
        rill__stream_unref(k->pending[i].stream);
    rill__free(k->pending);
    rill__free(k->cuda_ptx);
    rill__free(k->cuda_entry);
    rill__free(k);
}

void rill__kernels_reap(rill__runtime *rt) {
    rill__mutex_lock(&rt->lock);
    rill_kernel *next;
    for (rill_kernel *k = rt->kernels; k != NULL; k = next) {
        next = k->rt_next;
        if (rill__handle_magic(k) == RILL__MAGIC_DEAD && atomic_load(&k->graph_refs) == 0 &&
            rill__deps_done(k->pending, k->num_pending))
            kernel_free_locked(rt, k);
    }
    rill__mutex_unlock(&rt->lock);
}

void rill__kernels_shutdown(rill__runtime *rt) {
    rill__mutex_lock(&rt->lock);
    while (rt->kernels != NULL)
        kernel_free_locked(rt, rt->kernels);
    rill__mutex_unlock(&rt->lock);
}

void rill__cmd_release(rill__cmd *cmd) {
    switch (cmd->kind) {
    case RILL__CMD_WAIT:
        rill__stream_unref(cmd->u.wait.stream);
        break;
    case RILL__CMD_RECORD:
        rill__event_unref(cmd->u.record.event);
        break;
    case RILL__CMD_GRAPH:
        if (cmd->u.graph.after_stream != NULL)
            rill__stream_unref(cmd->u.graph.after_stream);
        rill__xparams_unref(cmd->u.graph.params);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- public */

rill_status rill_kernel_create(const rill_kernel_desc *desc, rill_kernel **out) {
    rill__runtime *rt;
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_kernel_create: out is NULL");
    *out = NULL;
    if (desc == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_kernel_create: desc is NULL");
    if (desc->name == NULL || desc->name[0] == '\0')
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: desc->name is NULL or empty; kernels need a name "
                          "for errors and traces");
    if (desc->cpu == NULL && desc->cuda_ptx == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: kernel '%s' has no body; set desc->cpu, or "
                          "desc->cuda_ptx and desc->cuda_entry",
                          desc->name);
    if ((desc->cuda_ptx == NULL) != (desc->cuda_entry == NULL))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_create: kernel '%s' sets only one of cuda_ptx and "
                          "cuda_entry; set both or neither",
                          desc->name);
    rill__runtime_get(&rt);
    rill_kernel *k = rill__calloc(1, sizeof *k);
    if (k == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_kernel_create: out of memory");
    snprintf(k->name, sizeof k->name, "%s", desc->name);
    k->cpu = desc->cpu;
    if (desc->cuda_ptx != NULL) {
        k->cuda_ptx = rill__strdup(desc->cuda_ptx);
        k->cuda_entry = rill__strdup(desc->cuda_entry);
        if (k->cuda_ptx == NULL || k->cuda_entry == NULL) {
            rill__free(k->cuda_ptx);
            rill__free(k->cuda_entry);
            rill__free(k);
            return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "rill_kernel_create: out of memory");
        }
    }
    atomic_store(&k->magic, RILL__MAGIC_KERNEL);
    rill__kernels_reap(rt);
    rill__mutex_lock(&rt->lock);
    k->rt_next = rt->kernels;
    if (rt->kernels != NULL)
        rt->kernels->rt_prev = k;
    rt->kernels = k;
    rill__mutex_unlock(&rt->lock);
    *out = k;
    return RILL_OK;
}

rill_status rill_kernel_destroy(rill_kernel *kernel) {
    rill__runtime *rt;
    if (kernel == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "rill_kernel_destroy: kernel is NULL");
    if (rill__handle_magic(kernel) != RILL__MAGIC_KERNEL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_destroy: the kernel handle is not valid (destroyed?)");
    rill__runtime_get(&rt);
    /* Snapshot the work that may still launch the kernel, on every device;
     * without memory for the snapshot, wait for that work instead. */
    size_t cap = 16, n = 0;
    rill__mem_dep *deps = NULL;
    for (;;) {
        rill__free(deps);
        deps = rill__malloc(cap * sizeof *deps);
        if (deps == NULL)
            break;
        int overflow = 0;
        n = 0;
        for (int i = 0; i < rt->num_devices && !overflow; i++)
            n += rill__device_pending(rt->devices[i], deps + n, cap - n, &overflow);
        if (!overflow)
            break;
        for (size_t i = 0; i < n; i++)
            rill__stream_unref(deps[i].stream);
        cap *= 4;
    }
    if (deps == NULL) {
        rill_status st = rill__check_may_block("rill_kernel_destroy");
        if (st != RILL_OK)
            return st;
        for (int i = 0; i < rt->num_devices; i++)
            rill_device_synchronize(rt->devices[i]);
    }
    uint32_t expected = RILL__MAGIC_KERNEL;
    if (!atomic_compare_exchange_strong(&kernel->magic, &expected, RILL__MAGIC_DEAD)) {
        for (size_t i = 0; i < n; i++)
            rill__stream_unref(deps[i].stream);
        rill__free(deps);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_kernel_destroy: the kernel was already destroyed");
    }
    rill__mutex_lock(&rt->lock);
    kernel->pending = deps;
    kernel->num_pending = n;
    rill__mutex_unlock(&rt->lock);
    rill__kernels_reap(rt);
    return RILL_OK;
}

void rill_kernel_fail(const rill_block_ctx *ctx, const char *message) {
    if (ctx == NULL || ctx->state == NULL)
        return;
    rill__launch_state *ls = ctx->state;
    int expected = 0;
    /* The first failing block's message wins; the flag also stops the
     * launch's remaining blocks from starting. */
    if (atomic_compare_exchange_strong(&ls->failed, &expected, 2)) {
        rill__fit(ls->message, sizeof ls->message, message != NULL ? message : "");
        atomic_store_explicit(&ls->failed, 1, memory_order_release);
    }
}

rill_status rill_launch_kernel(rill_stream *stream, rill_kernel *kernel,
                               const rill_launch *launch) {
    static const char fn[] = "rill_launch_kernel";
    rill_status st = rill__stream_resolve(stream, fn, &stream);
    if (st != RILL_OK)
        return st;
    if (rill__handle_magic(kernel) != RILL__MAGIC_KERNEL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the kernel is NULL or not valid; pass a kernel from "
                          "rill_kernel_create",
                          fn);
    if (launch == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: launch is NULL; describe the grid in a rill_launch", fn);
    if (launch->grid.x == 0 || launch->grid.y == 0 || launch->grid.z == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' launched with grid (%u, %u, %u); every dimension "
                          "needs at least one block",
                          fn, kernel->name, launch->grid.x, launch->grid.y, launch->grid.z);
    if ((uint64_t)launch->grid.x * launch->grid.y * launch->grid.z > UINT32_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' launched with more than 2^32-1 blocks", fn,
                          kernel->name);
    if (launch->args_size > 0 && launch->args == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has args_size %zu but args is NULL", fn, kernel->name,
                          launch->args_size);
    if (launch->num_accesses > 0 && launch->accesses == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel '%s' has num_accesses %zu but accesses is NULL", fn,
                          kernel->name, launch->num_accesses);
    for (size_t i = 0; i < launch->num_accesses; i++) {
        const rill_access *a = &launch->accesses[i];
        if (a->ptr == NULL || a->mode < RILL_READ || a->mode > RILL_READ_WRITE)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: kernel '%s' access %zu has a NULL pointer or a mode other "
                              "than RILL_READ, RILL_WRITE or RILL_READ_WRITE",
                              fn, kernel->name, i);
    }
    if (stream->dev->info.kind == RILL_DEVICE_CPU && kernel->cpu == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: kernel '%s' has no CPU body (desc->cpu) and cannot run on the CPU "
                          "device",
                          fn, kernel->name);
    rill__cmd cmd = {.kind = RILL__CMD_KERNEL};
    cmd.u.kernel.kernel = kernel; /* see kernel.h: no reference */
    cmd.u.kernel.grid = launch->grid;
    cmd.u.kernel.block = launch->block;
    cmd.u.kernel.args = launch->args;
    cmd.u.kernel.args_size = launch->args_size;
    cmd.u.kernel.accesses = launch->accesses;
    cmd.u.kernel.num_accesses = launch->num_accesses;
    uint64_t seq;
    st = rill__stream_submit(stream, &cmd, &seq);
    /* Declared accesses are uses of memory: the pool keeps a block that
     * another stream uses from being handed out before that use is done. */
    for (size_t i = 0; st == RILL_OK && i < launch->num_accesses; i++)
        rill__pool_note_use(stream, seq, launch->accesses[i].ptr, launch->accesses[i].bytes);
    return st;
}

rill_status rill_launch_host_func(rill_stream *stream, rill_host_fn fn, void *user_data) {
    rill_status st = rill__stream_resolve(stream, "rill_launch_host_func", &stream);
    if (st != RILL_OK)
        return st;
    if (fn == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_launch_host_func: fn is NULL; pass the function to run");
    /* A host function may wait for anything, later work of other streams
     * included: the pool never makes a stream wait behind one. */
    rill__cmd cmd = {.kind = RILL__CMD_HOST, .flags = RILL__CMD_OPAQUE};
    cmd.u.host.fn = fn;
    cmd.u.host.user_data = user_data;
    return rill__stream_submit(stream, &cmd, NULL);
}
