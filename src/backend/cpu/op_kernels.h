/* SPDX-License-Identifier: MIT */
/* CPU bodies of the built-in ops (backend/op_args.h): each is a
 * rill_cpu_kernel_fn, called once per block (ctx->block_idx.x of
 * ctx->grid_dim.x; y and z are 1), and rill__cpu_op_body gives the one
 * for an op. */
#ifndef RILL_CPU_OP_KERNELS_H
#define RILL_CPU_OP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "rill.h"

/* The CPU body of op, what the CPU device runs for its kernel (kernel_load). */
rill_cpu_kernel_fn rill__cpu_op_body(rill__op op);

void rill__cpu_op_sum_partial_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_sum_final_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_matmul_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_fill_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_add_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_mul_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_add_scalar_f16(const rill_block_ctx *ctx, const void *args);

void rill__cpu_op_randn_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_cast_f32_f16(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_cast_f16_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_fill_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_add_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_mul_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_add_scalar_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_sum_partial_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_sum_final_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_matmul_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_ex_f32(const rill_block_ctx *ctx, const void *args);

/* The im2col matrix of output rows [oy0, oy0 + rows) of the image at img
 * (p->c planes of p->h*p->w floats) for conv2d_ex's strides and padding:
 * row (ci*r + ri)*s + si, column y*ow + x holds img[ci, (oy0+y)*stride_h +
 * ri - pad_h, x*stride_w + si - pad_w], or 0 outside the image. The
 * backward bodies call it with p->c set to a group of channels. */
void rill__cpu_im2col_ex(const rill__op_conv2d_ex_args *p, const float *img, size_t oy0,
                         size_t rows, float *col);

#endif
