/* SPDX-License-Identifier: MIT */
/* The CUDA device's bodies of the built-in ops (backend/op_args.h): the
 * fatbin of the kernels rill ships (op_kernels.cu, embedded at build time)
 * and, per op, its entry point there or the library that runs it
 * (cuda_libs.h). The fatbin holds PTX for compute_75, which the driver
 * compiles for whatever GPU it finds, and an sm_90 cubin, which it loads
 * as it is. Any thread, no locks. */
#ifndef RILL_BACKEND_CUDA_CUDA_OPS_H
#define RILL_BACKEND_CUDA_CUDA_OPS_H

#include <stdbool.h>

#include "backend/op_args.h"

/* The fatbin of every op kernel (8-byte aligned, images uncompressed), or
 * NULL when rill was built without nvcc (the ops then have no CUDA body).
 * Defined in the file the build generates from op_kernels.cu. */
const char *rill__cuda_op_image(void);

/* The name of op's entry point in rill__cuda_op_image(), whose one parameter
 * is op's argument struct; NULL for RILL__OP_NONE and for the ops that run
 * through a library. */
const char *rill__cuda_op_entry(rill__op op);

/* Whether op runs through cuBLAS or cuDNN (rill__cuda_op_library) rather
 * than as a kernel. */
bool rill__cuda_op_uses_library(rill__op op);

#endif
