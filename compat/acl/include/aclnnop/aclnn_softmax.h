/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_softmax.h: softmax along dimension dim of self (negative: from
 * the last, -1 the last). self and out are ACL_FLOAT, contiguous and of one
 * shape; out may be self.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_SOFTMAX_H
#define RILL_ACL_ACLNNOP_ACLNN_SOFTMAX_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim,
                                                             aclTensor *out,
                                                             uint64_t *workspaceSize,
                                                             aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnSoftmax(void *workspace, uint64_t workspaceSize,
                                             aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_SOFTMAX_H */
