/* SPDX-License-Identifier: MIT */
/* Seed 003, "measuring time": two timing events recorded on the current
 * stream around x = randn(1000, 1000) (copied in on the stream) and
 * y = x * x; after end_event.synchronize(), elapsed_ms gives the time
 * between them, printed as "Time: <ms> ms" (the value varies run to run). */
#include "seed_support.h"

#define COUNT ((size_t)1000 * 1000)

int main(void) {
    rill_event *start_event, *end_event;
    check(rill_event_create(RILL_EVENT_TIMING, &start_event), "rill_event_create");
    check(rill_event_create(RILL_EVENT_TIMING, &end_event), "rill_event_create");
    float *host_x = host_floats(COUNT);
    fill_lcg(host_x, COUNT, 41, 65536, 1.0f / 16384);
    float *x = device_floats(COUNT), *y = device_floats(COUNT);

    check(rill_event_record(start_event, NULL), "start_event.record()");
    check(rill_memcpy_async(x, host_x, COUNT * sizeof(float), NULL), "x = torch.randn(...)");
    check(rill_op_mul_f32(NULL, y, x, x, COUNT), "y = x * x");
    check(rill_event_record(end_event, NULL), "end_event.record()");
    check(rill_event_synchronize(end_event), "end_event.synchronize()");

    float elapsed_time;
    check(rill_event_elapsed_ms(start_event, end_event, &elapsed_time),
          "start_event.elapsed_time(end_event)");
    printf("Time: %f ms\n", (double)elapsed_time);

    free(host_x);
    check(rill_event_destroy(start_event), "rill_event_destroy");
    check(rill_event_destroy(end_event), "rill_event_destroy");
    check(rill_free(x), "rill_free");
    check(rill_free(y), "rill_free");
    return rill_shutdown() == RILL_OK ? 0 : 1;
}
