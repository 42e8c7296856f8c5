/* SPDX-License-Identifier: MIT */
/* The batched matrix product rill_op_matmul_batched_f32: its checks (each
 * operand a strided batch of matrices, declared as the span it reaches),
 * and its grid, items of (product, panel of rows) shared among the
 * blocks, on what ops.c provides (ops_internal.h). Layer: ops. */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* *floats = (count-1)*stride + (rows-1)*ld + cols, the floats from a
 * batch's first element to its last, inclusive; false when it does not
 * fit a size_t (counted in bytes). */
static bool span_floats(size_t *floats, size_t count, size_t stride, size_t rows, size_t ld,
                        size_t cols) {
    size_t batch_part = 0, row_part = 0;
    if (stride != 0 && count - 1 > SIZE_MAX / stride)
        return false;
    batch_part = (count - 1) * stride;
    if (rows - 1 > SIZE_MAX / ld)
        return false;
    row_part = (rows - 1) * ld;
    if (batch_part > SIZE_MAX - row_part || batch_part + row_part > SIZE_MAX - cols)
        return false;
    *floats = batch_part + row_part + cols;
    return *floats <= SIZE_MAX / sizeof(float);
}

/* The checks of one operand: its row stride against its stored row's
 * length, and its span; *bytes gets the span's size. */
static rill_status check_operand(const char *fn, rill_stream *s, const void *p, const char *name,
                                 size_t count, size_t stride, size_t rows, size_t cols, size_t ld,
                                 const char *ld_name, const char *cols_name, size_t *bytes) {
    rill_status st;
    if ((st = rill__op_check_dim(fn, ld, ld_name, "the floats between stored rows")) != RILL_OK)
        return st;
    if (ld < cols)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is %zu, below %zu (%s), the length of the rows of %s as "
                          "stored; pass a row stride of at least %zu",
                          fn, ld_name, ld, cols, cols_name, name, cols);
    size_t floats = 0;
    if ((st = rill__op_check_size(fn, span_floats(&floats, count, stride, rows, ld, cols), name,
                                  "a span of floats")) != RILL_OK)
        return st;
    *bytes = floats * sizeof(float);
    return rill__op_check_fits(fn, s, p, name, "its batch's span of floats", *bytes);
}

/* Row panels per product and blocks: the matmul's blocks for the whole
 * work, shared first among the products, then among panels of at least 16
 * rows of each. */
static size_t batched_grid(size_t batch, size_t m, size_t k, size_t n, size_t units,
                           size_t *row_panels) {
    size_t macs = batch;
    size_t factors[3] = {m, k, n};
    for (int i = 0; i < 3; i++)
        macs = macs > SIZE_MAX / factors[i] ? SIZE_MAX : macs * factors[i];
    size_t blocks = rill__op_blocks_for(macs, MACS_PER_BLOCK_MIN, units);
    size_t want = (blocks + batch - 1) / batch;
    size_t most = m / 16 > 0 ? m / 16 : 1;
    *row_panels = want < most ? want : most;
    size_t items = batch * *row_panels;
    return blocks < items ? blocks : items;
}

rill_status rill_op_matmul_batched_f32(rill_stream *s, float *c, const float *a, const float *b,
                                       size_t m, size_t k, size_t n, unsigned flags,
                                       const rill_matmul_batch *batch) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_matmul_batched_f32";
    rill_status st;
    if ((flags & ~(RILL_MATMUL_A_T | RILL_MATMUL_B_T)) != 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: flags is 0x%x; pass RILL_MATMUL_A_T, RILL_MATMUL_B_T, both or 0", fn,
                          flags);
    if (batch == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: batch is NULL; pass the count, row strides and batch strides "
                          "of the products",
                          fn);
    bool at = (flags & RILL_MATMUL_A_T) != 0, bt = (flags & RILL_MATMUL_B_T) != 0;
    size_t count = batch->count, a_bytes = 0, b_bytes = 0, c_bytes = 0, units = 0;
    if ((st = rill__op_check_pointer(fn, c, "c", "device memory for count*m*n floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of the batch of a")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, b, "b", "device memory of the batch of b")) != RILL_OK ||
        (st = rill__op_check_dim(fn, count, "batch->count", "the number of products")) != RILL_OK ||
        (st = rill__op_check_dim(fn, m, "m", "the number of rows of a and c")) != RILL_OK ||
        (st = rill__op_check_dim(fn, k, "k", "the number of columns of a and rows of b")) !=
            RILL_OK ||
        (st = rill__op_check_dim(fn, n, "n", "the number of columns of b and c")) != RILL_OK ||
        (st = rill__op_check_size(fn, rill__op_elem_bytes(&c_bytes, sizeof(float), count, m, n, 1),
                                  "c", "count*m*n floats")) != RILL_OK ||
        (st = check_operand(fn, s, a, "a", count, batch->stride_a, at ? k : m, at ? m : k,
                            batch->lda, "batch->lda", at ? "m" : "k", &a_bytes)) != RILL_OK ||
        (st = check_operand(fn, s, b, "b", count, batch->stride_b, bt ? n : k, bt ? k : n,
                            batch->ldb, "batch->ldb", bt ? "k" : "n", &b_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, c, "c", "count*m*n floats", c_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, c, c_bytes, "c", a, a_bytes, "a")) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, c, c_bytes, "c", b, b_bytes, "b")) != RILL_OK)
        return st;
    rill__stream *stream = NULL;
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, a_bytes, RILL_READ);
    rill__op_access_add(&acc, b, b_bytes, RILL_READ);
    rill__op_access_add(&acc, c, c_bytes, RILL_WRITE);
    size_t row_panels = 1;
    size_t blocks = batched_grid(count, m, k, n, units, &row_panels);
    /* A single product's strides are never used: 0 keeps them in the
     * range of the library's signed strides. */
    rill__op_matmul_batched_args args = {
        .c = c,
        .a = a,
        .b = b,
        .batch = count,
        .m = m,
        .k = k,
        .n = n,
        .stride_a = count > 1 ? batch->stride_a : 0,
        .stride_b = count > 1 ? batch->stride_b : 0,
        .lda = (uint32_t)batch->lda,
        .ldb = (uint32_t)batch->ldb,
        .row_panels = (uint32_t)row_panels,
        .trans = (uint32_t)flags,
    };
    return rill__op_launch(stream, RILL__OP_MATMUL_BATCHED_F32, blocks, &args, sizeof args, &acc);
}
