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

/* The i-th standard normal sample of seed: pair i/2 of uniforms (u1 in
 * (0, 1], u2 in [0, 1)) from two rounds of splitmix64 on seed and the pair,
 * then Box-Muller: sqrt(-2 ln u1) times cos (even i) or sin (odd i) of
 * 2 pi u2. A pure function of (seed, i), so any grid gives the same bits. */
double rill__op_randn_value(uint64_t seed, size_t i);

/* The CPU body of op, for rill__kernel_image.cpu. */
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

#endif
