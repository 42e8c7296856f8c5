/* SPDX-License-Identifier: MIT */
/* memory.c: ACL's memory calls and the table of the allocations they made. */
#ifndef RILL_ACL_MEMORY_H
#define RILL_ACL_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

/* An allocation of aclrtMalloc (is_host false) or aclrtMallocHost. */
struct rill__acl_region {
    uintptr_t base;
    size_t bytes;
    bool is_host;
};

/* Whether ptr lies inside memory from aclrtMalloc not yet freed. */
bool rill__acl_is_device_memory(const void *ptr);
/* The allocation of aclrtMalloc or aclrtMallocHost, not yet freed, that
 * holds ptr into *out; false when there is none. */
bool rill__acl_memory_find(const void *ptr, struct rill__acl_region *out);
/* Frees every allocation of aclrtMalloc on device ordinal (a device
 * reset); ACL_ERROR_BAD_ALLOC, with a message, when it cannot list them. */
aclError rill__acl_memory_release_device(const char *call, int ordinal);
/* Forgets every allocation: aclFinalize's rill_shutdown released them. */
void rill__acl_memory_forget_all(void);

#endif /* RILL_ACL_MEMORY_H */
