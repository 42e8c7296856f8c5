/* SPDX-License-Identifier: MIT */
/* elements.h's helpers. */
#include "elements.h"

#include <stdlib.h>
#include <string.h>

const rill_element_type all_types[N_TYPES] = {RILL_ELEMENT_U8,  RILL_ELEMENT_I32,
                                              RILL_ELEMENT_I64, RILL_ELEMENT_F32,
                                              RILL_ELEMENT_F64, RILL_ELEMENT_BOOL};
const char *const type_names[N_TYPES] = {"u8", "i32", "i64", "f32", "f64", "bool"};

size_t type_size(rill_element_type t) {
    switch (t) {
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

number load(rill_element_type t, const void *base, size_t index) {
    number x = {false, 0, 0.0};
    const char *p = (const char *)base + index * type_size(t);
    switch (t) {
    case RILL_ELEMENT_U8: {
        uint8_t v;
        memcpy(&v, p, sizeof v);
        x.i = v;
        break;
    }
    case RILL_ELEMENT_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        x.i = v;
        break;
    }
    case RILL_ELEMENT_I64:
        memcpy(&x.i, p, sizeof x.i);
        break;
    case RILL_ELEMENT_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        x.is_float = true;
        x.f = v;
        break;
    }
    case RILL_ELEMENT_F64:
        x.is_float = true;
        memcpy(&x.f, p, sizeof x.f);
        break;
    case RILL_ELEMENT_BOOL:
        x.i = *(const uint8_t *)p != 0;
        break;
    }
    return x;
}

uint64_t bits_at(const void *base, size_t i, size_t width) {
    uint64_t v = 0;
    const unsigned char *p = (const unsigned char *)base + i * width;
    for (size_t k = width; k-- > 0;)
        v = v << 8 | p[k];
    return v;
}

void store_bits(void *base, size_t i, size_t width, uint64_t bits) {
    unsigned char *p = (unsigned char *)base + i * width;
    for (size_t k = 0; k < width; k++)
        p[k] = (unsigned char)(bits >> (8 * k));
}

uint64_t next_bits(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void *device_copy(rill_stream *s, const void *host, size_t bytes) {
    void *p = contract_alloc(s, bytes);
    contract_upload(s, p, host, bytes);
    return p;
}

void *guarded_out(rill_stream *s, size_t bytes) {
    unsigned char *h = malloc(bytes + GUARD);
    assert_non_null(h);
    memset(h, GUARD_BYTE, bytes + GUARD);
    void *p = device_copy(s, h, bytes + GUARD);
    free(h);
    return p;
}

void expect_guard(const char *what, const unsigned char *got, size_t bytes) {
    for (size_t i = bytes; i < bytes + GUARD; i++)
        if (got[i] != GUARD_BYTE)
            fail_msg("%s: byte %zu past the output was written (0x%02x)", what, i - bytes, got[i]);
}
