/* SPDX-License-Identifier: MIT */
/* conv2d and its two gradients on oneDNN, where rill was built with it
 * (conv_onednn.c). Each function is a block's part of a launch: it
 * returns false, having written nothing, where oneDNN does not take the
 * launch (rill built without it, RILL_CPU_ONEDNN=0 in the environment, a
 * processor without AVX2, grouped convolutions), and the op body runs its
 * own path; the answer is the same for every block. Otherwise it runs the
 * block's slice of the work, from ctx's grid, on the calling worker alone
 * and returns true; if oneDNN fails (memory running out), it fails the
 * launch (rill__kernel_fail) with a sentence naming the cause. */
#ifndef RILL_CPU_CONV_ONEDNN_H
#define RILL_CPU_CONV_ONEDNN_H

#include <stdbool.h>

#include "backend/op_args.h"
#include "rill.h"

/* Writes block ctx's slice of p->out: images split between the blocks, or
 * with fewer images than blocks, each image's filters. */
bool rill__cpu_onednn_conv2d(const rill_block_ctx *ctx, const rill__op_conv2d_ex_args *p);

/* Writes block ctx's slice of p->grad_in: images split between the
 * blocks, or with fewer images than blocks, each image's channels. */
bool rill__cpu_onednn_conv2d_backward_data(const rill_block_ctx *ctx,
                                           const rill__op_conv2d_backward_args *p);

/* Writes block ctx's slice of p->grad_weight: filters split between the
 * blocks, each summed over every image. */
bool rill__cpu_onednn_conv2d_backward_filter(const rill_block_ctx *ctx,
                                             const rill__op_conv2d_backward_args *p);

#endif
