/* SPDX-License-Identifier: MIT */
/* CPU bodies of compare, where and convert (backend/op_args.h,
 * rill__op_select_args), of triangle and of reduce_dim_bool. The strided
 * ones: an odometer over the merged shape hands each run along the last
 * dimension to a loop made for the op's types and op (or element size),
 * which vectorizes where the run is contiguous. A number standing for an
 * operand is read from a local copy of its bits with stride 0. Triangle:
 * each block takes whole rows, a copy of the kept span and zeros around
 * it. reduce_dim_bool: each block counts the bytes not 0 of its outputs,
 * a row or a run of columns at a time. arange: each block a slice. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/tensor_kernels.h"
#include "backend/cpu/vec_clones.h"

/* Blocks start at multiples of this many elements, so that two never write
 * the same cache line of a byte output. */
#define SELECT_ALIGN 64

static void select_slice(const rill_block_ctx *ctx, size_t n, size_t *begin, size_t *end) {
    size_t blocks = ctx->grid_dim.x, b = ctx->block_idx.x;
    size_t per = (n + blocks - 1) / blocks;
    per = (per + SELECT_ALIGN - 1) / SELECT_ALIGN * SELECT_ALIGN;
    *begin = b * per < n ? b * per : n;
    *end = n - *begin > per ? *begin + per : n;
}

/* One run of len elements: each operand's first element and its stride
 * (in elements) along the run. */
typedef struct select_run {
    void *out;
    const void *a, *b;
    const uint8_t *cond;
    size_t os, as, bs, cs;
    size_t len;
} select_run;

typedef void (*select_run_fn)(const select_run *r);

/* Walks the indices [begin, end) of p's shape in row-major order, a run
 * along the last dimension at a time; a and b point at their numbers'
 * bits where p has none. */
INLINED void select_walk(const rill__op_select_args *p, size_t begin, size_t end, size_t out_size,
                         const void *a, const void *b, select_run_fn fn) {
    size_t nd = p->ndim, last = nd - 1, in_size = p->size;
    size_t idx[RILL__OP_MAX_DIMS];
    size_t rest = begin;
    for (size_t d = nd; d-- > 0;) {
        idx[d] = rest % p->shape[d];
        rest /= p->shape[d];
    }
    const size_t *st[4] = {p->out_strides, p->a_strides, p->b_strides, p->cond_strides};
    size_t off[4] = {0, 0, 0, 0};
    for (size_t d = 0; d < nd; d++)
        for (int o = 0; o < 4; o++)
            off[o] += idx[d] * st[o][d];
    for (size_t i = begin; i < end;) {
        size_t run = p->shape[last] - idx[last];
        if (run > end - i)
            run = end - i;
        select_run r = {
            .out = (char *)p->out + off[0] * out_size,
            .a = (const char *)a + off[1] * in_size,
            .b = (const char *)b + off[2] * in_size,
            .cond = p->cond != NULL ? p->cond + off[3] : NULL,
            .os = st[0][last],
            .as = st[1][last],
            .bs = st[2][last],
            .cs = st[3][last],
            .len = run,
        };
        fn(&r);
        i += run;
        for (int o = 0; o < 4; o++)
            off[o] += run * st[o][last];
        idx[last] += run;
        for (size_t d = last; d > 0 && idx[d] == p->shape[d]; d--) {
            for (int o = 0; o < 4; o++)
                off[o] += st[o][d - 1] - p->shape[d] * st[o][d];
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* ---- compare ---- */

/* An element read as it is, and a byte read as a bool. */
#define AS_IS(x)   (x)
#define AS_BOOL(x) ((uint8_t)((x) != 0))

/* A run of a (OP) b into contiguous bytes, each element read through LOAD:
 * loops for a and b contiguous, for b one number, and for any strides. */
#define COMPARE_RUN(name, T, OP, LOAD)                                                             \
    static void name(const select_run *r) {                                                        \
        uint8_t *out = r->out;                                                                     \
        const T *a = r->a, *b = r->b;                                                              \
        size_t n = r->len, as = r->as, bs = r->bs;                                                 \
        if (as == 1 && bs == 1) {                                                                  \
            for (size_t i = 0; i < n; i++)                                                         \
                out[i] = LOAD(a[i]) OP LOAD(b[i]);                                                 \
        } else if (as == 1 && bs == 0) {                                                           \
            T y = LOAD(b[0]);                                                                      \
            for (size_t i = 0; i < n; i++)                                                         \
                out[i] = LOAD(a[i]) OP y;                                                          \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                out[i] = LOAD(a[i * as]) OP LOAD(b[i * bs]);                                       \
        }                                                                                          \
    }

#define COMPARE_RUNS(T, tag, LOAD)                                                                 \
    COMPARE_RUN(compare_eq_##tag, T, ==, LOAD)                                                     \
    COMPARE_RUN(compare_ne_##tag, T, !=, LOAD)                                                     \
    COMPARE_RUN(compare_lt_##tag, T, <, LOAD)                                                      \
    COMPARE_RUN(compare_le_##tag, T, <=, LOAD)                                                     \
    COMPARE_RUN(compare_gt_##tag, T, >, LOAD)                                                      \
    COMPARE_RUN(compare_ge_##tag, T, >=, LOAD)                                                     \
    static const select_run_fn compare_##tag[6] = {compare_eq_##tag, compare_ne_##tag,             \
                                                   compare_lt_##tag, compare_le_##tag,             \
                                                   compare_gt_##tag, compare_ge_##tag};

COMPARE_RUNS(uint8_t, u8, AS_IS)
COMPARE_RUNS(int32_t, i32, AS_IS)
COMPARE_RUNS(int64_t, i64, AS_IS)
COMPARE_RUNS(float, f32, AS_IS)
COMPARE_RUNS(double, f64, AS_IS)
COMPARE_RUNS(uint8_t, b, AS_BOOL)

void rill__cpu_op_compare(const rill_block_ctx *ctx, const void *args) {
    const rill__op_select_args *p = args;
    size_t begin, end;
    select_slice(ctx, p->n, &begin, &end);
    if (begin >= end || p->op > RILL_COMPARE_GE)
        return;
    static const select_run_fn *const by_type[] = {
        [RILL_ELEMENT_U8] = compare_u8,   [RILL_ELEMENT_I32] = compare_i32,
        [RILL_ELEMENT_I64] = compare_i64, [RILL_ELEMENT_F32] = compare_f32,
        [RILL_ELEMENT_F64] = compare_f64, [RILL_ELEMENT_BOOL] = compare_b,
    };
    if (p->type > RILL_ELEMENT_BOOL)
        return;
    uint64_t b_bits = p->b_bits; /* the number b stands for, with stride 0 */
    select_walk(p, begin, end, 1, p->a, p->b != NULL ? p->b : (const void *)&b_bits,
                by_type[p->type][p->op]);
}

/* ---- where ---- */

/* A run of cond ? a : b into contiguous elements of T's size (an unsigned
 * type), chosen by a mask of all ones or all zeros rather than a branch:
 * a random condition costs no mispredictions, and the contiguous loops
 * vectorize. */
#define WHERE_RUN(name, T)                                                                         \
    static void name(const select_run *r) {                                                        \
        T *out = r->out;                                                                           \
        const T *a = r->a, *b = r->b;                                                              \
        const uint8_t *c = r->cond;                                                                \
        size_t n = r->len, as = r->as, bs = r->bs, cs = r->cs;                                     \
        if (as == 0 && bs == 1 && cs == 1) {                                                       \
            T x = a[0];                                                                            \
            for (size_t i = 0; i < n; i++) {                                                       \
                T m = (T)0 - (T)(c[i] != 0);                                                       \
                out[i] = (T)((x & m) | (b[i] & (T)~m));                                            \
            }                                                                                      \
        } else if (as == 1 && bs == 1 && cs == 1) {                                                \
            for (size_t i = 0; i < n; i++) {                                                       \
                T m = (T)0 - (T)(c[i] != 0);                                                       \
                out[i] = (T)((a[i] & m) | (b[i] & (T)~m));                                         \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++) {                                                       \
                T m = (T)0 - (T)(c[i * cs] != 0);                                                  \
                out[i] = (T)((a[i * as] & m) | (b[i * bs] & (T)~m));                               \
            }                                                                                      \
        }                                                                                          \
    }

WHERE_RUN(where_1, uint8_t)
WHERE_RUN(where_2, uint16_t)
WHERE_RUN(where_4, uint32_t)
WHERE_RUN(where_8, uint64_t)

void rill__cpu_op_where(const rill_block_ctx *ctx, const void *args) {
    const rill__op_select_args *p = args;
    size_t begin, end;
    select_slice(ctx, p->n, &begin, &end);
    if (begin >= end)
        return;
    select_run_fn fn = p->size == 1   ? where_1
                       : p->size == 2 ? where_2
                       : p->size == 4 ? where_4
                                      : where_8;
    uint64_t a_bits = p->a_bits, b_bits = p->b_bits;
    select_walk(p, begin, end, p->size, p->a != NULL ? p->a : (const void *)&a_bits,
                p->b != NULL ? p->b : (const void *)&b_bits, fn);
}

/* ---- convert ---- */

/* A floating value to int64 and int32, rounded toward zero; NaN and values
 * past the range give the lowest value, as x86's conversions do. */
INLINED int64_t to_i64(double x) {
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? (int64_t)x : INT64_MIN;
}
INLINED int32_t to_i32(double x) {
    return x > -2147483649.0 && x < 2147483648.0 ? (int32_t)x : INT32_MIN;
}

/* The conversions by source kind: an integer, a floating value, a bool. */
#define INT_TO_U8(x)    ((uint8_t)(x))
#define INT_TO_I32(x)   ((int32_t)(x))
#define INT_TO_I64(x)   ((int64_t)(x))
#define TO_F32(x)       ((float)(x))
#define TO_F64(x)       ((double)(x))
#define FLOAT_TO_U8(x)  ((uint8_t)to_i64(x))
#define FLOAT_TO_I32(x) to_i32(x)
#define FLOAT_TO_I64(x) to_i64(x)
#define BOOL_TO_I32(x)  ((int32_t)AS_BOOL(x))
#define BOOL_TO_I64(x)  ((int64_t)AS_BOOL(x))
#define BOOL_TO_F32(x)  ((float)AS_BOOL(x))
#define BOOL_TO_F64(x)  ((double)AS_BOOL(x))

/* A run of in converted by CONV into contiguous out. */
#define CONVERT_RUN(name, TI, TO, CONV)                                                            \
    static void name(const select_run *r) {                                                        \
        TO *out = r->out;                                                                          \
        const TI *a = r->a;                                                                        \
        size_t n = r->len, as = r->as;                                                             \
        if (as == 1) {                                                                             \
            for (size_t i = 0; i < n; i++)                                                         \
                out[i] = CONV(a[i]);                                                               \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                out[i] = CONV(a[i * as]);                                                          \
        }                                                                                          \
    }

/* The runs from TI to each type, in rill_element_type's order (U8, I32,
 * I64, F32, F64, BOOL). */
#define CONVERT_RUNS(tag, TI, U8, I32, I64)                                                        \
    CONVERT_RUN(convert_##tag##_u8, TI, uint8_t, U8)                                               \
    CONVERT_RUN(convert_##tag##_i32, TI, int32_t, I32)                                             \
    CONVERT_RUN(convert_##tag##_i64, TI, int64_t, I64)                                             \
    CONVERT_RUN(convert_##tag##_f32, TI, float, TO_F32)                                            \
    CONVERT_RUN(convert_##tag##_f64, TI, double, TO_F64)                                           \
    CONVERT_RUN(convert_##tag##_b, TI, uint8_t, AS_BOOL)                                           \
    static const select_run_fn convert_##tag[6] = {convert_##tag##_u8,  convert_##tag##_i32,       \
                                                   convert_##tag##_i64, convert_##tag##_f32,       \
                                                   convert_##tag##_f64, convert_##tag##_b};

CONVERT_RUNS(u8, uint8_t, INT_TO_U8, INT_TO_I32, INT_TO_I64)
CONVERT_RUNS(i32, int32_t, INT_TO_U8, INT_TO_I32, INT_TO_I64)
CONVERT_RUNS(i64, int64_t, INT_TO_U8, INT_TO_I32, INT_TO_I64)
CONVERT_RUNS(f32, float, FLOAT_TO_U8, FLOAT_TO_I32, FLOAT_TO_I64)
CONVERT_RUNS(f64, double, FLOAT_TO_U8, FLOAT_TO_I32, FLOAT_TO_I64)

/* From a bool: 0 or 1 in the target type; the floating targets through
 * the bool macros, so that a byte of 2 converts to 1. */
CONVERT_RUN(convert_b_i32, uint8_t, int32_t, BOOL_TO_I32)
CONVERT_RUN(convert_b_i64, uint8_t, int64_t, BOOL_TO_I64)
CONVERT_RUN(convert_b_f32, uint8_t, float, BOOL_TO_F32)
CONVERT_RUN(convert_b_f64, uint8_t, double, BOOL_TO_F64)
CONVERT_RUN(convert_b_b, uint8_t, uint8_t, AS_BOOL)
static const select_run_fn convert_b[6] = {convert_b_b,   convert_b_i32, convert_b_i64,
                                           convert_b_f32, convert_b_f64, convert_b_b};

void rill__cpu_op_convert(const rill_block_ctx *ctx, const void *args) {
    const rill__op_select_args *p = args;
    static const select_run_fn *const from[] = {
        [RILL_ELEMENT_U8] = convert_u8,   [RILL_ELEMENT_I32] = convert_i32,
        [RILL_ELEMENT_I64] = convert_i64, [RILL_ELEMENT_F32] = convert_f32,
        [RILL_ELEMENT_F64] = convert_f64, [RILL_ELEMENT_BOOL] = convert_b,
    };
    static const size_t out_size[] = {1, 4, 8, 4, 8, 1};
    size_t begin, end;
    select_slice(ctx, p->n, &begin, &end);
    if (begin >= end || p->type > RILL_ELEMENT_BOOL || p->op > RILL_ELEMENT_BOOL)
        return;
    select_walk(p, begin, end, out_size[p->op], p->a, p->a, from[p->type][p->op]);
}

/* ---- triangle ---- */

void rill__cpu_op_triangle(const rill_block_ctx *ctx, const void *args) {
    const rill__op_triangle_args *p = args;
    size_t total = p->batch * p->rows;
    size_t blocks = ctx->grid_dim.x, b = ctx->block_idx.x;
    size_t per = (total + blocks - 1) / blocks;
    size_t begin = b * per < total ? b * per : total;
    size_t end = total - begin > per ? begin + per : total;
    size_t size = p->size, cols = p->cols, row_bytes = cols * size;
    for (size_t r = begin; r < end; r++) {
        /* Row i keeps columns [lo, hi); the op clamped the diagonal, so
         * edge does not overflow. */
        int64_t i = (int64_t)(r % p->rows), edge = i + p->diagonal;
        int64_t lo = 0, hi = (int64_t)cols;
        if (p->upper)
            lo = edge < 0 ? 0 : edge > hi ? hi : edge;
        else
            hi = edge < 0 ? 0 : edge + 1 < hi ? edge + 1 : hi;
        char *out = (char *)p->out + r * row_bytes;
        const char *in = (const char *)p->in + r * row_bytes;
        memset(out, 0, (size_t)lo * size);
        if (out != in)
            memcpy(out + (size_t)lo * size, in + (size_t)lo * size, (size_t)(hi - lo) * size);
        memset(out + (size_t)hi * size, 0, (cols - (size_t)hi) * size);
    }
}

/* ---- reduce_dim_bool ---- */

/* Columns counted side by side: one pass over dim for a run of them. */
#define BOOL_COLS 256

void rill__cpu_op_reduce_dim_bool(const rill_block_ctx *ctx, const void *args) {
    const rill__op_reduce_bool_args *p = args;
    size_t outputs = p->outer * p->inner, dim = p->dim, inner = p->inner;
    size_t blocks = ctx->grid_dim.x, b = ctx->block_idx.x;
    size_t per = (outputs + blocks - 1) / blocks;
    size_t begin = b * per < outputs ? b * per : outputs;
    size_t end = outputs - begin > per ? begin + per : outputs;
    int64_t count[BOOL_COLS];
    for (size_t item = begin; item < end;) {
        size_t o = item / inner, i = item % inner;
        size_t cols = inner - i < end - item ? inner - i : end - item;
        if (cols > BOOL_COLS)
            cols = BOOL_COLS;
        const uint8_t *a = p->a + o * dim * inner + i;
        if (inner == 1) { /* a contiguous row */
            int64_t c = 0;
            for (size_t d = 0; d < dim; d++)
                c += a[d] != 0;
            count[0] = c;
        } else {
            memset(count, 0, cols * sizeof *count);
            for (size_t d = 0; d < dim; d++)
                for (size_t j = 0; j < cols; j++)
                    count[j] += a[d * inner + j] != 0;
        }
        for (size_t j = 0; j < cols; j++) {
            if (p->op == RILL_REDUCE_BOOL_COUNT)
                ((int64_t *)p->out)[item + j] = count[j];
            else
                ((uint8_t *)p->out)[item + j] =
                    p->op == RILL_REDUCE_BOOL_ANY ? count[j] > 0 : count[j] == (int64_t)dim;
        }
        item += cols;
    }
}

/* ---- arange ---- */

/* Slice [begin, end) of start + i * step, in uint64_t (wrapping), through
 * CONV to TO. */
#define ARANGE_RUN(name, TO, CONV)                                                                 \
    static void name(void *out, int64_t start, int64_t step, size_t begin, size_t end) {           \
        TO *o = out;                                                                               \
        for (size_t i = begin; i < end; i++)                                                       \
            o[i] = CONV((int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step));                \
    }

ARANGE_RUN(arange_u8, uint8_t, INT_TO_U8)
ARANGE_RUN(arange_i32, int32_t, INT_TO_I32)
ARANGE_RUN(arange_i64, int64_t, INT_TO_I64)
ARANGE_RUN(arange_f32, float, TO_F32)
ARANGE_RUN(arange_f64, double, TO_F64)
ARANGE_RUN(arange_b, uint8_t, AS_BOOL)

void rill__cpu_op_arange(const rill_block_ctx *ctx, const void *args) {
    typedef void (*arange_fn)(void *, int64_t, int64_t, size_t, size_t);
    static const arange_fn by_type[] = {
        [RILL_ELEMENT_U8] = arange_u8,   [RILL_ELEMENT_I32] = arange_i32,
        [RILL_ELEMENT_I64] = arange_i64, [RILL_ELEMENT_F32] = arange_f32,
        [RILL_ELEMENT_F64] = arange_f64, [RILL_ELEMENT_BOOL] = arange_b,
    };
    const rill__op_arange_args *p = args;
    size_t begin, end;
    select_slice(ctx, p->n, &begin, &end);
    if (begin < end && p->type <= RILL_ELEMENT_BOOL)
        by_type[p->type](p->out, p->start, p->step, begin, end);
}
