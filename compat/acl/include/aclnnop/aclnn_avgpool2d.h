/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_avgpool2d.h: out = the mean over each kernelSize window of
 * self ([n, c, h, w] or [c, h, w]), the windows strides apart, self read as
 * if surrounded by paddings rows and columns of zeros, as torch's
 * avg_pool2d: out [.., oh, ow], oh = (h + 2 paddings[0] - kernelSize[0]) /
 * strides[0] + 1 rounded down, or up with ceilMode (less a last window that
 * would start in the bottom padding), ow likewise. Each window's sum is
 * divided by divisorOverride when it is not 0, else by its elements inside
 * self when countIncludePad is false, else by its size with padding (cut
 * at the padded edge in ceil mode). Each array holds 2 values (or 1 for
 * both); paddings at most half the window; divisorOverride 0 or positive.
 * ACL_FLOAT, contiguous tensors; cubeMathType is checked.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_AVGPOOL2D_H
#define RILL_ACL_ACLNNOP_ACLNN_AVGPOOL2D_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnAvgPool2dGetWorkspaceSize(
    const aclTensor *self, const aclIntArray *kernelSize, const aclIntArray *strides,
    const aclIntArray *paddings, const bool ceilMode, const bool countIncludePad,
    const int64_t divisorOverride, const int8_t cubeMathType, aclTensor *out,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAvgPool2d(void *workspace, uint64_t workspaceSize,
                                               aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_AVGPOOL2D_H */
