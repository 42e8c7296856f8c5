/* SPDX-License-Identifier: MIT */
/* The stand-in driver's counters (fake_cuda_counts.h): every entry point
 * counts its calls by name, and the GPU-side memory operations (stream
 * writes and waits of a word, stream memory barriers) are counted apart,
 * for tests and benchmarks of what the backend asks of the driver per
 * call. An entry point is known by its function's name (__func__, whose
 * address is the key): "fake_" and the driver's name. Each thread keeps
 * its own counts too. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define MAX_COUNTED 128
static struct {
    const char *fn; /* __func__ of the entry point */
    _Atomic uint64_t calls;
} counted[MAX_COUNTED];
/* entries [0, num_counted) are filled: stored (release) after the entry */
static _Atomic size_t num_counted;
static pthread_mutex_t counted_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t memops;

/* The calling thread's counts: calls[i] of counted[i], and memops (the
 * last slot), in a key's value (see gpu_key). Only the thread writes them. */
static pthread_key_t here_key;
static pthread_once_t here_once = PTHREAD_ONCE_INIT;

static void make_here_key(void) {
    (void)pthread_key_create(&here_key, free);
}

static uint64_t *here(void) {
    pthread_once(&here_once, make_here_key);
    uint64_t *c = pthread_getspecific(here_key);
    if (c == NULL && (c = calloc(MAX_COUNTED + 1, sizeof *c)) != NULL)
        (void)pthread_setspecific(here_key, c);
    return c;
}

void fake_count_call(const char *fn) {
    /* acquire: pairs with the release store of num_counted below. */
    size_t n = atomic_load_explicit(&num_counted, memory_order_acquire);
    uint64_t *mine = here();
    for (size_t i = 0; i < n; i++)
        if (counted[i].fn == fn) {
            atomic_fetch_add_explicit(&counted[i].calls, 1, memory_order_relaxed);
            if (mine != NULL)
                mine[i]++;
            return;
        }
    pthread_mutex_lock(&counted_lock);
    n = atomic_load_explicit(&num_counted, memory_order_relaxed);
    size_t i = 0;
    while (i < n && counted[i].fn != fn)
        i++;
    if (i == n && n < MAX_COUNTED) {
        counted[n].fn = fn;
        atomic_store_explicit(&num_counted, n + 1, memory_order_release);
    }
    if (i < MAX_COUNTED) {
        atomic_fetch_add_explicit(&counted[i].calls, 1, memory_order_relaxed);
        if (mine != NULL)
            mine[i]++;
    }
    pthread_mutex_unlock(&counted_lock);
}

/* The driver's name of a counted entry point. */
static const char *counted_name(size_t i) {
    return strncmp(counted[i].fn, "fake_", 5) == 0 ? counted[i].fn + 5 : counted[i].fn;
}

/* n GPU-side memory operations were queued. */
void fake_count_memops(uint64_t n) {
    atomic_fetch_add_explicit(&memops, n, memory_order_relaxed);
    uint64_t *mine = here();
    if (mine != NULL)
        mine[MAX_COUNTED] += n;
}

__attribute__((visibility("default"))) uint64_t fake_cuda_calls(const char *name);
uint64_t fake_cuda_calls(const char *name) {
    uint64_t total = 0;
    size_t n = atomic_load_explicit(&num_counted, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (name == NULL || strcmp(counted_name(i), name) == 0)
            total += atomic_load_explicit(&counted[i].calls, memory_order_relaxed);
    return total;
}

/* The same, of the calls the calling thread made. */
__attribute__((visibility("default"))) uint64_t fake_cuda_calls_here(const char *name);
uint64_t fake_cuda_calls_here(const char *name) {
    uint64_t total = 0, *mine = here();
    size_t n = atomic_load_explicit(&num_counted, memory_order_acquire);
    for (size_t i = 0; i < n && mine != NULL; i++)
        if (name == NULL || strcmp(counted_name(i), name) == 0)
            total += mine[i];
    return total;
}

__attribute__((visibility("default"))) uint64_t fake_cuda_memops_here(void);
uint64_t fake_cuda_memops_here(void) {
    uint64_t *mine = here();
    return mine != NULL ? mine[MAX_COUNTED] : 0;
}

__attribute__((visibility("default"))) uint64_t fake_cuda_memops(void);
uint64_t fake_cuda_memops(void) {
    return atomic_load_explicit(&memops, memory_order_relaxed);
}

__attribute__((visibility("default"))) void fake_cuda_counts_reset(void);
void fake_cuda_counts_reset(void) {
    size_t n = atomic_load_explicit(&num_counted, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        atomic_store_explicit(&counted[i].calls, 0, memory_order_relaxed);
    atomic_store_explicit(&memops, 0, memory_order_relaxed);
    uint64_t *mine = here();
    if (mine != NULL)
        memset(mine, 0, (MAX_COUNTED + 1) * sizeof *mine);
}

__attribute__((visibility("default"))) void fake_cuda_counts_text(char *buf, size_t size);
void fake_cuda_counts_text(char *buf, size_t size) {
    size_t used = 0, n = atomic_load_explicit(&num_counted, memory_order_acquire);
    if (size == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used + 1 < size; i++) {
        uint64_t c = atomic_load_explicit(&counted[i].calls, memory_order_relaxed);
        if (c == 0)
            continue;
        int k = snprintf(buf + used, size - used, "%s%s %llu", used > 0 ? ", " : "",
                         counted_name(i), (unsigned long long)c);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    if (used + 1 < size)
        snprintf(buf + used, size - used, "%smemops %llu", used > 0 ? "; " : "",
                 (unsigned long long)fake_cuda_memops());
}
