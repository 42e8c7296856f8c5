/* SPDX-License-Identifier: MIT */
/* stream.c: the stream calls beyond create, destroy and synchronize:
 * waits with a time limit, queries, priorities and flags, failure mode. */
#ifndef RILL_ACL_STREAM_H
#define RILL_ACL_STREAM_H

#include <stdint.h>

#include "acl/acl_rt.h"

/* Notes the ACL_STREAM_* flags stream was created with, for
 * aclrtStreamGetFlags: ACL_ERROR_BAD_ALLOC (with a message) when there is
 * no memory for the note. */
aclError rill__acl_stream_note_flags(const char *call, aclrtStream stream, uint32_t flags);
/* Drops stream's note (at its destruction), or every note (aclFinalize). */
void rill__acl_stream_forget(aclrtStream stream);
void rill__acl_streams_forget_all(void);

/* ACL's timeout in ms as rill's nanoseconds: -1 (no limit) gives
 * UINT64_MAX; below -1 is ACL_ERROR_RT_PARAM_INVALID with a message. */
aclError rill__acl_timeout_ns(const char *call, int32_t timeout, uint64_t *ns);

#endif /* RILL_ACL_STREAM_H */
