/* SPDX-License-Identifier: MIT */
/* The platform layer: threads, mutexes, futex-style waits, clocks and
 * machine facts. This header and src/platform/<os>/ are the only places
 * that know the operating system; the build picks the implementation.
 *
 * Contract (as in libuv): a failing mutex or thread primitive is a broken
 * process, not a caller mistake, so these functions abort on failure. */
#ifndef RILL_PLATFORM_THREAD_H
#define RILL_PLATFORM_THREAD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Large enough for pthread_mutex_t on every supported platform; the
 * implementation checks the size with a static assertion. */
typedef struct rill__mutex {
    _Alignas(8) unsigned char opaque[48];
} rill__mutex;

typedef struct rill__thread {
    uintptr_t handle;
} rill__thread;

void rill__mutex_init(rill__mutex *m);
void rill__mutex_destroy(rill__mutex *m);
void rill__mutex_lock(rill__mutex *m);
void rill__mutex_unlock(rill__mutex *m);

/* Starts fn(arg) on a new thread named `name` (for debuggers and perf). */
void rill__thread_start(rill__thread *t, const char *name, void (*fn)(void *), void *arg);
void rill__thread_join(rill__thread *t);
void rill__thread_yield(void);

/* Sleeps while *word == expected (a spurious return is allowed). */
void rill__futex_wait(_Atomic uint32_t *word, uint32_t expected);
/* Wakes up to `count` threads sleeping on word (INT32_MAX for all). */
void rill__futex_wake(_Atomic uint32_t *word, int count);

/* A pause hint for spin loops. */
static inline void rill__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Monotonic time in nanoseconds. */
uint64_t rill__now_ns(void);
/* Processors this process may run on (at least 1). */
int rill__cpu_count(void);
/* Physical memory in bytes. */
size_t rill__physical_memory_bytes(void);
/* The processor's model name, or "unknown processor". */
void rill__cpu_model_name(char *buf, size_t size);

#endif
