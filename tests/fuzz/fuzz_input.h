/* SPDX-License-Identifier: MIT */
/* What the libFuzzer targets share: a reader that turns the fuzz input into
 * small numbers (zeros once it runs out, so every input is a whole program),
 * a check that aborts, with the call's sentence, when a status is not one
 * the target allows, and the forging of interprocess handles from real ones
 * (the wire format is in src/core/ipc_wire.h). */
#ifndef RILL_FUZZ_INPUT_H
#define RILL_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rill.h"

/* The libFuzzer entry points, declared for -Wmissing-prototypes. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
} fuzz_input;

/* The next byte of the input; 0 once it is used up. */
static inline uint8_t fuzz_byte(fuzz_input *in) {
    if (in->size == 0)
        return 0;
    in->size--;
    return *in->data++;
}

/* The next two bytes as a little-endian number. */
static inline uint16_t fuzz_u16(fuzz_input *in) {
    uint16_t lo = fuzz_byte(in);
    return (uint16_t)(lo | (uint16_t)fuzz_byte(in) << 8);
}

/* Aborts, so that libFuzzer keeps the input, unless ok holds; says which
 * call returned what. */
static inline void fuzz_check(int ok, const char *call, rill_status st) {
    if (ok)
        return;
    fprintf(stderr, "fuzz: %s returned %s: %s\n", call, rill_status_name(st), rill_last_error());
    abort();
}

/* Aborts unless st is RILL_OK or one of the two statuses given (pass
 * RILL_OK again where fewer are allowed); a failure must come with a
 * sentence. */
static inline void fuzz_expect(rill_status st, rill_status also, rill_status also2,
                               const char *call) {
    fuzz_check(st == RILL_OK || st == also || st == also2, call, st);
    fuzz_check(st == RILL_OK || rill_last_error()[0] != '\0', call, st);
}

/* ---- interprocess handles ---- */

#define FUZZ_HANDLE_BYTES 64

/* FNV-1a over bytes 0..55, stored at 56 in native byte order: the
 * checksum a decoder checks before it believes any other field. */
static inline void fuzz_fix_checksum(unsigned char h[FUZZ_HANDLE_BYTES]) {
    uint64_t x = 0xcbf29ce484222325u;
    for (size_t i = 0; i < 56; i++) {
        x ^= h[i];
        x *= 0x100000001b3u;
    }
    memcpy(h + 56, &x, sizeof x);
}

/* Makes handle bytes from the input and n real handles. Byte 0 picks a
 * real handle (or, past them, all zero bytes); the rest of the input is
 * XORed over it, so an empty remainder is the real handle itself. Byte 1
 * holds flags: bit 0 writes the right checksum after the XOR, so that a
 * mutation reaches the fields behind it; bit 1 puts back the pick's pid,
 * descriptor, inode and start time, which name a live object of this
 * process, so that the fuzzer varies the rest (sizes, offsets, device,
 * flags) around an object it can open. A positive pid always names this
 * process, or with bit 2 one that cannot exist: an opener opens the
 * exporter's descriptors, and the fuzzer must not touch those of other
 * processes on the machine. */
static inline void fuzz_forge_handle(const uint8_t *data, size_t size,
                                     const unsigned char (*real)[FUZZ_HANDLE_BYTES], size_t n,
                                     unsigned char out[FUZZ_HANDLE_BYTES]) {
    memset(out, 0, FUZZ_HANDLE_BYTES);
    uint8_t pick = size > 0 ? data[0] : 0;
    uint8_t flags = size > 1 ? data[1] : 0;
    const unsigned char *base = pick % (n + 1) < n ? real[pick % (n + 1)] : NULL;
    if (base != NULL)
        memcpy(out, base, FUZZ_HANDLE_BYTES);
    for (size_t i = 2; i < size && i - 2 < FUZZ_HANDLE_BYTES; i++)
        out[i - 2] ^= data[i];
    if ((flags & 2) && base != NULL) {
        memcpy(out + 8, base + 8, 16);  /* pid, descriptor, inode */
        memcpy(out + 48, base + 48, 8); /* start time */
    }
    int32_t pid;
    memcpy(&pid, out + 8, sizeof pid);
    if (pid > 0) {
        pid = (flags & 4) ? INT32_MAX : (int32_t)getpid(); /* above any pid_max */
        memcpy(out + 8, &pid, sizeof pid);
    }
    if (flags & 1)
        fuzz_fix_checksum(out);
}

#endif
