/* SPDX-License-Identifier: MIT */
/* Calls in flight and retired objects (see calls.h): the registry of the
 * threads' records, and the limbo of objects whose handles are closed but
 * which a call may still use.
 *
 * Invariants: a record is in the registry from its first use on, taken
 * while a live thread owns it; its state is odd exactly while that thread
 * is in a call. A limbo entry lists the records it waits for with the odd
 * state each had when the entry was made; it is released once every one of
 * them has moved on (guarded by limbo_lock: the list and rill__call_limbo,
 * its length). */
#include "core/calls.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "util/alloc.h"

_Thread_local rill__call_rec *rill__call_self;
_Atomic int rill__call_limbo;

static _Atomic(rill__call_rec *) registry;

typedef struct waited {
    rill__call_rec *rec;
    uint64_t state; /* odd: the call it was in */
} waited;

typedef struct limbo_entry {
    struct limbo_entry *next;
    rill__release_fn release;
    void *obj;
    size_t n;
    waited on[];
} limbo_entry;

static rill__spinlock limbo_lock;
static limbo_entry *limbo;

/* A thread that exits leaves its record to the next new thread. One that
 * exits inside a call (a host function that ends its thread) is out of it. */
static void record_unused(void *rec) {
    rill__call_rec *r = rec;
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    if (v & 1u)
        atomic_store_explicit(&r->state, v + 1, memory_order_release);
    /* release: its last call happened before a new owner's first. */
    atomic_store_explicit(&r->taken, 0, memory_order_release);
}

static rill__exit_key exit_key = {.fn = record_unused};

rill__call_rec *rill__call_register(void) {
    rill__call_rec *r = NULL;
    for (rill__call_rec *c = atomic_load(&registry); c != NULL && r == NULL; c = c->next) {
        int free_rec = 0;
        if (atomic_load_explicit(&c->taken, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&c->taken, &free_rec, 1))
            r = c;
    }
    while (r == NULL) {
        /* Never freed: aligned by hand to its line. */
        unsigned char *raw = rill__calloc(1, sizeof *r + alignof(rill__call_rec));
        r = raw == NULL ? NULL
                        : (rill__call_rec *)(raw + (alignof(rill__call_rec) -
                                                    (uintptr_t)raw % alignof(rill__call_rec)));
        if (r == NULL) {
            /* A record is one cache line, and a call cannot fail for want
             * of one: wait for memory (or for an exiting thread's record). */
            rill__thread_yield();
            continue;
        }
        atomic_init(&r->taken, 1);
        rill__call_rec *head = atomic_load(&registry);
        do
            r->next = head;
        while (!atomic_compare_exchange_weak(&registry, &head, r));
    }
    rill__call_self = r;
    rill__exit_key_set(&exit_key, r);
    return r;
}

/* Has every record the entry waits for left the call it was in? */
static bool entry_done(const limbo_entry *e) {
    for (size_t i = 0; i < e->n; i++)
        /* acquire: pairs with the release store of rill__call_leave. */
        if (atomic_load_explicit(&e->on[i].rec->state, memory_order_acquire) == e->on[i].state)
            return false;
    return true;
}

/* Takes the entries that are done (all when all), releasing none. */
static limbo_entry *take_done(bool all) {
    limbo_entry *done = NULL;
    rill__spinlock_lock(&limbo_lock);
    for (limbo_entry **p = &limbo; *p != NULL;) {
        limbo_entry *e = *p;
        if (all || entry_done(e)) {
            *p = e->next;
            e->next = done;
            done = e;
            atomic_fetch_sub_explicit(&rill__call_limbo, 1, memory_order_relaxed);
        } else {
            p = &e->next;
        }
    }
    rill__spinlock_unlock(&limbo_lock);
    return done;
}

static void release_all(limbo_entry *e) {
    while (e != NULL) {
        limbo_entry *next = e->next;
        e->release(e->obj);
        rill__free(e);
        e = next;
    }
}

void rill__call_reclaim(void) {
    release_all(take_done(false));
}

void rill__call_drain(void) {
    release_all(take_done(true));
}

void rill__retire(rill__release_fn release, void *obj) {
    /* A kernel or host function that destroys an object may be run by a
     * thread waiting in a call that uses it (a stream's synchronize running
     * the stream's host function): then this thread's call counts too, and
     * the object goes when that call returns. */
    rill__call_rec *self = rill__thread_is_worker() ? NULL : rill__call_self;
    /* Pairs with the locked instruction with which another thread pushes
     * or takes a record: it looks handles up after that, and so finds the
     * one just closed, or its record is below head and taken. */
    atomic_thread_fence(memory_order_seq_cst);
    rill__call_rec *head = atomic_load(&registry);
    size_t records = 0, others = 0;
    for (rill__call_rec *c = head; c != NULL; c = c->next) {
        records++;
        if (c != self && atomic_load_explicit(&c->taken, memory_order_relaxed))
            others++;
    }
    if (others == 0) {
        release(obj);
        return;
    }
    /* Pairs with the light barrier of rill__call_enter. */
    rill__barrier_heavy();
    /* The records from head on: those pushed since found the handle closed,
     * and the list below head never changes. */
    limbo_entry *e = rill__malloc(sizeof *e + records * sizeof e->on[0]);
    size_t n = 0;
    for (rill__call_rec *c = head; c != NULL; c = c->next) {
        if (c == self)
            continue;
        /* acquire: as in entry_done. */
        uint64_t v = atomic_load_explicit(&c->state, memory_order_acquire);
        if ((v & 1u) == 0)
            continue;
        if (e == NULL) {
            /* Out of memory for the entry: the object stays, which is safe
             * (a leak, not a use after free). */
            return;
        }
        e->on[n].rec = c;
        e->on[n].state = v;
        n++;
    }
    if (n == 0) {
        rill__free(e);
        release(obj);
        return;
    }
    e->release = release;
    e->obj = obj;
    e->n = n;
    rill__spinlock_lock(&limbo_lock);
    e->next = limbo;
    limbo = e;
    atomic_fetch_add_explicit(&rill__call_limbo, 1, memory_order_relaxed);
    rill__spinlock_unlock(&limbo_lock);
    /* The calls may have ended meanwhile. */
    rill__call_reclaim();
}

void rill__call_fork_prepare(void) {
    rill__spinlock_lock(&limbo_lock);
}

void rill__call_fork_parent(void) {
    rill__spinlock_unlock(&limbo_lock);
}

void rill__call_fork_child(void) {
    /* The retired objects belong to the parent's runtime, which the child
     * forgets: drop the entries, not the objects. */
    limbo_entry *e = limbo;
    limbo = NULL;
    atomic_store(&rill__call_limbo, 0);
    rill__spinlock_unlock(&limbo_lock);
    while (e != NULL) {
        limbo_entry *next = e->next;
        rill__free(e);
        e = next;
    }
    /* The other threads are gone, out of their calls. */
    rill__call_rec *self = rill__call_self;
    for (rill__call_rec *c = atomic_load(&registry); c != NULL; c = c->next) {
        if (c == self)
            continue;
        uint64_t v = atomic_load(&c->state);
        atomic_store(&c->state, v + (v & 1u));
        atomic_store(&c->taken, 0);
    }
}
