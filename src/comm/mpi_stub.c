/* SPDX-License-Identifier: MIT */
/* librill_mpi where CMake found no MPI: every call of rill_mpi.h exists and
 * returns RILL_ERROR_NOT_SUPPORTED with a sentence saying how to build rill
 * with MPI, and leaves its out-parameter NULL or 0. Compiled with the
 * stand-in header of src/comm/nompi. */
#include "rill_mpi.h"

#include "util/status.h"

static rill_status no_mpi(const char *fn) {
    return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                      "%s: this rill was built without MPI; install MPI (Debian: apt-get install "
                      "libopenmpi-dev openmpi-bin) and build rill again, which then finds it",
                      fn);
}

rill_status rill_comm_create_mpi(MPI_Comm comm, rill_comm **out) {
    (void)comm;
    if (out != NULL)
        *out = NULL;
    return no_mpi("rill_comm_create_mpi");
}

rill_status rill_comm_destroy(rill_comm *comm) {
    (void)comm;
    return no_mpi("rill_comm_destroy");
}

rill_status rill_comm_rank(rill_comm *comm, int *out) {
    (void)comm;
    if (out != NULL)
        *out = 0;
    return no_mpi("rill_comm_rank");
}

rill_status rill_comm_size(rill_comm *comm, int *out) {
    (void)comm;
    if (out != NULL)
        *out = 0;
    return no_mpi("rill_comm_size");
}

rill_status rill_comm_cuda_aware(rill_comm *comm, int *out) {
    (void)comm;
    if (out != NULL)
        *out = 0;
    return no_mpi("rill_comm_cuda_aware");
}

rill_status rill_allreduce_f32(rill_stream *s, rill_comm *comm, float *recv, const float *send,
                               size_t count, rill_reduce_op op) {
    (void)s, (void)comm, (void)recv, (void)send, (void)count, (void)op;
    return no_mpi("rill_allreduce_f32");
}

rill_status rill_allreduce(rill_stream *s, rill_comm *comm, void *recv, const void *send,
                           size_t count, rill_dtype dtype, rill_reduce_op op) {
    (void)s, (void)comm, (void)recv, (void)send, (void)count, (void)dtype, (void)op;
    return no_mpi("rill_allreduce");
}

rill_status rill_broadcast(rill_stream *s, rill_comm *comm, void *buf, size_t bytes, int root) {
    (void)s, (void)comm, (void)buf, (void)bytes, (void)root;
    return no_mpi("rill_broadcast");
}

rill_status rill_allgather(rill_stream *s, rill_comm *comm, void *recv, const void *send,
                           size_t bytes_per_rank) {
    (void)s, (void)comm, (void)recv, (void)send, (void)bytes_per_rank;
    return no_mpi("rill_allgather");
}

rill_status rill_reduce_scatter_f32(rill_stream *s, rill_comm *comm, float *recv, const float *send,
                                    size_t count_per_rank, rill_reduce_op op) {
    (void)s, (void)comm, (void)recv, (void)send, (void)count_per_rank, (void)op;
    return no_mpi("rill_reduce_scatter_f32");
}

rill_status rill_send(rill_stream *s, rill_comm *comm, const void *buf, size_t bytes, int peer) {
    (void)s, (void)comm, (void)buf, (void)bytes, (void)peer;
    return no_mpi("rill_send");
}

rill_status rill_recv(rill_stream *s, rill_comm *comm, void *buf, size_t bytes, int peer) {
    (void)s, (void)comm, (void)buf, (void)bytes, (void)peer;
    return no_mpi("rill_recv");
}
