/* SPDX-License-Identifier: MIT */
/* CPU bodies of the backward of 2-D pooling (backend/op_args.h): max
 * pooling's scatter by the forward's positions and average pooling's
 * gather over the windows; and the pooling with dilation, ceil mode and
 * average pooling's divisor rules, forward and backward. Each is a rill_cpu_kernel_fn, called once
 * per block; op_kernels.c lists them in rill__cpu_op_body. */
#ifndef RILL_CPU_POOL_KERNELS_H
#define RILL_CPU_POOL_KERNELS_H

#include "backend/op_args.h"
#include "rill.h"

void rill__cpu_op_max_pool2d_backward_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_avg_pool2d_backward_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_pool2d_ex_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_avg_pool2d_backward_ex_f32(const rill_block_ctx *ctx, const void *args);

#endif
