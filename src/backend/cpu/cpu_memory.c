/* SPDX-License-Identifier: MIT */
/* The CPU device's memory: segments of shared memory for the pool, host
 * memory for rill_malloc_host, interprocess mappings, and the memory all
 * CPU devices may take from the system together. */

/* That last figure is why allocation fails with RILL_ERROR_OUT_OF_MEMORY
 * instead of the kernel killing the process: segments are sparse and Linux
 * overcommits, so nothing would fail before the kernel's out-of-memory
 * killer (or the memory cgroup's) ends the process once the pages are
 * touched. Every CPU device commits segment memory against one budget
 * (its memory_bytes), and host memory counts against it too:
 *     taken_bytes = sum over the CPU devices' segments of g->charged_bytes
 *                   + the bytes of live rill_malloc_host blocks
 *                 <= budget_bytes.
 * The budget is process-wide because the memory is: two CPU devices on
 * one machine draw on the same RAM and the same cgroup. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/cpu/cpu.h"
#include "platform/memlimit.h"
#include "util/alloc.h"
#include "util/status.h"

/* The share of the system's memory (the smaller of physical memory and
 * the cgroup's limit) that the CPU devices take by default: the rest is
 * the program's own, the other processes' and the kernel's. */
#define DEFAULT_NUMERATOR   3
#define DEFAULT_DENOMINATOR 4

/* Written by rill__cpu_memory_probe on the initialising thread before any
 * CPU device exists; read-only while devices exist. */
static size_t budget_bytes;
static char budget_how[320]; /* what chose budget_bytes, for sentences */

/* Relaxed: the count orders no other memory; each change is one atomic
 * read-modify-write, so the sum never passes the budget. */
static _Atomic size_t taken_bytes;

/* Parses RILL_CPU_MEMORY's value: bytes, with an optional K, M, G or T
 * (powers of 1024, "G", "GB" and "GiB" alike), or a percentage of system
 * from 1 to 100. */
static bool parse_setting(const char *env, size_t system, size_t *out) {
    char *end;
    errno = 0;
    if (env[0] < '0' || env[0] > '9')
        return false;
    unsigned long long n = strtoull(env, &end, 10);
    if (errno != 0 || end == env || n == 0)
        return false;
    if (strcmp(end, "%") == 0) {
        if (n > 100 || system == 0)
            return false;
        *out = (size_t)((double)system * (double)n / 100.0);
        return *out > 0;
    }
    static const char units[] = "KMGT";
    const char *unit = *end != '\0' ? strchr(units, end[0] & ~0x20) : NULL;
    int shift = 0;
    if (unit != NULL && *unit != '\0') {
        shift = 10 * (int)(unit - units + 1);
        end++;
        if (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0)
            end += strlen(end);
    }
    if (*end != '\0' || n > (SIZE_MAX >> shift))
        return false;
    *out = (size_t)n << shift;
    return true;
}

bool rill__cpu_memory_choose(const char *env, size_t physical, size_t cgroup, size_t *out,
                             char *how, size_t size) {
    bool by_cgroup = cgroup != 0 && (physical == 0 || cgroup < physical);
    size_t system = by_cgroup ? cgroup : physical;
    char sys[32];
    rill__format_bytes(sys, sizeof sys, system);
    const char *what = by_cgroup ? "the memory cgroup's limit" : "physical memory";
    if (env != NULL && env[0] != '\0') {
        if (!parse_setting(env, system, out)) {
            snprintf(how, size,
                     "RILL_CPU_MEMORY='%s' is neither a size (bytes, or a number with K, M, G or "
                     "T) nor a percentage from 1%% to 100%% of %s (%s); unset it for %d/%d of it",
                     env, what, sys, DEFAULT_NUMERATOR, DEFAULT_DENOMINATOR);
            return false;
        }
        if (strchr(env, '%') != NULL)
            snprintf(how, size, "RILL_CPU_MEMORY=%s of %s (%s)", env, what, sys);
        else
            snprintf(how, size, "RILL_CPU_MEMORY=%s", env);
        return true;
    }
    /* 0 (no budget) when the system gives no figure for its memory. */
    *out = system / DEFAULT_DENOMINATOR * DEFAULT_NUMERATOR;
    snprintf(how, size, "%d/%d of %s (%s)", DEFAULT_NUMERATOR, DEFAULT_DENOMINATOR, what, sys);
    return true;
}

bool rill__cpu_memory_probe(char *why, size_t size) {
    char how[sizeof budget_how];
    size_t bytes = 0;
    if (!rill__cpu_memory_choose(getenv("RILL_CPU_MEMORY"), rill__physical_memory_bytes(),
                                 rill__cgroup_memory_limit_bytes(""), &bytes, how, sizeof how)) {
        snprintf(why, size, "%s", how);
        return false;
    }
    budget_bytes = bytes;
    memcpy(budget_how, how, sizeof how);
    return true;
}

size_t rill__cpu_memory_bytes(void) {
    return budget_bytes;
}

size_t rill__cpu_memory_taken(void) {
    return atomic_load_explicit(&taken_bytes, memory_order_relaxed);
}

/* Counts bytes against the budget; false, counting nothing, when they do
 * not fit. A budget of 0 (the system gave no figures) is no budget. */
static bool charge(size_t bytes) {
    size_t taken = atomic_load_explicit(&taken_bytes, memory_order_relaxed);
    do {
        if (budget_bytes != 0 && (bytes > budget_bytes || taken > budget_bytes - bytes))
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&taken_bytes, &taken, taken + bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

static void uncharge(size_t bytes) {
    atomic_fetch_sub_explicit(&taken_bytes, bytes, memory_order_relaxed);
}

void rill__cpu_mem_describe(rill__device *dev, char *buf, size_t size) {
    (void)dev;
    char total[32], taken[32];
    rill__format_bytes(total, sizeof total, budget_bytes);
    rill__format_bytes(taken, sizeof taken, rill__cpu_memory_taken());
    snprintf(buf, size,
             "%s for the CPU devices and host memory together, %s of it taken; %s; "
             "RILL_CPU_MEMORY=SIZE or PERCENT%% sets it",
             total, taken, budget_how);
}

/* A segment is a rill__shm; when none can be made (the process has no
 * descriptor left, say), it is private address space that cannot be
 * exported: running out of descriptors must not make allocation fail.
 * Both are sparse: a page takes memory when first touched. */
typedef struct cpu_segment {
    int shared;
    rill__shm shm;     /* owned, when shared */
    rill__pages pages; /* owned, when not */
    /* guarded by the pool's lock: the committed bytes counted against the
     * budget (the segment's mapped bytes, see src/mem/segment.c) */
    size_t charged_bytes;
} cpu_segment;

rill_status rill__cpu_mem_alloc(rill__device *dev, size_t bytes, void **out, void **handle) {
    /* Address space only: the budget counts what the pool commits. Shared
     * memory is not charged to the commit limit when mapped, so a
     * reservation beyond the device's memory is refused here rather than
     * failing at first touch. */
    size_t memory = (size_t)rill__device_base_of(dev)->info.memory_bytes;
    if (memory != 0 && bytes > memory)
        return RILL_ERROR_OUT_OF_MEMORY;
    cpu_segment *g = rill__calloc(1, sizeof *g);
    if (g == NULL)
        return RILL_ERROR_OUT_OF_MEMORY;
    char why[160];
    g->shared = rill__shm_create("rill-segment", bytes, &g->shm, why, sizeof why);
    if (g->shared) {
        *out = g->shm.base;
    } else if (rill__pages_reserve(bytes, &g->pages)) {
        *out = g->pages.base;
    } else {
        rill__free(g);
        return RILL_ERROR_OUT_OF_MEMORY;
    }
    /* Several devices: a device's memory lives on its node, wherever the
     * thread that touches a page first runs (mbind, preferred: another
     * node's memory rather than none). */
    int node = cpu_device_of(dev)->node;
    if (node >= 0)
        (void)rill__pages_prefer_node(*out, bytes, node);
    *handle = g;
    return RILL_OK;
}

void rill__cpu_mem_free(rill__device *dev, void *ptr, size_t bytes, void *handle) {
    (void)dev;
    (void)ptr;
    (void)bytes;
    cpu_segment *g = handle;
    /* What the pool did not decommit (rill_shutdown frees segments whole). */
    uncharge(g->charged_bytes);
    if (g->shared)
        rill__shm_destroy(&g->shm);
    else
        rill__pages_release(&g->pages);
    rill__free(g);
}

rill_status rill__cpu_mem_commit(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    (void)offset;
    cpu_segment *g = handle;
    if (!charge(bytes)) {
        char what[320];
        rill__cpu_mem_describe(dev, what, sizeof what);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "the CPU devices' memory is used up: %s", what);
    }
    g->charged_bytes += bytes;
    return RILL_OK;
}

void rill__cpu_mem_decommit(rill__device *dev, void *handle, size_t offset, size_t bytes) {
    (void)dev;
    cpu_segment *g = handle;
    if (g->shared)
        rill__shm_discard(&g->shm, offset, bytes);
    else
        rill__pages_discard(&g->pages, offset, bytes);
    g->charged_bytes -= bytes;
    uncharge(bytes);
}

const rill__shm *rill__cpu_ipc_export(rill__device *dev, void *handle) {
    (void)dev;
    const cpu_segment *g = handle;
    return g->shared ? &g->shm : NULL;
}

/* Another process's memory, counted against that process's budget. */
rill__shm_map_result rill__cpu_ipc_map(rill__device *dev, const rill__shm_name *name,
                                       size_t object_bytes, size_t offset, size_t bytes, void **out,
                                       char *why, size_t why_size) {
    (void)dev;
    return rill__shm_map_range(name, object_bytes, offset, bytes, out, why, why_size);
}

void rill__cpu_ipc_unmap(rill__device *dev, void *ptr, size_t bytes) {
    (void)dev;
    rill__shm_unmap_range(ptr, bytes);
}

/* The CPU device copies with the processor, so its host memory needs no
 * pinning: rill_malloc_host is pageable memory, 256-byte aligned like a
 * device allocation, counted against the CPU devices' memory. (Locking
 * pages with mlock would cost the program its RLIMIT_MEMLOCK, 8 MiB by
 * default, for no speed on this device.) */
void *rill__cpu_host_alloc(rill__device *dev, size_t bytes) {
    if (!charge(bytes)) {
        char what[320];
        rill__cpu_mem_describe(dev, what, sizeof what);
        rill__fail(RILL_ERROR_OUT_OF_MEMORY,
                   "cannot allocate %zu bytes of host memory: the CPU devices' memory is used "
                   "up: %s; free host or device memory, or allocate less",
                   bytes, what);
        return NULL;
    }
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes) != 0) {
        uncharge(bytes);
        rill__fail(RILL_ERROR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory", bytes);
        return NULL;
    }
    return p;
}

void rill__cpu_host_free(rill__device *dev, void *ptr, size_t bytes) {
    (void)dev;
    free(ptr);
    uncharge(bytes);
}
