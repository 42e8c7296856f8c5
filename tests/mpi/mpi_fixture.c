/* SPDX-License-Identifier: MIT */
#include "mpi_fixture.h"

#include <stdio.h>

int rt_mpi_run(const char *group_name, const struct CMUnitTest *tests, size_t count, int argc,
               char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init_thread failed\n", group_name);
        return 1;
    }
    int rc = rt_run(group_name, tests, count, argc, argv);
    MPI_Finalize();
    return rc;
}

int rt_rank(void) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int rt_size(void) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

rill_comm *rt_world(void) {
    rill_comm *c = NULL;
    RT_OK(rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    return c;
}

void *rt_dev_alloc(size_t bytes, const void *host) {
    if (bytes == 0)
        return NULL;
    void *p = NULL;
    RT_OK(rill_malloc(NULL, bytes, &p));
    if (host != NULL)
        RT_OK(rill_memcpy(p, host, bytes));
    return p;
}

void rt_dev_read(void *host, const void *dev, size_t bytes) {
    if (bytes != 0)
        RT_OK(rill_memcpy(host, dev, bytes));
}

void rt_dev_free(void *dev) {
    if (dev != NULL)
        RT_OK(rill_free(dev));
}
