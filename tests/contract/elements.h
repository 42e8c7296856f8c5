/* SPDX-License-Identifier: MIT */
/* What the contract tests of the ops over rill_element_type share
 * (test_contract_select.c, test_contract_convert.c): the types and their
 * sizes, an element read as a number, elements as bits, a seeded stream
 * of bits, and device outputs with guard bytes after them. */
#ifndef RILL_TEST_CONTRACT_ELEMENTS_H
#define RILL_TEST_CONTRACT_ELEMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract.h"

/* Bytes after an output that an op must leave as they are. */
#define GUARD      64
#define GUARD_BYTE 0xa5

/* Several blocks' worth of elements, a length no multiple of a vector. */
#define LARGE (((size_t)1 << 16) + 37)

/* Every rill_element_type, in the enum's order, and their short names. */
#define N_TYPES 6
extern const rill_element_type all_types[N_TYPES];
extern const char *const type_names[N_TYPES];

/* The bytes of an element of t, 0 outside the enum. */
size_t type_size(rill_element_type t);

/* An element as a number: integers exactly (a bool as 0 or 1), floats as
 * double (exact for float). */
typedef struct number {
    bool is_float;
    int64_t i;
    double f;
} number;
/* Element index of t at base (host memory). */
number load(rill_element_type t, const void *base, size_t index);

/* The bits of element i of width bytes, and a store of them. */
uint64_t bits_at(const void *base, size_t i, size_t width);
void store_bits(void *base, size_t i, size_t width, uint64_t bits);

/* The next of a seeded stream of 64-bit values (splitmix64). */
uint64_t next_bits(uint64_t *state);

/* Device memory on s holding bytes copied from host. */
void *device_copy(rill_stream *s, const void *host, size_t bytes);
/* Device memory of bytes plus GUARD, all GUARD_BYTE. */
void *guarded_out(rill_stream *s, size_t bytes);
/* Fails naming what when a byte of the GUARD after got's bytes changed. */
void expect_guard(const char *what, const unsigned char *got, size_t bytes);

#endif
