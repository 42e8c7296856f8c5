/* SPDX-License-Identifier: MIT */
/* librill_mpi as built without MPI (src/comm/mpi_stub.c, compiled into
 * this test whatever the build found): rill_mpi.h says "otherwise every
 * call returns RILL_ERROR_NOT_SUPPORTED with a sentence saying how to
 * build with MPI". */
#include "fixture.h"

#include <string.h>

#include "rill_mpi.h"

static void assert_says_how(const char *fn) {
    const char *e = rill_last_error();
    if (strncmp(e, fn, strlen(fn)) != 0 || strstr(e, "built without MPI") == NULL ||
        strstr(e, "apt-get install libopenmpi-dev openmpi-bin") == NULL)
        fail_msg("%s left: %s", fn, e);
}

/* Every call of rill_mpi.h is RILL_ERROR_NOT_SUPPORTED, names itself and
 * says how to build with MPI, and leaves its out-parameter empty. */
static void test_comm_stub_every_call_says_how_to_build_with_mpi(void **state) {
    (void)state;
    rill_comm *c = (rill_comm *)&c;
    int n = 7;
    float f[4];
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_comm_create_mpi(NULL, &c));
    assert_null(c);
    assert_says_how("rill_comm_create_mpi");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_comm_destroy(c));
    assert_says_how("rill_comm_destroy");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_comm_rank(c, &n));
    assert_int_equal(n, 0);
    assert_says_how("rill_comm_rank");
    n = 7;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_comm_size(c, &n));
    assert_int_equal(n, 0);
    assert_says_how("rill_comm_size");
    n = 7;
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_comm_cuda_aware(c, &n));
    assert_int_equal(n, 0);
    assert_says_how("rill_comm_cuda_aware");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_allreduce_f32(NULL, c, f, f, 4, RILL_REDUCE_SUM));
    assert_says_how("rill_allreduce_f32");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_broadcast(NULL, c, f, sizeof f, 0));
    assert_says_how("rill_broadcast");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_allgather(NULL, c, f, f, 4));
    assert_says_how("rill_allgather");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_reduce_scatter_f32(NULL, c, f, f, 1, RILL_REDUCE_MAX));
    assert_says_how("rill_reduce_scatter_f32");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_send(NULL, c, f, 4, 1));
    assert_says_how("rill_send");
    RT_STATUS(RILL_ERROR_NOT_SUPPORTED, rill_recv(NULL, c, f, 4, 1));
    assert_says_how("rill_recv");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_stub_every_call_says_how_to_build_with_mpi),
    };
    return RT_RUN(tests);
}
