/* SPDX-License-Identifier: MIT */
/* Calls in flight and retired objects (see calls.h): the registry of the
 * threads' records, and the limbo of objects whose handles are closed but
 * which a call may still use. */

/* Invariants: a record is in the registry from its first use on, taken
 * while a live thread owns it; its state is odd exactly while that thread
 * is in a call, parked only while it is in one, and hold set only while it
 * is in one. A limbo entry lists the records that were taken when its
 * object was retired (the retiring thread's own left out, unless it runs
 * work); left counts those not yet seen out of a call that may have found
 * the object, and a record's owed counts the entries in which it is one of
 * those. An entry is released, and leaves the limbo, once left is 0: a
 * prompt one by whoever makes it 0, a batched one by the next retire,
 * barrier or drain.
 * Entries with ids up to read_upto have been read under a heavy barrier;
 * unread counts those after it, the oldest of which was retired at
 * unread_since_ns or later. All of it is guarded by limbo_lock. */
#include "core/calls.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/handle.h"
#include "core/runtime.h"
#include "util/alloc.h"
#include "util/status.h"

_Thread_local rill__call_rec *rill__call_self;

static _Atomic(rill__call_rec *) registry;

typedef struct owed_by {
    rill__call_rec *rec;
    bool out; /* seen out of the calls that may have found the object */
} owed_by;

typedef struct limbo_entry {
    struct limbo_entry *next;
    rill__release_fn release;
    void *obj;
    bool prompt;      /* RILL__RETIRE_PROMPT */
    uint64_t id;      /* in retire order, from 1 */
    uint64_t born_ns; /* when retired */
    size_t n, left;
    owed_by on[];
} limbo_entry;

static rill__spinlock limbo_lock = RILL__SPINLOCK_RANKED(RILL__RANK_CALLS);
static limbo_entry *limbo;     /* newest first */
static _Atomic size_t entries; /* in the limbo: a hint for retires that need no entry */
static uint64_t last_id;       /* the newest entry's id */
static uint64_t read_upto;     /* entries up to this id were read under a barrier */
static size_t unread;
/* Entries that no record is owed any more, not yet taken out. */
static size_t done_prompt, done_batched;
static uint64_t unread_since_ns;
static _Atomic uint64_t heavy_barriers;

/* A thread that exits leaves its record to the next new thread. One that
 * exits inside a call (a host function that ends its thread) is out of it. */
static void record_unused(void *rec) {
    rill__call_rec *r = rec;
    if (r->hold != NULL)
        rill__call_drop_hold(r);
    atomic_store_explicit(&r->parked, 0, memory_order_relaxed);
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    if (v & 1u)
        atomic_store_explicit(&r->state, v + 1, memory_order_release);
    if (atomic_load_explicit(&r->owed, memory_order_relaxed) != 0)
        rill__call_check_in(r);
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

uint64_t rill__call_heavy_barriers(void) {
    return atomic_load_explicit(&heavy_barriers, memory_order_relaxed);
}

/* Under limbo_lock: e's i-th record is out of the calls that may have
 * found e's object. */
static void mark_out(limbo_entry *e, size_t i) {
    e->on[i].out = true;
    if (--e->left == 0)
        *(e->prompt ? &done_prompt : &done_batched) += 1;
    atomic_fetch_sub_explicit(&e->on[i].rec->owed, 1, memory_order_relaxed);
}

/* Under limbo_lock: unlinks the entries no record is owed any more; the
 * batched ones only when batched. Walks the limbo only as far as the last
 * of them: entries that wait for a thread blocked in a long call (a
 * synchronize) pile up behind, and a walk of them all per retire made a
 * destroy cost what the limbo's length does. */
static limbo_entry *take_done_locked(bool batched) {
    limbo_entry *done = NULL;
    size_t want = done_prompt + (batched ? done_batched : 0);
    for (limbo_entry **p = &limbo; *p != NULL && want > 0;) {
        limbo_entry *e = *p;
        if (e->left == 0 && (batched || e->prompt)) {
            *p = e->next;
            e->next = done;
            done = e;
            want--;
            *(e->prompt ? &done_prompt : &done_batched) -= 1;
            atomic_fetch_sub_explicit(&entries, 1, memory_order_relaxed);
            if (e->id > read_upto)
                unread--;
        } else {
            p = &e->next;
        }
    }
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

void rill__call_check_in(rill__call_rec *r) {
    /* The lock is a full barrier of this thread's: the entries it finds
     * were made after their handles closed, so its later calls find them
     * closed, and it is in no call now. Batched entries it completes are
     * released by the next retire (or barrier, or drain), on the thread
     * that destroys such objects: released here, a thread that calls all
     * the time while another destroys would contend with it for the locks
     * that create and release take (an event create and destroy pair cost
     * 1.2 to 1.3 us instead of 0.84 to 0.94 while another thread called
     * rill_stream_query in a loop, bench_runtime h3). */
    rill__spinlock_lock(&limbo_lock);
    /* Newest first: those up to checked_upto it marked itself out of. */
    for (limbo_entry *e = limbo; e != NULL && e->id > r->checked_upto; e = e->next)
        for (size_t i = 0; i < e->n; i++)
            if (e->on[i].rec == r && !e->on[i].out)
                mark_out(e, i);
    r->checked_upto = last_id;
    limbo_entry *done = take_done_locked(false);
    rill__spinlock_unlock(&limbo_lock);
    release_all(done);
}

void rill__call_drop_hold(rill__call_rec *r) {
    void *hold = r->hold;
    r->hold = NULL;
    r->hold_release(hold);
}

rill__call_rec *rill__call_park(void *hold, rill__release_fn hold_release) {
    rill__call_rec *r = rill__call_self;
    /* relaxed: only this thread writes its state and its hold. */
    if (r == NULL || (atomic_load_explicit(&r->state, memory_order_relaxed) & 1u) == 0 ||
        (hold != NULL && r->hold != NULL))
        return NULL;
    if (hold != NULL) {
        r->hold = hold;
        r->hold_release = hold_release;
    }
    /* release: the call's uses of objects so far happen before a release
     * that a barrier's reading of parked allows (read_under_barrier). */
    atomic_store_explicit(&r->parked, 1, memory_order_release);
    if (atomic_load_explicit(&r->owed, memory_order_relaxed) != 0)
        rill__call_check_in(r);
    return r;
}

void rill__call_unpark(rill__call_rec *r) {
    if (r == NULL)
        return;
    atomic_store_explicit(&r->parked, 0, memory_order_relaxed);
    /* As in rill__call_enter: a barrier's reading sees the call unparked,
     * or what the call looks up from here on sees the handles closed
     * before that barrier. */
    rill__barrier_light();
}

/* Issues a heavy barrier for the entries made so far, then marks out the
 * records it reads even or parked, and releases the entries that leaves. */
static void read_under_barrier(void) {
    rill__spinlock_lock(&limbo_lock);
    uint64_t upto = last_id;
    rill__spinlock_unlock(&limbo_lock);
    /* Pairs with the light barrier of rill__call_enter: a record read even
     * after it was in no call when it ran, and its calls since then find
     * the handles closed before it. Entries made meanwhile wait for the
     * next one: their handles may have closed after it. */
    rill__barrier_heavy();
    atomic_fetch_add_explicit(&heavy_barriers, 1, memory_order_relaxed);
    rill__spinlock_lock(&limbo_lock);
    /* Newest first: stop at those read under an earlier barrier. */
    for (limbo_entry *e = limbo; e != NULL && e->id > read_upto; e = e->next) {
        if (e->id > upto)
            continue;
        for (size_t i = 0; i < e->n; i++) {
            /* acquire: pairs with the release store of rill__call_leave
             * or rill__call_park, so the call's last use of the object
             * happens before its release. */
            rill__call_rec *c = e->on[i].rec;
            if (!e->on[i].out &&
                ((atomic_load_explicit(&c->state, memory_order_acquire) & 1u) == 0 ||
                 atomic_load_explicit(&c->parked, memory_order_acquire)))
                mark_out(e, i);
        }
    }
    if (upto > read_upto)
        read_upto = upto;
    limbo_entry *done = take_done_locked(true);
    /* Those made meanwhile are still unread. */
    unread = 0;
    for (limbo_entry *e = limbo; e != NULL && e->id > read_upto; e = e->next) {
        unread++;
        unread_since_ns = e->born_ns; /* newest first: the last is the oldest */
    }
    rill__spinlock_unlock(&limbo_lock);
    release_all(done);
}

void rill__call_drain(void) {
    rill__spinlock_lock(&limbo_lock);
    for (limbo_entry *e = limbo; e != NULL; e = e->next)
        for (size_t i = 0; i < e->n; i++)
            if (!e->on[i].out)
                mark_out(e, i);
    limbo_entry *done = take_done_locked(true);
    read_upto = last_id;
    unread = 0;
    rill__spinlock_unlock(&limbo_lock);
    release_all(done);
}

/* Was an entry retired at then RILL__LIMBO_AGE_NS before now? (Times are
 * read before the lock, so a later entry may be a little older.) */
static bool aged(uint64_t now, uint64_t then) {
    return now > then && now - then >= RILL__LIMBO_AGE_NS;
}

void rill__retire(rill__release_fn release, void *obj, rill__retire_mode mode) {
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
        /* acquire: pairs with the release store of a thread that gave its
         * record up as it exited, after its last call. */
        if (c != self && atomic_load_explicit(&c->taken, memory_order_acquire))
            others++;
    }
    if (others == 0) {
        release(obj);
        /* And what threads checked in for since the last retire. */
        if (atomic_load_explicit(&entries, memory_order_relaxed) != 0) {
            rill__spinlock_lock(&limbo_lock);
            limbo_entry *done = take_done_locked(true);
            rill__spinlock_unlock(&limbo_lock);
            release_all(done);
        }
        return;
    }
    limbo_entry *e = rill__malloc(sizeof *e + records * sizeof e->on[0]);
    if (e == NULL) {
        /* Out of memory for the entry: the object stays, which is safe (a
         * leak, not a use after free). */
        return;
    }
    /* The records from head on: those pushed since found the handle closed,
     * and the list below head never changes. One taken since the count
     * above found it closed too; one given up since is in no call. */
    size_t n = 0;
    for (rill__call_rec *c = head; c != NULL && n < records; c = c->next)
        if (c != self && atomic_load_explicit(&c->taken, memory_order_acquire)) {
            e->on[n].rec = c;
            e->on[n].out = false;
            n++;
        }
    e->release = release;
    e->obj = obj;
    e->prompt = mode == RILL__RETIRE_PROMPT;
    e->n = e->left = n;
    e->born_ns = rill__now_ns();
    rill__spinlock_lock(&limbo_lock);
    e->id = ++last_id;
    e->next = limbo;
    limbo = e;
    atomic_fetch_add_explicit(&entries, 1, memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        atomic_fetch_add_explicit(&e->on[i].rec->owed, 1, memory_order_relaxed);
    if (n == 0)
        *(e->prompt ? &done_prompt : &done_batched) += 1;
    /* Threads that make calls check in soon; the entries that wait for
     * others are read under the batch's barrier. */
    if (unread++ == 0)
        unread_since_ns = e->born_ns;
    /* Those that threads checked in for since the last retire, and this
     * one when nobody is owed it. */
    limbo_entry *done = take_done_locked(true);
    bool due = mode == RILL__RETIRE_PROMPT || unread >= RILL__LIMBO_BATCH;
    if (!due && unread > 0 && aged(e->born_ns, unread_since_ns)) {
        /* The entry that was oldest may have gone since: find the oldest. */
        for (limbo_entry *o = limbo; o != NULL && o->id > read_upto; o = o->next)
            unread_since_ns = o->born_ns; /* newest first: the last is the oldest */
        due = aged(e->born_ns, unread_since_ns);
    }
    rill__spinlock_unlock(&limbo_lock);
    release_all(done);
    if (due)
        read_under_barrier();
}

rill_status rill__destroy(_Atomic uint32_t *magic, uint32_t live, const void *handle,
                          rill__release_fn release, void *obj, rill__retire_mode mode,
                          const char *fn, const char *what) {
    /* Of two destroys racing on one object, one wins here; the other
     * changes nothing. */
    if (!atomic_compare_exchange_strong(magic, &live, RILL__MAGIC_DEAD))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: the %s was already destroyed", fn,
                          what);
    rill__handle_close(handle); /* stale from here on */
    rill__retire(release, obj, mode);
    return RILL_OK;
}

/* 1 from rill__call_quiesce_begin until the records in calls are marked. */
static _Atomic int quiescing;
/* Nobody wakes it: rill__call_quiesce naps on it. */
static _Atomic uint32_t nap_word;

void rill__call_quiesce_begin(void) {
    /* seq_cst: before the store that unpublishes the runtime, so that a
     * thread that finds it unpublished finds this set, or the marks. */
    atomic_store(&quiescing, 1);
}

/* Is c's thread still in the call w (odd) that a shutdown waits for, and
 * not waiting for the init lock? */
static bool still_in(rill__call_rec *c, uint64_t w) {
    /* acquire: the call's last use happens before the teardown. */
    return (w & 1u) && atomic_load_explicit(&c->state, memory_order_acquire) == w &&
           atomic_load(&c->init_waits) != w;
}

void rill__call_quiesce(void) {
    rill__call_rec *self = rill__call_self;
    rill__barrier_heavy();
    rill__call_rec *head = atomic_load(&registry);
    for (rill__call_rec *c = head; c != NULL; c = c->next) {
        /* acquire: as in read_under_barrier. */
        uint64_t v = atomic_load_explicit(&c->state, memory_order_acquire);
        if (c != self && (v & 1u))
            atomic_store_explicit(&c->shutdown_waits, v, memory_order_relaxed);
    }
    /* release: publishes the marks to rill__call_waited_by_shutdown. */
    atomic_store_explicit(&quiescing, 0, memory_order_release);
    /* A record pushed since entered no call that found the runtime. One
     * not marked now has a mark of an earlier shutdown's, which its state
     * has passed. */
    for (rill__call_rec *c = head; c != NULL; c = c->next) {
        uint64_t w = atomic_load_explicit(&c->shutdown_waits, memory_order_relaxed);
        for (unsigned naps = 0; c != self && still_in(c, w); naps++) {
            if (naps < 64)
                rill__thread_yield();
            else
                rill__futex_wait_for(&nap_word, 0, 100000); /* a 100 us nap */
        }
    }
}

bool rill__call_waited_by_shutdown(void) {
    rill__call_rec *r = rill__call_self;
    if (r == NULL)
        return false;
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    if ((v & 1u) == 0)
        return false;
    /* acquire: pairs with the release store in rill__call_quiesce. The
     * marking takes a barrier and a walk of the records: microseconds. */
    while (atomic_load_explicit(&quiescing, memory_order_acquire))
        rill__thread_yield();
    return atomic_load_explicit(&r->shutdown_waits, memory_order_relaxed) == v;
}

void rill__call_init_wait_begin(void) {
    rill__call_rec *r = rill__call_self;
    if (r == NULL)
        return;
    uint64_t v = atomic_load_explicit(&r->state, memory_order_relaxed);
    if (v & 1u)
        atomic_store(&r->init_waits, v);
}

void rill__call_init_wait_end(void) {
    rill__call_rec *r = rill__call_self;
    if (r != NULL && atomic_load_explicit(&r->init_waits, memory_order_relaxed) != 0)
        atomic_store_explicit(&r->init_waits, 0, memory_order_relaxed);
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
    atomic_store(&entries, 0);
    done_prompt = done_batched = 0;
    read_upto = last_id;
    unread = 0;
    rill__spinlock_unlock(&limbo_lock);
    while (e != NULL) {
        limbo_entry *next = e->next;
        rill__free(e);
        e = next;
    }
    atomic_store(&quiescing, 0);
    /* The other threads are gone, out of their calls, and nothing is owed. */
    rill__call_rec *self = rill__call_self;
    for (rill__call_rec *c = atomic_load(&registry); c != NULL; c = c->next) {
        atomic_store(&c->owed, 0);
        if (c == self)
            continue;
        /* What they held belongs to the parent's runtime too. */
        c->hold = NULL;
        atomic_store(&c->parked, 0);
        uint64_t v = atomic_load(&c->state);
        atomic_store(&c->state, v + (v & 1u));
        atomic_store(&c->taken, 0);
    }
}
