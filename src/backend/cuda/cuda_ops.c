/* SPDX-License-Identifier: MIT */
/* Which body runs each built-in op on a CUDA device: a kernel of
 * op_kernels.cu, named by its entry point, or a library call of
 * cuda_libs.c. Layer: CUDA backend. Invariant: every op but RILL__OP_NONE
 * has exactly one of the two (tests/unit/test_cuda_ops.c checks it, and
 * that every entry is in the PTX). */
#include "backend/cuda/cuda_ops.h"

typedef struct op_body {
    const char *entry; /* the kernel's entry point, or NULL */
    bool library;      /* run by rill__cuda_op_library */
} op_body;

static const op_body bodies[RILL__OP_COUNT] = {
    [RILL__OP_FILL_F32] = {"rill__cuda_op_fill_f32", false},
    [RILL__OP_ADD_F32] = {"rill__cuda_op_add_f32", false},
    [RILL__OP_MUL_F32] = {"rill__cuda_op_mul_f32", false},
    [RILL__OP_ADD_SCALAR_F32] = {"rill__cuda_op_add_scalar_f32", false},
    [RILL__OP_SUM_PARTIAL_F32] = {"rill__cuda_op_sum_f32_partial", false},
    [RILL__OP_SUM_FINAL_F32] = {"rill__cuda_op_sum_f32_final", false},
    [RILL__OP_MATMUL_F32] = {NULL, true},
    [RILL__OP_CONV2D_F32] = {NULL, true},
    [RILL__OP_RANDN_F32] = {"rill__cuda_op_randn_f32", false},
    [RILL__OP_CAST_F32_F16] = {"rill__cuda_op_cast_f32_f16", false},
    [RILL__OP_CAST_F16_F32] = {"rill__cuda_op_cast_f16_f32", false},
    [RILL__OP_FILL_F16] = {"rill__cuda_op_fill_f16", false},
    [RILL__OP_ADD_F16] = {"rill__cuda_op_add_f16", false},
    [RILL__OP_MUL_F16] = {"rill__cuda_op_mul_f16", false},
    [RILL__OP_ADD_SCALAR_F16] = {"rill__cuda_op_add_scalar_f16", false},
    [RILL__OP_SUM_PARTIAL_F16] = {"rill__cuda_op_sum_f16_partial", false},
    [RILL__OP_SUM_FINAL_F16] = {"rill__cuda_op_sum_f16_final", false},
    [RILL__OP_MATMUL_F16] = {NULL, true},
    /* A kernel: cuDNN would need the weight as halves, and the op hands
     * its body the weight converted to floats. */
    [RILL__OP_CONV2D_F16] = {"rill__cuda_op_conv2d_f16", false},
    [RILL__OP_COPY_STRIDED_F32] = {"rill__cuda_op_copy_strided_f32", false},
    [RILL__OP_BINARY_F32] = {"rill__cuda_op_binary_f32", false},
    [RILL__OP_MAP_F32] = {"rill__cuda_op_map_f32", false},
    [RILL__OP_REDUCE_DIM_F32] = {"rill__cuda_op_reduce_dim_f32", false},
    [RILL__OP_SOFTMAX_F32] = {"rill__cuda_op_softmax_f32", false},
    /* A kernel: the CPU's im2col plan has no use on a GPU, and a direct
     * convolution handles strides and padding by bounds. */
    [RILL__OP_CONV2D_EX_F32] = {"rill__cuda_op_conv2d_ex_f32", false},
    [RILL__OP_POOL2D_F32] = {"rill__cuda_op_pool2d_f32", false},
    [RILL__OP_EMBEDDING_F32] = {"rill__cuda_op_embedding_f32", false},
    [RILL__OP_EMBEDDING_BACKWARD_F32] = {"rill__cuda_op_embedding_backward_f32", false},
    /* cuDNN's backward convolutions. */
    [RILL__OP_CONV2D_BACKWARD_DATA_F32] = {NULL, true},
    [RILL__OP_CONV2D_BACKWARD_FILTER_F32] = {NULL, true},
    [RILL__OP_MAX_POOL2D_BACKWARD_F32] = {"rill__cuda_op_max_pool2d_backward_f32", false},
    [RILL__OP_AVG_POOL2D_BACKWARD_F32] = {"rill__cuda_op_avg_pool2d_backward_f32", false},
    [RILL__OP_POOL2D_EX_F32] = {"rill__cuda_op_pool2d_ex_f32", false},
    [RILL__OP_AVG_POOL2D_BACKWARD_EX_F32] = {"rill__cuda_op_avg_pool2d_backward_ex_f32", false},
    /* cublasSgemmStridedBatched. */
    [RILL__OP_MATMUL_BATCHED_F32] = {NULL, true},
    [RILL__OP_LAYER_NORM_F32] = {"rill__cuda_op_layer_norm_f32", false},
    [RILL__OP_LAYER_NORM_BACKWARD_F32] = {"rill__cuda_op_layer_norm_backward_f32", false},
    [RILL__OP_NLL_LOSS_F32] = {"rill__cuda_op_nll_loss_f32", false},
    [RILL__OP_NLL_LOSS_BACKWARD_F32] = {"rill__cuda_op_nll_loss_backward_f32", false},
    [RILL__OP_ADD_SCALAR_I64] = {"rill__cuda_op_add_scalar_i64", false},
    [RILL__OP_FILL_BITS] = {"rill__cuda_op_fill_bits", false},
    [RILL__OP_MASKED_SCALE_F32] = {"rill__cuda_op_masked_scale_f32", false},
    [RILL__OP_COMPARE] = {"rill__cuda_op_compare", false},
    [RILL__OP_WHERE] = {"rill__cuda_op_where", false},
    [RILL__OP_TRIANGLE] = {"rill__cuda_op_triangle", false},
    [RILL__OP_CONVERT] = {"rill__cuda_op_convert", false},
    [RILL__OP_REDUCE_DIM_BOOL] = {"rill__cuda_op_reduce_dim_bool", false},
    [RILL__OP_ARANGE] = {"rill__cuda_op_arange", false},
};

const char *rill__cuda_op_entry(rill__op op) {
    return op > RILL__OP_NONE && op < RILL__OP_COUNT ? bodies[op].entry : NULL;
}

bool rill__cuda_op_uses_library(rill__op op) {
    return op > RILL__OP_NONE && op < RILL__OP_COUNT && bodies[op].library;
}
