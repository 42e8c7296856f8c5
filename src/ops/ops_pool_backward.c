/* SPDX-License-Identifier: MIT */
/* The built-in backward of 2-D pooling for the input: the checks of the
 * sizes and the buffers, and the launches, on what ops.c provides
 * (ops_internal.h). The max pooling's indices are device memory that may
 * not be written yet: their range is checked by the kernels, which fail
 * their launch on an index out of range. Both write the whole of grad_in,
 * each element a sum in one order, so no two blocks touch one element. */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* A size of at least 1, named in the sentence. */
static rill_status check_size(const char *fn, size_t value, const char *name, const char *what) {
    if (value == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is 0; pass %s (at least 1)", fn,
                          name, what);
    return RILL_OK;
}

/* *in_bytes and *out_bytes: the bytes of planes images [h, w] and [oh,
 * ow] of floats. */
static rill_status check_planes(const char *fn, size_t planes, size_t h, size_t w, size_t oh,
                                size_t ow, size_t *in_bytes, size_t *out_bytes) {
    if (!rill__op_elem_bytes(in_bytes, sizeof(float), planes, h, w, 1) ||
        !rill__op_elem_bytes(out_bytes, sizeof(float), planes, oh, ow, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: planes %zu of [%zu, %zu] and [%zu, %zu] give more elements than "
                          "fit in memory; pass smaller sizes",
                          fn, planes, h, w, oh, ow);
    return RILL_OK;
}

rill_status rill_op_max_pool2d_backward_f32(rill_stream *s, float *grad_in, const float *grad_out,
                                            const int64_t *indices, size_t planes, size_t h,
                                            size_t w, size_t oh, size_t ow) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_max_pool2d_backward_f32";
    size_t in_bytes = 0, out_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, grad_in, "grad_in",
                                     "device memory for planes*h*w floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, grad_out, "grad_out",
                                     "device memory of planes*oh*ow floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, indices, "indices",
                                     "device memory of planes*oh*ow int64s, as "
                                     "rill_op_max_pool2d_f32 gives them")) != RILL_OK ||
        (st = check_size(fn, planes, "planes", "the number of images (n*c)")) != RILL_OK ||
        (st = check_size(fn, h, "h", "the input height")) != RILL_OK ||
        (st = check_size(fn, w, "w", "the input width")) != RILL_OK ||
        (st = check_size(fn, oh, "oh", "the output height")) != RILL_OK ||
        (st = check_size(fn, ow, "ow", "the output width")) != RILL_OK ||
        (st = check_planes(fn, planes, h, w, oh, ow, &in_bytes, &out_bytes)) != RILL_OK)
        return st;
    /* int64s and floats: the indices take twice grad_out's bytes. */
    size_t idx_bytes = out_bytes / sizeof(float) * sizeof(int64_t);
    if (idx_bytes / sizeof(int64_t) != out_bytes / sizeof(float))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: planes*oh*ow int64s are more than fit in memory; pass smaller "
                          "sizes",
                          fn);
    if ((st = rill__op_check_fits(fn, s, grad_in, "grad_in", "planes*h*w floats", in_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, grad_out, "grad_out", "planes*oh*ow floats", out_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, indices, "indices", "planes*oh*ow int64s", idx_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_disjoint(fn, grad_in, in_bytes, "grad_in", grad_out, out_bytes,
                                      "grad_out")) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, grad_in, in_bytes, "grad_in", indices, idx_bytes,
                                      "indices")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_max_pool2d_backward_args args = {grad_in, grad_out, indices, planes, h, w, oh, ow};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, grad_out, out_bytes, RILL_READ);
    rill__op_access_add(&acc, indices, idx_bytes, RILL_READ);
    rill__op_access_add(&acc, grad_in, in_bytes, RILL_WRITE);
    size_t work = planes * (h * w > oh * ow ? h * w : oh * ow);
    size_t blocks = rill__op_grid(stream, work, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_MAX_POOL2D_BACKWARD_F32,
                           blocks < planes ? blocks : planes, &args, sizeof args, &acc);
}

rill_status rill_op_avg_pool2d_backward_f32(rill_stream *s, float *grad_in, const float *grad_out,
                                            size_t planes, size_t h, size_t w, size_t r, size_t sz,
                                            size_t stride_h, size_t stride_w, size_t pad_h,
                                            size_t pad_w) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_avg_pool2d_backward_f32";
    size_t in_bytes = 0, out_bytes = 0, units = 0, oh = 0, ow = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, grad_in, "grad_in",
                                     "device memory for planes*h*w floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, grad_out, "grad_out",
                                     "device memory of planes*oh*ow floats")) != RILL_OK ||
        (st = check_size(fn, planes, "planes", "the number of images (n*c)")) != RILL_OK ||
        (st = rill__op_check_pool_window(fn, h, w, r, sz, stride_h, stride_w, pad_h, pad_w, &oh,
                                         &ow)) != RILL_OK ||
        (st = check_planes(fn, planes, h, w, oh, ow, &in_bytes, &out_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, grad_in, "grad_in", "planes*h*w floats", in_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, grad_out, "grad_out", "planes*oh*ow floats", out_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_disjoint(fn, grad_in, in_bytes, "grad_in", grad_out, out_bytes,
                                      "grad_out")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_avg_pool2d_backward_args args = {grad_in, grad_out, planes,   h,     w,    oh, ow, r,
                                              sz,      stride_h, stride_w, pad_h, pad_w};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, grad_out, out_bytes, RILL_READ);
    rill__op_access_add(&acc, grad_in, in_bytes, RILL_WRITE);
    /* Each element of grad_in reads at most r*sz gradients: the work the
     * grid is sized by, in slices of whole rows. */
    size_t rows = planes * h;
    size_t blocks = rill__op_grid(stream, planes * h * w * r * sz, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_AVG_POOL2D_BACKWARD_F32, blocks < rows ? blocks : rows,
                           &args, sizeof args, &acc);
}
