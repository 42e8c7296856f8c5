/* SPDX-License-Identifier: MIT */
/* CPU bodies of the backward of conv2d with strides and padding
 * (rill__op_conv2d_backward_args in backend/op_args.h): each is a
 * rill_cpu_kernel_fn, called once per block; op_kernels.c lists them in
 * rill__cpu_op_body. The im2col matrix they share with the forward
 * (op_kernels.c) is here too. */
#ifndef RILL_CPU_CONV_BACKWARD_KERNELS_H
#define RILL_CPU_CONV_BACKWARD_KERNELS_H

#include "backend/op_args.h"
#include "rill.h"

void rill__cpu_op_conv2d_backward_data_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_backward_filter_f32(const rill_block_ctx *ctx, const void *args);

/* The im2col matrix of output rows [oy0, oy0 + rows) of the image at img
 * (p->c planes of p->h*p->w floats) for conv2d_ex's strides, padding and
 * dilation, its rows ld floats apart: row (ci*r + ri)*s + si, column y*ow +
 * x holds img[ci, (oy0+y)*stride_h + ri*dil_h - pad_h, x*stride_w +
 * si*dil_w - pad_w], or 0 outside the image. The backward bodies call it
 * with p->c set to a group of channels. */
void rill__cpu_im2col_ex(const rill__op_conv2d_ex_args *p, const float *img, size_t oy0,
                         size_t rows, float *col, size_t ld);

#endif
