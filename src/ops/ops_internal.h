/* SPDX-License-Identifier: MIT */
/* What the files of the built-in ops share (ops.c: kernels, checks, grids
 * and the element-wise ops; ops_nn.c: sum, matmul, conv2d and pooling;
 * ops_matmul_batched.c: the batched matmul; ops_conv_backward.c:
 * conv2d's backward; ops_pool_ex.c: pooling with ceil mode, dilation and
 * divisor rules; ops_tensor.c: strided copies,
 * broadcasting, maps and the ops along one dimension; ops_select.c:
 * compare, where and masked_fill over elements of any type). */
#ifndef RILL_OPS_OPS_INTERNAL_H
#define RILL_OPS_OPS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/op_args.h"
#include "core/handle.h"
#include "rill.h"

/* Below this many elements per block, launching another block costs more
 * than the work it takes over. */
#define ELEMENTS_PER_BLOCK_MIN ((size_t)1 << 15)
/* Below this many multiply-adds per block (about 10 us of sgemm on one
 * core), a matmul or conv2d uses fewer blocks. */
#define MACS_PER_BLOCK_MIN ((size_t)1 << 18)
/* Largest im2col scratch slot of a conv2d block: bands get fewer rows
 * rather than a bigger slot. */
#define CONV_SLOT_BYTES_MAX ((size_t)4 << 20)
/* Columns a conv2d product (forward or backward) should have at least:
 * with fewer (small images), a product per image packs the weight again
 * for each image, or reads and writes the weight gradient for a short
 * sum each time. */
#define CONV_PRODUCT_COLS_MIN ((size_t)512)

/* Whole images per conv2d product, at most limit of the n: 1 unless an
 * image of ohw output positions is short of CONV_PRODUCT_COLS_MIN; then
 * enough to reach that many, as a slot of rows floats per column allows
 * (CONV_SLOT_BYTES_MAX), in products of about equal size. */
size_t rill__op_conv_images(size_t n, size_t limit, size_t ohw, size_t rows);

/* The accesses an op declares: at most eight buffers. */
typedef struct access_list {
    rill_access items[8];
    size_t count;
} access_list;

/* The strided ops' shared checks (ops_tensor.c). Checks shape: ndim within
 * RILL_OP_MAX_DIMS, every dimension at least 1, and the element count n
 * times elem bytes representable. */
rill_status rill__op_check_shape(const char *fn, const size_t *shape, size_t ndim, size_t elem,
                                 size_t *n);
/* Checks a strided operand of elem-byte elements (unit names them, as
 * "floats"): its pointer, its strides, and that the bytes it reaches stay
 * in its allocation, which s's device reaches; *bytes gets that extent. */
rill_status rill__op_check_strided(const char *fn, rill_stream *s, const void *ptr,
                                   const char *name, const size_t *strides, const size_t *shape,
                                   size_t ndim, size_t elem, const char *unit, size_t *bytes);
/* The row-major strides of shape. */
void rill__op_contiguous_strides(const size_t *shape, size_t ndim, size_t *strides);
/* x and y step alike along every dimension of shape longer than 1. */
bool rill__op_same_strides(const size_t *x, const size_t *y, const size_t *shape, size_t ndim);
/* An output (contiguous strides contig, out_bytes) against an input of a
 * strided op: with may_equal, out may be the input laid out as out is (in
 * place); otherwise the two may not overlap. */
rill_status rill__op_check_out_against(const char *fn, const void *out, size_t out_bytes,
                                       const char *out_name, const void *in, size_t in_bytes,
                                       const char *in_name, const size_t *in_strides,
                                       const size_t *contig, const size_t *shape, size_t ndim,
                                       bool may_equal);
/* Drops shape's dimensions of 1 and merges a dimension into the next where
 * each of the count operands steps through both as through one
 * (strides[d] == strides[d+1] * shape[d+1]; a NULL strides[o] is an
 * operand not there, given strides 0); fills merged and dst[o] and returns
 * the dimensions left (at least 1). */
uint32_t rill__op_merge_dims(size_t *merged, size_t *const dst[], const size_t *const strides[],
                             size_t count, const size_t *shape, size_t ndim);

/* Checks the outer, dim and inner of an op along one dimension (each at
 * least 1, their product of doubles in memory); *count = their product. */
rill_status rill__op_check_dims3(const char *fn, size_t outer, size_t dim, size_t inner,
                                 size_t *count);
/* *bytes = elem * d0 * d1 * d2 * d3; false when it does not fit a size_t. */
bool rill__op_elem_bytes(size_t *bytes, size_t elem, size_t d0, size_t d1, size_t d2, size_t d3);
bool rill__op_overlaps(const void *p, size_t p_bytes, const void *q, size_t q_bytes);
/* Element-wise ops may write in place (out == in) but not into a shifted
 * copy of an input, which blocks running side by side would race on: an
 * out overlapping in without equalling it (bytes each) is refused. */
rill_status rill__op_check_in_place(const char *fn, const void *out, const void *in,
                                    const char *in_name, size_t bytes);
/* The checks every op makes, each RILL_ERROR_INVALID_ARGUMENT with a
 * sentence naming fn: the element count, an access inside its allocation
 * (and RILL_ERROR_DEVICE_MISMATCH for memory s's device cannot reach), a
 * non-NULL pointer, an output apart from an input. */
rill_status rill__op_check_count(const char *fn, size_t n, size_t *bytes);
rill_status rill__op_check_fits(const char *fn, rill_stream *s, const void *p, const char *name,
                                const char *shape, size_t bytes);
rill_status rill__op_check_pointer(const char *fn, const void *p, const char *name,
                                   const char *what);
rill_status rill__op_check_disjoint(const char *fn, const void *out, size_t out_bytes,
                                    const char *out_name, const void *in, size_t in_bytes,
                                    const char *in_name);
/* The stream that s names, in *stream, and the compute units of its
 * device. An op resolves s this once, as its last check: its commands,
 * allocations and frees all go to *stream (rill__kernel_launch,
 * rill__mem_alloc_async), so that a destroy of s on another thread
 * meanwhile finds the op either refused before it did anything or run
 * whole on the stream it found (core/calls.h keeps that stream whole
 * until the op returns). */
rill_status rill__op_stream(const char *fn, rill_stream *s, rill__stream **stream, size_t *units);
/* Blocks for work units at min per block, 1 to units. */
size_t rill__op_blocks_for(size_t work, size_t min, size_t units);
/* The grid of an op whose kernel loops over its grid: the device's choice
 * where it makes one (rill__device_base.op_grid_blocks), else
 * rill__op_blocks_for(work, min, units). */
size_t rill__op_grid(const rill__stream *stream, size_t work, size_t min, size_t units);
/* A strided op (copy, binary) over p->n elements on stream, already
 * checked: declares a and b read (b when not NULL) and out written, the
 * bytes each spans, and launches op id's kernel sized for a gather
 * (ops_tensor.c). */
rill_status rill__op_launch_strided(rill__stream *stream, size_t units, rill__op id,
                                    const rill__op_strided_args *p, size_t out_bytes,
                                    size_t a_bytes, size_t b_bytes);
/* Whether stream's device adds a matmul's bias in its matmul body
 * (rill__device_base.op_matmul_bias). */
bool rill__op_matmul_adds_bias(const rill__stream *stream);
/* The checks of a 2-D pooling's geometry, as rill_op_pool2d_f32 makes
 * them (ops_nn.c): h, w, r and sz at least 1, strides at least 1, padding
 * at most half the window, the window inside the padded image; *oh and
 * *ow get the output's size. */
rill_status rill__op_check_pool_window(const char *fn, size_t h, size_t w, size_t r, size_t sz,
                                       size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w,
                                       size_t *oh, size_t *ow);
/* Adds an access, merging a second one to the same pointer. */
void rill__op_access_add(access_list *list, const void *ptr, size_t bytes, rill_access_mode mode);
/* ops_nn.c's checks of a dimension (not 0, at most RILL__OP_MAX_DIM), of
 * a size that must fit (fits false: the sentence says that name's shape
 * does not fit in memory) and of a strided, padded window over [h, w]
 * (*oh and *ow get the output's size; half_window_pad caps the padding at
 * half the window). */
rill_status rill__op_check_dim(const char *fn, size_t value, const char *name, const char *what);
rill_status rill__op_check_size(const char *fn, bool fits, const char *name, const char *shape);
rill_status rill__op_check_window(const char *fn, size_t h, size_t w, size_t r, size_t sz,
                                  size_t stride_h, size_t stride_w, size_t pad_h, size_t pad_w,
                                  bool half_window_pad, size_t *oh, size_t *ow);
/* The checks of a rill_conv2d_params for c input channels, k filters and
 * an r x sz filter (ops_nn.c): not NULL, dilations and groups at least
 * 1, groups dividing c and k; *r_span and *s_span get the dilated filter's
 * extent, (r-1)*dilation + 1. The strides and padding are check_window's. */
rill_status rill__op_check_conv_params(const char *fn, size_t c, size_t k, size_t r, size_t sz,
                                       const rill_conv2d_params *params, size_t *r_span,
                                       size_t *s_span);
/* Op id's kernel, created at first use: an op that launches several
 * kernels gets them all before it allocates or launches anything. */
rill_status rill__op_kernel(rill__op id, rill_kernel **out);
/* Launches op id's kernel on stream over blocks blocks. */
rill_status rill__op_launch(rill__stream *stream, rill__op id, size_t blocks, const void *args,
                            size_t args_size, const access_list *accesses);
/* An element-wise op over n elements, at least per_block_min to a block:
 * launches op id's kernel on stream, marked RILL__CMD_SMALL when n is at
 * most RILL__OP_SMALL_ELEMENTS. */
#define RILL__OP_SMALL_ELEMENTS 1024u
rill_status rill__op_launch_n(rill__stream *stream, rill__op id, size_t n, size_t per_block_min,
                              size_t units, const void *args, size_t args_size,
                              const access_list *accesses);

#endif
