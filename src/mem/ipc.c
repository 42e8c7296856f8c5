/* SPDX-License-Identifier: MIT */
/* Inter-process memory handles (see ipc.h for the wire format). A device
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

#include "core/runtime.h"
#include "core/status.h"
#include "core/stream.h"
#include "graph/graph.h"
#include "mem/pool.h"
#include "mem/registry.h"

/* Largest object a handle may describe: far beyond any real segment, and
 * small enough that offset + bytes cannot overflow. */
#define MAX_OBJECT_BYTES ((uint64_t)1 << 48)

/* ---------------------------------------------------------------- wire */

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static void put32(unsigned char *p, uint32_t v) {
    memcpy(p, &v, sizeof v);
}
static void put64(unsigned char *p, uint64_t v) {
    memcpy(p, &v, sizeof v);
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

void rill__ipc_encode(const rill__ipc_wire *w, unsigned char out[RILL__IPC_HANDLE_BYTES]) {
    memset(out, 0, RILL__IPC_HANDLE_BYTES);
    put32(out + 0, w->magic);
    out[4] = w->version;
    out[5] = w->device_kind;
    out[6] = (unsigned char)(w->device_index & 0xffu);
    out[7] = (unsigned char)(w->device_index >> 8);
    put32(out + 8, (uint32_t)w->name.pid);
    put32(out + 12, (uint32_t)w->name.fd);
    put64(out + 16, w->name.inode);
    put64(out + 24, w->object_bytes);
    put64(out + 32, w->offset);
    put64(out + 40, w->bytes);
    put64(out + 48, w->start_time);
    put64(out + 56, fnv1a(out, 56));
}

rill_status rill__ipc_decode(const unsigned char in[RILL__IPC_HANDLE_BYTES], uint32_t magic,
                             const char *fn, rill__ipc_wire *out) {
    const char *kind = magic == RILL__IPC_MAGIC_MEM ? "memory" : "event";
    const char *other = magic == RILL__IPC_MAGIC_MEM ? "an event" : "a memory";
    int zero = 1;
    for (size_t i = 0; i < RILL__IPC_HANDLE_BYTES && zero; i++)
        zero = in[i] == 0;
    if (zero)
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the handle is all zero bytes, not a rill %s handle; pass the bytes "
                          "that the exporting process's call filled in",
                          fn, kind);
    uint32_t m = get32(in);
    if (m != magic) {
        if (m == RILL__IPC_MAGIC_MEM || m == RILL__IPC_MAGIC_EVENT)
            return rill__fail(RILL_ERROR_IPC,
                              "%s: the handle is %s handle, not %s handle; open it with the "
                              "matching call",
                              fn, other, magic == RILL__IPC_MAGIC_MEM ? "a memory" : "an event");
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the bytes are not a rill %s handle (wrong magic number 0x%08x); "
                          "pass the bytes that the exporting process's call filled in",
                          fn, kind, (unsigned)m);
    }
    if (in[4] != RILL__IPC_VERSION)
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the handle has format version %u but this library reads version "
                          "%u; use the same rill version in both processes",
                          fn, (unsigned)in[4], RILL__IPC_VERSION);
    if (get64(in + 56) != fnv1a(in, 56))
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the handle's checksum does not match its contents: its bytes were "
                          "changed or damaged on the way; send all %d bytes unchanged",
                          fn, RILL__IPC_HANDLE_BYTES);
    out->magic = m;
    out->version = in[4];
    out->device_kind = in[5];
    out->device_index = (uint16_t)(in[6] | (in[7] << 8));
    out->name.pid = (int32_t)get32(in + 8);
    out->name.fd = (int32_t)get32(in + 12);
    out->name.inode = get64(in + 16);
    out->object_bytes = get64(in + 24);
    out->offset = get64(in + 32);
    out->bytes = get64(in + 40);
    out->start_time = get64(in + 48);
    if (out->name.pid <= 0 || out->name.fd < 0 || out->object_bytes == 0 ||
        out->object_bytes > MAX_OBJECT_BYTES)
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the handle names no possible shared object (process %d, "
                          "descriptor %d, %llu bytes); it was not made by rill",
                          fn, (int)out->name.pid, (int)out->name.fd,
                          (unsigned long long)out->object_bytes);
    return RILL_OK;
}

void rill__ipc_set_device(rill__ipc_wire *w, rill__device *dev) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    int index = 0;
    for (int i = 0; i < rt->num_devices && rt->devices[i] != dev; i++)
        index += rt->devices[i]->info.kind == dev->info.kind;
    w->device_kind = (uint8_t)dev->info.kind;
    w->device_index = (uint16_t)index;
}

rill_status rill__ipc_get_device(const rill__ipc_wire *w, const char *fn, rill__device **out) {
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return st;
    int index = 0;
    for (int i = 0; i < rt->num_devices; i++) {
        if (rt->devices[i]->info.kind != (rill_device_kind)w->device_kind)
            continue;
        if (index++ == w->device_index) {
            *out = rt->devices[i];
            return RILL_OK;
        }
    }
    return rill__fail(RILL_ERROR_IPC,
                      "%s: the handle is for device %u of kind %u, which this process does not "
                      "have; open it in a process that sees the same devices",
                      fn, (unsigned)w->device_index, (unsigned)w->device_kind);
}

rill_status rill__ipc_map_failed(const rill__ipc_wire *w, const char *fn, const char *what,
                                 rill__shm_map_result result, const char *why) {
    if (result == RILL__SHM_NO_ROOM)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                          "%s: this process has no room to map the %s exported by process %d "
                          "(%s); close what it no longer needs (rill_ipc_close_mem_handle, "
                          "rill_event_destroy, files) or raise its limits, then open again",
                          fn, what, (int)w->name.pid, why);
    if (!rill__process_alive(w->name.pid, w->start_time))
        return rill__fail(RILL_ERROR_IPC,
                          "%s: process %d, which exported the %s, has exited; a handle is good "
                          "only while its exporter runs",
                          fn, (int)w->name.pid, what);
    return rill__fail(RILL_ERROR_IPC,
                      "%s: cannot map the %s exported by process %d (%s); the exporter must still "
                      "hold it, and both processes must run as the same user",
                      fn, what, (int)w->name.pid, why);
}

/* -------------------------------------------------------------- memory */

rill_status rill_ipc_get_mem_handle(void *ptr, rill_ipc_mem_handle *out) {
    static const char fn[] = "rill_ipc_get_mem_handle";
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
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
    if (dev->ops->mem_shared == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: device %d (%s) cannot share its memory with other processes", fn,
                          dev->info.ordinal, dev->info.name);
    const rill__shm *shm = dev->ops->mem_shared(dev, loc.backend_handle);
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
    if (dev->ops->mem_shared == NULL)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: device %d (%s) cannot map memory of other processes", fn,
                          dev->info.ordinal, dev->info.name);
    void *p;
    char why[256];
    rill__shm_map_result mapped = rill__shm_map_range(
        &w.name, (size_t)w.object_bytes, (size_t)w.offset, (size_t)w.bytes, &p, why, sizeof why);
    if (mapped != RILL__SHM_MAPPED)
        return rill__ipc_map_failed(&w, fn, "memory", mapped, why);
    rill__mem_block b = {(uintptr_t)p, (size_t)w.bytes, dev, RILL__MEM_IPC, NULL};
    if (rill__registry_insert(&b) != RILL_OK) {
        rill__shm_unmap_range(p, (size_t)w.bytes);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    *out = p;
    return RILL_OK;
}

rill_status rill_ipc_open_mem_handle(const rill_ipc_mem_handle *handle, void **out) {
    static const char fn[] = "rill_ipc_open_mem_handle";
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
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
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %p was already closed", fn, ptr);
    rill__shm_unmap_range(ptr, b.bytes);
    return RILL_OK;
}

static void unmap_block(const rill__mem_block *b, void *ctx) {
    (void)ctx;
    rill__shm_unmap_range((void *)b->base, b->bytes);
}

void rill__ipc_mem_shutdown(rill__runtime *rt) {
    for (int i = 0; i < rt->num_devices; i++)
        rill__registry_drain(rt->devices[i], RILL__MEM_IPC, unmap_block, NULL);
}
