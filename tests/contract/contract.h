/* SPDX-License-Identifier: MIT */
/* The contract tests: rules of rill.h checked on one device, the same test
 * for every kind of device. RILL_TEST_DEVICE names the kind under test
 * ("cpu" or "cuda"); ctest runs each test once per kind, and a kind this
 * machine has no device of is reported as skipped with the reason. The
 * tests touch device memory only through rill's copies, and their kernels
 * have a CPU body and a PTX body (kernels.cu). */
#ifndef RILL_TEST_CONTRACT_H
#define RILL_TEST_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fixture.h"

/* The device under test, made current on the calling thread. The first
 * call exits with status 77 (ctest: skipped) and the reason when the
 * process has no device of the kind RILL_TEST_DEVICE names. */
rill_device *contract_device(void);
/* The kind of dev. */
rill_device_kind contract_kind(rill_device *dev);
/* Whether dev's memory is host memory (every device of host memory
 * reaches it, and it reaches pageable host memory), and whether a fault
 * can lose dev: from contract.c's line for its kind. */
bool contract_host_memory(rill_device *dev);
bool contract_can_be_lost(rill_device *dev);
/* Runs the tests after choosing the device (so that a skip is reported
 * once, before any test). */
int contract_run(const char *file, const struct CMUnitTest *tests, size_t count, int argc,
                 char **argv);
#define CONTRACT_RUN(tests)                                                                        \
    contract_run(__FILE__, tests, sizeof(tests) / sizeof((tests)[0]), argc, argv)

/* x[i] += value for i < n. */
typedef struct contract_add_args {
    uint32_t *x;
    uint32_t value;
    uint64_t n;
} contract_add_args;
/* out[i] = in[i] * factor for i < n; out may equal in. */
typedef struct contract_scale_args {
    uint32_t *out;
    const uint32_t *in;
    uint32_t factor;
    uint64_t n;
} contract_scale_args;
/* Faults its GPU, as a kernel that writes where no memory is: the PTX
 * body stores to address `address`; the host body asks the stand-in
 * driver to fault (a CPU device never faults: the CPU body does nothing
 * there). */
typedef struct contract_fault_args {
    uint64_t address;
} contract_fault_args;
/* Keeps its block busy for about ns nanoseconds, then x[0] += 1. */
typedef struct contract_spin_args {
    uint32_t *x;
    uint64_t ns;
} contract_spin_args;

/* The CPU bodies of the kernels above. They are exported under the PTX
 * entry's name followed by "_host": the stand-in driver of
 * tests/cuda_fake runs them for the PTX kernels. */
void contract_add_host(const rill_block_ctx *ctx, const void *args);
void contract_scale_host(const rill_block_ctx *ctx, const void *args);
void contract_spin_host(const rill_block_ctx *ctx, const void *args);
void contract_fault_host(const rill_block_ctx *ctx, const void *args);

/* The kernels above, created on first use and kept until the group's
 * teardown shuts the runtime down (a contract test does not). */
rill_kernel *contract_add_kernel(void);
rill_kernel *contract_scale_kernel(void);
rill_kernel *contract_spin_kernel(void);
rill_kernel *contract_fault_kernel(void);

/* Launches on s, with the accesses each kernel makes. */
rill_status contract_add(rill_stream *s, uint32_t *x, uint32_t value, size_t n);
rill_status contract_scale(rill_stream *s, uint32_t *out, const uint32_t *in, uint32_t factor,
                           size_t n);
rill_status contract_spin(rill_stream *s, uint32_t *x, uint64_t ns);
/* Faults s's device (a GPU), which then is lost. */
rill_status contract_fault(rill_stream *s);

/* Device memory of n words set to value, on s's device, ready when s's
 * work so far is. */
uint32_t *contract_words(rill_stream *s, size_t n, uint32_t value);
/* Copies n words of device memory to host memory and waits for it. */
void contract_read(uint32_t *host, const uint32_t *dev, size_t n);

/* A new stream of the device under test, priority 0. */
rill_stream *contract_stream(void);
/* Device memory of bytes on s's device, from rill_malloc_async on s. */
void *contract_alloc(rill_stream *s, size_t bytes);
/* Device memory on s holding n floats copied from host (NULL: left
 * uninitialised). */
float *contract_floats(rill_stream *s, const float *host, size_t n);
/* Device memory on s holding n indices copied from host, as int64s
 * (index_bytes 8) or narrowed to int32s (4). */
void *contract_indices(rill_stream *s, const int64_t *host, size_t n, size_t index_bytes);
/* Copies bytes from host memory to device memory on s and waits for it. */
void contract_upload(rill_stream *s, void *dst, const void *src, size_t bytes);
/* Waits for s, then copies bytes from device memory to host memory. */
void contract_download(rill_stream *s, void *dst, const void *src, size_t bytes);
/* Fails the test unless got is the status want and rill_last_error()'s
 * sentence names fn and says words. */
void contract_expect_error(rill_status want, rill_status got, const char *fn, const char *words);
/* Fails the test unless got is want within tol (relative, past 1), or
 * both are NaN; what[i] names the value. */
void contract_expect_close(const char *what, size_t i, double got, double want, double tol);

#endif
