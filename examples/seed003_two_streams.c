/* SPDX-License-Identifier: MIT */
/* Seed 003, "Stream usage": y = randn(1000, 1000); y = y * 2 on stream s1
 * and z = randn(1000, 1000); z = z + 1 on stream s2, which may run
 * concurrently; synchronizing the device waits for both. The random
 * tensors are copied in on their streams from deterministic host values,
 * and the results are checked against the host. */
#include "seed_support.h"

#define SIDE  1000
#define COUNT ((size_t)SIDE * SIDE)

int main(void) {
    rill_stream *s1, *s2;
    check(rill_stream_create(NULL, 0, &s1), "s1 = torch.cuda.Stream()");
    check(rill_stream_create(NULL, 0, &s2), "s2 = torch.cuda.Stream()");
    float *host_y = host_floats(COUNT), *host_z = host_floats(COUNT);
    fill_lcg(host_y, COUNT, 31, 65536, 1.0f / 16384);
    fill_lcg(host_z, COUNT, 32, 65536, 1.0f / 16384);
    float *y = device_floats(COUNT), *y2 = device_floats(COUNT);
    float *z = device_floats(COUNT), *z1 = device_floats(COUNT);

    /* with torch.cuda.stream(s1): */
    rill_stream *prev = rill_set_current_stream(s1);
    check(rill_memcpy_async(y, host_y, COUNT * sizeof(float), NULL), "y = torch.randn(...)");
    /* y * 2, computed as y + 1 * y (exact in float) */
    check(rill_op_add_f32(NULL, y2, y, y, 1.0f, COUNT), "y = y * 2");
    /* with torch.cuda.stream(s2): */
    rill_set_current_stream(s2);
    check(rill_memcpy_async(z, host_z, COUNT * sizeof(float), NULL), "z = torch.randn(...)");
    check(rill_op_add_scalar_f32(NULL, z1, z, 1.0f, COUNT), "z = z + 1");
    rill_set_current_stream(prev);

    /* torch.cuda.synchronize() */
    check(rill_device_synchronize(NULL), "rill_device_synchronize");
    float *got_y = host_floats(COUNT), *got_z = host_floats(COUNT);
    check(rill_memcpy(got_y, y2, COUNT * sizeof(float)), "rill_memcpy");
    check(rill_memcpy(got_z, z1, COUNT * sizeof(float)), "rill_memcpy");
    int y_ok = 1, z_ok = 1;
    for (size_t i = 0; i < COUNT; i++) {
        y_ok &= got_y[i] == host_y[i] * 2.0f;
        z_ok &= got_z[i] == host_z[i] + 1.0f;
    }
    printf("y * 2 on s1: %s\n", py_bool(y_ok));
    printf("z + 1 on s2: %s\n", py_bool(z_ok));

    free(host_y);
    free(host_z);
    free(got_y);
    free(got_z);
    check(rill_stream_destroy(s1), "rill_stream_destroy");
    check(rill_stream_destroy(s2), "rill_stream_destroy");
    float *buffers[] = {y, y2, z, z1};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        check(rill_free(buffers[i]), "rill_free");
    return rill_shutdown() == RILL_OK && y_ok && z_ok ? 0 : 1;
}
