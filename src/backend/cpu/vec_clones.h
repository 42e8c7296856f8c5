/* SPDX-License-Identifier: MIT */
/* Op bodies compiled once per vector width. Where the build asks for it
 * (RILL_CPU_VECTOR_CLONES: GCC on x86-64, CMakeLists.txt), a body that is
 * a vector loop is compiled three times, for AVX-512 (512-bit vectors),
 * AVX2 (both with FMA) and the baseline, and each call runs the widest the
 * processor takes. The choice is made at run time, not by the loader (an
 * ifunc's resolver runs before relocation is done, which sanitizer
 * runtimes do not survive). All give the same bits: the wider ones only
 * widen the vectors and fuse only the multiply-adds written as such
 * (vec_math.h's rill__vec_fma, which the baseline computes with fmaf), and
 * every lane computes what the scalar code does (tests/unit/test_vec_math.c
 * checks the maps).
 *
 * VECTOR_BODY(name)(ctx, args) { ... } defines the body and name; the
 * helpers it calls are INLINED, so that each clone has its own, compiled
 * for its instructions. */
#ifndef RILL_CPU_VEC_CLONES_H
#define RILL_CPU_VEC_CLONES_H

#include <stdbool.h>

#include "rill.h"

#define INLINED static inline __attribute__((always_inline))

#define BODY_ARGS const rill_block_ctx *ctx, const void *args
#ifdef RILL_CPU_VECTOR_CLONES
INLINED bool rill__cpu_has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
}
#define RILL__AVX512 "avx512f,avx512dq,avx512bw,avx512vl,fma"
#define VECTOR_BODY(name)                                                                          \
    INLINED void name##_body(BODY_ARGS);                                                           \
    __attribute__((target(RILL__AVX512 ",prefer-vector-width=512"))) static void name##_avx512(    \
        BODY_ARGS) {                                                                               \
        name##_body(ctx, args);                                                                    \
    }                                                                                              \
    __attribute__((target("avx2,fma"))) static void name##_avx2(BODY_ARGS) {                       \
        name##_body(ctx, args);                                                                    \
    }                                                                                              \
    static void name##_base(BODY_ARGS) {                                                           \
        name##_body(ctx, args);                                                                    \
    }                                                                                              \
    void name(BODY_ARGS) {                                                                         \
        if (rill__cpu_has_avx512())                                                                \
            name##_avx512(ctx, args);                                                              \
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))                  \
            name##_avx2(ctx, args);                                                                \
        else                                                                                       \
            name##_base(ctx, args);                                                                \
    }                                                                                              \
    INLINED void name##_body
#else
#define VECTOR_BODY(name) void name
#endif

#endif
