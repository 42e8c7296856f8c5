/* SPDX-License-Identifier: MIT */
/* Seed 001, Stream.query and Stream.synchronize (the same example): the
 * 1024x2048 @ 2048x4096 matmul of ones on a new stream s1; after
 * s1.synchronize(), s1.query() reports that all its work has completed
 * (the seed asserts it). Also checks that every element of c is 2048. */
#include "seed_support.h"

int main(void) {
    const size_t m = 1024, k = 2048, n = 4096;
    /* a = Tensor(np.ones([1024, 2048])); b = Tensor(np.ones([2048, 4096])):
     * filled on the default stream and ready before the example goes on. */
    float *a = device_floats(m * k), *b = device_floats(k * n), *c = device_floats(m * n);
    check(rill_op_fill_f32(NULL, a, 1.0f, m * k), "a = ones");
    check(rill_op_fill_f32(NULL, b, 1.0f, k * n), "b = ones");
    check(rill_stream_synchronize(NULL), "rill_stream_synchronize");

    rill_stream *s1;
    check(rill_stream_create(NULL, 0, &s1), "rill_stream_create");
    /* with ms.hal.StreamCtx(s1): c = ops.matmul(a, b) */
    rill_stream *prev = rill_set_current_stream(s1);
    check(rill_op_matmul_f32(NULL, c, a, b, m, k, n), "c = matmul(a, b)");
    rill_set_current_stream(prev);

    check(rill_stream_synchronize(s1), "s1.synchronize()");
    rill_status query = rill_stream_query(s1);
    printf("query: %s\n", py_bool(query == RILL_OK));

    float *host_c = host_floats(m * n);
    check(rill_memcpy(host_c, c, m * n * sizeof(float)), "rill_memcpy");
    int all_k = 1;
    for (size_t i = 0; i < m * n; i++)
        all_k &= host_c[i] == (float)k;
    printf("c == 2048 everywhere: %s\n", py_bool(all_k));
    free(host_c);

    check(rill_stream_destroy(s1), "rill_stream_destroy");
    check(rill_free(a), "rill_free");
    check(rill_free(b), "rill_free");
    check(rill_free(c), "rill_free");
    return rill_shutdown() == RILL_OK && query == RILL_OK && all_k ? 0 : 1;
}
