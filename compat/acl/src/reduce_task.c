/* SPDX-License-Identifier: MIT */
/*
 * aclrtReduceAsync, CANN's built-in reduce task: dst combined with src
 * element by element, in place, in stream order. float32 sum, max and min
 * are rill_op_binary_f32 with out = a = dst; float16 sum is
 * rill_op_add_f16. rill's ops check the memory, the stream and overlap
 * (dst may be src, or overlap it not at all). No state.
 */
#include "reduce_task.h"

#include <stdint.h>

#include "error.h"

static const char CALL[] = "aclrtReduceAsync";

static const char *kind_name(aclrtReduceKind kind) {
    switch (kind) {
    case ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM:
        return "SUM";
    case ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX:
        return "MAX";
    case ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN:
        return "MIN";
    case ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL:
        return "EQUAL";
    default:
        return NULL;
    }
}

aclError aclrtReduceAsync(void *dst, const void *src, uint64_t count, aclrtReduceKind kind,
                          aclDataType type, aclrtStream stream, void *reserve) {
    if (!dst)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: dst is NULL", CALL);
    if (!src)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: src is NULL", CALL);
    if (reserve)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: reserve must be NULL", CALL);
    const char *name = kind_name(kind);
    if (!name)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: kind %d is no aclrtReduceKind (ACL_RT_MEMCPY_SDMA_AUTOMATIC_"
                              "SUM, MAX, MIN or EQUAL)",
                              CALL, (int)kind);
    if (kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL is not built; SUM, MAX and "
                              "MIN are",
                              CALL);
    if (type != ACL_FLOAT && !(type == ACL_FLOAT16 && kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM))
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: %s of data type %d is not built; SUM, MAX and MIN of "
                              "ACL_FLOAT (float32) and SUM of ACL_FLOAT16 (float16) are",
                              CALL, name, (int)type);
    size_t esize = aclDataTypeSize(type);
    if (count % esize != 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: count %llu bytes is not a whole number of %zu-byte elements",
                              CALL, (unsigned long long)count, esize);
    if (count / esize > SIZE_MAX)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: count %llu does not fit a size_t", CALL,
                              (unsigned long long)count);
    size_t n = (size_t)(count / esize);
    if (n == 0)
        return ACL_SUCCESS;
    rill_stream *s = (rill_stream *)stream;
    if (type == ACL_FLOAT16)
        return rill__acl_check(rill_op_add_f16(s, dst, dst, src, 1.0f, n), CALL);
    rill_binary_op op = kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM   ? RILL_BINARY_ADD
                        : kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX ? RILL_BINARY_MAX
                                                                   : RILL_BINARY_MIN;
    const size_t contiguous[1] = {1}, shape[1] = {n};
    return rill__acl_check(
        rill_op_binary_f32(s, op, dst, dst, contiguous, src, contiguous, shape, 1), CALL);
}
