/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_tanh.h: out = tanh(self), element by element.
 * self and out are ACL_FLOAT, contiguous and of one shape; out may be self.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_TANH_H
#define RILL_ACL_ACLNNOP_ACLNN_TANH_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnTanhGetWorkspaceSize(const aclTensor *self, aclTensor *out,
                                                          uint64_t *workspaceSize,
                                                          aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnTanh(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_TANH_H */
