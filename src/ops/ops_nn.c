/* SPDX-License-Identifier: MIT */
/* The built-in sum, matmul and conv2d, on floats and on halves: the checks
 * an f32 op and its f16 twin share, their grids (tiles of the output for
 * the matrix products, bands of output rows for the convolution) and
 * their launches, on what ops.c provides (ops_internal.h); and the f32
 * conv2d with strides and padding and the 2-D pooling, which share the
 * convolution's checks and plan. */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "mem/memory.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* The f32 op and its f16 twin check the same things; their messages name
 * the element type the caller passed. */
#define ELEMS(half, text) ((half) ? text " halves" : text " floats")

/* One launch of op id whose blocks work in scratch memory: scratch_bytes
 * allocated on stream into *scratch (a field of args), declared
 * read-write, and freed in stream order after the launch. The kernel
 * comes first: a failure to create it leaves nothing allocated. */
static rill_status launch_with_scratch(rill__stream *stream, rill__op id, size_t blocks,
                                       const void *args, size_t args_size, void **scratch,
                                       size_t scratch_bytes, access_list *acc) {
    rill_kernel *kernel;
    rill_status st = rill__op_kernel(id, &kernel);
    if (st != RILL_OK || (st = rill__mem_alloc_async(stream, scratch_bytes, scratch)) != RILL_OK)
        return st;
    rill__op_access_add(acc, *scratch, scratch_bytes, RILL_READ_WRITE);
    st = rill__op_launch(stream, id, blocks, args, args_size, acc);
    rill_status free_st = rill__mem_free_async(*scratch, stream);
    return st != RILL_OK ? st : free_st;
}

/* ---- sum ---- */

/* One block sums everything and writes out[0] directly; several blocks
 * write double partial sums into a stream-ordered scratch buffer that a
 * one-block launch then adds up in block order. */
static rill_status sum(const char *fn, rill_stream *s, bool half, void *out, const void *a,
                       size_t n) {
    size_t elem = half ? sizeof(rill_half) : sizeof(float);
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out",
                                     half ? "device memory for one half"
                                          : "device memory for one float")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", ELEMS(half, "device memory of n"))) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &bytes)) != RILL_OK)
        return st;
    bytes = bytes / sizeof(float) * elem;
    if ((st = rill__op_check_fits(fn, s, a, "a", ELEMS(half, "n"), bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", half ? "one half" : "one float", elem)) !=
            RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    size_t blocks = rill__op_blocks_for(n, ELEMENTS_PER_BLOCK_MIN, units);
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, bytes, RILL_READ);
    if (blocks == 1) {
        rill__op_access_add(&acc, out, elem, RILL_WRITE);
        if (half) {
            rill__op_sum_f16_args args = {a, n, NULL, out};
            return rill__op_launch(stream, RILL__OP_SUM_PARTIAL_F16, 1, &args, sizeof args, &acc);
        }
        rill__op_sum_partial_args args = {a, n, NULL, out};
        return rill__op_launch(stream, RILL__OP_SUM_PARTIAL_F32, 1, &args, sizeof args, &acc);
    }

    /* Both kernels before the scratch memory: a failure to create the
     * second leaves nothing allocated and nothing launched. */
    rill_kernel *kernel;
    double *partials;
    size_t partial_bytes = blocks * sizeof(double);
    if ((st = rill__op_kernel(half ? RILL__OP_SUM_PARTIAL_F16 : RILL__OP_SUM_PARTIAL_F32,
                              &kernel)) != RILL_OK ||
        (st = rill__op_kernel(half ? RILL__OP_SUM_FINAL_F16 : RILL__OP_SUM_FINAL_F32, &kernel)) !=
            RILL_OK ||
        (st = rill__mem_alloc_async(stream, partial_bytes, (void **)&partials)) != RILL_OK)
        return st;
    rill__op_access_add(&acc, partials, partial_bytes, RILL_WRITE);
    if (half) {
        rill__op_sum_f16_args pargs = {a, n, partials, NULL};
        st = rill__op_launch(stream, RILL__OP_SUM_PARTIAL_F16, blocks, &pargs, sizeof pargs, &acc);
    } else {
        rill__op_sum_partial_args pargs = {a, n, partials, NULL};
        st = rill__op_launch(stream, RILL__OP_SUM_PARTIAL_F32, blocks, &pargs, sizeof pargs, &acc);
    }
    if (st == RILL_OK) {
        access_list facc = {.count = 0};
        rill__op_access_add(&facc, partials, partial_bytes, RILL_READ);
        rill__op_access_add(&facc, out, elem, RILL_WRITE);
        if (half) {
            rill__op_sum_final_f16_args fargs = {partials, blocks, out};
            st = rill__op_launch(stream, RILL__OP_SUM_FINAL_F16, 1, &fargs, sizeof fargs, &facc);
        } else {
            rill__op_sum_final_args fargs = {partials, blocks, out};
            st = rill__op_launch(stream, RILL__OP_SUM_FINAL_F32, 1, &fargs, sizeof fargs, &facc);
        }
    }
    rill_status free_st = rill__mem_free_async(partials, stream);
    return st != RILL_OK ? st : free_st;
}

rill_status rill_op_sum_f32(rill_stream *s, float *out, const float *a, size_t n) {
    RILL_CALL_SCOPE();
    return sum("rill_op_sum_f32", s, false, out, a, n);
}

rill_status rill_op_sum_f16(rill_stream *s, rill_half *out, const rill_half *a, size_t n) {
    RILL_CALL_SCOPE();
    return sum("rill_op_sum_f16", s, true, out, a, n);
}

/* ---- matmul ---- */

static rill_status check_dim(const char *fn, size_t value, const char *name, const char *what) {
    if (value == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT, "%s: %s is 0; pass %s (at least 1)", fn,
                          name, what);
    if (value > RILL__OP_MAX_DIM)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: %s is %zu, above %zu, the largest dimension the CPU sgemm "
                          "takes; split the op into smaller ones",
                          fn, name, value, RILL__OP_MAX_DIM);
    return RILL_OK;
}

/* shape names the product and its elements ("m*k floats"). */
static rill_status check_size(const char *fn, bool fits, const char *name, const char *shape) {
    if (!fits)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s has %s, more than fit in memory; pass smaller dimensions", fn,
                          name, shape);
    return RILL_OK;
}

/* Tiles: row panels of at least 32 rows (the CPU's AVX-512 sgemm tile)
 * while m allows, then column panels of at least 64 columns to reach the
 * block count when m is small. */
static void matmul_tiles(size_t m, size_t k, size_t n, size_t units, size_t *row_panels,
                         size_t *col_panels) {
    size_t macs = m * k;
    macs = n != 0 && macs > SIZE_MAX / n ? SIZE_MAX : macs * n;
    size_t blocks = rill__op_blocks_for(macs, MACS_PER_BLOCK_MIN, units);
    size_t rp = m / 32 > 0 ? m / 32 : 1;
    *row_panels = rp < blocks ? rp : blocks;
    size_t cp = n / 64 > 0 ? n / 64 : 1;
    size_t want = blocks / *row_panels;
    *col_panels = cp < want ? cp : want;
}

/* The checks of matmul on floats or halves; bytes[] gets the sizes of a,
 * b and c, and the accesses a read, b read, c write. */
static rill_status check_matmul(const char *fn, rill_stream *s, bool half, const void *c,
                                const void *a, const void *b, size_t m, size_t k, size_t n,
                                access_list *acc, rill__stream **stream, size_t *units) {
    size_t elem = half ? sizeof(rill_half) : sizeof(float);
    size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, c, "c", ELEMS(half, "device memory for m*n"))) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", ELEMS(half, "device memory of m*k"))) != RILL_OK ||
        (st = rill__op_check_pointer(fn, b, "b", ELEMS(half, "device memory of k*n"))) != RILL_OK ||
        (st = check_dim(fn, m, "m", "the number of rows of a and c")) != RILL_OK ||
        (st = check_dim(fn, k, "k", "the number of columns of a and rows of b")) != RILL_OK ||
        (st = check_dim(fn, n, "n", "the number of columns of b and c")) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&a_bytes, elem, m, k, 1, 1), "a",
                         ELEMS(half, "m*k"))) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&b_bytes, elem, k, n, 1, 1), "b",
                         ELEMS(half, "k*n"))) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&c_bytes, elem, m, n, 1, 1), "c",
                         ELEMS(half, "m*n"))) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, a, "a", ELEMS(half, "m*k"), a_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, b, "b", ELEMS(half, "k*n"), b_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, c, "c", ELEMS(half, "m*n"), c_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, c, c_bytes, "c", a, a_bytes, "a")) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, c, c_bytes, "c", b, b_bytes, "b")) != RILL_OK ||
        (st = rill__op_stream(fn, s, stream, units)) != RILL_OK)
        return st;
    rill__op_access_add(acc, a, a_bytes, RILL_READ);
    rill__op_access_add(acc, b, b_bytes, RILL_READ);
    rill__op_access_add(acc, c, c_bytes, RILL_WRITE);
    return RILL_OK;
}

/* A bias added to the product (rill_op_addmm_f32): its element (i, j) at
 * ptr[i*rs + j*cs]; ptr NULL for none. */
typedef struct matmul_bias {
    const float *ptr;
    size_t rs, cs;
} matmul_bias;

/* The checks of addmm's bias over [m, n] c of c_bytes; *bytes gets its
 * span. */
static rill_status check_bias(const char *fn, rill_stream *s, const matmul_bias *bias, size_t m,
                              size_t n, const float *c, size_t c_bytes, size_t *bytes) {
    rill_status st = rill__op_check_pointer(fn, bias->ptr, "bias",
                                            "device memory of the bias (bias_rs and bias_cs "
                                            "floats between rows and columns)");
    if (st != RILL_OK)
        return st;
    /* The span: from bias to element (m-1, n-1), plus one float. */
    size_t r = 0, q = 0, span = 0;
    bool fits = !__builtin_mul_overflow(m - 1, bias->rs, &r) &&
                !__builtin_mul_overflow(n - 1, bias->cs, &q) &&
                !__builtin_add_overflow(r, q, &span) && !__builtin_add_overflow(span, 1, &span) &&
                !__builtin_mul_overflow(span, sizeof(float), bytes);
    if ((st = rill__op_check_size(fn, fits, "bias", "(m-1)*bias_rs + (n-1)*bias_cs + 1 floats")) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, bias->ptr, "bias",
                                  "(m-1)*bias_rs + (n-1)*bias_cs + 1 floats", *bytes)) != RILL_OK)
        return st;
    return rill__op_check_disjoint(fn, c, c_bytes, "c", bias->ptr, *bytes, "bias");
}

/* The bias's add as its own kernel, on a device whose matmul body does
 * not add it: c = c + bias, broadcast by its strides. */
static rill_status launch_bias_add(rill__stream *stream, float *c, const matmul_bias *bias,
                                   size_t bias_bytes, size_t m, size_t n, size_t units) {
    rill__op_strided_args p = {
        .out = c, .a = c, .b = bias->ptr, .n = m * n, .ndim = 2, .op = RILL_BINARY_ADD};
    p.shape[0] = m, p.shape[1] = n;
    p.out_strides[0] = p.a_strides[0] = n, p.out_strides[1] = p.a_strides[1] = 1;
    p.b_strides[0] = bias->rs, p.b_strides[1] = bias->cs;
    size_t c_bytes = m * n * sizeof(float);
    return rill__op_launch_strided(stream, units, RILL__OP_BINARY_F32, &p, c_bytes, c_bytes,
                                   bias_bytes);
}

static rill_status matmul_f32(const char *fn, rill_stream *s, float *c, const float *a,
                              const float *b, size_t m, size_t k, size_t n, uint32_t trans,
                              const matmul_bias *bias) {
    size_t units = 0, bias_bytes = 0, c_bytes = 0;
    rill__stream *stream = NULL;
    access_list acc = {.count = 0};
    rill_status st;
    /* The bias's checks first (check_matmul resolves s last); c's shape
     * is check_matmul's to refuse. */
    if (bias != NULL && m > 0 && n > 0 &&
        rill__op_elem_bytes(&c_bytes, sizeof(float), m, n, 1, 1) &&
        (st = check_bias(fn, s, bias, m, n, c, c_bytes, &bias_bytes)) != RILL_OK)
        return st;
    if ((st = check_matmul(fn, s, false, c, a, b, m, k, n, &acc, &stream, &units)) != RILL_OK)
        return st;
    rill__op_matmul_args args = {c, a, b, m, k, n, 1, 1, trans, NULL, 0, 0};
    matmul_tiles(m, k, n, units, &args.row_panels, &args.col_panels);
    size_t blocks = args.row_panels * args.col_panels;
    if (bias == NULL)
        return rill__op_launch(stream, RILL__OP_MATMUL_F32, blocks, &args, sizeof args, &acc);
    if (rill__op_matmul_adds_bias(stream)) {
        args.bias = bias->ptr, args.bias_rs = bias->rs, args.bias_cs = bias->cs;
        rill__op_access_add(&acc, bias->ptr, bias_bytes, RILL_READ);
        return rill__op_launch(stream, RILL__OP_MATMUL_F32, blocks, &args, sizeof args, &acc);
    }
    rill_kernel *kernel;
    if ((st = rill__op_kernel(RILL__OP_BINARY_F32, &kernel)) != RILL_OK ||
        (st = rill__op_launch(stream, RILL__OP_MATMUL_F32, blocks, &args, sizeof args, &acc)) !=
            RILL_OK)
        return st;
    return launch_bias_add(stream, c, bias, bias_bytes, m, n, units);
}

rill_status rill_op_matmul_f32(rill_stream *s, float *c, const float *a, const float *b, size_t m,
                               size_t k, size_t n) {
    RILL_CALL_SCOPE();
    return matmul_f32("rill_op_matmul_f32", s, c, a, b, m, k, n, 0, NULL);
}

static rill_status check_matmul_flags(const char *fn, unsigned flags) {
    if ((flags & ~(RILL_MATMUL_A_T | RILL_MATMUL_B_T)) != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: flags is 0x%x; pass RILL_MATMUL_A_T, RILL_MATMUL_B_T, both or 0", fn,
                          flags);
    return RILL_OK;
}

rill_status rill_op_matmul_ex_f32(rill_stream *s, float *c, const float *a, const float *b,
                                  size_t m, size_t k, size_t n, unsigned flags) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_matmul_ex_f32";
    rill_status st = check_matmul_flags(fn, flags);
    if (st != RILL_OK)
        return st;
    return matmul_f32(fn, s, c, a, b, m, k, n, (uint32_t)flags, NULL);
}

rill_status rill_op_addmm_f32(rill_stream *s, float *c, const float *a, const float *b,
                              const float *bias, size_t bias_rs, size_t bias_cs, size_t m, size_t k,
                              size_t n, unsigned flags) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_addmm_f32";
    rill_status st = check_matmul_flags(fn, flags);
    if (st != RILL_OK)
        return st;
    matmul_bias bias_of = {bias, bias_rs, bias_cs};
    return matmul_f32(fn, s, c, a, b, m, k, n, (uint32_t)flags, &bias_of);
}

/* The tiles and grid of the f32 matmul; each block converts its chunks of
 * a and b to floats in its slot of a stream-ordered scratch buffer. */
rill_status rill_op_matmul_f16(rill_stream *s, rill_half *c, const rill_half *a, const rill_half *b,
                               size_t m, size_t k, size_t n) {
    RILL_CALL_SCOPE();
    size_t units = 0;
    rill__stream *stream = NULL;
    access_list acc = {.count = 0};
    rill_status st =
        check_matmul("rill_op_matmul_f16", s, true, c, a, b, m, k, n, &acc, &stream, &units);
    if (st != RILL_OK)
        return st;
    rill__op_matmul_f16_args args = {c, a, b, NULL, m, k, n, 1, 1};
    matmul_tiles(m, k, n, units, &args.row_panels, &args.col_panels);
    size_t blocks = args.row_panels * args.col_panels;
    size_t scratch_bytes = blocks * rill__op_matmul_f16_slot_floats(&args) * sizeof(float);
    return launch_with_scratch(stream, RILL__OP_MATMUL_F16, blocks, &args, sizeof args,
                               (void **)&args.scratch, scratch_bytes, &acc);
}

/* ---- conv2d ---- */

/* Work items are (image, band of output rows). Large inputs get about four
 * items per block for balance; bands shrink further when one band's slot
 * (slot_floats_per_row floats per output row) would exceed
 * CONV_SLOT_BYTES_MAX. Sets p->band_rows and returns the number of
 * blocks. */
static size_t conv_plan(rill__op_conv2d_args *p, size_t units, size_t slot_floats_per_row) {
    size_t oh = p->h - p->r + 1;
    size_t crs = p->c * p->r * p->s;
    size_t macs = p->n * p->k;
    size_t factors[3] = {crs, oh, p->w - p->s + 1};
    for (int i = 0; i < 3; i++)
        macs = macs > SIZE_MAX / factors[i] ? SIZE_MAX : macs * factors[i];
    size_t blocks = rill__op_blocks_for(macs, MACS_PER_BLOCK_MIN, units);

    size_t bands = blocks > 1 ? (4 * blocks + p->n - 1) / p->n : 1;
    if (bands > oh)
        bands = oh;
    size_t band_rows = (oh + bands - 1) / bands;
    size_t row_bytes = slot_floats_per_row * sizeof(float);
    if (band_rows * row_bytes > CONV_SLOT_BYTES_MAX)
        band_rows = CONV_SLOT_BYTES_MAX / row_bytes > 0 ? CONV_SLOT_BYTES_MAX / row_bytes : 1;
    p->band_rows = band_rows;

    size_t items = p->n * rill__op_conv2d_bands(p);
    return blocks < items ? blocks : items;
}

size_t rill__op_conv_images(size_t n, size_t limit, size_t ohw, size_t rows) {
    if (ohw >= CONV_PRODUCT_COLS_MIN)
        return 1;
    size_t images = (CONV_PRODUCT_COLS_MIN + ohw - 1) / ohw;
    size_t fit = CONV_SLOT_BYTES_MAX / (rows * ohw * sizeof(float));
    images = images < limit ? images : limit;
    images = images < fit ? images : fit;
    images = images < n ? images : n;
    if (images <= 1)
        return 1;
    size_t products = (n + images - 1) / images;
    return (n + products - 1) / products;
}

/* The checks of conv2d on floats or halves; adds the accesses in read,
 * weight read, out write, and sets *w_bytes to the weight's size. */
static rill_status check_conv2d(const char *fn, rill_stream *s, bool half, const void *out,
                                const void *in, const void *weight, const rill__op_conv2d_args *g,
                                access_list *acc, size_t *w_bytes, rill__stream **stream,
                                size_t *units) {
    size_t elem = half ? sizeof(rill_half) : sizeof(float);
    size_t in_bytes = 0, out_bytes = 0;
    rill_status st;
    if ((st = rill__op_check_pointer(
             fn, out, "out", ELEMS(half, "device memory for n*k*(h-r+1)*(w-sz+1)"))) != RILL_OK ||
        (st = rill__op_check_pointer(fn, in, "in", ELEMS(half, "device memory of n*c*h*w"))) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, weight, "weight",
                                     ELEMS(half, "device memory of k*c*r*sz"))) != RILL_OK ||
        (st = check_dim(fn, g->n, "n", "the number of images")) != RILL_OK ||
        (st = check_dim(fn, g->c, "c", "the number of input channels")) != RILL_OK ||
        (st = check_dim(fn, g->h, "h", "the input height")) != RILL_OK ||
        (st = check_dim(fn, g->w, "w", "the input width")) != RILL_OK ||
        (st = check_dim(fn, g->k, "k", "the number of filters (output channels)")) != RILL_OK ||
        (st = check_dim(fn, g->r, "r", "the filter height")) != RILL_OK ||
        (st = check_dim(fn, g->s, "sz", "the filter width")) != RILL_OK)
        return st;
    if (g->r > g->h)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the filter height r (%zu) exceeds the input height h (%zu); pass "
                          "a filter no taller than the input",
                          fn, g->r, g->h);
    if (g->s > g->w)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the filter width sz (%zu) exceeds the input width w (%zu); pass "
                          "a filter no wider than the input",
                          fn, g->s, g->w);
    size_t oh = g->h - g->r + 1, ow = g->w - g->s + 1;
    if ((st = check_size(fn, rill__op_elem_bytes(&in_bytes, elem, g->n, g->c, g->h, g->w), "in",
                         ELEMS(half, "n*c*h*w"))) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(w_bytes, elem, g->k, g->c, g->r, g->s), "weight",
                         ELEMS(half, "k*c*r*sz"))) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&out_bytes, elem, g->n, g->k, oh, ow), "out",
                         ELEMS(half, "n*k*(h-r+1)*(w-sz+1)"))) != RILL_OK)
        return st;
    /* The sgemm of one band is k x (rows*ow) x (c*r*sz) with leading
     * dimensions up to h*w; both products fit in a size_t because the
     * weight and the input do, and must fit sgemm's integer dimensions. */
    if ((st = check_dim(fn, g->c * g->r * g->s, "c*r*sz", "")) != RILL_OK ||
        (st = check_dim(fn, g->h * g->w, "h*w", "")) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, in, "in", ELEMS(half, "n*c*h*w"), in_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, weight, "weight", ELEMS(half, "k*c*r*sz"), *w_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", ELEMS(half, "n*k*(h-r+1)*(w-sz+1)"),
                                  out_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", weight, *w_bytes, "weight")) !=
            RILL_OK ||
        (st = rill__op_stream(fn, s, stream, units)) != RILL_OK)
        return st;
    rill__op_access_add(acc, in, in_bytes, RILL_READ);
    rill__op_access_add(acc, weight, *w_bytes, RILL_READ);
    rill__op_access_add(acc, out, out_bytes, RILL_WRITE);
    return RILL_OK;
}

rill_status rill_op_conv2d_f32(rill_stream *s, float *out, const float *in, const float *weight,
                               size_t n, size_t c, size_t h, size_t w, size_t k, size_t r,
                               size_t sz) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_conv2d_f32";
    rill__op_conv2d_args args = {out, in, weight, NULL, n, c, h, w, k, r, sz, 1};
    size_t w_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    access_list acc = {.count = 0};
    rill_status st =
        check_conv2d(fn, s, false, out, in, weight, &args, &acc, &w_bytes, &stream, &units);
    if (st != RILL_OK)
        return st;
    size_t blocks = conv_plan(&args, units, c * r * sz * (w - sz + 1));
    if (r == 1 && sz == 1)
        return rill__op_launch(stream, RILL__OP_CONV2D_F32, blocks, &args, sizeof args, &acc);

    size_t scratch_bytes = blocks * rill__op_conv2d_slot_floats(&args) * sizeof(float);
    return launch_with_scratch(stream, RILL__OP_CONV2D_F32, blocks, &args, sizeof args,
                               (void **)&args.scratch, scratch_bytes, &acc);
}

/* Two launches on one stream-ordered scratch buffer: the weight converted
 * to floats at its start (by the cast body), then the items and bands of
 * the f32 conv2d, whose slots, after the weight, also hold each band's
 * float output (so bands may be shorter than the f32 op's). */
rill_status rill_op_conv2d_f16(rill_stream *s, rill_half *out, const rill_half *in,
                               const rill_half *weight, size_t n, size_t c, size_t h, size_t w,
                               size_t k, size_t r, size_t sz) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_conv2d_f16";
    rill__op_conv2d_args plan = {NULL, NULL, NULL, NULL, n, c, h, w, k, r, sz, 1};
    size_t w_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    access_list acc = {.count = 0};
    rill_status st =
        check_conv2d(fn, s, true, out, in, weight, &plan, &acc, &w_bytes, &stream, &units);
    if (st != RILL_OK)
        return st;
    size_t blocks = conv_plan(&plan, units, (c * r * sz + k) * (w - sz + 1));
    rill__op_conv2d_f16_args args = {out, in, NULL, NULL, n, c, h, w, k, r, sz, plan.band_rows};
    size_t weights = k * c * r * sz;
    size_t scratch_bytes =
        (weights + blocks * rill__op_conv2d_f16_slot_floats(&args)) * sizeof(float);
    /* Both kernels before the scratch memory, as in sum. */
    rill_kernel *kernel;
    float *scratch;
    if ((st = rill__op_kernel(RILL__OP_CAST_F16_F32, &kernel)) != RILL_OK ||
        (st = rill__op_kernel(RILL__OP_CONV2D_F16, &kernel)) != RILL_OK ||
        (st = rill__mem_alloc_async(stream, scratch_bytes, (void **)&scratch)) != RILL_OK)
        return st;
    args.weight = scratch;
    args.scratch = scratch + weights;

    rill__op_cast_args cargs = {scratch, weight, weights};
    access_list cacc = {.count = 0};
    rill__op_access_add(&cacc, weight, w_bytes, RILL_READ);
    rill__op_access_add(&cacc, scratch, weights * sizeof(float), RILL_WRITE);
    st = rill__op_launch(stream, RILL__OP_CAST_F16_F32,
                         rill__op_blocks_for(weights, ELEMENTS_PER_BLOCK_MIN, units), &cargs,
                         sizeof cargs, &cacc);
    if (st == RILL_OK) {
        rill__op_access_add(&acc, scratch, scratch_bytes, RILL_READ_WRITE);
        st = rill__op_launch(stream, RILL__OP_CONV2D_F16, blocks, &args, sizeof args, &acc);
    }
    rill_status free_st = rill__mem_free_async(scratch, stream);
    return st != RILL_OK ? st : free_st;
}

/* ---- conv2d with strides and padding ---- */

/* The checks of the geometry of a strided, padded window over [h, w]:
 * strides at least 1 and the window inside the padded image; *oh and *ow
 * get the output's size. half_window_pad caps the padding at half the
 * window (pooling's rule). */
static rill_status check_window(const char *fn, size_t h, size_t w, size_t r, size_t sz,
                                size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w,
                                bool half_window_pad, size_t *oh, size_t *ow) {
    rill_status st;
    if ((st = check_dim(fn, stride_h, "stride_h", "the vertical stride")) != RILL_OK ||
        (st = check_dim(fn, stride_w, "stride_w", "the horizontal stride")) != RILL_OK)
        return st;
    if (pad_h > RILL__OP_MAX_DIM || pad_w > RILL__OP_MAX_DIM)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the padding (%zu, %zu) is larger than any image; pass padding "
                          "smaller than the window",
                          fn, pad_h, pad_w);
    if (half_window_pad && (pad_h > r / 2 || pad_w > sz / 2))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the padding (%zu, %zu) is more than half the window (%zu, %zu); "
                          "pass padding of at most half the window",
                          fn, pad_h, pad_w, r, sz);
    if (r > h + 2 * pad_h || sz > w + 2 * pad_w)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the window (%zu, %zu) is larger than the padded input (%zu, %zu); "
                          "pass a window that fits",
                          fn, r, sz, h + 2 * pad_h, w + 2 * pad_w);
    *oh = (h + 2 * pad_h - r) / stride_h + 1;
    *ow = (w + 2 * pad_w - sz) / stride_w + 1;
    return RILL_OK;
}

rill_status rill__op_check_dim(const char *fn, size_t value, const char *name, const char *what) {
    return check_dim(fn, value, name, what);
}

rill_status rill__op_check_size(const char *fn, bool fits, const char *name, const char *shape) {
    return check_size(fn, fits, name, shape);
}

rill_status rill__op_check_window(const char *fn, size_t h, size_t w, size_t r, size_t sz,
                                  size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w,
                                  bool half_window_pad, size_t *oh, size_t *ow) {
    return check_window(fn, h, w, r, sz, stride_h, stride_w, pad_h, pad_w, half_window_pad, oh, ow);
}

rill_status rill__op_check_pool_window(const char *fn, size_t h, size_t w, size_t r, size_t sz,
                                       size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w,
                                       size_t *oh, size_t *ow) {
    rill_status st;
    if ((st = check_dim(fn, h, "h", "the input height")) != RILL_OK ||
        (st = check_dim(fn, w, "w", "the input width")) != RILL_OK ||
        (st = check_dim(fn, r, "r", "the window height")) != RILL_OK ||
        (st = check_dim(fn, sz, "sz", "the window width")) != RILL_OK)
        return st;
    return check_window(fn, h, w, r, sz, stride_h, stride_w, pad_h, pad_w, true, oh, ow);
}

rill_status rill__op_check_conv_params(const char *fn, size_t c, size_t k, size_t r, size_t sz,
                                       const rill_conv2d_params *params, size_t *r_span,
                                       size_t *s_span) {
    rill_status st;
    if (params == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: params is NULL; pass a rill_conv2d_params with the strides, "
                          "padding, dilation and groups",
                          fn);
    if ((st = check_dim(fn, params->dilation_h, "dilation_h", "the vertical dilation")) !=
            RILL_OK ||
        (st = check_dim(fn, params->dilation_w, "dilation_w", "the horizontal dilation")) !=
            RILL_OK ||
        (st = check_dim(fn, params->groups, "groups", "the number of groups")) != RILL_OK)
        return st;
    if (c % params->groups != 0 || k % params->groups != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: groups is %zu, which divides neither c (%zu) nor k (%zu) evenly; "
                          "pass groups that divides both",
                          fn, params->groups, c, k);
    /* The dilated filter's extent: (r-1)*dilation + 1, each at most
     * RILL__OP_MAX_DIM, so the product fits a size_t. */
    *r_span = (r - 1) * params->dilation_h + 1;
    *s_span = (sz - 1) * params->dilation_w + 1;
    if ((st = check_dim(fn, *r_span, "(r-1)*dilation_h+1", "the dilated filter height")) !=
            RILL_OK ||
        (st = check_dim(fn, *s_span, "(sz-1)*dilation_w+1", "the dilated filter width")) != RILL_OK)
        return st;
    return RILL_OK;
}

/* rill_op_conv2d_ex_f32 and rill_op_conv2d_ex2_f32. */
static rill_status conv2d_ex(const char *fn, rill_stream *s, float *out, const float *in,
                             const float *weight, size_t n, size_t c, size_t h, size_t w, size_t k,
                             size_t r, size_t sz, const rill_conv2d_params *params) {
    size_t in_bytes = 0, w_bytes = 0, out_bytes = 0, units = 0, oh = 0, ow = 0;
    size_t r_span = 0, s_span = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n*k*oh*ow floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, in, "in", "device memory of n*c*h*w floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, weight, "weight",
                                     "device memory of k*(c/groups)*r*sz floats")) != RILL_OK ||
        (st = check_dim(fn, n, "n", "the number of images")) != RILL_OK ||
        (st = check_dim(fn, c, "c", "the number of input channels")) != RILL_OK ||
        (st = check_dim(fn, h, "h", "the input height")) != RILL_OK ||
        (st = check_dim(fn, w, "w", "the input width")) != RILL_OK ||
        (st = check_dim(fn, k, "k", "the number of filters (output channels)")) != RILL_OK ||
        (st = check_dim(fn, r, "r", "the filter height")) != RILL_OK ||
        (st = check_dim(fn, sz, "sz", "the filter width")) != RILL_OK ||
        (st = rill__op_check_conv_params(fn, c, k, r, sz, params, &r_span, &s_span)) != RILL_OK ||
        (st = check_window(fn, h, w, r_span, s_span, params->stride_h, params->stride_w,
                           params->pad_h, params->pad_w, false, &oh, &ow)) != RILL_OK)
        return st;
    size_t cg = c / params->groups;
    if ((st = check_size(fn, rill__op_elem_bytes(&in_bytes, sizeof(float), n, c, h, w), "in",
                         "n*c*h*w floats")) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&w_bytes, sizeof(float), k, cg, r, sz), "weight",
                         "k*(c/groups)*r*sz floats")) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&out_bytes, sizeof(float), n, k, oh, ow), "out",
                         "n*k*oh*ow floats")) != RILL_OK ||
        (st = check_dim(fn, c * r * sz, "c*r*sz", "")) != RILL_OK ||
        (st = check_dim(fn, oh * ow, "oh*ow", "")) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, in, "in", "n*c*h*w floats", in_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, weight, "weight", "k*(c/groups)*r*sz floats", w_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n*k*oh*ow floats", out_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", weight, w_bytes, "weight")) !=
            RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_conv2d_ex_args args = {.out = out,
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
                                    .band_rows = 1,
                                    .dil_h = params->dilation_h,
                                    .dil_w = params->dilation_w,
                                    .groups = params->groups};
    /* The plan of the unpadded conv2d, on the output's rows. */
    rill__op_conv2d_args plan = {NULL, NULL, NULL, NULL, n, c, oh, ow, k, 1, 1, 1};
    plan.c = cg * r * sz; /* its multiply-adds: k * cg*r*sz * oh * ow per image */
    size_t blocks = conv_plan(&plan, units, c * r * sz * ow);
    args.band_rows = plan.band_rows;
    args.images = 1;
    if (args.band_rows == oh) { /* as many items as blocks */
        args.images = rill__op_conv_images(n, n / blocks, oh * ow, c * r * sz + k / params->groups);
        blocks =
            blocks < rill__op_conv2d_ex_items(&args) ? blocks : rill__op_conv2d_ex_items(&args);
    }
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, in, in_bytes, RILL_READ);
    rill__op_access_add(&acc, weight, w_bytes, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    size_t scratch_bytes = blocks * rill__op_conv2d_ex_slot_floats(&args) * sizeof(float);
    return launch_with_scratch(stream, RILL__OP_CONV2D_EX_F32, blocks, &args, sizeof args,
                               (void **)&args.scratch, scratch_bytes, &acc);
}

rill_status rill_op_conv2d_ex_f32(rill_stream *s, float *out, const float *in, const float *weight,
                                  size_t n, size_t c, size_t h, size_t w, size_t k, size_t r,
                                  size_t sz, size_t stride_h, size_t stride_w, size_t pad_h,
                                  size_t pad_w) {
    RILL_CALL_SCOPE();
    rill_conv2d_params params = {stride_h, stride_w, pad_h, pad_w, 1, 1, 1};
    return conv2d_ex("rill_op_conv2d_ex_f32", s, out, in, weight, n, c, h, w, k, r, sz, &params);
}

rill_status rill_op_conv2d_ex2_f32(rill_stream *s, float *out, const float *in, const float *weight,
                                   size_t n, size_t c, size_t h, size_t w, size_t k, size_t r,
                                   size_t sz, const rill_conv2d_params *params) {
    RILL_CALL_SCOPE();
    return conv2d_ex("rill_op_conv2d_ex2_f32", s, out, in, weight, n, c, h, w, k, r, sz, params);
}

/* ---- pooling ---- */

/* rill_op_pool2d_f32 and rill_op_max_pool2d_f32: indices NULL for the
 * first. */
static rill_status pool2d(const char *fn, rill_stream *s, rill_pool_op op, float *out,
                          int64_t *indices, const float *in, size_t planes, size_t h, size_t w,
                          size_t r, size_t sz, size_t stride_h, size_t stride_w, size_t pad_h,
                          size_t pad_w) {
    if (op != RILL_POOL_MAX && op != RILL_POOL_AVG)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_pool_op; pass RILL_POOL_MAX or RILL_POOL_AVG",
                          fn, (int)op);
    size_t in_bytes = 0, out_bytes = 0, idx_bytes = 0, units = 0, oh = 0, ow = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for planes*oh*ow floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, in, "in", "device memory of planes*h*w floats")) !=
            RILL_OK ||
        (st = check_dim(fn, planes, "planes", "the number of images (n*c)")) != RILL_OK ||
        (st = check_dim(fn, h, "h", "the input height")) != RILL_OK ||
        (st = check_dim(fn, w, "w", "the input width")) != RILL_OK ||
        (st = check_dim(fn, r, "r", "the window height")) != RILL_OK ||
        (st = check_dim(fn, sz, "sz", "the window width")) != RILL_OK ||
        (st = check_window(fn, h, w, r, sz, stride_h, stride_w, pad_h, pad_w, true, &oh, &ow)) !=
            RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&in_bytes, sizeof(float), planes, h, w, 1), "in",
                         "planes*h*w floats")) != RILL_OK ||
        (st = check_size(fn, rill__op_elem_bytes(&out_bytes, sizeof(float), planes, oh, ow, 1),
                         "out", "planes*oh*ow floats")) != RILL_OK ||
        (indices != NULL &&
         (st = check_size(fn, rill__op_elem_bytes(&idx_bytes, sizeof(int64_t), planes, oh, ow, 1),
                          "indices", "planes*oh*ow int64s")) != RILL_OK) ||
        (st = rill__op_check_fits(fn, s, in, "in", "planes*h*w floats", in_bytes)) != RILL_OK ||
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
    rill__op_pool2d_args args = {out, indices, in,       planes,   h,     w,     oh,          ow,
                                 r,   sz,      stride_h, stride_w, pad_h, pad_w, (uint32_t)op};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, in, in_bytes, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    if (indices != NULL)
        rill__op_access_add(&acc, indices, idx_bytes, RILL_WRITE);
    size_t rows = planes * oh;
    size_t blocks = rill__op_blocks_for(planes * oh * ow * r * sz, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_POOL2D_F32, blocks < rows ? blocks : rows, &args,
                           sizeof args, &acc);
}

rill_status rill_op_pool2d_f32(rill_stream *s, rill_pool_op op, float *out, const float *in,
                               size_t planes, size_t h, size_t w, size_t r, size_t sz,
                               size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w) {
    RILL_CALL_SCOPE();
    return pool2d("rill_op_pool2d_f32", s, op, out, NULL, in, planes, h, w, r, sz, stride_h,
                  stride_w, pad_h, pad_w);
}

rill_status rill_op_max_pool2d_f32(rill_stream *s, float *out, int64_t *indices, const float *in,
                                   size_t planes, size_t h, size_t w, size_t r, size_t sz,
                                   size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_max_pool2d_f32";
    if (indices == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: indices is NULL; pass device memory for planes*oh*ow int64s, or "
                          "call rill_op_pool2d_f32 for the maxima alone",
                          fn);
    return pool2d(fn, s, RILL_POOL_MAX, out, indices, in, planes, h, w, r, sz, stride_h, stride_w,
                  pad_h, pad_w);
}
