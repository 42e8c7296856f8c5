/* SPDX-License-Identifier: MIT */
/* conv2d at stride 1 without an im2col matrix, with AVX-512F
 * (conv_direct.c). */
#ifndef RILL_CPU_CONV_DIRECT_H
#define RILL_CPU_CONV_DIRECT_H

#include "backend/op_args.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether p's outputs are wide enough for rill__cpu_conv2d_direct to beat
 * an im2col product: at least 14 columns. At 7, under 80% of a tile's
 * lanes are outputs (measured on Intel's Xeon, family 6 model 207:
 * ResNet-18's 512-filter 7x7 layer at batch 8 took 16.5 ms this way
 * against 14.5 ms through im2col; its 64-filter 56x56 layer 11.8 ms
 * against 19.0 ms). */
bool rill__cpu_conv2d_direct_pays(const rill__op_conv2d_ex_args *p);

/* Floats of scratch that rill__cpu_conv2d_direct needs for count images'
 * bands of rows output rows of p. */
size_t rill__cpu_conv2d_direct_floats(const rill__op_conv2d_ex_args *p, size_t count, size_t rows);

/* Writes output rows [oy0, oy0 + rows) of images [img0, img0 + count) of
 * p (every filter), through scratch (scratch_floats floats, on the calling
 * thread only). False, writing nothing, unless the processor has AVX-512F,
 * p has one group, strides and dilations of 1, and scratch_floats is at
 * least rill__cpu_conv2d_direct_floats(p, count, rows). */
bool rill__cpu_conv2d_direct(const rill__op_conv2d_ex_args *p, size_t img0, size_t count,
                             size_t oy0, size_t rows, float *scratch, size_t scratch_floats);

#endif
