/* SPDX-License-Identifier: MIT */
/* report.c: callbacks that a stream hands to a thread of the program
 * (aclrtSubscribeReport, aclrtLaunchCallback, aclrtProcessReport,
 * aclrtUnSubscribeReport), and host functions that it hands to one
 * (aclrtSubscribeHostFunc, aclrtLaunchHostFunc, aclrtProcessHostFunc,
 * aclrtUnSubscribeHostFunc). */
#ifndef RILL_ACL_REPORT_H
#define RILL_ACL_REPORT_H

#include <stdint.h>

#include "acl/acl_rt.h"
#include "rill.h"

/* Ends every subscription, as aclrtUnSubscribeReport does, on the calling
 * thread (aclFinalize, before rill_shutdown waits for all work). */
void rill__acl_reports_release_all(void);
/* Frees the callbacks that never ran because rill skipped them (their
 * stream failed first): aclFinalize, after rill_shutdown, when no stream's
 * work can run any more. */
void rill__acl_reports_forget_all(void);

/* One of rill's waits: obj's work (a stream, an event or a device) for
 * timeout_ns at most (RILL_NOT_READY after it), or with no limit when
 * timeout_ns is UINT64_MAX. */
typedef rill_status (*rill__acl_wait_fn)(void *obj, uint64_t timeout_ns);

/* Waits with wait. On a thread subscribed to a stream, it waits in slices
 * of at most 1 ms and runs the callbacks handed to the thread between
 * them, so that the thread never waits for a callback only it would run. */
rill_status rill__acl_wait(rill__acl_wait_fn wait, void *obj, uint64_t timeout_ns);

#endif /* RILL_ACL_REPORT_H */
