/* SPDX-License-Identifier: MIT */
/* Seed 000, automatic cross-stream memory lifetime: add_s0 is produced on
 * the default stream and read on s1 (by a long conv2d and by add_s1 =
 * add_s0 + 1), then freed on the host while s1 may still be reading it;
 * mess_output = mess_input + 1 is allocated right after and may be given
 * the same memory. rill extends add_s0's lifetime until s1's reads are
 * done, so add_1_s0 = add_s1 + 1 equals input_s0 + 3 exactly. Inputs are
 * multiples of 1/64 instead of np.random.randn, so the sums are exact. */
#include <math.h>

#include "seed_support.h"

enum { N = 10, C = 32, H = 32, W = 32, K = 32, R = 3, S = 3 };
enum { OH = H - R + 1, OW = W - S + 1 };
#define INPUT_FLOATS  ((size_t)N * C * H * W)
#define WEIGHT_FLOATS ((size_t)K * C * R * S)
#define CONV_FLOATS   ((size_t)N * K * OH * OW)

/* 1 when conv matches a double-precision reference within float rounding. */
static int conv_matches(const float *conv, const float *in, const float *w) {
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++)
            for (size_t y = 0; y < OH; y++)
                for (size_t x = 0; x < OW; x++) {
                    double want = 0.0, mag = 0.0;
                    for (size_t c = 0; c < C; c++)
                        for (size_t r = 0; r < R; r++)
                            for (size_t s = 0; s < S; s++) {
                                double t = (double)in[((n * C + c) * H + y + r) * W + x + s] *
                                           w[((k * C + c) * R + r) * S + s];
                                want += t;
                                mag += fabs(t);
                            }
                    double got = conv[((n * K + k) * OH + y) * OW + x];
                    if (!(fabs(got - want) <= (C * R * S + 2) * mag / 16777216.0))
                        return 0;
                }
    return 1;
}

int main(void) {
    rill_stream *s1;
    check(rill_stream_create(NULL, 0, &s1), "s1 = ms.hal.Stream()");

    float *host_input = host_floats(INPUT_FLOATS), *host_weight = host_floats(WEIGHT_FLOATS);
    float *host_mess = host_floats(INPUT_FLOATS);
    fill_lcg(host_input, INPUT_FLOATS, 1, 256, 1.0f / 64);
    fill_lcg(host_weight, WEIGHT_FLOATS, 2, 256, 1.0f / 64);
    fill_lcg(host_mess, INPUT_FLOATS, 3, 256, 1.0f / 64);
    float *input_s0 = device_floats(INPUT_FLOATS), *weight_s0 = device_floats(WEIGHT_FLOATS);
    float *mess_input = device_floats(INPUT_FLOATS);
    check(rill_memcpy(input_s0, host_input, INPUT_FLOATS * sizeof(float)), "rill_memcpy");
    check(rill_memcpy(weight_s0, host_weight, WEIGHT_FLOATS * sizeof(float)), "rill_memcpy");
    check(rill_memcpy(mess_input, host_mess, INPUT_FLOATS * sizeof(float)), "rill_memcpy");

    /* Use default stream */
    float *add_s0 = device_floats(INPUT_FLOATS);
    check(rill_op_add_scalar_f32(NULL, add_s0, input_s0, 1.0f, INPUT_FLOATS),
          "add_s0 = input_s0 + 1");
    check(rill_stream_wait_stream(s1, rill_default_stream(NULL)),
          "s1.wait_stream(ms.hal.default_stream())");
    /* with ms.hal.StreamCtx(s1): */
    rill_stream *prev = rill_set_current_stream(s1);
    float *conv_res = device_floats(CONV_FLOATS), *add_s1 = device_floats(INPUT_FLOATS);
    check(rill_op_conv2d_f32(NULL, conv_res, add_s0, weight_s0, N, C, H, W, K, R, S),
          "conv_res = ops.conv2d(add_s0, weight_s0)");
    check(rill_op_add_scalar_f32(NULL, add_s1, add_s0, 1.0f, INPUT_FLOATS), "add_s1 = add_s0 + 1");
    rill_event *ev;
    check(rill_event_create(RILL_EVENT_DEFAULT, &ev), "rill_event_create");
    check(rill_event_record(ev, s1), "ev = s1.record_event()");
    rill_set_current_stream(prev);
    /* del add_s0: s1 may still be reading it. */
    check(rill_free(add_s0), "del add_s0");

    /* Mess up the memory of add_s0, were it handed out too early. */
    float *mess_output = device_floats(INPUT_FLOATS);
    check(rill_op_add_scalar_f32(NULL, mess_output, mess_input, 1.0f, INPUT_FLOATS),
          "mess_output = mess_input + 1");
    check(rill_stream_wait_event(NULL, ev), "ev.wait()");
    float *add_1_s0 = device_floats(INPUT_FLOATS);
    check(rill_op_add_scalar_f32(NULL, add_1_s0, add_s1, 1.0f, INPUT_FLOATS),
          "add_1_s0 = add_s1 + 1");

    /* rill_memcpy runs after the default stream's work, which waited on ev. */
    float *result = host_floats(INPUT_FLOATS), *mess = host_floats(INPUT_FLOATS);
    float *conv = host_floats(CONV_FLOATS);
    check(rill_memcpy(result, add_1_s0, INPUT_FLOATS * sizeof(float)), "rill_memcpy");
    check(rill_memcpy(mess, mess_output, INPUT_FLOATS * sizeof(float)), "rill_memcpy");
    check(rill_memcpy(conv, conv_res, CONV_FLOATS * sizeof(float)), "rill_memcpy");
    int add_ok = 1, mess_ok = 1;
    double checksum = 0.0;
    for (size_t i = 0; i < INPUT_FLOATS; i++) {
        add_ok &= result[i] == host_input[i] + 3.0f;
        mess_ok &= mess[i] == host_mess[i] + 1.0f;
        checksum += result[i];
    }
    /* conv2d(input_s0 + 1, weight_s0): the reference reads host_input + 1. */
    for (size_t i = 0; i < INPUT_FLOATS; i++)
        host_input[i] += 1.0f;
    int conv_ok = conv_matches(conv, host_input, host_weight);
    printf("sum(add_1_s0) = %.4f\n", checksum);
    printf("add_1_s0 == input_s0 + 3: %s\n", py_bool(add_ok));
    printf("mess_output == mess_input + 1: %s\n", py_bool(mess_ok));
    printf("conv_res == conv2d(input_s0 + 1, weight_s0): %s\n", py_bool(conv_ok));

    free(result);
    free(mess);
    free(conv);
    free(host_input);
    free(host_weight);
    free(host_mess);
    check(rill_event_destroy(ev), "rill_event_destroy");
    check(rill_stream_destroy(s1), "rill_stream_destroy");
    float *buffers[] = {input_s0, weight_s0, mess_input, conv_res, add_s1, mess_output, add_1_s0};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        check(rill_free(buffers[i]), "rill_free");
    return rill_shutdown() == RILL_OK && add_ok && mess_ok && conv_ok ? 0 : 1;
}
