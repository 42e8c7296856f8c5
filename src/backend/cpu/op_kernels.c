/* SPDX-License-Identifier: MIT */
/* CPU bodies of the built-in float32 ops. Layer: CPU backend; the launches
 * are built in src/ops/ops.c. Invariants: block b of G writes only its own
 * slice of the output (element ranges aligned to RILL__OP_SLICE_ALIGN,
 * matmul tiles, conv2d image bands), so blocks never race; every result is
 * a pure function of the inputs and the grid, so a launch with the same
 * grid gives the same bits. Matrix products go to sgemm.h on the calling
 * worker (oneDNN's or BLIS's): parallelism comes from the grid's blocks,
 * and both are reentrant, so blocks of one launch and launches on other
 * streams call them at once (Debian's serial OpenBLAS is not: concurrent
 * calls share its work buffers and return wrong values). conv2d_ex hands
 * its blocks to oneDNN where that takes the launch (conv_onednn.h). */
#include "backend/cpu/op_kernels.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/conv_backward_kernels.h"
#include "backend/cpu/conv_direct.h"
#include "backend/cpu/conv_onednn.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/half.h"
#include "backend/cpu/pool_kernels.h"
#include "backend/cpu/sgemm.h"
#include "backend/cpu/tensor_kernels.h"
#include "backend/cpu/vec_clones.h"
#include "backend/cpu/vec_math.h"
#include "backend/op_math.h"

/* Launch arguments that fit the command's inline buffer are stored
 * without allocating: keep every op's struct within it. */
static_assert(sizeof(rill__op_conv2d_args) <= CPU_ARGS_INLINE, "conv2d args too big");
static_assert(sizeof(rill__op_matmul_args) <= CPU_ARGS_INLINE, "matmul args too big");
static_assert(sizeof(rill__op_add_args) <= CPU_ARGS_INLINE, "add args too big");
static_assert(sizeof(rill__op_conv2d_f16_args) <= CPU_ARGS_INLINE, "conv2d f16 args too big");
static_assert(sizeof(rill__op_matmul_f16_args) <= CPU_ARGS_INLINE, "matmul f16 args too big");
static_assert(sizeof(rill__op_matmul_batched_args) <= CPU_ARGS_INLINE,
              "matmul batched args too big");
static_assert(sizeof(rill__op_strided_args) <= CPU_ARGS_INLINE, "strided args too big");
static_assert(sizeof(rill__op_conv2d_ex_args) <= CPU_ARGS_INLINE, "conv2d ex args too big");
static_assert(sizeof(rill__op_conv2d_backward_args) <= CPU_ARGS_INLINE,
              "conv2d backward args too big");
static_assert(sizeof(rill__op_pool2d_args) <= CPU_ARGS_INLINE, "pool2d args too big");
static_assert(sizeof(rill__op_avg_pool2d_backward_args) <= CPU_ARGS_INLINE,
              "avg pool2d backward args too big");
static_assert(sizeof(rill__op_pool2d_ex_args) <= CPU_ARGS_INLINE, "pool2d ex args too big");
static_assert(sizeof(rill__op_avg_pool2d_backward_ex_args) <= CPU_ARGS_INLINE,
              "avg pool2d backward ex args too big");

/* ---- slices ---- */

/* [*begin, *end): block ctx's share of `count` items, cut into equal runs
 * of a multiple of `align` items (the last runs may be shorter or empty). */
static void block_range(const rill_block_ctx *ctx, size_t count, size_t align, size_t *begin,
                        size_t *end) {
    size_t blocks = ctx->grid_dim.x;
    size_t per = (count + blocks - 1) / blocks;
    per = (per + align - 1) / align * align;
    size_t b = ctx->block_idx.x;
    *begin = b * per < count ? b * per : count;
    *end = count - *begin > per ? *begin + per : count;
}

/* ---- element-wise ---- */

void rill__cpu_op_fill_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_fill_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    float *x = p->x;
    float value = p->value;
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (bits == 0) { /* +0.0: the C library's memset, with the widest stores */
        memset(x + begin, 0, (end - begin) * sizeof *x);
        return;
    }
    for (size_t i = begin; i < end; i++)
        x[i] = value;
}

/* Each element is bits modulo 2^(8 width); an element whose bytes are all
 * one byte (zeros, all ones, any 1-byte element) is the C library's
 * memset. */
void rill__cpu_op_fill_bits(const rill_block_ctx *ctx, const void *args) {
    const rill__op_fill_bits_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    size_t width = p->element_bytes;
    unsigned char *x = (unsigned char *)p->x + begin * width;
    size_t n = end - begin;
    uint64_t byte = p->bits & 0xffu;
    uint64_t mask = width == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * width)) - 1;
    if ((p->bits & mask) == (byte * UINT64_C(0x0101010101010101) & mask)) {
        memset(x, (int)byte, n * width);
        return;
    }
    if (width == 2) {
        uint16_t *y = (uint16_t *)(void *)x, v = (uint16_t)p->bits;
        for (size_t i = 0; i < n; i++)
            y[i] = v;
    } else if (width == 4) {
        uint32_t *y = (uint32_t *)(void *)x, v = (uint32_t)p->bits;
        for (size_t i = 0; i < n; i++)
            y[i] = v;
    } else {
        uint64_t *y = (uint64_t *)(void *)x, v = p->bits;
        for (size_t i = 0; i < n; i++)
            y[i] = v;
    }
}

void rill__cpu_op_add_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_add_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    float *out = p->out;
    const float *a = p->a, *b = p->b;
    float alpha = p->alpha;
    if (alpha == 1.0f) {
        for (size_t i = begin; i < end; i++)
            out[i] = a[i] + b[i];
    } else {
        for (size_t i = begin; i < end; i++)
            out[i] = a[i] + alpha * b[i];
    }
}

void rill__cpu_op_mul_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_mul_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    float *out = p->out;
    const float *a = p->a, *b = p->b;
    for (size_t i = begin; i < end; i++)
        out[i] = a[i] * b[i];
}

void rill__cpu_op_add_scalar_i64(const rill_block_ctx *ctx, const void *args) {
    const rill__op_add_scalar_i64_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    uint64_t value = (uint64_t)p->value;
    for (size_t i = begin; i < end; i++)
        p->out[i] = (int64_t)((uint64_t)p->a[i] + value);
}

void rill__cpu_op_add_scalar_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_add_scalar_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    float *out = p->out;
    const float *a = p->a;
    float value = p->value;
    for (size_t i = begin; i < end; i++)
        out[i] = a[i] + value;
}

/* ---- random normal fill ---- */

void rill__cpu_op_randn_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_randn_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    float *x = p->x;
    double mean = p->mean, std = p->std;
    for (size_t i = begin; i < end; i++)
        x[i] = rill__op_randn_element(mean, std, p->seed, i);
}

/* ---- float16 conversions ---- */

void rill__cpu_op_cast_f32_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_cast_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN * 2, &begin, &end);
    rill__half_from_float_n((uint16_t *)p->out + begin, (const float *)p->in + begin, end - begin);
}

void rill__cpu_op_cast_f16_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_cast_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    rill__half_to_float_n((float *)p->out + begin, (const uint16_t *)p->in + begin, end - begin);
}

/* ---- float16 element-wise ---- */

/* Halves per chunk: converted to floats on the stack, computed, rounded back. */
#define HALF_CHUNK 256
/* Slices of halves start at multiples of 64 bytes, as the floats' do. */
#define HALF_ALIGN (RILL__OP_SLICE_ALIGN * 2)

void rill__cpu_op_fill_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_f16_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, HALF_ALIGN, &begin, &end);
    uint16_t value = rill__half_from_float(p->value);
    for (size_t i = begin; i < end; i++)
        p->out[i] = value;
}

void rill__cpu_op_add_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_f16_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, HALF_ALIGN, &begin, &end);
    float fa[HALF_CHUNK], fb[HALF_CHUNK];
    float alpha = p->value;
    for (size_t i = begin; i < end; i += HALF_CHUNK) {
        size_t m = end - i < HALF_CHUNK ? end - i : HALF_CHUNK;
        rill__half_to_float_n(fa, p->a + i, m);
        rill__half_to_float_n(fb, p->b + i, m);
        if (alpha == 1.0f) {
            for (size_t j = 0; j < m; j++)
                fa[j] = fa[j] + fb[j];
        } else {
            for (size_t j = 0; j < m; j++)
                fa[j] = fa[j] + alpha * fb[j];
        }
        rill__half_from_float_n(p->out + i, fa, m);
    }
}

void rill__cpu_op_mul_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_f16_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, HALF_ALIGN, &begin, &end);
    float fa[HALF_CHUNK], fb[HALF_CHUNK];
    for (size_t i = begin; i < end; i += HALF_CHUNK) {
        size_t m = end - i < HALF_CHUNK ? end - i : HALF_CHUNK;
        rill__half_to_float_n(fa, p->a + i, m);
        rill__half_to_float_n(fb, p->b + i, m);
        for (size_t j = 0; j < m; j++)
            fa[j] = fa[j] * fb[j];
        rill__half_from_float_n(p->out + i, fa, m);
    }
}

void rill__cpu_op_add_scalar_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_f16_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, HALF_ALIGN, &begin, &end);
    float fa[HALF_CHUNK];
    float value = p->value;
    for (size_t i = begin; i < end; i += HALF_CHUNK) {
        size_t m = end - i < HALF_CHUNK ? end - i : HALF_CHUNK;
        rill__half_to_float_n(fa, p->a + i, m);
        for (size_t j = 0; j < m; j++)
            fa[j] = fa[j] + value;
        rill__half_from_float_n(p->out + i, fa, m);
    }
}

/* ---- sum ---- */

VECTOR_BODY(rill__cpu_op_sum_partial_f32)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_sum_partial_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    double total = rill__vec_sum(p->a + begin, end - begin);
    if (p->partials != NULL)
        p->partials[ctx->block_idx.x] = total;
    else
        p->out[0] = (float)total;
}

void rill__cpu_op_sum_final_f32(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const rill__op_sum_final_args *p = args;
    double total = 0.0;
    for (size_t i = 0; i < p->count; i++)
        total += p->partials[i];
    p->out[0] = (float)total;
}

/* The sum of n halves in double precision: chunks converted to floats,
 * each added by rill__vec_sum. */
INLINED double sum_run_f16(const uint16_t *a, size_t n) {
    float chunk[HALF_CHUNK];
    double total = 0.0;
    for (size_t i = 0; i < n; i += HALF_CHUNK) {
        size_t m = n - i < HALF_CHUNK ? n - i : HALF_CHUNK;
        rill__half_to_float_n(chunk, a + i, m);
        total += rill__vec_sum(chunk, m);
    }
    return total;
}

VECTOR_BODY(rill__cpu_op_sum_partial_f16)(const rill_block_ctx *ctx, const void *args) {
    const rill__op_sum_f16_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, HALF_ALIGN, &begin, &end);
    double total = sum_run_f16(p->a + begin, end - begin);
    if (p->partials != NULL)
        p->partials[ctx->block_idx.x] = total;
    else
        p->out[0] = rill__half_from_float((float)total);
}

void rill__cpu_op_sum_final_f16(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const rill__op_sum_final_f16_args *p = args;
    double total = 0.0;
    for (size_t i = 0; i < p->count; i++)
        total += p->partials[i];
    p->out[0] = rill__half_from_float((float)total);
}

/* ---- sgemm ---- */

/* Row-major c = a b + beta c (leading dimensions lda, ldb, ldc) on the
 * calling thread (sgemm.c). BLIS runs single-threaded unless the program
 * asks for more (BLIS_NUM_THREADS), in every variant. Every dimension and
 * leading dimension is at most RILL__OP_MAX_DIM (checked by ops.c). */
static void sgemm_beta(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                       size_t ldb, float beta, float *c, size_t ldc) {
    rill__cpu_sgemm(m, n, k, a, lda, b, ldb, beta, c, ldc);
}

/* c = a b, c's previous contents ignored. */
static void sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                  size_t ldb, float *c, size_t ldc) {
    sgemm_beta(m, n, k, a, lda, b, ldb, 0.0f, c, ldc);
}

/* ---- matmul ---- */

/* Rows [r0, r1) and columns [c0, c1) of c that block `tile` computes; an
 * empty range when the panels run out before the tiles do. */
typedef struct tile_range {
    size_t r0, r1, c0, c1;
} tile_range;

static tile_range matmul_tile(size_t m, size_t n, size_t row_panels, size_t col_panels,
                              size_t tile) {
    size_t pi = tile / col_panels, pj = tile % col_panels;
    size_t rows_per = rill__op_matmul_panel_rows(m, row_panels);
    size_t cols_per = rill__op_matmul_panel_cols(n, col_panels);
    tile_range t;
    t.r0 = pi * rows_per < m ? pi * rows_per : m;
    t.r1 = m - t.r0 > rows_per ? t.r0 + rows_per : m;
    t.c0 = pj * cols_per < n ? pj * cols_per : n;
    t.c1 = n - t.c0 > cols_per ? t.c0 + cols_per : n;
    return t;
}

/* c[i, j] += bias[i*rs + j*cs] over a tile of rows x cols (c and bias at
 * the tile's first element), each sum rounded once, as the binary add's. */
static void add_bias(float *c, size_t ldc, const float *bias, size_t rs, size_t cs, size_t rows,
                     size_t cols) {
    for (size_t i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        const float *bi = bias + i * rs;
        if (cs == 1) {
            for (size_t j = 0; j < cols; j++)
                ci[j] += bi[j];
        } else {
            for (size_t j = 0; j < cols; j++)
                ci[j] += bi[j * cs];
        }
    }
}

void rill__cpu_op_matmul_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_matmul_args *p = args;
    tile_range t = matmul_tile(p->m, p->n, p->row_panels, p->col_panels, ctx->block_idx.x);
    if (t.r0 == t.r1 || t.c0 == t.c1)
        return;
    float *c = p->c + t.r0 * p->n + t.c0;
    if (p->trans == 0) {
        sgemm(t.r1 - t.r0, t.c1 - t.c0, p->k, p->a + t.r0 * p->k, p->k, p->b + t.c0, p->n, c, p->n);
    } else {
        /* A transposed operand: a [k,m] (row i of the product is column i
         * of a), b [n,k] (column j of the product is row j of b). */
        bool at = (p->trans & RILL_MATMUL_A_T) != 0, bt = (p->trans & RILL_MATMUL_B_T) != 0;
        const float *a = at ? p->a + t.r0 : p->a + t.r0 * p->k;
        const float *b = bt ? p->b + t.c0 * p->k : p->b + t.c0;
        rill__cpu_sgemm_strided(t.r1 - t.r0, t.c1 - t.c0, p->k, a, at ? 1 : p->k, at ? p->m : 1, b,
                                bt ? 1 : p->n, bt ? p->k : 1, 0.0f, c, p->n);
    }
    if (p->bias != NULL)
        add_bias(c, p->n, p->bias + t.r0 * p->bias_rs + t.c0 * p->bias_cs, p->bias_rs, p->bias_cs,
                 t.r1 - t.r0, t.c1 - t.c0);
}

/* Block b's items are [b*items/G, (b+1)*items/G) of the batch * row_panels
 * (product, row panel) pairs: one strided sgemm each, a transposed
 * operand read with its strides swapped. */
void rill__cpu_op_matmul_batched_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_matmul_batched_args *p = args;
    size_t blocks = ctx->grid_dim.x, b = ctx->block_idx.x;
    size_t items = p->batch * p->row_panels;
    size_t first = b * items / blocks, last = (b + 1) * items / blocks;
    size_t rows_per = rill__op_matmul_panel_rows(p->m, p->row_panels);
    bool at = (p->trans & RILL_MATMUL_A_T) != 0, bt = (p->trans & RILL_MATMUL_B_T) != 0;
    size_t rsa = at ? 1 : p->lda, csa = at ? p->lda : 1;
    size_t rsb = bt ? 1 : p->ldb, csb = bt ? p->ldb : 1;
    for (size_t item = first; item < last; item++) {
        size_t i = item / p->row_panels, panel = item % p->row_panels;
        size_t r0 = panel * rows_per < p->m ? panel * rows_per : p->m;
        size_t r1 = p->m - r0 > rows_per ? r0 + rows_per : p->m;
        if (r0 == r1)
            continue;
        const float *a = p->a + i * p->stride_a + r0 * rsa;
        const float *bm = p->b + i * p->stride_b;
        float *c = p->c + (i * p->m + r0) * p->n;
        rill__cpu_sgemm_strided(r1 - r0, p->n, p->k, a, rsa, csa, bm, rsb, csb, 0.0f, c, p->n);
    }
}

/* Each chunk of c (at most RILL__OP_F16_MM_ROWS x RILL__OP_F16_MM_COLS)
 * is accumulated in float over depth chunks of a and b converted to
 * floats, then rounded to halves once. The chunks' sizes are those that
 * rill__op_matmul_f16_slot_floats sized the slot for. */
void rill__cpu_op_matmul_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_matmul_f16_args *p = args;
    tile_range t = matmul_tile(p->m, p->n, p->row_panels, p->col_panels, ctx->block_idx.x);
    if (t.r0 == t.r1 || t.c0 == t.c1)
        return;
    size_t rows_max =
        rill__op_min_size(rill__op_matmul_panel_rows(p->m, p->row_panels), RILL__OP_F16_MM_ROWS);
    size_t cols_max =
        rill__op_min_size(rill__op_matmul_panel_cols(p->n, p->col_panels), RILL__OP_F16_MM_COLS);
    size_t depth_max = rill__op_min_size(p->k, RILL__OP_F16_MM_DEPTH);
    float *fa = p->scratch + (size_t)ctx->block_idx.x * rill__op_matmul_f16_slot_floats(p);
    float *fb = fa + rows_max * depth_max;
    float *fc = fb + depth_max * cols_max;
    for (size_t i0 = t.r0; i0 < t.r1; i0 += rows_max) {
        size_t rows = rill__op_min_size(rows_max, t.r1 - i0);
        for (size_t j0 = t.c0; j0 < t.c1; j0 += cols_max) {
            size_t cols = rill__op_min_size(cols_max, t.c1 - j0);
            for (size_t k0 = 0; k0 < p->k; k0 += depth_max) {
                size_t depth = rill__op_min_size(depth_max, p->k - k0);
                for (size_t i = 0; i < rows; i++)
                    rill__half_to_float_n(fa + i * depth, p->a + (i0 + i) * p->k + k0, depth);
                for (size_t d = 0; d < depth; d++)
                    rill__half_to_float_n(fb + d * cols, p->b + (k0 + d) * p->n + j0, cols);
                sgemm_beta(rows, cols, depth, fa, depth, fb, cols, k0 == 0 ? 0.0f : 1.0f, fc, cols);
            }
            for (size_t i = 0; i < rows; i++)
                rill__half_from_float_n(p->c + (i0 + i) * p->n + j0, fc + i * cols, cols);
        }
    }
}

/* ---- conv2d ---- */

/* The shape of a conv2d, shared by the float and half bodies. */
typedef struct conv_shape {
    size_t c, h, w, r, s;
} conv_shape;

/* Copies count input elements at src (floats or halves) to floats at dst. */
typedef void conv_row_fn(float *dst, const void *src, size_t count);

static void row_from_floats(float *dst, const void *src, size_t count) {
    memcpy(dst, src, count * sizeof(float));
}

static void row_from_halves(float *dst, const void *src, size_t count) {
    rill__half_to_float_n(dst, src, count);
}

/* Writes the im2col matrix of output rows [oh0, oh0 + rows) of the image
 * at img (c planes of h*w elements of elem_bytes each): row (ci*r + ri)*s
 * + si, column y*ow + x holds in[ci, oh0+y+ri, x+si] as a float; the
 * matrix is c*r*s by rows*ow, row-major. */
static void im2col(const conv_shape *g, const unsigned char *img, size_t elem_bytes,
                   conv_row_fn *row, size_t oh0, size_t rows, float *col) {
    size_t ow = g->w - g->s + 1;
    size_t cols = rows * ow;
    for (size_t ci = 0; ci < g->c; ci++) {
        const unsigned char *plane = img + ci * g->h * g->w * elem_bytes;
        for (size_t ri = 0; ri < g->r; ri++) {
            for (size_t si = 0; si < g->s; si++) {
                float *dst = col + ((ci * g->r + ri) * g->s + si) * cols;
                const unsigned char *src = plane + ((oh0 + ri) * g->w + si) * elem_bytes;
                for (size_t y = 0; y < rows; y++)
                    row(dst + y * ow, src + y * g->w * elem_bytes, ow);
            }
        }
    }
}

void rill__cpu_op_conv2d_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_conv2d_args *p = args;
    size_t bands = rill__op_conv2d_bands(p);
    size_t begin, end;
    block_range(ctx, p->n * bands, 1, &begin, &end);
    size_t oh = p->h - p->r + 1, ow = p->w - p->s + 1;
    size_t crs = p->c * p->r * p->s;
    int is_pointwise = p->r == 1 && p->s == 1;
    float *col = is_pointwise
                     ? NULL
                     : p->scratch + (size_t)ctx->block_idx.x * rill__op_conv2d_slot_floats(p);

    for (size_t item = begin; item < end; item++) {
        size_t img = item / bands;
        size_t oh0 = (item % bands) * p->band_rows;
        size_t rows = oh - oh0 < p->band_rows ? oh - oh0 : p->band_rows;
        float *dst = p->out + (img * p->k * oh + oh0) * ow;
        if (is_pointwise) {
            /* A 1x1 filter's im2col matrix is the input itself: channel ci's
             * rows [oh0, oh0 + rows) are contiguous, h*w apart. */
            const float *src = p->in + img * p->c * p->h * p->w + oh0 * p->w;
            sgemm(p->k, rows * ow, crs, p->weight, crs, src, p->h * p->w, dst, oh * ow);
        } else {
            conv_shape g = {p->c, p->h, p->w, p->r, p->s};
            const float *in = p->in + img * p->c * p->h * p->w;
            im2col(&g, (const unsigned char *)in, sizeof(float), row_from_floats, oh0, rows, col);
            sgemm(p->k, rows * ow, crs, p->weight, crs, col, rows * ow, dst, oh * ow);
        }
    }
}

/* As the float body, except that every band goes through the slot: its
 * im2col matrix converted from halves, then its float output, rounded to
 * halves filter by filter. */
void rill__cpu_op_conv2d_f16(const rill_block_ctx *ctx, const void *args) {
    const rill__op_conv2d_f16_args *p = args;
    size_t bands = (p->h - p->r + p->band_rows) / p->band_rows;
    size_t begin, end;
    block_range(ctx, p->n * bands, 1, &begin, &end);
    size_t oh = p->h - p->r + 1, ow = p->w - p->s + 1;
    size_t crs = p->c * p->r * p->s;
    float *col = p->scratch + (size_t)ctx->block_idx.x * rill__op_conv2d_f16_slot_floats(p);
    float *band_out = col + crs * p->band_rows * ow;
    conv_shape g = {p->c, p->h, p->w, p->r, p->s};

    for (size_t item = begin; item < end; item++) {
        size_t img = item / bands;
        size_t oh0 = (item % bands) * p->band_rows;
        size_t rows = oh - oh0 < p->band_rows ? oh - oh0 : p->band_rows;
        const uint16_t *in = p->in + img * p->c * p->h * p->w;
        im2col(&g, (const unsigned char *)in, sizeof(uint16_t), row_from_halves, oh0, rows, col);
        sgemm(p->k, rows * ow, crs, p->weight, crs, col, rows * ow, band_out, rows * ow);
        for (size_t ki = 0; ki < p->k; ki++)
            rill__half_from_float_n(p->out + ((img * p->k + ki) * oh + oh0) * ow,
                                    band_out + ki * rows * ow, rows * ow);
    }
}

/* ---- conv2d with strides and padding ---- */

/* An item of p->images whole images from img0 (fewer at the end): their
 * im2col matrices side by side in col, then per group its filters times
 * its rows of them into the slot after col, copied to each image's planes
 * of out. */
static void conv2d_ex_images(const rill__op_conv2d_ex_args *p, size_t img0, float *col) {
    size_t kg = p->k / p->groups, crs = p->c / p->groups * p->r * p->s;
    size_t ohw = p->oh * p->ow, ld = p->images * ohw;
    size_t count = p->n - img0 < p->images ? p->n - img0 : p->images;
    for (size_t i = 0; i < count; i++)
        rill__cpu_im2col_ex(p, p->in + (img0 + i) * p->c * p->h * p->w, 0, p->oh, col + i * ohw,
                            ld);
    float *product = col + p->c * p->r * p->s * ld;
    for (size_t g = 0; g < p->groups; g++) {
        sgemm(kg, count * ohw, crs, p->weight + g * kg * crs, crs, col + g * crs * ld, ld, product,
              ld);
        for (size_t i = 0; i < count; i++)
            for (size_t kk = 0; kk < kg; kk++)
                memcpy(p->out + ((img0 + i) * p->k + g * kg + kk) * ohw,
                       product + kk * ld + i * ohw, ohw * sizeof *product);
    }
}

void rill__cpu_op_conv2d_ex_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_conv2d_ex_args *p = args;
    if (rill__cpu_onednn_conv2d(ctx, p))
        return;
    size_t bands = rill__op_conv2d_ex_bands(p);
    size_t begin, end;
    block_range(ctx, rill__op_conv2d_ex_items(p), 1, &begin, &end);
    /* Group g's filters [g*kg, (g+1)*kg) meet rows [g*crs, (g+1)*crs) of
     * the im2col matrix. */
    size_t kg = p->k / p->groups, crs = p->c / p->groups * p->r * p->s;
    size_t slot = rill__op_conv2d_ex_slot_floats(p);
    float *col = p->scratch + (size_t)ctx->block_idx.x * slot;
    bool direct = rill__cpu_conv2d_direct_pays(p);
    for (size_t item = begin; item < end; item++) {
        if (p->images > 1) {
            size_t img0 = item * p->images;
            size_t count = p->n - img0 < p->images ? p->n - img0 : p->images;
            if (!direct || !rill__cpu_conv2d_direct(p, img0, count, 0, p->oh, col, slot))
                conv2d_ex_images(p, img0, col);
            continue;
        }
        size_t img = item / bands;
        size_t oy0 = (item % bands) * p->band_rows;
        size_t rows = p->oh - oy0 < p->band_rows ? p->oh - oy0 : p->band_rows;
        if (direct && rill__cpu_conv2d_direct(p, img, 1, oy0, rows, col, slot))
            continue;
        size_t cols = rows * p->ow;
        rill__cpu_im2col_ex(p, p->in + img * p->c * p->h * p->w, oy0, rows, col, cols);
        for (size_t g = 0; g < p->groups; g++) {
            float *dst = p->out + ((img * p->k + g * kg) * p->oh + oy0) * p->ow;
            sgemm(kg, cols, crs, p->weight + g * kg * crs, crs, col + g * crs * cols, cols, dst,
                  p->oh * p->ow);
        }
    }
}

rill_cpu_kernel_fn rill__cpu_op_body(rill__op op) {
    static const rill_cpu_kernel_fn bodies[RILL__OP_COUNT] = {
        [RILL__OP_FILL_F32] = rill__cpu_op_fill_f32,
        [RILL__OP_ADD_F32] = rill__cpu_op_add_f32,
        [RILL__OP_MUL_F32] = rill__cpu_op_mul_f32,
        [RILL__OP_ADD_SCALAR_F32] = rill__cpu_op_add_scalar_f32,
        [RILL__OP_ADD_SCALAR_I64] = rill__cpu_op_add_scalar_i64,
        [RILL__OP_FILL_BITS] = rill__cpu_op_fill_bits,
        [RILL__OP_SUM_PARTIAL_F32] = rill__cpu_op_sum_partial_f32,
        [RILL__OP_SUM_FINAL_F32] = rill__cpu_op_sum_final_f32,
        [RILL__OP_MATMUL_F32] = rill__cpu_op_matmul_f32,
        [RILL__OP_CONV2D_F32] = rill__cpu_op_conv2d_f32,
        [RILL__OP_RANDN_F32] = rill__cpu_op_randn_f32,
        [RILL__OP_CAST_F32_F16] = rill__cpu_op_cast_f32_f16,
        [RILL__OP_CAST_F16_F32] = rill__cpu_op_cast_f16_f32,
        [RILL__OP_FILL_F16] = rill__cpu_op_fill_f16,
        [RILL__OP_ADD_F16] = rill__cpu_op_add_f16,
        [RILL__OP_MUL_F16] = rill__cpu_op_mul_f16,
        [RILL__OP_ADD_SCALAR_F16] = rill__cpu_op_add_scalar_f16,
        [RILL__OP_SUM_PARTIAL_F16] = rill__cpu_op_sum_partial_f16,
        [RILL__OP_SUM_FINAL_F16] = rill__cpu_op_sum_final_f16,
        [RILL__OP_MATMUL_F16] = rill__cpu_op_matmul_f16,
        [RILL__OP_CONV2D_F16] = rill__cpu_op_conv2d_f16,
        [RILL__OP_COPY_STRIDED_F32] = rill__cpu_op_copy_strided_f32,
        [RILL__OP_BINARY_F32] = rill__cpu_op_binary_f32,
        [RILL__OP_MAP_F32] = rill__cpu_op_map_f32,
        [RILL__OP_MASKED_SCALE_F32] = rill__cpu_op_masked_scale_f32,
        [RILL__OP_COMPARE] = rill__cpu_op_compare,
        [RILL__OP_WHERE] = rill__cpu_op_where,
        [RILL__OP_CONVERT] = rill__cpu_op_convert,
        [RILL__OP_TRIANGLE] = rill__cpu_op_triangle,
        [RILL__OP_REDUCE_DIM_BOOL] = rill__cpu_op_reduce_dim_bool,
        [RILL__OP_ARANGE] = rill__cpu_op_arange,
        [RILL__OP_REDUCE_DIM_F32] = rill__cpu_op_reduce_dim_f32,
        [RILL__OP_SOFTMAX_F32] = rill__cpu_op_softmax_f32,
        [RILL__OP_LAYER_NORM_F32] = rill__cpu_op_layer_norm_f32,
        [RILL__OP_LAYER_NORM_BACKWARD_F32] = rill__cpu_op_layer_norm_backward_f32,
        [RILL__OP_CONV2D_EX_F32] = rill__cpu_op_conv2d_ex_f32,
        [RILL__OP_POOL2D_F32] = rill__cpu_op_pool2d_f32,
        [RILL__OP_EMBEDDING_F32] = rill__cpu_op_embedding_f32,
        [RILL__OP_EMBEDDING_BACKWARD_F32] = rill__cpu_op_embedding_backward_f32,
        [RILL__OP_NLL_LOSS_F32] = rill__cpu_op_nll_loss_f32,
        [RILL__OP_NLL_LOSS_BACKWARD_F32] = rill__cpu_op_nll_loss_backward_f32,
        [RILL__OP_CONV2D_BACKWARD_DATA_F32] = rill__cpu_op_conv2d_backward_data_f32,
        [RILL__OP_CONV2D_BACKWARD_FILTER_F32] = rill__cpu_op_conv2d_backward_filter_f32,
        [RILL__OP_MAX_POOL2D_BACKWARD_F32] = rill__cpu_op_max_pool2d_backward_f32,
        [RILL__OP_AVG_POOL2D_BACKWARD_F32] = rill__cpu_op_avg_pool2d_backward_f32,
        [RILL__OP_POOL2D_EX_F32] = rill__cpu_op_pool2d_ex_f32,
        [RILL__OP_AVG_POOL2D_BACKWARD_EX_F32] = rill__cpu_op_avg_pool2d_backward_ex_f32,
        [RILL__OP_MATMUL_BATCHED_F32] = rill__cpu_op_matmul_batched_f32,
    };
    return op > RILL__OP_NONE && op < RILL__OP_COUNT ? bodies[op] : NULL;
}
