/* SPDX-License-Identifier: MIT */
/*
 * ACL's memory calls on rill's: aclrtMalloc is rill_malloc, aclrtMallocHost
 * rill_malloc_host, the copies and fills rill's. ACL names the direction of
 * every copy, and rill infers it, so this layer keeps a table of the
 * allocations it made to check the named kind against where the pointers
 * lie. Invariant: regions[0..count) are the live allocations of aclrtMalloc
 * (is_host 0) and aclrtMallocHost (is_host 1), sorted by base, disjoint;
 * guarded by table_lock. No rill call is made with table_lock held.
 */
#include "memory.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl_rt.h"
#include "error.h"

struct region {
    uintptr_t base;
    size_t bytes;
    int is_host;
    int device; /* the device ordinal of aclrtMalloc's memory, for resets */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions; /* owned; guarded by table_lock */
static size_t count, capacity; /* guarded by table_lock */

static void lock(void) {
    if (pthread_mutex_lock(&table_lock) != 0)
        abort();
}

static void unlock(void) {
    if (pthread_mutex_unlock(&table_lock) != 0)
        abort();
}

/* The index of the first region whose base is above p. */
static size_t upper_bound_locked(uintptr_t p) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (regions[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The region holding p, or NULL. */
static struct region *find_locked(const void *ptr) {
    uintptr_t p = (uintptr_t)ptr;
    size_t i = upper_bound_locked(p);
    if (i == 0)
        return NULL;
    struct region *r = &regions[i - 1];
    return p - r->base < r->bytes ? r : NULL;
}

/* Room for one more region. */
static bool grow_locked(void) {
    if (count < capacity)
        return true;
    size_t grown = capacity ? capacity * 2 : 64;
    struct region *r = realloc(regions, grown * sizeof *r);
    if (!r)
        return false;
    regions = r;
    capacity = grown;
    return true;
}

/* Room made before an allocation, so that recording it cannot fail once the
 * memory is taken. */
static bool reserve_one(void) {
    lock();
    bool ok = grow_locked();
    unlock();
    return ok;
}

static void add(void *ptr, size_t bytes, int is_host, int device) {
    lock();
    /* reserve_one made room, unless other threads took it since: then the
     * table grows here, and failing that the region goes unrecorded (copies
     * then take it for host memory). */
    if (grow_locked()) {
        size_t i = upper_bound_locked((uintptr_t)ptr);
        memmove(&regions[i + 1], &regions[i], (count - i) * sizeof *regions);
        regions[i] = (struct region){(uintptr_t)ptr, bytes, is_host, device};
        count++;
    }
    unlock();
}

/* -1: not recorded at ptr; else whether it is host memory. */
static int kind_at_base(const void *ptr) {
    lock();
    struct region *r = find_locked(ptr);
    int kind = r && r->base == (uintptr_t)ptr ? r->is_host : -1;
    unlock();
    return kind;
}

static void forget(const void *ptr) {
    lock();
    struct region *r = find_locked(ptr);
    if (r && r->base == (uintptr_t)ptr) {
        size_t i = (size_t)(r - regions);
        memmove(&regions[i], &regions[i + 1], (count - i - 1) * sizeof *regions);
        count--;
    }
    unlock();
}

bool rill__acl_is_device_memory(const void *ptr) {
    lock();
    struct region *r = find_locked(ptr);
    bool device = r && !r->is_host;
    unlock();
    return device;
}

bool rill__acl_memory_find(const void *ptr, struct rill__acl_region *out) {
    lock();
    struct region *r = find_locked(ptr);
    if (r)
        *out = (struct rill__acl_region){r->base, r->bytes, r->is_host != 0};
    unlock();
    return r != NULL;
}

aclError rill__acl_memory_release_device(const char *call, int ordinal) {
    lock();
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += !regions[i].is_host && regions[i].device == ordinal;
    void **bases = n ? malloc(n * sizeof *bases) : NULL;
    if (bases) {
        size_t kept = 0, taken = 0;
        for (size_t i = 0; i < count; i++) {
            if (!regions[i].is_host && regions[i].device == ordinal)
                bases[taken++] = (void *)regions[i].base;
            else
                regions[kept++] = regions[i];
        }
        count = kept;
    }
    unlock();
    if (n && !bases)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory to list the device's memory",
                              call);
    for (size_t i = 0; i < n; i++)
        (void)rill_free(bases[i]);
    free(bases);
    return ACL_SUCCESS;
}

void rill__acl_memory_forget_all(void) {
    lock();
    free(regions);
    regions = NULL;
    count = capacity = 0;
    unlock();
}

/* ---- allocation ---- */

static bool policy_is_valid(unsigned policy) {
    unsigned bandwidth = policy & (ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH);
    unsigned page =
        policy & ~(unsigned)(ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH);
    return page <= ACL_MEM_MALLOC_HUGE1G_ONLY_P2P &&
           bandwidth != (ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH);
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    if (!devPtr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL");
    *devPtr = NULL;
    if (size == 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtMalloc: size is 0; ask for at least one byte");
    if (!policy_is_valid((unsigned)policy))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtMalloc: policy 0x%x is no aclrtMemMallocPolicy: one of "
                              "ACL_MEM_MALLOC_*, optionally or-ed with one ACL_MEM_TYPE_*",
                              (unsigned)policy);
    if (!reserve_one())
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC,
                              "aclrtMalloc: no host memory to record the allocation");
    rill_device *dev;
    rill_device_info info;
    aclError err = rill__acl_check(rill_get_device(&dev), "aclrtMalloc");
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_device_get_info(dev, &info), "aclrtMalloc");
    void *p;
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_malloc(dev, size, &p), "aclrtMalloc");
    if (err != ACL_SUCCESS)
        return err;
    add(p, size, 0, info.ordinal);
    *devPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFree(void *devPtr) {
    if (!devPtr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
    if (kind_at_base(devPtr) == 1)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtFree: %p is host memory from aclrtMallocHost; free it with "
                              "aclrtFreeHost",
                              devPtr);
    aclError err = rill__acl_check(rill_free(devPtr), "aclrtFree");
    if (err == ACL_SUCCESS)
        forget(devPtr);
    return err;
}

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    if (!hostPtr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
    *hostPtr = NULL;
    if (size == 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtMallocHost: size is 0; ask for at least one byte");
    if (!reserve_one())
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC,
                              "aclrtMallocHost: no host memory to record the allocation");
    void *p;
    aclError err = rill__acl_check(rill_malloc_host(size, &p), "aclrtMallocHost");
    if (err != ACL_SUCCESS)
        return err;
    add(p, size, 1, -1);
    *hostPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void *hostPtr) {
    if (!hostPtr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is NULL");
    if (kind_at_base(hostPtr) == 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtFreeHost: %p is device memory from aclrtMalloc; free it with "
                              "aclrtFree",
                              hostPtr);
    aclError err = rill__acl_check(rill_free_host(hostPtr), "aclrtFreeHost");
    if (err == ACL_SUCCESS)
        forget(hostPtr);
    return err;
}

/* ---- copies and fills ---- */

static const char *kind_name(aclrtMemcpyKind kind) {
    static const char *const names[] = {"ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE",
                                        "ACL_MEMCPY_DEVICE_TO_HOST", "ACL_MEMCPY_DEVICE_TO_DEVICE",
                                        "ACL_MEMCPY_DEFAULT"};
    return names[kind];
}

/* The checks common to both copies, before anything happens. */
static aclError check_copy(const char *call, void *dst, size_t destMax, const void *src,
                           size_t count_bytes, aclrtMemcpyKind kind) {
    if (!dst || !src)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", call, dst ? "src" : "dst");
    if (count_bytes > destMax)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: count %zu is more than destMax %zu, the room at dst", call,
                              count_bytes, destMax);
    if ((unsigned)kind > ACL_MEMCPY_DEFAULT)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: kind %d is no aclrtMemcpyKind", call,
                              (int)kind);
    if (kind == ACL_MEMCPY_DEFAULT)
        return ACL_SUCCESS;
    bool dst_device = rill__acl_is_device_memory(dst);
    bool src_device = rill__acl_is_device_memory(src);
    bool want_dst = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    bool want_src = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    if (dst_device != want_dst || src_device != want_src)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: kind %s, but dst %p is %s memory and src %p is %s memory; "
                              "name the kind that matches, or ACL_MEMCPY_DEFAULT",
                              call, kind_name(kind), dst, dst_device ? "device" : "host",
                              (const void *)src, src_device ? "device" : "host");
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count_bytes,
                     aclrtMemcpyKind kind) {
    aclError err = check_copy("aclrtMemcpy", dst, destMax, src, count_bytes, kind);
    if (err != ACL_SUCCESS || count_bytes == 0)
        return err;
    return rill__acl_check(rill_memcpy(dst, src, count_bytes), "aclrtMemcpy");
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count_bytes,
                          aclrtMemcpyKind kind, aclrtStream stream) {
    aclError err = check_copy("aclrtMemcpyAsync", dst, destMax, src, count_bytes, kind);
    if (err != ACL_SUCCESS || count_bytes == 0)
        return err;
    return rill__acl_check(rill_memcpy_async(dst, src, count_bytes, (rill_stream *)stream),
                           "aclrtMemcpyAsync");
}

static aclError check_fill(const char *call, void *devPtr, size_t maxCount, size_t count_bytes) {
    if (!devPtr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", call);
    if (count_bytes > maxCount)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: count %zu is more than maxCount %zu, the room at devPtr", call,
                              count_bytes, maxCount);
    return ACL_SUCCESS;
}

/* aclrtMemset takes only memory of this layer's table, as ACL's does
 * (device memory from aclrtMalloc, host memory from aclrtMallocHost): any
 * other pointer might be unmapped, and freed device memory is rill's pool's
 * to reuse. */
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count_bytes) {
    aclError err = check_fill("aclrtMemset", devPtr, maxCount, count_bytes);
    if (err != ACL_SUCCESS || count_bytes == 0)
        return err;
    struct rill__acl_region r;
    if (!rill__acl_memory_find(devPtr, &r))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtMemset: devPtr %p is in no memory from aclrtMalloc or "
                              "aclrtMallocHost (never allocated by ACL, or freed); fill other "
                              "host memory with memset",
                              devPtr);
    if (r.is_host) {
        size_t room = r.bytes - ((uintptr_t)devPtr - r.base);
        if (count_bytes > room)
            return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                                  "aclrtMemset: count %zu runs past the end of the host memory "
                                  "at devPtr %p (%zu bytes left of %zu from aclrtMallocHost)",
                                  count_bytes, devPtr, room, r.bytes);
        memset(devPtr, value & 0xff, count_bytes);
        return ACL_SUCCESS;
    }
    err =
        rill__acl_check(rill_memset_async(devPtr, value & 0xff, count_bytes, NULL), "aclrtMemset");
    if (err != ACL_SUCCESS)
        return err;
    return rill__acl_check(rill_stream_synchronize(NULL), "aclrtMemset");
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count_bytes,
                          aclrtStream stream) {
    aclError err = check_fill("aclrtMemsetAsync", devPtr, maxCount, count_bytes);
    if (err != ACL_SUCCESS || count_bytes == 0)
        return err;
    return rill__acl_check(
        rill_memset_async(devPtr, value & 0xff, count_bytes, (rill_stream *)stream),
        "aclrtMemsetAsync");
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: %s is NULL",
                              free_bytes ? "total" : "free");
    if ((unsigned)attr > ACL_HBM_MEM_P2P_NORMAL)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtGetMemInfo: attr %d is no aclrtMemAttr", (int)attr);
    rill_device *dev;
    rill_device_info info;
    rill_mem_stats stats;
    size_t limit;
    aclError err = rill__acl_check(rill_get_device(&dev), "aclrtGetMemInfo");
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_device_get_info(dev, &info), "aclrtGetMemInfo");
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_mem_get_stats(dev, &stats), "aclrtGetMemInfo");
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_mem_get_limit(dev, &limit), "aclrtGetMemInfo");
    if (err != ACL_SUCCESS)
        return err;
    size_t total = limit != 0 && limit < info.memory_bytes ? limit : info.memory_bytes;
    *total_bytes = total;
    *free_bytes = stats.reserved_bytes < total ? total - stats.reserved_bytes : 0;
    return ACL_SUCCESS;
}
