/* SPDX-License-Identifier: MIT */
/* Seed 000, "device streams", the correct version: B = matmul(A, A) on the
 * current (default) stream, then s.wait_stream(current stream) so that
 * C = sum(B) on a new stream s starts only after B is complete. A holds
 * small whole numbers instead of np.random.randn, so C is exact; the
 * example prints C and whether it equals the host's sum of A @ A. */
#include "seed_support.h"

enum { N = 20 };

/* sum(A @ A) in double on the host. */
static double host_sum_of_square(const float *a) {
    double total = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int p = 0; p < N; p++)
                total += (double)a[i * N + p] * a[p * N + j];
    return total;
}

int main(void) {
    rill_stream *s;
    check(rill_stream_create(NULL, 0, &s), "s = ms.hal.Stream()");
    /* A = Tensor(np.random.randn(20, 20)): values in {-2, ..., 2} */
    float host_a[N * N];
    fill_lcg(host_a, N * N, 20, 5, 1.0f);
    float *a = device_floats(N * N), *b = device_floats(N * N), *c = device_floats(1);
    check(rill_memcpy(a, host_a, sizeof host_a), "rill_memcpy");

    check(rill_op_matmul_f32(NULL, b, a, a, N, N, N), "B = ops.matmul(A, A)");
    check(rill_stream_wait_stream(s, rill_current_stream(NULL)),
          "s.wait_stream(ms.hal.current_stream())");
    /* with ms.hal.StreamCtx(s): C = ops.sum(B) */
    rill_stream *prev = rill_set_current_stream(s);
    check(rill_op_sum_f32(NULL, c, b, N * N), "C = ops.sum(B)");
    rill_set_current_stream(prev);

    check(rill_stream_synchronize(s), "s.synchronize()");
    float host_c;
    check(rill_memcpy(&host_c, c, sizeof host_c), "rill_memcpy");
    printf("C = %.1f\n", (double)host_c);
    int same = (double)host_c == host_sum_of_square(host_a);
    printf("C == sum(A @ A) on the host: %s\n", py_bool(same));

    check(rill_stream_destroy(s), "rill_stream_destroy");
    check(rill_free(a), "rill_free");
    check(rill_free(b), "rill_free");
    check(rill_free(c), "rill_free");
    return rill_shutdown() == RILL_OK && same ? 0 : 1;
}
