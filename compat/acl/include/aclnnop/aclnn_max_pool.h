/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_max_pool.h: out = the largest value in each kernelShape
 * window of self ([n, c, h, w] or [c, h, w]; NaN wins), its taps dilations
 * apart and the windows strides apart, padding left out, as torch's
 * max_pool2d: out [.., oh, ow], oh = (h + top + bottom - dilations[0]
 * (kernelShape[0] - 1) - 1) / strides[0] + 1 rounded down, or up when
 * ceilMode is 1 (less a last window that would start in the bottom
 * padding), ow likewise. kernelShape, strides and dilations (NULL: all 1)
 * hold 2 values (or 1 for both); pads 2 ({h, w}) or 4 ({top, left, bottom,
 * right}, equal in pairs), at most half the dilated window; autoPad 0
 * (NOTSET); ceilMode 0 or 1. ACL_FLOAT, contiguous tensors.
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
