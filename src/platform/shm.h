/* SPDX-License-Identifier: MIT */
/* The platform layer's shared memory: memory objects that another process
 * of the same user on the same machine can map, futex waits on words in
 * such memory, and facts about other processes. With thread.h, the only
 * place that knows the operating system (src/platform/<os>/shm.c). */

/* A shared object is named by (pid, fd, inode): the creating process
 * keeps the descriptor open for the object's life, and another process
 * opens it again through /proc/<pid>/fd/<fd>, checking the inode so that
 * a descriptor number reused for another file is never mistaken for it.
 * The object's size is sealed, so a mapping can never run past its end.
 *
 * Functions that can fail because of the environment return false (or
 * what kind of failure it was) and write a short reason ("open
 * /proc/12/fd/5: No such file or directory") into why; they never abort. */
#ifndef RILL_PLATFORM_SHM_H
#define RILL_PLATFORM_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A shared memory object created by this process and mapped here. */
typedef struct rill__shm {
    int fd;         /* owned: kept open so that other processes can reach it */
    uint64_t inode; /* identifies the object for as long as it exists */
    void *base;     /* owned: the mapping, bytes long */
    size_t bytes;
} rill__shm;

/* What another process needs to map a rill__shm. */
typedef struct rill__shm_name {
    int32_t pid;
    int32_t fd;
    uint64_t inode;
} rill__shm_name;

/* Creates an object of bytes (a multiple of the page size) filled with
 * zeros and maps it read-write. label names it for debuggers. The object
 * is sparse: a page takes memory when first touched. */
bool rill__shm_create(const char *label, size_t bytes, rill__shm *out, char *why, size_t why_size);
/* Unmaps and closes an object from rill__shm_create. */
void rill__shm_destroy(rill__shm *shm);
/* Frees the memory of the whole pages inside [offset, offset + bytes) of
 * shm, in every process that maps it; they read as zeros afterwards. */
void rill__shm_discard(const rill__shm *shm, size_t offset, size_t bytes);

/* Address space of this process alone whose pages take memory when first
 * touched (not charged to the commit limit): what a segment is when no
 * shared object can be made. */
typedef struct rill__pages {
    void *base; /* owned */
    size_t bytes;
} rill__pages;

bool rill__pages_reserve(size_t bytes, rill__pages *out);
void rill__pages_release(rill__pages *pages);
/* As rill__shm_discard. */
void rill__pages_discard(const rill__pages *pages, size_t offset, size_t bytes);
/* This process's name for shm. */
void rill__shm_name_of(const rill__shm *shm, rill__shm_name *out);

/* Asks the kernel to place the pages of [addr, addr + bytes) (page
 * aligned) on NUMA node node when they are first touched, and on others
 * only when it has no memory left (mbind, MPOL_PREFERRED); false when the
 * system refuses (no NUMA support). rill__pages_node tells the node a
 * range prefers: -1 when none. */
bool rill__pages_prefer_node(void *addr, size_t bytes, int node);
int rill__pages_node(void *addr);

typedef enum rill__shm_map_result {
    RILL__SHM_MAPPED = 0,
    RILL__SHM_UNREACHABLE, /* the object cannot be opened (gone, another user's) or is not it */
    RILL__SHM_NO_ROOM      /* this process is out of descriptors, mappings or address space */
} rill__shm_map_result;

/* Maps [offset, offset + bytes) of the object name refers to, which must be
 * object_bytes long, and returns the address of offset in *out. The mapping
 * covers whole pages; rill__shm_unmap_range undoes it given the same
 * address and bytes. Works for objects of this process as well (a second
 * mapping of the same memory). On failure, says whose it is and writes
 * why. */
rill__shm_map_result rill__shm_map_range(const rill__shm_name *name, size_t object_bytes,
                                         size_t offset, size_t bytes, void **out, char *why,
                                         size_t why_size);
void rill__shm_unmap_range(void *p, size_t bytes);

/* Sleeps until one of words[i] differs from expected[i] or is woken, at
 * most timeout_ns; the words may lie in memory shared with other
 * processes, which may wake them (a spurious return is allowed). On
 * kernels without futex_waitv (Linux < 5.16) it sleeps on words[0] only,
 * for at most a millisecond when n > 1. n is at most RILL__FUTEX_WAIT_MAX. */
#define RILL__FUTEX_WAIT_MAX 64
void rill__futex_wait_any(_Atomic uint32_t *const *words, const uint32_t *expected, size_t n,
                          uint64_t timeout_ns);
/* Wakes every thread of every process sleeping on word. */
void rill__futex_wake_shared(_Atomic uint32_t *word);

/* This process's id. */
int32_t rill__process_id(void);
/* When the process started, in the clock ticks since boot that the
 * operating system reports (0 when it does not exist); with the pid it
 * names a process even after the pid is reused. */
uint64_t rill__process_start_time(int32_t pid);
/* True while process pid, started at start_time, has not exited. */
bool rill__process_alive(int32_t pid, uint64_t start_time);

#endif
