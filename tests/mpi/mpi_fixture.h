/* SPDX-License-Identifier: MIT */
/* Helpers of the tests that mpirun starts (label mpi): MPI around the
 * cmocka group, this process's rank in MPI_COMM_WORLD, and device buffers
 * filled from and read back to the host. Every rank runs the same tests in
 * the same order, so every collective they issue matches. */
#ifndef RILL_TEST_MPI_FIXTURE_H
#define RILL_TEST_MPI_FIXTURE_H

#include "fixture.h"

#include <mpi.h>
#include <stdbool.h>

#include "rill_mpi.h"

/* Initialises MPI at MPI_THREAD_MULTIPLE, runs the group (argv[1] filters,
 * as rt_run does), shuts rill down, finalises MPI. */
int rt_mpi_run(const char *group_name, const struct CMUnitTest *tests, size_t count, int argc,
               char **argv);
#define RT_MPI_RUN(tests)                                                                          \
    rt_mpi_run(__FILE__, tests, sizeof(tests) / sizeof((tests)[0]), argc, argv)

/* RILL_TEST_DEVICE=cuda: the tests run on cuda:0, the current device of
 * the thread that runs them (their streams and memory default to it), and
 * are skipped (exit status 77) where rill lists no CUDA device. A
 * communicator's path for that memory is checked against
 * RILL_TEST_CUDA_AWARE (0 or 1) where it is set. */
bool rt_on_cuda(void);

/* This process's rank in MPI_COMM_WORLD, and the world's size. */
int rt_rank(void);
int rt_size(void);
/* A communicator of rill duplicated from MPI_COMM_WORLD. */
rill_comm *rt_world(void);

/* bytes of device memory (NULL for 0 bytes), optionally filled from host. */
void *rt_dev_alloc(size_t bytes, const void *host);
/* Copies bytes of device memory to the host (nothing for 0 bytes). */
void rt_dev_read(void *host, const void *dev, size_t bytes);
/* Frees device memory from rt_dev_alloc (NULL: nothing). */
void rt_dev_free(void *dev);

#endif
