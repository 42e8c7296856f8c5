/* SPDX-License-Identifier: MIT */
/* CPU bodies of conv2d's backward (with dilation and groups, each channel
 * group inside one convolution group): the input gradient as a product of the
 * transposed weight and grad_out followed by col2im, the weight gradient
 * as grad_out times the transposed im2col matrix of the input, both on
 * BLIS's sgemm (sgemm.c) with strides that transpose without copying;
 * and the strided im2col they share with the forward (op_kernels.c).
 * Where oneDNN takes the launch (conv_onednn.h), each body hands its block
 * to it instead. Layer: CPU backend; the launches are built in src/ops/ops_conv_backward.c.
 * Invariants: a block writes only the planes of grad_in (or the columns of
 * grad_weight) of its own channel groups, so blocks never race, and each
 * element's sum is taken in one order, so a launch with the same grid
 * gives the same bits. */
#include "backend/cpu/conv_backward_kernels.h"

#include <string.h>

#include "backend/cpu/conv_onednn.h"
#include "backend/cpu/sgemm.h"

/* The im2col matrix of output rows [oy0, oy0 + rows) of one image with
 * strides, zero padding and dilation, rows ld floats apart: row (ci*r +
 * ri)*s + si, column y*ow + x holds in[ci, (oy0+y)*stride_h + ri*dil_h -
 * pad_h, x*stride_w + si*dil_w - pad_w], or 0 outside the image. Along a
 * row, the columns that read the image are one run [x0, x1): zeros either
 * side, a copy between (a memcpy at stride 1). */
void rill__cpu_im2col_ex(const rill__op_conv2d_ex_args *p, const float *img, size_t oy0,
                         size_t rows, float *col, size_t ld) {
    size_t ow = p->ow, sw = p->stride_w;
    for (size_t ci = 0; ci < p->c; ci++) {
        const float *plane = img + ci * p->h * p->w;
        for (size_t ri = 0; ri < p->r; ri++) {
            for (size_t si = 0; si < p->s; si++) {
                /* Column x reads ix = x*sw + sd - pad_w: inside the image for
                 * x in [x0, x1). */
                size_t sd = si * p->dil_w;
                size_t x0 = sd >= p->pad_w ? 0 : (p->pad_w - sd + sw - 1) / sw;
                size_t x1 = p->w + p->pad_w > sd ? (p->w + p->pad_w - sd + sw - 1) / sw : 0;
                if (x1 > ow)
                    x1 = ow;
                if (x0 > x1)
                    x0 = x1;
                float *dst = col + ((ci * p->r + ri) * p->s + si) * ld;
                for (size_t y = 0; y < rows; y++, dst += ow) {
                    size_t iy = (oy0 + y) * p->stride_h + ri * p->dil_h; /* + pad_h: unsigned */
                    if (iy < p->pad_h || iy - p->pad_h >= p->h || x0 == x1) {
                        memset(dst, 0, ow * sizeof *dst);
                        continue;
                    }
                    /* src[x*sw] is in[ci, iy - pad_h, x*sw + sd - pad_w], for x >= x0. */
                    const float *src = plane + (iy - p->pad_h) * p->w + x0 * sw + sd - p->pad_w;
                    memset(dst, 0, x0 * sizeof *dst);
                    if (sw == 1) {
                        memcpy(dst + x0, src, (x1 - x0) * sizeof *dst);
                    } else {
                        for (size_t x = x0; x < x1; x++)
                            dst[x] = src[(x - x0) * sw];
                    }
                    memset(dst + x1, 0, (ow - x1) * sizeof *dst);
                }
            }
        }
    }
}

/* [*begin, *end): block ctx's share of count items, in equal runs (the
 * last may be shorter or empty). */
static void item_range(const rill_block_ctx *ctx, size_t count, size_t *begin, size_t *end) {
    size_t blocks = ctx->grid_dim.x;
    size_t per = (count + blocks - 1) / blocks;
    size_t b = ctx->block_idx.x;
    *begin = b * per < count ? b * per : count;
    *end = count - *begin > per ? *begin + per : count;
}

/* Adds the column matrix col of output rows [oy0, oy0 + rows), its rows ld
 * floats apart, back into the cn planes at img, the inverse walk of
 * rill__cpu_im2col_ex: row (ci*r + ri)*s + si, column y*ow + x goes to
 * img[ci, (oy0+y)*stride_h + ri*dil_h - pad_h, x*stride_w + si*dil_w -
 * pad_w] when that is inside the image. Along a row the columns that land
 * in the image are one run [x0, x1). */
static void col2im_add(const rill__op_conv2d_backward_args *p, float *img, size_t cn, size_t oy0,
                       size_t rows, const float *col, size_t ld) {
    size_t ow = p->ow, sw = p->stride_w;
    for (size_t ci = 0; ci < cn; ci++) {
        float *plane = img + ci * p->h * p->w;
        for (size_t ri = 0; ri < p->r; ri++) {
            for (size_t si = 0; si < p->s; si++) {
                size_t sd = si * p->dil_w;
                size_t x0 = sd >= p->pad_w ? 0 : (p->pad_w - sd + sw - 1) / sw;
                size_t x1 = p->w + p->pad_w > sd ? (p->w + p->pad_w - sd + sw - 1) / sw : 0;
                if (x1 > ow)
                    x1 = ow;
                if (x0 >= x1)
                    continue;
                const float *src = col + ((ci * p->r + ri) * p->s + si) * ld;
                for (size_t y = 0; y < rows; y++, src += ow) {
                    size_t iy = (oy0 + y) * p->stride_h + ri * p->dil_h; /* + pad_h: unsigned */
                    if (iy < p->pad_h || iy - p->pad_h >= p->h)
                        continue;
                    /* dst[(x - x0)*sw] is img[ci, iy - pad_h, x*sw + sd - pad_w]. */
                    float *dst = plane + (iy - p->pad_h) * p->w + x0 * sw + sd - p->pad_w;
                    if (sw == 1) {
                        for (size_t x = x0; x < x1; x++)
                            dst[x - x0] += src[x];
                    } else {
                        for (size_t x = x0; x < x1; x++)
                            dst[(x - x0) * sw] += src[x];
                    }
                }
            }
        }
    }
}

/* Where channel group item's channels [c0, c0 + cn) meet the
 * convolution's groups: the group's first filter kf and its kg filters,
 * the offset cl of c0 within the group's cg channels. */
typedef struct group_place {
    size_t kf, kg, cl, cg;
} group_place;

static group_place place_of(const rill__op_conv2d_backward_args *p, size_t c0) {
    size_t cg = p->c / p->conv_groups, kg = p->k / p->conv_groups, g = c0 / cg;
    return (group_place){g * kg, kg, c0 - g * cg, cg};
}

/* The planes of grad_out of filters [kf, kf + kg) of images [img0, img0 +
 * count) side by side: row kk of dst (rows ld floats apart) holds image
 * img0 + i's plane kf + kk at columns [i*oh*ow, (i+1)*oh*ow). */
static void gather_grad_out(const rill__op_conv2d_backward_args *p, size_t img0, size_t count,
                            const group_place *g, float *dst, size_t ld) {
    size_t ohw = p->oh * p->ow;
    for (size_t i = 0; i < count; i++) {
        const float *src = p->grad_out + ((img0 + i) * p->k + g->kf) * ohw;
        for (size_t kk = 0; kk < g->kg; kk++)
            memcpy(dst + kk * ld + i * ohw, src + kk * ohw, ohw * sizeof *dst);
    }
}

/* The data op's item for images [img0, img0 + p->images) (fewer at the
 * end) and channels [c0, c0 + cn) in one product: col (cn*rs x
 * images*oh*ow) = the group's weight^T times the images' planes of grad_out
 * side by side (gathered into the slot after col), then each image's
 * columns added back into its zeroed planes of grad_in. */
static void data_images(const rill__op_conv2d_backward_args *p, const group_place *g, size_t img0,
                        size_t c0, size_t cn, float *col) {
    size_t rs = p->r * p->s, plane = p->h * p->w, ohw = p->oh * p->ow;
    size_t crs = g->cg * rs, ld = p->images * ohw;
    size_t count = p->n - img0 < p->images ? p->n - img0 : p->images;
    float *gout = col + rill__op_conv2d_backward_group_channels(p) * rs * ld;
    gather_grad_out(p, img0, count, g, gout, ld);
    rill__cpu_sgemm_strided(cn * rs, count * ohw, g->kg, p->weight + g->kf * crs + g->cl * rs, 1,
                            crs, gout, ld, 1, 0.0f, col, ld);
    for (size_t i = 0; i < count; i++) {
        float *gin = p->grad_in + ((img0 + i) * p->c + c0) * plane;
        memset(gin, 0, cn * plane * sizeof *gin);
        col2im_add(p, gin, cn, 0, p->oh, col + i * ohw, ld);
    }
}

void rill__cpu_op_conv2d_backward_data_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_conv2d_backward_args *p = args;
    if (rill__cpu_onednn_conv2d_backward_data(ctx, p))
        return;
    size_t cpg = rill__op_conv2d_backward_group_channels(p);
    size_t rs = p->r * p->s, plane = p->h * p->w, ohw = p->oh * p->ow;
    size_t begin, end;
    item_range(ctx, (p->n + p->images - 1) / p->images * p->groups, &begin, &end);
    float *col = p->scratch + (size_t)ctx->block_idx.x * rill__op_conv2d_backward_slot_floats(p);
    for (size_t item = begin; item < end; item++) {
        size_t img = item / p->groups * p->images, c0 = (item % p->groups) * cpg;
        if (c0 >= p->c)
            continue;
        size_t cn = p->c - c0 < cpg ? p->c - c0 : cpg;
        group_place g = place_of(p, c0);
        if (p->images > 1) {
            data_images(p, &g, img, c0, cn, col);
            continue;
        }
        size_t crs = g.cg * rs; /* weight's row: [k, cg*r*s] */
        float *gin = p->grad_in + (img * p->c + c0) * plane;
        memset(gin, 0, cn * plane * sizeof *gin);
        const float *gout = p->grad_out + (img * p->k + g.kf) * ohw;
        for (size_t oy0 = 0; oy0 < p->oh; oy0 += p->band_rows) {
            size_t rows = p->oh - oy0 < p->band_rows ? p->oh - oy0 : p->band_rows;
            size_t cols = rows * p->ow;
            /* col[cn*rs, cols] = the group's weight[:, cl*rs..]^T (cn*rs x
             * kg) times the group's band of grad_out (kg x cols). */
            rill__cpu_sgemm_strided(cn * rs, cols, g.kg, p->weight + g.kf * crs + g.cl * rs, 1, crs,
                                    gout + oy0 * p->ow, ohw, 1, 0.0f, col, cols);
            col2im_add(p, gin, cn, oy0, rows, col, cols);
        }
    }
}

/* The filter op's item for channels [c0, c0 + ex->c) with p->images
 * whole images per product: gw (kg x cn*rs, row stride the group's crs) =
 * the sum over products of the images' planes of grad_out side by side (kg
 * x images*oh*ow, gathered into the slot after col) times their im2col
 * matrices side by side, transposed. */
static void filter_images(const rill__op_conv2d_backward_args *p, const rill__op_conv2d_ex_args *ex,
                          const group_place *g, size_t c0, float *col, float *gw) {
    size_t rs = p->r * p->s, plane = p->h * p->w, ohw = p->oh * p->ow;
    size_t crs = g->cg * rs, ld = p->images * ohw;
    float *gout = col + rill__op_conv2d_backward_group_channels(p) * rs * ld;
    float beta = 0.0f;
    for (size_t img0 = 0; img0 < p->n; img0 += p->images) {
        size_t count = p->n - img0 < p->images ? p->n - img0 : p->images;
        for (size_t i = 0; i < count; i++)
            rill__cpu_im2col_ex(ex, p->in + ((img0 + i) * p->c + c0) * plane, 0, p->oh,
                                col + i * ohw, ld);
        gather_grad_out(p, img0, count, g, gout, ld);
        rill__cpu_sgemm_strided(g->kg, ex->c * rs, count * ohw, gout, ld, 1, col, 1, ld, beta, gw,
                                crs);
        beta = 1.0f;
    }
}

void rill__cpu_op_conv2d_backward_filter_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_conv2d_backward_args *p = args;
    if (rill__cpu_onednn_conv2d_backward_filter(ctx, p))
        return;
    size_t cpg = rill__op_conv2d_backward_group_channels(p);
    size_t rs = p->r * p->s, plane = p->h * p->w, ohw = p->oh * p->ow;
    size_t begin, end;
    item_range(ctx, p->groups, &begin, &end);
    float *col = p->scratch + (size_t)ctx->block_idx.x * rill__op_conv2d_backward_slot_floats(p);
    rill__op_conv2d_ex_args ex = {.n = p->n,
                                  .c = p->c,
                                  .h = p->h,
                                  .w = p->w,
                                  .k = p->k,
                                  .r = p->r,
                                  .s = p->s,
                                  .stride_h = p->stride_h,
                                  .stride_w = p->stride_w,
                                  .pad_h = p->pad_h,
                                  .pad_w = p->pad_w,
                                  .oh = p->oh,
                                  .ow = p->ow,
                                  .band_rows = p->band_rows,
                                  .dil_h = p->dil_h,
                                  .dil_w = p->dil_w,
                                  .groups = 1,
                                  .images = 1};
    for (size_t item = begin; item < end; item++) {
        size_t c0 = item * cpg;
        if (c0 >= p->c)
            continue;
        ex.c = p->c - c0 < cpg ? p->c - c0 : cpg;
        group_place g = place_of(p, c0);
        size_t crs = g.cg * rs;
        /* columns [cl*rs, (cl+cn)*rs) of the group's rows [kf, kf+kg) of [k, crs] */
        float *gw = p->grad_weight + g.kf * crs + g.cl * rs;
        if (p->images > 1) {
            filter_images(p, &ex, &g, c0, col, gw);
            continue;
        }
        float beta = 0.0f; /* the first product overwrites */
        for (size_t img = 0; img < p->n; img++) {
            const float *in = p->in + (img * p->c + c0) * plane;
            const float *gout = p->grad_out + (img * p->k + g.kf) * ohw;
            for (size_t oy0 = 0; oy0 < p->oh; oy0 += p->band_rows) {
                size_t rows = p->oh - oy0 < p->band_rows ? p->oh - oy0 : p->band_rows;
                size_t cols = rows * p->ow;
                rill__cpu_im2col_ex(&ex, in, oy0, rows, col, cols);
                /* gw (kg x cn*rs) += the group's band of grad_out (kg x
                 * cols) times col^T (cols x cn*rs). */
                rill__cpu_sgemm_strided(g.kg, ex.c * rs, cols, gout + oy0 * p->ow, ohw, 1, col, 1,
                                        cols, beta, gw, crs);
                beta = 1.0f;
            }
        }
    }
}
