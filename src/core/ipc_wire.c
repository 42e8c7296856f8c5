/* SPDX-License-Identifier: MIT */
/* The 64-byte wire format of inter-process handles (see ipc_wire.h),
 * shared by memory handles (src/mem/ipc.c) and event handles
 * (event_ipc.c): encoding, a decoder that believes nothing before the
 * checksum, magic and version agree, the device a handle names, and the
 * sentence for an object that could not be mapped. */
#include "core/ipc_wire.h"

#include <stdio.h>
#include <string.h>

#include "core/runtime.h"
#include "util/status.h"

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
        index += rt->devices[i]->base.info.kind == dev->base.info.kind;
    w->device_kind = (uint8_t)dev->base.info.kind;
    w->device_index = (uint16_t)index;
}

rill_status rill__ipc_get_device(const rill__ipc_wire *w, const char *fn, rill__device **out) {
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return st;
    int index = 0;
    for (int i = 0; i < rt->num_devices; i++) {
        if (rt->devices[i]->base.info.kind != (rill_device_kind)w->device_kind)
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
