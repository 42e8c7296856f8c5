/* SPDX-License-Identifier: MIT */
/* The MPI_Iallreduce algorithm rill selects for Open MPI's libnbc, in one
 * process: Rabenseifner's (3) after rill_comm_create_mpi, unless the
 * environment chose one (OMPI_MCA_coll_libnbc_iallreduce_algorithm, which
 * ctest sets for the test's second run: EXPECT_ALGORITHM says what to
 * find), and the thread level MPI was initialised at is left as it was.
 * Skipped with an MPI that has no such control variable. */
#include "mpi_fixture.h"

#include <stdlib.h>

/* The control variable's value, or -1 when this MPI has none. */
static int iallreduce_algorithm(void) {
    int level = MPI_THREAD_SINGLE, provided, index, count, value = -1;
    MPI_Query_thread(&level);
    if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS)
        return -1;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count) == MPI_SUCCESS) {
        if (count != 1 || MPI_T_cvar_read(h, &value) != MPI_SUCCESS)
            value = -1;
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return value;
}

static void test_single_create_selects_rabenseifner_unless_chosen(void **state) {
    (void)state;
    int provided = MPI_THREAD_SINGLE;
    assert_int_equal(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
    int before = iallreduce_algorithm();
    if (before < 0) {
        MPI_Finalize();
        skip(); /* not Open MPI's libnbc */
    }
    const char *expect = getenv("EXPECT_ALGORITHM");
    rill_comm *c = NULL;
    RT_OK(rill_comm_create_mpi(MPI_COMM_WORLD, &c));
    assert_int_equal(iallreduce_algorithm(), expect != NULL ? atoi(expect) : 3);
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    assert_int_equal(level, provided);
    /* An allreduce still gives the sum (of one rank). */
    float *x = NULL;
    RT_OK(rill_malloc(NULL, 4 * sizeof *x, (void **)&x));
    RT_OK(rill_op_fill_f32(NULL, x, 2.5f, 4));
    RT_OK(rill_allreduce_f32(NULL, c, x, x, 4, RILL_REDUCE_SUM));
    float host[4];
    RT_OK(rill_memcpy(host, x, sizeof host));
    for (int i = 0; i < 4; i++)
        assert_true(host[i] == 2.5f);
    RT_OK(rill_free(x));
    RT_OK(rill_comm_destroy(c));
    RT_OK(rill_shutdown());
    MPI_Finalize();
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_create_selects_rabenseifner_unless_chosen),
    };
    return RT_RUN(tests);
}
