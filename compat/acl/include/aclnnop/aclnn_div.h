/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_div.h: out = self / other, element by element (IEEE: x / 0
 * is an infinity or NaN), with the broadcasting, data types and strides of
 * aclnnAdd (aclnn_add.h).
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_DIV_H
#define RILL_ACL_ACLNNOP_ACLNN_DIV_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *self,
                                                         const aclTensor *other, aclTensor *out,
                                                         uint64_t *workspaceSize,
                                                         aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnDiv(void *workspace, uint64_t workspaceSize,
                                         aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_DIV_H */
