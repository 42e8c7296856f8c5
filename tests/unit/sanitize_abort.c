/* SPDX-License-Identifier: MIT */
/* Seed 000's first example, wrong on purpose: C = sum(B) on a new stream
 * races B = matmul(A, A) on the default stream. Run with
 * RILL_SANITIZE=abort, the sanitizer must stop the program at that race
 * (sanitize_abort.cmake checks); reaching the end is a failure. */
#include <stdio.h>

#include "rill.h"

int main(void) {
    enum { N = 20 };
    rill_stream *s;
    void *a, *b, *c;
    if (rill_stream_create(NULL, 0, &s) != RILL_OK || rill_stream_set_name(s, "s") != RILL_OK ||
        rill_malloc(NULL, N * N * sizeof(float), &a) != RILL_OK ||
        rill_malloc(NULL, N * N * sizeof(float), &b) != RILL_OK ||
        rill_malloc(NULL, sizeof(float), &c) != RILL_OK) {
        fprintf(stderr, "set-up failed: %s\n", rill_last_error());
        return 2;
    }
    rill_op_matmul_f32(NULL, b, a, a, N, N, N);
    RILL_SANITIZER_HERE();
    rill_op_sum_f32(s, c, b, N * N); /* no s.wait_stream(current stream) */
    rill_device_synchronize(NULL);
    printf("the race was not caught\n");
    return 1;
}
