/* SPDX-License-Identifier: MIT */
/* tensor.c: aclTensor, aclScalar and aclIntArray, handles (handle.h) of
 * the objects below, which the ops read through rill__acl_tensor_read,
 * rill__acl_scalar_read and rill__acl_int_array_read. */
#ifndef RILL_ACL_TENSOR_H
#define RILL_ACL_TENSOR_H

#include <stdbool.h>

#include "aclnn/aclnn_base.h"

enum { RILL_ACL_MAX_DIMS = 8 };

/* Invariants: 0 <= ndim <= RILL_ACL_MAX_DIMS; dims, strides and offset are
 * not negative; aclDataTypeSize(dtype) > 0. */
struct rill__acl_tensor {
    aclDataType dtype;
    aclFormat format;
    int ndim;
    int64_t dims[RILL_ACL_MAX_DIMS];
    int64_t strides[RILL_ACL_MAX_DIMS]; /* in elements */
    int64_t offset;                     /* in elements */
    int storage_ndim;
    int64_t storage_dims[RILL_ACL_MAX_DIMS];
    void *data; /* borrowed: the caller's memory */
};

struct rill__acl_scalar {
    aclDataType dtype;
    double value;
};

/* An aclIntArray: its values, copied at creation. */
enum { RILL_ACL_MAX_INTS = 16 };
struct rill__acl_int_array {
    uint64_t size; /* at most RILL_ACL_MAX_INTS */
    int64_t values[RILL_ACL_MAX_INTS];
};

/* Copies the live tensor that handle names into *out: ACLNN_SUCCESS, or
 * call's refusal of its argument name (NULL, destroyed, another object). */
aclnnStatus rill__acl_tensor_read(const char *call, const char *name, const aclTensor *handle,
                                  struct rill__acl_tensor *out);
/* The same for a scalar. */
aclnnStatus rill__acl_scalar_read(const char *call, const char *name, const aclScalar *handle,
                                  struct rill__acl_scalar *out);
/* The same for an integer array. */
aclnnStatus rill__acl_int_array_read(const char *call, const char *name, const aclIntArray *handle,
                                     struct rill__acl_int_array *out);

#endif /* RILL_ACL_TENSOR_H */
