/* SPDX-License-Identifier: MIT */
#include "mpi_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rt_on_cuda(void) {
    const char *env = getenv("RILL_TEST_DEVICE");
    return env != NULL && strcmp(env, "cuda") == 0;
}

/* Makes cuda:0 the calling thread's current device; false, with the reason
 * in why, where rill lists no CUDA device. */
static bool use_cuda(char *why, size_t size) {
    int count = 0;
    if (rill_device_count_of_kind(RILL_DEVICE_CUDA, &count, why, size) != RILL_OK) {
        snprintf(why, size, "%s", rill_last_error());
        return false;
    }
    rill_device *gpu = NULL;
    if (count == 0 || rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &gpu) != RILL_OK ||
        rill_set_device(gpu) != RILL_OK)
        return false;
    rill_device_info info;
    if (rt_rank() == 0 && rill_device_get_info(gpu, &info) == RILL_OK)
        printf("the tests run on cuda:0 (%s)\n", info.name);
    return true;
}

int rt_mpi_run(const char *group_name, const struct CMUnitTest *tests, size_t count, int argc,
               char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init_thread failed\n", group_name);
        return 1;
    }
    char why[512] = "";
    if (rt_on_cuda() && !use_cuda(why, sizeof why)) {
        /* Every rank finds the same, and skips. */
        if (rt_rank() == 0)
            printf("skipped: no CUDA device (%s)\n", why);
        rill_shutdown();
        MPI_Finalize();
        return 77;
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
    /* The path a CUDA device's memory takes, where the test says which. */
    const char *want = getenv("RILL_TEST_CUDA_AWARE");
    if (want != NULL && want[0] != '\0') {
        int aware = -1;
        RT_OK(rill_comm_cuda_aware(c, &aware));
        if (aware != atoi(want))
            fail_msg("rill_comm_cuda_aware says %d, and the test expects %s", aware, want);
    }
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
