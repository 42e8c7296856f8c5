/* SPDX-License-Identifier: MIT */
/* CPU bodies of the backward of 2-D pooling, and of the pooling with
 * dilation, ceil mode and the divisor rules of average pooling (forward
 * and backward). Layer: CPU backend. Each
 * block writes only its own slice of grad_in (whole planes for max
 * pooling, rows of planes for average pooling), and every element of
 * grad_in is a sum in one fixed order, the order of the outputs, so the
 * results are the same for every grid and on every run. */
#include "backend/cpu/pool_kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/op_math.h"

/* [*begin, *end): block ctx's share of count items, in equal runs. */
static void slice_of(const rill_block_ctx *ctx, size_t count, size_t *begin, size_t *end) {
    size_t blocks = ctx->grid_dim.x;
    size_t per = (count + blocks - 1) / blocks;
    size_t b = ctx->block_idx.x;
    *begin = b * per < count ? b * per : count;
    *end = count - *begin > per ? *begin + per : count;
}

void rill__cpu_op_max_pool2d_backward_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_max_pool2d_backward_args *p = args;
    size_t begin, end, image = p->h * p->w, outputs = p->oh * p->ow;
    slice_of(ctx, p->planes, &begin, &end);
    if (begin == end)
        return;
    memset(p->grad_in + begin * image, 0, (end - begin) * image * sizeof(float));
    for (size_t plane = begin; plane < end; plane++) {
        float *gi = p->grad_in + plane * image;
        const float *go = p->grad_out + plane * outputs;
        const int64_t *idx = p->indices + plane * outputs;
        for (size_t i = 0; i < outputs; i++) {
            if (idx[i] < 0 || (uint64_t)idx[i] >= image) {
                char msg[200];
                snprintf(msg, sizeof msg,
                         "index %" PRId64 " at position %zu of plane %zu is out of range for an "
                         "image of %zu elements (h*w); pass the indices that "
                         "rill_op_max_pool2d_f32 gave",
                         idx[i], i, plane, image);
                rill__kernel_fail(ctx, msg);
                return;
            }
            gi[idx[i]] += go[i];
        }
    }
}

void rill__cpu_op_avg_pool2d_backward_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_avg_pool2d_backward_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->planes * p->h, &begin, &end);
    float divisor = (float)(p->r * p->s);
    for (size_t row = begin; row < end; row++) {
        size_t plane = row / p->h, yy = row % p->h;
        const float *go = p->grad_out + plane * p->oh * p->ow;
        float *gi = p->grad_in + row * p->w;
        size_t y0, y1;
        rill__op_pool_outputs_of(yy, p->r, p->stride_h, p->pad_h, p->oh, &y0, &y1);
        for (size_t xx = 0; xx < p->w; xx++) {
            size_t x0, x1;
            rill__op_pool_outputs_of(xx, p->s, p->stride_w, p->pad_w, p->ow, &x0, &x1);
            float total = 0.0f;
            for (size_t y = y0; y < y1; y++)
                for (size_t x = x0; x < x1; x++)
                    total += go[y * p->ow + x] / divisor;
            gi[xx] = total;
        }
    }
}

/* The taps [*lo, *hi) of n, dil apart from `start` (in padded
 * coordinates), that fall inside the image's [pad, pad + len). */
static void taps_inside(size_t start, size_t dil, size_t n, size_t pad, size_t len, size_t *lo,
                        size_t *hi) {
    size_t end = pad + len, a = 0, b = 0;
    if (dil == 1) {
        a = start < pad ? pad - start : 0;
        b = start < end ? end - start : 0;
    } else {
        a = start < pad ? (pad - start + dil - 1) / dil : 0;
        b = start < end ? (end - start + dil - 1) / dil : 0;
    }
    *lo = a < n ? a : n;
    *hi = b < n ? (b > *lo ? b : *lo) : n;
}

/* The max of output (y, x) over its dilated window's taps inside the
 * image, rows [i0, i1), and where it came from: the first largest, the
 * last NaN (PyTorch's choice); -inf at 0 when no tap is inside. */
static float max_of(const rill__op_pool2d_ex_args *p, const float *img, size_t y, size_t i0,
                    size_t i1, size_t x, size_t *at) {
    size_t j0, j1;
    taps_inside(x * p->stride_w, p->dil_w, p->s, p->pad_w, p->w, &j0, &j1);
    if (i0 == i1 || j0 == j1) {
        *at = 0;
        return -INFINITY;
    }
    size_t row0 = y * p->stride_h - p->pad_h, col0 = x * p->stride_w - p->pad_w;
    size_t best_at = (row0 + i0 * p->dil_h) * p->w + col0 + j0 * p->dil_w;
    float best = img[best_at];
    for (size_t i = i0; i < i1; i++) {
        size_t line = (row0 + i * p->dil_h) * p->w + col0; /* unsigned wrap cancels */
        for (size_t j = j0; j < j1; j++) {
            size_t pos = line + j * p->dil_w;
            float v = img[pos];
            if (v > best || v != v) {
                best = v;
                best_at = pos;
            }
        }
    }
    *at = best_at;
    return best;
}

void rill__cpu_op_pool2d_ex_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_pool2d_ex_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->planes * p->oh, &begin, &end);
    for (size_t row = begin; row < end; row++) {
        size_t plane = row / p->oh, y = row % p->oh;
        const float *img = p->in + plane * p->h * p->w;
        float *out = p->out + row * p->ow;
        size_t i0, i1;
        taps_inside(y * p->stride_h, p->dil_h, p->r, p->pad_h, p->h, &i0, &i1);
        for (size_t x = 0; x < p->ow; x++) {
            if (p->op == RILL_POOL_MAX) {
                size_t at = 0;
                out[x] = max_of(p, img, y, i0, i1, x, &at);
                if (p->indices != NULL)
                    p->indices[row * p->ow + x] = (int64_t)at;
                continue;
            }
            size_t y0, y1, x0, x1;
            size_t divisor = rill__op_avg_pool_window(y, x, p->h, p->w, p->r, p->s, p->stride_h,
                                                      p->stride_w, p->pad_h, p->pad_w, p->divisor,
                                                      p->exclude_pad, &y0, &y1, &x0, &x1);
            float total = 0.0f;
            for (size_t yy = y0; yy < y1; yy++)
                for (size_t xx = x0; xx < x1; xx++)
                    total += img[yy * p->w + xx];
            out[x] = divisor == 0 ? 0.0f : total / (float)divisor;
        }
    }
}

void rill__cpu_op_avg_pool2d_backward_ex_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_avg_pool2d_backward_ex_args *p = args;
    size_t begin, end;
    slice_of(ctx, p->planes * p->h, &begin, &end);
    for (size_t row = begin; row < end; row++) {
        size_t plane = row / p->h, yy = row % p->h;
        const float *go = p->grad_out + plane * p->oh * p->ow;
        float *gi = p->grad_in + row * p->w;
        size_t y0, y1;
        rill__op_pool_outputs_of(yy, p->r, p->stride_h, p->pad_h, p->oh, &y0, &y1);
        for (size_t xx = 0; xx < p->w; xx++) {
            size_t x0, x1;
            rill__op_pool_outputs_of(xx, p->s, p->stride_w, p->pad_w, p->ow, &x0, &x1);
            float total = 0.0f;
            for (size_t y = y0; y < y1; y++)
                for (size_t x = x0; x < x1; x++) {
                    size_t a, b, c, d;
                    size_t divisor = rill__op_avg_pool_window(
                        y, x, p->h, p->w, p->r, p->s, p->stride_h, p->stride_w, p->pad_h, p->pad_w,
                        p->divisor, p->exclude_pad, &a, &b, &c, &d);
                    total += go[y * p->ow + x] / (float)divisor; /* it holds (yy, xx): not 0 */
                }
            gi[xx] = total;
        }
    }
}
