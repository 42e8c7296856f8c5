/* SPDX-License-Identifier: MIT */
/* Seed 003, "event-based synchronization": on stream1, a = randn(1000)
 * (operation 1), event.record(), then b = randn(1000) (operation 2); on
 * stream2, event.wait() orders c = a + 1 after operation 1 only. After
 * synchronizing the device, c is checked against the host's a + 1. */
#include "seed_support.h"

#define COUNT ((size_t)1000)

int main(void) {
    rill_stream *stream1, *stream2;
    rill_event *event;
    check(rill_stream_create(NULL, 0, &stream1), "stream1 = torch.cuda.Stream()");
    check(rill_stream_create(NULL, 0, &stream2), "stream2 = torch.cuda.Stream()");
    check(rill_event_create(RILL_EVENT_DEFAULT, &event), "event = torch.cuda.Event()");
    float *host_a = host_floats(COUNT), *host_b = host_floats(COUNT);
    fill_lcg(host_a, COUNT, 51, 65536, 1.0f / 16384);
    fill_lcg(host_b, COUNT, 52, 65536, 1.0f / 16384);
    float *a = device_floats(COUNT), *b = device_floats(COUNT), *c = device_floats(COUNT);

    /* with torch.cuda.stream(stream1): */
    rill_stream *prev = rill_set_current_stream(stream1);
    check(rill_memcpy_async(a, host_a, COUNT * sizeof(float), NULL), "a = torch.randn(1000)");
    check(rill_event_record(event, NULL), "event.record()");
    check(rill_memcpy_async(b, host_b, COUNT * sizeof(float), NULL), "b = torch.randn(1000)");
    /* with torch.cuda.stream(stream2): */
    rill_set_current_stream(stream2);
    check(rill_stream_wait_event(NULL, event), "event.wait()");
    check(rill_op_add_scalar_f32(NULL, c, a, 1.0f, COUNT), "c = a + 1");
    rill_set_current_stream(prev);

    /* torch.cuda.synchronize() */
    check(rill_device_synchronize(NULL), "rill_device_synchronize");
    float got[COUNT];
    check(rill_memcpy(got, c, sizeof got), "rill_memcpy");
    int same = 1;
    for (size_t i = 0; i < COUNT; i++)
        same &= got[i] == host_a[i] + 1.0f;
    printf("c == a + 1: %s\n", py_bool(same));

    free(host_a);
    free(host_b);
    check(rill_event_destroy(event), "rill_event_destroy");
    check(rill_stream_destroy(stream1), "rill_stream_destroy");
    check(rill_stream_destroy(stream2), "rill_stream_destroy");
    check(rill_free(a), "rill_free");
    check(rill_free(b), "rill_free");
    check(rill_free(c), "rill_free");
    return rill_shutdown() == RILL_OK && same ? 0 : 1;
}
