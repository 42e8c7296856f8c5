/* SPDX-License-Identifier: MIT */
/* The built-in embedding lookup and its backward for the weight: the
 * checks of the rows, the indices and the buffers, and the launches, on
 * what ops.c provides (ops_internal.h). The indices are device memory that
 * may not be written yet: their range is checked by the kernels, which
 * fail their launch on an index out of range. */
#include <stdbool.h>
#include <stdint.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* The checks the forward and the backward share: everything but the
 * output's pointer and size, which the caller checks; *rows_bytes the
 * bytes of rows x dim floats, *n_bytes of n x dim, *idx_bytes of the
 * indices. */
static rill_status check_embedding(const char *fn, rill_stream *s, const float *table,
                                   const char *table_name, const float *per_index,
                                   const char *per_index_name, const void *indices,
                                   size_t index_bytes, size_t n, size_t rows, size_t dim,
                                   size_t *rows_bytes, size_t *n_bytes, size_t *idx_bytes) {
    rill_status st;
    if ((st = rill__op_check_pointer(fn, table, table_name, "device memory of rows*dim floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, per_index, per_index_name,
                                     "device memory of n*dim floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, indices, "indices",
                                     "device memory of n integers of index_bytes")) != RILL_OK)
        return st;
    if (index_bytes != 4 && index_bytes != 8)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: index_bytes is %zu; pass 4 (int32_t indices) or 8 (int64_t)", fn,
                          index_bytes);
    if (n == 0 || rows == 0 || dim == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n is %zu, rows %zu and dim %zu; pass sizes of at least 1 (an "
                          "empty lookup needs no op)",
                          fn, n, rows, dim);
    if (!rill__op_elem_bytes(rows_bytes, sizeof(float), rows, dim, 1, 1) ||
        !rill__op_elem_bytes(n_bytes, sizeof(float), n, dim, 1, 1) ||
        !rill__op_elem_bytes(idx_bytes, index_bytes, n, 1, 1, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n %zu, rows %zu and dim %zu give more elements than fit in "
                          "memory; pass smaller sizes",
                          fn, n, rows, dim);
    if ((st = rill__op_check_fits(fn, s, table, table_name, "rows*dim floats", *rows_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, per_index, per_index_name, "n*dim floats", *n_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_fits(fn, s, indices, "indices", "n integers", *idx_bytes)) != RILL_OK)
        return st;
    return RILL_OK;
}

rill_status rill_op_embedding_f32(rill_stream *s, float *out, const float *weight,
                                  const void *indices, size_t index_bytes, size_t n, size_t rows,
                                  size_t dim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_embedding_f32";
    size_t weight_bytes = 0, out_bytes = 0, idx_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = check_embedding(fn, s, weight, "weight", out, "out", indices, index_bytes, n, rows,
                              dim, &weight_bytes, &out_bytes, &idx_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", weight, weight_bytes, "weight")) !=
            RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", indices, idx_bytes, "indices")) !=
            RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_embedding_args args = {out, weight, indices, index_bytes, n, rows, dim};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, weight, weight_bytes, RILL_READ);
    rill__op_access_add(&acc, indices, idx_bytes, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    size_t blocks = rill__op_grid(stream, n * dim, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_EMBEDDING_F32, blocks < n ? blocks : n, &args,
                           sizeof args, &acc);
}

rill_status rill_op_embedding_backward_f32(rill_stream *s, float *grad_weight, const float *grad,
                                           const void *indices, size_t index_bytes, size_t n,
                                           size_t rows, size_t dim, int64_t padding_idx) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_embedding_backward_f32";
    size_t gw_bytes = 0, grad_bytes = 0, idx_bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = check_embedding(fn, s, grad_weight, "grad_weight", grad, "grad", indices, index_bytes,
                              n, rows, dim, &gw_bytes, &grad_bytes, &idx_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, grad_weight, gw_bytes, "grad_weight", grad, grad_bytes,
                                      "grad")) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, grad_weight, gw_bytes, "grad_weight", indices, idx_bytes,
                                      "indices")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_embedding_backward_args args = {grad_weight, grad, indices, index_bytes,
                                             n,           rows, dim,     padding_idx};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, grad, grad_bytes, RILL_READ);
    rill__op_access_add(&acc, indices, idx_bytes, RILL_READ);
    rill__op_access_add(&acc, grad_weight, gw_bytes, RILL_WRITE);
    /* Every block reads all the indices: split only where the rows' sums
     * are worth it. */
    size_t work = (n > rows ? n : rows) * dim;
    size_t blocks = rill__op_grid(stream, work, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_EMBEDDING_BACKWARD_F32, blocks < rows ? blocks : rows,
                           &args, sizeof args, &acc);
}
