/* SPDX-License-Identifier: MIT */
/* A device lost as a whole (rill.h, RILL_ERROR_DEVICE_LOST), on the device
 * under test (contract.h): a fault on a GPU ends its context, so every
 * stream of it fails with RILL_ERROR_DEVICE_LOST, new work is refused, a
 * clear does not recover it, other devices go on, and rill_shutdown and a
 * new runtime do. A CPU device is never lost: skipped there. Its own
 * program, since the device stays lost until the runtime is shut down. */
#include "contract.h"

#include <stdio.h>
#include <string.h>

static void expect_lost(rill_status st) {
    assert_int_equal(st, RILL_ERROR_DEVICE_LOST);
    assert_non_null(strstr(rill_last_error(), "was lost"));
    assert_non_null(strstr(rill_last_error(), "rill_shutdown"));
}

static void test_a_fault_loses_the_device_until_shutdown(void **state) {
    (void)state;
    enum { N = 1024 };
    rill_device *dev = contract_device();
    rill_stream *s, *t;
    rill_event *done;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_stream_create(dev, 0, &t));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &done));
    uint32_t *x = contract_words(t, N, 1);
    RT_OK(rill_event_record(done, t));
    RT_OK(rill_stream_synchronize(t));
    /* The fault, and work behind it that never runs. */
    RT_OK(contract_fault(s));
    (void)contract_add(s, x, 1, N); /* refused, or queued and failed */
    expect_lost(rill_stream_synchronize(s));
    expect_lost(rill_stream_synchronize(t)); /* every stream of the device */
    expect_lost(rill_stream_query(t));
    expect_lost(rill_event_query(done));
    expect_lost(rill_device_synchronize(dev));
    expect_lost(contract_add(t, x, 1, N)); /* no more work */
    expect_lost(rill_stream_clear_error(s));
    expect_lost(rill_stream_synchronize(s)); /* no clear recovers it */
    /* The other devices go on. */
    rill_device *cpu = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &cpu));
    rill_stream *c;
    float *y;
    RT_OK(rill_stream_create(cpu, 0, &c));
    RT_OK(rill_malloc_async(N * sizeof *y, c, (void **)&y));
    RT_OK(rill_op_fill_f32(c, y, 3.0f, N));
    RT_OK(rill_stream_synchronize(c));
    RT_OK(rill_free_async(y, c));
    RT_OK(rill_stream_destroy(c));
    /* The lost device's objects still go away, and a new runtime works. */
    RT_OK(rill_event_destroy(done));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(t));
    RT_OK(rill_shutdown());
    dev = contract_device();
    rill_stream *u;
    float *z, back[N];
    RT_OK(rill_stream_create(dev, 0, &u));
    RT_OK(rill_malloc_async(N * sizeof *z, u, (void **)&z));
    RT_OK(rill_op_fill_f32(u, z, 5.0f, N));
    RT_OK(rill_stream_synchronize(u));
    RT_OK(rill_memcpy(back, z, sizeof back));
    assert_true(back[0] == 5.0f && back[N - 1] == 5.0f);
    RT_OK(rill_free_async(z, u));
    RT_OK(rill_stream_destroy(u));
}

int main(int argc, char **argv) {
    if (!contract_can_be_lost(contract_device())) {
        printf("skipped: a device of this kind is never lost\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_fault_loses_the_device_until_shutdown),
    };
    return CONTRACT_RUN(tests);
}
