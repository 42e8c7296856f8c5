/* SPDX-License-Identifier: MIT */
/*
 * aclrtRandomNumAsync. A normal distribution of float32 values is rill's
 * randn fill (rill_op_randn_f32). The other tasks are a kernel of this
 * layer (rill_kernel_create, launched with the output's span declared, as
 * the element-wise kernel is): uniform values of float32, float16,
 * bfloat16 and the 32- and 64-bit integers, normal and truncated normal
 * values of float16 and bfloat16 (and truncated ones of float32), and
 * dropout bitmasks. Each element's value depends on the seed and its
 * index only: a counter-based generator (SplitMix64's mixing of the seed,
 * the index and a draw number), normal values by the Box-Muller transform,
 * truncated ones drawn again while more than two standard deviations from
 * the mean. randomCounterAddr is neither read nor advanced. Parameters by
 * address are refused as not supported. No state.
 */
#include "random.h"

#include <math.h>
#include <string.h>

#include "error.h"
#include "half.h"
#include "memory.h"

static const char CALL[] = "aclrtRandomNumAsync";

enum { CHUNK = 4096 }; /* elements (bitmask: bytes) per block */

enum kind { UNIFORM_FLOAT, UNIFORM_INT, UNIFORM_UINT, NORMAL, TRUNCATED, BITMASK };

struct random_args {
    int kind;
    int dtype;       /* aclDataType of the output */
    double lo, span; /* float uniform: lo + span * u; normal: mean, stddev; bitmask: keep */
    int64_t ilo;     /* integer uniform: ilo + draw mod range */
    uint64_t range;  /* 0: all 2^64 values */
    uint64_t seed, n;
    void *out;
};

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Draw k of element i: 64 random bits. */
static uint64_t draw(uint64_t seed, uint64_t i, uint64_t k) {
    return mix(mix(seed ^ mix(i)) + k);
}

/* In [0, 1) with 53 bits. */
static double unit(uint64_t bits) {
    return (double)(bits >> 11) * 0x1.0p-53;
}

/* A standard normal value from draws k and k + 1. */
static double gauss(uint64_t seed, uint64_t i, uint64_t k) {
    double u1 = ((double)(draw(seed, i, k) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = unit(draw(seed, i, k + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint16_t float_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN stays a quiet NaN */
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u); /* to nearest, ties to even */
    return (uint16_t)(bits >> 16);
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void store_float(void *out, uint64_t i, int dtype, double v) {
    if (dtype == ACL_FLOAT) {
        float f = (float)v;
        memcpy((char *)out + i * 4, &f, 4);
    } else {
        uint16_t h =
            dtype == ACL_FLOAT16 ? rill__acl_float_to_half((float)v) : float_to_bf16((float)v);
        memcpy((char *)out + i * 2, &h, 2);
    }
}

static void store_int(void *out, uint64_t i, int dtype, uint64_t v) {
    if (dtype == ACL_INT32 || dtype == ACL_UINT32) {
        uint32_t w = (uint32_t)v;
        memcpy((char *)out + i * 4, &w, 4);
    } else {
        memcpy((char *)out + i * 8, &v, 8);
    }
}

/* One block: elements [first, last) of the output (bitmask: bytes). */
static void random_body(const rill_block_ctx *ctx, const void *raw) {
    const struct random_args *a = raw;
    uint64_t first = (uint64_t)ctx->block_idx.x * CHUNK;
    if (a->kind == BITMASK) {
        uint64_t bytes = (a->n + 7) / 8;
        uint64_t last = first + CHUNK < bytes ? first + CHUNK : bytes;
        for (uint64_t b = first; b < last; b++) {
            uint8_t byte = 0;
            for (unsigned bit = 0; bit < 8 && b * 8 + bit < a->n; bit++)
                if (unit(draw(a->seed, b * 8 + bit, 0)) < a->span)
                    byte |= (uint8_t)(1u << bit);
            ((uint8_t *)a->out)[b] = byte;
        }
        return;
    }
    uint64_t last = first + CHUNK < a->n ? first + CHUNK : a->n;
    for (uint64_t i = first; i < last; i++) {
        switch (a->kind) {
        case UNIFORM_FLOAT:
            store_float(a->out, i, a->dtype, a->lo + a->span * unit(draw(a->seed, i, 0)));
            break;
        case UNIFORM_INT:
        case UNIFORM_UINT: {
            /* Draws below 2^64 mod range are drawn again, so that every
             * offset is equally likely. */
            uint64_t bits = draw(a->seed, i, 0);
            uint64_t off = bits;
            if (a->range) {
                uint64_t skip = (0 - a->range) % a->range;
                for (uint64_t k = 1; bits < skip; k++)
                    bits = draw(a->seed, i, k);
                off = bits % a->range;
            }
            store_int(a->out, i, a->dtype, (uint64_t)a->ilo + off);
            break;
        }
        case NORMAL:
            store_float(a->out, i, a->dtype, a->lo + a->span * gauss(a->seed, i, 0));
            break;
        default: { /* TRUNCATED: at most 64 tries, each kept with p 0.95 */
            double z = 0.0;
            for (uint64_t k = 0; k < 128; k += 2) {
                double g = gauss(a->seed, i, k);
                if (fabs(g) <= 2.0) {
                    z = g;
                    break;
                }
            }
            store_float(a->out, i, a->dtype, a->lo + a->span * z);
            break;
        }
        }
    }
}

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

static const char *type_name(aclDataType t) {
    switch (t) {
    case ACL_FLOAT:
        return "ACL_FLOAT";
    case ACL_FLOAT16:
        return "ACL_FLOAT16";
    case ACL_BF16:
        return "ACL_BF16";
    case ACL_INT32:
        return "ACL_INT32";
    case ACL_INT64:
        return "ACL_INT64";
    case ACL_UINT32:
        return "ACL_UINT32";
    default:
        return "ACL_UINT64";
    }
}

static size_t type_size(aclDataType t) {
    return t == ACL_FLOAT16 || t == ACL_BF16                     ? 2
           : t == ACL_FLOAT || t == ACL_INT32 || t == ACL_UINT32 ? 4
                                                                 : 8;
}

static bool is_float_type(aclDataType t) {
    return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16;
}

static bool is_int_type(aclDataType t) {
    return t == ACL_INT32 || t == ACL_INT64 || t == ACL_UINT32 || t == ACL_UINT64;
}

/* Whether parameter p of a task of type t is given by value, in t's size. */
static aclError by_value(const char *name, const aclrtRandomParaInfo *p, aclDataType t) {
    if (p->isAddr)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: %s is given by address; pass it by value (isAddr 0)", CALL,
                              name);
    if (p->size != type_size(t))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: %s has size %u; a parameter of %s has size %u", CALL, name,
                              (unsigned)p->size, type_name(t), (unsigned)type_size(t));
    return ACL_SUCCESS;
}

/* A float parameter given by value in the task's floating type (float32,
 * float16 or bfloat16: 4 or 2 bytes). */
static aclError float_param(const char *name, const aclrtRandomParaInfo *p, aclDataType t,
                            double *out) {
    aclError err = by_value(name, p, t);
    if (err != ACL_SUCCESS)
        return err;
    if (t == ACL_FLOAT) {
        float f;
        memcpy(&f, p->valueOrAddr, sizeof f);
        *out = f;
    } else {
        uint16_t h;
        memcpy(&h, p->valueOrAddr, sizeof h);
        *out = t == ACL_FLOAT16 ? rill__acl_half_to_float(h) : bf16_to_float(h);
    }
    if (!isfinite(*out))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: %s is not finite", CALL, name);
    return ACL_SUCCESS;
}

/* An integer bound of a uniform task of type t, sign-extended for the
 * signed types. */
static aclError bound_param(const char *name, const aclrtRandomParaInfo *p, aclDataType t,
                            int64_t *out) {
    aclError err = by_value(name, p, t);
    if (err != ACL_SUCCESS)
        return err;
    if (t == ACL_INT32) {
        int32_t v;
        memcpy(&v, p->valueOrAddr, sizeof v);
        *out = v;
    } else if (t == ACL_UINT32) {
        uint32_t v;
        memcpy(&v, p->valueOrAddr, sizeof v);
        *out = (int64_t)v;
    } else {
        memcpy(out, p->valueOrAddr, sizeof *out);
    }
    return ACL_SUCCESS;
}

/* Fills the uniform task's parameters into a. */
static aclError uniform_args(const aclrtRandomNumTaskInfo *task, struct random_args *a) {
    aclDataType t = task->dataType;
    const aclrtUniformDisInfo *u = &task->randomNumFuncParaInfo.paramInfo.uniformDisInfo;
    if (is_float_type(t)) {
        double lo, hi;
        aclError err = float_param("min", &u->min, t, &lo);
        if (err == ACL_SUCCESS)
            err = float_param("max", &u->max, t, &hi);
        if (err != ACL_SUCCESS)
            return err;
        if (!(lo <= hi))
            return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: min %g is above max %g", CALL, lo,
                                  hi);
        a->kind = UNIFORM_FLOAT;
        a->lo = lo;
        a->span = hi - lo;
        return ACL_SUCCESS;
    }
    int64_t lo, hi;
    aclError err = bound_param("min", &u->min, t, &lo);
    if (err == ACL_SUCCESS)
        err = bound_param("max", &u->max, t, &hi);
    if (err != ACL_SUCCESS)
        return err;
    bool is_unsigned = t == ACL_UINT32 || t == ACL_UINT64;
    if (is_unsigned ? (uint64_t)lo >= (uint64_t)hi : lo >= hi)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: min must be below max (values lie in [min, max))", CALL);
    a->kind = is_unsigned ? UNIFORM_UINT : UNIFORM_INT;
    a->ilo = lo;
    a->range = (uint64_t)hi - (uint64_t)lo;
    return ACL_SUCCESS;
}

static const char *func_name(aclrtRandomNumFuncType t) {
    switch (t) {
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK:
        return "a dropout bitmask";
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS:
        return "a uniform distribution";
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS:
        return "a normal distribution";
    default:
        return "a truncated normal distribution";
    }
}

aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo *taskInfo, const aclrtStream stream,
                             void *reserve) {
    if (!taskInfo)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: taskInfo is NULL", CALL);
    if (reserve)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: reserve must be NULL", CALL);
    aclrtRandomNumFuncType type = taskInfo->randomNumFuncParaInfo.funcType;
    if ((unsigned)type > ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: funcType %d is no aclrtRandomNumFuncType", CALL, (int)type);
    aclDataType t = taskInfo->dataType;
    bool uniform = type == ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS;
    if (!is_float_type(t) && !(uniform && is_int_type(t)))
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: data type %d is not built for %s; ACL_FLOAT, ACL_FLOAT16 and "
                              "ACL_BF16 are%s",
                              CALL, (int)t, func_name(type),
                              uniform ? ", and ACL_INT32, ACL_INT64, ACL_UINT32 and ACL_UINT64"
                                      : "");
    if (!taskInfo->randomResultAddr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: randomResultAddr is NULL", CALL);
    uint64_t seed = 0, num = 0; /* set by int_param on success (gcc -O3 cannot tell) */
    aclError err = int_param("randomSeed", &taskInfo->randomSeed, &seed);
    if (err == ACL_SUCCESS)
        err = int_param("randomNum", &taskInfo->randomNum, &num);
    if (err != ACL_SUCCESS)
        return err;
    if (num > SIZE_MAX / 8)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: randomNum %llu is too large", CALL,
                              (unsigned long long)num);

    struct random_args a = {.dtype = t, .seed = seed, .n = num, .out = taskInfo->randomResultAddr};
    const aclrtNormalDisInfo *normal = &taskInfo->randomNumFuncParaInfo.paramInfo.normalDisInfo;
    if (uniform) {
        err = uniform_args(taskInfo, &a);
    } else if (type == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK) {
        double ratio;
        err = float_param(
            "dropoutRation",
            &taskInfo->randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, t, &ratio);
        if (err == ACL_SUCCESS && !(ratio >= 0.0 && ratio <= 1.0))
            err = rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: dropoutRation %g is not in [0, 1]",
                                 CALL, ratio);
        a.kind = BITMASK;
        a.span = 1.0 - ratio; /* a bit is 1 (kept) with this probability */
    } else {
        err = float_param("mean", &normal->mean, t, &a.lo);
        if (err == ACL_SUCCESS)
            err = float_param("stddev", &normal->stddev, t, &a.span);
        if (err == ACL_SUCCESS && a.span < 0.0)
            err = rill__acl_fail(ACL_ERROR_RT_PARAM_INVALID, /* as rill's randn refuses it */
                                 "%s: stddev %g is negative", CALL, a.span);
        a.kind = type == ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS ? NORMAL : TRUNCATED;
    }
    if (err != ACL_SUCCESS)
        return err;
    if (a.kind == NORMAL && t == ACL_FLOAT)
        return rill__acl_check(rill_op_randn_f32((rill_stream *)stream, a.out, (size_t)num,
                                                 (float)a.lo, (float)a.span, seed),
                               CALL);

    size_t bytes = a.kind == BITMASK ? (size_t)((num + 7) / 8) : (size_t)num * type_size(t);
    if (bytes == 0)
        return ACL_SUCCESS;
    struct rill__acl_region region;
    if (!rill__acl_memory_find(a.out, &region) ||
        (uintptr_t)a.out - region.base > region.bytes - bytes || bytes > region.bytes)
        return rill__acl_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "%s: randomResultAddr (%p) does not hold %zu bytes of memory from "
                              "aclrtMalloc or aclrtMallocHost",
                              CALL, a.out, bytes);
    uint64_t units = a.kind == BITMASK ? (num + 7) / 8 : num;
    rill_access access = {a.out, bytes, RILL_WRITE};
    rill_launch launch = {.grid = {(uint32_t)((units + CHUNK - 1) / CHUNK), 1, 1},
                          .block = {1, 1, 1},
                          .args = &a,
                          .args_size = sizeof a,
                          .accesses = &access,
                          .num_accesses = 1};
    rill_kernel_desc desc = {.name = "aclrtRandomNumAsync", .cpu = random_body};
    rill_kernel *kernel;
    rill_status st = rill_kernel_create(&desc, &kernel);
    if (st == RILL_OK) {
        st = rill_launch_kernel((rill_stream *)stream, kernel, &launch);
        rill_kernel_destroy(kernel);
    }
    return rill__acl_check(st, CALL);
}
