/* SPDX-License-Identifier: MIT */
/* Seed 001, Stream.wait_stream: c = matmul(a, b) on s1; s2 waits for all of
 * s1's work, then d = matmul(c, b) on s2; after synchronizing the device,
 * d is [[4. 4.]] (a = ones [1, 2], b = ones [2, 2]). */
#include "seed_support.h"

int main(void) {
    rill_stream *s1, *s2;
    check(rill_stream_create(NULL, 0, &s1), "rill_stream_create");
    check(rill_stream_create(NULL, 0, &s2), "rill_stream_create");
    const float ones[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    /* a = Tensor(np.ones([1, 2])); b = Tensor(np.ones([2, 2])) */
    float *a = device_floats(2), *b = device_floats(4);
    check(rill_memcpy(a, ones, 2 * sizeof(float)), "rill_memcpy");
    check(rill_memcpy(b, ones, 4 * sizeof(float)), "rill_memcpy");
    float *c = device_floats(2), *d = device_floats(2);

    /* with ms.hal.StreamCtx(s1): c = ops.matmul(a, b) */
    rill_stream *prev = rill_set_current_stream(s1);
    check(rill_op_matmul_f32(NULL, c, a, b, 1, 2, 2), "c = matmul(a, b)");
    /* with ms.hal.StreamCtx(s2): s2.wait_stream(s1); d = ops.matmul(c, b) */
    rill_set_current_stream(s2);
    check(rill_stream_wait_stream(s2, s1), "s2.wait_stream(s1)");
    check(rill_op_matmul_f32(NULL, d, c, b, 1, 2, 2), "d = matmul(c, b)");
    rill_set_current_stream(prev);

    /* ms.hal.synchronize() */
    check(rill_device_synchronize(NULL), "rill_device_synchronize");
    float host_d[2];
    check(rill_memcpy(host_d, d, sizeof host_d), "rill_memcpy");
    if (print_whole_array(host_d, 1, 2) != 0)
        return 1;

    check(rill_stream_destroy(s1), "rill_stream_destroy");
    check(rill_stream_destroy(s2), "rill_stream_destroy");
    float *buffers[] = {a, b, c, d};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        check(rill_free(buffers[i]), "rill_free");
    return rill_shutdown() == RILL_OK ? 0 : 1;
}
