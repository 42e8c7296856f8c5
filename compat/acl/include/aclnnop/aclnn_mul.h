/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_mul.h: out = self * other, element by element, with the
 * broadcasting, data types and strides of aclnnAdd (aclnn_add.h).
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_MUL_H
#define RILL_ACL_ACLNNOP_ACLNN_MUL_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self,
                                                         const aclTensor *other, aclTensor *out,
                                                         uint64_t *workspaceSize,
                                                         aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMul(void *workspace, uint64_t workspaceSize,
                                         aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_MUL_H */
