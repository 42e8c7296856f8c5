/* SPDX-License-Identifier: MIT */
/* CPU bodies of the backward of conv2d with strides and padding
 * (rill__op_conv2d_backward_args in backend/op_args.h): each is a
 * rill_cpu_kernel_fn, called once per block; op_kernels.c lists them in
 * rill__cpu_op_body. */
#ifndef RILL_CPU_CONV_BACKWARD_KERNELS_H
#define RILL_CPU_CONV_BACKWARD_KERNELS_H

#include "backend/op_args.h"
#include "rill.h"

void rill__cpu_op_conv2d_backward_data_f32(const rill_block_ctx *ctx, const void *args);
void rill__cpu_op_conv2d_backward_filter_f32(const rill_block_ctx *ctx, const void *args);

#endif
