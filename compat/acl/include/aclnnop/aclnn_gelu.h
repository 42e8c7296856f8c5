/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_gelu.h: out = self/2 (1 + erf(self / sqrt 2)), the exact GELU, element by element.
 * self and out are ACL_FLOAT, contiguous and of one shape; out may be self.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_GELU_H
#define RILL_ACL_ACLNNOP_ACLNN_GELU_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor *self, aclTensor *out,
                                                          uint64_t *workspaceSize,
                                                          aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGelu(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_GELU_H */
