/* SPDX-License-Identifier: MIT */
/* The backward of conv2d with strides, padding, dilation and groups
 * (rill_op_conv2d_backward_f32, rill_op_conv2d_backward_ex2_f32): its
 * checks, which are the forward's on the same shapes plus the gradients',
 * its plan (channel groups and bands of output rows, backend/op_args.h)
 * and its launches: the input gradient's and the weight gradient's, one
 * after the other on the caller's stream, sharing one stream-ordered
 * scratch buffer. Layer: the ops, on what ops.c and ops_nn.c provide
 * (ops_internal.h). */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "mem/memory.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

static size_t min_size(size_t a, size_t b) {
    return a < b ? a : b;
}

/* Output rows per band for groups of cpg channels: as many as keep a
 * slot within CONV_SLOT_BYTES_MAX, at least 1. */
static size_t band_rows_for(const rill__op_conv2d_backward_args *p, size_t cpg) {
    size_t row_bytes = cpg * p->r * p->s * p->ow * sizeof(float);
    size_t rows = CONV_SLOT_BYTES_MAX / row_bytes;
    return rows < 1 ? 1 : min_size(rows, p->oh);
}

/* Images per product for n images, at most limit (rill__op_conv_images):
 * 1 when an image is more than one band. */
static size_t images_per_product(const rill__op_conv2d_backward_args *p, size_t n, size_t limit) {
    if (p->band_rows < p->oh)
        return 1;
    size_t rows = rill__op_conv2d_backward_group_channels(p) * p->r * p->s + p->k / p->conv_groups;
    return rill__op_conv_images(n, limit, p->oh * p->ow, rows);
}

/* The channel groups of a plan that wants about want of them: at most c,
 * and with conv_groups > 1 a multiple conv_groups * m of them with m
 * dividing c / conv_groups, so each lies in one convolution group. */
static size_t channel_groups(size_t c, size_t conv_groups, size_t want) {
    if (conv_groups == 1)
        return min_size(c, want);
    size_t cg = c / conv_groups, best = 1;
    for (size_t m = 2; m <= cg && conv_groups * m <= want; m++)
        if (cg % m == 0)
            best = m;
    return conv_groups * best;
}

/* A gradient must overlap none of the other buffers (those not NULL). */
static rill_status check_apart(const char *fn, const void *grad, size_t grad_bytes,
                               const char *grad_name, const void *const *others,
                               const size_t *other_bytes, const char *const *other_names,
                               size_t count) {
    rill_status st = RILL_OK;
    for (size_t i = 0; i < count && st == RILL_OK; i++)
        if (others[i] != NULL)
            st = rill__op_check_disjoint(fn, grad, grad_bytes, grad_name, others[i], other_bytes[i],
                                         other_names[i]);
    return st;
}

/* Launches op id over blocks blocks with the accesses grad_out and input
 * read, output written and the scratch read and written. */
static rill_status launch(rill__stream *stream, rill__op id, size_t blocks,
                          const rill__op_conv2d_backward_args *args, const float *input,
                          size_t input_bytes, float *output, size_t output_bytes,
                          size_t grad_out_bytes, size_t scratch_bytes) {
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, args->grad_out, grad_out_bytes, RILL_READ);
    rill__op_access_add(&acc, input, input_bytes, RILL_READ);
    rill__op_access_add(&acc, output, output_bytes, RILL_WRITE);
    rill__op_access_add(&acc, args->scratch, scratch_bytes, RILL_READ_WRITE);
    return rill__op_launch(stream, id, blocks, args, sizeof *args, &acc);
}

static rill_status conv2d_backward(const char *fn, rill_stream *s, float *grad_in,
                                   float *grad_weight, const float *grad_out, const float *in,
                                   const float *weight, size_t n, size_t c, size_t h, size_t w,
                                   size_t k, size_t r, size_t sz,
                                   const rill_conv2d_params *params) {
    size_t in_bytes = 0, w_bytes = 0, out_bytes = 0, units = 0, oh = 0, ow = 0;
    size_t r_span = 0, s_span = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if (grad_in == NULL && grad_weight == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: grad_in and grad_weight are both NULL; pass memory for the input "
                          "gradient, the weight gradient or both",
                          fn);
    if ((st = rill__op_check_pointer(fn, grad_out, "grad_out",
                                     "device memory of n*k*oh*ow floats")) != RILL_OK ||
        (grad_in != NULL &&
         (st = rill__op_check_pointer(fn, weight, "weight",
                                      "device memory of k*(c/groups)*r*sz floats (the input "
                                      "gradient needs it)")) != RILL_OK) ||
        (grad_weight != NULL &&
         (st = rill__op_check_pointer(fn, in, "in",
                                      "device memory of n*c*h*w floats (the weight gradient "
                                      "needs it)")) != RILL_OK) ||
        (st = rill__op_check_dim(fn, n, "n", "the number of images")) != RILL_OK ||
        (st = rill__op_check_dim(fn, c, "c", "the number of input channels")) != RILL_OK ||
        (st = rill__op_check_dim(fn, h, "h", "the input height")) != RILL_OK ||
        (st = rill__op_check_dim(fn, w, "w", "the input width")) != RILL_OK ||
        (st = rill__op_check_dim(fn, k, "k", "the number of filters (output channels)")) !=
            RILL_OK ||
        (st = rill__op_check_dim(fn, r, "r", "the filter height")) != RILL_OK ||
        (st = rill__op_check_dim(fn, sz, "sz", "the filter width")) != RILL_OK ||
        (st = rill__op_check_conv_params(fn, c, k, r, sz, params, &r_span, &s_span)) != RILL_OK ||
        (st = rill__op_check_window(fn, h, w, r_span, s_span, params->stride_h, params->stride_w,
                                    params->pad_h, params->pad_w, false, &oh, &ow)) != RILL_OK)
        return st;
    size_t cg = c / params->groups;
    if ((st = rill__op_check_size(fn, rill__op_elem_bytes(&in_bytes, sizeof(float), n, c, h, w),
                                  "in", "n*c*h*w floats")) != RILL_OK ||
        (st = rill__op_check_size(fn, rill__op_elem_bytes(&w_bytes, sizeof(float), k, cg, r, sz),
                                  "weight", "k*(c/groups)*r*sz floats")) != RILL_OK ||
        (st = rill__op_check_size(fn, rill__op_elem_bytes(&out_bytes, sizeof(float), n, k, oh, ow),
                                  "grad_out", "n*k*oh*ow floats")) != RILL_OK ||
        /* The products' dimensions and leading dimensions (c*r*sz, oh*ow)
         * must fit sgemm's and cuDNN's integers. */
        (st = rill__op_check_dim(fn, c * r * sz, "c*r*sz", "")) != RILL_OK ||
        (st = rill__op_check_dim(fn, oh * ow, "oh*ow", "")) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, grad_out, "grad_out", "n*k*oh*ow floats", out_bytes)) !=
            RILL_OK ||
        (grad_in != NULL &&
         ((st = rill__op_check_fits(fn, s, grad_in, "grad_in", "n*c*h*w floats", in_bytes)) !=
              RILL_OK ||
          (st = rill__op_check_fits(fn, s, weight, "weight", "k*(c/groups)*r*sz floats",
                                    w_bytes)) != RILL_OK)) ||
        (grad_weight != NULL &&
         ((st = rill__op_check_fits(fn, s, grad_weight, "grad_weight", "k*(c/groups)*r*sz floats",
                                    w_bytes)) != RILL_OK ||
          (st = rill__op_check_fits(fn, s, in, "in", "n*c*h*w floats", in_bytes)) != RILL_OK)))
        return st;
    const void *bufs[] = {grad_out, in, weight, grad_in, grad_weight};
    const size_t bytes[] = {out_bytes, in_bytes, w_bytes, in_bytes, w_bytes};
    const char *const names[] = {"grad_out", "in", "weight", "grad_in", "grad_weight"};
    if ((grad_in != NULL &&
         (st = check_apart(fn, grad_in, in_bytes, "grad_in", bufs, bytes, names, 3)) != RILL_OK) ||
        (grad_weight != NULL && (st = check_apart(fn, grad_weight, w_bytes, "grad_weight", bufs,
                                                  bytes, names, 4)) != RILL_OK) ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;

    /* The plan: blocks for the multiply-adds of one gradient (k * c*r*sz *
     * oh*ow per image); the input gradient's items are (image, channel
     * group), so it needs only as many groups as make up the blocks; the
     * weight gradient's are channel groups. */
    size_t macs = n * k;
    size_t factors[3] = {cg * r * sz, oh, ow};
    for (int i = 0; i < 3; i++)
        macs = macs > SIZE_MAX / factors[i] ? SIZE_MAX : macs * factors[i];
    size_t blocks = rill__op_blocks_for(macs, MACS_PER_BLOCK_MIN, units);
    rill__op_conv2d_backward_args data = {.grad_in = grad_in,
                                          .grad_out = grad_out,
                                          .in = in,
                                          .weight = weight,
                                          .n = n,
                                          .c = c,
                                          .h = h,
                                          .w = w,
                                          .k = k,
                                          .r = r,
                                          .s = sz,
                                          .stride_h = params->stride_h,
                                          .stride_w = params->stride_w,
                                          .pad_h = params->pad_h,
                                          .pad_w = params->pad_w,
                                          .oh = oh,
                                          .ow = ow,
                                          .dil_h = params->dilation_h,
                                          .dil_w = params->dilation_w,
                                          .conv_groups = params->groups};
    rill__op_conv2d_backward_args filter = data;
    data.grad_weight = NULL;
    filter.grad_in = NULL;
    filter.grad_weight = grad_weight;
    data.groups = channel_groups(c, params->groups, (blocks + n - 1) / n);
    data.band_rows = band_rows_for(&data, rill__op_conv2d_backward_group_channels(&data));
    /* as many (images, channel group) items as blocks, if there are */
    data.images = images_per_product(&data, n, n * data.groups / blocks);
    size_t data_blocks = min_size(blocks, (n + data.images - 1) / data.images * data.groups);
    filter.groups = channel_groups(c, params->groups, blocks);
    filter.band_rows = band_rows_for(&filter, rill__op_conv2d_backward_group_channels(&filter));
    filter.images = images_per_product(&filter, n, n);
    size_t filter_blocks = min_size(blocks, filter.groups);
    size_t floats = 0;
    if (grad_in != NULL)
        floats = data_blocks * rill__op_conv2d_backward_slot_floats(&data);
    if (grad_weight != NULL)
        floats = floats > filter_blocks * rill__op_conv2d_backward_slot_floats(&filter)
                     ? floats
                     : filter_blocks * rill__op_conv2d_backward_slot_floats(&filter);
    size_t scratch_bytes = floats * sizeof(float);
    data.scratch_floats = floats;
    filter.scratch_floats = floats;

    /* The kernels before the scratch memory, so a failure to create one
     * leaves nothing allocated. */
    rill_kernel *kernel;
    float *scratch;
    if ((grad_in != NULL &&
         (st = rill__op_kernel(RILL__OP_CONV2D_BACKWARD_DATA_F32, &kernel)) != RILL_OK) ||
        (grad_weight != NULL &&
         (st = rill__op_kernel(RILL__OP_CONV2D_BACKWARD_FILTER_F32, &kernel)) != RILL_OK) ||
        (st = rill__mem_alloc_async(stream, scratch_bytes, (void **)&scratch)) != RILL_OK)
        return st;
    data.scratch = scratch;
    filter.scratch = scratch;
    if (grad_in != NULL)
        st = launch(stream, RILL__OP_CONV2D_BACKWARD_DATA_F32, data_blocks, &data, weight, w_bytes,
                    grad_in, in_bytes, out_bytes, scratch_bytes);
    if (st == RILL_OK && grad_weight != NULL)
        st = launch(stream, RILL__OP_CONV2D_BACKWARD_FILTER_F32, filter_blocks, &filter, in,
                    in_bytes, grad_weight, w_bytes, out_bytes, scratch_bytes);
    rill_status free_st = rill__mem_free_async(scratch, stream);
    return st != RILL_OK ? st : free_st;
}

rill_status rill_op_conv2d_backward_f32(rill_stream *s, float *grad_in, float *grad_weight,
                                        const float *grad_out, const float *in, const float *weight,
                                        size_t n, size_t c, size_t h, size_t w, size_t k, size_t r,
                                        size_t sz, size_t stride_h, size_t stride_w, size_t pad_h,
                                        size_t pad_w) {
    RILL_CALL_SCOPE();
    rill_conv2d_params params = {stride_h, stride_w, pad_h, pad_w, 1, 1, 1};
    return conv2d_backward("rill_op_conv2d_backward_f32", s, grad_in, grad_weight, grad_out, in,
                           weight, n, c, h, w, k, r, sz, &params);
}

rill_status rill_op_conv2d_backward_ex2_f32(rill_stream *s, float *grad_in, float *grad_weight,
                                            const float *grad_out, const float *in,
                                            const float *weight, size_t n, size_t c, size_t h,
                                            size_t w, size_t k, size_t r, size_t sz,
                                            const rill_conv2d_params *params) {
    RILL_CALL_SCOPE();
    return conv2d_backward("rill_op_conv2d_backward_ex2_f32", s, grad_in, grad_weight, grad_out, in,
                           weight, n, c, h, w, k, r, sz, params);
}
