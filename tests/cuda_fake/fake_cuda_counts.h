/* SPDX-License-Identifier: MIT */
/* The stand-in driver's counters (fake_cuda.c), for tests and benchmarks
 * that check what rill asks of the driver: the calls of each entry point,
 * from every thread, and the GPU-side memory operations queued (stream
 * writes and waits of a word, stream memory barriers). The program finds
 * them in the library that RILL_CUDA_DRIVER names, the one rill loads:
 * fake_cuda_counters_open fills the table. */
#ifndef RILL_TEST_FAKE_CUDA_COUNTS_H
#define RILL_TEST_FAKE_CUDA_COUNTS_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct fake_cuda_counters {
    /* Calls of the entry point named ("cuLaunchKernel"), or of all of
     * them for NULL, since the last reset. */
    uint64_t (*calls)(const char *name);
    /* GPU-side memory operations queued since the last reset. */
    uint64_t (*memops)(void);
    /* The same two, of what the calling thread asked for since it reset
     * the counters. */
    uint64_t (*calls_here)(const char *name);
    uint64_t (*memops_here)(void);
    /* Sets the counters, and the calling thread's, to 0. */
    void (*reset)(void);
    /* "cuLaunchKernel 3, cuStreamWriteValue64 3; memops 3": the entry
     * points called since the last reset, for messages. */
    void (*text)(char *buf, size_t size);
} fake_cuda_counters;

/* Fills c from the stand-in driver; -1 when RILL_CUDA_DRIVER names no
 * library with the counters (the real driver, or none). */
static inline int fake_cuda_counters_open(fake_cuda_counters *c) {
    const char *path = getenv("RILL_CUDA_DRIVER");
    void *so = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (so == NULL)
        return -1;
    void *calls = dlsym(so, "fake_cuda_calls"), *memops = dlsym(so, "fake_cuda_memops");
    void *reset = dlsym(so, "fake_cuda_counts_reset"), *text = dlsym(so, "fake_cuda_counts_text");
    void *calls_here = dlsym(so, "fake_cuda_calls_here");
    void *memops_here = dlsym(so, "fake_cuda_memops_here");
    if (calls == NULL || memops == NULL || reset == NULL || text == NULL || calls_here == NULL ||
        memops_here == NULL)
        return -1;
    *(void **)&c->calls_here = calls_here;
    *(void **)&c->memops_here = memops_here;
    *(void **)&c->calls = calls;
    *(void **)&c->memops = memops;
    *(void **)&c->reset = reset;
    *(void **)&c->text = text;
    return 0;
}

#endif
