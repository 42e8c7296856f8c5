/* SPDX-License-Identifier: MIT */
/* stream.c: the stream calls beyond create, destroy and synchronize:
 * waits with a time limit, queries, priorities and flags, failure mode. */
#ifndef RILL_ACL_STREAM_H
#define RILL_ACL_STREAM_H

#include <stdint.h>

#include "acl/acl_rt.h"
#include "rill.h"

/* Notes the ACL_STREAM_* flags stream was created with, for
 * aclrtStreamGetFlags: ACL_ERROR_BAD_ALLOC (with a message) when there is
 * no memory for the note. */
aclError rill__acl_stream_note_flags(const char *call, aclrtStream stream, uint32_t flags);
/* Drops stream's note (at its destruction), or every note (aclFinalize). */
void rill__acl_stream_forget(aclrtStream stream);
void rill__acl_streams_forget_all(void);

/* rill's waits in the shape rill__acl_wait takes (report.h): with no
 * limit (UINT64_MAX) the plain synchronize, which may run the awaited
 * work on the calling thread; else rill_*_synchronize_for. obj NULL is the
 * current stream or device. */
rill_status rill__acl_wait_stream(void *stream, uint64_t timeout_ns);
rill_status rill__acl_wait_event(void *event, uint64_t timeout_ns);
rill_status rill__acl_wait_device(void *device, uint64_t timeout_ns);

/* ACL's timeout in ms as rill's nanoseconds: -1 (no limit) gives
 * UINT64_MAX; below -1 is ACL_ERROR_RT_PARAM_INVALID with a message. */
aclError rill__acl_timeout_ns(const char *call, int32_t timeout, uint64_t *ns);

#endif /* RILL_ACL_STREAM_H */
