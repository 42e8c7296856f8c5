/* SPDX-License-Identifier: MIT */
/* report.c: callbacks that a stream hands to a thread of the program
 * (aclrtSubscribeReport, aclrtLaunchCallback, aclrtProcessReport,
 * aclrtUnSubscribeReport), and aclrtLaunchHostFunc. */
#ifndef RILL_ACL_REPORT_H
#define RILL_ACL_REPORT_H

#include "acl/acl_rt.h"

/* Ends every subscription, as aclrtUnSubscribeReport does, on the calling
 * thread (aclFinalize, before rill_shutdown waits for all work). */
void rill__acl_reports_release_all(void);

#endif /* RILL_ACL_REPORT_H */
