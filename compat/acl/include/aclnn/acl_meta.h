/* SPDX-License-Identifier: MIT */
/*
 * aclnn/acl_meta.h: the objects of ACL's two-phase op API on rill: tensors
 * (a view of device memory: shape, strides in elements, offset, data type),
 * scalars, integer arrays and op executors. A tensor keeps no reference to
 * its memory: it is a description, and destroying it frees only the
 * description. The pointers are handles, not addresses: a destroyed
 * object's handle (an executor's, once it has run), or anything else
 * passed in place of one (another kind of object, a stream, an event), is
 * refused with ACLNN_ERR_PARAM_INVALID and a message, even after a newer
 * object took its place.
 */
#ifndef RILL_ACL_ACLNN_ACL_META_H
#define RILL_ACL_ACLNN_ACL_META_H

#include "../acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t aclnnStatus;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclOpExecutor aclOpExecutor;

/* A tensor of viewDimsNum (0 to 8) dimensions viewDims over tensorData,
 * element i of which is at tensorData + (offset + sum(i_d * stride[d])) *
 * element size. Dimensions, strides and offset must not be negative, and
 * stride is needed whenever viewDimsNum > 0. storageDims describe the
 * memory's own shape and are checked as dimensions; format is recorded.
 * NULL on a bad argument, with the reason for aclGetRecentErrMsg. An op's
 * first phase refuses (ACLNN_ERR_PARAM_INVALID) a tensor with more than
 * (2^32 - 1) * 2^14 elements, one whose elements reach 2^63 bytes or more
 * from tensorData (offset included) or wrap the address space, and one
 * that reaches past the end of its allocation when tensorData is memory
 * from aclrtMalloc or aclrtMallocHost (other memory is used as given). */
ACL_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                               aclDataType dataType, const int64_t *stride,
                                               int64_t offset, aclFormat format,
                                               const int64_t *storageDims, uint64_t storageDimsNum,
                                               void *tensorData);
/* A scalar holding *value read as dataType (a number type: float, float16,
 * double, bool or an integer type). NULL on a bad argument. */
ACL_FUNC_VISIBILITY aclScalar *aclCreateScalar(void *value, aclDataType dataType);
/* An array of size integers copied from value (at most 16: the dimensions,
 * strides and paddings that ops take). NULL on a bad argument. */
ACL_FUNC_VISIBILITY aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
/* Destroy: ACLNN_ERR_PARAM_NULLPTR for NULL, ACLNN_ERR_PARAM_INVALID for an
 * object destroyed already or of another kind. */
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyScalar(const aclScalar *scalar);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyIntArray(const aclIntArray *array);
/* An executor runs once and is freed by its op's second phase, unless made
 * repeatable: then it runs any number of times and is freed by
 * aclDestroyAclOpExecutor (which also frees one that never ran). */
ACL_FUNC_VISIBILITY aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACLNN_ACL_META_H */
