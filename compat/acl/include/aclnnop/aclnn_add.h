/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_add.h: out = self + alpha * other, element by element, with
 * broadcasting: the shapes of self and other are aligned at their last
 * dimension, and each pair of sizes must be equal or one of them 1; out has
 * the broadcast shape. self, other and out have one data type, ACL_FLOAT or
 * ACL_FLOAT16 (float16 computes in float32 and rounds once). Any strides.
 * The first phase checks everything and needs no workspace (0); the second
 * submits the work to stream and returns.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_ADD_H
#define RILL_ACL_ACLNNOP_ACLNN_ADD_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self,
                                                         const aclTensor *other,
                                                         const aclScalar *alpha, aclTensor *out,
                                                         uint64_t *workspaceSize,
                                                         aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize,
                                         aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_ADD_H */
