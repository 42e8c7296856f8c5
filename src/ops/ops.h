/* SPDX-License-Identifier: MIT */
/* The built-in float32 and float16 ops (rill_op_*, src/ops/): their
 * kernels are created on first use and owned by ops.c. */
#ifndef RILL_OPS_OPS_H
#define RILL_OPS_OPS_H

#include "core/handle.h"
#include "rill.h"

/* Destroys the cached built-in kernels; the next op creates them again.
 * Registered with rill__on_shutdown when the first kernel is created. */
void rill__ops_shutdown(void);

#endif
