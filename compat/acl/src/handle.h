/* SPDX-License-Identifier: MIT */
/*
 * handle.c: the handles of this layer's own objects (aclTensor, aclScalar,
 * aclIntArray, aclOpExecutor, aclrtContext, aclDataBuffer, and aclmdlRI built by hand). A handle is
 * not the object's address but a slot of this layer's table, the slot's generation and the object's
 * kind, so that a destroyed, foreign or wrong-kind handle resolves to NULL without anything being
 * read through it, even when a newer object took the same address or the same slot.
 */
#ifndef RILL_ACL_HANDLE_H
#define RILL_ACL_HANDLE_H

#include <stdbool.h>

#include "aclnn/aclnn_base.h"

/* The kinds; their values are none of rill's own handles' kinds. */
typedef enum rill__acl_kind {
    RILL_ACL_TENSOR = 0xa,
    RILL_ACL_SCALAR = 0xb,
    RILL_ACL_EXECUTOR = 0xc,
    RILL_ACL_CONTEXT = 0xd,
    RILL_ACL_MODEL = 0xe,
    RILL_ACL_INT_ARRAY = 0xf,
    RILL_ACL_DATA_BUFFER = 0x10
} rill__acl_kind;

/* A new handle for obj (owned by the caller until the handle is closed),
 * or NULL when the table cannot grow. */
void *rill__acl_handle_open(rill__acl_kind kind, void *obj);

/* The table's lock: an object found by rill__acl_handle_get_locked stays
 * whole until the lock is released, so that callers copy what they need
 * from it (or change it) while another thread may be destroying it. Held
 * briefly; no rill call and no ACL failure is made with it held. */
void rill__acl_handles_lock(void);
void rill__acl_handles_unlock(void);
/* The live object of kind that handle names, or NULL (table locked). */
void *rill__acl_handle_get_locked(const void *handle, rill__acl_kind kind);
/* Closes handle (table locked): later lookups of it return NULL. */
void rill__acl_handle_close_locked(const void *handle);
/* Looks handle up and closes it in one step: the object, now the caller's
 * to free, or NULL. */
void *rill__acl_handle_take(const void *handle, rill__acl_kind kind);

/* Whether handle's bits are those of this table's handles (live or not),
 * not of rill's own handles nor an address. */
bool rill__acl_handle_is_ours(const void *handle);

/* ACLNN_ERR_PARAM_NULLPTR for a NULL handle, else ACLNN_ERR_PARAM_INVALID,
 * with the sentence "<call>: <name> (<handle>) ..." that says whether it
 * was destroyed, is an object of another kind or none of this layer's. */
aclnnStatus rill__acl_handle_fail(const char *call, const char *name, const void *handle,
                                  rill__acl_kind kind);

#endif /* RILL_ACL_HANDLE_H */
