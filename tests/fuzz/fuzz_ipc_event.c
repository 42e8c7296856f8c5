/* SPDX-License-Identifier: MIT */
/* libFuzzer target: rill_event_open_ipc_handle on forged handles. The real
 * handles, made once in this process, name an interprocess event never
 * recorded, one recorded and complete, one created with
 * RILL_EVENT_BLOCKING_SYNC, one destroyed after its export, and (the wrong
 * kind) a block of memory; each input is one of them with bytes XORed over
 * it (see fuzz_forge_handle). rill.h: "rill_event_open_ipc_handle:
 * RILL_ERROR_IPC when the bytes are not a handle". Whatever the bytes: no
 * crash, the status is RILL_OK or RILL_ERROR_IPC, and an event that opens
 * can be queried, recorded and synchronized, and is destroyed again. */
#include <stdlib.h>

#include "fuzz_input.h"

enum { NUM_REAL = 5 };
static unsigned char real[NUM_REAL][FUZZ_HANDLE_BYTES];
static rill_stream *stream;

static void export_event(unsigned flags, int record, int keep, unsigned char *out) {
    rill_event *e = NULL;
    rill_status st = rill_event_create(flags, &e);
    fuzz_check(st == RILL_OK, "rill_event_create", st);
    if (record) {
        st = rill_event_record(e, stream);
        fuzz_check(st == RILL_OK, "rill_event_record", st);
    }
    rill_ipc_event_handle h;
    st = rill_event_ipc_handle(e, &h);
    fuzz_check(st == RILL_OK, "rill_event_ipc_handle", st);
    memcpy(out, h.bytes, FUZZ_HANDLE_BYTES);
    if (!keep) {
        st = rill_event_destroy(e);
        fuzz_check(st == RILL_OK, "rill_event_destroy", st);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("RILL_CPU_WORKERS", "2", 0);
    rill_device *dev = NULL;
    rill_status st = rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev);
    fuzz_check(st == RILL_OK, "rill_device_get_by_kind", st);
    st = rill_stream_create(dev, 0, &stream);
    fuzz_check(st == RILL_OK, "rill_stream_create", st);
    export_event(RILL_EVENT_INTERPROCESS, 0, 1, real[0]);
    export_event(RILL_EVENT_INTERPROCESS, 1, 1, real[1]);
    export_event(RILL_EVENT_INTERPROCESS | RILL_EVENT_BLOCKING_SYNC, 1, 1, real[2]);
    export_event(RILL_EVENT_INTERPROCESS, 1, 0, real[3]);
    void *p = NULL;
    st = rill_malloc(dev, 512, &p);
    fuzz_check(st == RILL_OK, "rill_malloc", st);
    rill_ipc_mem_handle mh;
    st = rill_ipc_get_mem_handle(p, &mh);
    fuzz_check(st == RILL_OK, "rill_ipc_get_mem_handle", st);
    memcpy(real[4], mh.bytes, FUZZ_HANDLE_BYTES);
    st = rill_device_synchronize(dev);
    fuzz_check(st == RILL_OK, "rill_device_synchronize", st);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rill_ipc_event_handle h;
    fuzz_forge_handle(data, size, (const unsigned char(*)[FUZZ_HANDLE_BYTES])real, NUM_REAL,
                      h.bytes);
    rill_event *e = (rill_event *)(void *)&h; /* must come back NULL on failure */
    rill_status st = rill_event_open_ipc_handle(&h, &e);
    fuzz_expect(st, RILL_ERROR_IPC, RILL_ERROR_IPC, "rill_event_open_ipc_handle");
    if (st != RILL_OK) {
        fuzz_check(e == NULL, "rill_event_open_ipc_handle (out not NULL on failure)", st);
        return 0;
    }
    /* Every record of the real events has completed: the opened event is
     * complete until recorded again, and then completes with the stream. */
    st = rill_event_query(e);
    fuzz_check(st == RILL_OK, "rill_event_query", st);
    st = rill_event_record(e, stream);
    fuzz_check(st == RILL_OK, "rill_event_record", st);
    st = rill_event_synchronize(e);
    fuzz_check(st == RILL_OK, "rill_event_synchronize", st);
    st = rill_event_destroy(e);
    fuzz_check(st == RILL_OK, "rill_event_destroy", st);
    return 0;
}
