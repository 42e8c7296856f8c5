/* SPDX-License-Identifier: MIT */
/* The memory layer's subsystem (core/hooks.h), the host-memory shutdown
 * and the check of a declared access against its allocation. */
#ifndef RILL_MEM_MEMORY_H
#define RILL_MEM_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/handle.h"
#include "core/hooks.h"
#include "rill.h"

/* The memory layer in the runtime's life: a pool per device, the pointer
 * registry, the hook that notes uses of memory, interprocess and host
 * memory at shutdown (memory.c). */
extern const rill__subsystem rill__mem_subsystem;

/* Frees all rill_malloc_host memory still allocated (rill_shutdown, once
 * the backends stopped, before the devices go). */
void rill__mem_host_shutdown(struct rill__runtime *rt);

/* rill_malloc_host's memory for dev's copies (rill_malloc_host takes the
 * calling thread's current device), freed by rill_free_host or at
 * rill_shutdown. RILL_ERROR_OUT_OF_MEMORY with a sentence that names no
 * public call (the caller adds its own, rill__fail_from). */
rill_status rill__mem_host_alloc(rill__device *dev, size_t bytes, void **out);

/* rill_malloc_async and rill_free_async on a stream already resolved (bytes
 * at least 1), whose failures name those calls: for a call that makes
 * several commands on one stream (the ops with scratch memory), which
 * must not resolve its handle again and find it destroyed half-way. */
rill_status rill__mem_alloc_async(rill__stream *stream, size_t bytes, void **out);
rill_status rill__mem_free_async(void *ptr, rill__stream *stream);

/* Checks a declared access of fn, [p, p + bytes), against the allocation
 * that holds p, when rill made that allocation (device memory of a pool,
 * rill_malloc_host memory, memory opened with rill_ipc_open_mem_handle):
 * RILL_ERROR_INVALID_ARGUMENT, with a sentence naming fn, the argument
 * `what`, bytes (and `shape`, where the size comes from, such as "m*k
 * floats"; or NULL) and the bytes from p to the allocation's end, when the
 * access runs past that end or p is device memory that is not allocated.
 * Ordinary host memory cannot be checked and passes. *dev receives the
 * device whose memory p is, NULL for host memory. Takes the registry's
 * lock and the pool's lock of p's device, one after the other. */
rill_status rill__mem_check_access(const char *fn, const char *what, const char *shape,
                                   const void *p, size_t bytes, rill__device **dev);
/* Whether work of device `user` reaches [p, p + bytes), memory of dev (as
 * rill__mem_check_access gives it; NULL: host memory, or memory rill did
 * not allocate). Memory of another device is RILL_ERROR_DEVICE_MISMATCH
 * unless both are CPU devices, whose memory is host memory; other memory
 * is asked of user's backend (mem_reachable: a GPU cannot read pageable
 * host memory). The sentence names fn and `what`, the argument, or with
 * index >= 0 the kernel whose access index it is. */
rill_status rill__mem_reach(const char *fn, const char *what, int index, const void *p,
                            size_t bytes, rill__device *dev, rill__device *user);
/* rill__mem_reach of the device whose memory p is, looked up: for the
 * declared accesses of kernels, whose sizes rill does not check. */
rill_status rill__mem_check_reach(const char *fn, const char *what, int index, const void *p,
                                  size_t bytes, rill__device *user);
/* Checks both sides of a copy of bytes from src to dst (neither NULL, each
 * within its allocation) for fn, as rill__mem_check_access does; *src_dev
 * and *dst_dev receive their devices (NULL: host memory). */
rill_status rill__mem_check_copy(void *dst, const void *src, size_t bytes, const char *fn,
                                 rill__device **src_dev, rill__device **dst_dev);

/* For tests and debugging: rill__pool_check on dev's pool (NULL: the
 * calling thread's current device). False with a sentence in why when an
 * invariant of the pool does not hold or dev is not a device. */
bool rill__mem_check(rill_device *dev, char *why, size_t cap);
/* For tests and debugging: rill__pool_describe on dev's pool (NULL: the
 * calling thread's current device). */
void rill__mem_describe(rill_device *dev, const void *ptr, char *out, size_t cap);

#endif
