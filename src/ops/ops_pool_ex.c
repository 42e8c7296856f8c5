/* SPDX-License-Identifier: MIT */
/* 2-D pooling with the options of PyTorch's max_pool2d and avg_pool2d that
 * rill_op_pool2d_f32 leaves out (dilation of a max, ceil mode, average
 * pooling's count_include_pad and divisor_override), forward and the
 * average's backward: the checks of rill_pool2d_params, the output size
 * as PyTorch computes it, and the launches, on what ops.c provides
 * (ops_internal.h). The max's backward is rill_op_max_pool2d_backward_f32
 * on the indices the forward gives. */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* One dimension's output size, as PyTorch's pooling_output_shape: the
 * windows that start inside the padded input, with ceil mode also the
 * last partial one when it starts before the end of the input plus pad. */
static size_t pool_outputs(size_t n, size_t span, size_t stride, size_t pad, bool ceil_mode) {
    size_t room = n + 2 * pad - span; /* span <= n + 2*pad: checked */
    size_t outputs = (room + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if (ceil_mode && (outputs - 1) * stride >= n + pad)
        outputs--;
    return outputs;
}

/* The checks of params for op over [h, w] images; *oh and *ow get the
 * output's size. */
static rill_status check_params(const char *fn, rill_pool_op op, size_t h, size_t w,
                                const rill_pool2d_params *p, size_t *oh, size_t *ow) {
    rill_status st;
    if (p == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: params is NULL; pass a rill_pool2d_params with the window, "
                          "strides and padding",
                          fn);
    if ((st = rill__op_check_dim(fn, h, "h", "the input height")) != RILL_OK ||
        (st = rill__op_check_dim(fn, w, "w", "the input width")) != RILL_OK ||
        (st = rill__op_check_dim(fn, p->r, "r", "the window height")) != RILL_OK ||
        (st = rill__op_check_dim(fn, p->sz, "sz", "the window width")) != RILL_OK ||
        (st = rill__op_check_dim(fn, p->stride_h, "stride_h", "the vertical stride")) != RILL_OK ||
        (st = rill__op_check_dim(fn, p->stride_w, "stride_w", "the horizontal stride")) !=
            RILL_OK ||
        (st = rill__op_check_dim(fn, p->dilation_h, "dilation_h", "the vertical dilation")) !=
            RILL_OK ||
        (st = rill__op_check_dim(fn, p->dilation_w, "dilation_w", "the horizontal dilation")) !=
            RILL_OK)
        return st;
    if ((p->flags & ~(RILL_POOL_CEIL_MODE | RILL_POOL_EXCLUDE_PAD)) != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: flags 0x%x has bits other than RILL_POOL_CEIL_MODE and "
                          "RILL_POOL_EXCLUDE_PAD; pass those only",
                          fn, p->flags);
    if (op == RILL_POOL_AVG && (p->dilation_h != 1 || p->dilation_w != 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: average pooling takes no dilation, and dilation is (%zu, %zu); "
                          "pass 1 for both",
                          fn, p->dilation_h, p->dilation_w);
    if (op == RILL_POOL_MAX && (p->divisor != 0 || (p->flags & RILL_POOL_EXCLUDE_PAD) != 0))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: divisor and RILL_POOL_EXCLUDE_PAD are for average pooling; pass 0 "
                          "and leave the flag out for RILL_POOL_MAX",
                          fn);
    if (p->divisor > RILL__OP_MAX_DIM)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: divisor %zu is larger than any window; pass a smaller one or 0", fn,
                          p->divisor);
    /* The dilated window's extent, at most RILL__OP_MAX_DIM each factor. */
    size_t r_span = (p->r - 1) * p->dilation_h + 1, s_span = (p->sz - 1) * p->dilation_w + 1;
    if (p->pad_h > r_span / 2 || p->pad_w > s_span / 2)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the padding (%zu, %zu) is more than half the window (%zu, %zu); "
                          "pass padding of at most half the window",
                          fn, p->pad_h, p->pad_w, r_span, s_span);
    if (r_span > h + 2 * p->pad_h || s_span > w + 2 * p->pad_w)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the window (%zu, %zu) is larger than the padded input (%zu, %zu); "
                          "pass a window that fits",
                          fn, r_span, s_span, h + 2 * p->pad_h, w + 2 * p->pad_w);
    bool ceil_mode = (p->flags & RILL_POOL_CEIL_MODE) != 0;
    *oh = pool_outputs(h, r_span, p->stride_h, p->pad_h, ceil_mode);
    *ow = pool_outputs(w, s_span, p->stride_w, p->pad_w, ceil_mode);
    return RILL_OK;
}

/* *in_bytes and *out_bytes: the bytes of planes images [h, w] and [oh,
 * ow] of floats. */
static rill_status check_planes(const char *fn, size_t planes, size_t h, size_t w, size_t oh,
                                size_t ow, size_t *in_bytes, size_t *out_bytes) {
    rill_status st = rill__op_check_dim(fn, planes, "planes", "the number of images (n*c)");
    if (st != RILL_OK)
        return st;
    if (!rill__op_elem_bytes(in_bytes, sizeof(float), planes, h, w, 1) ||
        !rill__op_elem_bytes(out_bytes, sizeof(float), planes, oh, ow, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: planes %zu of [%zu, %zu] and [%zu, %zu] give more elements than "
                          "fit in memory; pass smaller sizes",
                          fn, planes, h, w, oh, ow);
    return RILL_OK;
}

rill_status rill_op_pool2d_ex_f32(rill_stream *s, rill_pool_op op, float *out, int64_t *indices,
                                  const float *in, size_t planes, size_t h, size_t w,
                                  const rill_pool2d_params *params) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_pool2d_ex_f32";
    if (op != RILL_POOL_MAX && op != RILL_POOL_AVG)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_pool_op; pass RILL_POOL_MAX or RILL_POOL_AVG",
                          fn, (int)op);
    if (op == RILL_POOL_AVG && indices != NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: indices is for RILL_POOL_MAX; pass NULL for RILL_POOL_AVG", fn);
    size_t in_bytes = 0, out_bytes = 0, idx_bytes = 0, units = 0, oh = 0, ow = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for planes*oh*ow floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, in, "in", "device memory of planes*h*w floats")) !=
            RILL_OK ||
        (st = check_params(fn, op, h, w, params, &oh, &ow)) != RILL_OK ||
        (st = check_planes(fn, planes, h, w, oh, ow, &in_bytes, &out_bytes)) != RILL_OK)
        return st;
    if (indices != NULL && !rill__op_elem_bytes(&idx_bytes, sizeof(int64_t), planes, oh, ow, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: indices of planes*oh*ow int64s do not fit in memory; pass smaller "
                          "sizes",
                          fn);
    if ((st = rill__op_check_fits(fn, s, in, "in", "planes*h*w floats", in_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "planes*oh*ow floats", out_bytes)) !=
            RILL_OK ||
        (indices != NULL &&
         (st = rill__op_check_fits(fn, s, indices, "indices", "planes*oh*ow int64s", idx_bytes)) !=
             RILL_OK) ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK ||
        (indices != NULL && ((st = rill__op_check_disjoint(fn, indices, idx_bytes, "indices", in,
                                                           in_bytes, "in")) != RILL_OK ||
                             (st = rill__op_check_disjoint(fn, indices, idx_bytes, "indices", out,
                                                           out_bytes, "out")) != RILL_OK)) ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_pool2d_ex_args args = {
        .out = out,
        .indices = indices,
        .in = in,
        .planes = planes,
        .h = h,
        .w = w,
        .oh = oh,
        .ow = ow,
        .r = params->r,
        .s = params->sz,
        .stride_h = params->stride_h,
        .stride_w = params->stride_w,
        .pad_h = params->pad_h,
        .pad_w = params->pad_w,
        .dil_h = params->dilation_h,
        .dil_w = params->dilation_w,
        .divisor = params->divisor,
        .op = (uint32_t)op,
        .exclude_pad = (params->flags & RILL_POOL_EXCLUDE_PAD) != 0,
    };
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, in, in_bytes, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    if (indices != NULL)
        rill__op_access_add(&acc, indices, idx_bytes, RILL_WRITE);
    size_t rows = planes * oh;
    size_t blocks = rill__op_grid(stream, planes * oh * ow * params->r * params->sz,
                                  ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_POOL2D_EX_F32, blocks < rows ? blocks : rows, &args,
                           sizeof args, &acc);
}

rill_status rill_op_avg_pool2d_backward_ex_f32(rill_stream *s, float *grad_in,
                                               const float *grad_out, size_t planes, size_t h,
                                               size_t w, const rill_pool2d_params *params) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_avg_pool2d_backward_ex_f32";
    size_t in_bytes = 0, out_bytes = 0, units = 0, oh = 0, ow = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, grad_in, "grad_in",
                                     "device memory for planes*h*w floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, grad_out, "grad_out",
                                     "device memory of planes*oh*ow floats")) != RILL_OK ||
        (st = check_params(fn, RILL_POOL_AVG, h, w, params, &oh, &ow)) != RILL_OK ||
        (st = check_planes(fn, planes, h, w, oh, ow, &in_bytes, &out_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, grad_in, "grad_in", "planes*h*w floats", in_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, grad_out, "grad_out", "planes*oh*ow floats", out_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_disjoint(fn, grad_in, in_bytes, "grad_in", grad_out, out_bytes,
                                      "grad_out")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_avg_pool2d_backward_ex_args args = {
        .grad_in = grad_in,
        .grad_out = grad_out,
        .planes = planes,
        .h = h,
        .w = w,
        .oh = oh,
        .ow = ow,
        .r = params->r,
        .s = params->sz,
        .stride_h = params->stride_h,
        .stride_w = params->stride_w,
        .pad_h = params->pad_h,
        .pad_w = params->pad_w,
        .divisor = params->divisor,
        .exclude_pad = (params->flags & RILL_POOL_EXCLUDE_PAD) != 0,
    };
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, grad_out, out_bytes, RILL_READ);
    rill__op_access_add(&acc, grad_in, in_bytes, RILL_WRITE);
    size_t rows = planes * h;
    size_t blocks = rill__op_grid(stream, planes * h * w * params->r * params->sz,
                                  ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_AVG_POOL2D_BACKWARD_EX_F32,
                           blocks < rows ? blocks : rows, &args, sizeof args, &acc);
}
