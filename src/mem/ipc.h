/* SPDX-License-Identifier: MIT */
/* Inter-process memory handles (rill_ipc_*_mem_handle); the wire format
 * they share with event handles is core/ipc_wire.h. */
#ifndef RILL_MEM_IPC_H
#define RILL_MEM_IPC_H

#include "core/handle.h"
#include "rill.h"

/* Unmaps every memory handle still open on the devices of rt
 * (rill_shutdown, once all work has drained). */
struct rill__runtime;
void rill__ipc_mem_shutdown(struct rill__runtime *rt);

#endif
