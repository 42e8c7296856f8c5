/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_sub.h: out = self - alpha * other, element by element, with
 * the broadcasting, data types and strides of aclnnAdd (aclnn_add.h).
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_SUB_H
#define RILL_ACL_ACLNNOP_ACLNN_SUB_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self,
                                                         const aclTensor *other,
                                                         const aclScalar *alpha, aclTensor *out,
                                                         uint64_t *workspaceSize,
                                                         aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnSub(void *workspace, uint64_t workspaceSize,
                                         aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_SUB_H */
