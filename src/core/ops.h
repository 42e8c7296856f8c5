/* SPDX-License-Identifier: MIT */
/* The built-in float32 ops (rill_op_*): their kernels are created on first
 * use and owned here. */
#ifndef RILL_CORE_OPS_H
#define RILL_CORE_OPS_H

#include "rill.h"

/* Destroys the cached built-in kernels; the next op creates them again.
 * Called at the start of rill_shutdown. */
void rill__ops_shutdown(void);

#endif
