/* SPDX-License-Identifier: MIT */
/* float16 (IEEE 754 binary16, rill_half) to and from float32, one value at
 * a time, in integer arithmetic: the bits that every backend's f16 op
 * bodies give. Compiled as C by the CPU backend (backend/cpu/half.h adds
 * its array conversions) and as CUDA C++ by the CUDA op kernels, where
 * RILL__HOST_DEVICE makes them device functions too.
 *  - to float: exact (every half is a float); a signalling NaN becomes
 *    quiet, its payload kept;
 *  - from float: rounded to the nearest half, ties to even; values from
 *    65520 up become infinity; a NaN keeps its sign and the top 10 bits
 *    of its payload, and is quiet. */
#ifndef RILL_BACKEND_HALF_BITS_H
#define RILL_BACKEND_HALF_BITS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RILL__HOST_DEVICE __host__ __device__
#else
#define RILL__HOST_DEVICE
#endif

static inline RILL__HOST_DEVICE float rill__half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1fu) {
        bits = sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* A subnormal half, mant * 2^-24: normalise the mantissa. */
        uint32_t shifts = 0;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            shifts++;
        }
        bits = sign | ((113u - shifts) << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline RILL__HOST_DEVICE uint16_t rill__half_from_float(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* infinity, or a NaN made quiet */
        return ax == 0x7f800000u ? sign | 0x7c00u : sign | 0x7e00u | ((ax >> 13) & 0x3ffu);
    if (ax >= 0x477ff000u) /* 65520 and up round past the largest half */
        return sign | 0x7c00u;
    if (ax >= 0x38800000u) { /* a normal half: rebias, round the 13 dropped bits */
        uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((rounded - (112u << 23)) >> 13));
    }
    if (ax < 0x33000000u) /* at most 2^-25, half the smallest subnormal: zero */
        return sign;
    /* A subnormal half: value / 2^-24 = mantissa >> (126 - exponent). */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
    if (rem > tie || (rem == tie && (q & 1u) != 0))
        q++;
    return (uint16_t)(sign | q);
}

#endif
