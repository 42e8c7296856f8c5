/* SPDX-License-Identifier: MIT */
/* error.c: the calling thread's ACL message and the translation of rill's
 * statuses into ACL's codes. */
#ifndef RILL_ACL_ERROR_H
#define RILL_ACL_ERROR_H

#include "acl/acl_base.h"
#include "aclnn/aclnn_base.h"
#include "rill.h"

/* Sets the thread's message to the formatted sentence and returns code: the
 * one place every ACL failure of this library is made. */
aclError rill__acl_fail(aclError code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ACL_SUCCESS for RILL_OK; otherwise the ACL code of status, with the
 * message "<call>: <rill's sentence>" (rill_last_error, or the status's
 * own sentence when rill left none). */
aclError rill__acl_check(rill_status status, const char *call);
/* The same for the op API: ACLNN_ERR_PARAM_INVALID for
 * RILL_ERROR_INVALID_ARGUMENT, ACLNN_ERR_RUNTIME_ERROR for the rest. */
aclnnStatus rill__aclnn_check(rill_status status, const char *call);
/* The ACL code that stands for a rill status (ACL_SUCCESS for RILL_OK). */
aclError rill__acl_code_of(rill_status status);

#endif /* RILL_ACL_ERROR_H */
