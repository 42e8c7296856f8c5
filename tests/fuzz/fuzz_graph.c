/* SPDX-License-Identifier: MIT */
/* libFuzzer target: graphs of up to 40 nodes built by hand from the input,
 * some dependencies and parameters invalid, instantiated, launched, updated
 * and destroyed. Must hold: no crash or hang; every call returns a status
 * its contract names, with a sentence; a failed add leaves no node; the
 * device synchronizes with RILL_OK once the streams' errors are cleared. */
#include <stdatomic.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "graph/graph.h"

enum {
    MAX_NODES = 40,
    MAX_DEPS = 4,
    NUM_EVENTS = 4, /* the last one is interprocess: graphs refuse it */
    NUM_BUFS = 3,   /* two blocks of device memory, then host memory */
    BUF_BYTES = 4096,
};

enum node_kind { KERNEL, EMPTY, MEMSET, MEMCPY, HOST, RECORD, WAIT, NUM_KINDS };

/* A dependency: a node made before (index >= 0), or an invalid one. */
enum { DEP_FOREIGN = -1, DEP_NULL = -2 };

typedef struct node_shape {
    uint8_t kind;
    uint8_t num_deps;
    int16_t deps[MAX_DEPS];
} node_shape;

/* The kinds and dependencies of the nodes tried, so that a second graph
 * can have the same shape (what rill_graph_exec_update takes). */
typedef struct graph_shape {
    node_shape nodes[MAX_NODES];
    size_t count;
} graph_shape;

typedef struct kernel_args {
    uint32_t fail;
} kernel_args;

static rill_device *dev;
static rill_stream *streams[2];
static rill_kernel *kernel;      /* reads a kernel_args */
static rill_kernel *kernel_bare; /* takes no arguments */
static rill_event *events[NUM_EVENTS];
static unsigned char *bufs[NUM_BUFS];
static unsigned char host_buf[BUF_BYTES];
static atomic_ulong runs; /* blocks and host functions run: keeps them from being idle */

static void kernel_body(const rill_block_ctx *ctx, const void *args) {
    const kernel_args *a = args;
    atomic_fetch_add_explicit(&runs, 1, memory_order_relaxed);
    if (a->fail && ctx->block_idx.x == 0)
        rill_kernel_fail(ctx, "failed on purpose by the fuzz input");
}

static void kernel_bare_body(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
    atomic_fetch_add_explicit(&runs, 1, memory_order_relaxed);
}

static void host_body(void *user_data) {
    (void)user_data;
    atomic_fetch_add_explicit(&runs, 1, memory_order_relaxed);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("RILL_CPU_WORKERS", "2", 0);
    rill_status st = rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &dev);
    fuzz_check(st == RILL_OK, "rill_device_get_by_kind", st);
    for (int i = 0; i < 2; i++) {
        st = rill_stream_create(dev, 0, &streams[i]);
        fuzz_check(st == RILL_OK, "rill_stream_create", st);
    }
    static const rill_kernel_desc desc = {"fuzz_kernel", kernel_body, NULL, NULL};
    st = rill_kernel_create(&desc, &kernel);
    fuzz_check(st == RILL_OK, "rill_kernel_create", st);
    static const rill_kernel_desc bare = {"fuzz_kernel_bare", kernel_bare_body, NULL, NULL};
    st = rill_kernel_create(&bare, &kernel_bare);
    fuzz_check(st == RILL_OK, "rill_kernel_create", st);
    for (int i = 0; i < NUM_EVENTS; i++) {
        unsigned flags = i == NUM_EVENTS - 1 ? RILL_EVENT_INTERPROCESS : RILL_EVENT_DEFAULT;
        st = rill_event_create(flags, &events[i]);
        fuzz_check(st == RILL_OK, "rill_event_create", st);
    }
    for (int i = 0; i < NUM_BUFS - 1; i++) {
        st = rill_malloc(dev, BUF_BYTES, (void **)&bufs[i]);
        fuzz_check(st == RILL_OK, "rill_malloc", st);
    }
    bufs[NUM_BUFS - 1] = host_buf;
    return 0;
}

/* ---- parameters ---- */

/* A range of a buffer: in bounds, or (device memory only: the host buffer
 * cannot be checked, and overrunning it is the caller's bug) running past
 * the end of its allocation, which *past_end then says. */
static unsigned char *pick_range(fuzz_input *in, size_t *bytes, int *past_end) {
    uint8_t b = fuzz_byte(in);
    unsigned char *base = bufs[b % NUM_BUFS];
    size_t off = fuzz_u16(in) % BUF_BYTES;
    size_t fit = BUF_BYTES - off;
    size_t want = fuzz_u16(in);
    *past_end = (b & 0x80) && base != host_buf;
    *bytes = *past_end ? fit + 1 + want % 64 : want % (fit + 1);
    return base + off;
}

static rill_status add_kernel(fuzz_input *in, rill_graph *g, rill_graph_node *const *deps,
                              size_t num_deps, rill_graph_node **out) {
    /* Bits of b: 0x03 the grid's blocks less one, 0x04 the kernel without
     * arguments, 0x08 a NULL args pointer (refused unless args_size is 0),
     * 0xf0 all set: no kernel (refused). */
    uint8_t b = fuzz_byte(in);
    kernel_args args = {fuzz_byte(in) == 0xa5};
    rill_access acc[2];
    size_t num_acc = fuzz_byte(in) % 3;
    for (size_t i = 0; i < num_acc; i++) {
        int past_end;
        acc[i].ptr = pick_range(in, &acc[i].bytes, &past_end);
        acc[i].mode = (rill_access_mode)(1 + fuzz_byte(in) % 3);
    }
    int bare = (b & 0x04) != 0;
    rill_launch l = {
        .grid = {1u + (b & 3u), 1, 1},
        .block = {1, 1, 1},
        .args = (b & 0x08) ? NULL : &args,
        .args_size = bare ? 0 : sizeof args,
        .accesses = acc,
        .num_accesses = num_acc,
    };
    rill_kernel *k = (b & 0xf0) == 0xf0 ? NULL : bare ? kernel_bare : kernel;
    return rill_graph_add_kernel_node(g, deps, num_deps, k, &l, out);
}

static rill_status add_node(fuzz_input *in, uint8_t kind, rill_graph *g,
                            rill_graph_node *const *deps, size_t num_deps, rill_graph_node **out) {
    size_t bytes = 0, src_bytes = 0;
    int past_end = 0, src_past_end = 0;
    unsigned char *dst, *src;
    switch (kind) {
    case KERNEL:
        return add_kernel(in, g, deps, num_deps, out);
    case EMPTY:
        return rill_graph_add_empty_node(g, deps, num_deps, out);
    case MEMSET:
        dst = pick_range(in, &bytes, &past_end);
        return rill_graph_add_memset_node(g, deps, num_deps, dst, fuzz_byte(in), bytes, out);
    case MEMCPY:
        /* The smaller of the two ranges, unless one runs past its end.
         * Overlapping ranges are allowed: copies move memory. */
        dst = pick_range(in, &bytes, &past_end);
        src = pick_range(in, &src_bytes, &src_past_end);
        if (src_past_end || (!past_end && src_bytes < bytes))
            bytes = src_bytes;
        return rill_graph_add_memcpy_node(g, deps, num_deps, dst, src, bytes, out);
    case HOST:
        return rill_graph_add_host_node(g, deps, num_deps, host_body, NULL, out);
    case RECORD:
        return rill_graph_add_event_record_node(g, deps, num_deps,
                                                events[fuzz_byte(in) % NUM_EVENTS], out);
    default:
        return rill_graph_add_event_wait_node(g, deps, num_deps, events[fuzz_byte(in) % NUM_EVENTS],
                                              out);
    }
}

/* ---- graphs ---- */

/* Builds a graph: with shape, the same kinds and dependencies as a graph
 * built before (new parameters); without, a new shape, which *made
 * receives. foreign is a node of another graph. */
static rill_graph *build(fuzz_input *in, const graph_shape *shape, graph_shape *made,
                         rill_graph_node *foreign) {
    rill_graph *g = NULL;
    rill_status st = rill_graph_create(&g);
    fuzz_check(st == RILL_OK, "rill_graph_create", st);
    rill_graph_node *nodes[MAX_NODES];
    size_t num_nodes = 0;
    size_t count = shape != NULL ? shape->count : fuzz_byte(in) % (MAX_NODES + 1);
    for (size_t i = 0; i < count; i++) {
        node_shape ns;
        if (shape != NULL) {
            ns = shape->nodes[i];
        } else {
            ns.kind = fuzz_byte(in) % NUM_KINDS;
            ns.num_deps = fuzz_byte(in) % (MAX_DEPS + 1);
            for (size_t d = 0; d < ns.num_deps; d++) {
                uint8_t b = fuzz_byte(in);
                ns.deps[d] = b < 224 && num_nodes > 0 ? (int16_t)(b % num_nodes)
                             : b < 240                ? DEP_FOREIGN
                                                      : DEP_NULL;
            }
            made->nodes[made->count++] = ns;
        }
        rill_graph_node *deps[MAX_DEPS];
        int valid = 1;
        for (size_t d = 0; d < ns.num_deps; d++) {
            int16_t x = ns.deps[d];
            deps[d] = x >= 0 && (size_t)x < num_nodes ? nodes[x]
                      : x == DEP_FOREIGN              ? foreign
                                                      : NULL;
            valid &= deps[d] != NULL && deps[d] != foreign;
        }
        rill_graph_node *n = (rill_graph_node *)(void *)&ns; /* must come back NULL */
        st = add_node(in, ns.kind, g, ns.num_deps > 0 ? deps : NULL, ns.num_deps, &n);
        fuzz_expect(st, RILL_ERROR_INVALID_ARGUMENT, RILL_ERROR_NOT_SUPPORTED,
                    "rill_graph_add_*_node");
        fuzz_check(st == RILL_OK || n == NULL, "rill_graph_add_*_node (out not NULL on failure)",
                   st);
        fuzz_check(valid || st != RILL_OK, "rill_graph_add_*_node (an invalid dependency taken)",
                   st);
        if (st == RILL_OK)
            nodes[num_nodes++] = n;
    }
    size_t counted = 0;
    st = rill_graph_node_count(g, &counted);
    fuzz_check(st == RILL_OK && counted == num_nodes, "rill_graph_node_count", st);
    return g;
}

/* Between launches: eager records and waits of the graphs' events. */
static void eager_event_work(fuzz_input *in) {
    uint8_t b = fuzz_byte(in);
    rill_event *e = events[(b >> 2) % (NUM_EVENTS - 1)];
    rill_stream *s = streams[b & 1];
    rill_status st = RILL_OK;
    if (b & 2)
        st = rill_event_record(e, s);
    else
        st = rill_stream_wait_event(s, e);
    fuzz_expect(st, RILL_ERROR_KERNEL_FAILED, RILL_OK,
                "rill_event_record / rill_stream_wait_event");
}

static void launches(fuzz_input *in, rill_graph_exec *x) {
    size_t count = fuzz_byte(in) % 4;
    for (size_t i = 0; i < count; i++) {
        uint8_t b = fuzz_byte(in);
        rill_status st = rill_graph_launch(x, streams[b & 1]);
        fuzz_expect(st, RILL_ERROR_KERNEL_FAILED, RILL_OK, "rill_graph_launch");
        if (b & 2)
            eager_event_work(in);
    }
}

/* The graph's and the exec's own invariants (rill__graph_check, rill__exec_check). */
static void check_structures(rill_graph *g, rill_graph_exec *x, const char *when) {
    char why[512];
    if ((g != NULL && !rill__graph_check(g, why, sizeof why)) ||
        (x != NULL && !rill__exec_check(x, why, sizeof why))) {
        fprintf(stderr, "fuzz: %s: %s\n", when, why);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_input in = {data, size};
    rill_graph *other = NULL;
    rill_graph_node *foreign = NULL;
    rill_status st = rill_graph_create(&other);
    fuzz_check(st == RILL_OK, "rill_graph_create", st);
    st = rill_graph_add_empty_node(other, NULL, 0, &foreign);
    fuzz_check(st == RILL_OK, "rill_graph_add_empty_node", st);

    graph_shape shape = {.count = 0};
    rill_graph *g1 = build(&in, NULL, &shape, foreign);
    uint8_t flags = fuzz_byte(&in);
    rill_graph_exec *x = NULL;
    st = rill_graph_instantiate(g1, &x);
    fuzz_check(st == RILL_OK, "rill_graph_instantiate", st);
    check_structures(g1, x, "after rill_graph_instantiate");
    if (flags & 1) {
        st = rill_graph_destroy(g1); /* "the graph may be destroyed afterwards" */
        fuzz_check(st == RILL_OK, "rill_graph_destroy", st);
        g1 = NULL;
    }
    launches(&in, x);

    graph_shape unused = {.count = 0};
    rill_graph *g2 = build(&in, (flags & 2) ? &shape : NULL, &unused, foreign);
    st = rill_graph_exec_update(x, g2);
    fuzz_expect(st, RILL_ERROR_INVALID_ARGUMENT, RILL_OK, "rill_graph_exec_update");
    check_structures(g2, x, "after rill_graph_exec_update");
    launches(&in, x);

    for (int i = 0; i < 2; i++) {
        st = rill_stream_synchronize(streams[i]);
        fuzz_expect(st, RILL_ERROR_KERNEL_FAILED, RILL_OK, "rill_stream_synchronize");
    }
    for (int i = 0; i < 2; i++) {
        st = rill_stream_clear_error(streams[i]);
        fuzz_check(st == RILL_OK, "rill_stream_clear_error", st);
    }
    st = rill_graph_exec_destroy(x);
    fuzz_check(st == RILL_OK, "rill_graph_exec_destroy", st);
    st = rill_graph_destroy(g2);
    fuzz_check(st == RILL_OK, "rill_graph_destroy", st);
    if (g1 != NULL) {
        st = rill_graph_destroy(g1);
        fuzz_check(st == RILL_OK, "rill_graph_destroy", st);
    }
    st = rill_graph_destroy(other);
    fuzz_check(st == RILL_OK, "rill_graph_destroy", st);
    st = rill_device_synchronize(dev);
    fuzz_check(st == RILL_OK, "rill_device_synchronize (after the streams' errors were cleared)",
               st);
    return 0;
}
