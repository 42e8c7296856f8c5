/* SPDX-License-Identifier: MIT */
/* Array conversions between float16 and float32 for the CPU op bodies.
 * Layer: CPU backend. Where the compiler targets x86 and the processor
 * has F16C (and the AVX state the OS must save for it), eight values go
 * through one instruction; the check is made once, at first use, and the
 * answer kept. Elsewhere, and for the tail of an array, the portable
 * conversions of half.h run. Invariant: both paths give the same bits for
 * every input (tests/unit/test_ops.c compares them on every half and on a
 * sweep of floats). */
#include "backend/cpu/half.h"

#include <stdatomic.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HALF_HAVE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define HALF_HAVE_X86 0
#endif

/* -1 until checked, then 0 or 1. Relaxed: every thread that checks finds
 * the same answer, so a race only repeats the check. */
static atomic_int has_f16c = -1;
static atomic_bool portable_forced = false;

static bool processor_has_f16c(void) {
#if HALF_HAVE_X86
    int known = atomic_load_explicit(&has_f16c, memory_order_relaxed);
    if (known < 0) {
        /* CPUID leaf 1: F16C (ECX bit 29), AVX (bit 28) and OSXSAVE (bit
         * 27); then XCR0 must say the OS saves the SSE and AVX state (bits
         * 1 and 2). cpuid rather than __builtin_cpu_supports, which older
         * clang does not know "f16c" for. */
        unsigned a = 0, b = 0, c = 0, d = 0;
        known = 0;
        if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && (c & (1u << 28)) &&
            (c & (1u << 27))) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            (void)hi;
            known = (lo & 6u) == 6u;
        }
        atomic_store_explicit(&has_f16c, known, memory_order_relaxed);
    }
    return known != 0;
#else
    return false;
#endif
}

bool rill__half_uses_f16c(void) {
    return processor_has_f16c() && !atomic_load_explicit(&portable_forced, memory_order_relaxed);
}

void rill__half_force_portable(bool portable) {
    atomic_store_explicit(&portable_forced, portable, memory_order_relaxed);
}

#if HALF_HAVE_X86
/* Eight at a time; returns how many it converted (a multiple of 8). */
__attribute__((target("avx,f16c"))) static size_t to_float_f16c(float *dst, const uint16_t *src,
                                                                size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    return i;
}

__attribute__((target("avx,f16c"))) static size_t from_float_f16c(uint16_t *dst, const float *src,
                                                                  size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    return i;
}
#endif

void rill__half_to_float_n(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
#if HALF_HAVE_X86
    if (rill__half_uses_f16c())
        i = to_float_f16c(dst, src, n);
#endif
    for (; i < n; i++)
        dst[i] = rill__half_to_float(src[i]);
}

void rill__half_from_float_n(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
#if HALF_HAVE_X86
    if (rill__half_uses_f16c())
        i = from_float_f16c(dst, src, n);
#endif
    for (; i < n; i++)
        dst[i] = rill__half_from_float(src[i]);
}
