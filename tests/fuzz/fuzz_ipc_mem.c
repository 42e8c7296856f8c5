/* SPDX-License-Identifier: MIT */
/* libFuzzer target: rill_ipc_open_mem_handle on forged handles. The real
 * handles, made once in this process, describe a small block, a block in
 * the middle of a segment, a large block, a block freed after its export,
 * and (the wrong kind) an interprocess event; each input is one of them
 * with bytes XORed over it (see fuzz_forge_handle). rill.h: "RILL_ERROR_IPC
 * when ... the bytes are not a handle". Whatever the bytes: no crash, the
 * status is RILL_OK or RILL_ERROR_IPC, and memory that opens is readable
 * at both ends and closes again with RILL_OK. */
#include <stdlib.h>

#include "fuzz_input.h"

enum { NUM_REAL = 5 };
static unsigned char real[NUM_REAL][FUZZ_HANDLE_BYTES];

/* Exports a block of bytes; keep says whether it stays allocated. */
static void export_block(rill_device *dev, size_t bytes, int keep, unsigned char *out) {
    void *p = NULL;
    rill_status st = rill_malloc(dev, bytes, &p);
    fuzz_check(st == RILL_OK, "rill_malloc", st);
    st = rill_memset_async(p, 0x5a, bytes, NULL);
    fuzz_check(st == RILL_OK, "rill_memset_async", st);
    rill_ipc_mem_handle h;
    st = rill_ipc_get_mem_handle(p, &h);
    fuzz_check(st == RILL_OK, "rill_ipc_get_mem_handle", st);
    memcpy(out, h.bytes, FUZZ_HANDLE_BYTES);
    if (!keep) {
        st = rill_free(p);
        fuzz_check(st == RILL_OK, "rill_free", st);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("RILL_CPU_WORKERS", "2", 0);
    rill_device *dev = NULL;
    rill_status st = rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev);
    fuzz_check(st == RILL_OK, "rill_device_get_by_kind", st);
    export_block(dev, 256, 1, real[0]);
    export_block(dev, 4096 + 3, 1, real[1]);
    export_block(dev, (size_t)3 << 20, 1, real[2]);
    export_block(dev, 1000, 0, real[3]);
    rill_event *e = NULL;
    st = rill_event_create(RILL_EVENT_INTERPROCESS, &e);
    fuzz_check(st == RILL_OK, "rill_event_create", st);
    rill_ipc_event_handle eh;
    st = rill_event_ipc_handle(e, &eh);
    fuzz_check(st == RILL_OK, "rill_event_ipc_handle", st);
    memcpy(real[4], eh.bytes, FUZZ_HANDLE_BYTES);
    st = rill_device_synchronize(dev);
    fuzz_check(st == RILL_OK, "rill_device_synchronize", st);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rill_ipc_mem_handle h;
    fuzz_forge_handle(data, size, (const unsigned char(*)[FUZZ_HANDLE_BYTES])real, NUM_REAL,
                      h.bytes);
    void *p = (void *)&h; /* must come back NULL on failure */
    rill_status st = rill_ipc_open_mem_handle(&h, &p);
    fuzz_expect(st, RILL_ERROR_IPC, RILL_ERROR_IPC, "rill_ipc_open_mem_handle");
    if (st != RILL_OK) {
        fuzz_check(p == NULL, "rill_ipc_open_mem_handle (out not NULL on failure)", st);
        return 0;
    }
    fuzz_check(p != NULL, "rill_ipc_open_mem_handle (out NULL on success)", st);
    /* The handle's size is in bytes 40..47; the mapping holds all of it. */
    uint64_t bytes;
    memcpy(&bytes, h.bytes + 40, sizeof bytes);
    unsigned char ends[2];
    st = rill_memcpy(&ends[0], p, 1);
    fuzz_check(st == RILL_OK, "rill_memcpy (first byte of the mapping)", st);
    st = rill_memcpy(&ends[1], (unsigned char *)p + bytes - 1, 1);
    fuzz_check(st == RILL_OK, "rill_memcpy (last byte of the mapping)", st);
    st = rill_memcpy(&ends[0], p, (size_t)bytes + 1);
    fuzz_check(st == RILL_ERROR_INVALID_ARGUMENT, "rill_memcpy (one byte past the mapping)", st);
    st = rill_ipc_close_mem_handle(p);
    fuzz_check(st == RILL_OK, "rill_ipc_close_mem_handle", st);
    return 0;
}
