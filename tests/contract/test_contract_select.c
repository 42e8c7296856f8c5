/* SPDX-License-Identifier: MIT */
/* The select ops on the device under test (contract.h): rill_op_compare
 * and rill_op_compare_scalar for every op and element type, rill_op_where
 * and rill_op_masked_fill for every element width, with contiguous,
 * broadcast, transposed and in-place operands, each against a result
 * computed here on the host; and their refusals, each with its sentence. */
#include "contract.h"
#include "elements.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[6] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

/* Values of each type: both zeros, NaNs of either sign, infinities and
 * the extremes. Neighbours that a conversion would round together tell an
 * exact comparison from one through that conversion: 2^53 and 2^53 + 1,
 * INT64_MAX - 1 and INT64_MAX (in double), INT32_MAX - 1 and INT32_MAX
 * (in float). */
static const uint8_t pool_u8[] = {0, 1, 2, 127, 128, 254, 255};
/* Bytes read as bools: any not 0 is true. */
static const uint8_t pool_bool[] = {0, 1, 2, 255};
static const int32_t pool_i32[] = {INT32_MIN, INT32_MIN + 1, -7,       -1, 0, 1,
                                   7,         INT32_MAX - 1, INT32_MAX};
static const int64_t pool_i64[] = {
    INT64_MIN, INT64_MIN + 1,    -((int64_t)1 << 53) - 1, -((int64_t)1 << 53), -1,       0,
    1,         (int64_t)1 << 53, ((int64_t)1 << 53) + 1,  INT64_MAX - 1,       INT64_MAX};
static const float pool_f32[] = {NAN,     -NAN,    -INFINITY,    -FLT_MAX, -1.5f,
                                 -0.0f,   0.0f,    FLT_TRUE_MIN, 1.0f,     1.0f + FLT_EPSILON,
                                 FLT_MAX, INFINITY};
static const double pool_f64[] = {
    NAN,          -NAN, -INFINITY,         -DBL_MAX,           -1.5,    -0.0,    0.0,
    DBL_TRUE_MIN, 1.0,  1.0 + DBL_EPSILON, 9007199254740992.0, DBL_MAX, INFINITY};

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

/* n elements of t: element i is the pool's value at (i + (i / count) *
 * salt) % count (salt 0 and salt 1 side by side meet every pair). */
static void *pool_values(rill_element_type t, size_t n, size_t salt) {
    pool p = pool_of(t);
    size_t es = type_size(t);
    char *h = malloc(n * es);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++)
        memcpy(h + i * es, (const char *)p.values + (i + (i / p.count) * salt) % p.count * es, es);
    return h;
}

/* rill.h's rules from the order of x and y: -0 equals 0, a NaN is
 * unordered (EQ and the four orders false, NE true). */
static uint8_t host_compare(rill_compare_op op, number x, number y) {
    enum { BELOW, SAME, ABOVE, UNORDERED } order;
    if (x.is_float && (isnan(x.f) || isnan(y.f)))
        order = UNORDERED;
    else if (x.is_float)
        order = x.f < y.f ? BELOW : x.f > y.f ? ABOVE : SAME;
    else
        order = x.i < y.i ? BELOW : x.i > y.i ? ABOVE : SAME;
    switch (op) {
    case RILL_COMPARE_EQ:
        return order == SAME;
    case RILL_COMPARE_NE:
        return order != SAME;
    case RILL_COMPARE_LT:
        return order == BELOW;
    case RILL_COMPARE_LE:
        return order == BELOW || order == SAME;
    case RILL_COMPARE_GT:
        return order == ABOVE;
    case RILL_COMPARE_GE:
        return order == ABOVE || order == SAME;
    }
    return 2;
}

static void expect_bools(const char *what, const uint8_t *got, const uint8_t *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: element %zu of %zu is %u, want %u", what, i, n, got[i], want[i]);
}

static void expect_elements(const char *what, const void *got, const void *want, size_t n,
                            size_t width) {
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * width, (const char *)want + i * width, width) != 0)
            fail_msg("%s: element %zu of %zu has bits 0x%" PRIx64 ", want 0x%" PRIx64, what, i, n,
                     bits_at(got, i, width), bits_at(want, i, width));
}

/* ---- the layouts of a [rows, cols] operand ---- */

typedef enum kind {
    FULL,  /* [rows, cols], contiguous */
    TRANS, /* [cols, rows] in memory, read transposed */
    ROW,   /* [1, cols] broadcast down the rows */
    COL,   /* [rows, 1] broadcast along the columns */
    ZERO   /* one element (a 0-d tensor) broadcast everywhere */
} kind;
static const char *const kind_names[] = {"full", "transposed", "row", "column", "0-d"};

static void kind_strides(kind k, size_t rows, size_t cols, size_t st[2]) {
    switch (k) {
    case FULL:
        st[0] = cols, st[1] = 1;
        break;
    case TRANS:
        st[0] = 1, st[1] = rows;
        break;
    case ROW:
        st[0] = 0, st[1] = 1;
        break;
    case COL:
        st[0] = 1, st[1] = 0;
        break;
    case ZERO:
        st[0] = 0, st[1] = 0;
        break;
    }
}

static size_t at2(const size_t st[2], size_t r, size_t c) {
    return r * st[0] + c * st[1];
}

/* Nonzero bytes other than 1 among the zeros: all true. */
static const uint8_t cond_table[7] = {0, 1, 2, 255, 0, 128, 7};

static uint8_t *host_conds(size_t n) {
    uint8_t *h = malloc(n);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++)
        h[i] = cond_table[(i * 3 + i / 5) % 7];
    return h;
}

/* Signalling and quiet NaNs with payloads, of either sign. */
static const uint32_t nans_f32[4] = {0x7f800001u, 0xffa5a5a5u, 0x7fc12345u, 0xfffffffeu};
static const uint64_t nans_f64[4] = {0x7ff0000000000001u, 0xfff5a5a5a5a5a5a5u, 0x7ff8000000abcdefu,
                                     0xfffffffffffffffeu};

/* n elements of width bytes of arbitrary bits, NaNs with payloads among
 * them for widths 4 and 8. */
static void *host_bits(size_t n, size_t width, uint64_t seed) {
    void *h = malloc(n * width);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = next_bits(&seed);
        if (i % 5 == 1 && width == 4)
            v = nans_f32[(i / 5) % 4];
        if (i % 5 == 1 && width == 8)
            v = nans_f64[(i / 5) % 4];
        store_bits(h, i, width, v);
    }
    return h;
}

/* ---- compare ---- */

/* "out[i] = 1 when a at i (op) b at i holds, else 0", contiguous, for
 * every op and type, over one element, odd lengths and several blocks;
 * nothing past out is written. */
static void test_compare_every_op_and_type(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t sizes[] = {1, 63, 65, 4099, LARGE};
    char what[96];
    for (size_t t = 0; t < N_TYPES; t++) {
        rill_element_type type = all_types[t];
        size_t es = type_size(type);
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            size_t n = sizes[z], shape[1] = {n}, along[1] = {1};
            void *ha = pool_values(type, n, 0), *hb = pool_values(type, n, 1);
            uint8_t *want = malloc(n), *got = malloc(n + GUARD);
            void *a = device_copy(s, ha, n * es), *b = device_copy(s, hb, n * es);
            uint8_t *out = guarded_out(s, n);
            for (int op = RILL_COMPARE_EQ; op <= RILL_COMPARE_GE; op++) {
                RT_OK(rill_op_compare(s, (rill_compare_op)op, type, out, a, along, b, along, shape,
                                      1));
                contract_download(s, got, out, n + GUARD);
                for (size_t i = 0; i < n; i++)
                    want[i] =
                        host_compare((rill_compare_op)op, load(type, ha, i), load(type, hb, i));
                snprintf(what, sizeof what, "%s %s, n %zu", type_names[t], op_names[op], n);
                expect_bools(what, got, want, n);
                expect_guard(what, got, n);
            }
            RT_OK(rill_free(a));
            RT_OK(rill_free(b));
            RT_OK(rill_free(out));
            free(ha);
            free(hb);
            free(want);
            free(got);
        }
    }
    RT_OK(rill_stream_destroy(s));
}

/* Operands with strides 0 (broadcast) and transposed ones are read where
 * their strides say, for rill_op_compare and rill_op_compare_scalar, every op and type, over
 * [4, 5] and over [181, 187] (several blocks). */
static void test_compare_broadcasts_and_transposes(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t dims[2][2] = {{4, 5}, {181, 187}};
    const kind layouts[][2] = {{FULL, ROW},   {FULL, COL},  {COL, ROW},
                               {TRANS, FULL}, {TRANS, ROW}, {FULL, TRANS}};
    char what[128];
    for (int d = 0; d < 2; d++) {
        size_t rows = dims[d][0], cols = dims[d][1], n = rows * cols, shape[2] = {rows, cols};
        uint8_t *want = malloc(n), *got = malloc(n + GUARD);
        for (size_t t = 0; t < N_TYPES; t++) {
            rill_element_type type = all_types[t];
            size_t es = type_size(type);
            pool p = pool_of(type);
            void *ha = pool_values(type, n, 0), *hb = pool_values(type, n, 1);
            void *a = device_copy(s, ha, n * es), *b = device_copy(s, hb, n * es);
            uint8_t *out = guarded_out(s, n);
            const void *value = (const char *)p.values + p.count / 2 * es;
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
                size_t as[2], bs[2];
                kind_strides(layouts[l][0], rows, cols, as);
                kind_strides(layouts[l][1], rows, cols, bs);
                for (int op = RILL_COMPARE_EQ; op <= RILL_COMPARE_GE; op++) {
                    for (int scalar = 0; scalar < 2; scalar++) {
                        if (scalar)
                            RT_OK(rill_op_compare_scalar(s, (rill_compare_op)op, type, out, a, as,
                                                         value, shape, 2));
                        else
                            RT_OK(rill_op_compare(s, (rill_compare_op)op, type, out, a, as, b, bs,
                                                  shape, 2));
                        contract_download(s, got, out, n + GUARD);
                        for (size_t r = 0; r < rows; r++)
                            for (size_t c = 0; c < cols; c++) {
                                number y =
                                    scalar ? load(type, value, 0) : load(type, hb, at2(bs, r, c));
                                want[r * cols + c] = host_compare((rill_compare_op)op,
                                                                  load(type, ha, at2(as, r, c)), y);
                            }
                        snprintf(what, sizeof what, "%s %s [%zu, %zu], a %s, b %s", type_names[t],
                                 op_names[op], rows, cols, kind_names[layouts[l][0]],
                                 scalar ? "a number" : kind_names[layouts[l][1]]);
                        expect_bools(what, got, want, n);
                        expect_guard(what, got, n);
                    }
                }
            }
            RT_OK(rill_free(a));
            RT_OK(rill_free(b));
            RT_OK(rill_free(out));
            free(ha);
            free(hb);
        }
        free(want);
        free(got);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "ndim 0: one element; shape and strides may then be NULL": every pair
 * of a type's values, one call each; and dimensions of 1 whose strides
 * do not matter. */
static void test_compare_zero_dims(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    char what[64];
    for (size_t t = 0; t < N_TYPES; t++) {
        rill_element_type type = all_types[t];
        size_t es = type_size(type);
        pool p = pool_of(type);
        size_t m = p.count;
        char *a = device_copy(s, p.values, m * es);
        uint8_t *out = guarded_out(s, m * m), *got = malloc(m * m + GUARD), *want = malloc(m * m);
        for (int op = RILL_COMPARE_EQ; op <= RILL_COMPARE_GE; op++) {
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < m; j++) {
                    RT_OK(rill_op_compare(s, (rill_compare_op)op, type, out + i * m + j, a + i * es,
                                          NULL, a + j * es, NULL, NULL, 0));
                    want[i * m + j] = host_compare((rill_compare_op)op, load(type, p.values, i),
                                                   load(type, p.values, j));
                }
            contract_download(s, got, out, m * m + GUARD);
            snprintf(what, sizeof what, "%s %s, ndim 0", type_names[t], op_names[op]);
            expect_bools(what, got, want, m * m);
            expect_guard(what, got, m * m);
        }
        /* [1, 1, 1] with strides that reach nothing past the element */
        size_t ones[3] = {1, 1, 1}, odd[3] = {5, 3, 2};
        for (size_t i = 0; i < m; i++)
            RT_OK(rill_op_compare_scalar(s, RILL_COMPARE_LE, type, out + i, a + i * es, odd,
                                         (const char *)p.values + (m / 2) * es, ones, 3));
        contract_download(s, got, out, m);
        for (size_t i = 0; i < m; i++)
            want[i] =
                host_compare(RILL_COMPARE_LE, load(type, p.values, i), load(type, p.values, m / 2));
        snprintf(what, sizeof what, "%s LE, shape [1, 1, 1]", type_names[t]);
        expect_bools(what, got, want, m);
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        free(got);
        free(want);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "value ... in host memory, read during the call": after each call the
 * host's value is changed before the stream is waited for, and the result
 * is the first value's. For every type and op one of the calls is made
 * while the stream is busy, with a value whose replacement changes the
 * answer; every value of the type is compared against. */
static void test_compare_scalar_reads_value_during_call(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    uint32_t *x = contract_words(s, 1, 0);
    size_t n = 4099;
    uint8_t *want = malloc(n), *got = malloc(n + GUARD);
    char what[96];
    for (size_t t = 0; t < N_TYPES; t++) {
        rill_element_type type = all_types[t];
        size_t es = type_size(type);
        pool p = pool_of(type);
        void *ha = pool_values(type, n, 0), *a = device_copy(s, ha, n * es);
        uint8_t *out = guarded_out(s, n);
        size_t shape[1] = {n}, along[1] = {1};
        for (int op = RILL_COMPARE_EQ; op <= RILL_COMPARE_GE; op++) {
            bool busy = false; /* a call made while the stream was busy */
            for (size_t k = 0; k < p.count; k++) {
                size_t next = (k + 1) % p.count;
                bool differs = false;
                for (size_t i = 0; i < n; i++) {
                    number xi = load(type, ha, i);
                    want[i] = host_compare((rill_compare_op)op, xi, load(type, p.values, k));
                    differs |= want[i] !=
                               host_compare((rill_compare_op)op, xi, load(type, p.values, next));
                }
                unsigned char value[8];
                memcpy(value, (const char *)p.values + k * es, es);
                if (differs && !busy) {
                    RT_OK(contract_spin(s, x, 20000000)); /* busy for 20 ms */
                    busy = true;
                }
                RT_OK(rill_op_compare_scalar(s, (rill_compare_op)op, type, out, a, along, value,
                                             shape, 1));
                memcpy(value, (const char *)p.values + next * es, es);
                contract_download(s, got, out, n + GUARD);
                snprintf(what, sizeof what, "%s %s against value %zu", type_names[t], op_names[op],
                         k);
                expect_bools(what, got, want, n);
                expect_guard(what, got, n);
            }
            assert_true(busy);
        }
        RT_OK(rill_free(a));
        RT_OK(rill_free(out));
        free(ha);
    }
    RT_OK(rill_free(x));
    free(want);
    free(got);
    RT_OK(rill_stream_destroy(s));
}

/* rill.h's uses of a comparison with a number, with the answers written
 * out: isneginf (EQ against -inf), a bool tensor's logical not (EQ against
 * 0), and int64 against 2^53 + 1 and INT64_MAX, which double would round
 * to their neighbours. */
static void test_compare_scalar_rules(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    uint8_t got[8 + GUARD];
    size_t shape[1] = {8}, along[1] = {1};
    uint8_t *out = guarded_out(s, 8);

    const float hf[8] = {-INFINITY, INFINITY, NAN, -NAN, -FLT_MAX, -0.0f, 0.0f, -INFINITY};
    const uint8_t isneginf[8] = {1, 0, 0, 0, 0, 0, 0, 1};
    const float neg_inf = -INFINITY;
    float *f = device_copy(s, hf, sizeof hf);
    RT_OK(rill_op_compare_scalar(s, RILL_COMPARE_EQ, RILL_ELEMENT_F32, out, f, along, &neg_inf,
                                 shape, 1));
    contract_download(s, got, out, sizeof got);
    expect_bools("isneginf", got, isneginf, 8);
    expect_guard("isneginf", got, 8);

    const uint8_t hb[8] = {0, 1, 1, 0, 0, 1, 0, 1}, not_b[8] = {1, 0, 0, 1, 1, 0, 1, 0};
    const uint8_t zero = 0;
    uint8_t *b = device_copy(s, hb, sizeof hb);
    RT_OK(rill_op_compare_scalar(s, RILL_COMPARE_EQ, RILL_ELEMENT_U8, out, b, along, &zero, shape,
                                 1));
    contract_download(s, got, out, sizeof got);
    expect_bools("logical not", got, not_b, 8);

    const int64_t big = (int64_t)1 << 53;
    const int64_t hi[8] = {big - 1,       big,       big + 1,   big + 2,
                           INT64_MAX - 1, INT64_MAX, INT64_MIN, -big - 1};
    int64_t *i64 = device_copy(s, hi, sizeof hi);
    const int64_t above = big + 1, top = INT64_MAX;
    const uint8_t eq_above[8] = {0, 0, 1, 0, 0, 0, 0, 0}, lt_above[8] = {1, 1, 0, 0, 0, 0, 1, 1},
                  ge_above[8] = {0, 0, 1, 1, 1, 1, 0, 0}, eq_top[8] = {0, 0, 0, 0, 0, 1, 0, 0},
                  lt_top[8] = {1, 1, 1, 1, 1, 0, 1, 1};
    const struct {
        rill_compare_op op;
        const int64_t *value;
        const uint8_t *want;
        const char *what;
    } cases[] = {{RILL_COMPARE_EQ, &above, eq_above, "EQ 2^53 + 1"},
                 {RILL_COMPARE_LT, &above, lt_above, "LT 2^53 + 1"},
                 {RILL_COMPARE_GE, &above, ge_above, "GE 2^53 + 1"},
                 {RILL_COMPARE_EQ, &top, eq_top, "EQ INT64_MAX"},
                 {RILL_COMPARE_LT, &top, lt_top, "LT INT64_MAX"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        RT_OK(rill_op_compare_scalar(s, cases[c].op, RILL_ELEMENT_I64, out, i64, along,
                                     cases[c].value, shape, 1));
        contract_download(s, got, out, sizeof got);
        expect_bools(cases[c].what, got, cases[c].want, 8);
    }
    /* The same through rill_op_compare, b a 0-d operand broadcast. */
    int64_t *dv = device_copy(s, &above, sizeof above);
    size_t none[1] = {0};
    RT_OK(
        rill_op_compare(s, RILL_COMPARE_EQ, RILL_ELEMENT_I64, out, i64, along, dv, none, shape, 1));
    contract_download(s, got, out, sizeof got);
    expect_bools("EQ 2^53 + 1, b broadcast", got, eq_above, 8);
    RT_OK(rill_free(out));
    RT_OK(rill_free(f));
    RT_OK(rill_free(b));
    RT_OK(rill_free(i64));
    RT_OK(rill_free(dv));
    RT_OK(rill_stream_destroy(s));
}

/* ---- where ---- */

/* want at (r, c) = cond at (r, c) != 0 ? a at (r, c) : b at (r, c). */
static void host_where(size_t width, void *want, const uint8_t *cond, const size_t cs[2],
                       const void *a, const size_t as[2], const void *b, const size_t bs[2],
                       size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const char *from = cond[at2(cs, r, c)] != 0 ? (const char *)a + at2(as, r, c) * width
                                                        : (const char *)b + at2(bs, r, c) * width;
            memcpy((char *)want + (r * cols + c) * width, from, width);
        }
}

static const size_t widths[4] = {1, 2, 4, 8};

/* "out[i] = cond at i ? a at i : b at i ... copied as bits", contiguous,
 * for every width, over several blocks: conds of 2, 7, 128 and 255 are true,
 * NaNs keep their payloads and signs; nothing past out is written. Also
 * ndim 0. */
static void test_where_every_width(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t n = LARGE, shape[1] = {n}, along[1] = {1}, row[2] = {0, 1};
    uint8_t *hc = host_conds(n), *cond = device_copy(s, hc, n);
    char what[64];
    for (int w = 0; w < 4; w++) {
        size_t width = widths[w];
        void *ha = host_bits(n, width, 1 + w), *hb = host_bits(n, width, 100 + w);
        unsigned char *want = malloc(n * width), *got = malloc(n * width + GUARD);
        void *a = device_copy(s, ha, n * width), *b = device_copy(s, hb, n * width);
        void *out = guarded_out(s, n * width);
        RT_OK(rill_op_where(s, width, out, cond, along, a, along, b, along, shape, 1));
        contract_download(s, got, out, n * width + GUARD);
        host_where(width, want, hc, row, ha, row, hb, row, 1, n);
        snprintf(what, sizeof what, "where, %zu bytes", width);
        expect_elements(what, got, want, n, width);
        expect_guard(what, got, n * width);
        /* ndim 0, element i with cond hc[i]: 0 (b), 255 (a), 7 (a) */
        for (size_t i = 0; i < 3; i++)
            RT_OK(rill_op_where(s, width, (char *)out + i * width, cond + i, NULL,
                                (char *)a + i * width, NULL, (char *)b + i * width, NULL, NULL, 0));
        contract_download(s, got, out, 3 * width);
        host_where(width, want, hc, row, ha, row, hb, row, 1, 3);
        assert_true(hc[0] == 0 && hc[1] == 255 && hc[2] == 7);
        snprintf(what, sizeof what, "where, %zu bytes, ndim 0", width);
        expect_elements(what, got, want, 3, width);
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        RT_OK(rill_free(out));
        free(ha);
        free(hb);
        free(want);
        free(got);
    }
    RT_OK(rill_free(cond));
    free(hc);
    RT_OK(rill_stream_destroy(s));
}

/* PyTorch's where(mask, 0.0, -inf): cond [16, 16], a and b 0-d floats,
 * with the answer written out. */
static void test_where_numbers_by_mask(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { N = 16 };
    uint8_t hc[N * N];
    for (size_t i = 0; i < N * N; i++)
        hc[i] = (uint8_t)(i % N <= i / N ? (i % 3 == 0 ? 1 : 255) : 0); /* causal */
    const float numbers[2] = {0.0f, -INFINITY};
    uint8_t *cond = device_copy(s, hc, sizeof hc);
    float *v = device_copy(s, numbers, sizeof numbers), *out = guarded_out(s, N * N * 4);
    float got[N * N + GUARD / 4];
    size_t shape[2] = {N, N}, contig[2] = {N, 1}, none[2] = {0, 0};
    RT_OK(rill_op_where(s, 4, out, cond, contig, v, none, v + 1, none, shape, 2));
    contract_download(s, got, out, sizeof got);
    for (size_t i = 0; i < N * N; i++) {
        uint32_t bits;
        memcpy(&bits, &got[i], 4);
        uint32_t want = i % N <= i / N ? 0x00000000u : 0xff800000u;
        if (bits != want)
            fail_msg("element %zu has bits 0x%08x, want 0x%08x", i, bits, want);
    }
    expect_guard("where(mask, 0.0, -inf)", (const unsigned char *)got, N * N * 4);
    RT_OK(rill_free(cond));
    RT_OK(rill_free(v));
    RT_OK(rill_free(out));
    RT_OK(rill_stream_destroy(s));
}

/* cond, a and b with strides 0 (broadcast) and transposed are read where
 * their strides say, for every width, over [16, 16] and over
 * [300, 301] (several blocks). */
static void test_where_broadcasts(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t dims[2][2] = {{16, 16}, {300, 301}};
    const kind layouts[][3] = {/* cond, a, b */
                               {FULL, ZERO, ZERO},
                               {COL, TRANS, ROW},
                               {ROW, FULL, ZERO},
                               {TRANS, ROW, COL},
                               {ZERO, FULL, TRANS}};
    char what[128];
    for (int d = 0; d < 2; d++) {
        size_t rows = dims[d][0], cols = dims[d][1], n = rows * cols, shape[2] = {rows, cols};
        uint8_t *hc = host_conds(n), *cond = device_copy(s, hc, n);
        for (int w = 0; w < 4; w++) {
            size_t width = widths[w];
            void *ha = host_bits(n, width, 7 + w), *hb = host_bits(n, width, 70 + w);
            unsigned char *want = malloc(n * width), *got = malloc(n * width + GUARD);
            void *a = device_copy(s, ha, n * width), *b = device_copy(s, hb, n * width);
            void *out = guarded_out(s, n * width);
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
                size_t cs[2], as[2], bs[2];
                kind_strides(layouts[l][0], rows, cols, cs);
                kind_strides(layouts[l][1], rows, cols, as);
                kind_strides(layouts[l][2], rows, cols, bs);
                size_t c0 = layouts[l][0] == ZERO; /* hc[1], 255: a everywhere */
                RT_OK(rill_op_where(s, width, out, cond + c0, cs, a, as, b, bs, shape, 2));
                contract_download(s, got, out, n * width + GUARD);
                host_where(width, want, hc + c0, cs, ha, as, hb, bs, rows, cols);
                snprintf(what, sizeof what, "where %zu bytes [%zu, %zu], cond %s, a %s, b %s",
                         width, rows, cols, kind_names[layouts[l][0]], kind_names[layouts[l][1]],
                         kind_names[layouts[l][2]]);
                expect_elements(what, got, want, n, width);
                expect_guard(what, got, n * width);
            }
            RT_OK(rill_free(a));
            RT_OK(rill_free(b));
            RT_OK(rill_free(out));
            free(ha);
            free(hb);
            free(want);
            free(got);
        }
        RT_OK(rill_free(cond));
        free(hc);
    }
    RT_OK(rill_stream_destroy(s));
}

/* "out may equal a or b when that input's strides are the contiguous ones
 * of shape (in place)": out == a with b broadcast, out == b with a 0-d
 * and cond broadcast, for every width, over [512, 515] (several blocks). */
static void test_where_in_place(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t rows = 512, cols = 515, n = rows * cols, shape[2] = {rows, cols};
    size_t full[2], row[2], col[2], zero[2];
    kind_strides(FULL, rows, cols, full);
    kind_strides(ROW, rows, cols, row);
    kind_strides(COL, rows, cols, col);
    kind_strides(ZERO, rows, cols, zero);
    uint8_t *hc = host_conds(n), *cond = device_copy(s, hc, n);
    char what[64];
    for (int w = 0; w < 4; w++) {
        size_t width = widths[w];
        void *ha = host_bits(n, width, 11 + w), *hb = host_bits(n, width, 110 + w);
        unsigned char *want = malloc(n * width), *got = malloc(n * width);
        void *a = device_copy(s, ha, n * width), *b = device_copy(s, hb, n * width);
        RT_OK(rill_op_where(s, width, a, cond, full, a, full, b, row, shape, 2));
        contract_download(s, got, a, n * width);
        host_where(width, want, hc, full, ha, full, hb, row, rows, cols);
        snprintf(what, sizeof what, "where %zu bytes, out == a", width);
        expect_elements(what, got, want, n, width);
        memcpy(ha, want, n * width); /* a now holds that result */
        RT_OK(rill_op_where(s, width, b, cond, col, a, zero, b, full, shape, 2));
        contract_download(s, got, b, n * width);
        host_where(width, want, hc, col, ha, zero, hb, full, rows, cols);
        snprintf(what, sizeof what, "where %zu bytes, out == b", width);
        expect_elements(what, got, want, n, width);
        RT_OK(rill_free(a));
        RT_OK(rill_free(b));
        free(ha);
        free(hb);
        free(want);
        free(got);
    }
    RT_OK(rill_free(cond));
    free(hc);
    RT_OK(rill_stream_destroy(s));
}

/* ---- masked_fill ---- */

/* "x[i] = bits where mask at i is not 0, the others unchanged", bits
 * "set as rill_op_fill_bits sets them" (the low bytes), for every width:
 * a mask broadcast along either dimension, a transposed one, a
 * contiguous one and a 0-d one, over [129, 521] (several blocks); nothing past x is
 * written. */
static void test_masked_fill(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    size_t rows = 129, cols = 521, n = rows * cols, shape[2] = {rows, cols};
    /* Low bytes 0xff800000 for 4: float -inf; 0xfff0000000000000 is double's. */
    const uint64_t all_bits[4] = {0x123456789abcde5au, 0x1234567890abbeefu, 0xdeadbeefff800000u,
                                  0xfff0000000000000u};
    const kind masks[] = {ROW, COL, TRANS, FULL, ZERO};
    uint8_t *hm = host_conds(n), *mask = device_copy(s, hm, n);
    char what[96];
    for (int w = 0; w < 4; w++) {
        size_t width = widths[w];
        uint64_t bits = all_bits[w];
        uint64_t low = width == 8 ? bits : bits & (((uint64_t)1 << (8 * width)) - 1);
        void *hx = host_bits(n, width, 21 + w);
        unsigned char *want = malloc(n * width), *got = malloc(n * width + GUARD);
        void *x = guarded_out(s, n * width);
        for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++) {
            size_t ms[2];
            kind_strides(masks[m], rows, cols, ms);
            size_t m0 = masks[m] == ZERO; /* hm[1], 255: filled everywhere */
            contract_upload(s, x, hx, n * width);
            RT_OK(rill_op_masked_fill(s, width, x, mask + m0, ms, bits, shape, 2));
            contract_download(s, got, x, n * width + GUARD);
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) {
                    size_t i = r * cols + c;
                    store_bits(want, i, width,
                               hm[m0 + at2(ms, r, c)] != 0 ? low : bits_at(hx, i, width));
                }
            snprintf(what, sizeof what, "masked_fill %zu bytes, mask %s", width,
                     kind_names[masks[m]]);
            expect_elements(what, got, want, n, width);
            expect_guard(what, got, n * width);
            if (width == 4 && masks[m] == FULL) { /* masked_fill(mask, float('-inf')) */
                float f;
                memcpy(&f, got + 1 * 4, 4); /* hm[1] is 255 */
                assert_true(hm[1] == 255 && isinf(f) && f < 0);
            }
        }
        /* ndim 0: hm[0] is 0 (kept), hm[1] is 255 (filled) */
        contract_upload(s, x, hx, 2 * width);
        RT_OK(rill_op_masked_fill(s, width, x, mask, NULL, bits, NULL, 0));
        RT_OK(rill_op_masked_fill(s, width, (char *)x + width, mask + 1, NULL, bits, NULL, 0));
        contract_download(s, got, x, 2 * width);
        assert_true(hm[0] == 0 && hm[1] == 255);
        assert_true(bits_at(got, 0, width) == bits_at(hx, 0, width));
        assert_true(bits_at(got, 1, width) == low);
        RT_OK(rill_free(x));
        free(hx);
        free(want);
        free(got);
    }
    RT_OK(rill_free(mask));
    free(hm);
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

/* ---- triangle ---- */

/* "out[b, i, j] = in[b, i, j] where j - i <= diagonal (tril) or j - i >=
 * diagonal (triu), else 0": every width, wide, tall and square matrices,
 * diagonals past every row's edge both ways, into separate memory and in
 * place; one case of several blocks. Nothing past out is written. */
static void test_triangle(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    const size_t shapes[4][3] = {{3, 5, 7}, {2, 7, 5}, {1, 1, 1}, {4, 181, 187}};
    const int64_t diagonals[] = {INT64_MIN, -9, -3, -1, 0, 1, 2, 6, 9, INT64_MAX};
    for (size_t w = 0; w < 4; w++) {
        size_t width = widths[w];
        for (size_t sh = 0; sh < 4; sh++) {
            size_t batch = shapes[sh][0], rows = shapes[sh][1], cols = shapes[sh][2];
            size_t n = batch * rows * cols, bytes = n * width;
            void *h = host_bits(n, width, 7 + sh);
            void *want = malloc(bytes);
            unsigned char *got = malloc(bytes + GUARD);
            assert_true(want != NULL && got != NULL);
            void *in = device_copy(s, h, bytes);
            for (size_t d = 0; d < sizeof diagonals / sizeof diagonals[0]; d++) {
                if (sh == 3 && d % 3 != 0)
                    continue; /* the large shape at a few diagonals */
                for (int upper = 0; upper < 2; upper++) {
                    int64_t diag = diagonals[d];
                    for (size_t e = 0; e < n; e++) {
                        int64_t i = (int64_t)(e / cols % rows), j = (int64_t)(e % cols);
                        bool keep = upper ? j - i >= diag : j - i <= diag;
                        store_bits(want, e, width, keep ? bits_at(h, e, width) : 0);
                    }
                    char what[96];
                    snprintf(what, sizeof what,
                             "%zu bytes, [%zu, %zu, %zu], diagonal %" PRId64 ", %s", width, batch,
                             rows, cols, diag, upper ? "triu" : "tril");
                    void *out = guarded_out(s, bytes);
                    RT_OK(rill_op_triangle(s, width, out, in, batch, rows, cols, diag, upper));
                    contract_download(s, got, out, bytes + GUARD);
                    expect_elements(what, got, want, n, width);
                    expect_guard(what, got, bytes);
                    /* in place, over a copy of the input */
                    contract_upload(s, out, h, bytes);
                    RT_OK(rill_op_triangle(s, width, out, out, batch, rows, cols, diag, upper));
                    contract_download(s, got, out, bytes);
                    expect_elements(what, got, want, n, width);
                    RT_OK(rill_free(out));
                }
            }
            RT_OK(rill_free(in));
            free(h);
            free(want);
            free(got);
        }
    }
    RT_OK(rill_stream_destroy(s));
}

/* Each refusal of rill_op_triangle names its argument. */
static void test_triangle_refusals(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    char *m = contract_alloc(s, 64);
    const char fn[] = "rill_op_triangle";
    refused(rill_op_triangle(s, 3, m, m, 1, 2, 2, 0, 0), fn, "element_bytes is 3", NULL);
    refused(rill_op_triangle(s, 4, NULL, m, 1, 2, 2, 0, 0), fn, "out is NULL", NULL);
    refused(rill_op_triangle(s, 4, m, NULL, 1, 2, 2, 0, 0), fn, "in is NULL", NULL);
    refused(rill_op_triangle(s, 4, m + 2, m + 32, 1, 2, 2, 0, 0), fn, "not aligned", "out");
    refused(rill_op_triangle(s, 4, m, m, 0, 2, 2, 0, 0), fn, "at least 1", NULL);
    refused(rill_op_triangle(s, 4, m, m, 1, 0, 2, 0, 0), fn, "at least 1", NULL);
    refused(rill_op_triangle(s, 8, m, m, 1, 3, 3, 0, 0), fn, "batch*rows*cols", NULL);
    refused(rill_op_triangle(s, 4, m + 4, m, 1, 2, 2, 0, 0), fn, "overlaps", NULL);
    refused(rill_op_triangle(s, 4, m, m, SIZE_MAX / 2, 4, 4, 0, 0), fn, "do not fit", NULL);
    RT_OK(rill_free(m));
    RT_OK(rill_stream_destroy(s));
}

/* "An op or type outside its enum is RILL_ERROR_INVALID_ARGUMENT", and
 * the strided ops' "checks every argument first ... nothing runs": each
 * refusal names its argument, and no memory is written. */
static void test_select_ops_refuse_bad_arguments(void **state) {
    (void)state;
    rill_stream *s = contract_stream();
    enum { BYTES = 512, COND = 256 };
    unsigned char fill_a[BYTES], fill_b[BYTES], fill_o[BYTES], fill_c[COND], got[BYTES];
    for (size_t i = 0; i < BYTES; i++) {
        fill_a[i] = (unsigned char)(i * 7);
        fill_b[i] = (unsigned char)(i * 13 + 1);
        fill_o[i] = 0x5a;
    }
    memset(fill_c, 1, sizeof fill_c);
    char *a = device_copy(s, fill_a, BYTES), *b = device_copy(s, fill_b, BYTES);
    uint8_t *out = device_copy(s, fill_o, BYTES), *cond = device_copy(s, fill_c, COND);
    size_t shape[2] = {4, 4}, contig[2] = {4, 1}, trans[2] = {1, 4}, row[2] = {0, 1};
    size_t wide[2] = {100, 1}, zero_dim[2] = {4, 0}, seven[7] = {1, 1, 1, 1, 1, 1, 1};
    size_t seven_strides[7] = {1, 1, 1, 1, 1, 1, 1};
    const rill_element_type F32 = RILL_ELEMENT_F32, I64 = RILL_ELEMENT_I64;
    const rill_compare_op EQ = RILL_COMPARE_EQ;
    const float one = 1.0f;

    const char c[] = "rill_op_compare";
    refused(rill_op_compare(s, (rill_compare_op)6, F32, out, a, contig, b, contig, shape, 2), c,
            "op is 6, not a rill_compare_op", NULL);
    refused(rill_op_compare(s, (rill_compare_op)-1, F32, out, a, contig, b, contig, shape, 2), c,
            "not a rill_compare_op", NULL);
    refused(rill_op_compare(s, EQ, (rill_element_type)6, out, a, contig, b, contig, shape, 2), c,
            "type is 6, not a rill_element_type", NULL);
    refused(rill_op_compare(s, EQ, (rill_element_type)-1, out, a, contig, b, contig, shape, 2), c,
            "not a rill_element_type", NULL);
    refused(rill_op_compare(s, EQ, F32, NULL, a, contig, b, contig, shape, 2), c, "out is NULL",
            NULL);
    refused(rill_op_compare(s, EQ, F32, out, NULL, contig, b, contig, shape, 2), c, "a is NULL",
            NULL);
    refused(rill_op_compare(s, EQ, F32, out, a, contig, NULL, contig, shape, 2), c, "b is NULL",
            "rill_op_compare_scalar");
    refused(rill_op_compare(s, EQ, F32, out, a + 1, contig, b, contig, shape, 2), c,
            "is not aligned to its 4-byte elements", "a (");
    refused(rill_op_compare(s, EQ, I64, out, a, contig, b + 4, contig, shape, 2), c,
            "is not aligned to its 8-byte elements", "b (");
    refused(rill_op_compare(s, EQ, F32, out, a, seven_strides, b, seven_strides, seven, 7), c,
            "ndim is 7, above RILL_OP_MAX_DIMS", NULL);
    refused(rill_op_compare(s, EQ, F32, out, a, contig, b, contig, zero_dim, 2), c, "shape[1] is 0",
            NULL);
    refused(rill_op_compare(s, EQ, F32, out, a, contig, b, contig, NULL, 2), c, "shape is NULL",
            NULL);
    refused(rill_op_compare(s, EQ, F32, out, a, NULL, b, contig, shape, 2), c,
            "the strides of a are NULL", NULL);
    /* 16 floats from 480 bytes in: past a's 512 */
    refused(rill_op_compare(s, EQ, F32, out, a + 480, contig, b, contig, shape, 2), c,
            "its allocation has", "a (");
    refused(rill_op_compare(s, EQ, I64, out, a, contig, b, wide, shape, 2), c, "its allocation has",
            "b (");
    refused(rill_op_compare(s, EQ, F32, out + 500, a, contig, b, contig, shape, 2), c,
            "its allocation has", "out (");
    refused(rill_op_compare(s, EQ, RILL_ELEMENT_U8, (uint8_t *)a, a, contig, b, contig, shape, 2),
            c, "out overlaps a", NULL);
    refused(rill_op_compare(s, EQ, F32, (uint8_t *)b + 60, a, contig, b, contig, shape, 2), c,
            "out overlaps b", NULL);
    refused(rill_op_compare(s, EQ, F32, (uint8_t *)a + 8, a, row, b, contig, shape, 2), c,
            "out overlaps a", NULL);

    const char cs[] = "rill_op_compare_scalar";
    refused(rill_op_compare_scalar(s, EQ, F32, out, a, contig, NULL, shape, 2), cs, "value is NULL",
            NULL);
    refused(rill_op_compare_scalar(s, (rill_compare_op)6, F32, out, a, contig, &one, shape, 2), cs,
            "not a rill_compare_op", NULL);
    refused(rill_op_compare_scalar(s, EQ, (rill_element_type)6, out, a, contig, &one, shape, 2), cs,
            "not a rill_element_type", NULL);
    refused(rill_op_compare_scalar(s, EQ, F32, NULL, a, contig, &one, shape, 2), cs, "out is NULL",
            NULL);
    refused(rill_op_compare_scalar(s, EQ, F32, out, NULL, contig, &one, shape, 2), cs, "a is NULL",
            NULL);
    refused(rill_op_compare_scalar(s, EQ, RILL_ELEMENT_I32, out, a + 2, contig, &one, shape, 2), cs,
            "is not aligned to its 4-byte elements", NULL);
    refused(rill_op_compare_scalar(s, EQ, F32, out, a, seven_strides, &one, seven, 7), cs,
            "above RILL_OP_MAX_DIMS", NULL);
    refused(rill_op_compare_scalar(s, EQ, F32, out, a, contig, &one, zero_dim, 2), cs,
            "shape[1] is 0", NULL);
    refused(rill_op_compare_scalar(s, EQ, F32, out, a, wide, &one, shape, 2), cs,
            "its allocation has", "a (");
    refused(rill_op_compare_scalar(s, EQ, F32, (uint8_t *)a + 63, a, contig, &one, shape, 2), cs,
            "out overlaps a", NULL);

    const char w[] = "rill_op_where";
    const size_t bad_widths[3] = {0, 3, 16};
    for (int i = 0; i < 3; i++)
        refused(rill_op_where(s, bad_widths[i], out, cond, contig, a, contig, b, contig, shape, 2),
                w, "element_bytes is", "1, 2, 4 or 8");
    refused(rill_op_where(s, 4, NULL, cond, contig, a, contig, b, contig, shape, 2), w,
            "out is NULL", NULL);
    refused(rill_op_where(s, 4, out, NULL, contig, a, contig, b, contig, shape, 2), w,
            "cond is NULL", NULL);
    refused(rill_op_where(s, 4, out, cond, contig, NULL, contig, b, contig, shape, 2), w,
            "a is NULL", NULL);
    refused(rill_op_where(s, 4, out, cond, contig, a, contig, NULL, contig, shape, 2), w,
            "b is NULL", NULL);
    refused(rill_op_where(s, 4, out + 2, cond, contig, a, contig, b, contig, shape, 2), w,
            "is not aligned to its 4-byte elements", "out (");
    refused(rill_op_where(s, 8, out, cond, contig, a + 4, contig, b, contig, shape, 2), w,
            "is not aligned to its 8-byte elements", "a (");
    refused(rill_op_where(s, 2, out, cond, contig, a, contig, b + 1, contig, shape, 2), w,
            "is not aligned to its 2-byte elements", "b (");
    refused(
        rill_op_where(s, 4, out, cond, seven_strides, a, seven_strides, b, seven_strides, seven, 7),
        w, "ndim is 7, above RILL_OP_MAX_DIMS", NULL);
    refused(rill_op_where(s, 4, out, cond, contig, a, contig, b, contig, zero_dim, 2), w,
            "shape[1] is 0", NULL);
    refused(rill_op_where(s, 4, out, cond + 250, contig, a, contig, b, contig, shape, 2), w,
            "its allocation has", "cond (");
    refused(rill_op_where(s, 4, out, cond, contig, a, wide, b, contig, shape, 2), w,
            "its allocation has", "a (");
    refused(rill_op_where(s, 8, out + 480, cond, contig, a, contig, b, contig, shape, 2), w,
            "its allocation has", "out (");
    refused(rill_op_where(s, 4, a + 4, cond, contig, a, contig, b, contig, shape, 2), w,
            "out overlaps a without being it with contiguous strides", NULL);
    refused(rill_op_where(s, 4, a, cond, contig, a, trans, b, contig, shape, 2), w,
            "out overlaps a without being it with contiguous strides", NULL);
    refused(rill_op_where(s, 4, a, cond, contig, a, row, b, contig, shape, 2), w,
            "out overlaps a without being it", NULL);
    refused(rill_op_where(s, 4, b + 32, cond, contig, a, contig, b, contig, shape, 2), w,
            "out overlaps b without being it with contiguous strides", NULL);
    refused(rill_op_where(s, 4, b, cond, contig, a, contig, b, trans, shape, 2), w,
            "out overlaps b without being it", NULL);
    refused(rill_op_where(s, 4, cond, cond, contig, a, contig, b, contig, shape, 2), w,
            "out overlaps cond", NULL);
    refused(rill_op_where(s, 1, a, (const uint8_t *)a, contig, a, contig, b, contig, shape, 2), w,
            "out overlaps cond", NULL);

    const char m[] = "rill_op_masked_fill";
    refused(rill_op_masked_fill(s, 3, a, cond, contig, 0, shape, 2), m, "element_bytes is 3", NULL);
    refused(rill_op_masked_fill(s, 4, NULL, cond, contig, 0, shape, 2), m, "x is NULL", NULL);
    refused(rill_op_masked_fill(s, 4, a, NULL, contig, 0, shape, 2), m, "mask is NULL", NULL);
    refused(rill_op_masked_fill(s, 8, a + 4, cond, contig, 0, shape, 2), m,
            "is not aligned to its 8-byte elements", "x (");
    refused(rill_op_masked_fill(s, 4, a, cond, seven_strides, 0, seven, 7), m,
            "above RILL_OP_MAX_DIMS", NULL);
    refused(rill_op_masked_fill(s, 4, a, cond, contig, 0, zero_dim, 2), m, "shape[1] is 0", NULL);
    refused(rill_op_masked_fill(s, 8, a + 480, cond, contig, 0, shape, 2), m, "its allocation has",
            "x (");
    refused(rill_op_masked_fill(s, 4, a, cond, wide, 0, shape, 2), m, "its allocation has",
            "mask (");
    refused(rill_op_masked_fill(s, 4, a, (const uint8_t *)a + 8, contig, 0, shape, 2), m,
            "x overlaps mask", NULL);
    refused(rill_op_masked_fill(s, 1, a + 8, (const uint8_t *)a + 20, row, 0, shape, 2), m,
            "x overlaps mask", NULL);

    /* Nothing ran: every buffer holds what it held. */
    RT_OK(rill_stream_synchronize(s));
    contract_download(s, got, a, BYTES);
    assert_memory_equal(got, fill_a, BYTES);
    contract_download(s, got, b, BYTES);
    assert_memory_equal(got, fill_b, BYTES);
    contract_download(s, got, out, BYTES);
    assert_memory_equal(got, fill_o, BYTES);
    contract_download(s, got, cond, COND);
    assert_memory_equal(got, fill_c, COND);
    RT_OK(rill_free(a));
    RT_OK(rill_free(b));
    RT_OK(rill_free(out));
    RT_OK(rill_free(cond));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_every_op_and_type),
        cmocka_unit_test(test_compare_broadcasts_and_transposes),
        cmocka_unit_test(test_compare_zero_dims),
        cmocka_unit_test(test_compare_scalar_reads_value_during_call),
        cmocka_unit_test(test_compare_scalar_rules),
        cmocka_unit_test(test_where_every_width),
        cmocka_unit_test(test_where_numbers_by_mask),
        cmocka_unit_test(test_where_broadcasts),
        cmocka_unit_test(test_where_in_place),
        cmocka_unit_test(test_masked_fill),
        cmocka_unit_test(test_select_ops_refuse_bad_arguments),
        cmocka_unit_test(test_triangle),
        cmocka_unit_test(test_triangle_refusals),
    };
    return CONTRACT_RUN(tests);
}
