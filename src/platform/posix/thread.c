/* SPDX-License-Identifier: MIT */
/* POSIX (Linux) implementation of src/platform/thread.h: pthreads for
 * threads and mutexes, the futex system call for sleeping on a word, and
 * /proc for the processor's name. */
#include "platform/thread.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static_assert(sizeof(pthread_mutex_t) <= sizeof(((rill__mutex *)0)->opaque),
              "rill__mutex is too small for pthread_mutex_t");

static pthread_mutex_t *pm(rill__mutex *m) {
    return (pthread_mutex_t *)(void *)m->opaque;
}

/* A primitive failed with err (0: it set errno): the process is broken.
 * Says which and why on stderr, the one thing left to do, and aborts. */
static _Noreturn void broken(const char *call, int err) {
    if (err == 0)
        err = errno;
    fprintf(stderr,
            "rill: %s failed: %s; a lock or thread of rill is broken (memory corruption, or a "
            "resource limit), so the process cannot go on\n",
            call, strerror(err));
    abort();
}

void rill__mutex_init(rill__mutex *m) {
    rill__mutex_init_ranked(m, RILL__RANK_NONE);
}

void rill__mutex_init_ranked(rill__mutex *m, rill__lock_rank rank) {
#if RILL_LOCK_RANKS
    m->rank = rank;
#else
    (void)rank;
#endif
    int err = pthread_mutex_init(pm(m), NULL);
    if (err != 0)
        broken("pthread_mutex_init", err);
}

void rill__mutex_destroy(rill__mutex *m) {
    int err = pthread_mutex_destroy(pm(m));
    if (err != 0)
        broken("pthread_mutex_destroy", err);
}

RILL_HOT void rill__mutex_lock(rill__mutex *m) {
#if RILL_LOCK_RANKS
    rill__lock_rank_acquire(m, m->rank, false);
#endif
    int err = pthread_mutex_lock(pm(m));
    if (err != 0)
        broken("pthread_mutex_lock", err);
}

void rill__mutex_lock_sibling(rill__mutex *m) {
#if RILL_LOCK_RANKS
    rill__lock_rank_acquire(m, m->rank, true);
#endif
    int err = pthread_mutex_lock(pm(m));
    if (err != 0)
        broken("pthread_mutex_lock", err);
}

RILL_HOT void rill__mutex_unlock(rill__mutex *m) {
    /* The rank first: once unlocked, m may belong to another thread that
     * frees it (a stream whose last reference goes with its wait_lock). */
#if RILL_LOCK_RANKS
    rill__lock_rank_release(m, m->rank);
#endif
    int err = pthread_mutex_unlock(pm(m));
    if (err != 0)
        broken("pthread_mutex_unlock", err);
}

struct thread_start {
    void (*fn)(void *);
    void *arg;
};

static void *thread_main(void *p) {
    struct thread_start st = *(struct thread_start *)p;
    free(p);
    st.fn(st.arg);
    return NULL;
}

void rill__thread_start(rill__thread *t, const char *name, void (*fn)(void *), void *arg) {
    struct thread_start *st = malloc(sizeof *st);
    pthread_t th;
    if (st == NULL)
        broken("malloc for a new thread", ENOMEM);
    st->fn = fn;
    st->arg = arg;
    int err = pthread_create(&th, NULL, thread_main, st);
    if (err != 0)
        broken("pthread_create", err);
    pthread_setname_np(th, name);
    t->handle = (uintptr_t)th;
}

void rill__thread_join(rill__thread *t) {
    int err = pthread_join((pthread_t)t->handle, NULL);
    if (err != 0)
        broken("pthread_join", err);
}

void rill__thread_yield(void) {
    sched_yield();
}

static _Atomic uint64_t next_thread_id = 1;
static _Thread_local uint64_t tls_thread_id; /* 0 until the first call */

uint64_t rill__thread_id(void) {
    if (tls_thread_id == 0)
        /* relaxed: only uniqueness is needed, which the atomic add gives. */
        tls_thread_id = atomic_fetch_add_explicit(&next_thread_id, 1, memory_order_relaxed);
    return tls_thread_id;
}

_Static_assert(sizeof(pthread_key_t) <= sizeof(unsigned), "a key fits rill__exit_key");

void rill__exit_key_set(rill__exit_key *k, void *value) {
    if (atomic_load_explicit(&k->made, memory_order_acquire) != 2) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&k->made, &expected, 1)) {
            pthread_key_t key;
            int err = pthread_key_create(&key, k->fn);
            if (err != 0)
                broken("pthread_key_create", err);
            k->key = (unsigned)key;
            /* release: the key before made. */
            atomic_store_explicit(&k->made, 2, memory_order_release);
        } else {
            while (atomic_load_explicit(&k->made, memory_order_acquire) != 2)
                sched_yield();
        }
    }
    int err = pthread_setspecific((pthread_key_t)k->key, value);
    if (err != 0)
        broken("pthread_setspecific", err);
}

RILL_HOT uint64_t rill__thread_id_exchange(uint64_t id) {
    uint64_t old = tls_thread_id;
    tls_thread_id =
        id != 0 ? id : atomic_fetch_add_explicit(&next_thread_id, 1, memory_order_relaxed);
    return old;
}

void rill__thread_exit(void) {
    pthread_exit(NULL);
}

bool rill__fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    /* glibc ties the handlers to the calling library, and drops them when
     * it is unloaded. */
    return pthread_atfork(prepare, parent, child) == 0;
}

void rill__futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    /* EAGAIN (the word changed) and EINTR are ordinary returns. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void rill__futex_wait_for(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
    struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

void rill__futex_wake(_Atomic uint32_t *word, int count) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

void rill__spinlock_lock_slow(rill__spinlock *l) {
    for (unsigned spins = 1;; spins++) {
        /* relaxed: wait for the lock to look free before trying again. */
        if (!atomic_load_explicit(&l->held, memory_order_relaxed) &&
            !atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
        if (spins < 64)
            rill__cpu_relax();
        else
            sched_yield();
    }
}

_Atomic int rill__barrier_asymmetric;

void rill__barrier_init(void) {
    if (atomic_load(&rill__barrier_asymmetric))
        return;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
        return;
    atomic_store(&rill__barrier_asymmetric, 1);
}

void rill__barrier_heavy(void) {
    atomic_thread_fence(memory_order_seq_cst);
    /* Once registered, the command cannot fail; if it did, the light side
     * would be unprotected, so that is a broken process. */
    if (atomic_load_explicit(&rill__barrier_asymmetric, memory_order_relaxed) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        broken("membarrier", 0);
}

RILL_HOT uint64_t rill__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool rill__ticks_steady(void) {
#if defined(__x86_64__)
    static _Atomic int known; /* 0: not read yet, 1: steady, 2: not */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k == 0) {
        char source[32] = {0};
        FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
        if (f != NULL) {
            if (fgets(source, sizeof source, f) == NULL)
                source[0] = '\0';
            fclose(f);
        }
        k = strncmp(source, "tsc", 3) == 0 ? 1 : 2;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k == 1;
#else
    return false;
#endif
}

int rill__cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int rill__cpu_list(int *cpus, int cap) {
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, &set))
                continue;
            if (n < cap)
                cpus[n] = c;
            n++;
        }
    }
    if (n == 0) { /* affinity unknown: the processors online */
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (int)online : 1;
        for (int c = 0; c < n && c < cap; c++)
            cpus[c] = c;
    }
    return n;
}

int rill__cpu_node(int cpu) {
    /* cpuN/nodeM is a link to the processor's node, present on kernels
     * with NUMA support. */
    char path[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d", cpu);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    int node = -1;
    for (struct dirent *e; node < 0 && (e = readdir(dir)) != NULL;) {
        char *end;
        if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') {
            long m = strtol(e->d_name + 4, &end, 10);
            if (*end == '\0' && m >= 0 && m < INT_MAX)
                node = (int)m;
        }
    }
    closedir(dir);
    return node;
}

bool rill__thread_pin(const int *cpus, int n) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n; i++)
        if (cpus[i] >= 0 && cpus[i] < CPU_SETSIZE)
            CPU_SET(cpus[i], &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

int rill__cpu_current(void) {
    return sched_getcpu();
}

size_t rill__physical_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

void rill__cpu_model_name(char *buf, size_t size) {
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, size, "unknown processor");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || colon == NULL)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, size, "%s", colon);
        break;
    }
    fclose(f);
}
