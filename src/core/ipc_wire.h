/* SPDX-License-Identifier: MIT */
/* Inter-process handles: the 64-byte wire format shared by memory handles
 * (src/mem/ipc.c) and event handles (event_ipc.c). A decoder checks the
 * checksum, magic and version before it believes any other field, so random
 * bytes are refused, never followed. */

/* Wire format (native byte order: both processes run on one machine):
 *    0  u32 magic        RILL__IPC_MAGIC_MEM or RILL__IPC_MAGIC_EVENT
 *    4  u8  version      RILL__IPC_VERSION
 *    5  u8  device kind  rill_device_kind of the device the object is on
 *    6  u16 device index among the devices of that kind
 *    8  i32 pid          of the exporting process
 *   12  i32 fd           its descriptor of the shared object
 *   16  u64 inode        of the shared object
 *   24  u64 object bytes the shared object's size
 *   32  u64 offset       memory: of the block in the object; events: 0
 *   40  u64 bytes        memory: the block's size; events: the event's flags
 *   48  u64 start time   of the exporting process (with pid, names it)
 *   56  u64 checksum     FNV-1a over bytes 0..55
 * A decoder checks the checksum, magic and version before it believes
 * any other field, so random bytes are refused, never followed. */
#ifndef RILL_CORE_IPC_WIRE_H
#define RILL_CORE_IPC_WIRE_H

#include <stdint.h>

#include "core/handle.h"
#include "platform/shm.h"
#include "rill.h"

#define RILL__IPC_MAGIC_MEM    0x4d504952u /* "RIPM" */
#define RILL__IPC_MAGIC_EVENT  0x45504952u /* "RIPE" */
#define RILL__IPC_VERSION      1u
#define RILL__IPC_HANDLE_BYTES 64

typedef struct rill__ipc_wire {
    uint32_t magic;
    uint8_t version;
    uint8_t device_kind;
    uint16_t device_index;
    rill__shm_name name;
    uint64_t object_bytes;
    uint64_t offset;
    uint64_t bytes;
    uint64_t start_time;
} rill__ipc_wire;

/* Writes w (with its checksum) into out. */
void rill__ipc_encode(const rill__ipc_wire *w, unsigned char out[RILL__IPC_HANDLE_BYTES]);
/* Reads a handle of the given magic; RILL_ERROR_IPC with a sentence naming
 * fn when the bytes are not one (zeroed, damaged, another kind, another
 * version). Checks nothing beyond the envelope. */
rill_status rill__ipc_decode(const unsigned char in[RILL__IPC_HANDLE_BYTES], uint32_t magic,
                             const char *fn, rill__ipc_wire *out);
/* Fills w's device fields for dev. */
void rill__ipc_set_device(rill__ipc_wire *w, rill__device *dev);
/* The device w names, in this process; RILL_ERROR_IPC when there is none. */
rill_status rill__ipc_get_device(const rill__ipc_wire *w, const char *fn, rill__device **out);
/* The status and sentence for an object that could not be mapped: this
 * process lacking room for it (RILL_ERROR_OUT_OF_MEMORY), else
 * RILL_ERROR_IPC saying whether the exporter has exited, else why (from
 * the platform layer). */
rill_status rill__ipc_map_failed(const rill__ipc_wire *w, const char *fn, const char *what,
                                 rill__shm_map_result result, const char *why);

#endif
