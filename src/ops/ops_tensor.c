/* SPDX-License-Identifier: MIT */
/* The tensor ops on strided and contiguous float32 memory: copy_strided
 * and binary (strided operands, which make views and broadcasting work),
 * map (element-wise functions), reduce_dim and softmax (along one
 * dimension). Each checks every argument before it does anything, merges
 * what dimensions it can (so that the bodies' inner loops run long), and
 * launches the op's kernel with the byte ranges its operands reach as
 * accesses. Layer: ops, on what ops.c provides (ops_internal.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

_Static_assert(RILL__OP_MAX_DIMS == RILL_OP_MAX_DIMS, "the header's and the bodies' limit");

/* ---- strided operands ---- */

rill_status rill__op_check_shape(const char *fn, const size_t *shape, size_t ndim, size_t elem,
                                 size_t *n) {
    if (ndim > RILL__OP_MAX_DIMS)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: ndim is %zu, above RILL_OP_MAX_DIMS (%d); merge dimensions or "
                          "split the op",
                          fn, ndim, RILL__OP_MAX_DIMS);
    if (ndim > 0 && shape == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: shape is NULL with ndim %zu; pass ndim sizes", fn, ndim);
    size_t total = 1;
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: shape[%zu] is 0; every dimension must be at least 1 (an "
                              "empty tensor needs no op)",
                              fn, d);
        if (total > SIZE_MAX / elem / shape[d])
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: the shape's elements do not fit in memory; pass smaller "
                              "dimensions",
                              fn);
        total *= shape[d];
    }
    *n = total;
    return RILL_OK;
}

/* The bytes an operand of elem-byte elements reaches from its pointer:
 * (1 + sum of (shape[d] - 1) * strides[d]) elements; false when that does
 * not fit a size_t. */
static bool extent_bytes(const size_t *shape, const size_t *strides, size_t ndim, size_t elem,
                         size_t *bytes) {
    size_t last = 0;
    for (size_t d = 0; d < ndim; d++) {
        size_t steps = shape[d] - 1;
        if (steps != 0 && strides[d] > (SIZE_MAX - last) / steps)
            return false;
        last += steps * strides[d];
    }
    if (last >= SIZE_MAX / elem)
        return false;
    *bytes = (last + 1) * elem;
    return true;
}

rill_status rill__op_check_strided(const char *fn, rill_stream *s, const void *ptr,
                                   const char *name, const size_t *strides, const size_t *shape,
                                   size_t ndim, size_t elem, const char *unit, size_t *bytes) {
    char what[48];
    snprintf(what, sizeof what, "device memory of %s", unit);
    rill_status st = rill__op_check_pointer(fn, ptr, name, what);
    if (st != RILL_OK)
        return st;
    if (ndim > 0 && strides == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the strides of %s are NULL with ndim %zu; pass ndim strides "
                          "(in %s)",
                          fn, name, ndim, unit);
    if (!extent_bytes(shape, strides, ndim, elem, bytes))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: the strides of %s reach past the end of memory; pass strides "
                          "in %s",
                          fn, name, unit);
    return rill__op_check_fits(fn, s, ptr, name, "the shape and strides", *bytes);
}

/* Checks a float operand's pointer and strides, and that its extent stays
 * in its allocation, which s's device reaches; *bytes gets the extent. */
static rill_status check_operand(const char *fn, rill_stream *s, const float *p, const char *name,
                                 const size_t *strides, const size_t *shape, size_t ndim,
                                 size_t *bytes) {
    return rill__op_check_strided(fn, s, p, name, strides, shape, ndim, sizeof(float), "floats",
                                  bytes);
}

static rill_status check_shape(const char *fn, const size_t *shape, size_t ndim, size_t *n) {
    return rill__op_check_shape(fn, shape, ndim, sizeof(float), n);
}

/* Whether a layout reaches any element twice: sorted by stride, each
 * dimension of more than one element must step past everything the
 * smaller strides reach (the rule torch applies to outputs). */
static bool self_overlaps(const size_t *shape, const size_t *strides, size_t ndim) {
    size_t order[RILL__OP_MAX_DIMS], count = 0;
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue;
        size_t j = count++;
        while (j > 0 && strides[order[j - 1]] > strides[d]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = d;
    }
    size_t reach = 0; /* the largest offset the smaller dimensions reach */
    for (size_t i = 0; i < count; i++) {
        size_t d = order[i];
        if (strides[d] <= reach)
            return true;
        reach += (shape[d] - 1) * strides[d];
    }
    return false;
}

void rill__op_contiguous_strides(const size_t *shape, size_t ndim, size_t *strides) {
    size_t step = 1;
    for (size_t d = ndim; d-- > 0;) {
        strides[d] = step;
        step *= shape[d];
    }
}

bool rill__op_same_strides(const size_t *x, const size_t *y, const size_t *shape, size_t ndim) {
    for (size_t d = 0; d < ndim; d++)
        if (shape[d] > 1 && x[d] != y[d])
            return false;
    return true;
}

uint32_t rill__op_merge_dims(size_t *merged, size_t *const dst[], const size_t *const strides[],
                             size_t count, const size_t *shape, size_t ndim) {
    size_t m = 0;
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue;
        bool merge = m > 0;
        for (size_t o = 0; o < count && merge; o++)
            if (strides[o] != NULL && dst[o][m - 1] != strides[o][d] * shape[d])
                merge = false;
        if (merge) {
            merged[m - 1] *= shape[d];
            for (size_t o = 0; o < count; o++)
                if (strides[o] != NULL)
                    dst[o][m - 1] = strides[o][d];
            continue;
        }
        merged[m] = shape[d];
        for (size_t o = 0; o < count; o++)
            dst[o][m] = strides[o] != NULL ? strides[o][d] : 0;
        m++;
    }
    if (m == 0) {
        merged[0] = 1;
        for (size_t o = 0; o < count; o++)
            dst[o][0] = 0;
        m = 1;
    }
    return (uint32_t)m;
}

/* Fills p's shape and operands' strides from shape and the strides of
 * out, a and b (NULL: an operand that is not there). */
static void merge_dims(rill__op_strided_args *p, const size_t *shape, size_t ndim,
                       const size_t *const strides[3]) {
    size_t *const dst[3] = {p->out_strides, p->a_strides, p->b_strides};
    p->ndim = rill__op_merge_dims(p->shape, dst, strides, 3, shape, ndim);
}

static rill_status launch_strided(const char *fn, rill_stream *s, rill__op id,
                                  rill__op_strided_args *p, size_t out_bytes, size_t a_bytes,
                                  size_t b_bytes) {
    size_t units = 0;
    rill__stream *stream = NULL;
    rill_status st = rill__op_stream(fn, s, &stream, &units);
    if (st != RILL_OK)
        return st;
    return rill__op_launch_strided(stream, units, id, p, out_bytes, a_bytes, b_bytes);
}

rill_status rill__op_launch_strided(rill__stream *stream, size_t units, rill__op id,
                                    const rill__op_strided_args *p, size_t out_bytes,
                                    size_t a_bytes, size_t b_bytes) {
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, p->a, a_bytes, RILL_READ);
    if (p->b != NULL)
        rill__op_access_add(&acc, p->b, b_bytes, RILL_READ);
    rill__op_access_add(&acc, p->out, out_bytes, RILL_WRITE);
    /* A gather costs a few times a contiguous add per element. */
    return rill__op_launch_n(stream, id, p->n, ELEMENTS_PER_BLOCK_MIN / 4, units, p, sizeof *p,
                             &acc);
}

rill_status rill_op_copy_strided_f32(rill_stream *s, float *out, const size_t *out_strides,
                                     const float *in, const size_t *in_strides, const size_t *shape,
                                     size_t ndim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_copy_strided_f32";
    size_t n = 0, out_bytes = 0, in_bytes = 0;
    rill_status st;
    if ((st = check_shape(fn, shape, ndim, &n)) != RILL_OK ||
        (st = check_operand(fn, s, out, "out", out_strides, shape, ndim, &out_bytes)) != RILL_OK ||
        (st = check_operand(fn, s, in, "in", in_strides, shape, ndim, &in_bytes)) != RILL_OK)
        return st;
    if (self_overlaps(shape, out_strides, ndim))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: out's strides reach some element more than once; pass strides "
                          "of a layout that writes each element once",
                          fn);
    if ((st = rill__op_check_disjoint(fn, out, out_bytes, "out", in, in_bytes, "in")) != RILL_OK)
        return st;
    rill__op_strided_args p = {.out = out, .a = in, .b = NULL, .n = n, .op = 0};
    const size_t *strides[3] = {out_strides, in_strides, NULL};
    merge_dims(&p, shape, ndim, strides);
    return launch_strided(fn, s, RILL__OP_COPY_STRIDED_F32, &p, out_bytes, in_bytes, 0);
}

rill_status rill__op_check_out_against(const char *fn, const void *out, size_t out_bytes,
                                       const char *out_name, const void *in, size_t in_bytes,
                                       const char *in_name, const size_t *in_strides,
                                       const size_t *contig, const size_t *shape, size_t ndim,
                                       bool may_equal) {
    if (may_equal && out == in && rill__op_same_strides(in_strides, contig, shape, ndim))
        return RILL_OK;
    if (!rill__op_overlaps(out, out_bytes, in, in_bytes))
        return RILL_OK;
    if (may_equal)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s overlaps %s without being it with contiguous strides; pass %s "
                          "== %s (contiguous) to compute in place, or a separate buffer",
                          fn, out_name, in_name, out_name, in_name);
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: %s overlaps %s; pass an %s that overlaps none of the inputs", fn,
                      out_name, in_name, out_name);
}

rill_status rill_op_binary_f32(rill_stream *s, rill_binary_op op, float *out, const float *a,
                               const size_t *a_strides, const float *b, const size_t *b_strides,
                               const size_t *shape, size_t ndim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_binary_f32";
    if ((unsigned)op > (unsigned)RILL_BINARY_GELU_TANH_BACKWARD)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_binary_op; pass RILL_BINARY_ADD to "
                          "RILL_BINARY_GELU_TANH_BACKWARD",
                          fn, (int)op);
    size_t n = 0, out_bytes = 0, a_bytes = 0, b_bytes = 0;
    size_t contig[RILL__OP_MAX_DIMS] = {0};
    rill_status st;
    if ((st = check_shape(fn, shape, ndim, &n)) != RILL_OK)
        return st;
    rill__op_contiguous_strides(shape, ndim, contig);
    if ((st = check_operand(fn, s, out, "out", contig, shape, ndim, &out_bytes)) != RILL_OK ||
        (st = check_operand(fn, s, a, "a", a_strides, shape, ndim, &a_bytes)) != RILL_OK ||
        (st = check_operand(fn, s, b, "b", b_strides, shape, ndim, &b_bytes)) != RILL_OK ||
        (st = rill__op_check_out_against(fn, out, out_bytes, "out", a, a_bytes, "a", a_strides,
                                         contig, shape, ndim, true)) != RILL_OK ||
        (st = rill__op_check_out_against(fn, out, out_bytes, "out", b, b_bytes, "b", b_strides,
                                         contig, shape, ndim, true)) != RILL_OK)
        return st;
    rill__op_strided_args p = {.out = out, .a = a, .b = b, .n = n, .op = (uint32_t)op};
    const size_t *strides[3] = {contig, a_strides, b_strides};
    merge_dims(&p, shape, ndim, strides);
    return launch_strided(fn, s, RILL__OP_BINARY_F32, &p, out_bytes, a_bytes, b_bytes);
}

/* ---- map ---- */

rill_status rill_op_map_f32(rill_stream *s, rill_map_op op, float *out, const float *a, float alpha,
                            size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_map_f32";
    if ((unsigned)op > (unsigned)RILL_MAP_ABS)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_map_op; pass RILL_MAP_NEG to RILL_MAP_ABS", fn,
                          (int)op);
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, a, "a", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n floats", bytes)) != RILL_OK)
        return st;
    if ((st = rill__op_check_in_place(fn, out, a, "a", bytes)) != RILL_OK)
        return st;
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_map_args args = {out, a, alpha, (uint32_t)op, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, bytes, RILL_READ);
    rill__op_access_add(&acc, out, bytes, RILL_WRITE);
    /* The transcendental maps cost several adds per element. */
    return rill__op_launch_n(stream, RILL__OP_MAP_F32, n, ELEMENTS_PER_BLOCK_MIN / 4, units, &args,
                             sizeof args, &acc);
}

rill_status rill_op_masked_scale_f32(rill_stream *s, float *out, const float *a,
                                     const uint8_t *mask, float scale, size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_masked_scale_f32";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of n floats")) != RILL_OK ||
        (st = rill__op_check_pointer(fn, mask, "mask", "device memory of n bytes")) != RILL_OK ||
        (st = rill__op_check_count(fn, n, &bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, a, "a", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "n floats", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, mask, "mask", "n bytes", n)) != RILL_OK)
        return st;
    if ((st = rill__op_check_in_place(fn, out, a, "a", bytes)) != RILL_OK)
        return st;
    if (rill__op_overlaps(out, bytes, mask, n))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: out overlaps mask; pass an out that does not overlap it", fn);
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_masked_scale_args args = {out, a, mask, scale, n};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, bytes, RILL_READ);
    rill__op_access_add(&acc, mask, n, RILL_READ);
    rill__op_access_add(&acc, out, bytes, RILL_WRITE);
    return rill__op_launch_n(stream, RILL__OP_MASKED_SCALE_F32, n, ELEMENTS_PER_BLOCK_MIN, units,
                             &args, sizeof args, &acc);
}

/* ---- along one dimension ---- */

rill_status rill__op_check_dims3(const char *fn, size_t outer, size_t dim, size_t inner,
                                 size_t *count) {
    const size_t values[3] = {outer, dim, inner};
    const char *const names[3] = {"outer", "dim", "inner"};
    for (int i = 0; i < 3; i++)
        if (values[i] == 0)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: %s is 0; pass the product of the dimensions %s (at least 1)", fn,
                              names[i],
                              i == 0   ? "before the reduced one"
                              : i == 1 ? "reduced"
                                       : "after the reduced one");
    size_t bytes = 0;
    if (!rill__op_elem_bytes(&bytes, sizeof(double), outer, dim, inner, 1))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: outer*dim*inner elements do not fit in memory; pass smaller "
                          "dimensions",
                          fn);
    *count = outer * dim * inner;
    return RILL_OK;
}

rill_status rill_op_reduce_dim_f32(rill_stream *s, rill_reduce_dim_op op, float *out,
                                   int64_t *indices, const float *a, size_t outer, size_t dim,
                                   size_t inner) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_reduce_dim_f32";
    if ((unsigned)op > (unsigned)RILL_REDUCE_DIM_MIN)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_reduce_dim_op; pass RILL_REDUCE_DIM_SUM to "
                          "RILL_REDUCE_DIM_MIN",
                          fn, (int)op);
    if (indices != NULL && (op == RILL_REDUCE_DIM_SUM || op == RILL_REDUCE_DIM_MEAN))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: indices is not NULL for a sum or mean, which have no position; "
                          "pass NULL, or op RILL_REDUCE_DIM_MAX or RILL_REDUCE_DIM_MIN",
                          fn);
    size_t count = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for outer*inner floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of outer*dim*inner floats")) !=
            RILL_OK ||
        (st = rill__op_check_dims3(fn, outer, dim, inner, &count)) != RILL_OK)
        return st;
    size_t a_bytes = count * sizeof(float), out_bytes = outer * inner * sizeof(float);
    size_t idx_bytes = outer * inner * sizeof(int64_t);
    if ((st = rill__op_check_fits(fn, s, a, "a", "outer*dim*inner floats", a_bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "outer*inner floats", out_bytes)) != RILL_OK ||
        (indices != NULL &&
         (st = rill__op_check_fits(fn, s, indices, "indices", "outer*inner int64s", idx_bytes)) !=
             RILL_OK) ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", a, a_bytes, "a")) != RILL_OK ||
        (indices != NULL && ((st = rill__op_check_disjoint(fn, indices, idx_bytes, "indices", a,
                                                           a_bytes, "a")) != RILL_OK ||
                             (st = rill__op_check_disjoint(fn, indices, idx_bytes, "indices", out,
                                                           out_bytes, "out")) != RILL_OK)) ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_reduce_dim_args args = {out, indices, a, outer, dim, inner, (uint32_t)op};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, a_bytes, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    if (indices != NULL)
        rill__op_access_add(&acc, indices, idx_bytes, RILL_WRITE);
    size_t outputs = outer * inner;
    size_t blocks = rill__op_blocks_for(count, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_REDUCE_DIM_F32, blocks < outputs ? blocks : outputs,
                           &args, sizeof args, &acc);
}

static rill_status softmax(const char *fn, rill_stream *s, float *out, const float *a, size_t outer,
                           size_t dim, size_t inner, bool is_log) {
    size_t count = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for outer*dim*inner floats")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of outer*dim*inner floats")) !=
            RILL_OK ||
        (st = rill__op_check_dims3(fn, outer, dim, inner, &count)) != RILL_OK)
        return st;
    size_t bytes = count * sizeof(float);
    if ((st = rill__op_check_fits(fn, s, a, "a", "outer*dim*inner floats", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "outer*dim*inner floats", bytes)) != RILL_OK)
        return st;
    if ((st = rill__op_check_in_place(fn, out, a, "a", bytes)) != RILL_OK)
        return st;
    if ((st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_softmax_args args = {out, a, outer, dim, inner, is_log ? 1u : 0u};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, bytes, RILL_READ);
    rill__op_access_add(&acc, out, bytes, RILL_WRITE);
    size_t rows = outer * inner;
    size_t blocks = rill__op_blocks_for(count, ELEMENTS_PER_BLOCK_MIN / 4, units);
    return rill__op_launch(stream, RILL__OP_SOFTMAX_F32, blocks < rows ? blocks : rows, &args,
                           sizeof args, &acc);
}

rill_status rill_op_softmax_f32(rill_stream *s, float *out, const float *a, size_t outer,
                                size_t dim, size_t inner) {
    RILL_CALL_SCOPE();
    return softmax("rill_op_softmax_f32", s, out, a, outer, dim, inner, false);
}

rill_status rill_op_log_softmax_f32(rill_stream *s, float *out, const float *a, size_t outer,
                                    size_t dim, size_t inner) {
    RILL_CALL_SCOPE();
    return softmax("rill_op_log_softmax_f32", s, out, a, outer, dim, inner, true);
}
