/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_cast.h: out = self converted to dtype, which is out's data
 * type: ACL_FLOAT to ACL_FLOAT16 (round to nearest, ties to even) and
 * back, or a copy within one of them. self and out are contiguous and of
 * one shape, and do not overlap.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_CAST_H
#define RILL_ACL_ACLNNOP_ACLNN_CAST_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self,
                                                          const aclDataType dtype, aclTensor *out,
                                                          uint64_t *workspaceSize,
                                                          aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnCast(void *workspace, uint64_t workspaceSize,
                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_CAST_H */
