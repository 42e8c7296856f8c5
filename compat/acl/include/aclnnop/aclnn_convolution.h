/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_convolution.h: output = the 2-D convolution of input [n, c,
 * h, w] with weight [k, c / groups, r, s], plus bias [k] when it is not
 * NULL, as torch's conv2d: output [n, k, oh, ow], oh = (h + 2 padding[0] -
 * dilation[0] (r - 1) - 1) / stride[0] + 1, ow likewise. stride, padding
 * and dilation hold 2 values (or 1 for both dimensions); groups is at
 * least 1 and divides c and k; transposed is false (outputPadding is then
 * unused). ACL_FLOAT, contiguous tensors; cubeMathType is checked and
 * computes as KEEP_DTYPE.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_CONVOLUTION_H
#define RILL_ACL_ACLNNOP_ACLNN_CONVOLUTION_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolutionGetWorkspaceSize(
    const aclTensor *input, const aclTensor *weight, const aclTensor *bias,
    const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation,
    bool transposed, const aclIntArray *outputPadding, int64_t groups, aclTensor *output,
    int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolution(void *workspace, uint64_t workspaceSize,
                                                 aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_CONVOLUTION_H */
