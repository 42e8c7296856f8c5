/* SPDX-License-Identifier: MIT */
/* cuBLAS and cuDNN for the CUDA device's built-in ops that run through a
 * library (rill__cuda_op_uses_library: matmul f32 and f16, the batched
 * matmul f32, conv2d f32 and its backward), loaded at run time with dlopen, so that rill neither
 * links them nor needs them to run: an op whose library is absent fails
 * with RILL_ERROR_NOT_SUPPORTED and a sentence that says why. */

/* The backend keeps one rill__cuda_libs per device. Its handles are a pool
 * behind the struct's lock: a call takes an idle handle (or creates one)
 * under the lock, runs with the lock released, and gives the handle back;
 * so threads call at once, each on a handle of its own, and the lock is
 * held only to pop and push. Handles are per device because a cuBLAS or
 * cuDNN handle belongs to the device whose context was current when it was
 * created. A handle holds no memory that outlives a call's GPU work: cuBLAS
 * runs with no workspace (cublasSetWorkspace to size 0 on every call), and
 * cuDNN's convolution uses either none or the op's own scratch, so two
 * streams' work never shares a buffer through a handle that passed between
 * them, and a call that finds an idle handle allocates nothing, so it may
 * be captured into a CUDA graph. Creating a handle allocates, which a
 * capturing thread may not: rill__cuda_libs_prepare makes one ahead (at a
 * kernel's load, say), and the pool grows only while several threads call
 * at once. */
#ifndef RILL_BACKEND_CUDA_CUDA_LIBS_H
#define RILL_BACKEND_CUDA_CUDA_LIBS_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/op_args.h"
#include "platform/thread.h"
#include "rill.h"

/* The driver's stream, declared as cuda.h declares it (C11 allows the same
 * typedef twice, so this header goes beside cuda.h or the backend's own
 * declarations of the driver ABI). */
typedef struct CUstream_st *CUstream;

struct rill__cuda_blas;   /* cuBLAS's entry points (cuda_libs.c) */
struct rill__cuda_dnn;    /* cuDNN's */
struct rill__cuda_handle; /* an idle handle of the pool */

typedef struct rill__cuda_libs {
    /* immutable after init */
    const char *const *blas_names; /* borrowed: NULL-terminated, tried in order */
    const char *const *dnn_names;  /* borrowed: likewise */
    const char *blas_env[2];       /* {$RILL_CUBLAS_LIBRARY, NULL} when it is set */
    const char *dnn_env[2];        /* {$RILL_CUDNN_LIBRARY, NULL} likewise */
    rill__mutex lock;
    /* guarded by lock; each table, once set, is immutable until fini */
    bool blas_tried, dnn_tried;
    struct rill__cuda_blas *blas;                   /* owned: NULL until loaded, or absent */
    struct rill__cuda_dnn *dnn;                     /* owned: likewise */
    char blas_why[320], dnn_why[320];               /* why a library is absent ("" otherwise) */
    struct rill__cuda_handle *idle_blas, *idle_dnn; /* owned: idle handles */
} rill__cuda_libs;

/* Prepares libs for a device; loads nothing (the first op that needs a
 * library loads it). cuBLAS is loaded from $RILL_CUBLAS_LIBRARY when it is
 * set (a file name or path), else from libcublas.so.13 or .12; cuDNN from
 * $RILL_CUDNN_LIBRARY, else libcudnn.so.9. Any thread. */
void rill__cuda_libs_init(rill__cuda_libs *libs);
/* rill__cuda_libs_init with other file names to load cuBLAS and cuDNN
 * from (NULL-terminated lists, kept until fini): for tests. */
void rill__cuda_libs_init_names(rill__cuda_libs *libs, const char *const *blas_names,
                                const char *const *dnn_names);
/* Destroys the pool's handles, with the device's context current and no
 * call in progress. The libraries stay loaded until the process exits:
 * other devices may use them, and cuBLAS and cuDNN keep process-wide state
 * that unloading would tear down under them. */
void rill__cuda_libs_fini(rill__cuda_libs *libs);

/* Loads cuBLAS (cuDNN), once per libs: RILL_OK when it is there; else
 * RILL_ERROR_NOT_SUPPORTED with the sentence saying why in why (truncated
 * to why_size bytes), again at every later call. Loads the library and its
 * entry points only: it initialises nothing and needs no device. Any
 * thread; may block while another thread loads. */
rill_status rill__cuda_libs_load_blas(rill__cuda_libs *libs, char *why, size_t why_size);
rill_status rill__cuda_libs_load_dnn(rill__cuda_libs *libs, char *why, size_t why_size);

/* Loads the library that op runs through and makes sure an idle handle
 * is ready, so that the next call of op needs no allocation: the statuses
 * of rill__cuda_op_library, without the kernel failure. The caller has
 * made the device's context current. RILL_OK at once for an op that runs
 * as a kernel. Any thread, no locks held. */
rill_status rill__cuda_libs_prepare(rill__cuda_libs *libs, rill__op op, char *why, size_t why_size);

/* Runs op, one that rill__cuda_op_uses_library names, on stream with its
 * argument struct args (op_args.h; the grid and the fields that only shape
 * it are ignored): matmul f32 by cublasSgemm, the batched matmul f32 by
 * cublasSgemmStridedBatched, matmul f16 by cublasGemmEx
 * (halves in and out, float accumulation), conv2d f32 and conv2d's
 * backward (its data and filter ops) by cuDNN (float arithmetic, no
 * TF32). The work is queued on stream and the call returns. The caller
 * has made the device's context current. Statuses, each with a sentence
 * in why: RILL_ERROR_NOT_SUPPORTED (the library is absent, or refuses the
 * shape or the GPU), RILL_ERROR_OUT_OF_MEMORY (a handle could not be
 * made), RILL_ERROR_KERNEL_FAILED (the library failed to queue the work),
 * RILL_ERROR_INTERNAL (op runs as a kernel, not here). Any thread, no
 * locks held; may block while the first call loads a library. */
rill_status rill__cuda_op_library(rill__cuda_libs *libs, rill__op op, CUstream stream,
                                  const void *args, char *why, size_t why_size);

#endif
