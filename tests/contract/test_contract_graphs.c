/* SPDX-License-Identifier: MIT */
/* Graphs and events on the device under test (contract.h): a graph built
 * by hand with kernel, host, copy, set and timing record nodes replays in
 * its order; an update changes later launches only; launches of one exec
 * on two streams run one after another; events report their state. */
#include "contract.h"

#include <string.h>

typedef struct seen {
    uint32_t *host; /* page-locked memory a copy node wrote before the host node */
    uint32_t values[8];
    _Atomic int calls;
} seen;

static void note(void *p) {
    seen *s = p;
    int i = atomic_fetch_add(&s->calls, 1);
    if (i < 8)
        s->values[i] = s->host[0];
}

static rill_launch add_launch(contract_add_args *a, rill_access *acc) {
    rill_launch l = {{1, 1, 1}, {128, 1, 1}, a, sizeof *a, acc, 1};
    return l;
}

/* set -> kernel -> copy to the host -> host function -> kernel, replayed
 * three times: the host function sees each launch's value, and the last
 * kernel's effect accumulates. */
static void test_a_built_graph_runs_its_nodes_in_order(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    uint32_t *x = contract_words(s, 1, 0), *y = contract_words(s, 1, 0);
    RT_OK(rill_stream_synchronize(s));
    seen sn = {0};
    RT_OK(rill_malloc_host(sizeof(uint32_t), (void **)&sn.host));
    rill_graph *g;
    rill_graph_node *n_set, *n_add, *n_copy, *n_host, *n_acc;
    RT_OK(rill_graph_create(&g));
    RT_OK(rill_graph_add_memset_node(g, NULL, 0, x, 0, sizeof(uint32_t), &n_set));
    contract_add_args a5 = {x, 5, 1};
    rill_access ax = {x, sizeof(uint32_t), RILL_READ_WRITE};
    rill_launch l5 = add_launch(&a5, &ax);
    RT_OK(rill_graph_add_kernel_node(g, &n_set, 1, contract_add_kernel(), &l5, &n_add));
    RT_OK(rill_graph_add_memcpy_node(g, &n_add, 1, sn.host, x, sizeof(uint32_t), &n_copy));
    RT_OK(rill_graph_add_host_node(g, &n_copy, 1, note, &sn, &n_host));
    contract_add_args a1 = {y, 1, 1};
    rill_access ay = {y, sizeof(uint32_t), RILL_READ_WRITE};
    rill_launch l1 = add_launch(&a1, &ay);
    RT_OK(rill_graph_add_kernel_node(g, &n_host, 1, contract_add_kernel(), &l1, &n_acc));
    rill_graph_exec *e;
    RT_OK(rill_graph_instantiate(g, &e));
    for (int i = 0; i < 3; i++)
        RT_OK(rill_graph_launch(e, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(atomic_load(&sn.calls), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sn.values[i], 5);
    uint32_t host;
    contract_read(&host, y, 1);
    assert_int_equal(host, 3);
    RT_OK(rill_graph_exec_destroy(e));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free_host(sn.host));
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_stream_destroy(s));
}

/* An update with other kernel arguments changes the launches after it. */
static void test_an_update_changes_later_launches(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    RT_OK(rill_stream_create(dev, 0, &s));
    uint32_t *x = contract_words(s, 1, 0);
    RT_OK(rill_stream_synchronize(s));
    rill_access ax = {x, sizeof(uint32_t), RILL_READ_WRITE};
    contract_add_args a2 = {x, 2, 1}, a100 = {x, 100, 1};
    rill_launch l2 = add_launch(&a2, &ax), l100 = add_launch(&a100, &ax);
    rill_graph *g2, *g100;
    rill_graph_node *n;
    RT_OK(rill_graph_create(&g2));
    RT_OK(rill_graph_add_kernel_node(g2, NULL, 0, contract_add_kernel(), &l2, &n));
    RT_OK(rill_graph_create(&g100));
    RT_OK(rill_graph_add_kernel_node(g100, NULL, 0, contract_add_kernel(), &l100, &n));
    rill_graph_exec *e;
    RT_OK(rill_graph_instantiate(g2, &e));
    RT_OK(rill_graph_launch(e, s)); /* +2 */
    RT_OK(rill_graph_exec_update(e, g100));
    RT_OK(rill_graph_launch(e, s)); /* +100 */
    RT_OK(rill_graph_launch(e, s)); /* +100 */
    RT_OK(rill_stream_synchronize(s));
    uint32_t host;
    contract_read(&host, x, 1);
    assert_int_equal(host, 202);
    RT_OK(rill_graph_exec_destroy(e));
    RT_OK(rill_graph_destroy(g2));
    RT_OK(rill_graph_destroy(g100));
    RT_OK(rill_free(x));
    RT_OK(rill_stream_destroy(s));
}

/* Launches of one exec on two streams run one after another: each
 * launch's x = 2x + 1 (in two nodes) sees the previous launch whole. */
static void test_launches_of_one_exec_never_overlap(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s, *t;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_stream_create(dev, 0, &t));
    enum { N = 4096 };
    uint32_t *x = contract_words(s, N, 0), *spin = contract_words(s, 1, 0);
    RT_OK(rill_stream_synchronize(s));
    rill_graph *g;
    rill_graph_node *n1, *n2, *n3;
    RT_OK(rill_graph_create(&g));
    contract_spin_args sp = {spin, 1000000};
    rill_access as = {spin, sizeof(uint32_t), RILL_READ_WRITE};
    rill_launch lsp = {{1, 1, 1}, {1, 1, 1}, &sp, sizeof sp, &as, 1};
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, contract_spin_kernel(), &lsp, &n1));
    contract_scale_args sc = {x, x, 2, N};
    rill_access ax = {x, N * sizeof(uint32_t), RILL_READ_WRITE};
    rill_launch lsc = {{4, 1, 1}, {128, 1, 1}, &sc, sizeof sc, &ax, 1};
    RT_OK(rill_graph_add_kernel_node(g, &n1, 1, contract_scale_kernel(), &lsc, &n2));
    contract_add_args ad = {x, 1, N};
    rill_launch lad = {{4, 1, 1}, {128, 1, 1}, &ad, sizeof ad, &ax, 1};
    RT_OK(rill_graph_add_kernel_node(g, &n2, 1, contract_add_kernel(), &lad, &n3));
    rill_graph_exec *e;
    RT_OK(rill_graph_instantiate(g, &e));
    for (int i = 0; i < 6; i++)
        RT_OK(rill_graph_launch(e, i % 2 ? t : s));
    RT_OK(rill_stream_synchronize(s));
    RT_OK(rill_stream_synchronize(t));
    static uint32_t host[N];
    contract_read(host, x, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(host[i], 63); /* 2^6 - 1 */
    RT_OK(rill_graph_exec_destroy(e));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free(x));
    RT_OK(rill_free(spin));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_stream_destroy(t));
}

/* An event records the stream's work so far: query says not ready while
 * slow work runs, synchronize waits for it, blocking-sync too. */
static void test_events_report_their_state(void **state) {
    (void)state;
    rill_device *dev = contract_device();
    rill_stream *s;
    rill_event *e, *b;
    RT_OK(rill_stream_create(dev, 0, &s));
    RT_OK(rill_event_create(RILL_EVENT_DEFAULT, &e));
    RT_OK(rill_event_create(RILL_EVENT_BLOCKING_SYNC, &b));
    uint32_t *x = contract_words(s, 1, 0), *y = contract_words(s, 1, 0);
    RT_OK(rill_stream_synchronize(s));
    RT_OK(contract_spin(s, x, 20000000));
    RT_OK(rill_event_record(e, s));
    RT_OK(contract_spin(s, y, 5000000));
    RT_OK(rill_event_record(b, s));
    RT_STATUS(RILL_NOT_READY, rill_event_query(e));
    RT_OK(rill_event_synchronize(e));
    RT_OK(rill_event_query(e));
    uint32_t host;
    contract_read(&host, x, 1); /* the work before e is done; y's may run */
    assert_int_equal(host, 1);
    RT_OK(rill_event_synchronize(b));
    contract_read(&host, y, 1);
    assert_int_equal(host, 1);
    RT_OK(rill_event_destroy(e));
    RT_OK(rill_event_destroy(b));
    RT_OK(rill_free(x));
    RT_OK(rill_free(y));
    RT_OK(rill_stream_destroy(s));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_built_graph_runs_its_nodes_in_order),
        cmocka_unit_test(test_an_update_changes_later_launches),
        cmocka_unit_test(test_launches_of_one_exec_never_overlap),
        cmocka_unit_test(test_events_report_their_state),
    };
    return CONTRACT_RUN(tests);
}
