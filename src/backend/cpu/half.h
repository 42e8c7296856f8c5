/* SPDX-License-Identifier: MIT */
/* float16 (IEEE 754 binary16, rill_half) to and from float32, for the
 * float16 op bodies. One value at a time, portably (backend/half_bits.h,
 * which states the rounding); whole arrays with the processor's F16C
 * instructions where it has them (checked once, at run time), else
 * portably. Both give the same bits for every input. */
#ifndef RILL_CPU_HALF_H
#define RILL_CPU_HALF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/half_bits.h"

/* dst[i] = rill__half_to_float(src[i]) for i < n. */
void rill__half_to_float_n(float *dst, const uint16_t *src, size_t n);
/* dst[i] = rill__half_from_float(src[i]) for i < n. */
void rill__half_from_float_n(uint16_t *dst, const float *src, size_t n);

/* Whether the array conversions use F16C: the processor has it and no
 * test asked for the portable code. */
bool rill__half_uses_f16c(void);
/* For tests: true makes the array conversions portable even where F16C
 * is present, false lets them use it again. */
void rill__half_force_portable(bool portable);

#endif
