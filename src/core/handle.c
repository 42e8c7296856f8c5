/* SPDX-License-Identifier: MIT */
/* The handle table (see handle.h): slots in chunks that are never freed or
 * moved, a free list of closed slots, and lock-free lookups. Part of the
 * core; below every other module, which name their objects to users only
 * through it.
 *
 * Invariants (table.lock held): every slot of index < table.next_index is
 * either in use (its tag's kind is not 0) or on the free list, once;
 * table.open = the slots in use. */
#include "core/handle.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "platform/thread.h"
#include "util/alloc.h"
#include "util/status.h"

#define KIND_BITS   4u
#define INDEX_BITS  26u /* 2^26 handles open at once */
#define CHUNK_SHIFT 12u /* 4096 slots per chunk */
#define CHUNK_SLOTS (1u << CHUNK_SHIFT)
#define MAX_CHUNKS  (1u << (INDEX_BITS - CHUNK_SHIFT))
#define NO_SLOT     UINT32_MAX

_Static_assert(sizeof(void *) == 8, "handles carry a 32-bit generation beside the slot");
_Static_assert(RILL__HANDLE_KINDS <= (1u << KIND_BITS), "kinds fit their bits");

typedef struct slot {
    /* generation << KIND_BITS | kind; kind 0 while the slot is free.
     * Stored with release after obj (open) and before the slot is reused
     * (close), loaded with acquire by lookups. */
    _Atomic uint64_t tag;
    _Atomic(void *) obj;
    uint32_t next_free; /* guarded by table.lock */
} slot;

static struct {
    rill__spinlock lock;
    /* While rill_shutdown runs: which threads may still look handles up
     * (rill__handle_set_closing); NULL otherwise. On the line that every
     * lookup reads (chunks). */
    _Atomic(bool (*)(void)) closing;
    /* written under lock; read without it (acquire) by lookups */
    _Atomic(slot *) chunks[MAX_CHUNKS];
    /* guarded by lock */
    uint32_t next_index; /* slots below it have been handed out at least once */
    uint32_t free_head;  /* closed slots, linked by next_free; NO_SLOT: none */
    uint64_t open;
    int ready; /* free_head initialised */
} table = {.lock = RILL__SPINLOCK_RANKED(RILL__RANK_HANDLES)};

static uint64_t encode(uint32_t gen, uint32_t index, rill__handle_kind kind) {
    return (uint64_t)gen << 32 | (uint64_t)index << KIND_BITS | (uint64_t)kind;
}

/* The slot of index, or NULL when its chunk does not exist. */
static slot *slot_at(uint32_t index) {
    if (index >= (1u << INDEX_BITS))
        return NULL;
    /* acquire: pairs with the release store that published the chunk. */
    slot *chunk = atomic_load_explicit(&table.chunks[index >> CHUNK_SHIFT], memory_order_acquire);
    return chunk != NULL ? &chunk[index & (CHUNK_SLOTS - 1)] : NULL;
}

/* A free slot's index (table.lock held); NO_SLOT when the table is full or
 * out of memory. */
static uint32_t take_slot_locked(void) {
    if (!table.ready) {
        table.free_head = NO_SLOT;
        table.ready = 1;
    }
    if (table.free_head != NO_SLOT) {
        uint32_t index = table.free_head;
        table.free_head = slot_at(index)->next_free;
        return index;
    }
    uint32_t index = table.next_index;
    if (index >= (1u << INDEX_BITS))
        return NO_SLOT;
    if (slot_at(index) == NULL) {
        slot *chunk = rill__calloc(CHUNK_SLOTS, sizeof *chunk);
        if (chunk == NULL)
            return NO_SLOT;
        for (uint32_t i = 0; i < CHUNK_SLOTS; i++)
            atomic_init(&chunk[i].tag, (uint64_t)1 << KIND_BITS); /* generation 1, free */
        /* release: publishes the initialised slots to lookups. */
        atomic_store_explicit(&table.chunks[index >> CHUNK_SHIFT], chunk, memory_order_release);
    }
    table.next_index = index + 1;
    return index;
}

bool rill__handle_open(rill__handle_kind kind, void *obj, void **out) {
    rill__spinlock_lock(&table.lock);
    uint32_t index = take_slot_locked();
    if (index == NO_SLOT) {
        rill__spinlock_unlock(&table.lock);
        *out = NULL;
        return false;
    }
    slot *s = slot_at(index);
    uint32_t gen = (uint32_t)(atomic_load_explicit(&s->tag, memory_order_relaxed) >> KIND_BITS);
    /* release: see rill__handle_get. */
    atomic_store_explicit(&s->obj, obj, memory_order_release);
    /* release: a lookup that sees the tag sees obj. */
    atomic_store_explicit(&s->tag, (uint64_t)gen << KIND_BITS | (uint64_t)kind,
                          memory_order_release);
    table.open++;
    rill__spinlock_unlock(&table.lock);
    *out = (void *)(uintptr_t)encode(gen, index, kind);
    return true;
}

/* Splits a handle into its generation, index and kind; false when the
 * bits cannot be a handle. */
static bool decode(const void *handle, uint32_t *gen, uint32_t *index, rill__handle_kind *kind) {
    uint64_t v = (uint64_t)(uintptr_t)handle;
    *gen = (uint32_t)(v >> 32);
    *index = (uint32_t)(v >> KIND_BITS) & ((1u << (32u - KIND_BITS)) - 1u);
    *kind = (rill__handle_kind)(v & ((1u << KIND_BITS) - 1u));
    return *gen != 0 && *kind != 0 && *kind < RILL__HANDLE_KINDS;
}

/* The object behind handle, or NULL; while closing, for every thread. */
RILL_HOT static void *lookup(const void *handle, rill__handle_kind kind) {
    uint32_t gen, index;
    rill__handle_kind k;
    if (!decode(handle, &gen, &index, &k) || k != kind)
        return NULL;
    slot *s = slot_at(index);
    if (s == NULL)
        return NULL;
    uint64_t tag = (uint64_t)gen << KIND_BITS | (uint64_t)kind;
    /* acquire: pairs with the release store of the tag in open. */
    if (atomic_load_explicit(&s->tag, memory_order_acquire) != tag)
        return NULL;
    /* acquire: pairs with the release store of obj in open, which comes
     * after this generation's close: when obj is a later owner's, the tag
     * read again below is that close's or later. */
    void *obj = atomic_load_explicit(&s->obj, memory_order_acquire);
    /* The slot may have been closed and opened for another object (of any
     * kind) between the two loads: obj is ours only if the tag is still. */
    if (atomic_load_explicit(&s->tag, memory_order_relaxed) != tag)
        return NULL;
    return obj;
}

RILL_HOT void *rill__handle_get(const void *handle, rill__handle_kind kind) {
    void *obj = lookup(handle, kind);
    /* relaxed: rill_shutdown stores it before its heavy barrier, and a
     * call looks handles up after its light barrier (core/calls.h): either
     * this load sees it, or the shutdown waits for this call. */
    bool (*may_use)(void) = atomic_load_explicit(&table.closing, memory_order_relaxed);
    if (__builtin_expect(may_use != NULL, 0) && obj != NULL && !may_use())
        return NULL;
    return obj;
}

void rill__handle_set_closing(bool (*may_use)(void)) {
    atomic_store(&table.closing, may_use);
}

rill__handle_kind rill__handle_kind_of(const void *handle) {
    uint32_t gen, index;
    rill__handle_kind k;
    if (!decode(handle, &gen, &index, &k))
        return (rill__handle_kind)0;
    /* Only bits that name a slot handed out, with a generation it had or
     * has, were a handle: other pointers rarely pass this. */
    slot *s = slot_at(index);
    if (s == NULL)
        return (rill__handle_kind)0;
    uint64_t tag = atomic_load_explicit(&s->tag, memory_order_acquire);
    uint32_t now = (uint32_t)(tag >> KIND_BITS);
    bool handed_out = (tag & ((1u << KIND_BITS) - 1u)) != 0 || now > 1;
    return handed_out && gen <= now ? k : (rill__handle_kind)0;
}

/* Closes slot index if it is in use under handle's generation and kind
 * (table.lock held). */
static void close_locked(uint32_t index, uint64_t expected_tag) {
    slot *s = slot_at(index);
    uint64_t tag = atomic_load_explicit(&s->tag, memory_order_relaxed);
    if (tag != expected_tag || (tag & ((1u << KIND_BITS) - 1u)) == 0)
        return;
    uint32_t gen = (uint32_t)(tag >> KIND_BITS) + 1u;
    if (gen == 0)
        gen = 1;
    /* release: orders nothing a lookup needs, but keeps a lookup that
     * still sees the old tag from seeing a later owner's obj. */
    atomic_store_explicit(&s->tag, (uint64_t)gen << KIND_BITS, memory_order_release);
    atomic_store_explicit(&s->obj, NULL, memory_order_relaxed);
    s->next_free = table.free_head;
    table.free_head = index;
    table.open--;
}

void rill__handle_close(const void *handle) {
    uint32_t gen, index;
    rill__handle_kind kind;
    if (!decode(handle, &gen, &index, &kind) || slot_at(index) == NULL)
        return;
    rill__spinlock_lock(&table.lock);
    close_locked(index, (uint64_t)gen << KIND_BITS | (uint64_t)kind);
    rill__spinlock_unlock(&table.lock);
}

void rill__handle_close_all(rill__handle_kind keep) {
    rill__spinlock_lock(&table.lock);
    for (uint32_t i = 0; i < table.next_index; i++) {
        uint64_t tag = atomic_load_explicit(&slot_at(i)->tag, memory_order_relaxed);
        if (keep == 0 || (tag & ((1u << KIND_BITS) - 1u)) != (uint64_t)keep)
            close_locked(i, tag);
    }
    rill__spinlock_unlock(&table.lock);
}

void rill__handle_fork_prepare(void) {
    rill__spinlock_lock(&table.lock);
}

void rill__handle_fork_release(void) {
    rill__spinlock_unlock(&table.lock);
}

uint64_t rill__handle_count(void) {
    rill__spinlock_lock(&table.lock);
    uint64_t n = table.open;
    rill__spinlock_unlock(&table.lock);
    return n;
}

static const char *kind_name(rill__handle_kind kind) {
    static const char *const names[RILL__HANDLE_KINDS] = {
        [RILL__HANDLE_DEVICE] = "device",  [RILL__HANDLE_STREAM] = "stream",
        [RILL__HANDLE_EVENT] = "event",    [RILL__HANDLE_KERNEL] = "kernel",
        [RILL__HANDLE_GRAPH] = "graph",    [RILL__HANDLE_NODE] = "graph node",
        [RILL__HANDLE_EXEC] = "graph exec"};
    return kind > 0 && kind < RILL__HANDLE_KINDS ? names[kind] : "handle";
}

rill_status rill__handle_fail(const char *fn, const char *arg, const void *handle,
                              rill__handle_kind kind) {
    rill__handle_kind is = rill__handle_kind_of(handle);
    const char *an = strchr("aeiou", kind_name(kind)[0]) != NULL ? "an" : "a";
    if (handle == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL; pass %s %s", fn, arg, an,
                          kind_name(kind));
    if (atomic_load(&table.closing) != NULL && lookup(handle, kind) != NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s belongs to the runtime that rill_shutdown is ending on another "
                          "thread; calls made while it runs are refused, and its handles are "
                          "stale once it returns",
                          fn, arg);
    if (is == kind)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is a %s that was destroyed (or one from before rill_shutdown); "
                          "pass a live one",
                          fn, arg, kind_name(kind));
    if (is != 0)
        return rill__fail(
            RILL_ERROR_INVALID_ARGUMENT, "%s: %s is %s %s handle where a %s is needed", fn, arg,
            strchr("aeiou", kind_name(is)[0]) != NULL ? "an" : "a", kind_name(is), kind_name(kind));
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: %s (%p) is not a handle that rill gave out; pass %s %s", fn, arg, handle,
                      an, kind_name(kind));
}
