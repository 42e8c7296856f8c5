/* SPDX-License-Identifier: MIT */
/* rill_comm_create_mpi and the state of MPI, in one process: before
 * MPI_Init, under MPI_Init (MPI_THREAD_SINGLE, too low for rill's
 * communication thread) and after MPI_Finalize. */
#include "mpi_fixture.h"

#include <string.h>

static void assert_contains(const char *text, const char *part) {
    if (strstr(text, part) == NULL)
        fail_msg("expected \"%s\" in: %s", part, text);
}

/* rill_mpi.h: "MPI must be initialised" and "MPI must provide
 * MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE": RILL_ERROR_INVALID_ARGUMENT
 * before MPI_Init and after MPI_Finalize, RILL_ERROR_NOT_SUPPORTED below
 * MPI_THREAD_SERIALIZED; each says what to do. */
static void test_single_create_needs_mpi_initialised_at_serialized(void **state) {
    (void)state;
    rill_comm *c = NULL;
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    assert_contains(rill_last_error(), "rill_comm_create_mpi: MPI is not initialised; call "
                                       "MPI_Init_thread");
    assert_int_equal(MPI_Init(NULL, NULL), MPI_SUCCESS);
    int level = MPI_THREAD_MULTIPLE;
    MPI_Query_thread(&level);
    if (level >= MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        skip(); /* this MPI's MPI_Init provides more than MPI_THREAD_SINGLE */
    }
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    assert_null(c);
    assert_contains(rill_last_error(), "MPI was initialised at MPI_THREAD_SINGLE, and rill's "
                                       "communication thread makes the MPI calls");
    MPI_Finalize();
    RT_STATUS(RILL_ERROR_INVALID_ARGUMENT, rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    assert_contains(rill_last_error(), "MPI is already finalised");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_create_needs_mpi_initialised_at_serialized),
    };
    return RT_RUN(tests);
}
