/* SPDX-License-Identifier: MIT */
/* The runtime and its devices: initialisation on first use, the devices
 * of each backend src/assembly.c lists, in that order, the calling
 * thread's current device and streams, rill_shutdown and fork()
 * (device_query.c: the calls that list the devices; device_sync.c: waits
 * for a device).
 *
 * Thread-local state carries the runtime's epoch: after rill_shutdown and a
 * new initialisation, stale per-thread pointers are recognised and reset. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "core/hooks.h"
#include "core/kernel.h"
#include "core/queue_limit.h"
#include "core/stream.h"
#include "core/trace_api.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/status.h"

/* The runtime every call finds (NULL before the first call and from the
 * start of rill_shutdown), and the one rill_shutdown is releasing: its own
 * thread, and the workers that finish the work it waits for, go on with
 * that one; other threads wait for the init lock and build a fresh one. */
_Atomic(rill__runtime *) rill__runtime_up;
static _Atomic(rill__runtime *) dying;
static rill__runtime runtime_storage;
static _Atomic uint64_t next_epoch = 1;
static _Atomic uint64_t shutdowns_begun; /* rill__shutdown_count */
/* The init lock serialises initialisation, rill_shutdown and fork(): a
 * futex word that needs no initialiser, so it works before anything else.
 * LOCK_BUILDING is set while the holder builds a runtime: a rill_shutdown
 * that finds it comes before that runtime, and returns at once. */
enum { LOCK_HELD = 1u, LOCK_WAITERS = 2u, LOCK_BUILDING = 4u };
static _Atomic uint32_t init_lock;

typedef struct thread_state {
    uint64_t epoch;
    rill__device *device;
    rill__stream *current[RILL__MAX_DEVICES];
    int is_worker;
    int in_shutdown; /* the thread runs rill_shutdown */
} thread_state;

static _Thread_local thread_state tls;

_Thread_local rill_capture_mode rill__thread_capture_mode = RILL_CAPTURE_GLOBAL;

/* A host thread's own state while it runs work as a worker would
 * (rill__thread_enter_worker). */
typedef struct host_state {
    thread_state tls;
    rill_capture_mode mode;
    const char *op_name;
    uint64_t thread_id;
    int saved_errno;
    char error[RILL__LAST_ERROR_BYTES];
} host_state;

static _Thread_local host_state host_saved;

/* fork(): see the section at the end of this file. */
_Atomic uint32_t rill__fork_count;
static bool fork_handlers_registered; /* guarded by the init lock */
static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

static thread_state *thread_get(rill__runtime *rt) {
    if (tls.epoch != rt->epoch) {
        memset(tls.current, 0, sizeof tls.current);
        tls.device = rt->initial_device;
        tls.epoch = rt->epoch;
    }
    return &tls;
}

/* Takes the init lock; with for_shutdown, returns false instead (lock not
 * taken) once the holder is building a runtime. */
static bool lock_init_unless_building(bool for_shutdown) {
    rill__lock_rank_acquire(&init_lock, RILL__RANK_INIT, false);
    for (;;) {
        uint32_t v = atomic_load(&init_lock);
        if (for_shutdown && (v & LOCK_BUILDING)) {
            rill__lock_rank_release(&init_lock, RILL__RANK_INIT);
            return false;
        }
        if (!(v & LOCK_HELD)) {
            /* A waiter keeps LOCK_WAITERS set: others may still sleep. */
            uint32_t held = v == 0 ? LOCK_HELD : LOCK_HELD | LOCK_WAITERS;
            if (atomic_compare_exchange_weak(&init_lock, &v, held))
                return true;
            continue;
        }
        if (!(v & LOCK_WAITERS) && !atomic_compare_exchange_weak(&init_lock, &v, v | LOCK_WAITERS))
            continue;
        rill__futex_wait(&init_lock, v | LOCK_WAITERS);
    }
}

static void lock_init(void) {
    lock_init_unless_building(false);
}

/* Marks the holder as building a runtime and wakes sleeping shutdowns. */
static void lock_init_building(void) {
    if (atomic_fetch_or(&init_lock, LOCK_BUILDING) & LOCK_WAITERS)
        rill__futex_wake(&init_lock, INT32_MAX);
}

static void unlock_init(void) {
    if (atomic_exchange(&init_lock, 0) & LOCK_WAITERS)
        rill__futex_wake(&init_lock, INT32_MAX);
    rill__lock_rank_release(&init_lock, RILL__RANK_INIT);
}

/* Reads RILL_DEVICE and picks the initial current device. */
static void choose_initial_device(rill__runtime *rt) {
    const char *env = getenv("RILL_DEVICE");
    rt->initial_device = rt->num_devices > 0 ? rt->devices[0] : NULL;
    if (env == NULL || env[0] == '\0')
        return;
    /* NAME or NAME:N, NAME a backend's kind name */
    const char *colon = strchr(env, ':');
    size_t len = colon != NULL ? (size_t)(colon - env) : strlen(env);
    const rill__backend_ops *ops = rill__backend_named(env, len);
    rill_device_kind kind = ops != NULL ? ops->kind : 0;
    long index = 0;
    char *end = NULL;
    if (colon != NULL)
        index = strtol(colon + 1, &end, 10);
    if (end == colon + 1)
        kind = 0; /* "cpu:" */
    int seen = 0;
    for (int i = 0; kind != 0 && (end == NULL || *end == '\0') && i < rt->num_devices; i++) {
        if (rt->devices[i]->base.info.kind == kind && seen++ == index) {
            rt->initial_device = rt->devices[i];
            return;
        }
    }
    rt->initial_device = NULL;
    char names[128];
    rill__backend_names(names, sizeof names);
    snprintf(rt->init_error, sizeof rt->init_error,
             "RILL_DEVICE='%s' names no device here (this process has %d device(s); use NAME:N "
             "with NAME one of %s, see `rill info`)",
             env, rt->num_devices, names);
}

/* How many subsystems the assembly lists. */
static int subsystem_count(void) {
    int n = 0;
    while (rill__subsystems[n] != NULL)
        n++;
    return n;
}

/* Runs a phase of rill_shutdown in every subsystem, the highest layer first (a
 * layer's state may hold the layers below it; the core's parts come last). */
static void shutdown_phase(rill__runtime *rt, rill__shutdown_phase phase) {
    for (int i = subsystem_count(); i-- > 0;)
        if (rill__subsystems[i]->shutdown != NULL)
            rill__subsystems[i]->shutdown(rt, phase);
}

static rill_status device_create(rill__runtime *rt, const rill__backend_ops *ops, int index) {
    rill__device *dev = rill__calloc(1, sizeof *dev);
    if (dev == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a device");
    dev->ops = ops;
    dev->magic = RILL__MAGIC_DEVICE;
    dev->base.info.ordinal = rt->num_devices;
    if (!rill__handle_open(RILL__HANDLE_DEVICE, dev, (void **)&dev->handle)) {
        rill__free(dev);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of memory creating a device");
    }
    rill__mutex_init_ranked(&dev->lock, RILL__RANK_DEVICE);
    rill_status st = RILL_OK;
    int inited = 0; /* subsystems whose device_init succeeded */
    for (; rill__subsystems[inited] != NULL && st == RILL_OK; inited++)
        if (rill__subsystems[inited]->device_init != NULL)
            st = rill__subsystems[inited]->device_init(dev);
    if (st != RILL_OK) {
        inited--; /* the one that failed has nothing to undo */
        goto fail_subsystems;
    }
    st = ops->device_init(dev, index);
    if (st != RILL_OK)
        goto fail_init;
    st = rill__stream_new(dev, 0, RILL__STREAM_DEFAULT, &dev->default_stream);
    if (st != RILL_OK)
        goto fail_stream;
    rt->devices[rt->num_devices++] = dev;
    if ((ops->mem_caps & RILL__MEMCAP_HOST) == 0)
        rt->device_memory = true;
    return RILL_OK;

fail_stream:
    ops->device_shutdown(dev);
fail_init:
fail_subsystems:
    while (inited-- > 0)
        if (rill__subsystems[inited]->device_fini != NULL)
            rill__subsystems[inited]->device_fini(dev);
    rill__mutex_destroy(&dev->lock);
    rill__handle_close(dev->handle);
    rill__free(dev);
    return st;
}

/* Creates the devices of every backend the assembly lists, in order. Why a
 * kind has no device goes into
 * rt->none_why, and into rt->init_error when the process has no device at
 * all; the first device that did not start goes into rt->init_error. */
static void create_devices(rill__runtime *rt) {
    for (int b = 0; rill__backends[b] != NULL; b++) {
        const rill__backend_ops *ops = rill__backends[b];
        char why[sizeof rt->init_error] = "";
        int n = ops->probe(why, sizeof why);
        if (n == 0)
            rill__fit(rt->none_why[b], sizeof rt->none_why[b], why);
        int before = rt->num_devices;
        for (int i = 0; i < n && rt->num_devices < RILL__MAX_DEVICES; i++)
            if (device_create(rt, ops, i) != RILL_OK && rt->init_error[0] == '\0')
                rill__fit(rt->init_error, sizeof rt->init_error, rill_last_error());
        if (n > 0 && rt->num_devices == before)
            rill__fit(rt->none_why[b], sizeof rt->none_why[b], rt->init_error);
    }
    /* No device at all: the reason of the backend of host memory (the CPU
     * devices, which every machine has: RILL_CPU_DEVICES refused, say), or
     * else of the last backend. */
    for (int b = 0; rt->num_devices == 0 && rt->init_error[0] == '\0' && rill__backends[b] != NULL;
         b++)
        if ((rill__backends[b]->mem_caps & RILL__MEMCAP_HOST) != 0 || rill__backends[b + 1] == NULL)
            rill__fit(rt->init_error, sizeof rt->init_error, rt->none_why[b]);
}

/* While rill_shutdown runs, the threads that still use the dying runtime
 * and may look its handles up: its own, the workers (whose work it waits
 * for), and the calls of other threads that it waits for (core/calls.h). */
static bool may_use_dying(void) {
    return tls.in_shutdown || tls.is_worker || rill__call_waited_by_shutdown();
}

rill_status rill__runtime_get_slow(rill__runtime **out) {
    rill__runtime *rt;
    /* Other calls wait for the init lock and build the next runtime. */
    if (may_use_dying()) {
        /* acquire: pairs with the release store in rill_shutdown. */
        rt = atomic_load_explicit(&dying, memory_order_acquire);
        if (rt != NULL) {
            *out = rt;
            return RILL_OK;
        }
    }
    rill__call_init_wait_begin();
    lock_init();
    rill__call_init_wait_end();
    rt = atomic_load_explicit(&rill__runtime_up, memory_order_acquire);
    if (rt == NULL) {
        lock_init_building();
        rt = &runtime_storage;
        memset(rt, 0, sizeof *rt);
        rt->epoch = atomic_fetch_add(&next_epoch, 1);
        rill__mutex_init_ranked(&rt->lock, RILL__RANK_RUNTIME);
        if (!fork_handlers_registered)
            fork_handlers_registered = rill__fork_handlers(fork_prepare, fork_parent, fork_child);
        rill__barrier_init();
        for (int i = 0; rill__subsystems[i] != NULL; i++)
            if (rill__subsystems[i]->start != NULL)
                rill__subsystems[i]->start(rt);
        create_devices(rt);
        choose_initial_device(rt);
        atomic_store_explicit(&rill__runtime_up, rt, memory_order_release);
    }
    unlock_init();
    *out = rt;
    return RILL_OK;
}

rill_status rill__no_device(rill__runtime *rt, const char *fn) {
    if (rt->init_error[0] != '\0')
        return rill__fail(RILL_ERROR_NO_DEVICE, "%s: %s", fn, rt->init_error);
    return rill__fail(RILL_ERROR_NO_DEVICE, "%s: no device is available", fn);
}

bool rill__runtime_has_device_memory(void) {
    rill__runtime *rt;
    return rill__runtime_get(&rt) == RILL_OK && rt->device_memory;
}

void rill__device_lost(rill__device *dev, const char *why) {
    rill__mutex_lock(&dev->lock);
    rill__device_base *b = rill__device_base_of(dev);
    if (!atomic_load_explicit(&b->lost, memory_order_relaxed)) {
        snprintf(b->lost_why, sizeof b->lost_why, "%s", why);
        atomic_store_explicit(&b->lost, 1, memory_order_release);
    }
    rill__mutex_unlock(&dev->lock);
}

rill_status rill__device_resolve(rill_device *handle, const char *fn, rill__device **out) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    rill__device *dev;
    if (handle == NULL) {
        dev = thread_get(rt)->device;
        if (dev == NULL)
            return rill__no_device(rt, fn);
    } else if ((dev = rill__handle_get(handle, RILL__HANDLE_DEVICE)) == NULL) {
        /* Devices come from rill_device_get and live until rill_shutdown. */
        return rill__handle_fail(fn, "the device", handle, RILL__HANDLE_DEVICE);
    }
    *out = dev;
    return RILL_OK;
}

void rill__device_add_stream(rill__device *dev, rill__stream *s) {
    rill__mutex_lock(&dev->lock);
    rill__list_push(&dev->streams, &s->dev_link);
    rill__mutex_unlock(&dev->lock);
}

void rill__device_remove_stream(rill__device *dev, rill__stream *s) {
    rill__mutex_lock(&dev->lock);
    rill__list_remove(&dev->streams, &s->dev_link);
    rill__mutex_unlock(&dev->lock);
}

rill_status rill__thread_current_stream(rill__device *dev, const char *fn, rill__stream **out) {
    rill__runtime *rt;
    rill__runtime_get(&rt);
    thread_state *ts = thread_get(rt);
    rill__stream *s = ts->current[dev->base.info.ordinal];
    *out = dev->default_stream;
    if (s == NULL)
        return RILL_OK;
    /* The slot holds a reference, so a stream destroyed while current (by
     * any thread) is a zombie here, not freed memory. NULL then means the
     * default stream again, ordered after the work that the destroyed
     * stream holds: this thread's earlier work there is what its later
     * work expects to follow. A capture on the default stream records no
     * wait; its graph's launches order it. */
    if (atomic_load_explicit(&s->owner_released, memory_order_relaxed)) {
        rill__stream *d = dev->default_stream;
        if (!rill__stream_capturing(d)) {
            uint64_t seq = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
            rill_status st = rill__stream_wait_order(d, s, seq, fn);
            if (st != RILL_OK) {
                *out = NULL;
                return st; /* the slot stays: the next call tries again */
            }
        }
        ts->current[dev->base.info.ordinal] = NULL;
        rill__stream_unref(s);
        return RILL_OK;
    }
    *out = s;
    return RILL_OK;
}

void rill__thread_set_worker(int is_worker) {
    tls.is_worker = is_worker;
}

RILL_HOT int rill__thread_is_worker(void) {
    return tls.is_worker;
}

RILL_HOT void rill__thread_enter_worker(void) {
    host_state *h = &host_saved;
    h->saved_errno = errno;
    h->tls = tls;
    memset(&tls, 0, sizeof tls); /* epoch 0: thread_get starts afresh */
    tls.is_worker = 1;
    h->mode = rill__thread_capture_mode;
    rill__thread_capture_mode = RILL_CAPTURE_GLOBAL;
    h->op_name = rill__tls_op_name;
    rill__tls_op_name = NULL;
    h->thread_id = rill__thread_id_exchange(0);
    rill__error_save(h->error);
}

/* Streams that the work made current hold references (the runtime is the
 * one the work runs in: it cannot have been shut down). */
static void drop_current_streams(void) {
    if (tls.epoch != 0)
        for (int i = 0; i < RILL__MAX_DEVICES; i++)
            if (tls.current[i] != NULL)
                rill__stream_unref(tls.current[i]);
}

RILL_HOT void rill__thread_leave_worker(void) {
    host_state *h = &host_saved;
    drop_current_streams();
    tls = h->tls;
    rill__thread_capture_mode = h->mode;
    rill__tls_op_name = h->op_name;
    rill__thread_id_exchange(h->thread_id);
    rill__error_restore(h->error);
    errno = h->saved_errno;
}

RILL_HOT void rill__thread_reset_worker(void) {
    /* Usually the function changed nothing: then this reads and compares. */
    bool changed = tls.epoch != 0 || tls.device != NULL;
    if (changed) {
        drop_current_streams();
        memset(&tls, 0, sizeof tls);
        tls.is_worker = 1;
    }
    rill__thread_capture_mode = RILL_CAPTURE_GLOBAL;
    rill__tls_op_name = NULL;
    char drop[RILL__LAST_ERROR_BYTES];
    rill__error_save(drop);
}

RILL_HOT rill_status rill__check_may_block(const char *fn) {
    if (!tls.is_worker)
        return RILL_OK;
    return rill__fail(RILL_ERROR_NOT_PERMITTED,
                      "%s: called from inside a kernel or host function, where blocking on rill "
                      "could deadlock; record an event and wait on it from the host or a stream",
                      fn);
}

/* ---------------------------------------------------------------- public */

rill_status rill_set_device(rill_device *handle) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    if (handle == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_set_device: dev is NULL; pass a device from rill_device_get");
    rill__device *dev;
    rill_status st = rill__device_resolve(handle, "rill_set_device", &dev);
    if (st != RILL_OK)
        return st;
    rill__runtime_get(&rt);
    thread_get(rt)->device = dev;
    return RILL_OK;
}

rill_status rill_get_device(rill_device **out) {
    RILL_CALL_SCOPE();
    if (out == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_get_device: out is NULL; pass the address of a rill_device * to "
                          "receive the device");
    *out = NULL;
    rill__device *dev;
    rill_status st = rill__device_resolve(NULL, "rill_get_device", &dev);
    if (st == RILL_OK)
        *out = dev->handle;
    return st;
}

/* ---------------------------------------------------------------- shutdown */

/* Ends the subsystems' per-device state (the pool among them). What one
 * device's state holds may be another device's streams (a pool remembers
 * every stream that used its blocks), so every device's state goes before
 * any device's streams (device_destroy). */
static void device_fini(rill__device *dev) {
    for (int i = subsystem_count(); i-- > 0;)
        if (rill__subsystems[i]->device_fini != NULL)
            rill__subsystems[i]->device_fini(dev);
}

static void device_destroy(rill__device *dev) {
    /* Every stream has drained, the workers have stopped and no device's
     * state refers to a stream: release the owners' references of streams
     * nobody destroyed (default, tagged and leaked ones); each stream
     * leaves the list when it is freed. */
    while (dev->tagged != NULL) {
        rill__tagged_stream *t = dev->tagged;
        dev->tagged = t->next;
        rill__free(t->tag);
        rill__free(t);
    }
    rill__stream *next;
    for (rill__stream *s = rill__stream_of_dev_link(dev->streams); s != NULL; s = next) {
        next = rill__stream_of_dev_link(s->dev_link.next);
        if (!atomic_exchange(&s->owner_released, 1)) {
            atomic_store(&s->magic, RILL__MAGIC_DEAD);
            rill__stream_unref(s);
        }
    }
    /* What is left is held only by threads' current-stream slots (threads
     * that exited, or that never switched back): their pointers die with
     * this runtime's epoch. */
    while (dev->streams != NULL)
        rill__stream_free(rill__stream_of_dev_link(dev->streams));
    rill__mutex_destroy(&dev->lock);
    dev->magic = RILL__MAGIC_DEAD;
    rill__free(dev);
}

uint64_t rill__shutdown_count(void) {
    return atomic_load(&shutdowns_begun);
}

rill_status rill_shutdown(void) {
    rill_status st = rill__check_may_block("rill_shutdown");
    if (st != RILL_OK)
        return st;
    /* A second rill_shutdown waits here for the first, then finds no
     * runtime; one that finds another thread building the runtime (its
     * first call) comes before it, with nothing to release. */
    if (!lock_init_unless_building(true))
        return RILL_OK;
    rill__runtime *rt = atomic_load_explicit(&rill__runtime_up, memory_order_acquire);
    if (rt == NULL) {
        unlock_init();
        return RILL_OK;
    }
    /* From here on, calls that other threads begin wait for the init lock
     * and then build a fresh runtime, and their handle lookups fail; the
     * calls in flight are waited for (core/calls.h). release: pairs with
     * the acquire load of dying in rill__runtime_get_slow. */
    rill__call_quiesce_begin();
    atomic_store_explicit(&dying, rt, memory_order_release);
    atomic_store_explicit(&rill__runtime_up, NULL, memory_order_release);
    tls.in_shutdown = 1;
    rill__handle_set_closing(may_use_dying);
    rill__call_quiesce();
    /* Objects destroyed while other threads were in calls go now. */
    rill__call_drain();
    atomic_fetch_add(&shutdowns_begun, 1);
    shutdown_phase(rt, RILL__SHUTDOWN_BEGIN); /* ops, communicators, captures end */
    /* Wait for all work, including that of destroyed (zombie) streams,
     * which lives on in waits and events of live streams. */
    for (int i = 0; i < rt->num_devices; i++)
        rill__device_drain(rt->devices[i], "rill_shutdown");
    shutdown_phase(rt, RILL__SHUTDOWN_DRAINED); /* graphs and execs go */
    for (int i = 0; i < rt->num_devices; i++)
        rill__device_drain(rt->devices[i], "rill_shutdown"); /* graph memory's deferred frees */
    /* What the hooks and phases above destroyed while other threads had
     * records waits in the limbo (a batched retire): it goes now, before
     * the kernels, streams and devices it refers to. */
    rill__call_drain();
    shutdown_phase(rt, RILL__SHUTDOWN_IDLE); /* kernels, before the backends unload them */
    for (int i = 0; i < rt->num_devices; i++)
        rt->devices[i]->ops->device_shutdown(rt->devices[i]);
    shutdown_phase(rt, RILL__SHUTDOWN_STOPPED); /* interprocess memory, events */
    rill__call_drain();
    for (int i = 0; i < rt->num_devices; i++)
        device_fini(rt->devices[i]);
    for (int i = 0; i < rt->num_devices; i++)
        device_destroy(rt->devices[i]);
    shutdown_phase(rt, RILL__SHUTDOWN_DEVICES); /* the pointer registry, the trace */
    rill__mutex_destroy(&rt->lock);
    rill__handle_close_all(0); /* every handle of this runtime is stale */
    rill__handle_set_closing(NULL);
    tls.in_shutdown = 0;
    atomic_store_explicit(&dying, NULL, memory_order_relaxed);
    unlock_init();
    return RILL_OK;
}

/* --------------------------------------------------------------- current stream */

rill_stream *rill_default_stream(rill_device *handle) {
    RILL_CALL_SCOPE();
    rill__device *dev;
    if (rill__device_resolve(handle, "rill_default_stream", &dev) != RILL_OK)
        return NULL;
    return dev->default_stream->handle;
}

rill_stream *rill_current_stream(rill_device *handle) {
    RILL_CALL_SCOPE();
    rill__device *dev;
    if (rill__device_resolve(handle, "rill_current_stream", &dev) != RILL_OK)
        return NULL;
    rill__stream *s;
    if (rill__thread_current_stream(dev, "rill_current_stream", &s) != RILL_OK)
        return NULL;
    return s->handle;
}

rill_stream *rill_set_current_stream(rill_stream *handle) {
    RILL_CALL_SCOPE();
    rill__runtime *rt;
    rill__device *dev;
    rill__stream *stream;
    rill__runtime_get(&rt);
    if (handle == NULL) {
        if (rill__device_resolve(NULL, "rill_set_current_stream", &dev) != RILL_OK)
            return NULL;
        stream = dev->default_stream;
    } else if ((stream = rill__handle_get(handle, RILL__HANDLE_STREAM)) == NULL) {
        rill__handle_fail("rill_set_current_stream", "the stream", handle, RILL__HANDLE_STREAM);
        return NULL;
    }
    dev = stream->q.dev;
    thread_state *ts = thread_get(rt);
    rill__stream *old = ts->current[dev->base.info.ordinal];
    /* A destroyed stream's stale handle is never returned: the default
     * stream's stands for it, and no wait is needed, since the thread
     * leaves it for another stream by its own choice. */
    rill__stream *prev =
        old != NULL && !atomic_load_explicit(&old->owner_released, memory_order_relaxed)
            ? old
            : dev->default_stream;
    rill__stream_ref(stream);
    ts->current[dev->base.info.ordinal] = stream;
    if (old != NULL)
        rill__stream_unref(old);
    return prev->handle;
}

/* ---------------------------------------------------------------- fork */

/* The child of a fork gets a fresh runtime. The parent's workers, queued
 * work and waiter thread stay in the parent, so in the child the parent's
 * runtime is forgotten, never freed or locked again: its handles (devices,
 * streams, events, graphs, execs) are made invalid, its memory stays mapped
 * (device memory is shared with the parent), and its kernels, which need
 * no thread, carry over to the next runtime. So that the lists the child
 * walks are whole, prepare takes the init lock (no initialisation or
 * shutdown is half done at the fork) and the locks of those lists, in lock
 * order; the parent then releases them, and the child, whose only thread is
 * the forking one, holds them and releases them too. */

typedef struct fork_state {
    rill__runtime *rt; /* whose locks prepare took, or NULL */
    bool took_init_lock;
} fork_state;

/* The handlers of one fork run on its forking thread. */
static _Thread_local fork_state forking;
/* In a child: the parent's runtime, never used again, kept reachable for
 * leak checkers. */
static rill__runtime parent_runtime;

static void fork_prepare(void) {
    /* A worker may run the host function that a shutdown waits for, so it
     * must not wait for the init lock; while it runs, its runtime cannot be
     * torn down. */
    forking.took_init_lock = !tls.is_worker;
    if (forking.took_init_lock)
        lock_init();
    rill__runtime *rt = atomic_load(&rill__runtime_up);
    if (rt == NULL)
        rt = atomic_load(&dying);
    forking.rt = rt;
    if (rt == NULL)
        return;
    rill__mutex_lock(&rt->lock);
    for (int i = 0; i < rt->num_devices; i++) /* siblings, by ordinal */
        rill__mutex_lock_sibling(&rt->devices[i]->lock);
    rill__handle_fork_prepare(); /* a leaf: taken last, released first */
    rill__call_fork_prepare();   /* a leaf too */
}

static void unlock_lists(rill__runtime *rt) {
    for (int i = rt->num_devices - 1; i >= 0; i--)
        rill__mutex_unlock(&rt->devices[i]->lock);
    rill__mutex_unlock(&rt->lock);
}

static void fork_parent(void) {
    if (forking.rt != NULL) {
        rill__call_fork_parent();
        rill__handle_fork_release();
        unlock_lists(forking.rt);
    }
    if (forking.took_init_lock)
        unlock_init();
    forking.rt = NULL;
}

/* Makes every handle of the parent's runtime invalid in this process (the
 * kernel part keeps its live kernels for the next runtime); rt's list
 * locks held. */
static void forget_runtime(rill__runtime *rt) {
    for (int i = 0; i < rt->num_devices; i++) {
        rill__device *dev = rt->devices[i];
        atomic_store(&dev->magic, RILL__MAGIC_DEAD);
        for (rill__stream *s = rill__stream_of_dev_link(dev->streams); s != NULL;
             s = rill__stream_of_dev_link(s->dev_link.next))
            atomic_store(&s->magic, RILL__MAGIC_DEAD);
    }
    for (int i = 0; rill__subsystems[i] != NULL; i++)
        if (rill__subsystems[i]->fork_child != NULL)
            rill__subsystems[i]->fork_child(rt);
    rill__handle_close_all(RILL__HANDLE_KERNEL);
}

static void fork_child(void) {
    atomic_fetch_add(&rill__fork_count, 1);
    rill__runtime *rt = forking.rt;
    if (rt != NULL) {
        rill__call_fork_child();
        rill__handle_fork_release();
        rill__handle_set_closing(NULL); /* a worker forked during a shutdown */
        forget_runtime(rt);
        unlock_lists(rt);
        parent_runtime = *rt;
    }
    forking.rt = NULL;
    atomic_store(&dying, NULL);
    atomic_store(&rill__runtime_up, NULL);
    tls.in_shutdown = 0;
    if (rt == NULL)
        for (int i = 0; rill__subsystems[i] != NULL; i++)
            if (rill__subsystems[i]->fork_child != NULL)
                rill__subsystems[i]->fork_child(NULL);
    if (forking.took_init_lock)
        rill__lock_rank_release(&init_lock, RILL__RANK_INIT);
    atomic_store(&init_lock, 0);
}
