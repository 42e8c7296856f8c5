/* SPDX-License-Identifier: MIT */
/* memory.c: ACL's memory calls and the table of the allocations they made. */
#ifndef RILL_ACL_MEMORY_H
#define RILL_ACL_MEMORY_H

#include <stdbool.h>

/* Whether ptr lies inside memory from aclrtMalloc not yet freed. */
bool rill__acl_is_device_memory(const void *ptr);
/* Forgets every allocation: aclFinalize's rill_shutdown released them. */
void rill__acl_memory_forget_all(void);

#endif /* RILL_ACL_MEMORY_H */
