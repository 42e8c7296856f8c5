/* SPDX-License-Identifier: MIT */
/*
 * data_buffer.c: aclDataBuffer, an address and a size that describe a
 * caller's memory, as a handle of handle.c's table. Its calls are
 * declared in acl/acl_base.h; this file declares nothing else.
 */
#ifndef RILL_ACL_DATA_BUFFER_H
#define RILL_ACL_DATA_BUFFER_H

#include "acl/acl_base.h"

#endif /* RILL_ACL_DATA_BUFFER_H */
