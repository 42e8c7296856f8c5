/* SPDX-License-Identifier: MIT */
/* The stand-in driver's memory (see fake_cuda.c): address space reserved
 * with cuMemAddressReserve and mapped granule by granule from cuMemCreate's
 * memory files, page-locked host memory, and the ranges the driver knows,
 * which cuPointerGetAttribute, the copies and the memsets ask about. Like
 * the driver, it refuses maps and access changes of unaligned, unreserved
 * or unmapped ranges. */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"

#define GRANULE ((size_t)2 << 20)

static _Atomic size_t created; /* bytes of cuMemCreate not released */

/* A GPU and driver without POSIX file descriptors as a shareable handle
 * type of cuMemCreate (a vGPU, WSL): asking for one is
 * CUDA_ERROR_NOT_SUPPORTED. */
static _Atomic int no_fd_handles;

__attribute__((visibility("default"))) void fake_cuda_refuse_fd_handles(int refuse);
void fake_cuda_refuse_fd_handles(int refuse) {
    atomic_store(&no_fd_handles, refuse);
}

/* What cuPointerGetAttribute knows: the ranges mapped with cuMemMap (each
 * with the GPU of its allocation) and those of cuMemHostAlloc. */
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_range *ranges;
static size_t num_ranges, cap_ranges;
#define MAX_FDS 65536
static int device_of_fd[MAX_FDS]; /* the GPU of a cuMemCreate handle's memory */

static void ranges_add(uintptr_t base, size_t size, int device) {
    pthread_mutex_lock(&ranges_lock);
    if (num_ranges == cap_ranges) {
        size_t cap = cap_ranges ? 2 * cap_ranges : 256;
        fake_range *r = realloc(ranges, cap * sizeof *r);
        if (r == NULL)
            abort(); /* a stand-in has nowhere to report it */
        ranges = r;
        cap_ranges = cap;
    }
    ranges[num_ranges++] = (fake_range){base, size, device};
    pthread_mutex_unlock(&ranges_lock);
}

static void ranges_remove(uintptr_t base) {
    pthread_mutex_lock(&ranges_lock);
    for (size_t i = 0; i < num_ranges; i++)
        if (ranges[i].base == base) {
            ranges[i] = ranges[--num_ranges];
            break;
        }
    pthread_mutex_unlock(&ranges_lock);
}

/* The range that holds p, or false. */
bool fake_ranges_find(uintptr_t p, fake_range *out) {
    bool found = false;
    pthread_mutex_lock(&ranges_lock);
    for (size_t i = 0; i < num_ranges && !found; i++)
        if (p >= ranges[i].base && p - ranges[i].base < ranges[i].size) {
            *out = ranges[i];
            found = true;
        }
    pthread_mutex_unlock(&ranges_lock);
    return found;
}

/* Whether [p, p + n) lies in ranges that follow one another (device
 * memory only: those of cuMemMap). */
bool fake_ranges_cover(uintptr_t p, size_t n, bool device_only) {
    uintptr_t at = p, end = p + n;
    while (at < end) {
        fake_range r;
        if (!fake_ranges_find(at, &r) || (device_only && r.device < 0))
            return false;
        at = r.base + r.size;
    }
    return true;
}

/* Address space reserved with cuMemAddressReserve, which cuMemMap maps
 * into; guarded by ranges_lock. */
typedef struct reservation {
    uintptr_t base;
    size_t size;
} reservation;
static reservation *reserved;
static size_t num_reserved, cap_reserved;

static void reserved_add(uintptr_t base, size_t size) {
    pthread_mutex_lock(&ranges_lock);
    if (num_reserved == cap_reserved) {
        size_t cap = cap_reserved ? 2 * cap_reserved : 64;
        reservation *r = realloc(reserved, cap * sizeof *r);
        if (r == NULL)
            abort(); /* a stand-in has nowhere to report it */
        reserved = r;
        cap_reserved = cap;
    }
    reserved[num_reserved++] = (reservation){base, size};
    pthread_mutex_unlock(&ranges_lock);
}

/* Takes [base, base + size) off the list: false unless it is one
 * reservation exactly. */
static bool reserved_remove(uintptr_t base, size_t size) {
    bool found = false;
    pthread_mutex_lock(&ranges_lock);
    for (size_t i = 0; i < num_reserved && !found; i++)
        if (reserved[i].base == base && reserved[i].size == size) {
            reserved[i] = reserved[--num_reserved];
            found = true;
        }
    pthread_mutex_unlock(&ranges_lock);
    return found;
}

/* Whether [p, p + n) lies in one reservation and no mapping overlaps it. */
static bool reserved_and_free(uintptr_t p, size_t n) {
    bool inside = false, overlaps = false;
    pthread_mutex_lock(&ranges_lock);
    for (size_t i = 0; i < num_reserved && !inside; i++)
        inside = p >= reserved[i].base && n <= reserved[i].size &&
                 p - reserved[i].base <= reserved[i].size - n;
    for (size_t i = 0; i < num_ranges && !overlaps; i++)
        overlaps = p < ranges[i].base + ranges[i].size && ranges[i].base < p + n;
    pthread_mutex_unlock(&ranges_lock);
    return inside && !overlaps;
}

CUresult fake_cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align, CUdeviceptr addr,
                                  unsigned long long flags) {
    CALLED();
    (void)addr;
    (void)flags;
    if (align == 0)
        align = GRANULE;
    char *p =
        mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)p + align - 1) / align * align;
    if (base > (uintptr_t)p)
        munmap(p, base - (uintptr_t)p);
    if ((uintptr_t)p + align > base)
        munmap((char *)base + size, (uintptr_t)p + align - base);
    reserved_add(base, size);
    *out = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

/* Of a whole reservation, as cuMemAddressReserve gave it. */
CUresult fake_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    CALLED();
    if (!reserved_remove((uintptr_t)ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    return munmap((void *)(uintptr_t)ptr, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags) {
    (void)flags;
    fake_check_alive(__func__);
    if (atomic_load(&no_fd_handles) &&
        (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (size % GRANULE != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (atomic_fetch_add(&created, size) + size > TOTAL_MEMORY) {
        atomic_fetch_sub(&created, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0)
            close(fd);
        atomic_fetch_sub(&created, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (fd < MAX_FDS)
        device_of_fd[fd] = prop->location.id;
    *out = (CUmemGenericAllocationHandle)fd + 1;
    return CUDA_SUCCESS;
}

CUresult fake_cuMemRelease(CUmemGenericAllocationHandle h) {
    CALLED();
    struct stat st;
    int fd = (int)(h - 1);
    if (fstat(fd, &st) != 0 || close(fd) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    atomic_fetch_sub(&created, (size_t)st.st_size);
    return CUDA_SUCCESS;
}

/* Of whole granules, into reserved address space that nothing maps yet,
 * from within the allocation. */
CUresult fake_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                       unsigned long long flags) {
    CALLED();
    int fd = (int)(h - 1);
    struct stat st;
    if (flags != 0 || size == 0 || ptr % GRANULE != 0 || size % GRANULE != 0 ||
        offset % GRANULE != 0 || fstat(fd, &st) != 0 || offset > (size_t)st.st_size ||
        size > (size_t)st.st_size - offset || !reserved_and_free((uintptr_t)ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                   (off_t)offset);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ranges_add((uintptr_t)ptr, size, fd < MAX_FDS ? device_of_fd[fd] : 0);
    return CUDA_SUCCESS;
}

/* Of whole granules that are mapped. */
CUresult fake_cuMemUnmap(CUdeviceptr ptr, size_t size) {
    CALLED();
    if (size == 0 || ptr % GRANULE != 0 || size % GRANULE != 0 ||
        !fake_ranges_cover((uintptr_t)ptr, size, true))
        return CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t at = (uintptr_t)ptr; at < (uintptr_t)ptr + size;) {
        fake_range r;
        if (!fake_ranges_find(at, &r))
            break;
        ranges_remove(r.base);
        at = r.base + r.size;
    }
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Of whole granules that are mapped. */
CUresult fake_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                             size_t count) {
    CALLED();
    if (desc == NULL || count == 0 || size == 0 || ptr % GRANULE != 0 || size % GRANULE != 0 ||
        !fake_ranges_cover((uintptr_t)ptr, size, true))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult fake_cuMemGetAllocationGranularity(size_t *out, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags flags) {
    CALLED();
    (void)flags;
    if (atomic_load(&no_fd_handles) &&
        (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_NOT_SUPPORTED;
    *out = GRANULE;
    return CUDA_SUCCESS;
}

/* The next this many cuMemHostAlloc calls fail with
 * CUDA_ERROR_OUT_OF_MEMORY, as when page-locked memory runs out
 * (RLIMIT_MEMLOCK, or the machine's). */
static _Atomic int refuse_host_allocs;

__attribute__((visibility("default"))) void fake_cuda_refuse_host_allocs(int count);
void fake_cuda_refuse_host_allocs(int count) {
    atomic_store(&refuse_host_allocs, count);
}

CUresult fake_cuMemHostAlloc(void **out, size_t bytes, unsigned int flags) {
    (void)flags;
    NEED_CONTEXT();
    if (atomic_fetch_sub(&refuse_host_allocs, 1) > 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_fetch_add(&refuse_host_allocs, 1); /* none to refuse: back to where it was */
    *out = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (*out == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(*out, 0, bytes);
    ranges_add((uintptr_t)*out, bytes, -1);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemFreeHost(void *p) {
    NEED_CONTEXT();
    ranges_remove((uintptr_t)p);
    free(p);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemHostGetDevicePointer(CUdeviceptr *out, void *p, unsigned int flags) {
    (void)flags;
    NEED_CONTEXT();
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* The memory type and GPU of what cuMemMap and cuMemHostAlloc gave;
 * CUDA_ERROR_INVALID_VALUE for memory the driver does not know (pageable
 * host memory), as the driver says. */
CUresult fake_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    NEED_CONTEXT();
    fake_range r;
    if (!fake_ranges_find((uintptr_t)ptr, &r))
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = r.device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = r.device >= 0 ? r.device : 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* cuPointerGetAttribute's answers; for memory the driver does not know,
 * zeros and CUDA_SUCCESS, as the driver does. */
CUresult fake_cuPointerGetAttributes(unsigned int num, CUpointer_attribute *attributes, void **data,
                                     CUdeviceptr ptr) {
    NEED_CONTEXT();
    bool known = fake_ranges_find((uintptr_t)ptr, &(fake_range){0});
    for (unsigned int i = 0; i < num; i++) {
        if (attributes[i] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
            attributes[i] != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (!known) {
            memset(data[i], 0,
                   attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ? sizeof(unsigned int)
                                                                     : sizeof(int));
            continue;
        }
        CUresult r = fake_cuPointerGetAttribute(data[i], attributes[i], ptr);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}
