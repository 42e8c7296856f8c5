/* SPDX-License-Identifier: MIT */
/* Graph launches on the CUDA device, on the stand-in driver (fake_cuda.c,
 * fake_graph.c), which counts its calls (fake_cuda_counts.h): an exec is CUDA graphs,
 * a launch without host nodes is one cuGraphLaunch, host nodes split the
 * launch into one cuGraphLaunch per phase, and rill_graph_exec_update
 * reaches the CUDA graph through cuGraphExecKernelNodeSetParams, or a new
 * instantiation where a node moves off the CUDA graph, without changing
 * launches submitted before it; timing event record nodes time each
 * launch. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "fake_cuda_counts.h"
#include "fixture.h"

/* The stand-in's counters of driver calls (fake_cuda_counts.h). */
static fake_cuda_counters counters;

static unsigned long graph_calls(const char *entry) {
    return (unsigned long)counters.calls(entry);
}

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);
static get_proc_fn get_proc;

/* The library that RILL_CUDA_DRIVER names: the one rill loads too. */
static int load_fake(void **state) {
    (void)state;
    const char *path = getenv("RILL_CUDA_DRIVER");
    void *so = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (so == NULL || fake_cuda_counters_open(&counters) != 0 ||
        (*(void **)&get_proc = dlsym(so, "cuGetProcAddress_v2")) == NULL)
        return -1;
    return 0;
}

/* The stand-in's entry point name, as the backend gets it. */
static void *entry(const char *name) {
    void *p = NULL;
    if (get_proc(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS)
        fail_msg("the stand-in driver has no %s", name);
    return p;
}

/* ----------------------------------------------------------- the kernels */

/* The stand-in runs a kernel as the function exported under its entry's
 * name followed by "_host"; it does not read PTX. */
typedef struct add_args {
    uint32_t *p;
    uint32_t value;
} add_args;

__attribute__((visibility("default"))) void graph_add_host(const rill_block_ctx *ctx,
                                                           const void *args);
void graph_add_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const add_args *a = args;
    *a->p += a->value;
}

__attribute__((visibility("default"))) void graph_store_host(const rill_block_ctx *ctx,
                                                             const void *args);
void graph_store_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const add_args *a = args;
    *a->p = a->value;
}

static rill_kernel *kernel(const char *name, rill_cpu_kernel_fn fn) {
    rill_kernel *k = NULL;
    rill_kernel_desc desc = {name, fn, "// stand-in", name};
    RT_OK(rill_kernel_create(&desc, &k));
    return k;
}

static rill_stream *gpu_stream(void) {
    rill_device *dev = NULL;
    RT_OK(rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &dev));
    RT_OK(rill_set_device(dev));
    rill_stream *s = NULL;
    RT_OK(rill_stream_create(dev, 0, &s));
    return s;
}

static uint32_t read_word(uint32_t *dev_p) {
    uint32_t v = 0;
    RT_OK(rill_memcpy(&v, dev_p, sizeof v));
    return v;
}

/* A graph whose one kernel node stores value into *p. */
static rill_graph *store_graph(rill_kernel *k, uint32_t *p, uint32_t value) {
    rill_graph *g = NULL;
    RT_OK(rill_graph_create(&g));
    add_args a = {p, value};
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, &a, sizeof a, NULL, 0};
    rill_graph_node *n = NULL;
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, k, &l, &n));
    return g;
}

/* ----------------------------------------------------------------- tests */

/* "A launch runs the whole graph as one command in stream order": on the
 * CUDA device, an exec of 1000 nodes (a memset, 998 kernels, a memcpy) is
 * one CUDA graph, and each launch is one cuGraphLaunch. */
static void test_a_launch_of_1000_nodes_is_one_cuGraphLaunch(void **state) {
    (void)state;
    enum { N = 1000 };
    rill_stream *s = gpu_stream();
    rill_kernel *add = kernel("graph_add", graph_add_host);
    uint32_t *p = NULL, *q = NULL;
    RT_OK(rill_malloc(NULL, sizeof *p, (void **)&p));
    RT_OK(rill_malloc(NULL, sizeof *q, (void **)&q));
    rill_graph *g = NULL;
    RT_OK(rill_graph_create(&g));
    rill_graph_node *last = NULL;
    RT_OK(rill_graph_add_memset_node(g, NULL, 0, p, 0, sizeof *p, &last));
    for (int i = 1; i < N - 1; i++) {
        add_args a = {p, 1};
        rill_launch l = {{1, 1, 1}, {1, 1, 1}, &a, sizeof a, NULL, 0};
        rill_graph_node *n = NULL;
        RT_OK(rill_graph_add_kernel_node(g, &last, 1, add, &l, &n));
        last = n;
    }
    rill_graph_node *copy = NULL;
    RT_OK(rill_graph_add_memcpy_node(g, &last, 1, q, p, sizeof *p, &copy));
    size_t count = 0;
    RT_OK(rill_graph_node_count(g, &count));
    assert_int_equal(count, N);
    unsigned long instantiated = graph_calls("cuGraphInstantiateWithFlags");
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g, &x));
    assert_int_equal(graph_calls("cuGraphInstantiateWithFlags") - instantiated, 1);
    for (int run = 1; run <= 3; run++) {
        unsigned long launches = graph_calls("cuGraphLaunch");
        RT_OK(rill_graph_launch(x, s));
        assert_int_equal(graph_calls("cuGraphLaunch") - launches, 1);
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(read_word(q), N - 2);
    }
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free(p));
    RT_OK(rill_free(q));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(add));
}

/* "Takes the parameters of graph ... into exec without instantiating
 * again. Launches submitted after it returns run with them; launches
 * submitted before, running or not, run with the parameters they were
 * submitted with." The kernel's new arguments reach the CUDA graph through
 * cuGraphExecKernelNodeSetParams, once, when the first launch that has
 * them is issued, which is after a launch submitted before the update. */
static void test_exec_update_changes_a_kernels_arguments(void **state) {
    (void)state;
    rill_stream *s = gpu_stream();
    rill_kernel *store = kernel("graph_store", graph_store_host);
    uint32_t *p = NULL, *seen = NULL;
    RT_OK(rill_malloc(NULL, sizeof *p, (void **)&p));
    RT_OK(rill_malloc_host(2 * sizeof *seen, (void **)&seen));
    rill_graph *g7 = store_graph(store, p, 7), *g42 = store_graph(store, p, 42);
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g7, &x));
    unsigned long instantiated = graph_calls("cuGraphInstantiateWithFlags");
    unsigned long set = graph_calls("cuGraphExecKernelNodeSetParams");
    /* A launch held back behind a host function, then the update. */
    rt_gate gate;
    rt_gate_reset(&gate);
    RT_OK(rill_launch_host_func(s, rt_gate_fn, &gate));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_memcpy_async(&seen[0], p, sizeof *p, s));
    RT_OK(rill_graph_exec_update(x, g42));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_memcpy_async(&seen[1], p, sizeof *p, s));
    assert_true(rt_gate_wait_entered(&gate));
    rt_gate_open(&gate);
    RT_OK(rill_stream_synchronize(s));
    assert_false(atomic_load(&gate.timed_out));
    assert_int_equal(seen[0], 7);
    assert_int_equal(seen[1], 42);
    assert_int_equal(graph_calls("cuGraphExecKernelNodeSetParams") - set, 1);
    assert_int_equal(graph_calls("cuGraphInstantiateWithFlags") - instantiated, 0);
    /* Later launches keep the applied set: no further update of the node. */
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(read_word(p), 42);
    assert_int_equal(graph_calls("cuGraphExecKernelNodeSetParams") - set, 1);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g7));
    RT_OK(rill_graph_destroy(g42));
    RT_OK(rill_free(p));
    RT_OK(rill_free_host(seen));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(store));
}

typedef struct peek {
    uint32_t *p;
    _Atomic uint32_t seen;
} peek;

static void peek_fn(void *arg) {
    peek *k = arg;
    atomic_store(&k->seen, *k->p); /* the stand-in's device memory is host memory */
}

/* A host node may call rill, so it runs on the host between CUDA graphs:
 * kernel -> host -> kernel is two cuGraphLaunch calls, and the host node
 * sees the first kernel's work done and the second's not begun. */
static void test_host_nodes_split_a_launch_into_cuda_graphs(void **state) {
    (void)state;
    rill_stream *s = gpu_stream();
    rill_kernel *store = kernel("graph_store", graph_store_host);
    uint32_t *p = NULL;
    RT_OK(rill_malloc(NULL, sizeof *p, (void **)&p));
    rill_graph *g = NULL;
    RT_OK(rill_graph_create(&g));
    peek k = {p, 0};
    add_args a5 = {p, 5}, a9 = {p, 9};
    rill_launch l5 = {{1, 1, 1}, {1, 1, 1}, &a5, sizeof a5, NULL, 0};
    rill_launch l9 = {{1, 1, 1}, {1, 1, 1}, &a9, sizeof a9, NULL, 0};
    rill_graph_node *n1 = NULL, *n2 = NULL;
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, store, &l5, &n1));
    RT_OK(rill_graph_add_host_node(g, &n1, 1, peek_fn, &k, &n2));
    rill_graph_node *n3 = NULL;
    RT_OK(rill_graph_add_kernel_node(g, &n2, 1, store, &l9, &n3));
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g, &x));
    unsigned long launches = graph_calls("cuGraphLaunch");
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(graph_calls("cuGraphLaunch") - launches, 2);
    assert_int_equal(atomic_load(&k.seen), 5);
    assert_int_equal(read_word(p), 9);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free(p));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(store));
}

/* Sleeps args' microseconds, as a kernel on the stand-in's stream. */
__attribute__((visibility("default"))) void graph_sleep_host(const rill_block_ctx *ctx,
                                                             const void *args);
void graph_sleep_host(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    rt_sleep_us(*(const uint32_t *)args);
}

/* Timing event record nodes are event record nodes of the CUDA graph,
 * each launch recording events of its own: the elapsed time between two
 * of them spans the kernel between, launch after launch. */
static void test_timing_record_nodes_time_each_launch(void **state) {
    (void)state;
    rill_stream *s = gpu_stream();
    rill_kernel *sleep = kernel("graph_sleep", graph_sleep_host);
    rill_event *start = NULL, *end = NULL;
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &start));
    RT_OK(rill_event_create(RILL_EVENT_TIMING, &end));
    rill_graph *g = NULL;
    RT_OK(rill_graph_create(&g));
    uint32_t us = 3000;
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, &us, sizeof us, NULL, 0};
    rill_graph_node *n1 = NULL, *n2 = NULL, *n3 = NULL;
    RT_OK(rill_graph_add_event_record_node(g, NULL, 0, start, &n1));
    RT_OK(rill_graph_add_kernel_node(g, &n1, 1, sleep, &l, &n2));
    RT_OK(rill_graph_add_event_record_node(g, &n2, 1, end, &n3));
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g, &x));
    for (int run = 0; run < 2; run++) {
        unsigned long launches = graph_calls("cuGraphLaunch");
        RT_OK(rill_graph_launch(x, s));
        RT_OK(rill_stream_synchronize(s));
        assert_int_equal(graph_calls("cuGraphLaunch") - launches, 1);
        float ms = -1;
        RT_OK(rill_event_elapsed_ms(start, end, &ms));
        assert_true(ms >= 2.5f); /* the kernel slept 3 ms between the records */
    }
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_event_destroy(start));
    RT_OK(rill_event_destroy(end));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(sleep));
}

/* A graph of a kernel, then a memset of dst. */
static rill_graph *store_then_set(rill_kernel *k, uint32_t *p, void *dst, size_t bytes) {
    rill_graph *g = NULL;
    RT_OK(rill_graph_create(&g));
    add_args a = {p, 3};
    rill_launch l = {{1, 1, 1}, {1, 1, 1}, &a, sizeof a, NULL, 0};
    rill_graph_node *n1 = NULL, *n2 = NULL;
    RT_OK(rill_graph_add_kernel_node(g, NULL, 0, k, &l, &n1));
    RT_OK(rill_graph_add_memset_node(g, &n1, 1, dst, 0x5a, bytes, &n2));
    return g;
}

/* An update whose memset moves from device memory, a node of the CUDA
 * graph, to pageable host memory, which the host sets once the stream has
 * drained, changes how the exec splits into CUDA graphs: it is
 * instantiated again, and its launches set the new memory. */
static void test_an_update_that_moves_a_node_off_the_gpu_instantiates_again(void **state) {
    (void)state;
    enum { BYTES = 64 };
    rill_stream *s = gpu_stream();
    rill_kernel *store = kernel("graph_store", graph_store_host);
    uint32_t *p = NULL;
    unsigned char *q = NULL, *h = calloc(1, BYTES);
    assert_non_null(h);
    RT_OK(rill_malloc(NULL, sizeof *p, (void **)&p));
    RT_OK(rill_malloc(NULL, BYTES, (void **)&q));
    rill_graph *on_gpu = store_then_set(store, p, q, BYTES);
    rill_graph *on_host = store_then_set(store, p, h, BYTES);
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(on_gpu, &x));
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    unsigned char back[BYTES];
    RT_OK(rill_memcpy(back, q, BYTES));
    assert_int_equal(back[BYTES - 1], 0x5a);
    unsigned long instantiated = graph_calls("cuGraphInstantiateWithFlags");
    RT_OK(rill_graph_exec_update(x, on_host));
    assert_int_equal(graph_calls("cuGraphInstantiateWithFlags") - instantiated, 1);
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(h[0], 0x5a);
    assert_int_equal(h[BYTES - 1], 0x5a);
    assert_int_equal(read_word(p), 3);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(on_gpu));
    RT_OK(rill_graph_destroy(on_host));
    RT_OK(rill_free(p));
    RT_OK(rill_free(q));
    free(h);
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(store));
}

/* A memset of page-locked host memory (rill_malloc_host), which the
 * driver sets as it sets device memory only (cuda.h), is not a memset node:
 * the host sets it once the stream has drained, after the kernel's CUDA
 * graph. */
static void test_a_memset_of_page_locked_memory_is_the_hosts(void **state) {
    (void)state;
    enum { BYTES = 64 };
    rill_stream *s = gpu_stream();
    rill_kernel *store = kernel("graph_store", graph_store_host);
    uint32_t *p = NULL;
    unsigned char *h = NULL;
    RT_OK(rill_malloc(NULL, sizeof *p, (void **)&p));
    RT_OK(rill_malloc_host(BYTES, (void **)&h));
    memset(h, 0, BYTES);
    rill_graph *g = store_then_set(store, p, h, BYTES);
    rill_graph_exec *x = NULL;
    RT_OK(rill_graph_instantiate(g, &x));
    unsigned long launches = graph_calls("cuGraphLaunch");
    unsigned long sets = graph_calls("cuMemsetD8Async");
    RT_OK(rill_graph_launch(x, s));
    RT_OK(rill_stream_synchronize(s));
    assert_int_equal(graph_calls("cuGraphLaunch") - launches, 1);
    assert_int_equal(graph_calls("cuMemsetD8Async") - sets, 0);
    assert_int_equal(h[0], 0x5a);
    assert_int_equal(h[BYTES - 1], 0x5a);
    assert_int_equal(read_word(p), 3);
    RT_OK(rill_graph_exec_destroy(x));
    RT_OK(rill_graph_destroy(g));
    RT_OK(rill_free(p));
    RT_OK(rill_free_host(h));
    RT_OK(rill_stream_destroy(s));
    RT_OK(rill_kernel_destroy(store));
}

/* The stand-in refuses what the driver refuses of these calls: a call
 * without a current context, a dependency of another graph or named twice,
 * a memset node of memory the driver does not know, a zero-length memcpy
 * node, a node of another graph or kind in an exec update. */
static void test_the_stand_in_refuses_what_the_driver_refuses(void **state) {
    (void)state;
    __typeof__(&cuCtxSetCurrent) set_current;
    __typeof__(&cuDevicePrimaryCtxRetain) retain;
    __typeof__(&cuDevicePrimaryCtxRelease) release;
    __typeof__(&cuGraphCreate) create;
    __typeof__(&cuGraphDestroy) destroy;
    __typeof__(&cuGraphAddEmptyNode) add_empty;
    __typeof__(&cuGraphAddMemsetNode) add_set;
    __typeof__(&cuGraphAddMemcpyNode) add_copy;
    __typeof__(&cuGraphInstantiateWithFlags) instantiate;
    __typeof__(&cuGraphExecDestroy) exec_destroy;
    __typeof__(&cuGraphExecKernelNodeSetParams) set_kernel;
    *(void **)&set_current = entry("cuCtxSetCurrent");
    *(void **)&retain = entry("cuDevicePrimaryCtxRetain");
    *(void **)&release = entry("cuDevicePrimaryCtxRelease");
    *(void **)&create = entry("cuGraphCreate");
    *(void **)&destroy = entry("cuGraphDestroy");
    *(void **)&add_empty = entry("cuGraphAddEmptyNode");
    *(void **)&add_set = entry("cuGraphAddMemsetNode");
    *(void **)&add_copy = entry("cuGraphAddMemcpyNode");
    *(void **)&instantiate = entry("cuGraphInstantiateWithFlags");
    *(void **)&exec_destroy = entry("cuGraphExecDestroy");
    *(void **)&set_kernel = entry("cuGraphExecKernelNodeSetParams");
    CUgraph g = NULL, h = NULL;
    assert_int_equal(set_current(NULL), CUDA_SUCCESS);
    assert_int_equal(create(&g, 0), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext ctx = NULL;
    assert_int_equal(retain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(set_current(ctx), CUDA_SUCCESS);
    assert_int_equal(create(&g, 0), CUDA_SUCCESS);
    assert_int_equal(create(&h, 0), CUDA_SUCCESS);
    CUgraphNode a = NULL, b = NULL, other = NULL, twice[2];
    assert_int_equal(add_empty(&a, g, NULL, 0), CUDA_SUCCESS);
    assert_int_equal(add_empty(&other, h, NULL, 0), CUDA_SUCCESS);
    assert_int_equal(add_empty(&b, g, &other, 1), CUDA_ERROR_INVALID_VALUE);
    twice[0] = twice[1] = a;
    assert_int_equal(add_empty(&b, g, twice, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(add_empty(&b, g, &a, 1), CUDA_SUCCESS);
    char pageable[16];
    CUDA_MEMSET_NODE_PARAMS ms = {.dst = (CUdeviceptr)(uintptr_t)pageable,
                                  .value = 1,
                                  .elementSize = 1,
                                  .width = sizeof pageable,
                                  .height = 1};
    CUgraphNode n = NULL;
    assert_int_equal(add_set(&n, g, &b, 1, &ms, ctx), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D mc = {.srcMemoryType = CU_MEMORYTYPE_UNIFIED,
                        .dstMemoryType = CU_MEMORYTYPE_UNIFIED,
                        .srcDevice = (CUdeviceptr)(uintptr_t)pageable,
                        .dstDevice = (CUdeviceptr)(uintptr_t)(pageable + 8),
                        .WidthInBytes = 0,
                        .Height = 1,
                        .Depth = 1};
    assert_int_equal(add_copy(&n, g, &b, 1, &mc, ctx), CUDA_ERROR_INVALID_VALUE);
    CUgraphExec x = NULL;
    assert_int_equal(instantiate(&x, g, 0), CUDA_SUCCESS);
    CUDA_KERNEL_NODE_PARAMS kp = {.gridDimX = 1,
                                  .gridDimY = 1,
                                  .gridDimZ = 1,
                                  .blockDimX = 1,
                                  .blockDimY = 1,
                                  .blockDimZ = 1};
    rill_cpu_kernel_fn body = graph_add_host;
    memcpy(&kp.func, &body, sizeof body);
    assert_int_equal(set_kernel(x, a, &kp), CUDA_ERROR_INVALID_VALUE);     /* an empty node */
    assert_int_equal(set_kernel(x, other, &kp), CUDA_ERROR_INVALID_VALUE); /* another graph's */
    assert_int_equal(exec_destroy(x), CUDA_SUCCESS);
    assert_int_equal(destroy(g), CUDA_SUCCESS);
    assert_int_equal(destroy(h), CUDA_SUCCESS);
    assert_int_equal(set_current(NULL), CUDA_SUCCESS);
    assert_int_equal(release(0), CUDA_SUCCESS);
}

int main(int argc, char **argv) {
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test, by name */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_launch_of_1000_nodes_is_one_cuGraphLaunch,
                                  rt_teardown_shutdown),
        cmocka_unit_test_teardown(test_exec_update_changes_a_kernels_arguments,
                                  rt_teardown_shutdown),
        cmocka_unit_test_teardown(test_host_nodes_split_a_launch_into_cuda_graphs,
                                  rt_teardown_shutdown),
        cmocka_unit_test_teardown(test_timing_record_nodes_time_each_launch, rt_teardown_shutdown),
        cmocka_unit_test_teardown(test_an_update_that_moves_a_node_off_the_gpu_instantiates_again,
                                  rt_teardown_shutdown),
        cmocka_unit_test_teardown(test_a_memset_of_page_locked_memory_is_the_hosts,
                                  rt_teardown_shutdown),
        cmocka_unit_test(test_the_stand_in_refuses_what_the_driver_refuses),
    };
    return cmocka_run_group_tests_name("cuda_graph", tests, load_fake, NULL);
}
