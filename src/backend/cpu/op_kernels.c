/* SPDX-License-Identifier: MIT */
/* CPU bodies of the built-in float32 ops. Layer: CPU backend; the launches
 * are built in src/core/ops.c. Invariants: block b of G writes only its own
 * slice of the output (element ranges aligned to RILL__OP_SLICE_ALIGN,
 * matmul tiles, conv2d image bands), so blocks never race; every result is
 * a pure function of the inputs and the grid, so a launch with the same
 * grid gives the same bits. Matrix products go to BLIS's sgemm on the
 * calling worker: parallelism comes from the grid's blocks, and BLIS is
 * reentrant, so blocks of one launch and launches on other streams call it
 * at once (Debian's serial OpenBLAS is not: concurrent calls share its work
 * buffers and return wrong values). */
#include "backend/cpu/op_kernels.h"

#include <assert.h>
#include <blis.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/half.h"

/* Launch arguments that fit the command's inline buffer are stored
 * without allocating: keep every op's struct within it. */
static_assert(sizeof(rill__op_conv2d_args) <= CPU_ARGS_INLINE, "conv2d args too big");
static_assert(sizeof(rill__op_matmul_args) <= CPU_ARGS_INLINE, "matmul args too big");
static_assert(sizeof(rill__op_add_args) <= CPU_ARGS_INLINE, "add args too big");

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
    for (size_t i = begin; i < end; i++)
        x[i] = value;
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

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

double rill__op_randn_value(uint64_t seed, size_t i) {
    uint64_t pair = (uint64_t)(i / 2);
    uint64_t h1 = splitmix64(splitmix64(seed) ^ pair);
    uint64_t h2 = splitmix64(h1);
    double u1 = ((double)(h1 >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = (double)(h2 >> 11) * 0x1.0p-53;         /* [0, 1) */
    double r = sqrt(-2.0 * log(u1));
    double theta = 6.283185307179586476925 * u2;
    return (i & 1u) == 0 ? r * cos(theta) : r * sin(theta);
}

void rill__cpu_op_randn_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_randn_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    float *x = p->x;
    double mean = p->mean, std = p->std;
    for (size_t i = begin; i < end; i++)
        x[i] = (float)(mean + std * rill__op_randn_value(p->seed, i));
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

/* Sum of a[0..n) in double precision. Eight independent accumulators keep
 * the adds pipelined; they are combined in a fixed order, so the result
 * depends only on the data. The error is about n * 2^-53 of the sum of
 * |a[i]|, far below float's resolution for any n that fits in memory. */
static double sum_run(const float *a, size_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0, s5 = 0.0, s6 = 0.0, s7 = 0.0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += (double)a[i];
        s1 += (double)a[i + 1];
        s2 += (double)a[i + 2];
        s3 += (double)a[i + 3];
        s4 += (double)a[i + 4];
        s5 += (double)a[i + 5];
        s6 += (double)a[i + 6];
        s7 += (double)a[i + 7];
    }
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)a[i];
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + tail;
}

void rill__cpu_op_sum_partial_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_sum_partial_args *p = args;
    size_t begin, end;
    block_range(ctx, p->n, RILL__OP_SLICE_ALIGN, &begin, &end);
    double total = sum_run(p->a + begin, end - begin);
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

/* ---- sgemm ---- */

/* Row-major c = a b (leading dimensions lda, ldb, ldc) with BLIS on the
 * calling thread: BLIS runs single-threaded unless the program asks for
 * more (BLIS_NUM_THREADS), in every variant. Every dimension and leading
 * dimension is at most RILL__OP_MAX_DIM (checked by ops.c), so the casts
 * to dim_t and inc_t are exact. BLIS takes its inputs through non-const
 * pointers and does not write them. */
static void sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                  size_t ldb, float *c, size_t ldc) {
    float one = 1.0f, zero = 0.0f;
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, (dim_t)m, (dim_t)n, (dim_t)k, &one, (float *)a,
              (inc_t)lda, 1, (float *)b, (inc_t)ldb, 1, &zero, c, (inc_t)ldc, 1);
}

/* ---- matmul ---- */

void rill__cpu_op_matmul_f32(const rill_block_ctx *ctx, const void *args) {
    const rill__op_matmul_args *p = args;
    size_t tile = ctx->block_idx.x;
    size_t pi = tile / p->col_panels, pj = tile % p->col_panels;

    size_t rows_per = (p->m + p->row_panels - 1) / p->row_panels;
    size_t r0 = pi * rows_per < p->m ? pi * rows_per : p->m;
    size_t r1 = p->m - r0 > rows_per ? r0 + rows_per : p->m;
    /* Column panels are whole cache lines wide, so tiles never share one. */
    size_t cols_per = (p->n + p->col_panels - 1) / p->col_panels;
    cols_per = (cols_per + RILL__OP_SLICE_ALIGN - 1) / RILL__OP_SLICE_ALIGN * RILL__OP_SLICE_ALIGN;
    size_t c0 = pj * cols_per < p->n ? pj * cols_per : p->n;
    size_t c1 = p->n - c0 > cols_per ? c0 + cols_per : p->n;
    if (r0 == r1 || c0 == c1)
        return;
    sgemm(r1 - r0, c1 - c0, p->k, p->a + r0 * p->k, p->k, p->b + c0, p->n, p->c + r0 * p->n + c0,
          p->n);
}

/* ---- conv2d ---- */

/* Writes the im2col matrix of output rows [oh0, oh0 + rows) of image img:
 * row (ci*r + ri)*s + si, column y*ow + x holds in[img, ci, oh0+y+ri, x+si];
 * the matrix is c*r*s by rows*ow, row-major. */
static void im2col(const rill__op_conv2d_args *p, size_t img, size_t oh0, size_t rows, float *col) {
    size_t ow = p->w - p->s + 1;
    size_t cols = rows * ow;
    for (size_t ci = 0; ci < p->c; ci++) {
        const float *plane = p->in + (img * p->c + ci) * p->h * p->w;
        for (size_t ri = 0; ri < p->r; ri++) {
            for (size_t si = 0; si < p->s; si++) {
                float *dst = col + ((ci * p->r + ri) * p->s + si) * cols;
                const float *src = plane + (oh0 + ri) * p->w + si;
                for (size_t y = 0; y < rows; y++)
                    memcpy(dst + y * ow, src + y * p->w, ow * sizeof(float));
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
            im2col(p, img, oh0, rows, col);
            sgemm(p->k, rows * ow, crs, p->weight, crs, col, rows * ow, dst, oh * ow);
        }
    }
}
