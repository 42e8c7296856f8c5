/* SPDX-License-Identifier: MIT */
/*
 * Tensors and scalars of ACL's op API: plain descriptions owned by the
 * caller, checked when made, with a magic number so that an object of
 * another kind passed in its place is refused with a message.
 */
#include "tensor.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "half.h"

enum { TENSOR_MAGIC = 0x54656e73, SCALAR_MAGIC = 0x5363616c, DEAD_MAGIC = 0x0dead };

size_t aclDataTypeSize(aclDataType dataType) {
    switch (dataType) {
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL:
        return 1;
    case ACL_FLOAT16:
    case ACL_INT16:
    case ACL_UINT16:
    case ACL_BF16:
        return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
        return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
    case ACL_COMPLEX64:
        return 8;
    case ACL_COMPLEX128:
        return 16;
    default:
        return 0;
    }
}

bool rill__acl_is_tensor(const aclTensor *t) {
    return t->magic == TENSOR_MAGIC;
}

bool rill__acl_is_scalar(const aclScalar *s) {
    return s->magic == SCALAR_MAGIC;
}

/* NULL with the message for aclGetRecentErrMsg. */
static aclTensor *refuse_tensor(const char *why, uint64_t detail) {
    rill__acl_fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: %s (%llu)", why,
                   (unsigned long long)detail);
    return NULL;
}

static bool dims_are_valid(const int64_t *dims, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (dims[i] < 0)
            return false;
    return true;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData) {
    if (viewDimsNum > RILL_ACL_MAX_DIMS)
        return refuse_tensor("more than 8 view dimensions", viewDimsNum);
    if (storageDimsNum > RILL_ACL_MAX_DIMS)
        return refuse_tensor("more than 8 storage dimensions", storageDimsNum);
    if (viewDimsNum > 0 && (!viewDims || !stride))
        return refuse_tensor(viewDims ? "stride is NULL; pass one stride per dimension"
                                      : "viewDims is NULL, with viewDimsNum",
                             viewDimsNum);
    if (storageDimsNum > 0 && !storageDims)
        return refuse_tensor("storageDims is NULL, with storageDimsNum", storageDimsNum);
    if (aclDataTypeSize(dataType) == 0)
        return refuse_tensor("dataType is no data type of numbers", (uint64_t)(int64_t)dataType);
    if (offset < 0)
        return refuse_tensor("offset is negative", (uint64_t)offset);
    if (!dims_are_valid(viewDims, viewDimsNum) || !dims_are_valid(stride, viewDimsNum) ||
        !dims_are_valid(storageDims, storageDimsNum))
        return refuse_tensor("a dimension or stride is negative; count of dimensions", viewDimsNum);
    aclTensor *t = calloc(1, sizeof *t);
    if (!t) {
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateTensor: out of host memory");
        return NULL;
    }
    t->magic = TENSOR_MAGIC;
    t->dtype = dataType;
    t->format = format;
    t->ndim = (int)viewDimsNum;
    if (viewDimsNum) {
        memcpy(t->dims, viewDims, viewDimsNum * sizeof *viewDims);
        memcpy(t->strides, stride, viewDimsNum * sizeof *stride);
    }
    t->offset = offset;
    t->storage_ndim = (int)storageDimsNum;
    if (storageDimsNum)
        memcpy(t->storage_dims, storageDims, storageDimsNum * sizeof *storageDims);
    t->data = tensorData;
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
    if (!tensor)
        return rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "aclDestroyTensor: tensor is NULL");
    if (!rill__acl_is_tensor(tensor))
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "aclDestroyTensor: %p is no tensor from aclCreateTensor",
                              (const void *)tensor);
    aclTensor *t = (aclTensor *)tensor;
    t->magic = DEAD_MAGIC;
    free(t);
    return ACLNN_SUCCESS;
}

/* *value as a number of type dtype; false for a type that is no number. */
static bool read_number(const void *value, aclDataType dtype, double *out) {
    switch (dtype) {
    case ACL_FLOAT: {
        float v;
        memcpy(&v, value, sizeof v);
        *out = v;
        return true;
    }
    case ACL_FLOAT16: {
        uint16_t v;
        memcpy(&v, value, sizeof v);
        *out = rill__acl_half_to_float(v);
        return true;
    }
    case ACL_BF16: {
        uint16_t v;
        memcpy(&v, value, sizeof v);
        uint32_t bits = (uint32_t)v << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        *out = f;
        return true;
    }
    case ACL_DOUBLE:
        memcpy(out, value, sizeof *out);
        return true;
    case ACL_INT8:
        *out = *(const int8_t *)value;
        return true;
    case ACL_UINT8:
        *out = *(const uint8_t *)value;
        return true;
    case ACL_BOOL:
        *out = *(const uint8_t *)value != 0;
        return true;
    case ACL_INT16: {
        int16_t v;
        memcpy(&v, value, sizeof v);
        *out = v;
        return true;
    }
    case ACL_UINT16: {
        uint16_t v;
        memcpy(&v, value, sizeof v);
        *out = v;
        return true;
    }
    case ACL_INT32: {
        int32_t v;
        memcpy(&v, value, sizeof v);
        *out = v;
        return true;
    }
    case ACL_UINT32: {
        uint32_t v;
        memcpy(&v, value, sizeof v);
        *out = v;
        return true;
    }
    case ACL_INT64: {
        int64_t v;
        memcpy(&v, value, sizeof v);
        *out = (double)v;
        return true;
    }
    case ACL_UINT64: {
        uint64_t v;
        memcpy(&v, value, sizeof v);
        *out = (double)v;
        return true;
    }
    default:
        return false;
    }
}

aclScalar *aclCreateScalar(void *value, aclDataType dataType) {
    double v;
    if (!value) {
        rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is NULL");
        return NULL;
    }
    if (!read_number(value, dataType, &v)) {
        rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                       "aclCreateScalar: dataType %d is no number type (float, float16, "
                       "bfloat16, double, bool or an integer)",
                       (int)dataType);
        return NULL;
    }
    aclScalar *s = malloc(sizeof *s);
    if (!s) {
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateScalar: out of host memory");
        return NULL;
    }
    *s = (aclScalar){SCALAR_MAGIC, dataType, v};
    return s;
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar) {
    if (!scalar)
        return rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "aclDestroyScalar: scalar is NULL");
    if (!rill__acl_is_scalar(scalar))
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "aclDestroyScalar: %p is no scalar from aclCreateScalar",
                              (const void *)scalar);
    aclScalar *s = (aclScalar *)scalar;
    s->magic = DEAD_MAGIC;
    free(s);
    return ACLNN_SUCCESS;
}
