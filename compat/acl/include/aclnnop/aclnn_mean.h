/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_mean.h: out = the mean of self over the dimensions that dim
 * names (negative: from the last; an empty array: all of them), which must
 * be adjacent (rill reduces one run of them at a time), kept as dimensions
 * of 1 in out when keepDim, else left out. self and out are ACL_FLOAT and
 * contiguous, and do not overlap; dtype is ACL_FLOAT.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_MEAN_H
#define RILL_ACL_ACLNNOP_ACLNN_MEAN_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor *self,
                                                          const aclIntArray *dim, bool keepDim,
                                                          aclDataType dtype, aclTensor *out,
                                                          uint64_t *workspaceSize,
                                                          aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMean(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_MEAN_H */
