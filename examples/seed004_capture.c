/* SPDX-License-Identifier: MIT */
/* Seed 004, cross-stream capture (Ascend ACL's aclmdlRICapture*): on the
 * origin stream1, an async copy of self from the host; a synchronous copy
 * of other made once, uncaptured, after switching the thread to RELAXED;
 * stream2 pulled into the capture by event1, running out = self + 1.1 *
 * other; stream2 joined back by event2; out copied back into self's host
 * buffer. The captured graph is launched 8 times: each launch copies the
 * previous result in, so the output grows by 1.1 per launch, as the seed
 * prints. Writes the graph as DOT to argv[1] (default seed004_capture.dot). */
#include "seed_support.h"

int main(int argc, char **argv) {
    const char *dot = argc > 1 ? argv[1] : "seed004_capture.dot";
    enum { SIZE = 8 }; /* shape {4, 2} */
    float alpha = 1.1f;
    float *self_d = device_floats(SIZE), *other_d = device_floats(SIZE);
    float *out_d = device_floats(SIZE);
    float *self_h, *other_h;
    check(rill_malloc_host(SIZE * sizeof(float), (void **)&self_h), "aclrtMallocHost");
    check(rill_malloc_host(SIZE * sizeof(float), (void **)&other_h), "aclrtMallocHost");
    for (int i = 0; i < SIZE; i++) {
        self_h[i] = 0.0f;
        other_h[i] = 1.0f;
    }

    rill_stream *stream1, *stream2;
    rill_event *event1, *event2;
    check(rill_stream_create(NULL, 0, &stream1), "aclrtCreateStream");
    check(rill_stream_create(NULL, 0, &stream2), "aclrtCreateStream");
    check(rill_stream_set_name(stream1, "stream1"), "rill_stream_set_name");
    check(rill_stream_set_name(stream2, "stream2"), "rill_stream_set_name");
    check(rill_event_create(RILL_EVENT_DEFAULT, &event1), "aclrtCreateEvent");
    check(rill_event_create(RILL_EVENT_DEFAULT, &event2), "aclrtCreateEvent");

    /* ======== begin capture ======== */
    check(rill_stream_begin_capture(stream1, RILL_CAPTURE_GLOBAL), "aclmdlRICaptureBegin");
    check(rill_memcpy_async(self_d, self_h, SIZE * sizeof(float), stream1), "aclrtMemcpyAsync");
    /* RELAXED allows the synchronous copy: it runs once, now */
    rill_capture_mode mode = RILL_CAPTURE_RELAXED;
    check(rill_thread_exchange_capture_mode(&mode), "aclmdlRICaptureThreadExchangeMode");
    check(rill_memcpy(other_d, other_h, SIZE * sizeof(float)), "aclrtMemcpy");
    check(rill_thread_exchange_capture_mode(&mode), "aclmdlRICaptureThreadExchangeMode");
    /* event1 pulls stream2 into the capture */
    check(rill_event_record(event1, stream1), "aclrtRecordEvent");
    check(rill_stream_wait_event(stream2, event1), "aclrtStreamWaitEvent");
    check(rill_op_add_f32(stream2, out_d, self_d, other_d, alpha, SIZE), "aclnnAdd");
    /* event2 joins stream2 back to stream1 */
    check(rill_event_record(event2, stream2), "aclrtRecordEvent");
    check(rill_stream_wait_event(stream1, event2), "aclrtStreamWaitEvent");
    check(rill_memcpy_async(self_h, out_d, SIZE * sizeof(float), stream1), "aclrtMemcpyAsync");
    rill_graph *graph;
    check(rill_stream_end_capture(stream1, &graph), "aclmdlRICaptureEnd");
    /* ======== end capture ======== */

    check(rill_graph_write_dot(graph, dot), "rill_graph_write_dot");
    rill_graph_exec *model;
    check(rill_graph_instantiate(graph, &model), "rill_graph_instantiate");
    check(rill_graph_destroy(graph), "rill_graph_destroy");

    for (int i = 0; i < 8; i++) {
        check(rill_graph_launch(model, stream1), "aclmdlRIExecuteAsync");
        check(rill_stream_synchronize(stream1), "aclrtSynchronizeStream");
        printf("[INFO]  %f %f %f %f %f %f %f %f\n\n", (double)self_h[0], (double)self_h[1],
               (double)self_h[2], (double)self_h[3], (double)self_h[4], (double)self_h[5],
               (double)self_h[6], (double)self_h[7]);
    }

    check(rill_graph_exec_destroy(model), "aclmdlRIDestroy");
    check(rill_stream_destroy(stream1), "aclrtDestroyStream");
    check(rill_stream_destroy(stream2), "aclrtDestroyStream");
    check(rill_event_destroy(event1), "aclrtDestroyEvent");
    check(rill_event_destroy(event2), "aclrtDestroyEvent");
    check(rill_free(self_d), "aclrtFree");
    check(rill_free(other_d), "aclrtFree");
    check(rill_free(out_d), "aclrtFree");
    check(rill_free_host(self_h), "rill_free_host");
    check(rill_free_host(other_h), "rill_free_host");
    check(rill_shutdown(), "aclFinalize");
    return 0;
}
