/* SPDX-License-Identifier: MIT */
/* A program built against an installed librill_mpi: one process (an MPI
 * singleton) sums 2.0 over its world and prints the world's size and the
 * sum. */
#include <stdio.h>

#include <rill_mpi.h>

static int fail(const char *what) {
    fprintf(stderr, "consumer_mpi: %s: %s\n", what, rill_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return 1;
    rill_comm *comm;
    float *x, sum = 0.0f;
    int size = 0;
    if (rill_comm_create_mpi(MPI_COMM_WORLD, &comm) != RILL_OK)
        return fail("rill_comm_create_mpi");
    if (rill_malloc(NULL, sizeof(float), (void **)&x) != RILL_OK ||
        rill_op_fill_f32(NULL, x, 2.0f, 1) != RILL_OK ||
        rill_allreduce_f32(NULL, comm, x, x, 1, RILL_REDUCE_SUM) != RILL_OK ||
        rill_memcpy(&sum, x, sizeof sum) != RILL_OK || rill_comm_size(comm, &size) != RILL_OK)
        return fail("allreduce");
    printf("mpi ranks: %d sum: %g\n", size, (double)sum);
    if (rill_free(x) != RILL_OK || rill_comm_destroy(comm) != RILL_OK || rill_shutdown() != RILL_OK)
        return fail("teardown");
    MPI_Finalize();
    return 0;
}
