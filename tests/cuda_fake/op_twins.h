/* SPDX-License-Identifier: MIT */
/* The stand-in driver's bodies of the built-in ops' kernels. */
#ifndef RILL_TEST_FAKE_OP_TWINS_H
#define RILL_TEST_FAKE_OP_TWINS_H

#include "rill.h"

/* The CPU body of the op whose CUDA entry point is entry, or NULL. */
rill_cpu_kernel_fn fake_op_twin(const char *entry);

/* The calling kernel body's GPU fails as at a trap (fake_cuda.c). */
void fake_cuda_trap(void);

#endif
