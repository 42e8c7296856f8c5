/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_matmul.h: out = self @ mat2 with torch.matmul's shapes: 1-D
 * by 1-D is a dot product (out has 0 dimensions, or 1 of size 1), a 1-D
 * self is a row and a 1-D mat2 a column (that dimension leaves out), and
 * dimensions before the last two are batches, broadcast as aclnnAdd
 * broadcasts. ACL_FLOAT or ACL_FLOAT16 (accumulated in float32), one type
 * for all three, contiguous row-major tensors. cubeMathType (0 KEEP_DTYPE,
 * 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32) is checked and
 * computes as KEEP_DTYPE.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_MATMUL_H
#define RILL_ACL_ACLNNOP_ACLNN_MATMUL_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor *self,
                                                            const aclTensor *mat2, aclTensor *out,
                                                            int8_t cubeMathType,
                                                            uint64_t *workspaceSize,
                                                            aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMatmul(void *workspace, uint64_t workspaceSize,
                                            aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_MATMUL_H */
