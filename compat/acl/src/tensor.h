/* SPDX-License-Identifier: MIT */
/* tensor.c: aclTensor and aclScalar, whose layouts the ops read. */
#ifndef RILL_ACL_TENSOR_H
#define RILL_ACL_TENSOR_H

#include <stdbool.h>

#include "aclnn/acl_meta.h"

enum { RILL_ACL_MAX_DIMS = 8 };

/* Invariants: 0 <= ndim <= RILL_ACL_MAX_DIMS; dims, strides and offset are
 * not negative; aclDataTypeSize(dtype) > 0. */
struct aclTensor {
    uint32_t magic; /* TENSOR_MAGIC while alive */
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

struct aclScalar {
    uint32_t magic; /* SCALAR_MAGIC while alive */
    aclDataType dtype;
    double value;
};

bool rill__acl_is_tensor(const aclTensor *t);
bool rill__acl_is_scalar(const aclScalar *s);

#endif /* RILL_ACL_TENSOR_H */
