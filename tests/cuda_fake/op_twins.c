/* SPDX-License-Identifier: MIT */
/* The built-in ops' CPU bodies under their CUDA entry points' names
 * (src/backend/cuda/cuda_ops.c): the stand-in driver runs them for the
 * ops' kernels. */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/op_kernels.h"
#include "op_twins.h"

static const struct {
    const char *entry;
    rill__op op;
} twins[] = {
    {"rill__cuda_op_fill_f32", RILL__OP_FILL_F32},
    {"rill__cuda_op_add_f32", RILL__OP_ADD_F32},
    {"rill__cuda_op_mul_f32", RILL__OP_MUL_F32},
    {"rill__cuda_op_add_scalar_f32", RILL__OP_ADD_SCALAR_F32},
    {"rill__cuda_op_sum_f32_partial", RILL__OP_SUM_PARTIAL_F32},
    {"rill__cuda_op_sum_f32_final", RILL__OP_SUM_FINAL_F32},
    {"rill__cuda_op_randn_f32", RILL__OP_RANDN_F32},
    {"rill__cuda_op_cast_f32_f16", RILL__OP_CAST_F32_F16},
    {"rill__cuda_op_cast_f16_f32", RILL__OP_CAST_F16_F32},
    {"rill__cuda_op_fill_f16", RILL__OP_FILL_F16},
    {"rill__cuda_op_add_f16", RILL__OP_ADD_F16},
    {"rill__cuda_op_mul_f16", RILL__OP_MUL_F16},
    {"rill__cuda_op_add_scalar_f16", RILL__OP_ADD_SCALAR_F16},
    {"rill__cuda_op_sum_f16_partial", RILL__OP_SUM_PARTIAL_F16},
    {"rill__cuda_op_sum_f16_final", RILL__OP_SUM_FINAL_F16},
    {"rill__cuda_op_conv2d_f16", RILL__OP_CONV2D_F16},
    {"rill__cuda_op_copy_strided_f32", RILL__OP_COPY_STRIDED_F32},
    {"rill__cuda_op_binary_f32", RILL__OP_BINARY_F32},
    {"rill__cuda_op_map_f32", RILL__OP_MAP_F32},
    {"rill__cuda_op_reduce_dim_f32", RILL__OP_REDUCE_DIM_F32},
    {"rill__cuda_op_softmax_f32", RILL__OP_SOFTMAX_F32},
    {"rill__cuda_op_conv2d_ex_f32", RILL__OP_CONV2D_EX_F32},
    {"rill__cuda_op_pool2d_f32", RILL__OP_POOL2D_F32},
    {"rill__cuda_op_embedding_f32", RILL__OP_EMBEDDING_F32},
    {"rill__cuda_op_embedding_backward_f32", RILL__OP_EMBEDDING_BACKWARD_F32},
    {"rill__cuda_op_max_pool2d_backward_f32", RILL__OP_MAX_POOL2D_BACKWARD_F32},
    {"rill__cuda_op_avg_pool2d_backward_f32", RILL__OP_AVG_POOL2D_BACKWARD_F32},
    {"rill__cuda_op_pool2d_ex_f32", RILL__OP_POOL2D_EX_F32},
    {"rill__cuda_op_avg_pool2d_backward_ex_f32", RILL__OP_AVG_POOL2D_BACKWARD_EX_F32},
    {"rill__cuda_op_layer_norm_f32", RILL__OP_LAYER_NORM_F32},
    {"rill__cuda_op_layer_norm_backward_f32", RILL__OP_LAYER_NORM_BACKWARD_F32},
    {"rill__cuda_op_nll_loss_f32", RILL__OP_NLL_LOSS_F32},
    {"rill__cuda_op_nll_loss_backward_f32", RILL__OP_NLL_LOSS_BACKWARD_F32},
    {"rill__cuda_op_add_scalar_i64", RILL__OP_ADD_SCALAR_I64},
    {"rill__cuda_op_fill_bits", RILL__OP_FILL_BITS},
    {"rill__cuda_op_masked_scale_f32", RILL__OP_MASKED_SCALE_F32},
    {"rill__cuda_op_compare", RILL__OP_COMPARE},
    {"rill__cuda_op_where", RILL__OP_WHERE},
    {"rill__cuda_op_triangle", RILL__OP_TRIANGLE},
    {"rill__cuda_op_convert", RILL__OP_CONVERT},
    {"rill__cuda_op_reduce_dim_bool", RILL__OP_REDUCE_DIM_BOOL},
    {"rill__cuda_op_arange", RILL__OP_ARANGE},
};

rill_cpu_kernel_fn fake_op_twin(const char *entry) {
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++)
        if (strcmp(twins[i].entry, entry) == 0)
            return rill__cpu_op_body(twins[i].op);
    return NULL;
}

/* The CUDA kernels trap where a CPU body calls this (an embedding index out
 * of range): the stand-in's GPU fails as a GPU does. */
void rill__kernel_fail(const rill_block_ctx *ctx, const char *message) {
    (void)ctx;
    (void)message;
    fake_cuda_trap();
}
