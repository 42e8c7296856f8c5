/* SPDX-License-Identifier: MIT */
/*
 * aclrtRandomNumAsync: a normal distribution of float32 values is rill's
 * randn fill (rill_op_randn_f32), whose values depend on the seed and the
 * element's index only; the other distributions and data types, and
 * parameters passed by address, are refused as not supported. No state.
 */
#include "random.h"

#include <string.h>

#include "error.h"

static const char CALL[] = "aclrtRandomNumAsync";

/* An integer parameter given by value in 4 or 8 bytes (little-endian, as
 * the host stores it). */
static aclError int_param(const char *name, const aclrtRandomParaInfo *p, uint64_t *out) {
    if (p->isAddr)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: %s is given by address; pass it by value (isAddr 0)", CALL,
                              name);
    if (p->size == sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, p->valueOrAddr, sizeof v);
        *out = v;
    } else if (p->size == sizeof(uint64_t)) {
        memcpy(out, p->valueOrAddr, sizeof *out);
    } else {
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: %s has size %u; it must be 4 or 8",
                              CALL, name, (unsigned)p->size);
    }
    return ACL_SUCCESS;
}

/* A float32 parameter given by value. */
static aclError float_param(const char *name, const aclrtRandomParaInfo *p, float *out) {
    if (p->isAddr)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: %s is given by address; pass it by value (isAddr 0)", CALL,
                              name);
    if (p->size != sizeof(float))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: %s has size %u; a float32 parameter has size 4", CALL, name,
                              (unsigned)p->size);
    memcpy(out, p->valueOrAddr, sizeof *out);
    return ACL_SUCCESS;
}

static const char *func_name(aclrtRandomNumFuncType t) {
    switch (t) {
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK:
        return "a dropout bitmask";
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS:
        return "a uniform distribution";
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS:
        return "a truncated normal distribution";
    default:
        return NULL;
    }
}

aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo *taskInfo, const aclrtStream stream,
                             void *reserve) {
    if (!taskInfo)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: taskInfo is NULL", CALL);
    if (reserve)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: reserve must be NULL", CALL);
    aclrtRandomNumFuncType type = taskInfo->randomNumFuncParaInfo.funcType;
    if (type != ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS) {
        const char *name = func_name(type);
        if (!name)
            return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                                  "%s: funcType %d is no aclrtRandomNumFuncType", CALL, (int)type);
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: %s is not built; the normal distribution "
                              "(ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS) is",
                              CALL, name);
    }
    if (taskInfo->dataType != ACL_FLOAT)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: data type %d is not built; ACL_FLOAT (float32) is", CALL,
                              (int)taskInfo->dataType);
    if (!taskInfo->randomResultAddr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: randomResultAddr is NULL", CALL);
    const aclrtNormalDisInfo *normal = &taskInfo->randomNumFuncParaInfo.paramInfo.normalDisInfo;
    float mean, stddev;
    uint64_t seed, num;
    aclError err = float_param("mean", &normal->mean, &mean);
    if (err == ACL_SUCCESS)
        err = float_param("stddev", &normal->stddev, &stddev);
    if (err == ACL_SUCCESS)
        err = int_param("randomSeed", &taskInfo->randomSeed, &seed);
    if (err == ACL_SUCCESS)
        err = int_param("randomNum", &taskInfo->randomNum, &num);
    if (err != ACL_SUCCESS)
        return err;
    if (num > SIZE_MAX)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: randomNum %llu does not fit a size_t",
                              CALL, (unsigned long long)num);
    return rill__acl_check(rill_op_randn_f32((rill_stream *)stream, taskInfo->randomResultAddr,
                                             (size_t)num, mean, stddev, seed),
                           CALL);
}
