/* SPDX-License-Identifier: MIT */
/* The built-in ops' CPU bodies under their CUDA entry points' names
 * followed by "_host" (src/backend/cuda/cuda_ops.c), for the stand-in
 * driver of tests/cuda_fake, which runs them for the PTX kernels. */
#include "backend/cpu/op_kernels.h"

#define TWIN(entry, op)                                                                            \
    void entry##_host(const rill_block_ctx *ctx, const void *args);                                \
    void entry##_host(const rill_block_ctx *ctx, const void *args) {                               \
        rill__cpu_op_body(op)(ctx, args);                                                          \
    }

TWIN(rill__cuda_op_fill_f32, RILL__OP_FILL_F32)
TWIN(rill__cuda_op_add_f32, RILL__OP_ADD_F32)
TWIN(rill__cuda_op_mul_f32, RILL__OP_MUL_F32)
TWIN(rill__cuda_op_add_scalar_f32, RILL__OP_ADD_SCALAR_F32)
TWIN(rill__cuda_op_sum_f32_partial, RILL__OP_SUM_PARTIAL_F32)
TWIN(rill__cuda_op_sum_f32_final, RILL__OP_SUM_FINAL_F32)
TWIN(rill__cuda_op_randn_f32, RILL__OP_RANDN_F32)
TWIN(rill__cuda_op_cast_f32_f16, RILL__OP_CAST_F32_F16)
TWIN(rill__cuda_op_cast_f16_f32, RILL__OP_CAST_F16_F32)
TWIN(rill__cuda_op_fill_f16, RILL__OP_FILL_F16)
TWIN(rill__cuda_op_add_f16, RILL__OP_ADD_F16)
TWIN(rill__cuda_op_mul_f16, RILL__OP_MUL_F16)
TWIN(rill__cuda_op_add_scalar_f16, RILL__OP_ADD_SCALAR_F16)
TWIN(rill__cuda_op_sum_f16_partial, RILL__OP_SUM_PARTIAL_F16)
TWIN(rill__cuda_op_sum_f16_final, RILL__OP_SUM_FINAL_F16)
TWIN(rill__cuda_op_conv2d_f16, RILL__OP_CONV2D_F16)
