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
void rill__cpu_op_add_scalar_i64(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_fill_bits(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_sum_partial_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_sum_final_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_matmul_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_matmul_batched_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_ex_f32(const rill_block_ctx *ctx, const void *args);

#endif
