/* SPDX-License-Identifier: MIT */
/* The built-in float32 and float16 ops (rill_op_*, src/ops/): their
 * kernels are created on first use and owned by ops.c. */
#ifndef RILL_OPS_OPS_H
#define RILL_OPS_OPS_H

#include "core/handle.h"
#include "core/hooks.h"
#include "rill.h"

/* The ops' part in the runtime's life (core/hooks.h): rill_shutdown
 * destroys the cached built-in kernels; the next op creates them again. */
extern const rill__subsystem rill__ops_subsystem;

#endif
