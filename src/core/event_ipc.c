/* SPDX-License-Identifier: MIT */
/* Interprocess events: the state every process sees is one shared page (a
 * memfd of the exporter) with three counters and a table of the processes
 * that record; waits for other processes' records go through a proxy stream
 * per event, completed by one waiter thread per process, which fails the
 * waits whose records can no longer complete (docs/design.md,
 * "Inter-process sharing").
 * Invariants: completed <= recorded, failed <= completed; a process raises
 * its table entry to r + 1 before it moves recorded from r to r + 1, so an
 * entry >= g is seen by whoever sees generation g. */
#include "core/event_ipc.h"

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/calls.h"
#include "core/event.h"
#include "core/ipc_wire.h"
#include "core/stream.h"
#include "platform/shm.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/status.h"

#define PAGE_MAGIC  0x52455650u /* "PVER" backwards: a page of event state */
#define PAGE_BYTES  4096u
#define LIVENESS_NS 100000000u /* how often the waiter checks that exporters run */
#define VALID_FLAGS (RILL_EVENT_BLOCKING_SYNC | RILL_EVENT_INTERPROCESS)

/* The page's layout (2 added the recorders), and how many processes that
 * record one event at once it follows. */
#define PAGE_VERSION 2u
#define RECORDERS    64

static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
              "shared counters must be lock-free to work across processes");

/* A process that records the event. Its id is pid << 32 | the low 32
 * bits of its start time (0: a free entry), written by compare-and-swap
 * only: from 0, or from the id of a process that has exited. latest only
 * rises while the id stays (the entry's owner writes it). */
typedef struct recorder {
    _Atomic uint64_t id;
    _Atomic uint64_t latest; /* the greatest generation it took, or is taking */
} recorder;

/* The shared state; other processes write it, so nothing here is trusted
 * beyond the counters' values. */
typedef struct ipc_page {
    uint32_t magic; /* immutable after create */
    uint32_t version;
    alignas(64) _Atomic uint64_t recorded;
    _Atomic uint64_t completed;
    _Atomic uint64_t failed;
    _Atomic uint32_t wake;      /* futex word: bumped when completed rises and someone sleeps */
    _Atomic uint32_t sleepers;  /* threads (of any process) about to sleep on wake */
    _Atomic uint32_t untracked; /* set for good once a process recorded without an entry */
    alignas(64) recorder recorders[RECORDERS];
} ipc_page;

static_assert(sizeof(ipc_page) <= PAGE_BYTES, "the event state must fit its page");

/* A wait of this process: the proxy's number seq completes once the
 * shared counter reaches gen. */
typedef struct entry {
    struct entry *next;
    uint64_t gen, seq;
    uint64_t stream_id; /* the stream that waits, for traces; 0: a host wait */
    int outcome;        /* ready entries: OUT_* */
    int32_t gone_pid;   /* OUT_RECORDER_GONE: a process that took gen or later, and exited */
    struct rill__ipc_event *ipc;
} entry;

enum { OUT_OK = 0, OUT_FAILED, OUT_EXPORTER_GONE, OUT_RECORDER_GONE };

struct rill__ipc_event {
    /* immutable after create */
    rill__shm shm;       /* the exporter's object (exporter only: shm.fd >= 0) */
    ipc_page *page;      /* shm.base in the exporter; an owned mapping in an opener */
    rill__ipc_wire wire; /* names the page for handles (device and flags set at export) */
    int is_exporter;
    rill__stream *proxy; /* owned: numbers this process's waits */
    /* guarded by the lock of the event that owns this */
    recorder *me;  /* this process's entry once it recorded; NULL before, or without one */
    bool no_entry; /* the table was full: this process records untracked */
    /* guarded by waiter.lock */
    entry *head, *tail; /* queued waits, in seq order */
    uint64_t proxy_seq;
    int watched;
    struct rill__ipc_event *watch_next;
    /* waiter thread only: unwatched, its reference not yet dropped */
    struct rill__ipc_event *drop_next;
    /* atomic */
    _Atomic int refs; /* the event, plus the waiter while it watches this */
};

static struct {
    rill__spinlock lock;
    /* guarded by lock */
    int started;
    rill__thread thread;
    rill__ipc_event *watch; /* events with queued waits; each holds a ref */
    /* atomic */
    _Atomic uint32_t kick; /* futex word: a wait was queued, or stop */
    _Atomic int stop;
} waiter;

/* ------------------------------------------------------------ lifetime */

static rill_status make_proxy(rill__ipc_event *ipc, const char *fn) {
    rill__device *cpu = rill__device_of_kind(RILL_DEVICE_CPU);
    if (cpu == NULL)
        return rill__fail(RILL_ERROR_NO_DEVICE,
                          "%s: the CPU device, whose streams wait for other processes, is "
                          "not available",
                          fn);
    rill_status st;
    st = rill__stream_new(cpu, 0, RILL__STREAM_PROXY, &ipc->proxy);
    if (st != RILL_OK)
        return rill__fail_from(st, fn);
    /* Another process completes its numbers: work behind them may wait for
     * anything (see rill__stream_opaque_pending). */
    atomic_store(&ipc->proxy->q.opaque_seq, UINT64_MAX);
    rill__mutex_lock(&ipc->proxy->err_lock);
    snprintf(ipc->proxy->name, sizeof ipc->proxy->name, "interprocess event of process %d",
             (int)ipc->wire.name.pid);
    rill__mutex_unlock(&ipc->proxy->err_lock);
    return RILL_OK;
}

static void ipc_free(rill__ipc_event *ipc) {
    if (ipc->proxy != NULL) {
        atomic_store(&ipc->proxy->owner_released, 1);
        rill__stream_unref(ipc->proxy);
    }
    if (ipc->is_exporter)
        rill__shm_destroy(&ipc->shm);
    else if (ipc->page != NULL)
        rill__shm_unmap_range(ipc->page, PAGE_BYTES);
    rill__free(ipc);
}

static void ipc_unref(rill__ipc_event *ipc) {
    /* acq_rel: the last release must see every other holder's writes. */
    if (atomic_fetch_sub_explicit(&ipc->refs, 1, memory_order_acq_rel) == 1)
        ipc_free(ipc);
}

rill_status rill__ipc_event_create(rill__ipc_event **out) {
    static const char fn[] = "rill_event_create";
    rill__ipc_event *ipc = rill__calloc(1, sizeof *ipc);
    if (ipc == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    atomic_init(&ipc->refs, 1);
    char why[160];
    if (!rill__shm_create("rill-event", PAGE_BYTES, &ipc->shm, why, sizeof why)) {
        rill__free(ipc);
        return rill__fail(RILL_ERROR_IPC,
                          "%s: cannot create the shared state of an interprocess event (%s)", fn,
                          why);
    }
    ipc->is_exporter = 1;
    ipc->page = ipc->shm.base;
    ipc->page->magic = PAGE_MAGIC;
    ipc->page->version = PAGE_VERSION;
    ipc->wire.magic = RILL__IPC_MAGIC_EVENT;
    ipc->wire.version = RILL__IPC_VERSION;
    rill__shm_name_of(&ipc->shm, &ipc->wire.name);
    ipc->wire.object_bytes = PAGE_BYTES;
    ipc->wire.start_time = rill__process_start_time(ipc->wire.name.pid);
    rill_status st = make_proxy(ipc, fn);
    if (st != RILL_OK) {
        ipc_free(ipc);
        return st;
    }
    *out = ipc;
    return RILL_OK;
}

void rill__ipc_event_release(rill__ipc_event *ipc) {
    ipc_unref(ipc);
}

/* ------------------------------------------------------------ recorders */

static void raise_to(_Atomic uint64_t *word, uint64_t v) {
    uint64_t cur = atomic_load(word);
    while (cur < v && !atomic_compare_exchange_weak(word, &cur, v)) {
    }
}

/* Whether the process a recorder's id names still runs. */
static bool id_alive(uint64_t id) {
    int32_t pid = (int32_t)(id >> 32);
    uint64_t start = rill__process_start_time(pid);
    return start != 0 && (uint32_t)start == (uint32_t)id && rill__process_alive(pid, start);
}

/* This process's entry in the page's table: the one it holds already (an
 * event opened twice), else a free one, else one whose process exited;
 * NULL when every entry belongs to a running process, or when this
 * process cannot name itself. */
static recorder *claim_recorder(ipc_page *pg) {
    int32_t pid = rill__process_id();
    uint64_t start = rill__process_start_time(pid);
    if (start == 0)
        return NULL;
    uint64_t self = (uint64_t)(uint32_t)pid << 32 | (uint32_t)start;
    for (int i = 0; i < RECORDERS; i++)
        if (atomic_load(&pg->recorders[i].id) == self)
            return &pg->recorders[i];
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < RECORDERS; i++) {
            recorder *r = &pg->recorders[i];
            uint64_t id = atomic_load(&r->id);
            if (pass == 0 ? id != 0 : id == 0 || id_alive(id))
                continue;
            if (atomic_compare_exchange_strong(&r->id, &id, self)) {
                /* The exited owner's generations go with it; a reader that
                 * sees them under our id meanwhile only waits longer. */
                atomic_store(&r->latest, 0);
                return r;
            }
        }
    }
    return NULL;
}

/* True when the record of generation gen can no longer complete: it has
 * not, and no process that took gen or a later generation still runs (an
 * entry that changes hands meanwhile counts as running). *pid receives
 * the exited process whose generation is nearest gen, or 0 when the
 * process that took gen has exited and its entry went to another. */
static bool recorders_gone(rill__ipc_event *ipc, uint64_t gen, int32_t *pid) {
    ipc_page *pg = ipc->page;
    if (atomic_load(&pg->untracked))
        return false;
    uint64_t nearest = UINT64_MAX;
    *pid = 0;
    for (int i = 0; i < RECORDERS; i++) {
        recorder *r = &pg->recorders[i];
        uint64_t id = atomic_load(&r->id);
        if (id == 0)
            continue;
        uint64_t latest = atomic_load(&r->latest);
        if (atomic_load(&r->id) != id)
            return false;
        if (latest < gen)
            continue;
        if (id_alive(id))
            return false;
        if (latest < nearest) {
            nearest = latest;
            *pid = (int32_t)(id >> 32);
        }
    }
    /* What the exited processes completed is visible by now. */
    return atomic_load(&pg->completed) < gen;
}

/* -------------------------------------------------------------- counters */

uint64_t rill__ipc_event_next_gen(rill__ipc_event *ipc) {
    ipc_page *pg = ipc->page;
    if (ipc->me == NULL && !ipc->no_entry) {
        ipc->me = claim_recorder(pg);
        ipc->no_entry = ipc->me == NULL;
        if (ipc->no_entry)
            atomic_store(&pg->untracked, 1); /* before any generation it should cover */
    }
    if (ipc->me == NULL)
        return atomic_fetch_add(&pg->recorded, 1) + 1;
    uint64_t r = atomic_load(&pg->recorded);
    for (;;) {
        /* seq_cst, both: whoever loads recorded >= r + 1 then finds our
         * entry >= r + 1 (recorders_gone). */
        raise_to(&ipc->me->latest, r + 1);
        if (atomic_compare_exchange_weak(&pg->recorded, &r, r + 1))
            return r + 1;
    }
}

uint64_t rill__ipc_event_latest(rill__ipc_event *ipc) {
    return atomic_load(&ipc->page->recorded);
}

void rill__ipc_event_complete(rill__ipc_event *ipc, uint64_t gen, int failed) {
    ipc_page *pg = ipc->page;
    if (failed)
        raise_to(&pg->failed, gen); /* before completed: a waiter that sees one sees both */
    raise_to(&pg->completed, gen);
    /* seq_cst: a Dekker pair with prepare_sleep, which raises sleepers
     * and then loads completed: either it sees our store or we see it. */
    if (atomic_load(&pg->sleepers) > 0) {
        atomic_fetch_add(&pg->wake, 1);
        rill__futex_wake_shared(&pg->wake);
    }
}

uint64_t rill__ipc_event_flow_id(const rill__ipc_event *ipc, uint64_t gen) {
    /* splitmix64's finaliser over the fields that name the page */
    uint64_t h = (uint64_t)(uint32_t)ipc->wire.name.pid << 32 ^ (uint32_t)ipc->wire.name.fd;
    h ^= ipc->wire.start_time * 0x9e3779b97f4a7c15u;
    h ^= gen * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
    return h ^ (h >> 31);
}

static int is_done(rill__ipc_event *ipc, uint64_t gen) {
    return atomic_load(&ipc->page->completed) >= gen;
}

static int has_failed(rill__ipc_event *ipc, uint64_t gen) {
    return atomic_load(&ipc->page->failed) >= gen;
}

/* The root cause of a failed wait (pid: entry.gone_pid). */
static const char *failure_sentence(rill__ipc_event *ipc, int outcome, int32_t pid, char *buf,
                                    size_t size) {
    int exporter = (int)ipc->wire.name.pid;
    if (outcome == OUT_EXPORTER_GONE)
        snprintf(buf, size,
                 "process %d, which exported the interprocess event, exited before the awaited "
                 "record completed (the exporter must keep the event alive while others use it)",
                 exporter);
    else if (outcome == OUT_RECORDER_GONE && pid != 0)
        snprintf(buf, size,
                 "process %d, which recorded the interprocess event exported by process %d, "
                 "exited before its record completed (a process must keep running until its "
                 "records of a shared event complete)",
                 (int)pid, exporter);
    else if (outcome == OUT_RECORDER_GONE)
        snprintf(buf, size,
                 "the process that recorded the interprocess event exported by process %d exited "
                 "before its record completed (a process must keep running until its records of "
                 "a shared event complete)",
                 exporter);
    else
        snprintf(buf, size,
                 "the work recorded on the interprocess event exported by process %d failed in "
                 "the recording process",
                 exporter);
    return buf;
}

/* ---------------------------------------------------------------- waiter */

static void waiter_main(void *arg);

/* Queues a wait for gen and returns the proxy number that stands for it. */
static rill_status enqueue(rill__ipc_event *ipc, uint64_t gen, uint64_t stream_id, uint64_t *seq,
                           const char *fn) {
    entry *n = rill__malloc(sizeof *n);
    if (n == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    n->next = NULL;
    n->gen = gen;
    n->stream_id = stream_id;
    n->ipc = ipc;
    n->outcome = OUT_OK;
    n->gone_pid = 0;
    rill__spinlock_lock(&waiter.lock);
    if (!waiter.started) {
        atomic_store(&waiter.stop, 0);
        rill__thread_start(&waiter.thread, "rill-ipc-wait", waiter_main, NULL);
        waiter.started = 1;
    }
    uint64_t number = n->seq = ++ipc->proxy_seq; /* n is the waiter's once unlocked */
    /* release: pairs with the acquire loads of sub_seq in waits and
     * synchronize; numbers go up in queue order, under this lock. */
    atomic_store_explicit(&ipc->proxy->q.sub_seq, number, memory_order_release);
    if (ipc->tail != NULL)
        ipc->tail->next = n;
    else
        ipc->head = n;
    ipc->tail = n;
    if (!ipc->watched) {
        ipc->watched = 1;
        atomic_fetch_add(&ipc->refs, 1);
        ipc->watch_next = waiter.watch;
        waiter.watch = ipc;
    }
    rill__spinlock_unlock(&waiter.lock);
    atomic_fetch_add(&waiter.kick, 1);
    rill__futex_wake_shared(&waiter.kick);
    *seq = number;
    return RILL_OK;
}

/* Moves the waits whose generation has completed, or can no longer
 * complete (check_alive: its exporter or its recorders are found gone), to
 * *ready in order, and unlists events left with none onto *drop.
 * waiter.lock held. */
static void collect_locked(entry **ready_tail, rill__ipc_event **drop, int check_alive) {
    for (rill__ipc_event **p = &waiter.watch; *p != NULL;) {
        rill__ipc_event *ipc = *p;
        int exporter_gone = check_alive && !ipc->is_exporter &&
                            !rill__process_alive(ipc->wire.name.pid, ipc->wire.start_time);
        while (ipc->head != NULL) {
            entry *n = ipc->head;
            if (is_done(ipc, n->gen))
                n->outcome = has_failed(ipc, n->gen) ? OUT_FAILED : OUT_OK;
            else if (exporter_gone)
                n->outcome = OUT_EXPORTER_GONE;
            else if (check_alive && recorders_gone(ipc, n->gen, &n->gone_pid))
                n->outcome = OUT_RECORDER_GONE;
            else
                break;
            ipc->head = n->next;
            if (ipc->head == NULL)
                ipc->tail = NULL;
            n->next = NULL;
            ready_tail[0]->next = n;
            ready_tail[0] = n;
        }
        if (ipc->head == NULL) {
            *p = ipc->watch_next;
            ipc->watched = 0;
            ipc->drop_next = *drop;
            *drop = ipc;
        } else {
            p = &ipc->watch_next;
        }
    }
}

/* Completes a wait's proxy number, failing it first when it must fail. */
static void finish_entry(entry *n) {
    rill__ipc_event *ipc = n->ipc;
    if (n->outcome != OUT_OK) {
        char msg[RILL__CAUSE_BYTES];
        rill__stream_fail(ipc->proxy, n->seq,
                          failure_sentence(ipc, n->outcome, n->gone_pid, msg, sizeof msg));
        rill__stream_clear_failure(ipc->proxy, n->seq + 1); /* only this wait fails */
    } else if (n->stream_id != 0) {
        /* The arrow's end, on the waiting stream's track: the record in
         * another process (or this one) released this wait now. */
        rill__trace_flow(n->stream_id, rill__ipc_event_flow_id(ipc, n->gen), true);
    }
    rill__stream_complete(ipc->proxy, n->seq);
    rill__free(n);
}

/* Registers as a sleeper on the pages of (up to cap of) the watched
 * events and returns how many words were filled; none, with *raced set,
 * when a head completed meanwhile (the caller rescans instead). */
static size_t prepare_sleep_locked(_Atomic uint32_t **words, uint32_t *expected,
                                   rill__ipc_event **pages, size_t cap, int *raced) {
    size_t n = 0;
    *raced = 0;
    for (rill__ipc_event *ipc = waiter.watch; ipc != NULL && n < cap; ipc = ipc->watch_next) {
        ipc_page *pg = ipc->page;
        atomic_fetch_add(&pg->sleepers, 1); /* seq_cst: see rill__ipc_event_complete */
        pages[n] = ipc;
        expected[n] = atomic_load(&pg->wake);
        words[n++] = &pg->wake;
        if (is_done(ipc, ipc->head->gen)) {
            *raced = 1;
            break;
        }
    }
    if (*raced) {
        for (size_t i = 0; i < n; i++)
            atomic_fetch_sub(&pages[i]->page->sleepers, 1);
        n = 0;
    }
    return n;
}

static void waiter_main(void *arg) {
    (void)arg;
    uint64_t last_check = rill__now_ns();
    for (;;) {
        entry ready_head = {0}, *ready_tail = &ready_head;
        rill__ipc_event *drop = NULL;
        _Atomic uint32_t *words[RILL__FUTEX_WAIT_MAX];
        uint32_t expected[RILL__FUTEX_WAIT_MAX];
        rill__ipc_event *pages[RILL__FUTEX_WAIT_MAX];
        uint32_t kick = atomic_load(&waiter.kick);
        uint64_t now = rill__now_ns();
        int check_alive = now - last_check >= LIVENESS_NS;
        if (check_alive)
            last_check = now;
        rill__spinlock_lock(&waiter.lock);
        collect_locked(&ready_tail, &drop, check_alive);
        if (waiter.watch == NULL && atomic_load(&waiter.stop) && ready_head.next == NULL &&
            drop == NULL) {
            rill__spinlock_unlock(&waiter.lock);
            return;
        }
        size_t n = 0;
        int sleep = ready_head.next == NULL && drop == NULL, raced = 0;
        if (sleep) {
            n = prepare_sleep_locked(words + 1, expected + 1, pages, RILL__FUTEX_WAIT_MAX - 1,
                                     &raced);
            sleep = !raced;
        }
        rill__spinlock_unlock(&waiter.lock);
        for (entry *e = ready_head.next; e != NULL;) {
            entry *next = e->next;
            finish_entry(e);
            e = next;
        }
        while (drop != NULL) {
            rill__ipc_event *ipc = drop;
            drop = ipc->drop_next;
            ipc_unref(ipc);
        }
        if (!sleep)
            continue;
        words[0] = &waiter.kick;
        expected[0] = kick;
        rill__futex_wait_any(words, expected, n + 1, LIVENESS_NS);
        for (size_t i = 0; i < n; i++)
            atomic_fetch_sub(&pages[i]->page->sleepers, 1);
    }
}

static void ipc_events_shutdown(struct rill__runtime *rt, rill__shutdown_phase phase) {
    (void)rt;
    if (phase != RILL__SHUTDOWN_STOPPED)
        return;
    rill__spinlock_lock(&waiter.lock);
    int started = waiter.started;
    rill__spinlock_unlock(&waiter.lock);
    if (!started)
        return;
    atomic_store(&waiter.stop, 1);
    atomic_fetch_add(&waiter.kick, 1);
    rill__futex_wake_shared(&waiter.kick);
    rill__thread_join(&waiter.thread);
    rill__spinlock_lock(&waiter.lock);
    waiter.started = 0;
    rill__spinlock_unlock(&waiter.lock);
}

static void ipc_events_fork_child(struct rill__runtime *rt) {
    (void)rt;
    /* The waiter thread stayed in the parent, with the waits it serves. */
    atomic_store(&waiter.lock.held, 0);
    waiter.started = 0;
    waiter.watch = NULL;
    atomic_store(&waiter.kick, 0);
    atomic_store(&waiter.stop, 0);
}

const rill__subsystem rill__ipc_event_subsystem = {
    .name = "interprocess events",
    .shutdown = ipc_events_shutdown,
    .fork_child = ipc_events_fork_child,
};

/* ------------------------------------------------------- waits, queries */

rill_status rill__ipc_event_query(rill__ipc_event *ipc, uint64_t gen, const char *fn) {
    char msg[RILL__CAUSE_BYTES];
    if (!is_done(ipc, gen))
        return RILL_NOT_READY;
    if (has_failed(ipc, gen))
        return rill__fail(RILL_ERROR_KERNEL_FAILED, "%s: %s", fn,
                          failure_sentence(ipc, OUT_FAILED, 0, msg, sizeof msg));
    return RILL_OK;
}

bool rill__ipc_event_completed_ok(rill__ipc_event *ipc, uint64_t gen) {
    return is_done(ipc, gen) && !has_failed(ipc, gen);
}

rill_status rill__ipc_event_synchronize(rill__ipc_event *ipc, uint64_t gen, int blocking,
                                        uint64_t deadline_ns, const char *fn) {
    if (is_done(ipc, gen))
        return rill__ipc_event_query(ipc, gen, fn);
    uint64_t seq = 0;
    /* A wait that its deadline ended is followed by another for the same
     * record (a caller that waits in slices): the queued one stands. */
    rill__spinlock_lock(&waiter.lock);
    if (ipc->tail != NULL && ipc->tail->gen == gen && ipc->tail->stream_id == 0)
        seq = ipc->tail->seq;
    rill__spinlock_unlock(&waiter.lock);
    if (seq == 0) {
        rill_status st = enqueue(ipc, gen, 0, &seq, fn); /* a host wait: no stream's track */
        if (st != RILL_OK)
            return st;
    }
    return rill__stream_wait_status(ipc->proxy, seq, blocking, deadline_ns, fn);
}

rill_status rill__ipc_event_wait(rill__ipc_event *ipc, rill__stream *stream, uint64_t gen,
                                 const char *fn) {
    if (is_done(ipc, gen) && !has_failed(ipc, gen))
        return RILL_OK;
    uint64_t seq;
    rill_status st = enqueue(ipc, gen, stream->q.id, &seq, fn);
    if (st != RILL_OK)
        return st;
    return rill__stream_wait_point(stream, ipc->proxy, seq, fn);
}

/* ---------------------------------------------------------------- public */

rill_status rill_event_ipc_handle(rill_event *event_h, rill_ipc_event_handle *out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_event_ipc_handle";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_ipc_event_handle to receive the handle",
            fn);
    memset(out, 0, sizeof *out);
    rill__event *event;
    rill_status st = rill__event_resolve(event_h, fn, &event);
    if (st != RILL_OK)
        return st;
    if (event->ipc == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the event was created without RILL_EVENT_INTERPROCESS; create it "
                          "with that flag to share it",
                          fn);
    rill__device *current;
    st = rill__device_resolve(NULL, fn, &current);
    if (st != RILL_OK)
        return st;
    rill__ipc_wire w = event->ipc->wire;
    rill__spinlock_lock(&event->lock);
    if (event->dev == NULL)
        event->dev = current; /* the device the handle names, for every record to come */
    rill__device *dev = event->dev;
    rill__spinlock_unlock(&event->lock);
    rill__ipc_set_device(&w, dev);
    w.bytes = event->flags;
    rill__ipc_encode(&w, out->bytes);
    return RILL_OK;
}

/* Maps the shared page a handle names and checks that it is one. */
static rill_status open_page(const rill__ipc_wire *w, ipc_page **out, const char *fn) {
    void *p;
    char why[256];
    rill__shm_map_result mapped =
        rill__shm_map_range(&w->name, PAGE_BYTES, 0, PAGE_BYTES, &p, why, sizeof why);
    if (mapped != RILL__SHM_MAPPED)
        return rill__ipc_map_failed(w, fn, "event", mapped, why);
    ipc_page *pg = p;
    if (pg->magic != PAGE_MAGIC || pg->version != PAGE_VERSION ||
        atomic_load(&pg->completed) > atomic_load(&pg->recorded)) {
        rill__shm_unmap_range(p, PAGE_BYTES);
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the shared object that the handle names is not the state of an "
                          "interprocess event; pass a handle from rill_event_ipc_handle",
                          fn);
    }
    *out = pg;
    return RILL_OK;
}

rill_status rill_event_open_ipc_handle(const rill_ipc_event_handle *handle, rill_event **out) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_event_open_ipc_handle";
    if (out == NULL)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT,
            "%s: out is NULL; pass the address of a rill_event * to receive the event", fn);
    *out = NULL;
    if (handle == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: handle is NULL; pass the bytes from rill_event_ipc_handle", fn);
    rill__ipc_wire w;
    rill_status st = rill__ipc_decode(handle->bytes, RILL__IPC_MAGIC_EVENT, fn, &w);
    if (st != RILL_OK)
        return st;
    if (w.object_bytes != PAGE_BYTES || w.offset != 0 || (w.bytes & ~(uint64_t)VALID_FLAGS) != 0 ||
        !(w.bytes & RILL_EVENT_INTERPROCESS))
        return rill__fail(RILL_ERROR_IPC,
                          "%s: the handle's fields are inconsistent (%llu bytes of state, flags "
                          "0x%llx); it was not made by rill_event_ipc_handle",
                          fn, (unsigned long long)w.object_bytes, (unsigned long long)w.bytes);
    rill__device *dev;
    st = rill__ipc_get_device(&w, fn, &dev);
    if (st != RILL_OK)
        return st;
    rill__ipc_event *ipc = rill__calloc(1, sizeof *ipc);
    if (ipc == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    atomic_init(&ipc->refs, 1);
    ipc->shm.fd = -1;
    ipc->wire = w;
    st = open_page(&w, &ipc->page, fn);
    if (st == RILL_OK)
        st = make_proxy(ipc, fn);
    rill__event *e = NULL;
    if (st == RILL_OK)
        st = rill__event_new((unsigned)w.bytes, fn, &e);
    if (st != RILL_OK) {
        ipc_free(ipc);
        return st;
    }
    /* Not yet visible to the caller: set without the lock. */
    e->ipc = ipc;
    e->dev = dev;
    *out = e->handle;
    return RILL_OK;
}
