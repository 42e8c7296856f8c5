/* SPDX-License-Identifier: MIT */
/* What the stand-in driver offers its stand-in libraries (fake_libs.c). */
#ifndef RILL_TEST_FAKE_CUDA_H
#define RILL_TEST_FAKE_CUDA_H

#include <cuda.h>

/* Queues fn(arg) on s, after the work queued before it: the stream's
 * thread runs it, as the GPU runs a kernel. fn owns arg. */
CUresult fake_stream_call(CUstream s, void (*fn)(void *), void *arg);

#endif
