/* SPDX-License-Identifier: MIT */
/* The platform layer: threads, mutexes, futex-style waits, clocks and
 * machine facts. This header and src/platform/<os>/ are the only places
 * that know the operating system; the build picks the implementation.
 *
 * Contract (as in libuv): a failing mutex or thread primitive is a broken
 * process, not a caller mistake, so these functions abort on failure,
 * after one line on stderr that names the primitive and its error (the
 * only thing rill prints unasked: there is no caller to tell). */
#ifndef RILL_PLATFORM_THREAD_H
#define RILL_PLATFORM_THREAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/lock_rank.h"

/* Marks a function on the path of a launch, record and synchronize: the
 * compiler places these together (GCC: in .text.hot), so that the
 * path spans a few pages of code instead of one per source file. After a
 * pause the processor's caches and TLB hold other programs' lines, and a
 * launch then pays a miss per page and line it touches. */
#if defined(__GNUC__)
#define RILL_HOT __attribute__((hot))
#else
#define RILL_HOT
#endif

/* Large enough for pthread_mutex_t on every supported platform; the
 * implementation checks the size with a static assertion. */
typedef struct rill__mutex {
    _Alignas(8) unsigned char opaque[48];
#if RILL_LOCK_RANKS
    rill__lock_rank rank; /* platform/lock_rank.h; debug builds only */
#endif
} rill__mutex;

typedef struct rill__thread {
    uintptr_t handle;
} rill__thread;

/* A mutex of rank NONE (unchecked), or of rank (platform/lock_rank.h). */
void rill__mutex_init(rill__mutex *m);
void rill__mutex_init_ranked(rill__mutex *m, rill__lock_rank rank);
void rill__mutex_destroy(rill__mutex *m);
void rill__mutex_lock(rill__mutex *m);
/* Takes m while the thread holds a sibling of its rank (lock_rank.h). */
void rill__mutex_lock_sibling(rill__mutex *m);
void rill__mutex_unlock(rill__mutex *m);

/* Starts fn(arg) on a new thread named `name` (for debuggers and perf). */
void rill__thread_start(rill__thread *t, const char *name, void (*fn)(void *), void *arg);
void rill__thread_join(rill__thread *t);
void rill__thread_yield(void);
/* A number naming the calling thread, handed out from a process-wide
 * counter on the thread's first call: never 0, and never reused, unlike
 * the address of a thread-local variable or a pthread_t, which a thread
 * started after another exits may inherit. */
uint64_t rill__thread_id(void);
/* Gives the calling thread the number id (0: a fresh one, as rill__thread_id
 * hands out) and returns the number it had (0 when it had none yet): a host
 * thread that runs work as a worker would takes a number of its own for
 * that time, and then its own back. */
uint64_t rill__thread_id_exchange(uint64_t id);

/* Ends the calling thread (the last one ends the process, as if it
 * returned 0 from main). */
_Noreturn void rill__thread_exit(void);

/* A per-thread value with a destructor: a thread that set a non-NULL value
 * runs fn(value) when it exits. Zero-initialised; the key is made on the
 * first set. */
typedef struct rill__exit_key {
    void (*fn)(void *); /* set before the first use */
    _Atomic int made;   /* 0: not yet, 1: being made, 2: made */
    unsigned key;
} rill__exit_key;
void rill__exit_key_set(rill__exit_key *k, void *value);

/* Registers handlers that fork() runs: prepare on the forking thread
 * before the fork, parent in the parent after it, child in the child (whose
 * only thread is the one that forked) after it. Handlers registered by a
 * shared library go away when it is unloaded. Returns false when they
 * could not be registered (out of memory). */
bool rill__fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* Sleeps while *word == expected (a spurious return is allowed). */
void rill__futex_wait(_Atomic uint32_t *word, uint32_t expected);
/* The same, returning after at most timeout_ns as well. */
void rill__futex_wait_for(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns);
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

/* A spin lock for short critical sections that are rarely contended (a
 * stream's submit path): one atomic exchange to take it, a plain release
 * store to drop it. Spins, then yields to a preempted holder. */
typedef struct rill__spinlock {
    _Atomic int held;
#if RILL_LOCK_RANKS
    rill__lock_rank rank; /* platform/lock_rank.h; debug builds only */
#endif
} rill__spinlock;

/* A zeroed spin lock is free and of rank NONE; these give it a rank, as an
 * initialiser of a static one and on a live one that no thread holds. */
#if RILL_LOCK_RANKS
#define RILL__SPINLOCK_RANKED(r)                                                                   \
    { .rank = (r) }
#else
#define RILL__SPINLOCK_RANKED(r)                                                                   \
    { 0 }
#endif
static inline void rill__spinlock_init(rill__spinlock *l, rill__lock_rank rank) {
    atomic_init(&l->held, 0);
#if RILL_LOCK_RANKS
    l->rank = rank;
#else
    (void)rank;
#endif
}

void rill__spinlock_lock_slow(rill__spinlock *l);

static inline void rill__spinlock_lock(rill__spinlock *l) {
#if RILL_LOCK_RANKS
    rill__lock_rank_acquire(l, l->rank, false);
#endif
    /* acquire: pairs with the release store in rill__spinlock_unlock. */
    if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        return;
    rill__spinlock_lock_slow(l);
}

static inline void rill__spinlock_unlock(rill__spinlock *l) {
    /* The rank first: once released, l may be freed by its next holder. */
#if RILL_LOCK_RANKS
    rill__lock_rank_release(l, l->rank);
#endif
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

/* Asymmetric barriers (Dekker pairs whose one side is hot and the other
 * rare): the hot side calls rill__barrier_light, a compiler barrier when
 * the process can use membarrier(2), a full fence otherwise; the rare side
 * calls rill__barrier_heavy, which makes every running thread of the
 * process execute a full barrier. Either way, a store before a light
 * barrier and a load after it pair with a store before a heavy barrier
 * and a load after it as two full fences would. The heavy side costs
 * microseconds (tens on some virtual machines, bench_primitives p2): only
 * for sides that are rare and off the way between idle and busy (the
 * thread cache's steal, src/mem/tcache.c). */
extern _Atomic int rill__barrier_asymmetric;
/* Enables the asymmetric mode when the kernel supports it (idempotent). */
void rill__barrier_init(void);
void rill__barrier_heavy(void);

static inline void rill__barrier_light(void) {
    /* relaxed: the flag only changes before any pair uses it. */
    if (atomic_load_explicit(&rill__barrier_asymmetric, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* Monotonic time in nanoseconds. */
uint64_t rill__now_ns(void);
/* A timestamp counter cheaper than rill__now_ns (a few nanoseconds, not
 * tens): the processor's time-stamp counter on x86-64, which only counts
 * steadily and alike on every processor when the kernel keeps time with it
 * (rill__ticks_steady); elsewhere rill__now_ns. Ticks become nanoseconds
 * by calibration against rill__now_ns (src/trace/trace.c). */
static inline uint64_t rill__ticks(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return rill__now_ns();
#endif
}
/* True when rill__ticks is steady and agrees across processors: x86-64
 * with the kernel's clock source "tsc" (read once). */
bool rill__ticks_steady(void);
/* Processors this process may run on (at least 1). */
int rill__cpu_count(void);
/* The numbers of the processors this process may run on, ascending, into
 * cpus (cap entries at most); returns how many there are (at least 1). */
int rill__cpu_list(int *cpus, int cap);
/* The NUMA node of processor cpu, from /sys/devices/system/cpu; -1 when
 * the system does not say (no NUMA information). */
int rill__cpu_node(int cpu);
/* Lets the calling thread run only on the n processors of cpus; false
 * (the thread runs where it did) when the system refuses. */
bool rill__thread_pin(const int *cpus, int n);
/* The processor the calling thread runs on now (-1 when unknown). */
int rill__cpu_current(void);
/* Physical memory in bytes. */
size_t rill__physical_memory_bytes(void);
/* The processor's model name, or "unknown processor". */
void rill__cpu_model_name(char *buf, size_t size);

#endif
