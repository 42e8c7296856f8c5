/* SPDX-License-Identifier: MIT */
/* Seed 000, "device events": B = matmul(A, A) on the default stream and
 * ev1 recorded after it; on stream s, ev1.wait() orders C = sum(B) after
 * B, and ev2 is recorded after C; the default stream then waits on ev2
 * (the seed's comment, "ensure C = ops.sum(B) is complete", needs ev2: ev1
 * only covers B) and computes D = C + 1. A holds small whole numbers
 * instead of np.random.randn, so D is exact; prints D and whether it
 * equals the host's sum of A @ A plus one. */
#include "seed_support.h"

enum { N = 20 };

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
    rill_event *ev1, *ev2;
    check(rill_stream_create(NULL, 0, &s), "s = ms.hal.Stream()");
    check(rill_event_create(RILL_EVENT_DEFAULT, &ev1), "ev1 = ms.hal.Event()");
    check(rill_event_create(RILL_EVENT_DEFAULT, &ev2), "ev2 = ms.hal.Event()");

    /* A = Tensor(np.random.randn(20, 20)): values in {-2, ..., 2} */
    float host_a[N * N];
    fill_lcg(host_a, N * N, 21, 5, 1.0f);
    float *a = device_floats(N * N), *b = device_floats(N * N);
    float *c = device_floats(1), *d = device_floats(1);
    check(rill_memcpy(a, host_a, sizeof host_a), "rill_memcpy");

    check(rill_op_matmul_f32(NULL, b, a, a, N, N, N), "B = ops.matmul(A, A)");
    check(rill_event_record(ev1, NULL), "ev1.record()");
    /* with ms.hal.StreamCtx(s): */
    rill_stream *prev = rill_set_current_stream(s);
    check(rill_stream_wait_event(NULL, ev1), "ev1.wait()");
    check(rill_op_sum_f32(NULL, c, b, N * N), "C = ops.sum(B)");
    check(rill_event_record(ev2, NULL), "ev2.record()");
    rill_set_current_stream(prev);
    check(rill_stream_wait_event(NULL, ev2), "ev2.wait()");
    check(rill_op_add_scalar_f32(NULL, d, c, 1.0f, 1), "D = C + 1");

    float host_d;
    check(rill_memcpy(&host_d, d, sizeof host_d), "rill_memcpy");
    printf("D = %.1f\n", (double)host_d);
    int same = (double)host_d == host_sum_of_square(host_a) + 1.0;
    printf("D == sum(A @ A) + 1 on the host: %s\n", py_bool(same));

    check(rill_event_destroy(ev1), "rill_event_destroy");
    check(rill_event_destroy(ev2), "rill_event_destroy");
    check(rill_stream_destroy(s), "rill_stream_destroy");
    float *buffers[] = {a, b, c, d};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        check(rill_free(buffers[i]), "rill_free");
    return rill_shutdown() == RILL_OK && same ? 0 : 1;
}
