/* SPDX-License-Identifier: MIT */
/*
 * Tensors, scalars and integer arrays of ACL's op API: plain descriptions owned by the
 * caller, checked when made, and named by handles of this layer's table
 * (handle.h), so that a destroyed one, or an object of another kind passed
 * in its place, is refused with a message and never read.
 */
#include "tensor.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "half.h"
#include "handle.h"

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

aclnnStatus rill__acl_tensor_read(const char *call, const char *name, const aclTensor *handle,
                                  struct rill__acl_tensor *out) {
    rill__acl_handles_lock();
    const struct rill__acl_tensor *t = rill__acl_handle_get_locked(handle, RILL_ACL_TENSOR);
    if (t)
        *out = *t;
    rill__acl_handles_unlock();
    return t ? ACLNN_SUCCESS : rill__acl_handle_fail(call, name, handle, RILL_ACL_TENSOR);
}

aclnnStatus rill__acl_scalar_read(const char *call, const char *name, const aclScalar *handle,
                                  struct rill__acl_scalar *out) {
    rill__acl_handles_lock();
    const struct rill__acl_scalar *s = rill__acl_handle_get_locked(handle, RILL_ACL_SCALAR);
    if (s)
        *out = *s;
    rill__acl_handles_unlock();
    return s ? ACLNN_SUCCESS : rill__acl_handle_fail(call, name, handle, RILL_ACL_SCALAR);
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
    struct rill__acl_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateTensor: out of host memory");
        return NULL;
    }
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
    aclTensor *handle = rill__acl_handle_open(RILL_ACL_TENSOR, t);
    if (!handle) {
        free(t);
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateTensor: out of host memory for handles");
    }
    return handle;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
    struct rill__acl_tensor *t = rill__acl_handle_take(tensor, RILL_ACL_TENSOR);
    if (!t)
        return rill__acl_handle_fail("aclDestroyTensor", "tensor", tensor, RILL_ACL_TENSOR);
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
    struct rill__acl_scalar *s = malloc(sizeof *s);
    if (!s) {
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateScalar: out of host memory");
        return NULL;
    }
    *s = (struct rill__acl_scalar){dataType, v};
    aclScalar *handle = rill__acl_handle_open(RILL_ACL_SCALAR, s);
    if (!handle) {
        free(s);
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateScalar: out of host memory for handles");
    }
    return handle;
}

aclnnStatus rill__acl_int_array_read(const char *call, const char *name, const aclIntArray *handle,
                                     struct rill__acl_int_array *out) {
    rill__acl_handles_lock();
    const struct rill__acl_int_array *a = rill__acl_handle_get_locked(handle, RILL_ACL_INT_ARRAY);
    if (a)
        *out = *a;
    rill__acl_handles_unlock();
    return a ? ACLNN_SUCCESS : rill__acl_handle_fail(call, name, handle, RILL_ACL_INT_ARRAY);
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size) {
    if (!value && size > 0) {
        rill__acl_fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateIntArray: value is NULL");
        return NULL;
    }
    if (size > RILL_ACL_MAX_INTS) {
        rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                       "aclCreateIntArray: size %llu is more than the %d values an op takes",
                       (unsigned long long)size, RILL_ACL_MAX_INTS);
        return NULL;
    }
    struct rill__acl_int_array *a = calloc(1, sizeof *a);
    if (!a) {
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR, "aclCreateIntArray: out of host memory");
        return NULL;
    }
    a->size = size;
    if (size > 0)
        memcpy(a->values, value, (size_t)size * sizeof *value);
    aclIntArray *handle = rill__acl_handle_open(RILL_ACL_INT_ARRAY, a);
    if (!handle) {
        free(a);
        rill__acl_fail(ACLNN_ERR_RUNTIME_ERROR,
                       "aclCreateIntArray: out of host memory for handles");
    }
    return handle;
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array) {
    struct rill__acl_int_array *a = rill__acl_handle_take(array, RILL_ACL_INT_ARRAY);
    if (!a)
        return rill__acl_handle_fail("aclDestroyIntArray", "array", array, RILL_ACL_INT_ARRAY);
    free(a);
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar) {
    struct rill__acl_scalar *s = rill__acl_handle_take(scalar, RILL_ACL_SCALAR);
    if (!s)
        return rill__acl_handle_fail("aclDestroyScalar", "scalar", scalar, RILL_ACL_SCALAR);
    free(s);
    return ACLNN_SUCCESS;
}
