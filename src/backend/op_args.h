/* SPDX-License-Identifier: MIT */
/* The built-in ops (rill_op_*) as the device interface names them: their
 * ids and the argument structs their launches carry. The op layer
 * (src/ops) checks every field and chooses the grid; a backend's body for
 * an op (what kernel_load finds for it) trusts
 * them. Block b of a grid of G blocks computes the b-th of G contiguous
 * slices of the op's work, so blocks never write the same bytes; a body
 * that does the whole op in one go (a CUDA device's library call) may
 * ignore the grid and the fields that only shape it (panels, bands,
 * scratch slots), as long as the results are the same within float
 * rounding. */
#ifndef RILL_BACKEND_OP_ARGS_H
#define RILL_BACKEND_OP_ARGS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The built-in ops whose bodies backends provide: a kernel made by
 * rill__kernel_create_op carries one of these (rill__kernel_image.op) and
 * its launches carry the op's argument struct below. */
typedef enum rill__op {
    RILL__OP_NONE = 0, /* a kernel of the user's */
    RILL__OP_FILL_F32,
    RILL__OP_ADD_F32,
    RILL__OP_MUL_F32,
    RILL__OP_ADD_SCALAR_F32,
    RILL__OP_SUM_PARTIAL_F32,
    RILL__OP_SUM_FINAL_F32,
    RILL__OP_MATMUL_F32,
    RILL__OP_CONV2D_F32,
    RILL__OP_RANDN_F32,
    RILL__OP_CAST_F32_F16,
    RILL__OP_CAST_F16_F32,
    RILL__OP_FILL_F16,
    RILL__OP_ADD_F16,
    RILL__OP_MUL_F16,
    RILL__OP_ADD_SCALAR_F16,
    RILL__OP_SUM_PARTIAL_F16,
    RILL__OP_SUM_FINAL_F16,
    RILL__OP_MATMUL_F16,
    RILL__OP_CONV2D_F16,
    RILL__OP_COPY_STRIDED_F32,
    RILL__OP_BINARY_F32,
    RILL__OP_MAP_F32,
    RILL__OP_REDUCE_DIM_F32,
    RILL__OP_SOFTMAX_F32,
    RILL__OP_CONV2D_EX_F32,
    RILL__OP_POOL2D_F32,
    RILL__OP_EMBEDDING_F32,
    RILL__OP_EMBEDDING_BACKWARD_F32,
    RILL__OP_CONV2D_BACKWARD_DATA_F32,
    RILL__OP_CONV2D_BACKWARD_FILTER_F32,
    RILL__OP_MAX_POOL2D_BACKWARD_F32,
    RILL__OP_AVG_POOL2D_BACKWARD_F32,
    RILL__OP_POOL2D_EX_F32,
    RILL__OP_AVG_POOL2D_BACKWARD_EX_F32,
    RILL__OP_MATMUL_BATCHED_F32,
    RILL__OP_LAYER_NORM_F32,
    RILL__OP_LAYER_NORM_BACKWARD_F32,
    RILL__OP_NLL_LOSS_F32,
    RILL__OP_NLL_LOSS_BACKWARD_F32,
    RILL__OP_ADD_SCALAR_I64,
    RILL__OP_FILL_BITS,
    RILL__OP_MASKED_SCALE_F32,
    RILL__OP_COMPARE,
    RILL__OP_WHERE,
    RILL__OP_TRIANGLE,
    RILL__OP_CONVERT,
    RILL__OP_REDUCE_DIM_BOOL,
    RILL__OP_ARANGE,
    RILL__OP_COUNT
} rill__op;

/* Threads per block of every op launch: what CUDA bodies are written for
 * (CPU bodies ignore it). */
#define RILL__OP_BLOCK_THREADS 256

/* Element slices start at multiples of this many floats (64 bytes), so two
 * blocks never write the same cache line of an output. */
#define RILL__OP_SLICE_ALIGN 16

/* The largest matrix dimension and leading dimension an sgemm tile takes
 * (OpenBLAS's blasint is a 32-bit int in most builds): ops.c rejects
 * larger matmul and conv2d shapes. */
#define RILL__OP_MAX_DIM ((size_t)INT_MAX)

/* x[i] = value for i < n. */
typedef struct rill__op_fill_args {
    float *x;
    float value;
    size_t n;
} rill__op_fill_args;

/* out[i] = a[i] + alpha * b[i] for i < n. out may equal a or b. */
typedef struct rill__op_add_args {
    float *out;
    const float *a, *b;
    float alpha;
    size_t n;
} rill__op_add_args;

/* out[i] = a[i] * b[i] for i < n. out may equal a or b. */
typedef struct rill__op_mul_args {
    float *out;
    const float *a, *b;
    size_t n;
} rill__op_mul_args;

/* out[i] = a[i] + value for i < n. out may equal a. */
typedef struct rill__op_add_scalar_args {
    float *out;
    const float *a;
    float value;
    size_t n;
} rill__op_add_scalar_args;

/* out[i] = a[i] + value for i < n, wrapping modulo 2^64. out may equal a. */
typedef struct rill__op_add_scalar_i64_args {
    int64_t *out;
    const int64_t *a;
    int64_t value;
    size_t n;
} rill__op_add_scalar_i64_args;

/* x[i] = bits, as an unsigned integer of element_bytes (1, 2, 4 or 8),
 * for i < n. */
typedef struct rill__op_fill_bits_args {
    void *x;
    uint64_t bits;
    size_t element_bytes;
    size_t n;
} rill__op_fill_bits_args;

/* Phase one of sum: block b adds its slice of a[0..n) in double precision
 * and stores the result in partials[b] (partials has grid_dim.x entries).
 * When partials is NULL the grid must be one block, which stores the
 * total, rounded to float, in out[0] and no second phase is needed. */
typedef struct rill__op_sum_partial_args {
    const float *a;
    size_t n;
    double *partials;
    float *out;
} rill__op_sum_partial_args;

/* Phase two of sum, a grid of one block: out[0] = (float) the sum of
 * partials[0..count) in index order, so the result is deterministic. */
typedef struct rill__op_sum_final_args {
    const double *partials;
    size_t count;
    float *out;
} rill__op_sum_final_args;

/* c[m,n] = a[m,k] b[k,n], all row-major, plus bias[i*bias_rs +
 * j*bias_cs] for element (i, j) where bias is not NULL (added after the
 * product is rounded: rill_op_addmm_f32). The output is cut into
 * row_panels x col_panels tiles; block b computes tile
 * (b / col_panels, b % col_panels) with one single-threaded sgemm, and
 * the grid has row_panels * col_panels blocks. c overlaps neither a, b
 * nor bias. bias is NULL on a device without op_matmul_bias. */
typedef struct rill__op_matmul_args {
    float *c;
    const float *a, *b;
    size_t m, k, n;
    size_t row_panels, col_panels;
    uint32_t trans; /* RILL_MATMUL_A_T, RILL_MATMUL_B_T: a or b stored transposed */
    const float *bias;
    size_t bias_rs, bias_cs;
} rill__op_matmul_args;

/* c[i] = a[i] b[i] for i < batch: c contiguous [batch,m,n]; product i's a
 * at a + i*stride_a, [m,k] with rows lda floats apart ([k,m] when trans
 * has RILL_MATMUL_A_T), its b at b + i*stride_b, [k,n] rows ldb apart
 * ([n,k] with RILL_MATMUL_B_T). The work is batch * row_panels items
 * (product, panel of rows of c; rill__op_matmul_panel_rows(m,
 * row_panels) rows each, the last maybe fewer); block b of G computes
 * items [b*items/G, (b+1)*items/G), one sgemm each. c overlaps neither a
 * nor b; a and b may overlap (they are only read). */
typedef struct rill__op_matmul_batched_args {
    float *c;
    const float *a, *b;
    size_t batch, m, k, n;
    size_t stride_a, stride_b;
    uint32_t lda, ldb;
    uint32_t row_panels;
    uint32_t trans; /* RILL_MATMUL_A_T, RILL_MATMUL_B_T */
} rill__op_matmul_batched_args;

/* out[n,k,oh,ow] = sum over c,r,s of in[n,c,oh+r,ow+s] * weight[k,c,r,s],
 * NCHW, stride 1, no padding; oh < h-r+1, ow < w-s+1 (the header's sz is
 * s here). The work is n * bands items (image, band of band_rows output
 * rows; the last band of an image may be shorter); block b handles a
 * contiguous range of items. Each item builds the im2col matrix of its
 * band in block b's slot of the scratch, scratch + b * slot floats (see
 * below), and multiplies the weight by it with one sgemm. A 1x1 filter
 * needs no scratch (it may be NULL): the input rows are the matrix. out
 * overlaps neither in, weight nor scratch. */
typedef struct rill__op_conv2d_args {
    float *out;
    const float *in, *weight;
    float *scratch;
    size_t n, c, h, w, k, r, s;
    size_t band_rows;
} rill__op_conv2d_args;

/* Bands per image: ceil((h-r+1) / band_rows). */
static inline size_t rill__op_conv2d_bands(const rill__op_conv2d_args *p) {
    return (p->h - p->r + p->band_rows) / p->band_rows;
}

/* Rows of a in each row panel of a matmul's tiles (the last may be
 * shorter), and columns of b in each column panel: a whole number of
 * slices, so tiles never share a cache line of c. */
static inline size_t rill__op_matmul_panel_rows(size_t m, size_t row_panels) {
    return (m + row_panels - 1) / row_panels;
}
static inline size_t rill__op_matmul_panel_cols(size_t n, size_t col_panels) {
    size_t cols = (n + col_panels - 1) / col_panels;
    return (cols + RILL__OP_SLICE_ALIGN - 1) / RILL__OP_SLICE_ALIGN * RILL__OP_SLICE_ALIGN;
}

/* Floats in one block's im2col slot: c*r*s rows of band_rows*(w-s+1). */
static inline size_t rill__op_conv2d_slot_floats(const rill__op_conv2d_args *p) {
    return p->c * p->r * p->s * p->band_rows * (p->w - p->s + 1);
}

/* x[i] = mean + std * (the i-th standard normal of seed) for i < n; see
 * rill__op_randn_value. */
typedef struct rill__op_randn_args {
    float *x;
    size_t n;
    float mean, std;
    uint64_t seed;
} rill__op_randn_args;

/* out[i] = in[i] converted, for i < n: float to half (rill__op_cast_args
 * of cast_f32_f16) or half to float (cast_f16_f32). out and in do not
 * overlap. */
typedef struct rill__op_cast_args {
    void *out;
    const void *in;
    size_t n;
} rill__op_cast_args;

/* The f16 element-wise ops, on halves (uint16_t) for i < n: fill: out[i] =
 * value; add: out[i] = a[i] + value * b[i]; mul: out[i] = a[i] * b[i];
 * add_scalar: out[i] = a[i] + value; each computed in float and rounded
 * once. out may equal a or b. */
typedef struct rill__op_f16_args {
    uint16_t *out;
    const uint16_t *a, *b;
    float value;
    size_t n;
} rill__op_f16_args;
/* sum on halves, in the two phases of the f32 sum: phase one adds block
 * b's slice of a[0..n) (halves, converted to floats) in double precision
 * into partials[b], or, with partials NULL and a grid of one block, rounds
 * the total to a float and then to a half in out[0]; phase two (a grid of
 * one block) adds partials[0..count) in index order and stores that, so
 * rounded, in out[0]. */
typedef struct rill__op_sum_f16_args {
    const uint16_t *a;
    size_t n;
    double *partials;
    uint16_t *out;
} rill__op_sum_f16_args;
typedef struct rill__op_sum_final_f16_args {
    const double *partials;
    size_t count;
    uint16_t *out;
} rill__op_sum_final_f16_args;

/* matmul on halves: c[m,n] = a[m,k] b[k,n], all row-major halves, with
 * the tiles (and grid) of the f32 matmul. Each tile is computed in chunks
 * of at most RILL__OP_F16_MM_ROWS rows by RILL__OP_F16_MM_COLS columns:
 * for each chunk the matching pieces of a and b, RILL__OP_F16_MM_DEPTH
 * deep at a time, are converted into float buffers in block b's scratch
 * slot (scratch + b * rill__op_matmul_f16_slot_floats floats), multiplied
 * and accumulated in float by sgemm, and the float chunk of c is rounded
 * to halves once. c overlaps neither a, b nor scratch. */
#define RILL__OP_F16_MM_ROWS  ((size_t)64)
#define RILL__OP_F16_MM_COLS  ((size_t)256)
#define RILL__OP_F16_MM_DEPTH ((size_t)256)
typedef struct rill__op_matmul_f16_args {
    uint16_t *c;
    const uint16_t *a, *b;
    float *scratch;
    size_t m, k, n;
    size_t row_panels, col_panels;
} rill__op_matmul_f16_args;

static inline size_t rill__op_min_size(size_t x, size_t y) {
    return x < y ? x : y;
}

/* Floats in one block's slot: an a chunk (rows x depth), a b chunk
 * (depth x columns) and a c chunk (rows x columns). */
static inline size_t rill__op_matmul_f16_slot_floats(const rill__op_matmul_f16_args *p) {
    size_t rows =
        rill__op_min_size(rill__op_matmul_panel_rows(p->m, p->row_panels), RILL__OP_F16_MM_ROWS);
    size_t cols =
        rill__op_min_size(rill__op_matmul_panel_cols(p->n, p->col_panels), RILL__OP_F16_MM_COLS);
    size_t depth = rill__op_min_size(p->k, RILL__OP_F16_MM_DEPTH);
    return rows * depth + depth * cols + rows * cols;
}

/* conv2d on halves: out, in as halves with the shapes, items and bands of
 * rill__op_conv2d_args; weight holds the k*c*r*s weights already
 * converted to floats (by a cast launch before this one). Each item
 * converts its band's im2col matrix to floats in block b's slot, then
 * multiplies the weight by it into the float output band that follows it
 * in the slot (k rows of band_rows*(w-s+1)), and rounds that to halves
 * once. The slot holds rill__op_conv2d_f16_slot_floats floats; out
 * overlaps neither in, weight nor scratch. */
typedef struct rill__op_conv2d_f16_args {
    uint16_t *out;
    const uint16_t *in;
    const float *weight;
    float *scratch;
    size_t n, c, h, w, k, r, s;
    size_t band_rows;
} rill__op_conv2d_f16_args;

/* Floats in one block's slot: the im2col matrix of a band and its output,
 * (c*r*s + k) rows of band_rows*(w-s+1). */
static inline size_t rill__op_conv2d_f16_slot_floats(const rill__op_conv2d_f16_args *p) {
    return (p->c * p->r * p->s + p->k) * p->band_rows * (p->w - p->s + 1);
}

/* ---- the tensor ops (ops_tensor.c) ---- */

/* The most dimensions a strided op takes (rill.h's RILL_OP_MAX_DIMS). */
#define RILL__OP_MAX_DIMS 6

/* A strided op over every index i = (i[0], .., i[ndim-1]) of shape, whose
 * n = shape[0] * .. * shape[ndim-1] elements are taken in row-major order
 * (the last index fastest). The element of an operand at i is at
 * sum over d of i[d] * strides[d] floats from its pointer. copy_strided:
 * out at i = a at i (b unused); binary: out at i = a at i (op) b at i,
 * op a rill_binary_op. The op layer has merged what dimensions it could,
 * so ndim is at least 1 and no dimension is 1 unless ndim is 1; out's
 * layout never writes one element twice, and out overlaps an input only
 * when it equals it with the same strides. Block b takes the b-th slice
 * of the n indices. */
typedef struct rill__op_strided_args {
    float *out;
    const float *a, *b;
    size_t n;
    uint32_t ndim, op;
    size_t shape[RILL__OP_MAX_DIMS];
    size_t out_strides[RILL__OP_MAX_DIMS];
    size_t a_strides[RILL__OP_MAX_DIMS];
    size_t b_strides[RILL__OP_MAX_DIMS];
} rill__op_strided_args;

/* out[i] = f(a[i]) for i < n, f the rill_map_op op with its number alpha.
 * out may equal a. */
typedef struct rill__op_map_args {
    float *out;
    const float *a;
    float alpha;
    uint32_t op;
    size_t n;
} rill__op_map_args;

/* out[i] = (a[i] * (mask[i] != 0 ? 1 : 0)) * scale for i < n. out may
 * equal a. */
typedef struct rill__op_masked_scale_args {
    float *out;
    const float *a;
    const uint8_t *mask;
    float scale;
    size_t n;
} rill__op_masked_scale_args;

/* The element-wise ops over elements of any size, with strided operands
 * (strides in each operand's elements; out's are those of a contiguous
 * shape unless stated): compare, out[i] = a (op) b as a byte 1 or 0, a
 * and b of the rill_element_type type, op a rill_compare_op; where, out =
 * cond ? a : b, elements of size bytes copied as bits, cond bytes (true
 * when not 0). An a or b that is NULL stands for the number whose bits
 * (an element of the type, in the low bytes) are a_bits or b_bits. out
 * may equal a or b when that input is laid out as out. convert, out[i] =
 * a at i converted from the rill_element_type type to the one in op, by
 * rill_op_convert's rules. */
typedef struct rill__op_select_args {
    void *out;
    const void *a, *b;
    const uint8_t *cond;
    uint64_t a_bits, b_bits;
    size_t n;
    uint32_t ndim, op, type, size;
    size_t shape[RILL__OP_MAX_DIMS];
    size_t out_strides[RILL__OP_MAX_DIMS];
    size_t a_strides[RILL__OP_MAX_DIMS];
    size_t b_strides[RILL__OP_MAX_DIMS];
    size_t cond_strides[RILL__OP_MAX_DIMS];
} rill__op_select_args;

/* out[b, i, j] = in[b, i, j] inside the triangle (j - i <= diagonal, or
 * >= diagonal when upper is 1), else 0, over batch * rows contiguous rows
 * of cols elements of size bytes; block g of G takes the g-th of G runs of
 * whole rows. out may equal in. */
typedef struct rill__op_triangle_args {
    void *out;
    const void *in;
    size_t batch, rows, cols;
    int64_t diagonal;
    uint32_t size, upper;
} rill__op_triangle_args;

/* a is [outer, dim, inner] and out [outer, inner], contiguous: out[o, i]
 * = the rill_reduce_dim_op op over d < dim of a[o, d, i]; for MAX and MIN,
 * indices (when not NULL) gets the first d that gives it (a NaN wins, as
 * the first NaN). Sums add in double precision in an order fixed by dim
 * and inner. Block b
 * takes the b-th slice of the outer * inner outputs. */
typedef struct rill__op_reduce_dim_args {
    float *out;
    int64_t *indices;
    const float *a;
    size_t outer, dim, inner;
    uint32_t op;
} rill__op_reduce_dim_args;

/* out[i] = start + i * step for i < n, in int64_t modulo 2^64, converted
 * to the rill_element_type type by rill_op_convert's rules; block g of G
 * takes the g-th of G slices. */
typedef struct rill__op_arange_args {
    void *out;
    int64_t start, step;
    size_t n;
    uint32_t type;
} rill__op_arange_args;

/* a is bytes [outer, dim, inner] and out [outer, inner], contiguous:
 * out[o, i] = the rill_reduce_bool_op op over d < dim of a[o, d, i] != 0,
 * a byte for ANY and ALL, an int64_t for COUNT. Block b takes the b-th
 * slice of the outer * inner outputs. */
typedef struct rill__op_reduce_bool_args {
    void *out;
    const uint8_t *a;
    size_t outer, dim, inner;
    uint32_t op;
} rill__op_reduce_bool_args;

/* a and out are [outer, dim, inner], contiguous: out[o, :, i] = the
 * softmax (log_softmax when is_log) of a[o, :, i]: exp(x - max) / sum of
 * exp(x - max), the sum in double precision. out may equal a. Block b
 * takes the b-th slice of the outer * inner rows. */
typedef struct rill__op_softmax_args {
    float *out;
    const float *a;
    size_t outer, dim, inner;
    uint32_t is_log;
} rill__op_softmax_args;

/* x and out are [rows, n], contiguous: out[r, :] = (x[r, :] - mean_r)
 * rstd_r weight + bias, with mean_r and the variance of x[r, :] summed in
 * double precision and rstd_r = 1 / sqrt(variance + eps); weight and
 * bias NULL for 1 and 0. mean and rstd, when not NULL, receive [rows]
 * (mean_r and rstd_r as floats). out may equal x. Block b takes the b-th
 * slice of the rows. */
typedef struct rill__op_layer_norm_args {
    float *out, *mean, *rstd;
    const float *x, *weight, *bias;
    size_t rows, n;
    float eps;
} rill__op_layer_norm_args;

/* The layer norm's gradients, x and dy [rows, n], mean and rstd [rows],
 * with xhat = (x - mean_r) rstd_r and g = dy weight (dy where weight is
 * NULL): dx[r, :] = rstd_r (g - mean(g) - xhat mean(g xhat)), the means
 * over the row in double precision; dweight[j] = the sum over rows of
 * dy xhat, dbias[j] of dy, in double precision. An output that is NULL is
 * not computed. Blocks [0, row_blocks) take slices of the rows (dx), the
 * rest slices of the columns (dweight, dbias). */
typedef struct rill__op_layer_norm_backward_args {
    float *dx, *dweight, *dbias;
    const float *dy, *x, *mean, *rstd, *weight;
    size_t rows, n, row_blocks;
} rill__op_layer_norm_backward_args;

/* conv2d with strides, zero padding, dilation and groups: the channels
 * are cut into groups of cg = c / groups input and kg = k / groups output
 * channels, and out[n,k,oh,ow] = sum over the cg channels ci of k's group
 * g = k / kg and r, s of in[n, g*cg + ci, y*stride_h + r*dil_h - pad_h,
 * x*stride_w + s*dil_w - pad_w] * weight[k,ci,r,s] (weight [k, cg, r, s]),
 * where input indices outside [0,h) x [0,w) read 0; oh = (h + 2 pad_h -
 * dil_h (r-1) - 1) / stride_h + 1, ow likewise. The work items, bands and
 * scratch slots are those of rill__op_conv2d_args, with
 * rill__op_conv2d_ex_slot_floats floats per slot (scratch is never NULL):
 * an item's im2col matrix holds all c channels, and each group's rows of
 * it meet that group's filters in one sgemm. With images > 1 (band_rows
 * is then oh) an item is that many whole images (fewer at the end), their
 * im2col matrices side by side, each group's product written after them
 * in the slot and copied to out. out overlaps neither in, weight nor
 * scratch. */
typedef struct rill__op_conv2d_ex_args {
    float *out;
    const float *in, *weight;
    float *scratch;
    size_t n, c, h, w, k, r, s;
    size_t stride_h, stride_w, pad_h, pad_w;
    size_t oh, ow;
    size_t band_rows;
    size_t dil_h, dil_w, groups; /* each at least 1 */
    size_t images;               /* per item: 1, or more for small images */
} rill__op_conv2d_ex_args;

static inline size_t rill__op_conv2d_ex_bands(const rill__op_conv2d_ex_args *p) {
    return (p->oh + p->band_rows - 1) / p->band_rows;
}

/* Work items: (image, band), or groups of images. */
static inline size_t rill__op_conv2d_ex_items(const rill__op_conv2d_ex_args *p) {
    if (p->images > 1)
        return (p->n + p->images - 1) / p->images;
    return p->n * rill__op_conv2d_ex_bands(p);
}

/* Floats in one block's slot: c*r*s rows of images*band_rows*ow, and with
 * images > 1 k/groups more (a group's product). */
static inline size_t rill__op_conv2d_ex_slot_floats(const rill__op_conv2d_ex_args *p) {
    size_t rows = p->c * p->r * p->s + (p->images > 1 ? p->k / p->groups : 0);
    return rows * p->images * p->band_rows * p->ow;
}

/* 2-D pooling of planes images [h, w] into [oh, ow]: out[p, y, x] = the
 * max (op RILL_POOL_MAX) or the mean (RILL_POOL_AVG, zero padding counted,
 * a divisor of r*s) of in[p, y*stride_h + i - pad_h, x*stride_w + j -
 * pad_w] over i < r, j < s, indices outside the image left out of a max.
 * indices, for a max only and when not NULL, receives at [p, y, x] the
 * position yy*w + xx in its image of the element out took: the first
 * largest, or the last NaN when the window holds one. Block b takes the
 * b-th slice of the planes * oh output rows. out and indices overlap in
 * and each other nowhere. */
typedef struct rill__op_pool2d_args {
    float *out;
    int64_t *indices; /* NULL: none */
    const float *in;
    size_t planes, h, w, oh, ow, r, s;
    size_t stride_h, stride_w, pad_h, pad_w;
    uint32_t op;
} rill__op_pool2d_args;

/* out[i, :] = weight[indices[i], :] for i < n: weight [rows, dim] and out
 * [n, dim] contiguous, indices of index_bytes (4: int32_t, 8: int64_t).
 * An index outside [0, rows) fails the launch (rill__kernel_fail on a CPU
 * device, a trap on a CUDA one), its row of out left as it was. Block b
 * takes the b-th slice of the n rows of out. out overlaps weight and
 * indices nowhere. */
typedef struct rill__op_embedding_args {
    float *out;
    const float *weight;
    const void *indices;
    size_t index_bytes, n, rows, dim;
} rill__op_embedding_args;

/* grad_weight[r, :] = the sum in order of i of grad[i, :] over the i < n
 * with indices[i] == r; 0 for the rows no index names and for row
 * padding_idx (none when outside [0, rows)). Block b takes the b-th slice
 * of the rows of grad_weight: it zeroes them, then reads every index in
 * order of i and adds the rows of grad whose index falls in its slice, so
 * each element is added in one order whatever the grid. An index outside
 * [0, rows) fails the launch as in rill__op_embedding_args. grad_weight
 * overlaps grad and indices nowhere. */
typedef struct rill__op_embedding_backward_args {
    float *grad_weight;
    const float *grad;
    const void *indices;
    size_t index_bytes, n, rows, dim;
    int64_t padding_idx;
} rill__op_embedding_backward_args;

/* The negative log likelihood loss of input [n, classes, inner] at targets
 * [n, inner] of index_bytes (4: int32_t, 8: int64_t): row r = b*inner + e
 * (b < n, e < inner) has the loss 0 where targets[r] == ignore_index, else
 * -input[b, t, e] * w[t] (w[t] = weight[t], or 1 when weight is NULL).
 * reduction is a rill_loss_reduction: with RILL_LOSS_NONE, block b writes
 * the b-th slice of the n*inner losses into out and block 0 writes 0 into
 * total_weight (when not NULL); with SUM and MEAN one block adds the losses
 * as rill__op_nll_loss_reduce does into out[0] and their total weight into
 * total_weight (when not NULL). A target other than ignore_index outside
 * [0, classes) fails the launch as in rill__op_embedding_args. out and
 * total_weight overlap each other and the inputs nowhere. */
typedef struct rill__op_nll_loss_args {
    float *out;
    float *total_weight; /* NULL: none */
    const float *input;
    const void *targets;
    const float *weight; /* NULL: every class weighs 1 */
    size_t index_bytes, n, classes, inner;
    int64_t ignore_index;
    uint32_t reduction;
} rill__op_nll_loss_args;

/* The backward of rill__op_nll_loss_args for its input: grad_input [n,
 * classes, inner] is 0 but at (b, t, e), t = targets[b*inner + e], for
 * the rows not ignored: -w[t] * grad_out[b*inner + e] with RILL_LOSS_NONE,
 * else w[t] * -g, g = grad_out[0] (over total_weight[0] with
 * RILL_LOSS_MEAN). Block b writes the b-th slice of the rows. Targets are
 * checked as in the forward. grad_input overlaps the inputs nowhere. */
typedef struct rill__op_nll_loss_backward_args {
    float *grad_input;
    const float *grad_out;
    const float *total_weight; /* read with RILL_LOSS_MEAN only */
    const void *targets;
    const float *weight; /* NULL: every class weighs 1 */
    size_t index_bytes, n, classes, inner;
    int64_t ignore_index;
    uint32_t reduction;
} rill__op_nll_loss_backward_args;

/* The backward of conv2d with strides, padding, dilation and groups
 * (rill__op_conv2d_ex_args' geometry, its groups here conv_groups), two
 * ops on one struct: RILL__OP_CONV2D_BACKWARD_DATA_F32 writes
 * grad_in[n,c,h,w] = sum over the k of c's convolution group and the
 * output positions (y, x) of grad_out[n,k,y,x] * weight[k,c',r,s] (c' =
 * c's place in its group) where in[n,c,..] was read at (y, x);
 * RILL__OP_CONV2D_BACKWARD_FILTER_F32 writes grad_weight[k,c',r,s] = sum
 * over n, y, x of grad_out[n,k,y,x] * in[n, g*cg + c', y*stride_h +
 * r*dil_h - pad_h, x*stride_w + s*dil_w - pad_w] (0 outside the image).
 * Both overwrite. The input channels are cut into groups of ceil(c /
 * groups) (the last may be smaller); with conv_groups > 1 that size
 * divides c / conv_groups, so no channel group spans two convolution
 * groups. The data op's work items are (image, channel group):
 * each zeroes its planes of grad_in, then, band by band of band_rows
 * output rows, multiplies the group's rows of the transposed weight by
 * the band of grad_out into block b's slot and adds that column matrix
 * back into the planes (col2im). The filter op's items are channel
 * groups: each owns its columns of grad_weight and adds, image by image
 * and band by band, grad_out's band times the transposed im2col matrix of
 * its channels. With images > 1 (band_rows is then oh) either op takes
 * that many images at a time in one product, the data op's items being
 * (group of images, channel group): their planes of grad_out gathered side
 * by side after the column matrix in the slot, their column matrices side
 * by side in it. So no two blocks write the same element and each sum has one
 * order for a given grid. A slot holds
 * rill__op_conv2d_backward_slot_floats floats (scratch + b * that). The
 * written gradient overlaps no other buffer. */
typedef struct rill__op_conv2d_backward_args {
    float *grad_in;     /* the data op's output (NULL for the filter op) */
    float *grad_weight; /* the filter op's output (NULL for the data op) */
    const float *grad_out, *in, *weight;
    float *scratch;
    size_t n, c, h, w, k, r, s;
    size_t stride_h, stride_w, pad_h, pad_w;
    size_t oh, ow;
    size_t band_rows, groups;
    size_t images;                    /* per product: 1, or more for small images */
    size_t scratch_floats;            /* all of scratch: what a one-call body may use */
    size_t dil_h, dil_w, conv_groups; /* each at least 1 */
} rill__op_conv2d_backward_args;

/* Input channels per group: ceil(c / groups). */
static inline size_t
rill__op_conv2d_backward_group_channels(const rill__op_conv2d_backward_args *p) {
    return (p->c + p->groups - 1) / p->groups;
}

/* Floats in one block's slot: a group's column matrix, cpg*r*s rows of
 * images*band_rows*ow; with images > 1, then the k/conv_groups rows of
 * grad_out of as many columns. */
static inline size_t rill__op_conv2d_backward_slot_floats(const rill__op_conv2d_backward_args *p) {
    size_t cols = p->images * p->band_rows * p->ow;
    size_t rows = rill__op_conv2d_backward_group_channels(p) * p->r * p->s;
    if (p->images > 1)
        rows += p->k / p->conv_groups;
    return rows * cols;
}

/* The backward of a 2-D max pooling for its input: grad_in [planes, h, w]
 * = 0, then grad_in[p, indices[p, y, x]] += grad_out[p, y, x] over the
 * outputs of plane p in order of (y, x), so every element's sum has one
 * order. Block b takes the b-th slice of the planes. An index outside
 * [0, h*w) fails the launch as in rill__op_embedding_args (grad_in then
 * undefined). grad_in overlaps grad_out and indices nowhere. */
typedef struct rill__op_max_pool2d_backward_args {
    float *grad_in;
    const float *grad_out;
    const int64_t *indices;
    size_t planes, h, w, oh, ow;
} rill__op_max_pool2d_backward_args;

/* The backward of a 2-D average pooling (rill__op_pool2d_args' RILL_POOL_AVG)
 * for its input: grad_in[p, yy, xx] = the sum, in order of (y, x), of
 * grad_out[p, y, x] / (r*s) over the outputs whose window holds (yy, xx),
 * 0 where none does; each element is gathered, never scattered. Block b
 * takes the b-th slice of the planes * h rows of grad_in. grad_in
 * overlaps grad_out nowhere. */
typedef struct rill__op_avg_pool2d_backward_args {
    float *grad_in;
    const float *grad_out;
    size_t planes, h, w, oh, ow, r, s;
    size_t stride_h, stride_w, pad_h, pad_w;
} rill__op_avg_pool2d_backward_args;

/* 2-D pooling with dilation (max only), ceil mode's extra outputs and
 * average pooling's divisor rules, as PyTorch's max_pool2d and avg_pool2d
 * take them; oh and ow come from the op layer. A max takes in[p,
 * y*stride_h + i*dil_h - pad_h, x*stride_w + j*dil_w - pad_w] over i < r,
 * j < s inside the image, indices as in rill__op_pool2d_args. An average
 * sums its window as rill__op_avg_pool_span cuts it and divides by
 * divisor when it is not 0, else by the window's size inside the image
 * (exclude_pad) or its span with padding (not), 0 for an empty window.
 * Block b takes the b-th slice of the planes * oh output rows. out and
 * indices overlap in and each other nowhere. */
typedef struct rill__op_pool2d_ex_args {
    float *out;
    int64_t *indices; /* NULL: none */
    const float *in;
    size_t planes, h, w, oh, ow, r, s;
    size_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    size_t divisor;       /* 0: by exclude_pad's rule */
    uint32_t op;          /* rill_pool_op */
    uint32_t exclude_pad; /* 1: padding left out of an average's divisor */
} rill__op_pool2d_ex_args;

/* The backward of rill__op_pool2d_ex_args' average for its input:
 * grad_in[p, yy, xx] = the sum, in order of (y, x), of grad_out[p, y, x]
 * / (that output's divisor) over the outputs whose window holds (yy, xx),
 * 0 where none does; gathered, as rill__op_avg_pool2d_backward_args.
 * Block b takes the b-th slice of the planes * h rows of grad_in. */
typedef struct rill__op_avg_pool2d_backward_ex_args {
    float *grad_in;
    const float *grad_out;
    size_t planes, h, w, oh, ow, r, s;
    size_t stride_h, stride_w, pad_h, pad_w;
    size_t divisor;
    uint32_t exclude_pad;
} rill__op_avg_pool2d_backward_ex_args;

#endif
