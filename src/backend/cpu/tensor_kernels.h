/* SPDX-License-Identifier: MIT */
/* CPU bodies of the tensor ops (backend/op_args.h): strided copies,
 * broadcasting binary ops, maps, comparisons, where and conversions
 * (select_kernels.c), reductions and softmax along one dimension, layer
 * norm, 2-D pooling, embeddings and the negative log likelihood loss. Each
 * is a rill_cpu_kernel_fn, called once per block; op_kernels.c lists them
 * in rill__cpu_op_body. */
#ifndef RILL_CPU_TENSOR_KERNELS_H
#define RILL_CPU_TENSOR_KERNELS_H

#include "backend/op_args.h"
#include "rill.h"

void rill__cpu_op_copy_strided_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_binary_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_map_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_masked_scale_f32(const rill_block_ctx *ctx, const void *args);
/* select_kernels.c */
void rill__cpu_op_compare(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_where(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_convert(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_triangle(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_reduce_dim_bool(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_arange(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_reduce_dim_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_softmax_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_layer_norm_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_layer_norm_backward_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_pool2d_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_embedding_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_embedding_backward_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_nll_loss_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_nll_loss_backward_f32(const rill_block_ctx *ctx, const void *args);

#endif
