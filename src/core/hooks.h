/* SPDX-License-Identifier: MIT */
/* What the parts of the library do at the runtime's points, without the
 * runtime naming them: each part (the core's kernels, events, interprocess
 * events, traces and queue bounds, and each layer above the core) registers
 * a subsystem, its part in the runtime's life, and the layers above install
 * the hooks they serve; src/assembly.c lists the subsystems and
 * core/device.c walks that list at initialisation, rill_shutdown and fork().
 * Hooks are installed once, under the init lock, before any is called; read
 * without a lock afterwards. */
#ifndef RILL_CORE_HOOKS_H
#define RILL_CORE_HOOKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/handle.h"
#include "rill.h"

/* ------------------------------------------------------------- subsystems */

struct rill__runtime;

/* The phases of rill_shutdown at which subsystems act, in order. In each,
 * the subsystems run from the last listed (the highest layer) to the first. */
typedef enum rill__shutdown_phase {
    RILL__SHUTDOWN_BEGIN,   /* before the devices drain: nothing new may start */
    RILL__SHUTDOWN_DRAINED, /* every stream drained once: release what holds work */
    RILL__SHUTDOWN_IDLE,    /* drained again, no retired object left; backends still run */
    RILL__SHUTDOWN_STOPPED, /* the backends stopped */
    RILL__SHUTDOWN_DEVICES, /* the devices are gone: process-wide state last */
} rill__shutdown_phase;

typedef struct rill__subsystem {
    const char *name;
    /* At the runtime's start, before its devices exist, in list order:
     * installs hooks, reads the environment. NULL when not needed. */
    void (*start)(struct rill__runtime *rt);
    /* A device is created (before its backend starts) or destroyed (after
     * its streams drained and its backend stopped). NULL when not needed. */
    rill_status (*device_init)(rill__device *dev);
    void (*device_fini)(rill__device *dev);
    /* A phase of rill_shutdown; NULL when not needed. */
    void (*shutdown)(struct rill__runtime *rt, rill__shutdown_phase phase);
    /* In a fork's child, on its only thread, in list order: forgets the
     * parent's state without locking or freeing it (rt: the parent's
     * runtime, or NULL; its lists are whole). NULL when not needed. */
    void (*fork_child)(struct rill__runtime *rt);
} rill__subsystem;

/* Every subsystem, the core's first, then lowest layer first;
 * NULL-terminated. Defined by src/assembly.c. */
extern const rill__subsystem *const rill__subsystems[];

/* ------------------------------------------------------------- memory uses */

typedef struct rill__mem_hooks {
    /* The command seq of stream touches [ptr, ptr + bytes) (declared
     * accesses, copies): the pool keeps the memory from other streams until
     * that use is done. */
    void (*note_use)(rill__stream *stream, uint64_t seq, const void *ptr, size_t bytes);
    /* Whether work of device user reaches [ptr, ptr + bytes), access
     * index of kernel `kernel`: RILL_OK, or RILL_ERROR_DEVICE_MISMATCH with
     * a sentence naming fn (rill__mem_check_reach). */
    rill_status (*check_reach)(const char *fn, const char *kernel, int index, const void *ptr,
                               size_t bytes, rill__device *user);
} rill__mem_hooks;

/* Installed by the memory layer's start. relaxed, where read and
 * written: the tables are constant data, and a call made while the
 * runtime starts may see either table. */
extern _Atomic(const rill__mem_hooks *) rill__mem;

static inline void rill__mem_note_use(rill__stream *s, uint64_t seq, const void *ptr,
                                      size_t bytes) {
    atomic_load_explicit(&rill__mem, memory_order_relaxed)->note_use(s, seq, ptr, bytes);
}

/* ----------------------------------------------------------------- capture */

typedef struct rill__capture rill__capture;

/* What the graph layer does for a capture (src/graph/capture*.c, gmem.c).
 * Rules are in rill.h; each hook's comment is at its implementation. */
typedef struct rill__capture_hooks {
    rill_status (*submit)(rill__stream *s, const rill__cmd *cmd, uint64_t *seq);
    rill_status (*event_record)(rill__event *e, rill__stream *s, bool *handled);
    rill_status (*wait_event)(rill__stream *s, rill__event *e, bool *handled);
    rill_status (*wait_stream)(rill__stream *s, rill__stream *other, bool *handled);
    rill_status (*check_stream_sync)(rill__stream *s, const char *fn);
    rill_status (*check_event_sync)(rill__event *e, const char *fn);
    rill_status (*check_device_sync)(rill__device *dev, const char *fn);
    rill_status (*check_unsafe)(const char *fn);
    rill_status (*check_free)(void *ptr, const char *fn);
    rill_status (*malloc)(rill__stream *s, size_t bytes, void **out);
    rill_status (*free)(rill__stream *s, void *ptr, bool *handled);
    void (*stream_destroyed)(rill__stream *s);
} rill__capture_hooks;

/* Installed by the graph layer's start (relaxed, as rill__mem). */
extern _Atomic(const rill__capture_hooks *) rill__capture_ops;

static inline const rill__capture_hooks *rill__capture_hooks_now(void) {
    return atomic_load_explicit(&rill__capture_ops, memory_order_relaxed);
}
/* How many captures are active, in any thread (the graph layer counts). */
extern _Atomic int rill__captures_active;

/* rill__stream_submit's detour for a capturing stream: the command
 * becomes a node; *seq receives 0. */
static inline rill_status rill__capture_submit(rill__stream *s, const rill__cmd *cmd,
                                               uint64_t *seq) {
    return rill__capture_hooks_now()->submit(s, cmd, seq);
}
/* Event record and waits on capturing streams, or on events recorded in a
 * capture. *handled is false when the call is none of the capture's
 * business and must go on as usual. */
static inline rill_status rill__capture_event_record(rill__event *e, rill__stream *s,
                                                     bool *handled) {
    return rill__capture_hooks_now()->event_record(e, s, handled);
}
static inline rill_status rill__capture_wait_event(rill__stream *s, rill__event *e, bool *handled) {
    return rill__capture_hooks_now()->wait_event(s, e, handled);
}
static inline rill_status rill__capture_wait_stream(rill__stream *s, rill__stream *other,
                                                    bool *handled) {
    return rill__capture_hooks_now()->wait_stream(s, other, handled);
}
/* Synchronizing or querying a capturing stream, an event recorded in an
 * active capture, or a device with an active capture: RILL_ERROR_CAPTURE_
 * UNSUPPORTED (the capture is invalidated), else RILL_OK. */
static inline rill_status rill__capture_check_stream_sync(rill__stream *s, const char *fn) {
    return rill__capture_hooks_now()->check_stream_sync(s, fn);
}
static inline rill_status rill__capture_check_event_sync(rill__event *e, const char *fn) {
    return rill__capture_hooks_now()->check_event_sync(e, fn);
}
static inline rill_status rill__capture_check_device_sync(rill__device *dev, const char *fn) {
    return rill__capture_hooks_now()->check_device_sync(dev, fn);
}
/* An unsafe call (rill_malloc, rill_memcpy, rill_ipc_open_mem_handle): RILL_OK
 * when the calling thread may make it (it then runs at once, uncaptured),
 * else RILL_ERROR_CAPTURE_UNSUPPORTED and the captures that forbid it are
 * invalidated. */
static inline rill_status rill__capture_check_unsafe(const char *fn) {
    return rill__capture_hooks_now()->check_unsafe(fn);
}
/* rill_free / rill_free_async of ptr: the same check, for the captures that
 * use the allocation, and a refusal for memory that a graph owns. */
static inline rill_status rill__capture_check_free(void *ptr, const char *fn) {
    return rill__capture_hooks_now()->check_free(ptr, fn);
}
/* rill_malloc_async / rill_free_async on a capturing stream: served from
 * the capture's private pool. */
static inline rill_status rill__capture_malloc(rill__stream *s, size_t bytes, void **out) {
    return rill__capture_hooks_now()->malloc(s, bytes, out);
}
static inline rill_status rill__capture_free(rill__stream *s, void *ptr, bool *handled) {
    return rill__capture_hooks_now()->free(s, ptr, handled);
}
/* rill_stream_destroy of s (its owner_released already set): when s is
 * the origin of a capture, the capture is discarded; when s was forked
 * into one, the capture is invalidated. Call with no lock held. */
static inline void rill__capture_stream_destroyed(rill__stream *s) {
    rill__capture_hooks_now()->stream_destroyed(s);
}

/* -------------------------------------------------------------- sanitizer */

/* What the stream sanitizer (src/sanitizer) learns from the core, the memory
 * layer and graphs: commands with the memory they touch, the orders that
 * waits and host synchronisation make, frees. Each call site first tests
 * rill__san_on (one relaxed load and a branch that predicts "off"), so an
 * unused sanitizer costs nothing more. */
enum rill__san_flags {
    RILL__SAN_HOST = 1u << 0 /* a synchronous host call (rill_memcpy) */
};

typedef struct rill__san_hooks {
    /* The command seq of s was submitted: its accesses are checked against
     * other streams' and remembered. */
    void (*command)(rill__stream *s, uint64_t seq, const rill__cmd *cmd, unsigned flags);
    /* The work submitted to s from now on is ordered after other's command
     * seq (stream waits, event waits, the pool's internal waits); all: seq
     * is all of other's work so far (rill_stream_wait_stream), so the waits
     * other made since its last command count too. */
    void (*order)(rill__stream *s, rill__stream *other, uint64_t seq, bool all);
    /* e was recorded on s (outside captures; e->lock held), s waited for
     * e's record, the host saw e's record complete: events carry the
     * order of their record, waits that came right before it included. */
    void (*event_record)(rill__event *e, rill__stream *s, uint64_t seq);
    void (*event_wait)(rill__stream *s, rill__event *e);
    void (*event_observed)(rill__event *e);
    /* The host saw s complete seq (synchronize, a query that found it
     * done): what follows on any thread is ordered after it; all: as for
     * order. */
    void (*observed)(rill__stream *s, uint64_t seq, bool all);
    /* rill_device_synchronize of dev returned. */
    void (*observed_device)(rill__device *dev);
    /* ptr, an allocation of a device's pool, is about to be freed on
     * stream (NULL: at the end of its allocation stream's work). */
    void (*free)(const void *ptr, rill__stream *stream);
    /* rill_record_stream(ptr, stream) succeeded. */
    void (*record_stream)(const void *ptr, rill__stream *stream);
    /* The command seq of s stands for work done elsewhere (a collective's
     * WAIT) that touches acc (n accesses, which the memory pool tracks):
     * checked and remembered as a kernel's declared accesses are. what
     * names the work in reports. */
    void (*touches)(rill__stream *s, uint64_t seq, const rill_access *acc, size_t n,
                    const char *what);
} rill__san_hooks;

/* Installed by the sanitizer's start (relaxed, as rill__mem). */
extern _Atomic(const rill__san_hooks *) rill__san_ops;
/* Non-zero while the sanitizer is on (rill_sanitizer_enable). */
extern _Atomic int rill__san_on;

static inline bool rill__san_active(void) {
    return __builtin_expect(atomic_load_explicit(&rill__san_on, memory_order_relaxed) != 0, 0);
}
static inline const rill__san_hooks *rill__san(void) {
    return atomic_load_explicit(&rill__san_ops, memory_order_relaxed);
}

#endif
