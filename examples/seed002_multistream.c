/* SPDX-License-Identifier: MIT */
/* Seed 002, torchair's in-graph multi-stream (aclgraph, reduce-overhead
 * mode): the seed's Model.forward, captured once into a graph and
 * replayed. Tagged stream '1' waits on tagged event "66" (recorded after
 * add_result) for mm_result, records "77", then computes B, which
 * npu_record_tagged_stream marks as used on '1'; the default stream
 * computes mm1, drops B and builds C = ones + 2; tagged stream '2' waits on
 * "77" for add2. Each tagged stream is joined back to the capturing stream
 * at the end, as the graph's outputs are. Inputs are whole numbers on a
 * small grid (torch.randn's stand-in), so every output is checked exactly
 * against the host at each replay: the inputs are copied to the device
 * before each replay and the outputs back after it. Writes the graph as
 * DOT to argv[1] (default seed002_multistream.dot). */
#include "seed_support.h"

enum { N = 64 }; /* the seed's 1000 x 1000, scaled down */

typedef struct outputs {
    float *add_result, *mm_result, *mm1, *add2, *c;
} outputs;

static void join(rill_stream *from, rill_stream *to) {
    rill_event *e;
    check(rill_event_create(RILL_EVENT_DEFAULT, &e), "rill_event_create");
    check(rill_event_record(e, from), "rill_event_record");
    check(rill_stream_wait_event(to, e), "rill_stream_wait_event");
    check(rill_event_destroy(e), "rill_event_destroy");
}

/* Model.forward(in1, in2, in3, in4) on stream main. */
static void forward(rill_stream *main, float *const in[4], const outputs *o) {
    rill_event *tagged_event1, *tagged_event2;
    rill_stream *s1, *s2;
    check(rill_event_get_tagged("66", &tagged_event1), "npu_create_tagged_event(tag=\"66\")");
    check(rill_event_get_tagged("77", &tagged_event2), "npu_create_tagged_event(tag=\"77\")");
    check(rill_stream_get_tagged(NULL, "1", 0, &s1), "npu_stream_switch('1')");
    check(rill_stream_get_tagged(NULL, "2", 0, &s2), "npu_stream_switch('2')");
    const size_t nn = (size_t)N * N;

    check(rill_op_add_f32(main, o->add_result, in[0], in[1], 1.0f, nn), "torch.add(in1, in2)");
    check(rill_event_record(tagged_event1, main), "npu_tagged_event_record(event1)");
    /* with npu_stream_switch('1'): */
    check(rill_stream_wait_event(s1, tagged_event1), "npu_tagged_event_wait(event1)");
    check(rill_op_matmul_f32(s1, o->mm_result, in[2], in[3], N, N, N), "torch.mm(in3, in4)");
    check(rill_event_record(tagged_event2, s1), "npu_tagged_event_record(event2)");
    float *b;
    check(rill_malloc_async(nn * sizeof(float), s1, (void **)&b), "B = in3 + in4");
    check(rill_op_add_f32(s1, b, in[2], in[3], 1.0f, nn), "B = in3 + in4");
    check(rill_record_stream(b, s1), "npu_record_tagged_stream(B, '1')");
    /* back on the default stream */
    check(rill_op_matmul_f32(main, o->mm1, in[2], in[3], N, N, N), "mm1 = torch.mm(in3, in4)");
    check(rill_free_async(b, main), "del B");
    check(rill_op_fill_f32(main, o->c, 1.0f, nn), "C = torch.ones(...)");
    check(rill_op_add_scalar_f32(main, o->c, o->c, 2.0f, nn), "C.add_(2)");
    /* with npu_stream_switch('2'): */
    check(rill_stream_wait_event(s2, tagged_event2), "npu_tagged_event_wait(event2)");
    check(rill_op_add_f32(s2, o->add2, in[2], in[3], 1.0f, nn), "add2 = torch.add(in3, in4)");
    /* return add_result, mm_result, mm1, add2, C */
    join(s1, main);
    join(s2, main);
}

/* The outputs of o, copied into host memory h. */
static void download(const outputs *h, const outputs *o, size_t n) {
    const size_t bytes = n * sizeof(float);
    check(rill_memcpy(h->add_result, o->add_result, bytes), "add_result.cpu()");
    check(rill_memcpy(h->mm_result, o->mm_result, bytes), "mm_result.cpu()");
    check(rill_memcpy(h->mm1, o->mm1, bytes), "mm1.cpu()");
    check(rill_memcpy(h->add2, o->add2, bytes), "add2.cpu()");
    check(rill_memcpy(h->c, o->c, bytes), "C.cpu()");
}

/* The outputs in host memory against the host's sums of the inputs in[]. */
static int check_outputs(float *const in[4], const outputs *o) {
    int bad = 0;
    for (int i = 0; i < N * N; i++) {
        bad |= o->add_result[i] != in[0][i] + in[1][i];
        bad |= o->add2[i] != in[2][i] + in[3][i];
        bad |= o->c[i] != 3.0f;
    }
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            float s = 0.0f;
            for (int k = 0; k < N; k++)
                s += in[2][r * N + k] * in[3][k * N + c];
            bad |= o->mm_result[r * N + c] != s || o->mm1[r * N + c] != s;
        }
    return !bad;
}

int main(int argc, char **argv) {
    const char *dot = argc > 1 ? argv[1] : "seed002_multistream.dot";
    const size_t nn = (size_t)N * N;
    float *in[4], *in_h[4];
    for (int k = 0; k < 4; k++) {
        in[k] = device_floats(nn);
        in_h[k] = host_floats(nn);
    }
    outputs o = {device_floats(nn), device_floats(nn), device_floats(nn), device_floats(nn),
                 device_floats(nn)};
    outputs o_h = {host_floats(nn), host_floats(nn), host_floats(nn), host_floats(nn),
                   host_floats(nn)};
    rill_stream *main_s;
    check(rill_stream_create(NULL, 0, &main_s), "rill_stream_create");
    check(rill_stream_set_name(main_s, "default"), "rill_stream_set_name");

    /* torch.compile(model, backend=npu_backend) in reduce-overhead mode:
     * the first call captures the graph */
    check(rill_stream_begin_capture(main_s, RILL_CAPTURE_GLOBAL), "capture begin");
    forward(main_s, in, &o);
    rill_graph *graph;
    check(rill_stream_end_capture(main_s, &graph), "capture end");
    size_t nodes;
    check(rill_graph_node_count(graph, &nodes), "rill_graph_node_count");
    check(rill_graph_write_dot(graph, dot), "rill_graph_write_dot");
    rill_graph_exec *model;
    check(rill_graph_instantiate(graph, &model), "rill_graph_instantiate");
    check(rill_graph_destroy(graph), "rill_graph_destroy");
    printf("captured %zu nodes on streams 'default', '1' and '2'\n", nodes);

    for (int call = 0; call < 3; call++) {
        /* in1..in4 = torch.randn(...): whole numbers in {-4, ..., 3} */
        for (int k = 0; k < 4; k++) {
            fill_lcg(in_h[k], nn, (uint32_t)(100 * call + k + 1), 8, 1.0f);
            check(rill_memcpy_async(in[k], in_h[k], nn * sizeof(float), main_s), "in.to(device)");
        }
        check(rill_graph_launch(model, main_s), "result = model(in1, in2, in3, in4)");
        check(rill_stream_synchronize(main_s), "rill_stream_synchronize");
        download(&o_h, &o, nn);
        printf("call %d: add_result, mm_result, mm1, add2, C %s\n", call,
               check_outputs(in_h, &o_h) ? "match the host" : "DIFFER from the host");
    }

    check(rill_graph_exec_destroy(model), "rill_graph_exec_destroy");
    float *all[] = {o.add_result, o.mm_result, o.mm1, o.add2, o.c, in[0], in[1], in[2], in[3]};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        check(rill_free(all[k]), "rill_free");
    float *all_h[] = {o_h.add_result, o_h.mm_result, o_h.mm1, o_h.add2, o_h.c,
                      in_h[0],        in_h[1],       in_h[2], in_h[3]};
    for (size_t k = 0; k < sizeof all_h / sizeof all_h[0]; k++)
        free(all_h[k]);
    check(rill_stream_destroy(main_s), "rill_stream_destroy");
    check(rill_shutdown(), "rill_shutdown");
    return 0;
}
