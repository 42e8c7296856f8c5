/* SPDX-License-Identifier: MIT */
/*
 * aclnnop/aclnn_copy.h: selfRef = src. ACL_FLOAT tensors of up to 6
 * dimensions take any strides, and src's shape broadcasts to selfRef's;
 * otherwise (ACL_FLOAT16, or a conversion between the two types) both are
 * contiguous and of one shape. selfRef may not overlap src, nor reach one
 * element twice.
 */
#ifndef RILL_ACL_ACLNNOP_ACLNN_COPY_H
#define RILL_ACL_ACLNNOP_ACLNN_COPY_H

#include "../aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef,
                                                                 const aclTensor *src,
                                                                 uint64_t *workspaceSize,
                                                                 aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnInplaceCopy(void *workspace, uint64_t workspaceSize,
                                                 aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNNOP_ACLNN_COPY_H */
