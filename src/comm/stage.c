/* SPDX-License-Identifier: MIT */
/* Staging buffers for collectives on a CUDA device's memory (stage.h).
 * Invariants: a buffer on the free list has no hold and was made by the
 * current runtime (its epoch); a buffer in use is on no list, or on the
 * lost list once its transport keeps it for good; a buffer made by an
 * earlier runtime (its epoch is old) is never reused: its memory went with
 * that runtime. */
#include "comm/stage.h"

#include "mem/memory.h"
#include "util/alloc.h"

/* The smallest buffer made: small collectives share one size. */
#define STAGE_MIN_BYTES ((size_t)4096)

struct rill__comm_stage {
    /* immutable once made */
    void *host; /* page-locked and registered: rill__mem_host_alloc */
    size_t bytes;
    rill__device *dev; /* whose copies it serves */
    uint32_t epoch;    /* stages.epoch when it was made */
    /* while in use */
    _Atomic int holds;             /* the stream's and the transport's */
    rill__waiter waiter;           /* the stream's hold, on its stream */
    struct rill__comm_stage *next; /* guarded by stages.lock: the free or lost list */
};

static struct {
    /* a spin lock: a fork's child resets it; never held across a call */
    rill__spinlock lock;
    /* guarded by lock */
    rill__comm_stage *free; /* idle, reusable */
    rill__comm_stage *lost; /* kept for good: reachable, never reused */
    uint32_t epoch;         /* moves on at rill_shutdown and in a fork's child */
} stages;

/* bytes rounded up to a power of two, at least STAGE_MIN_BYTES; bytes
 * itself when that does not fit. */
static size_t round_up(size_t bytes) {
    size_t n = STAGE_MIN_BYTES;
    while (n < bytes && n <= SIZE_MAX / 2)
        n *= 2;
    return n < bytes ? bytes : n;
}

rill_status rill__comm_stage_take(rill__device *dev, size_t bytes, rill__comm_stage **out) {
    *out = NULL;
    /* The smallest idle buffer of dev that fits. */
    rill__spinlock_lock(&stages.lock);
    rill__comm_stage **best = NULL;
    for (rill__comm_stage **p = &stages.free; *p != NULL; p = &(*p)->next)
        if ((*p)->dev == dev && (*p)->bytes >= bytes &&
            (best == NULL || (*p)->bytes < (*best)->bytes))
            best = p;
    rill__comm_stage *st = NULL;
    if (best != NULL) {
        st = *best;
        *best = st->next;
    }
    uint32_t epoch = stages.epoch;
    rill__spinlock_unlock(&stages.lock);
    if (st == NULL) {
        st = rill__calloc(1, sizeof *st);
        if (st == NULL)
            return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory");
        st->bytes = round_up(bytes);
        rill_status s = rill__mem_host_alloc(dev, st->bytes, &st->host);
        if (s != RILL_OK) {
            rill__free(st);
            return s;
        }
        st->dev = dev;
        st->epoch = epoch;
    }
    st->next = NULL;
    atomic_store_explicit(&st->holds, 2, memory_order_relaxed);
    *out = st;
    return RILL_OK;
}

void *rill__comm_stage_host(const rill__comm_stage *st) {
    return st->host;
}

/* Both holds are let go: st goes back to the free list, or, when its
 * runtime has gone, away (its memory went with that runtime). */
static void give_back(rill__comm_stage *st) {
    rill__spinlock_lock(&stages.lock);
    bool keep = st->epoch == stages.epoch;
    if (keep) {
        st->next = stages.free;
        stages.free = st;
    }
    rill__spinlock_unlock(&stages.lock);
    if (!keep)
        rill__free(st);
}

void rill__comm_stage_release(rill__comm_stage *st) {
    /* acq_rel: the last release sees every use made under the other hold
     * (a copy's completion, the transport's last test) before st is
     * reused. */
    if (atomic_fetch_sub_explicit(&st->holds, 1, memory_order_acq_rel) == 1)
        give_back(st);
}

static void stream_reached(rill__waiter *w) {
    rill__comm_stage *st = (rill__comm_stage *)((char *)w - offsetof(rill__comm_stage, waiter));
    rill__comm_stage_release(st);
}

void rill__comm_stage_release_after(rill__comm_stage *st, rill__stream *s, uint64_t seq) {
    st->waiter.seq = seq;
    st->waiter.fn = stream_reached;
    if (seq == 0 || !rill__stream_add_waiter(s, &st->waiter))
        rill__comm_stage_release(st);
}

void rill__comm_stage_lose(rill__comm_stage *st) {
    /* The transport's hold is never let go, so st never reaches the free
     * list; the list keeps it reachable (leak checkers). The stream's hold
     * may still be let go meanwhile, which only counts down. */
    rill__spinlock_lock(&stages.lock);
    st->next = stages.lost;
    stages.lost = st;
    rill__spinlock_unlock(&stages.lock);
}

void rill__comm_stage_trim(void) {
    rill__spinlock_lock(&stages.lock);
    rill__comm_stage *idle = stages.free;
    stages.free = NULL;
    rill__spinlock_unlock(&stages.lock);
    while (idle != NULL) {
        rill__comm_stage *st = idle;
        idle = st->next;
        (void)rill_free_host(st->host);
        rill__free(st);
    }
}

void rill__comm_stage_shutdown(void) {
    rill__spinlock_lock(&stages.lock);
    rill__comm_stage *idle = stages.free;
    stages.free = NULL;
    stages.epoch++;
    rill__spinlock_unlock(&stages.lock);
    while (idle != NULL) {
        rill__comm_stage *st = idle;
        idle = st->next;
        rill__free(st);
    }
}

void rill__comm_stage_forget(void) {
    /* The parent's memory stays the parent's: its idle buffers join the
     * lost ones, reachable and never reused. */
    atomic_store(&stages.lock.held, 0);
    while (stages.free != NULL) {
        rill__comm_stage *st = stages.free;
        stages.free = st->next;
        st->next = stages.lost;
        stages.lost = st;
    }
    stages.epoch++;
}
