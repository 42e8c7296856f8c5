/* SPDX-License-Identifier: MIT */
/* The README's example: c = a + b on a side stream, then c + 3 on the
 * current stream after waiting for an event; prints 5.0. */
#include <stdio.h>

#include <rill.h>

static int check(rill_status st, const char *what) {
    if (st != RILL_OK)
        fprintf(stderr, "%s: %s: %s\n", what, rill_status_name(st), rill_last_error());
    return st != RILL_OK;
}

int main(void) {
    float *a, *b, *c, out = 0.0f;
    rill_stream *s1;
    rill_event *ev;
    if (check(rill_malloc(NULL, 9 * sizeof(float), (void **)&a), "rill_malloc") ||
        check(rill_malloc(NULL, 9 * sizeof(float), (void **)&b), "rill_malloc") ||
        check(rill_malloc(NULL, 9 * sizeof(float), (void **)&c), "rill_malloc") ||
        check(rill_stream_create(NULL, 0, &s1), "rill_stream_create") ||
        check(rill_event_create(RILL_EVENT_DEFAULT, &ev), "rill_event_create"))
        return 1;

    if (check(rill_op_fill_f32(NULL, a, 1.0f, 9), "fill") ||
        check(rill_op_fill_f32(NULL, b, 1.0f, 9), "fill") ||
        check(rill_stream_wait_stream(s1, rill_current_stream(NULL)), "wait_stream") ||
        check(rill_op_add_f32(s1, c, a, b, 1.0f, 9), "add") ||
        check(rill_event_record(ev, s1), "record") ||
        check(rill_stream_wait_event(NULL, ev), "wait_event") ||
        check(rill_op_add_scalar_f32(NULL, c, c, 3.0f, 9), "add_scalar") ||
        check(rill_memcpy(&out, c, sizeof out), "memcpy"))
        return 1;
    printf("%.1f\n", out);

    if (check(rill_event_destroy(ev), "rill_event_destroy") ||
        check(rill_stream_destroy(s1), "rill_stream_destroy") || check(rill_free(a), "rill_free") ||
        check(rill_free(b), "rill_free") || check(rill_free(c), "rill_free") ||
        check(rill_shutdown(), "rill_shutdown"))
        return 1;
    return 0;
}
