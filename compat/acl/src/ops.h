/* SPDX-License-Identifier: MIT */
/* ops.c: the executors of the two-phase op API and aclnnAdd, aclnnMul and
 * aclnnMatmul, declared in aclnn/acl_meta.h and aclnnop/aclnn_*.h. */
#ifndef RILL_ACL_OPS_H
#define RILL_ACL_OPS_H

#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_matmul.h"
#include "aclnnop/aclnn_mul.h"

#endif /* RILL_ACL_OPS_H */
