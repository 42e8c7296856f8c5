/* SPDX-License-Identifier: MIT */
/* Stands in for MPI's header where MPI is absent, so that the stub library
 * (src/comm/mpi_stub.c) compiles rill_mpi.h's declarations, and so checks
 * its definitions against them. It declares only what rill_mpi.h names. */
#ifndef RILL_COMM_NOMPI_MPI_H
#define RILL_COMM_NOMPI_MPI_H

typedef struct rill__no_mpi_comm *MPI_Comm;

#endif
