/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_amin.h: out = the smallest value (NaN when any is NaN) of
 * self over the dimensions that dim names (negative: from the last; an empty
 * array: all of them), which must be adjacent (rill reduces one run of them
 * at a time), kept as dimensions of 1 in out when keepDim, else left out.
 * self and out are ACL_FLOAT and contiguous, and do not overlap.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_AMIN_H
#define RILL_ACL_ACLNNOP_ACLNN_AMIN_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAminGetWorkspaceSize(const aclTensor *self,
                                                          const aclIntArray *dim, bool keepDim,
                                                          aclTensor *out, uint64_t *workspaceSize,
                                                          aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAmin(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_AMIN_H */
