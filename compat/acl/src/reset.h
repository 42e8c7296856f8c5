/* SPDX-License-Identifier: MIT */
/* reset.c: what aclrtResetDevice and aclrtResetDeviceForce release: each
 * device's count of aclrtSetDevice calls, and the streams and events
 * created through ACL, which a reset of their device destroys. */
#ifndef RILL_ACL_RESET_H
#define RILL_ACL_RESET_H

#include <stdbool.h>

#include "acl/acl_rt.h"
#include "rill.h"

/* Counts an aclrtSetDevice of device ordinal (false: no memory for it;
 * the call then fails with ACL_ERROR_BAD_ALLOC). */
bool rill__acl_device_set(int ordinal);
/* Notes a stream or event that ACL created, for the reset of its device
 * (false: no memory: the caller destroys it and fails). */
bool rill__acl_note_stream(rill_stream *stream);
bool rill__acl_note_event(rill_event *event);
/* Drops the note of a stream or event destroyed through ACL. */
void rill__acl_forget_stream(rill_stream *stream);
void rill__acl_forget_event(rill_event *event);
/* aclrtResetDevice (force false) or aclrtResetDeviceForce of dev, device
 * ordinal: the count of ordinal goes down by one (force: to 0); when it
 * reaches 0 the device's work is waited for and its streams, events and
 * aclrtMalloc memory are released. A count already 0:
 * ACL_ERROR_INVALID_PARAM with a message. */
aclError rill__acl_device_reset(const char *call, rill_device *dev, int ordinal, bool force);
/* Drops every note and count (aclFinalize, after rill_shutdown). */
void rill__acl_resets_forget_all(void);

#endif /* RILL_ACL_RESET_H */
