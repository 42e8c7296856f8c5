/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_avgpool2d.h: out = the mean over each kernelSize window of
 * self ([n, c, h, w] or [c, h, w]), the windows strides apart, self read as
 * if surrounded by paddings rows and columns of zeros that count in the
 * mean; out [.., oh, ow], oh = (h + 2 paddings[0] - kernelSize[0]) /
 * strides[0] + 1, ow likewise. Each array holds 2 values (or 1 for both);
 * paddings at most half the window. ceilMode false, divisorOverride 0, and
 * countIncludePad true unless paddings are 0 (rill's pooling counts
 * padding). ACL_FLOAT, contiguous tensors; cubeMathType is checked.
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
