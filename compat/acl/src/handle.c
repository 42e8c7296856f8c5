/* SPDX-License-Identifier: MIT */
/*
 * The handle table of the op API's objects, of contexts and of models
 * built by hand (see handle.h), modelled on rill's own (docs/design.md,
 * "Handles") but simpler, for calls that are not on a hot path: one mutex guards the
 * table, and callers copy what they need from an object while holding it.
 * A handle is generation << 32 | MARK | slot << 5 | kind. MARK (bit 31)
 * and the kinds keep it apart from rill's handles, whose slots stay below
 * 2^26 and whose kinds below 0xa, so that a stream or event passed as a
 * tensor is refused as what it is.
 *
 * Invariants (table_lock held): slots[0..count) were handed out, count <=
 * capacity <= MAX_SLOTS; a slot's tag is generation << 5 | kind while in
 * use and generation << 5 while free (then it is on the free list, once);
 * closing increments the generation (skipping 0), so a closed handle never
 * matches its slot again until the generation wraps.
 */
#include "handle.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"

#define KIND_BITS  5u
#define KIND_MASK  ((1u << KIND_BITS) - 1u)
#define MARK       (UINT64_C(1) << 31)
#define INDEX_BITS 26u /* bits 5 to 30 */
#define MAX_SLOTS  (1u << INDEX_BITS)
#define NO_SLOT    UINT32_MAX

struct slot {
    uint64_t tag;
    void *obj;          /* borrowed: the owner frees it after closing the slot */
    uint32_t next_free; /* the next free slot while this one is free */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
/* guarded by table_lock */
static struct slot *slots; /* owned; kept for the process's life */
static uint32_t count, capacity;
static uint32_t free_head = NO_SLOT;

void rill__acl_handles_lock(void) {
    if (pthread_mutex_lock(&table_lock) != 0)
        abort();
}

void rill__acl_handles_unlock(void) {
    if (pthread_mutex_unlock(&table_lock) != 0)
        abort();
}

static bool is_kind(unsigned kind) {
    return kind == RILL_ACL_TENSOR || kind == RILL_ACL_SCALAR || kind == RILL_ACL_EXECUTOR ||
           kind == RILL_ACL_CONTEXT || kind == RILL_ACL_MODEL || kind == RILL_ACL_INT_ARRAY ||
           kind == RILL_ACL_DATA_BUFFER;
}

/* Splits handle; false when its bits cannot be one of this table's. */
static bool decode(const void *handle, uint32_t *gen, uint32_t *index, unsigned *kind) {
    uint64_t v = (uint64_t)(uintptr_t)handle;
    *gen = (uint32_t)(v >> 32);
    *index = (uint32_t)(v >> KIND_BITS) & ((1u << INDEX_BITS) - 1u);
    *kind = (unsigned)(v & KIND_MASK);
    return (v & MARK) != 0 && *gen != 0 && is_kind(*kind);
}

/* A free slot's index, or NO_SLOT when the table cannot grow (lock held). */
static uint32_t take_slot_locked(void) {
    if (free_head != NO_SLOT) {
        uint32_t index = free_head;
        free_head = slots[index].next_free;
        return index;
    }
    if (count == capacity) {
        if (capacity == MAX_SLOTS)
            return NO_SLOT;
        uint32_t grown = capacity ? capacity * 2 : 64;
        if (grown > MAX_SLOTS)
            grown = MAX_SLOTS;
        struct slot *s = realloc(slots, (size_t)grown * sizeof *s);
        if (!s)
            return NO_SLOT;
        slots = s;
        capacity = grown;
    }
    slots[count] = (struct slot){.tag = (uint64_t)1 << KIND_BITS, .next_free = NO_SLOT};
    return count++;
}

void *rill__acl_handle_open(rill__acl_kind kind, void *obj) {
    rill__acl_handles_lock();
    uint32_t index = take_slot_locked();
    void *handle = NULL;
    if (index != NO_SLOT) {
        struct slot *s = &slots[index];
        uint64_t gen = s->tag >> KIND_BITS;
        s->tag = gen << KIND_BITS | (uint64_t)kind;
        s->obj = obj;
        handle =
            (void *)(uintptr_t)(gen << 32 | MARK | (uint64_t)index << KIND_BITS | (uint64_t)kind);
    }
    rill__acl_handles_unlock();
    return handle;
}

void *rill__acl_handle_get_locked(const void *handle, rill__acl_kind kind) {
    uint32_t gen, index;
    unsigned k;
    if (!decode(handle, &gen, &index, &k) || k != (unsigned)kind || index >= count)
        return NULL;
    const struct slot *s = &slots[index];
    return s->tag == ((uint64_t)gen << KIND_BITS | k) ? s->obj : NULL;
}

void rill__acl_handle_close_locked(const void *handle) {
    uint32_t gen, index;
    unsigned k;
    if (!decode(handle, &gen, &index, &k) || index >= count)
        return;
    struct slot *s = &slots[index];
    if (s->tag != ((uint64_t)gen << KIND_BITS | k))
        return;
    uint32_t next = gen + 1u;
    s->tag = (uint64_t)(next ? next : 1u) << KIND_BITS;
    s->obj = NULL;
    s->next_free = free_head;
    free_head = index;
}

bool rill__acl_handle_is_ours(const void *handle) {
    uint32_t gen, index;
    unsigned k;
    return decode(handle, &gen, &index, &k);
}

void *rill__acl_handle_take(const void *handle, rill__acl_kind kind) {
    rill__acl_handles_lock();
    void *obj = rill__acl_handle_get_locked(handle, kind);
    if (obj)
        rill__acl_handle_close_locked(handle);
    rill__acl_handles_unlock();
    return obj;
}

/* What handle was, for a refusal: 0 when none of this table's handles (its
 * slot was never handed out, or never had its generation); else its kind
 * (lock held). */
static unsigned kind_of_locked(const void *handle) {
    uint32_t gen, index;
    unsigned k;
    if (!decode(handle, &gen, &index, &k) || index >= count)
        return 0;
    return gen <= (uint32_t)(slots[index].tag >> KIND_BITS) ? k : 0;
}

/* A kind in sentences: "a tensor from aclCreateTensor", "no tensor from
 * aclCreateTensor". */
static const char *kind_name(unsigned kind) {
    switch (kind) {
    case RILL_ACL_TENSOR:
        return "tensor from aclCreateTensor";
    case RILL_ACL_SCALAR:
        return "scalar from aclCreateScalar";
    case RILL_ACL_CONTEXT:
        return "context from aclrtCreateContext";
    case RILL_ACL_MODEL:
        return "model from aclmdlRIBuildBegin or aclmdlRICaptureEnd";
    case RILL_ACL_INT_ARRAY:
        return "array from aclCreateIntArray";
    case RILL_ACL_DATA_BUFFER:
        return "data buffer from aclCreateDataBuffer";
    default:
        return "executor from an op's GetWorkspaceSize";
    }
}

aclnnStatus rill__acl_handle_fail(const char *call, const char *name, const void *handle,
                                  rill__acl_kind kind) {
    if (!handle)
        return rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", call, name);
    rill__acl_handles_lock();
    unsigned was = kind_of_locked(handle);
    rill__acl_handles_unlock();
    if (was == 0)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s (%p) is no %s, nor any other object of this layer (a "
                              "stream, an event or a memory address, say)",
                              call, name, handle, kind_name(kind));
    if (was != (unsigned)kind)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s (%p) is %s %s, no %s", call, name,
                              handle, was == RILL_ACL_EXECUTOR ? "an" : "a", kind_name(was),
                              kind_name(kind));
    if (kind == RILL_ACL_EXECUTOR)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s (%p) has run or was destroyed: an executor runs once "
                              "unless aclSetAclOpExecutorRepeatable made it repeatable; make "
                              "another with the op's GetWorkspaceSize",
                              call, name, handle);
    return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                          "%s: %s (%p) was destroyed by %s; create another", call, name, handle,
                          kind == RILL_ACL_TENSOR        ? "aclDestroyTensor"
                          : kind == RILL_ACL_SCALAR      ? "aclDestroyScalar"
                          : kind == RILL_ACL_MODEL       ? "aclmdlRIDestroy"
                          : kind == RILL_ACL_INT_ARRAY   ? "aclDestroyIntArray"
                          : kind == RILL_ACL_DATA_BUFFER ? "aclDestroyDataBuffer"
                                                         : "aclrtDestroyContext");
}
