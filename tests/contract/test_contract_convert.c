/* SPDX-License-Identifier: MIT */
/* The conversion ops on the device under test (contract.h):
 * rill_op_convert between every pair of element types, with contiguous,
 * strided, broadcast and 0-d inputs, against a result computed here on the
 * host from rill.h's rules; rill_op_reduce_dim_bool (any, all, count) over
 * rows, columns and whole tensors; rill_op_arange into every type, its
 * values converted by the same rules; the order of the three on a busy
 * stream; and their refusals, each with its sentence. */
#include "contract.h"
#include "elements.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const reduce_names[3] = {"ANY", "ALL", "COUNT"};

static bool is_floating(rill_element_type t) {
    return t == RILL_ELEMENT_F32 || t == RILL_ELEMENT_F64;
}

/* ---- values of each type ---- */

/* The edges of each rule: zeros and NaNs of either sign, infinities, the
 * extremes, halves on either side of 0, the ends of the int32 and int64
 * ranges and the floats just inside them, values past them (3e9), and
 * integers that rounding to float or double moves (2^24 + 1, 2^53 + 1,
 * 2^62 + 2^38 + 1, which a detour through double rounds the other way). */
static const uint8_t pool_u8[] = {0, 1, 2, 127, 128, 254, 255};
/* Bytes read as bools: any not 0 is true. */
static const uint8_t pool_bool[] = {0, 1, 2, 127, 128, 255};
static const int32_t pool_i32[] = {
    INT32_MIN, INT32_MIN + 1, -16777217,  -256,          -129,     -1, 0, 1, 2, 127, 128, 255, 256,
    16777217,  16777219,      2147483520, INT32_MAX - 1, INT32_MAX};
static const int64_t pool_i64[] = {INT64_MIN,
                                   INT64_MIN + 1,
                                   -(((int64_t)1 << 62) + ((int64_t)1 << 38) + 1),
                                   -((int64_t)1 << 53) - 1,
                                   -((int64_t)1 << 31) - 1,
                                   -((int64_t)1 << 31),
                                   -256,
                                   -1,
                                   0,
                                   1,
                                   2,
                                   255,
                                   256,
                                   511,
                                   16777217,
                                   ((int64_t)1 << 31) - 1,
                                   (int64_t)1 << 31,
                                   (int64_t)1 << 32,
                                   ((int64_t)1 << 32) + 255,
                                   3000000000,
                                   ((int64_t)1 << 53) + 1,
                                   ((int64_t)1 << 53) + 3,
                                   ((int64_t)1 << 62) + ((int64_t)1 << 38) + 1,
                                   INT64_MAX - 1,
                                   INT64_MAX};
static const float pool_f32[] = {
    NAN,           -NAN,     -INFINITY,    -FLT_MAX,      -0x1p63f,
    -3e9f,         -0x1p31f, -256.5f,      -1.5f,         -0.5f,
    -0.0f,         0.0f,     FLT_TRUE_MIN, 0.5f,          1.0f,
    1.5f,          255.7f,   256.0f,       256.5f,        16777216.0f,
    2147483520.0f, 0x1p31f,  3e9f,         4294967296.0f, 9223371487098961920.0f,
    0x1p63f,       FLT_MAX,  INFINITY};
static const double pool_f64[] = {NAN,
                                  -NAN,
                                  -INFINITY,
                                  -DBL_MAX,
                                  -1e300,
                                  -0x1p63 - 2048.0,
                                  -0x1p63,
                                  -3e9,
                                  -2147483649.0,
                                  -2147483648.5,
                                  -0x1p31,
                                  -256.5,
                                  -129.9,
                                  -1.5,
                                  -0.5,
                                  -0.0,
                                  0.0,
                                  DBL_TRUE_MIN,
                                  1e-50,
                                  0.5,
                                  1.0 + 0x1p-24,
                                  1.0 + 0x3p-24,
                                  1.5,
                                  255.7,
                                  256.5,
                                  16777217.0,
                                  2147483647.0,
                                  2147483647.5,
                                  0x1p31,
                                  3e9,
                                  4294967551.0,
                                  9007199254740992.0,
                                  9223372036854774784.0,
                                  0x1p63,
                                  (double)FLT_MAX,
                                  (double)FLT_MAX + 0x1p103,
                                  DBL_MAX,
                                  INFINITY};

typedef struct pool {
    const void *values;
    size_t count;
} pool;

static pool pool_of(rill_element_type t) {
    switch (t) {
    case RILL_ELEMENT_U8:
        return (pool){pool_u8, sizeof pool_u8 / sizeof pool_u8[0]};
    case RILL_ELEMENT_I32:
        return (pool){pool_i32, sizeof pool_i32 / sizeof pool_i32[0]};
    case RILL_ELEMENT_I64:
        return (pool){pool_i64, sizeof pool_i64 / sizeof pool_i64[0]};
    case RILL_ELEMENT_F32:
        return (pool){pool_f32, sizeof pool_f32 / sizeof pool_f32[0]};
    case RILL_ELEMENT_F64:
        return (pool){pool_f64, sizeof pool_f64 / sizeof pool_f64[0]};
    case RILL_ELEMENT_BOOL:
        return (pool){pool_bool, sizeof pool_bool / sizeof pool_bool[0]};
    }
    return (pool){NULL, 0};
}

/* n elements of t: element i is the pool's value at (i + i / count) % count
 * (every value at every position modulo the pool's size). */
static void *pool_values(rill_element_type t, size_t n) {
    pool p = pool_of(t);
    size_t es = type_size(t);
    char *h = malloc(n * es);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++)
        memcpy(h + i * es, (const char *)p.values + (i + i / p.count) % p.count * es, es);
    return h;
}

/* ---- the rules, on the host ---- */

/* A floating value to int64: rounded toward zero; NaN and values outside
 * [-2^63, 2^63) give INT64_MIN. The cast only sees values in range. */
static int64_t float_to_i64(double f) {
    if (isnan(f) || f < -0x1p63 || f >= 0x1p63)
        return INT64_MIN;
    return (int64_t)f;
}

/* The same for int32: values outside (-2^31 - 1, 2^31) give INT32_MIN. */
static int32_t float_to_i32(double f) {
    if (isnan(f) || f <= -0x1p31 - 1.0 || f >= 0x1p31)
        return INT32_MIN;
    return (int32_t)f;
}

/* The bits of x converted to out by rill.h's rules. Integers keep their
 * low bits (stored here from the two's complement of the int64); int64
 * converts to float in one rounding, as C's conversion does. */
static uint64_t host_convert(rill_element_type out, number x) {
    switch (out) {
    case RILL_ELEMENT_BOOL:
        return x.is_float ? x.f != 0.0 : x.i != 0; /* NaN != 0 */
    case RILL_ELEMENT_U8:
    case RILL_ELEMENT_I64:
        return (uint64_t)(x.is_float ? float_to_i64(x.f) : x.i);
    case RILL_ELEMENT_I32:
        return x.is_float ? (uint64_t)(uint32_t)float_to_i32(x.f) : (uint64_t)x.i;
    case RILL_ELEMENT_F32: {
        float v = x.is_float ? (float)x.f : (float)x.i;
        uint32_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
    case RILL_ELEMENT_F64: {
        double v = x.is_float ? x.f : (double)x.i;
        uint64_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
    }
    return 0;
}

static bool is_nan_bits(rill_element_type t, uint64_t bits) {
    if (t == RILL_ELEMENT_F32)
        return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0;
    if (t == RILL_ELEMENT_F64)
        return (bits & 0x7ff0000000000000u) == 0x7ff0000000000000u &&
               (bits & 0x000fffffffffffffu) != 0;
    return false;
}

/* got against want, element by element: the same bits, but any NaN where
 * want is a NaN (rill.h leaves a NaN's payload open); src[i] is element
 * i's input, for the message. */
static void expect_converted(const char *what, rill_element_type out_type, const void *got,
                             const void *want, const uint64_t *src, size_t n) {
    size_t width = type_size(out_type);
    for (size_t i = 0; i < n; i++) {
        uint64_t g = bits_at(got, i, width), w = bits_at(want, i, width);
        if (g == w || (is_nan_bits(out_type, w) && is_nan_bits(out_type, g)))
            continue;
        fail_msg("%s: element %zu of %zu (input bits 0x%" PRIx64 ") has bits 0x%" PRIx64
                 ", want 0x%" PRIx64,
                 what, i, n, src[i], g, w);
    }
}

/* ---- device memory ---- */

/* ---- convert ---- */

/* A layout of in: the element at index (i[0], ..) is at sum of i[d] *
 * strides[d] elements. */
typedef struct layout {
    const char *name;
    size_t ndim;
    size_t shape[RILL_OP_MAX_DIMS];
    size_t strides[RILL_OP_MAX_DIMS];
} layout;

static size_t layout_count(const layout *l) {
    size_t n = 1;
    for (size_t d = 0; d < l->ndim; d++)
        n *= l->shape[d];
    return n;
}

/* The elements of in that l reaches: 1 + the largest offset. */
static size_t layout_extent(const layout *l) {
    size_t last = 0;
    for (size_t d = 0; d < l->ndim; d++)
        last += (l->shape[d] - 1) * l->strides[d];
    return last + 1;
}

/* The offset of the k-th index of l in row-major order. */
static size_t layout_offset(const layout *l, size_t k) {
    size_t off = 0;
    for (size_t d = l->ndim; d-- > 0;) {
        off += k % l->shape[d] * l->strides[d];
        k /= l->shape[d];
    }
    return off;
}

/* Runs rill_op_convert from in_type to out_type over l, the input from the
 * pool of in_type, and checks each output element against the host's and
 * the guard after the output. */
static void check_convert(rill_stream *s, rill_element_type in_type, rill_element_type out_type,
                          const layout *l) {
    size_t n = layout_count(l), extent = layout_extent(l);
    size_t ies = type_size(in_type), oes = type_size(out_type);
    void *hin = pool_values(in_type, extent);
    unsigned char *want = malloc(n * oes), *got = malloc(n * oes + GUARD);
    uint64_t *src = malloc(n * sizeof *src);
    assert_true(want != NULL && got != NULL && src != NULL);
    for (size_t k = 0; k < n; k++) {
        size_t off = layout_offset(l, k);
        src[k] = bits_at(hin, off, ies);
        store_bits(want, k, oes, host_convert(out_type, load(in_type, hin, off)));
    }
    void *in = device_copy(s, hin, extent * ies), *out = guarded_out(s, n * oes);
    RT_OK(rill_op_convert(s, out_type, out, in_type, in, l->strides, l->shape, l->ndim));
    contract_download(s, got, out, n * oes + GUARD);
    char what[160];
    snprintf(what, sizeof what, "%s to %s, %s", type_names[in_type], type_names[out_type], l->name);
    expect_converted(what, out_type, got, want, src, n);
    expect_guard(what, got, n * oes);
    RT_OK(rill_free(in));
    RT_OK(rill_free(out));
    free(hin);
    free(want);
    free(got);
    free(src);
}

/* "out[i] = in at i converted from in_type to out_type", contiguous, for
 * every pair of types over every value of the input's pool: one element,
 * odd lengths and several blocks; nothing past out is written. */
static void test_convert_every_pair(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t sizes[] = {1, 7, 4099, LARGE};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        char name[48];
        snprintf(name, sizeof name, "contiguous, n %zu", sizes[z]);
        layout l = {name, 1, {sizes[z]}, {1}};
        for (size_t i = 0; i < N_TYPES; i++)
            for (size_t o = 0; o < N_TYPES; o++)
                check_convert(s, all_types[i], all_types[o], &l);
    }
    RT_OK(rill_stream_destroy(s));
}

/* Each rule with its answer written out, one element per call (ndim 0). */
typedef struct rule_case {
    rill_element_type in;
    int64_t in_i; /* the input of an integer or bool type (a bool's byte) */
    double in_f;  /* the input of a floating type */
    rill_element_type out;
    int64_t want_i; /* the output of an integer or bool type */
    double want_f;  /* the output of a floating type (exact in it) */
} rule_case;

#define U8   RILL_ELEMENT_U8
#define I32  RILL_ELEMENT_I32
#define I64  RILL_ELEMENT_I64
#define F32  RILL_ELEMENT_F32
#define F64  RILL_ELEMENT_F64
#define BOOL RILL_ELEMENT_BOOL
/* integer to integer, integer to floating, floating to integer, floating
 * to floating */
#define II(in, x, out, w)                                                                          \
    { in, x, 0.0, out, w, 0.0 }
#define IF(in, x, out, w)                                                                          \
    { in, x, 0.0, out, 0, w }
#define FI(in, x, out, w)                                                                          \
    { in, 0, x, out, w, 0.0 }
#define FF(in, x, out, w)                                                                          \
    { in, 0, x, out, 0, w }

static const rule_case rule_cases[] = {
    /* to BOOL: 1 where not 0, NaN included; 2^32 and 256 are not 0 */
    FI(F32, NAN, BOOL, 1),
    FI(F64, -NAN, BOOL, 1),
    FI(F32, -0.0, BOOL, 0),
    FI(F64, 0.25, BOOL, 1),
    FI(F64, DBL_TRUE_MIN, BOOL, 1),
    FI(F32, -INFINITY, BOOL, 1),
    II(I64, (int64_t)1 << 32, BOOL, 1),
    II(I32, 256, BOOL, 1),
    II(U8, 2, BOOL, 1),
    II(BOOL, 255, BOOL, 1),
    II(I64, 0, BOOL, 0),
    /* from BOOL: any byte not 0 is 1 */
    II(BOOL, 2, U8, 1),
    II(BOOL, 128, I32, 1),
    II(BOOL, 255, I64, 1),
    II(BOOL, 0, I64, 0),
    IF(BOOL, 2, F32, 1.0),
    IF(BOOL, 255, F64, 1.0),
    IF(BOOL, 0, F64, 0.0),
    /* between integers: the low bits */
    II(I32, -1, U8, 255),
    II(I32, 256, U8, 0),
    II(I64, 0x1ff, U8, 255),
    II(I64, ((int64_t)1 << 32) + 5, I32, 5),
    II(I64, -((int64_t)1 << 31) - 1, I32, INT32_MAX),
    II(I64, INT64_MIN, I32, 0),
    II(I32, -1, I64, -1),
    II(U8, 255, I32, 255),
    II(U8, 128, I64, 128),
    /* integer to floating: rounded to nearest, int64 to float directly */
    IF(I64, ((int64_t)1 << 53) + 1, F32, 0x1p53),
    IF(I64, ((int64_t)1 << 62) + ((int64_t)1 << 38) + 1, F32, 0x1.000002p62),
    IF(I64, -(((int64_t)1 << 62) + ((int64_t)1 << 38) + 1), F32, -0x1.000002p62),
    IF(I64, ((int64_t)1 << 62) + ((int64_t)1 << 38), F32, 0x1p62),
    IF(I64, INT64_MAX, F32, 0x1p63),
    IF(I64, INT64_MIN, F32, -0x1p63),
    IF(I64, 16777217, F32, 16777216.0),
    IF(I64, 16777219, F32, 16777220.0),
    IF(I32, INT32_MAX, F32, 0x1p31),
    IF(I32, -16777217, F32, -16777216.0),
    IF(I64, ((int64_t)1 << 53) + 1, F64, 0x1p53),
    IF(I64, ((int64_t)1 << 53) + 3, F64, 0x1p53 + 4.0),
    IF(I64, INT64_MAX, F64, 0x1p63),
    IF(I64, 0, F64, 0.0),
    IF(U8, 255, F32, 255.0),
    /* double to float: rounded to nearest, ties to even, overflow to inf */
    FF(F64, 1.0 + 0x1p-24, F32, 1.0),
    FF(F64, 1.0 + 0x3p-24, F32, 1.0 + 0x1p-22),
    FF(F64, (double)FLT_MAX + 0x1p102, F32, (double)FLT_MAX),
    FF(F64, (double)FLT_MAX + 0x1p103, F32, INFINITY),
    FF(F64, -DBL_MAX, F32, -INFINITY),
    FF(F64, 1e-50, F32, 0.0),
    FF(F64, -1e-50, F32, -0.0),
    FF(F64, -0.0, F32, -0.0),
    FF(F64, NAN, F32, NAN),
    FF(F32, 0.1f, F64, (double)0.1f),
    FF(F32, -INFINITY, F64, -INFINITY),
    FF(F32, -NAN, F64, NAN),
    /* floating to int32: toward zero; NaN and out of range INT32_MIN */
    FI(F64, 2147483647.9, I32, INT32_MAX),
    FI(F64, 0x1p31, I32, INT32_MIN),
    FI(F64, -2147483647.9, I32, -2147483647),
    FI(F64, -2147483648.9, I32, INT32_MIN),
    FI(F64, -2147483649.0, I32, INT32_MIN),
    FI(F64, -0.5, I32, 0),
    FI(F64, 1.5, I32, 1),
    FI(F64, -1.5, I32, -1),
    FI(F64, 3e9, I32, INT32_MIN),
    FI(F64, -INFINITY, I32, INT32_MIN),
    FI(F64, 1e300, I32, INT32_MIN),
    FI(F32, NAN, I32, INT32_MIN),
    FI(F32, 2147483520.0, I32, 2147483520),
    FI(F32, -0x1p31, I32, INT32_MIN),
    FI(F32, 0x1p31, I32, INT32_MIN),
    /* floating to int64 */
    FI(F64, 9223372036854774784.0, I64, 9223372036854774784),
    FI(F64, 0x1p63, I64, INT64_MIN),
    FI(F64, -0x1p63, I64, INT64_MIN),
    FI(F64, -0x1p63 - 2048.0, I64, INT64_MIN),
    FI(F64, -9223372036854774784.0, I64, -9223372036854774784),
    FI(F64, 3e9, I64, 3000000000),
    FI(F64, -255.7, I64, -255),
    FI(F64, NAN, I64, INT64_MIN),
    FI(F64, INFINITY, I64, INT64_MIN),
    FI(F32, 9223371487098961920.0, I64, 9223371487098961920),
    FI(F32, 0x1p63, I64, INT64_MIN),
    FI(F32, -3e9, I64, -3000000000),
    /* floating to U8: the low byte of the int64 result */
    FI(F64, -1.5, U8, 255),
    FI(F64, 256.5, U8, 0),
    FI(F64, 3e9, U8, 0),
    FI(F64, NAN, U8, 0),
    FI(F64, 255.7, U8, 255),
    FI(F64, -0.5, U8, 0),
    FI(F64, -129.9, U8, 127),
    FI(F64, 4294967551.0, U8, 255),
    FI(F64, 1e300, U8, 0),
    FI(F32, -1.5, U8, 255),
    FI(F32, 256.5, U8, 0),
    FI(F32, 3e9, U8, 0),
    FI(F32, -NAN, U8, 0),
    FI(F32, 300.0, U8, 44),
};

#undef II
#undef IF
#undef FI
#undef FF

/* The bits of a rule case's value of type t. */
static uint64_t case_bits(rill_element_type t, int64_t i, double f) {
    if (t == F32) {
        float v = (float)f;
        if (!isnan(f))
            assert_true((double)v == f); /* the table's values are floats */
        uint32_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
    if (t == F64) {
        uint64_t b;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    return (uint64_t)i;
}

/* rill.h's rules with the answers written out: to and from BOOL, the low
 * bits, rounding to nearest (int64 to float in one rounding: 2^62 + 2^38 +
 * 1 gives 2^62 + 2^39, where a detour through double gives 2^62), and
 * floating to integer toward zero with NaN and overflow at the lowest
 * value (U8: -1.5 gives 255, 256.5 and 3e9 give 0). Each is a call of
 * ndim 0 (shape and strides NULL). */
static void test_convert_rules_written_out(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t count = sizeof rule_cases / sizeof rule_cases[0];
    char *in = contract_alloc(s, count * 8), *out = guarded_out(s, count * 8);
    unsigned char hin[8];
    for (size_t c = 0; c < count; c++) {
        const rule_case *r = &rule_cases[c];
        size_t ies = type_size(r->in);
        store_bits(hin, 0, ies, case_bits(r->in, r->in_i, r->in_f));
        contract_upload(s, in + c * 8, hin, ies);
        RT_OK(rill_op_convert(s, r->out, out + c * 8, r->in, in + c * 8, NULL, NULL, 0));
    }
    unsigned char *all = malloc(count * 8 + GUARD);
    assert_non_null(all);
    contract_download(s, all, out, count * 8 + GUARD);
    for (size_t c = 0; c < count; c++) {
        const rule_case *r = &rule_cases[c];
        size_t oes = type_size(r->out);
        uint64_t mask = oes == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * oes)) - 1;
        uint64_t want = case_bits(r->out, r->want_i, r->want_f) & mask;
        uint64_t bits = bits_at(all + c * 8, 0, oes), src = case_bits(r->in, r->in_i, r->in_f);
        bool ok = is_nan_bits(r->out, want) ? is_nan_bits(r->out, bits) : bits == want;
        if (!ok)
            fail_msg("case %zu: %s bits 0x%" PRIx64 " (%.17g) to %s gave bits 0x%" PRIx64
                     ", want 0x%" PRIx64,
                     c, type_names[r->in], src, is_floating(r->in) ? r->in_f : (double)r->in_i,
                     type_names[r->out], bits, want);
        /* the rest of the 8 bytes after the element are as they were */
        for (size_t k = oes; k < 8; k++)
            if (all[c * 8 + k] != GUARD_BYTE)
                fail_msg("case %zu: byte %zu past its element was written", c, k - oes);
    }
    expect_guard("rule cases", all, count * 8);
    free(all);
    RT_OK(rill_free(in));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* "in strided in its elements (strides 0: broadcasting)": transposed,
 * broadcast along either dimension or everywhere, slices with gaps, and
 * RILL_OP_MAX_DIMS dimensions (permuted, with strides 0 and gaps), for
 * every pair of types; some over several blocks. */
static void test_convert_strided(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const layout layouts[] = {
        {"transposed [181, 187]", 2, {181, 187}, {1, 181}},
        {"row broadcast [181, 187]", 2, {181, 187}, {0, 1}},
        {"column broadcast [181, 187]", 2, {181, 187}, {1, 0}},
        {"0-d broadcast [37, 41]", 2, {37, 41}, {0, 0}},
        {"slice with gaps [300, 257]", 2, {300, 257}, {600, 2}},
        {"slice with gaps [7, 9, 11]", 3, {7, 9, 11}, {397, 41, 3}},
        {"6-d contiguous", 6, {2, 3, 4, 5, 3, 2}, {360, 120, 30, 6, 2, 1}},
        {"6-d permuted", 6, {2, 3, 4, 5, 3, 2}, {72, 12, 1, 144, 4, 36}},
        {"6-d with strides 0 and gaps", 6, {3, 1, 4, 2, 5, 7}, {0, 999, 61, 0, 11, 2}},
        {"dims of 1 with odd strides", 4, {1, 5, 1, 3}, {7, 4, 13, 1}},
    };
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
        for (size_t i = 0; i < N_TYPES; i++)
            for (size_t o = 0; o < N_TYPES; o++)
                check_convert(s, all_types[i], all_types[o], &layouts[l]);
    RT_OK(rill_stream_destroy(s));
}

/* "ndim 0: one element; shape and strides may then be NULL": every value
 * of every type to every type, one call each, into neighbouring elements
 * of out; and shape [1, 1, 1], whose strides reach nothing past the
 * element. */
static void test_convert_zero_dims(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    char what[64];
    for (size_t i = 0; i < N_TYPES; i++) {
        rill_element_type it = all_types[i];
        size_t ies = type_size(it);
        pool p = pool_of(it);
        size_t m = p.count;
        char *in = device_copy(s, p.values, m * ies);
        uint64_t *src = malloc(m * sizeof *src);
        assert_non_null(src);
        for (size_t j = 0; j < m; j++)
            src[j] = bits_at(p.values, j, ies);
        for (size_t o = 0; o < N_TYPES; o++) {
            rill_element_type ot = all_types[o];
            size_t oes = type_size(ot);
            char *out = guarded_out(s, m * oes);
            unsigned char *got = malloc(m * oes + GUARD), *want = malloc(m * oes);
            assert_true(got != NULL && want != NULL);
            for (size_t j = 0; j < m; j++) {
                RT_OK(rill_op_convert(s, ot, out + j * oes, it, in + j * ies, NULL, NULL, 0));
                store_bits(want, j, oes, host_convert(ot, load(it, p.values, j)));
            }
            contract_download(s, got, out, m * oes + GUARD);
            snprintf(what, sizeof what, "%s to %s, ndim 0", type_names[i], type_names[o]);
            expect_converted(what, ot, got, want, src, m);
            expect_guard(what, got, m * oes);
            /* [1, 1, 1] with strides that do not matter, in reverse */
            size_t ones[3] = {1, 1, 1}, odd[3] = {5, 3, 2};
            for (size_t j = 0; j < m; j++)
                RT_OK(rill_op_convert(s, ot, out + j * oes, it, in + (m - 1 - j) * ies, odd, ones,
                                      3));
            for (size_t j = 0; j < m; j++) {
                store_bits(want, j, oes, host_convert(ot, load(it, p.values, m - 1 - j)));
                src[j] = bits_at(p.values, m - 1 - j, ies);
            }
            contract_download(s, got, out, m * oes + GUARD);
            snprintf(what, sizeof what, "%s to %s, shape [1, 1, 1]", type_names[i], type_names[o]);
            expect_converted(what, ot, got, want, src, m);
            expect_guard(what, got, m * oes);
            for (size_t j = 0; j < m; j++)
                src[j] = bits_at(p.values, j, ies);
            RT_OK(rill_free(out));
            free(got);
            free(want);
        }
        RT_OK(rill_free(in));
        free(src);
    }
    RT_OK(rill_stream_destroy(s));
}

/* ---- reduce_dim_bool ---- */

static const uint8_t true_bytes[3] = {1, 2, 255};

/* [outer, dim, inner] bytes: the column (o, i) is, by (o * inner + i) % 5,
 * random bytes of 0, 1, 2 and 255; all 0; all not 0; 0 but for one byte;
 * not 0 but for one byte. */
static uint8_t *bool_tensor(size_t outer, size_t dim, size_t inner, uint64_t seed) {
    uint8_t *h = malloc(outer * dim * inner);
    assert_non_null(h);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t mode = (o * inner + i) % 5, odd_one = (size_t)(next_bits(&seed) % dim);
            for (size_t d = 0; d < dim; d++) {
                uint64_t r = next_bits(&seed);
                uint8_t v = true_bytes[r % 3], b;
                switch (mode) {
                case 0:
                    b = (r >> 8) % 2 ? v : 0;
                    break;
                case 1:
                    b = 0;
                    break;
                case 2:
                    b = v;
                    break;
                case 3:
                    b = d == odd_one ? v : 0;
                    break;
                default:
                    b = d == odd_one ? 0 : v;
                    break;
                }
                h[(o * dim + d) * inner + i] = b;
            }
        }
    return h;
}

/* Every op over [outer, dim, inner] against the host's counts; ANY and ALL
 * into an odd address (their bytes need no alignment); nothing past out
 * (or before it) is written. */
static void check_reduce(rill_stream *s, size_t outer, size_t dim, size_t inner, uint64_t seed) {
    size_t outputs = outer * inner, count = outer * dim * inner;
    uint8_t *h = bool_tensor(outer, dim, inner, seed);
    int64_t *counts = calloc(outputs, sizeof *counts);
    assert_non_null(counts);
    for (size_t o = 0; o < outer; o++)
        for (size_t d = 0; d < dim; d++)
            for (size_t i = 0; i < inner; i++)
                counts[o * inner + i] += h[(o * dim + d) * inner + i] != 0;
    uint8_t *a = device_copy(s, h, count);
    unsigned char *got = malloc(outputs * 8 + 1 + GUARD);
    assert_non_null(got);
    char what[128];
    for (int op = RILL_REDUCE_BOOL_ANY; op <= RILL_REDUCE_BOOL_COUNT; op++) {
        bool is_count = op == RILL_REDUCE_BOOL_COUNT;
        size_t lead = is_count ? 0 : 1, bytes = outputs * (is_count ? 8 : 1);
        unsigned char *out = guarded_out(s, lead + bytes);
        RT_OK(
            rill_op_reduce_dim_bool(s, (rill_reduce_bool_op)op, out + lead, a, outer, dim, inner));
        contract_download(s, got, out, lead + bytes + GUARD);
        snprintf(what, sizeof what, "%s over [%zu, %zu, %zu]", reduce_names[op], outer, dim, inner);
        for (size_t k = 0; k < outputs; k++) {
            int64_t want = counts[k];
            if (op == RILL_REDUCE_BOOL_ANY)
                want = counts[k] > 0;
            else if (op == RILL_REDUCE_BOOL_ALL)
                want = counts[k] == (int64_t)dim;
            int64_t g = is_count ? (int64_t)bits_at(got, k, 8) : got[lead + k];
            if (g != want)
                fail_msg("%s: output %zu (o %zu, i %zu) is %" PRId64 ", want %" PRId64 " (%" PRId64
                         " of %zu bytes not 0)",
                         what, k, k / inner, k % inner, g, want, counts[k], dim);
        }
        if (lead != 0 && got[0] != GUARD_BYTE)
            fail_msg("%s: the byte before out was written", what);
        expect_guard(what, got + lead, bytes);
        RT_OK(rill_free(out));
    }
    RT_OK(rill_free(a));
    free(h);
    free(counts);
    free(got);
}

/* "Reduces the middle dimension of a ... any, all and the sum of a bool
 * tensor": whole tensors [1, n, 1] (n 1, a few, several blocks), rows
 * [outer, dim, 1], columns with inner past 256 and no multiple of it, and
 * inner 1 to 3; every byte not 0 (1, 2, 255) counts, and columns all 0,
 * all not 0, and all but one either way, meet ANY's and ALL's edges. */
static void test_reduce_bool(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t shapes[][3] = {
        {1, 1, 1},      {1, 2, 1},     {1, 255, 1},
        {1, 4099, 1},   {1, LARGE, 1}, {1, ((size_t)1 << 20) + 3, 1},
        {3, 1, 1},      {1000, 37, 1}, {257, 300, 1},
        {5, 1, 3},      {50, 33, 2},   {31, 64, 3},
        {7, 1000, 1},   {3, 17, 300},  {2, 5, 513},
        {1, 7, 257},    {4, 9, 1000},  {1, 1, 777},
        {2, 129, 1031},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_reduce(s, shapes[k][0], shapes[k][1], shapes[k][2], 1000 + k);
    /* whole tensors all 0 and all not 0 */
    for (int fill = 0; fill < 2; fill++) {
        size_t n = LARGE;
        uint8_t *h = malloc(n);
        assert_non_null(h);
        for (size_t i = 0; i < n; i++)
            h[i] = fill ? true_bytes[i % 3] : 0;
        uint8_t *a = device_copy(s, h, n);
        unsigned char *out = guarded_out(s, 8), got[8 + GUARD];
        for (int op = RILL_REDUCE_BOOL_ANY; op <= RILL_REDUCE_BOOL_COUNT; op++) {
            RT_OK(rill_op_reduce_dim_bool(s, (rill_reduce_bool_op)op, out, a, 1, n, 1));
            contract_download(s, got, out, 8 + GUARD);
            size_t width = op == RILL_REDUCE_BOOL_COUNT ? 8 : 1;
            uint64_t want = op == RILL_REDUCE_BOOL_COUNT ? (fill ? n : 0) : (uint64_t)fill;
            if (bits_at(got, 0, width) != want)
                fail_msg("%s over %zu bytes %s: %" PRIu64 ", want %" PRIu64, reduce_names[op], n,
                         fill ? "not 0" : "0", bits_at(got, 0, width), want);
            for (size_t b = width; b < 8 + GUARD; b++)
                if (got[b] != GUARD_BYTE)
                    fail_msg("%s: byte %zu past the output was written", reduce_names[op],
                             b - width);
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        free(h);
    }
    RT_OK(rill_stream_destroy(s));
}

/* ---- arange ---- */

/* The bits of element i of rill_op_arange(type, start, step): start + i *
 * step in uint64_t (wrapping), read as int64, then converted: integers take
 * the low bits, F32 and F64 the int64 rounded to nearest in one step (C's
 * conversion), BOOL 1 where the value is not 0. */
static uint64_t arange_want(rill_element_type type, int64_t start, int64_t step, size_t i) {
    uint64_t u = (uint64_t)start + (uint64_t)i * (uint64_t)step;
    int64_t v;
    memcpy(&v, &u, sizeof v);
    switch (type) {
    case RILL_ELEMENT_U8:
        return u & 0xffu;
    case RILL_ELEMENT_I32:
        return u & 0xffffffffu;
    case RILL_ELEMENT_I64:
        return u;
    case RILL_ELEMENT_F32: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    case RILL_ELEMENT_F64: {
        double f = (double)v;
        uint64_t b;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    case RILL_ELEMENT_BOOL:
        return u != 0;
    }
    return 0;
}

/* Runs rill_op_arange of n elements of type lead bytes into fresh memory
 * and checks each element against arange_want, and that the lead bytes
 * and the guard after the output are as they were. */
static void check_arange(rill_stream *s, rill_element_type type, int64_t start, int64_t step,
                         size_t n, size_t lead) {
    size_t es = type_size(type), bytes = lead + n * es;
    unsigned char *out = guarded_out(s, bytes), *got = malloc(bytes + GUARD);
    assert_non_null(got);
    RT_OK(rill_op_arange(s, type, out + lead, start, step, n));
    contract_download(s, got, out, bytes + GUARD);
    char what[160];
    snprintf(what, sizeof what, "%s arange from %" PRId64 " by %" PRId64 ", n %zu at +%zu",
             type_names[type], start, step, n, lead);
    for (size_t k = 0; k < lead; k++)
        if (got[k] != GUARD_BYTE)
            fail_msg("%s: byte %zu before out was written (0x%02x)", what, k, got[k]);
    for (size_t i = 0; i < n; i++) {
        uint64_t g = bits_at(got + lead, i, es), w = arange_want(type, start, step, i);
        if (g != w)
            fail_msg("%s: element %zu has bits 0x%" PRIx64 ", want 0x%" PRIx64, what, i, g, w);
    }
    expect_guard(what, got + lead, n * es);
    RT_OK(rill_free(out));
    free(got);
}

/* Starts and steps: up and down, step 0, sums that wrap past INT64_MAX and
 * INT64_MIN (in i * step too), low bits that stay 0 or 255 (steps of 256
 * and 2^32), the int32 edge, values past 2^24 and 2^53 (where F32 and F64
 * round), 2^62 + 2^38 + 1 (which a detour through double rounds the other
 * way), and a large odd step. */
static const int64_t arange_cases[][2] = {
    {0, 1},
    {5, -3},
    {-1000, 7},
    {42, 0},
    {-7, 0},
    {0, 0},
    {INT64_MAX - 3, 1},
    {INT64_MIN + 3, -1},
    {INT64_MAX, INT64_MAX},
    {INT64_MIN, INT64_MIN},
    {INT64_MIN, -1},
    {255, 256},
    {0, 256},
    {0, (int64_t)1 << 32},
    {-((int64_t)1 << 31) - 2, 1},
    {((int64_t)1 << 31) - 3, 1},
    {((int64_t)1 << 24) - 5, 1},
    {-((int64_t)1 << 24) + 5, -1},
    {((int64_t)1 << 24) + 1, 3},
    {((int64_t)1 << 53) - 5, 1},
    {-((int64_t)1 << 53) + 5, -3},
    {((int64_t)1 << 62) + ((int64_t)1 << 38) - 3, 1},
    {((int64_t)1 << 40) + 1, 1000003},
    {0, ((int64_t)1 << 50) + 3},
    {123456789, -987654321987},
    {0x0123456789abcdef, 0x7edcba9876543211},
};

/* "out[i] = start + i * step ... converted to type by rill_op_convert's
 * rules", for every type and case: one element, odd lengths and several
 * blocks; 1-byte types at odd addresses; nothing outside out is written. */
static void test_arange_every_type(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t sizes[] = {1, 7, 4099, LARGE};
    size_t count = sizeof arange_cases / sizeof arange_cases[0];
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (size_t t = 0; t < N_TYPES; t++)
            for (size_t c = 0; c < count; c++) {
                size_t es = type_size(all_types[t]);
                size_t lead = es == 1 ? 1 + 2 * (c % 2) : es * (c % 2);
                check_arange(s, all_types[t], arange_cases[c][0], arange_cases[c][1], sizes[z],
                             lead);
            }
    RT_OK(rill_stream_destroy(s));
}

/* A few aranges with their elements written out. */
typedef struct arange_written {
    rill_element_type type;
    int64_t start, step;
    size_t n;
    int64_t want_i[5]; /* an integer or bool type's elements */
    double want_f[5];  /* a floating type's (exact in it) */
} arange_written;

#define AI(type, start, step, n, ...)                                                              \
    {                                                                                              \
        type, start, step, n, {__VA_ARGS__}, {                                                     \
            0                                                                                      \
        }                                                                                          \
    }
#define AF(type, start, step, n, ...)                                                              \
    {                                                                                              \
        type, start, step, n, {0}, {                                                               \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }

static const arange_written arange_written_cases[] = {
    AI(I64, 3, -2, 5, 3, 1, -1, -3, -5),
    AI(I64, 7, 0, 3, 7, 7, 7),
    AI(I64, INT64_MAX - 1, 1, 4, INT64_MAX - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1),
    AI(I64, INT64_MIN, -1, 3, INT64_MIN, INT64_MAX, INT64_MAX - 1),
    AI(I64, 0, INT64_MIN, 4, 0, INT64_MIN, 0, INT64_MIN),
    AI(I64, 1, INT64_MAX, 3, 1, INT64_MIN, -1),
    /* I32: the low 32 bits */
    AI(I32, INT64_MAX, 1, 3, -1, 0, 1),
    AI(I32, INT32_MAX - 1, 1, 4, INT32_MAX - 1, INT32_MAX, INT32_MIN, INT32_MIN + 1),
    AI(I32, 0, ((int64_t)1 << 32) + 1, 3, 0, 1, 2),
    AI(I32, -2, -1, 3, -2, -3, -4),
    /* U8: the low byte */
    AI(U8, 254, 1, 4, 254, 255, 0, 1),
    AI(U8, -2, -1, 3, 254, 253, 252),
    AI(U8, 0, 256, 3, 0, 0, 0),
    AI(U8, 300, -300, 3, 44, 0, 212),
    /* BOOL: 1 where the value is not 0, whatever its low bytes */
    AI(BOOL, -2, 1, 4, 1, 1, 0, 1),
    AI(BOOL, 0, 256, 3, 0, 1, 1),
    AI(BOOL, 0, (int64_t)1 << 32, 3, 0, 1, 1),
    AI(BOOL, INT64_MIN, INT64_MIN, 4, 1, 0, 1, 0),
    /* F32: exact to 2^24, then rounded to nearest, ties to even */
    AF(F32, 10, -4, 4, 10.0, 6.0, 2.0, -2.0),
    AF(F32, 0, 0, 2, 0.0, 0.0),
    AF(F32, ((int64_t)1 << 24) - 1, 1, 5, 16777215.0, 16777216.0, 16777216.0, 16777218.0,
       16777220.0),
    AF(F32, -((int64_t)1 << 24) + 1, -1, 5, -16777215.0, -16777216.0, -16777216.0, -16777218.0,
       -16777220.0),
    /* one rounding from int64: 2^62 + 2^38 + 1 up, 2^62 + 2^38 (a tie) down */
    AF(F32, ((int64_t)1 << 62) + ((int64_t)1 << 38) + 1, -1, 2, 0x1.000002p62, 0x1p62),
    AF(F32, INT64_MAX, 1, 2, 0x1p63, -0x1p63),
    /* F64: exact to 2^53, then rounded */
    AF(F64, -3, 2, 4, -3.0, -1.0, 1.0, 3.0),
    AF(F64, ((int64_t)1 << 53) - 1, 1, 5, 0x1p53 - 1.0, 0x1p53, 0x1p53, 0x1p53 + 2.0, 0x1p53 + 4.0),
    AF(F64, INT64_MAX, 1, 2, 0x1p63, -0x1p63),
    AF(F64, INT64_MAX - 1535, 1, 2, 0x1p63 - 2048.0, 0x1p63 - 1024.0),
};

#undef AI
#undef AF

/* The rules with the answers written out: each case into a slot of 40
 * bytes of one buffer (1-byte types at an odd address), the rest of the
 * slot as it was. The host reference gives the same answers. */
static void test_arange_written_out(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { SLOT = 40 };
    size_t count = sizeof arange_written_cases / sizeof arange_written_cases[0];
    unsigned char *out = guarded_out(s, count * SLOT), *got = malloc(count * SLOT + GUARD);
    assert_non_null(got);
    for (size_t c = 0; c < count; c++) {
        const arange_written *a = &arange_written_cases[c];
        size_t lead = type_size(a->type) == 1 ? 1 : 0;
        RT_OK(rill_op_arange(s, a->type, out + c * SLOT + lead, a->start, a->step, a->n));
    }
    contract_download(s, got, out, count * SLOT + GUARD);
    for (size_t c = 0; c < count; c++) {
        const arange_written *a = &arange_written_cases[c];
        size_t es = type_size(a->type), lead = es == 1 ? 1 : 0;
        uint64_t mask = es == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * es)) - 1;
        const unsigned char *slot = got + c * SLOT;
        for (size_t i = 0; i < a->n; i++) {
            uint64_t want = case_bits(a->type, a->want_i[i], a->want_f[i]) & mask;
            uint64_t g = bits_at(slot + lead, i, es);
            if (g != want)
                fail_msg("case %zu: %s arange from %" PRId64 " by %" PRId64
                         ", element %zu has bits 0x%" PRIx64 ", want 0x%" PRIx64,
                         c, type_names[a->type], a->start, a->step, i, g, want);
            if (arange_want(a->type, a->start, a->step, i) != want)
                fail_msg("case %zu, element %zu: the host reference gives 0x%" PRIx64
                         ", want 0x%" PRIx64,
                         c, i, arange_want(a->type, a->start, a->step, i), want);
        }
        for (size_t k = 0; k < SLOT; k++)
            if ((k < lead || k >= lead + a->n * es) && slot[k] != GUARD_BYTE)
                fail_msg("case %zu: byte %zu of its slot, outside out, was written", c, k);
    }
    expect_guard("arange cases", got, count * SLOT);
    RT_OK(rill_free(out));
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* ---- order ---- */

/* "stream-ordered": a chain of ops queued behind 20 ms of work, each
 * reading what the one before wrote (a kernel's words as int32, convert
 * to double, to float, to U8, to BOOL, then count, any and all), and a
 * convert whose input a later kernel changes; each result is the chain's
 * once the stream is waited for. */
static void test_ordered_on_a_busy_stream(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { ROWS = 67, COLS = 1031 };
    size_t n = (size_t)ROWS * COLS, shape[1] = {n}, along[1] = {1};
    uint32_t *hx = malloc(n * 4);
    assert_non_null(hx);
    for (size_t i = 0; i < n; i++)
        hx[i] = (uint32_t)(i % 7 == 0 ? 0 : i * 2654435761u);
    uint32_t *x = device_copy(s, hx, n * 4), *flag = contract_words(s, 1, 0);
    double *d = guarded_out(s, n * 8);
    float *f = guarded_out(s, n * 4);
    uint8_t *u = guarded_out(s, n), *b = guarded_out(s, n), *any = guarded_out(s, ROWS);
    int64_t *y = guarded_out(s, n * 8), *total = guarded_out(s, 8);

    RT_OK(contract_spin(s, flag, 20000000)); /* busy for 20 ms */
    RT_OK(contract_scale(s, x, x, 3, n));
    RT_OK(rill_op_convert(s, F64, d, I32, x, along, shape, 1));
    RT_OK(rill_op_convert(s, F32, f, F64, d, along, shape, 1));
    RT_OK(rill_op_convert(s, U8, u, F32, f, along, shape, 1));
    RT_OK(rill_op_convert(s, BOOL, b, U8, u, along, shape, 1));
    RT_OK(rill_op_reduce_dim_bool(s, RILL_REDUCE_BOOL_COUNT, total, b, 1, n, 1));
    RT_OK(rill_op_reduce_dim_bool(s, RILL_REDUCE_BOOL_ANY, any, b, ROWS, COLS, 1));
    /* y gets x as it is now; the add after it does not reach y */
    RT_OK(rill_op_convert(s, I64, y, I32, x, along, shape, 1));
    RT_OK(contract_add(s, x, 1, n));

    double *hd = malloc(n * 8);
    float *hf = malloc(n * 4);
    uint8_t *hu = malloc(n), *hb = malloc(n), hany[ROWS];
    int64_t *hy = malloc(n * 8), htotal = 0;
    assert_true(hd != NULL && hf != NULL && hu != NULL && hb != NULL && hy != NULL);
    memset(hany, 0, sizeof hany);
    for (size_t i = 0; i < n; i++) {
        int32_t v;
        uint32_t scaled = hx[i] * 3u;
        memcpy(&v, &scaled, 4);
        hd[i] = v;
        hf[i] = (float)hd[i];
        hu[i] = (uint8_t)((uint64_t)float_to_i64(hf[i]) & 0xff);
        hb[i] = hu[i] != 0;
        htotal += hb[i];
        hany[i / COLS] |= hb[i];
        hy[i] = v;
    }
    unsigned char *got = malloc(n * 8 + GUARD);
    assert_non_null(got);
    contract_download(s, got, d, n * 8 + GUARD);
    assert_memory_equal(got, hd, n * 8);
    expect_guard("d", got, n * 8);
    contract_download(s, got, f, n * 4);
    assert_memory_equal(got, hf, n * 4);
    contract_download(s, got, u, n);
    assert_memory_equal(got, hu, n);
    contract_download(s, got, b, n);
    assert_memory_equal(got, hb, n);
    contract_download(s, got, any, ROWS);
    assert_memory_equal(got, hany, ROWS);
    int64_t gtotal;
    contract_download(s, &gtotal, total, 8);
    assert_int_equal(gtotal, htotal);
    assert_true(htotal > 0 && htotal < (int64_t)n);
    contract_download(s, got, y, n * 8);
    assert_memory_equal(got, hy, n * 8);
    uint32_t spun;
    contract_read(&spun, flag, 1);
    assert_int_equal(spun, 1);
    contract_download(s, got, x, n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t gx;
        memcpy(&gx, got + i * 4, 4);
        if (gx != hx[i] * 3u + 1u)
            fail_msg("x[%zu] is %u, want %u", i, gx, hx[i] * 3u + 1u);
    }
    RT_OK(rill_free(x));
    RT_OK(rill_free(flag));
    RT_OK(rill_free(d));
    RT_OK(rill_free(f));
    RT_OK(rill_free(u));
    RT_OK(rill_free(b));
    RT_OK(rill_free(any));
    RT_OK(rill_free(y));
    RT_OK(rill_free(total));
    free(hx);
    free(hd);
    free(hf);
    free(hu);
    free(hb);
    free(hy);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* "stream-ordered", for arange: behind 20 ms of work, a convert reads x,
 * an arange then writes x (its int32 values wrapping past INT32_MAX), and
 * a convert reads what it wrote; a bool arange with one 0 is read by a
 * count. The first convert sees x as it was. */
static void test_arange_ordered_on_a_busy_stream(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { ROWS = 67, COLS = 1031 };
    size_t n = (size_t)ROWS * COLS, shape[1] = {n}, along[1] = {1};
    const int64_t start = (int64_t)INT32_MAX - (int64_t)n + 1, step = 2;
    const int64_t bool_start = -(int64_t)(n / 3);
    int32_t *hx = malloc(n * 4);
    assert_non_null(hx);
    for (size_t i = 0; i < n; i++)
        hx[i] = (int32_t)(i % 1009) - 504;
    int32_t *x = device_copy(s, hx, n * 4);
    uint32_t *flag = contract_words(s, 1, 0);
    int64_t *y = guarded_out(s, n * 8), *total = guarded_out(s, 8);
    double *d = guarded_out(s, n * 8);
    uint8_t *b = guarded_out(s, n + 1);

    RT_OK(contract_spin(s, flag, 20000000)); /* busy for 20 ms */
    RT_OK(rill_op_convert(s, I64, y, I32, x, along, shape, 1));
    RT_OK(rill_op_arange(s, I32, x, start, step, n));
    RT_OK(rill_op_convert(s, F64, d, I32, x, along, shape, 1));
    RT_OK(rill_op_arange(s, BOOL, b + 1, bool_start, 1, n));
    RT_OK(rill_op_reduce_dim_bool(s, RILL_REDUCE_BOOL_COUNT, total, b + 1, 1, n, 1));

    double *hd = malloc(n * 8);
    int64_t *hy = malloc(n * 8);
    unsigned char *got = malloc(n * 8 + GUARD);
    assert_true(hd != NULL && hy != NULL && got != NULL);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)arange_want(I32, start, step, i);
        int32_t v;
        memcpy(&v, &bits, 4);
        hd[i] = v;
        hy[i] = hx[i];
    }
    assert_true(hd[0] > 0 && hd[n - 1] < 0); /* the values wrap */
    contract_download(s, got, y, n * 8 + GUARD);
    assert_memory_equal(got, hy, n * 8);
    expect_guard("y", got, n * 8);
    contract_download(s, got, d, n * 8 + GUARD);
    assert_memory_equal(got, hd, n * 8);
    expect_guard("d", got, n * 8);
    contract_download(s, got, b, n + 1 + GUARD);
    assert_int_equal(got[0], GUARD_BYTE);
    for (size_t i = 0; i < n; i++)
        if (got[1 + i] != (i != n / 3))
            fail_msg("b[%zu] is %u, want %d", i, got[1 + i], i != n / 3);
    expect_guard("b", got + 1, n);
    int64_t gtotal;
    contract_download(s, &gtotal, total, 8);
    assert_int_equal(gtotal, (int64_t)n - 1);
    uint32_t spun;
    contract_read(&spun, flag, 1);
    assert_int_equal(spun, 1);
    RT_OK(rill_free(x));
    RT_OK(rill_free(flag));
    RT_OK(rill_free(y));
    RT_OK(rill_free(total));
    RT_OK(rill_free(d));
    RT_OK(rill_free(b));
    free(hx);
    free(hd);
    free(hy);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* ---- refusals ---- */

/* contract_expect_error's check, and that the sentence says also too (when
 * not NULL). */
static void refused(rill_status got, const char *fn, const char *words, const char *also) {
    contract_expect_error(RILL_ERROR_INVALID_ARGUMENT, got, fn, words);
    if (also != NULL && strstr(rill_last_error(), also) == NULL)
        fail_msg("the sentence should say '%s': %s", also, rill_last_error());
}

/* "A type outside its enum is RILL_ERROR_INVALID_ARGUMENT", and the
 * strided ops' "checks every argument first ... nothing runs": each
 * refusal names its argument, and no memory is written. */
static void test_convert_refusals(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { BYTES = 512 };
    unsigned char fill_a[BYTES], fill_o[BYTES], got[BYTES];
    for (size_t i = 0; i < BYTES; i++) {
        fill_a[i] = (unsigned char)(i * 7 + 3);
        fill_o[i] = 0x5a;
    }
    char *a = device_copy(s, fill_a, BYTES), *out = device_copy(s, fill_o, BYTES);
    size_t shape[2] = {4, 4}, contig[2] = {4, 1}, none[2] = {0, 0}, wide[2] = {100, 1};
    size_t zero_dim[2] = {4, 0}, zero_first[2] = {0, 4}, huge_stride[2] = {SIZE_MAX / 2, 1};
    size_t huge_shape[2] = {SIZE_MAX / 4, 16};
    size_t seven[7] = {1, 1, 1, 1, 1, 1, 1}, seven_strides[7] = {1, 1, 1, 1, 1, 1, 1};
    const char c[] = "rill_op_convert";

    refused(rill_op_convert(s, (rill_element_type)6, out, F32, a, contig, shape, 2), c,
            "out_type is 6, not a rill_element_type", NULL);
    refused(rill_op_convert(s, (rill_element_type)-1, out, F32, a, contig, shape, 2), c,
            "out_type is -1, not a rill_element_type", NULL);
    refused(rill_op_convert(s, F32, out, (rill_element_type)6, a, contig, shape, 2), c,
            "in_type is 6, not a rill_element_type", NULL);
    refused(rill_op_convert(s, F32, out, (rill_element_type)-1, a, contig, shape, 2), c,
            "in_type is -1, not a rill_element_type", NULL);
    refused(rill_op_convert(s, F32, NULL, I32, a, contig, shape, 2), c, "out is NULL", NULL);
    refused(rill_op_convert(s, F32, out, I32, NULL, contig, shape, 2), c, "in is NULL", NULL);
    refused(rill_op_convert(s, F32, out, I32, a, NULL, shape, 2), c, "the strides of in are NULL",
            NULL);
    refused(rill_op_convert(s, F32, out, I32, a, contig, NULL, 2), c, "shape is NULL", NULL);
    refused(rill_op_convert(s, F32, out, I32, a, seven_strides, seven, 7), c,
            "ndim is 7, above RILL_OP_MAX_DIMS", NULL);
    refused(rill_op_convert(s, F32, out, I32, a, contig, zero_dim, 2), c, "shape[1] is 0", NULL);
    refused(rill_op_convert(s, U8, out, BOOL, a, contig, zero_first, 2), c, "shape[0] is 0", NULL);
    refused(rill_op_convert(s, F32, out + 2, I32, a, contig, shape, 2), c,
            "is not aligned to its 4-byte elements", "out (");
    refused(rill_op_convert(s, I64, out + 4, U8, a, contig, shape, 2), c,
            "is not aligned to its 8-byte elements", "out (");
    refused(rill_op_convert(s, U8, out, F64, a + 4, contig, shape, 2), c,
            "is not aligned to its 8-byte elements", "in (");
    refused(rill_op_convert(s, BOOL, out, I32, a + 1, contig, shape, 2), c,
            "is not aligned to its 4-byte elements", "in (");
    /* 16 floats from 480 bytes in: past a's 512 */
    refused(rill_op_convert(s, U8, out, F32, a + 480, contig, shape, 2), c, "its allocation has",
            "in (");
    refused(rill_op_convert(s, U8, out, F32, a, wide, shape, 2), c, "its allocation has", "in (");
    refused(rill_op_convert(s, F64, out + 400, U8, a, contig, shape, 2), c, "its allocation has",
            "out (");
    refused(rill_op_convert(s, U8, out + 500, BOOL, a, contig, shape, 2), c, "its allocation has",
            "out (");
    refused(rill_op_convert(s, U8, out, F32, a, huge_stride, shape, 2), c,
            "the strides of in reach past the end of memory", NULL);
    refused(rill_op_convert(s, U8, out, U8, a, contig, huge_shape, 2), c, "do not fit in memory",
            NULL);
    /* out overlapping in: the same memory (even of one type), a tail, a
     * broadcast element inside out */
    refused(rill_op_convert(s, F32, a, F32, a, contig, shape, 2), c, "out overlaps in", NULL);
    refused(rill_op_convert(s, U8, a, BOOL, a, contig, shape, 2), c, "out overlaps in", NULL);
    refused(rill_op_convert(s, F64, a + 64, I32, a + 32, contig, shape, 2), c, "out overlaps in",
            NULL);
    refused(rill_op_convert(s, I32, a, U8, a + 60, none, shape, 2), c, "out overlaps in", NULL);
    refused(rill_op_convert(s, U8, a + 15, F32, a, contig, shape, 2), c, "out overlaps in", NULL);
    refused(rill_op_convert(s, F64, out, F32, out, NULL, NULL, 0), c, "out overlaps in", NULL);

    /* Nothing ran: every buffer holds what it held. */
    RT_OK(rill_stream_synchronize(s));
    contract_download(s, got, a, BYTES);
    assert_memory_equal(got, fill_a, BYTES);
    contract_download(s, got, out, BYTES);
    assert_memory_equal(got, fill_o, BYTES);
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* "An op outside its enum is RILL_ERROR_INVALID_ARGUMENT", and each
 * refusal of rill_op_reduce_dim_bool names its argument; no memory is
 * written. */
static void test_reduce_bool_refusals(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { BYTES = 256 };
    unsigned char fill_a[BYTES], fill_o[BYTES], got[BYTES];
    for (size_t i = 0; i < BYTES; i++) {
        fill_a[i] = (unsigned char)(i % 3);
        fill_o[i] = 0x5a;
    }
    uint8_t *a = device_copy(s, fill_a, BYTES);
    unsigned char *out = device_copy(s, fill_o, BYTES);
    const rill_reduce_bool_op ANY = RILL_REDUCE_BOOL_ANY, ALL = RILL_REDUCE_BOOL_ALL,
                              COUNT = RILL_REDUCE_BOOL_COUNT;
    const char r[] = "rill_op_reduce_dim_bool";

    refused(rill_op_reduce_dim_bool(s, (rill_reduce_bool_op)3, out, a, 4, 4, 4), r,
            "op is 3, not a rill_reduce_bool_op", NULL);
    refused(rill_op_reduce_dim_bool(s, (rill_reduce_bool_op)-1, out, a, 4, 4, 4), r,
            "op is -1, not a rill_reduce_bool_op", NULL);
    refused(rill_op_reduce_dim_bool(s, ANY, NULL, a, 4, 4, 4), r, "out is NULL", NULL);
    refused(rill_op_reduce_dim_bool(s, COUNT, out, NULL, 4, 4, 4), r, "a is NULL", NULL);
    refused(rill_op_reduce_dim_bool(s, ALL, out, a, 0, 4, 4), r, "outer is 0", NULL);
    refused(rill_op_reduce_dim_bool(s, ALL, out, a, 4, 0, 4), r, "dim is 0", NULL);
    refused(rill_op_reduce_dim_bool(s, COUNT, out, a, 4, 4, 0), r, "inner is 0", NULL);
    refused(rill_op_reduce_dim_bool(s, COUNT, out + 4, a, 4, 4, 4), r,
            "is not aligned to its 8-byte elements", "out (");
    refused(rill_op_reduce_dim_bool(s, ANY, out, a, SIZE_MAX / 2, 4, 4), r, "do not fit in memory",
            NULL);
    /* 64 bytes of a from 200 bytes in: past a's 256 */
    refused(rill_op_reduce_dim_bool(s, ANY, out, a + 200, 4, 4, 4), r, "its allocation has", "a (");
    /* out too small: 16 bytes from 250, 16 int64s from 136 */
    refused(rill_op_reduce_dim_bool(s, ALL, out + 250, a, 4, 4, 4), r, "its allocation has",
            "out (");
    refused(rill_op_reduce_dim_bool(s, COUNT, out + 136, a, 4, 4, 4), r, "its allocation has",
            "out (");
    /* out overlapping a, within and across its start */
    refused(rill_op_reduce_dim_bool(s, ANY, a + 8, a, 4, 4, 4), r, "out overlaps a", NULL);
    refused(rill_op_reduce_dim_bool(s, COUNT, a + 56, a + 64, 2, 2, 2), r, "out overlaps a", NULL);
    refused(rill_op_reduce_dim_bool(s, ALL, a + 63, a, 4, 4, 4), r, "out overlaps a", NULL);

    RT_OK(rill_stream_synchronize(s));
    contract_download(s, got, a, BYTES);
    assert_memory_equal(got, fill_a, BYTES);
    contract_download(s, got, out, BYTES);
    assert_memory_equal(got, fill_o, BYTES);
    RT_OK(rill_free(a));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* "n 0 or a type outside its enum is RILL_ERROR_INVALID_ARGUMENT", and
 * out NULL, not aligned to its elements, or too small for n: each refusal
 * names its argument, and no memory is written. An arange that ends at the
 * allocation's last byte runs. */
static void test_arange_refusals(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { BYTES = 512 };
    unsigned char fill[BYTES], got[BYTES];
    for (size_t i = 0; i < BYTES; i++)
        fill[i] = (unsigned char)(i * 7 + 3);
    char *out = device_copy(s, fill, BYTES);
    const char a[] = "rill_op_arange";
    char words[64];

    refused(rill_op_arange(s, (rill_element_type)6, out, 0, 1, 16), a,
            "type is 6, not a rill_element_type", NULL);
    refused(rill_op_arange(s, (rill_element_type)-1, out, 0, 1, 16), a,
            "type is -1, not a rill_element_type", NULL);
    refused(rill_op_arange(s, U8, NULL, 0, 1, 16), a, "out is NULL", NULL);
    refused(rill_op_arange(s, F64, NULL, 0, 1, 16), a, "out is NULL", NULL);
    refused(rill_op_arange(s, I32, out + 2, 0, 1, 16), a, "is not aligned to its 4-byte elements",
            "out (");
    refused(rill_op_arange(s, F32, out + 1, 0, 1, 16), a, "is not aligned to its 4-byte elements",
            "out (");
    refused(rill_op_arange(s, I64, out + 4, 0, 1, 16), a, "is not aligned to its 8-byte elements",
            "out (");
    refused(rill_op_arange(s, F64, out + 2, 0, 1, 16), a, "is not aligned to its 8-byte elements",
            "out (");
    refused(rill_op_arange(s, U8, out, 0, 1, 0), a, "n is 0", NULL);
    refused(rill_op_arange(s, F64, out, 5, -1, 0), a, "n is 0", NULL);
    /* n elements that do not fit in memory */
    snprintf(words, sizeof words, "n is %zu", SIZE_MAX / 8 + 1);
    refused(rill_op_arange(s, I64, out, 0, 1, SIZE_MAX / 8 + 1), a, words, NULL);
    snprintf(words, sizeof words, "n is %zu", SIZE_MAX / 4 + 1);
    refused(rill_op_arange(s, F32, out, 0, 1, SIZE_MAX / 4 + 1), a, words, NULL);
    refused(rill_op_arange(s, U8, out, 0, 1, SIZE_MAX), a, "its allocation has", "out (");
    /* n elements past out's 512 bytes */
    refused(rill_op_arange(s, U8, out + 500, 0, 1, 13), a, "its allocation has", "out (");
    refused(rill_op_arange(s, BOOL, out + 511, 0, 1, 2), a, "its allocation has", "out (");
    refused(rill_op_arange(s, I32, out, 0, 1, 129), a, "its allocation has", "out (");
    refused(rill_op_arange(s, F32, out + 4, 0, 1, 128), a, "its allocation has", "out (");
    refused(rill_op_arange(s, I64, out + 480, 0, 1, 5), a, "its allocation has", "out (");
    refused(rill_op_arange(s, F64, out, 0, 1, 65), a, "its allocation has", "out (");

    RT_OK(rill_stream_synchronize(s));
    contract_download(s, got, out, BYTES);
    assert_memory_equal(got, fill, BYTES);

    /* to the last byte: two int64s at 496, then 7 bytes at 505 */
    RT_OK(rill_op_arange(s, I64, out + 496, -9, 0, 2));
    contract_download(s, got, out, BYTES);
    assert_memory_equal(got, fill, 496);
    assert_int_equal(bits_at(got + 496, 0, 8), (uint64_t)-9);
    assert_int_equal(bits_at(got + 496, 1, 8), (uint64_t)-9);
    RT_OK(rill_op_arange(s, U8, out + 505, 1, 1, 7));
    contract_download(s, got, out, BYTES);
    assert_memory_equal(got, fill, 496);
    assert_int_equal(got[504], 0xf7); /* the low byte of -9 */
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(got[505 + i], 1 + i);
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert_every_pair),
        cmocka_unit_test(test_convert_rules_written_out),
        cmocka_unit_test(test_convert_strided),
        cmocka_unit_test(test_convert_zero_dims),
        cmocka_unit_test(test_reduce_bool),
        cmocka_unit_test(test_ordered_on_a_busy_stream),
        cmocka_unit_test(test_convert_refusals),
        cmocka_unit_test(test_reduce_bool_refusals),
        cmocka_unit_test(test_arange_every_type),
        cmocka_unit_test(test_arange_written_out),
        cmocka_unit_test(test_arange_ordered_on_a_busy_stream),
        cmocka_unit_test(test_arange_refusals),
    };
    return CONTRACT_RUN(tests);
}
