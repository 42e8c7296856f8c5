/* SPDX-License-Identifier: MIT */
/* Linux implementation of src/platform/shm.h: memfd objects sealed against
 * resizing, reopened by other processes through /proc/<pid>/fd, futexes
 * without FUTEX_PRIVATE_FLAG (they work across processes on MAP_SHARED
 * memory), and /proc/<pid>/stat for whether a process still runs.
 *
 * Why memfd and /proc rather than shm_open names: a memfd has no name in
 * a global namespace, so nothing is left behind in /dev/shm when a
 * process crashes, and its memory goes back to the system when the last
 * descriptor and mapping are gone. Opening /proc/<pid>/fd/<fd> needs the
 * same access as reading the process's memory maps (the same user, and a
 * process that is not marked undumpable). */
#include "platform/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static size_t page_bytes(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

bool rill__shm_create(const char *label, size_t bytes, rill__shm *out, char *why, size_t why_size) {
    int fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        snprintf(why, why_size, "memfd_create: %s", strerror(errno));
        return false;
    }
    struct stat st;
    if (ftruncate(fd, (off_t)bytes) != 0 || fstat(fd, &st) != 0) {
        snprintf(why, why_size, "ftruncate of a memfd to %zu bytes: %s", bytes, strerror(errno));
        close(fd);
        return false;
    }
    /* Sealed: no process can shrink the object under another's mapping
     * (which would turn accesses into SIGBUS). */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        snprintf(why, why_size, "sealing a memfd: %s", strerror(errno));
        close(fd);
        return false;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        snprintf(why, why_size, "mmap of %zu shared bytes: %s", bytes, strerror(errno));
        close(fd);
        return false;
    }
    out->fd = fd;
    out->inode = (uint64_t)st.st_ino;
    out->base = p;
    out->bytes = bytes;
    return true;
}

void rill__shm_destroy(rill__shm *shm) {
    munmap(shm->base, shm->bytes);
    close(shm->fd);
    shm->base = NULL;
    shm->fd = -1;
}

/* The whole pages inside [offset, offset + bytes): *first and *len. */
static bool inner_pages(size_t offset, size_t bytes, size_t *first, size_t *len) {
    size_t page = page_bytes();
    size_t lo = (offset + page - 1) & ~(page - 1);
    size_t hi = (offset + bytes) & ~(page - 1);
    if (hi <= lo)
        return false;
    *first = lo;
    *len = hi - lo;
    return true;
}

void rill__shm_discard(const rill__shm *shm, size_t offset, size_t bytes) {
    size_t first, len;
    /* A hole in the object frees its memory for every process mapping it
     * (madvise would only drop this process's page table entries). Failure
     * leaves the memory in use, which is harmless. */
    if (inner_pages(offset, bytes, &first, &len))
        (void)fallocate(shm->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)first,
                        (off_t)len);
}

bool rill__pages_reserve(size_t bytes, rill__pages *out) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return false;
    out->base = p;
    out->bytes = bytes;
    return true;
}

void rill__pages_release(rill__pages *pages) {
    munmap(pages->base, pages->bytes);
    pages->base = NULL;
}

void rill__pages_discard(const rill__pages *pages, size_t offset, size_t bytes) {
    size_t first, len;
    if (inner_pages(offset, bytes, &first, &len))
        (void)madvise((char *)pages->base + first, len, MADV_DONTNEED);
}

void rill__shm_name_of(const rill__shm *shm, rill__shm_name *out) {
    out->pid = (int32_t)getpid();
    out->fd = shm->fd;
    out->inode = shm->inode;
}

/* Whether a failure with err is this process's lack of resources rather
 * than something about the object. */
static rill__shm_map_result failure_of(int err) {
    return err == EMFILE || err == ENFILE || err == ENOMEM ? RILL__SHM_NO_ROOM
                                                           : RILL__SHM_UNREACHABLE;
}

rill__shm_map_result rill__shm_map_range(const rill__shm_name *name, size_t object_bytes,
                                         size_t offset, size_t bytes, void **out, char *why,
                                         size_t why_size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)name->pid, (int)name->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_size, "open %s: %s", path, strerror(err));
        return failure_of(err);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        snprintf(why, why_size, "fstat %s: %s", path, strerror(err));
        close(fd);
        return failure_of(err);
    }
    if ((uint64_t)st.st_ino != name->inode || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != (uint64_t)object_bytes) {
        snprintf(why, why_size,
                 "%s is no longer the shared object that was exported (inode %llu of %lld "
                 "bytes, expected inode %llu of %zu bytes)",
                 path, (unsigned long long)st.st_ino, (long long)st.st_size,
                 (unsigned long long)name->inode, object_bytes);
        close(fd);
        return RILL__SHM_UNREACHABLE;
    }
    size_t page = page_bytes();
    size_t first = offset & ~(page - 1);
    size_t len = (offset - first + bytes + page - 1) & ~(page - 1);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)first);
    int err = errno;
    close(fd); /* the mapping keeps the object alive */
    if (p == MAP_FAILED) {
        snprintf(why, why_size, "mmap of %zu bytes of %s: %s", len, path, strerror(err));
        return failure_of(err);
    }
    *out = (char *)p + (offset - first);
    return RILL__SHM_MAPPED;
}

void rill__shm_unmap_range(void *p, size_t bytes) {
    size_t page = page_bytes();
    uintptr_t a = (uintptr_t)p;
    uintptr_t first = a & ~(uintptr_t)(page - 1);
    size_t len = (a - first + bytes + page - 1) & ~(page - 1);
    munmap((void *)first, len);
}

void rill__futex_wait_any(_Atomic uint32_t *const *words, const uint32_t *expected, size_t n,
                          uint64_t timeout_ns) {
    /* EAGAIN (a word changed), EINTR and ETIMEDOUT are ordinary returns. */
    struct futex_waitv w[RILL__FUTEX_WAIT_MAX];
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t until = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + timeout_ns;
    struct timespec abs = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
    for (size_t i = 0; i < n; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].val = expected[i];
        w[i].uaddr = (uint64_t)(uintptr_t)words[i];
        w[i].flags = FUTEX_32; /* not private: other processes wake it */
    }
    if (syscall(SYS_futex_waitv, w, (unsigned)n, 0u, &abs, CLOCK_MONOTONIC) >= 0 || errno != ENOSYS)
        return;
    uint64_t rel = n > 1 && timeout_ns > 1000000u ? 1000000u : timeout_ns;
    struct timespec ts = {(time_t)(rel / 1000000000u), (long)(rel % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)words[0], FUTEX_WAIT, expected[0], &ts, NULL, 0);
}

void rill__futex_wake_shared(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int32_t rill__process_id(void) {
    return (int32_t)getpid();
}

/* Reads the state letter and start time of pid from /proc/<pid>/stat. */
static bool read_stat(int32_t pid, char *state, uint64_t *start_time) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses,
     * so fields are counted from the last ')'. The start time is field
     * 22, the 20th after the state. */
    char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ')
        return false;
    p += 2;
    *state = *p;
    for (int field = 0; field < 19; field++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return false;
        p++;
    }
    *start_time = strtoull(p, NULL, 10);
    return true;
}

uint64_t rill__process_start_time(int32_t pid) {
    char state;
    uint64_t t;
    return read_stat(pid, &state, &t) ? t : 0;
}

bool rill__process_alive(int32_t pid, uint64_t start_time) {
    char state;
    uint64_t t;
    if (!read_stat(pid, &state, &t))
        return false;
    /* A zombie has exited; a different start time is another process. */
    return state != 'Z' && state != 'X' && t == start_time;
}

bool rill__pages_prefer_node(void *addr, size_t bytes, int node) {
    if (node < 0 || node >= 1024)
        return false;
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    /* The system call itself: libnuma's mbind is a wrapper of it. */
    return syscall(SYS_mbind, addr, bytes, MPOL_PREFERRED, mask, (unsigned long)1024, 0u) == 0;
}

int rill__pages_node(void *addr) {
    int mode = -1;
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
    if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)1024, addr, MPOL_F_ADDR) != 0 ||
        mode != MPOL_PREFERRED)
        return -1;
    for (int node = 0; node < 1024; node++)
        if (mask[node / (8 * sizeof(unsigned long))] >> (node % (8 * sizeof(unsigned long))) & 1)
            return node;
    return -1;
}
