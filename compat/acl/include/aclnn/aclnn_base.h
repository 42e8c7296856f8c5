/* SPDX-License-Identifier: MIT */
/*
 * aclnn/aclnn_base.h: the status codes of ACL's op API, with CANN's values.
 */
#ifndef RILL_ACL_ACLNN_ACLNN_BASE_H
#define RILL_ACL_ACLNN_ACLNN_BASE_H

#include "../acl/acl_rt.h"
#include "acl_meta.h"

enum {
    ACLNN_SUCCESS = 0,
    ACLNN_ERR_PARAM_NULLPTR = 161001, /* a required argument is NULL */
    ACLNN_ERR_PARAM_INVALID = 161002, /* data type, shape, stride or value not supported */
    ACLNN_ERR_RUNTIME_ERROR = 361001  /* the runtime (rill) refused the work: see the message */
};

#endif /* RILL_ACL_ACLNN_ACLNN_BASE_H */
