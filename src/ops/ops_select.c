/* SPDX-License-Identifier: MIT */
/* The ops over elements other than float32. With strided operands:
 * compare (a bool result from two operands or an operand and a number),
 * where (a choice between two operands by a bool one), masked_fill (where
 * with a number, in place) and convert (between element types).
 * Contiguous: triangle (tril, triu), reduce_dim_bool (any, all, the count
 * of a bool tensor) and arange. Each launches one kernel (RILL__OP_COMPARE,
 * RILL__OP_WHERE, RILL__OP_CONVERT, RILL__OP_TRIANGLE,
 * RILL__OP_REDUCE_DIM_BOOL, RILL__OP_ARANGE), the strided ones after the
 * checks of ops_tensor.c's strided ops. Layer: ops, on what ops.c and
 * ops_tensor.c provide (ops_internal.h). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/op_args.h"
#include "core/calls.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "util/status.h"

/* A where or compare is about as cheap per element as a gather. */
#define SELECT_PER_BLOCK_MIN (ELEMENTS_PER_BLOCK_MIN / 4)

/* The bytes of an element of type, 0 for a type outside the enum. */
static size_t type_bytes(rill_element_type type) {
    switch (type) {
    case RILL_ELEMENT_U8:
    case RILL_ELEMENT_BOOL:
        return 1;
    case RILL_ELEMENT_I32:
    case RILL_ELEMENT_F32:
        return 4;
    case RILL_ELEMENT_I64:
    case RILL_ELEMENT_F64:
        return 8;
    }
    return 0;
}

/* type's element size in *elem, or a refusal naming the argument. */
static rill_status check_type(const char *fn, rill_element_type type, const char *name,
                              size_t *elem) {
    *elem = type_bytes(type);
    if (*elem != 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: %s is %d, not a rill_element_type; pass RILL_ELEMENT_U8 to "
                      "RILL_ELEMENT_BOOL",
                      fn, name, (int)type);
}

static rill_status check_element_bytes(const char *fn, size_t element_bytes) {
    if (element_bytes == 1 || element_bytes == 2 || element_bytes == 4 || element_bytes == 8)
        return RILL_OK;
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: element_bytes is %zu; pass the width of one element: 1, 2, 4 or 8", fn,
                      element_bytes);
}

static rill_status check_aligned(const char *fn, const void *p, const char *name, size_t elem) {
    if ((uintptr_t)p % elem == 0)
        return RILL_OK;
    return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                      "%s: %s (%p) is not aligned to its %zu-byte elements; pass the address of "
                      "an element",
                      fn, name, p, elem);
}

/* A strided operand of elem-byte elements: checked, aligned, its strides
 * copied into *strides_out (when not NULL), its extent in *bytes. */
static rill_status check_input(const char *fn, rill_stream *s, const void *p, const char *name,
                               const size_t *strides, const size_t *shape, size_t ndim, size_t elem,
                               size_t *bytes) {
    const char *unit = elem == 1 ? "bytes" : "elements";
    rill_status st =
        rill__op_check_strided(fn, s, p, name, strides, shape, ndim, elem, unit, bytes);
    if (st != RILL_OK)
        return st;
    return check_aligned(fn, p, name, elem);
}

static rill_status launch_select(const char *fn, rill_stream *s, rill__op id,
                                 const rill__op_select_args *p, size_t out_bytes, size_t a_bytes,
                                 size_t b_bytes, size_t cond_bytes) {
    size_t units = 0;
    rill__stream *stream = NULL;
    rill_status st = rill__op_stream(fn, s, &stream, &units);
    if (st != RILL_OK)
        return st;
    access_list acc = {.count = 0};
    if (p->a != NULL)
        rill__op_access_add(&acc, p->a, a_bytes, RILL_READ);
    if (p->b != NULL)
        rill__op_access_add(&acc, p->b, b_bytes, RILL_READ);
    if (p->cond != NULL)
        rill__op_access_add(&acc, p->cond, cond_bytes, RILL_READ);
    rill__op_access_add(&acc, p->out, out_bytes, RILL_WRITE);
    return rill__op_launch_n(stream, id, p->n, SELECT_PER_BLOCK_MIN, units, p, sizeof *p, &acc);
}

/* ---- compare ---- */

static rill_status compare(const char *fn, rill_stream *s, rill_compare_op op,
                           rill_element_type type, uint8_t *out, const void *a,
                           const size_t *a_strides, const void *b, const size_t *b_strides,
                           const void *value, const size_t *shape, size_t ndim) {
    if ((unsigned)op > (unsigned)RILL_COMPARE_GE)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_compare_op; pass RILL_COMPARE_EQ to "
                          "RILL_COMPARE_GE",
                          fn, (int)op);
    size_t elem = 0;
    rill_status st;
    if ((st = check_type(fn, type, "type", &elem)) != RILL_OK)
        return st;
    size_t n = 0, out_bytes = 0, a_bytes = 0, b_bytes = 0;
    size_t contig[RILL__OP_MAX_DIMS] = {0};
    if ((st = rill__op_check_shape(fn, shape, ndim, elem, &n)) != RILL_OK)
        return st;
    rill__op_contiguous_strides(shape, ndim, contig);
    if ((st = rill__op_check_strided(fn, s, out, "out", contig, shape, ndim, 1, "bytes",
                                     &out_bytes)) != RILL_OK ||
        (st = check_input(fn, s, a, "a", a_strides, shape, ndim, elem, &a_bytes)) != RILL_OK)
        return st;
    if (value == NULL && b == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: value is NULL; pass the address of one element of type on the "
                          "host",
                          fn);
    if (b != NULL &&
        (st = check_input(fn, s, b, "b", b_strides, shape, ndim, elem, &b_bytes)) != RILL_OK)
        return st;
    if ((st = rill__op_check_out_against(fn, out, out_bytes, "out", a, a_bytes, "a", a_strides,
                                         contig, shape, ndim, false)) != RILL_OK ||
        (b != NULL &&
         (st = rill__op_check_out_against(fn, out, out_bytes, "out", b, b_bytes, "b", b_strides,
                                          contig, shape, ndim, false)) != RILL_OK))
        return st;
    rill__op_select_args p = {.out = out,
                              .a = a,
                              .b = b,
                              .n = n,
                              .op = (uint32_t)op,
                              .type = (uint32_t)type,
                              .size = (uint32_t)elem};
    if (b == NULL)
        memcpy(&p.b_bits, value, elem); /* little-endian: the low bytes */
    size_t *const dst[3] = {p.out_strides, p.a_strides, p.b_strides};
    const size_t *const strides[3] = {contig, a_strides, b != NULL ? b_strides : NULL};
    p.ndim = rill__op_merge_dims(p.shape, dst, strides, 3, shape, ndim);
    return launch_select(fn, s, RILL__OP_COMPARE, &p, out_bytes, a_bytes, b_bytes, 0);
}

rill_status rill_op_compare(rill_stream *s, rill_compare_op op, rill_element_type type,
                            uint8_t *out, const void *a, const size_t *a_strides, const void *b,
                            const size_t *b_strides, const size_t *shape, size_t ndim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_compare";
    if (b == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: b is NULL; pass device memory of elements of type, or call "
                          "rill_op_compare_scalar to compare with a number",
                          fn);
    return compare(fn, s, op, type, out, a, a_strides, b, b_strides, NULL, shape, ndim);
}

rill_status rill_op_compare_scalar(rill_stream *s, rill_compare_op op, rill_element_type type,
                                   uint8_t *out, const void *a, const size_t *a_strides,
                                   const void *value, const size_t *shape, size_t ndim) {
    RILL_CALL_SCOPE();
    return compare("rill_op_compare_scalar", s, op, type, out, a, a_strides, NULL, NULL, value,
                   shape, ndim);
}

/* ---- convert ---- */

rill_status rill_op_convert(rill_stream *s, rill_element_type out_type, void *out,
                            rill_element_type in_type, const void *in, const size_t *in_strides,
                            const size_t *shape, size_t ndim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_convert";
    size_t out_elem = 0, in_elem = 0, n = 0, out_bytes = 0, in_bytes = 0;
    size_t contig[RILL__OP_MAX_DIMS] = {0};
    rill_status st;
    if ((st = check_type(fn, out_type, "out_type", &out_elem)) != RILL_OK ||
        (st = check_type(fn, in_type, "in_type", &in_elem)) != RILL_OK ||
        (st = rill__op_check_shape(fn, shape, ndim, out_elem > in_elem ? out_elem : in_elem, &n)) !=
            RILL_OK)
        return st;
    rill__op_contiguous_strides(shape, ndim, contig);
    if ((st = check_input(fn, s, out, "out", contig, shape, ndim, out_elem, &out_bytes)) !=
            RILL_OK ||
        (st = check_input(fn, s, in, "in", in_strides, shape, ndim, in_elem, &in_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_out_against(fn, out, out_bytes, "out", in, in_bytes, "in", in_strides,
                                         contig, shape, ndim, false)) != RILL_OK)
        return st;
    rill__op_select_args p = {.out = out,
                              .a = in,
                              .n = n,
                              .op = (uint32_t)out_type,
                              .type = (uint32_t)in_type,
                              .size = (uint32_t)in_elem};
    size_t *const dst[2] = {p.out_strides, p.a_strides};
    const size_t *const strides[2] = {contig, in_strides};
    p.ndim = rill__op_merge_dims(p.shape, dst, strides, 2, shape, ndim);
    return launch_select(fn, s, RILL__OP_CONVERT, &p, out_bytes, in_bytes, 0, 0);
}

/* ---- where and masked_fill ---- */

rill_status rill_op_where(rill_stream *s, size_t element_bytes, void *out, const uint8_t *cond,
                          const size_t *cond_strides, const void *a, const size_t *a_strides,
                          const void *b, const size_t *b_strides, const size_t *shape,
                          size_t ndim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_where";
    size_t elem = element_bytes, n = 0;
    size_t out_bytes = 0, a_bytes = 0, b_bytes = 0, cond_bytes = 0;
    size_t contig[RILL__OP_MAX_DIMS] = {0};
    rill_status st;
    if ((st = check_element_bytes(fn, elem)) != RILL_OK ||
        (st = rill__op_check_shape(fn, shape, ndim, elem, &n)) != RILL_OK)
        return st;
    rill__op_contiguous_strides(shape, ndim, contig);
    if ((st = check_input(fn, s, out, "out", contig, shape, ndim, elem, &out_bytes)) != RILL_OK ||
        (st = check_input(fn, s, cond, "cond", cond_strides, shape, ndim, 1, &cond_bytes)) !=
            RILL_OK ||
        (st = check_input(fn, s, a, "a", a_strides, shape, ndim, elem, &a_bytes)) != RILL_OK ||
        (st = check_input(fn, s, b, "b", b_strides, shape, ndim, elem, &b_bytes)) != RILL_OK ||
        (st = rill__op_check_out_against(fn, out, out_bytes, "out", cond, cond_bytes, "cond",
                                         cond_strides, contig, shape, ndim, false)) != RILL_OK ||
        (st = rill__op_check_out_against(fn, out, out_bytes, "out", a, a_bytes, "a", a_strides,
                                         contig, shape, ndim, true)) != RILL_OK ||
        (st = rill__op_check_out_against(fn, out, out_bytes, "out", b, b_bytes, "b", b_strides,
                                         contig, shape, ndim, true)) != RILL_OK)
        return st;
    rill__op_select_args p = {
        .out = out, .a = a, .b = b, .cond = cond, .n = n, .size = (uint32_t)elem};
    size_t *const dst[4] = {p.out_strides, p.a_strides, p.b_strides, p.cond_strides};
    const size_t *const strides[4] = {contig, a_strides, b_strides, cond_strides};
    p.ndim = rill__op_merge_dims(p.shape, dst, strides, 4, shape, ndim);
    return launch_select(fn, s, RILL__OP_WHERE, &p, out_bytes, a_bytes, b_bytes, cond_bytes);
}

rill_status rill_op_masked_fill(rill_stream *s, size_t element_bytes, void *x, const uint8_t *mask,
                                const size_t *mask_strides, uint64_t bits, const size_t *shape,
                                size_t ndim) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_masked_fill";
    size_t elem = element_bytes, n = 0, x_bytes = 0, mask_bytes = 0;
    size_t contig[RILL__OP_MAX_DIMS] = {0};
    rill_status st;
    if ((st = check_element_bytes(fn, elem)) != RILL_OK ||
        (st = rill__op_check_shape(fn, shape, ndim, elem, &n)) != RILL_OK)
        return st;
    rill__op_contiguous_strides(shape, ndim, contig);
    if ((st = check_input(fn, s, x, "x", contig, shape, ndim, elem, &x_bytes)) != RILL_OK ||
        (st = check_input(fn, s, mask, "mask", mask_strides, shape, ndim, 1, &mask_bytes)) !=
            RILL_OK ||
        (st = rill__op_check_out_against(fn, x, x_bytes, "x", mask, mask_bytes, "mask",
                                         mask_strides, contig, shape, ndim, false)) != RILL_OK)
        return st;
    /* where(mask, bits, x) into x: a NULL a stands for the number. */
    rill__op_select_args p = {
        .out = x, .a = NULL, .b = x, .cond = mask, .a_bits = bits, .n = n, .size = (uint32_t)elem};
    size_t *const dst[4] = {p.out_strides, p.a_strides, p.b_strides, p.cond_strides};
    const size_t *const strides[4] = {contig, NULL, contig, mask_strides};
    p.ndim = rill__op_merge_dims(p.shape, dst, strides, 4, shape, ndim);
    return launch_select(fn, s, RILL__OP_WHERE, &p, x_bytes, 0, x_bytes, mask_bytes);
}

/* ---- triangle ---- */

rill_status rill_op_triangle(rill_stream *s, size_t element_bytes, void *out, const void *in,
                             size_t batch, size_t rows, size_t cols, int64_t diagonal, int upper) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_triangle";
    size_t bytes = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = check_element_bytes(fn, element_bytes)) != RILL_OK ||
        (st = rill__op_check_pointer(fn, out, "out", "device memory for the matrices")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, in, "in", "device memory of the matrices")) != RILL_OK ||
        (st = check_aligned(fn, out, "out", element_bytes)) != RILL_OK ||
        (st = check_aligned(fn, in, "in", element_bytes)) != RILL_OK)
        return st;
    if (batch == 0 || rows == 0 || cols == 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: batch, rows and cols are %zu, %zu and %zu; pass sizes of at least "
                          "1 (an empty tensor needs no op)",
                          fn, batch, rows, cols);
    if (!rill__op_elem_bytes(&bytes, element_bytes, batch, rows, cols, 1) ||
        rows > (size_t)INT64_MAX || cols > (size_t)INT64_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: batch*rows*cols elements do not fit in memory; pass smaller sizes",
                          fn);
    if ((st = rill__op_check_fits(fn, s, in, "in", "batch*rows*cols elements", bytes)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", "batch*rows*cols elements", bytes)) !=
            RILL_OK ||
        (st = rill__op_check_in_place(fn, out, in, "in", bytes)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    /* Past -rows or cols, a diagonal keeps all or nothing of every row;
     * clamped, i + diagonal cannot overflow in the bodies. */
    int64_t lowest = -(int64_t)rows, highest = (int64_t)cols;
    if (diagonal < lowest)
        diagonal = lowest;
    if (diagonal > highest)
        diagonal = highest;
    rill__op_triangle_args args = {
        out, in, batch, rows, cols, diagonal, (uint32_t)element_bytes, upper != 0 ? 1u : 0u};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, in, bytes, RILL_READ);
    rill__op_access_add(&acc, out, bytes, RILL_WRITE);
    size_t blocks = rill__op_blocks_for(batch * rows * cols, SELECT_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_TRIANGLE, blocks < batch * rows ? blocks : batch * rows,
                           &args, sizeof args, &acc);
}

/* ---- reduce_dim_bool ---- */

rill_status rill_op_reduce_dim_bool(rill_stream *s, rill_reduce_bool_op op, void *out,
                                    const uint8_t *a, size_t outer, size_t dim, size_t inner) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_reduce_dim_bool";
    if ((unsigned)op > (unsigned)RILL_REDUCE_BOOL_COUNT)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op is %d, not a rill_reduce_bool_op; pass RILL_REDUCE_BOOL_ANY, "
                          "RILL_REDUCE_BOOL_ALL or RILL_REDUCE_BOOL_COUNT",
                          fn, (int)op);
    size_t count = 0, units = 0;
    size_t out_elem = op == RILL_REDUCE_BOOL_COUNT ? sizeof(int64_t) : 1;
    const char *out_shape =
        op == RILL_REDUCE_BOOL_COUNT ? "outer*inner int64s" : "outer*inner bytes";
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = rill__op_check_pointer(fn, out, "out", "device memory for outer*inner results")) !=
            RILL_OK ||
        (st = rill__op_check_pointer(fn, a, "a", "device memory of outer*dim*inner bytes")) !=
            RILL_OK ||
        (st = check_aligned(fn, out, "out", out_elem)) != RILL_OK ||
        (st = rill__op_check_dims3(fn, outer, dim, inner, &count)) != RILL_OK)
        return st;
    size_t out_bytes = outer * inner * out_elem;
    if ((st = rill__op_check_fits(fn, s, a, "a", "outer*dim*inner bytes", count)) != RILL_OK ||
        (st = rill__op_check_fits(fn, s, out, "out", out_shape, out_bytes)) != RILL_OK ||
        (st = rill__op_check_disjoint(fn, out, out_bytes, "out", a, count, "a")) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_reduce_bool_args args = {out, a, outer, dim, inner, (uint32_t)op};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, a, count, RILL_READ);
    rill__op_access_add(&acc, out, out_bytes, RILL_WRITE);
    size_t outputs = outer * inner;
    size_t blocks = rill__op_blocks_for(count, ELEMENTS_PER_BLOCK_MIN, units);
    return rill__op_launch(stream, RILL__OP_REDUCE_DIM_BOOL, blocks < outputs ? blocks : outputs,
                           &args, sizeof args, &acc);
}

/* ---- arange ---- */

rill_status rill_op_arange(rill_stream *s, rill_element_type type, void *out, int64_t start,
                           int64_t step, size_t n) {
    RILL_CALL_SCOPE();
    static const char fn[] = "rill_op_arange";
    size_t elem = 0, units = 0;
    rill__stream *stream = NULL;
    rill_status st;
    if ((st = check_type(fn, type, "type", &elem)) != RILL_OK ||
        (st = rill__op_check_pointer(fn, out, "out", "device memory for n elements")) != RILL_OK ||
        (st = check_aligned(fn, out, "out", elem)) != RILL_OK)
        return st;
    if (n == 0 || n > SIZE_MAX / elem)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: n is %zu; pass the number of elements of out (at least 1)", fn, n);
    if ((st = rill__op_check_fits(fn, s, out, "out", "n elements", n * elem)) != RILL_OK ||
        (st = rill__op_stream(fn, s, &stream, &units)) != RILL_OK)
        return st;
    rill__op_arange_args args = {out, start, step, n, (uint32_t)type};
    access_list acc = {.count = 0};
    rill__op_access_add(&acc, out, n * elem, RILL_WRITE);
    return rill__op_launch_n(stream, RILL__OP_ARANGE, n, ELEMENTS_PER_BLOCK_MIN, units, &args,
                             sizeof args, &acc);
}
