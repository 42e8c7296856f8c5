/* SPDX-License-Identifier: MIT */
/* Seed 001, Stream.record_event / Stream.wait_event: c = a + b and d = a * b
 * on a new stream s1 with an event recorded between them; the current
 * stream waits on the event, so e = c + 3 sees c. Prints e as numpy does:
 * a 3x3 array of 5. */
#include "seed_support.h"

int main(void) {
    enum { N = 3 * 3 };
    float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    /* a = Tensor(np.ones([3, 3])); b = Tensor(np.ones([3, 3])) */
    float *a = device_floats(N), *b = device_floats(N);
    check(rill_memcpy(a, ones, sizeof ones), "rill_memcpy");
    check(rill_memcpy(b, ones, sizeof ones), "rill_memcpy");

    rill_stream *s1;
    check(rill_stream_create(NULL, 0, &s1), "rill_stream_create");
    rill_event *event;
    check(rill_event_create(RILL_EVENT_DEFAULT, &event), "rill_event_create");
    float *c = device_floats(N), *d = device_floats(N), *e = device_floats(N);

    /* with ms.hal.StreamCtx(s1): */
    rill_stream *prev = rill_set_current_stream(s1);
    check(rill_op_add_f32(NULL, c, a, b, 1.0f, N), "c = a + b");
    check(rill_event_record(event, s1), "event = s1.record_event()");
    check(rill_op_mul_f32(NULL, d, a, b, N), "d = a * b");
    rill_set_current_stream(prev);

    rill_stream *cur_stream = rill_current_stream(NULL);
    check(rill_stream_wait_event(cur_stream, event), "cur_stream.wait_event(event)");
    check(rill_op_add_scalar_f32(NULL, e, c, 3.0f, N), "e = c + 3");

    float host_e[N];
    check(rill_memcpy(host_e, e, sizeof host_e), "rill_memcpy");
    if (print_whole_array(host_e, 3, 3) != 0)
        return 1;

    check(rill_stream_synchronize(s1), "rill_stream_synchronize");
    check(rill_event_destroy(event), "rill_event_destroy");
    check(rill_stream_destroy(s1), "rill_stream_destroy");
    float *buffers[] = {a, b, c, d, e};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        check(rill_free(buffers[i]), "rill_free");
    return rill_shutdown() == RILL_OK ? 0 : 1;
}
