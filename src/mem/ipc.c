/* SPDX-License-Identifier: MIT */
/* Inter-process memory handles (see core/ipc_wire.h for the wire format). A device
 * block is exported as the shared object of its pool segment plus the
 * block's offset and size; another process, or this one, maps just the
 * pages that hold the block and registers them as RILL__MEM_IPC, so
 * copies and ops accept the pointer. Opening in the exporting process
 * maps the memory a second time, at another address: one rule for every
 * opener, and close never touches the exporter's allocation.
 *
 * Invariant: every registry block of kind RILL__MEM_IPC is a live mapping
 * made by rill_ipc_open_mem_handle, [base, base + bytes) inside it. */
#include "mem/ipc.h"

#include <stdio.h>
#include <string.h>

#include "core/calls.h"
#include "core/ipc_wire.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "mem/pool.h"
#include "mem/registry.h"
#include "util/status.h"

/* -------------------------------------------------------------- memory */

rill_status rill_ipc_get_mem_handle(void *ptr, rill_ipc_mem_handle *out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_ipc_get_mem_handle";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_ipc_mem_handle to receive the handle", fn);
    memset(out, 0, sizeof *out);
    if (ptr == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: ptr is NULL; pass device memory from rill_malloc", fn);
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return st;
    rill__device *dev = NULL;
    size_t to_end = 0;
    rill__pool_location loc;
    if (!rill__pool_find(ptr, &dev, &to_end)) {
        rill__mem_block b;
        if (rill__registry_find(ptr, &b) && b.kind == RILL__MEM_IPC)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: %p was opened from another process's handle; pass that "
                              "handle on instead of exporting the mapping",
                              fn, ptr);
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p is not allocated device memory; export memory from rill_malloc "
                          "or rill_malloc_async",
                          fn, ptr);
    }
    if (!rill__pool_locate(ptr, &loc))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p lies inside an allocation but is not its start; export the "
                          "pointer that the allocation returned",
                          fn, ptr);
    if (dev->ops->ipc_export == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: device %d (%s) cannot share its memory with other processes", fn,
                          dev->base.info.ordinal, dev->base.info.name);
    const rill__shm *shm = dev->ops->ipc_export(dev, loc.backend_handle);
    if (shm == NULL)
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the segment holding %p could not be made shareable when it was "
                          "reserved (no file descriptor was left); raise the descriptor limit "
                          "(ulimit -n)",
                          fn, ptr);
    rill__ipc_wire w = {.magic = RILL__IPC_MAGIC_MEM, .version = RILL__IPC_VERSION};
    rill__ipc_set_device(&w, dev);
    rill__shm_name_of(shm, &w.name);
    w.object_bytes = loc.segment_bytes;
    w.offset = loc.offset;
    w.bytes = loc.block_bytes;
    w.start_time = rill__process_start_time(w.name.pid);
    rill__ipc_encode(&w, out->bytes);
    return RILL_OK;
}

/* Maps the block a handle describes (the one path that opens memory, where
 * a check that capture is not active belongs). */
static rill_status open_mem(const rill_ipc_mem_handle *handle, void **out, const char *fn) {
    rill__ipc_wire w;
    rill_status st = rill__ipc_decode(handle->bytes, RILL__IPC_MAGIC_MEM, fn, &w);
    if (st != RILL_OK)
        return st;
    if (w.bytes == 0 || w.offset > w.object_bytes || w.bytes > w.object_bytes - w.offset)
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the handle describes %llu bytes at offset %llu of a %llu-byte "
                          "segment, which is impossible; it was not made by rill",
                          fn, (unsigned long long)w.bytes, (unsigned long long)w.offset,
                          (unsigned long long)w.object_bytes);
    rill__device *dev;
    st = rill__ipc_get_device(&w, fn, &dev);
    if (st != RILL_OK)
        return st;
    if (dev->ops->ipc_map == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: device %d (%s) cannot map memory of other processes", fn,
                          dev->base.info.ordinal, dev->base.info.name);
    void *p;
    char why[256];
    rill__shm_map_result mapped =
        dev->ops->ipc_map(dev, &w.name, (size_t)w.object_bytes, (size_t)w.offset, (size_t)w.bytes,
                          &p, why, sizeof why);
    if (mapped != RILL__SHM_MAPPED)
        return rill__ipc_map_failed(&w, fn, "memory", mapped, why);
    rill__mem_block b = {(uintptr_t)p, (size_t)w.bytes, dev, RILL__MEM_IPC, NULL};
    if (rill__registry_insert(&b) != RILL_OK) {
        dev->ops->ipc_unmap(dev, p, (size_t)w.bytes);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    *out = p;
    return RILL_OK;
}

rill_status rill_ipc_open_mem_handle(const rill_ipc_mem_handle *handle, void **out) {
    RILL_CALL_SCOPE();
    rill__runtime_enter();
    static const char fn[] = "rill_ipc_open_mem_handle";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a void * to receive the mapped pointer", fn);
    *out = NULL;
    if (handle == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: handle is NULL; pass the bytes from rill_ipc_get_mem_handle", fn);
    /* Unsafe under capture: a graph could not replay the opening. */
    rill_status st = rill__capture_check_unsafe(fn);
    if (st != RILL_OK)
        return st;
    return open_mem(handle, out, fn);
}

/* Waits for the work already submitted to dev's streams, which may still
 * touch a mapping about to go away. */
static void wait_device_work(rill__device *dev) {
    rill__mem_dep deps[32];
    int overflow = 1;
    while (overflow) {
        size_t n = rill__device_pending(dev, deps, sizeof deps / sizeof deps[0], &overflow);
        for (size_t i = 0; i < n; i++) {
            rill__stream_host_wait(deps[i].stream, deps[i].seq, 0);
            rill__stream_unref(deps[i].stream);
        }
    }
}

rill_status rill_ipc_close_mem_handle(void *ptr) {
    RILL_CALL_SCOPE();
    rill__runtime_enter();
    static const char fn[] = "rill_ipc_close_mem_handle";
    if (ptr == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: ptr is NULL; pass a pointer from rill_ipc_open_mem_handle", fn);
    rill__mem_block b;
    if (!rill__registry_find(ptr, &b) || b.kind != RILL__MEM_IPC || b.base != (uintptr_t)ptr)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p is not a pointer from rill_ipc_open_mem_handle (or it was "
                          "already closed)",
                          fn, ptr);
    rill_status st = rill__check_may_block(fn);
    if (st != RILL_OK)
        return st;
    wait_device_work(b.dev);
    if (!rill__registry_remove(ptr, RILL__MEM_IPC, &b))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %p was already closed; close each mapping once", fn, ptr);
    b.dev->ops->ipc_unmap(b.dev, ptr, b.bytes);
    return RILL_OK;
}

static void unmap_block(const rill__mem_block *b, void *ctx) {
    (void)ctx;
    b->dev->ops->ipc_unmap(b->dev, (void *)b->base, b->bytes);
}

void rill__ipc_mem_shutdown(rill__runtime *rt) {
    for (int i = 0; i < rt->num_devices; i++)
        rill__registry_drain(rt->devices[i], RILL__MEM_IPC, unmap_block, NULL);
}
