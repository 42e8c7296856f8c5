/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_max_pool.h: out = the largest value in each kernelShape
 * window of self ([n, c, h, w] or [c, h, w]; NaN wins), the windows strides
 * apart, padding left out; out [.., oh, ow], oh = (h + top + bottom -
 * kernelShape[0]) / strides[0] + 1, ow likewise. kernelShape and strides
 * hold 2 values (or 1 for both); pads 2 ({h, w}) or 4 ({top, left, bottom,
 * right}, equal in pairs), at most half the window; dilations all 1 (or
 * NULL); autoPad 0 (NOTSET) and ceilMode 0. ACL_FLOAT, contiguous tensors.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_MAX_POOL_H
#define RILL_ACL_ACLNNOP_ACLNN_MAX_POOL_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMaxPoolGetWorkspaceSize(
    const aclTensor *self, const aclIntArray *kernelShape, const aclIntArray *strides,
    const int64_t autoPad, const aclIntArray *pads, const aclIntArray *dilations,
    const int64_t ceilMode, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMaxPool(void *workspace, uint64_t workspaceSize,
                                             aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_MAX_POOL_H */
