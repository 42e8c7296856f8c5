/* SPDX-License-Identifier: MIT */
/* The op tests' tensors: float values put into a tensor over new device
 * memory, as float32 or float16, and read back from device memory. */
#ifndef RILL_TEST_ACL_TENSORS_H
#define RILL_TEST_ACL_TENSORS_H

#include <string.h>

#include "acl_support.h"

/* A tensor over new device memory holding values (count of them; zeros
 * when values is NULL or dtype is neither float32 nor float16), of type
 * dtype, contiguous unless strides are given; *dev receives the memory. */
static inline aclTensor *tensor_of(const int64_t *dims, uint64_t ndim, const int64_t *strides,
                                   aclDataType dtype, const float *values, size_t count,
                                   void **dev) {
    int64_t contiguous[8];
    int64_t step = 1;
    for (int d = (int)ndim - 1; d >= 0; d--) {
        contiguous[d] = step;
        step *= dims[d];
    }
    size_t esize = aclDataTypeSize(dtype);
    size_t bytes = (count ? count : 1) * esize;
    ACL_OK(aclrtMalloc(dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char staging[4096] = {0};
    assert_true(bytes <= sizeof staging);
    for (size_t i = 0; i < count; i++) {
        float v = values ? values[i] : 0.0f;
        aclFloat16 h = aclFloatToFloat16(v);
        if (dtype == ACL_FLOAT16)
            memcpy(staging + i * 2, &h, 2);
        else if (dtype == ACL_FLOAT)
            memcpy(staging + i * 4, &v, 4);
    }
    ACL_OK(aclrtMemcpy(*dev, bytes, staging, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    aclTensor *t = aclCreateTensor(dims, ndim, dtype, strides ? strides : contiguous, 0,
                                   ACL_FORMAT_ND, dims, ndim, *dev);
    assert_non_null(t);
    return t;
}

static inline void read_back(const void *dev, aclDataType dtype, float *out, size_t count) {
    unsigned char staging[4096];
    size_t esize = aclDataTypeSize(dtype);
    ACL_OK(aclrtMemcpy(staging, sizeof staging, dev, count * esize, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < count; i++) {
        if (dtype == ACL_FLOAT16) {
            aclFloat16 h;
            memcpy(&h, staging + i * 2, 2);
            out[i] = aclFloat16ToFloat(h);
        } else {
            memcpy(&out[i], staging + i * 4, 4);
        }
    }
}

#endif /* RILL_TEST_ACL_TENSORS_H */
