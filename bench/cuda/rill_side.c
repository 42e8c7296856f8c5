/* SPDX-License-Identifier: MIT */
/* The rill side of bench_cuda_baseline: each row's operation through rill's
 * public API, as cuda_side.c does it with the CUDA runtime, on a rill
 * device: rill's first CUDA device, or the current device when RILL_DEVICE
 * is set. The kernels are kernels.cu's PTX, and each also has a CPU body
 * here, so that the side runs (and is tested) on a CPU device where no GPU
 * is present; the figures then describe that device, not a GPU. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "kernels.h"
#include "rill.h"
#include "rill_bench.h"
#include "sides.h"

_Static_assert(sizeof(bench_cuda_spin_args) == 8, "spin's parameters: one u64");
_Static_assert(sizeof(bench_cuda_fill_args) == 24 && offsetof(bench_cuda_fill_args, n) == 8 &&
                   offsetof(bench_cuda_fill_args, seed) == 16,
               "fill's parameters: a pointer and two u64, unpadded");

typedef struct rill_state {
    const cb_config *cfg;                   /* borrowed: outlives the side */
    rill_device *dev;                       /* borrowed: lives until rill_shutdown */
    rill_stream *s1, *s2;                   /* owned */
    rill_event *e1, *e2;                    /* owned */
    rill_kernel *k_empty, *k_spin, *k_fill; /* owned */
    rill_graph_exec *exec;                  /* owned; the prepared CB_GRAPH_* op's */
    void *mm_a, *mm_b, *mm_c;               /* owned; the prepared CB_MATMUL_* op's */
    size_t mm_n;
    atomic_long host_calls; /* CB_HOST_FUNC's functions that ran */
} rill_state;

static const rill_launch one_block = {.grid = {1, 1, 1}, .block = {1, 1, 1}};

/* ---- the kernels' CPU bodies ---- */

static void empty_cpu(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

static void spin_cpu(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    const bench_cuda_spin_args *a = args;
    bench_spin_ns(a->ns);
}

/* kernels.cu's fill_value, bit for bit. */
static float fill_value(uint64_t i, uint64_t seed) {
    uint64_t s = (i + 1) * 0x9E3779B97F4A7C15u ^ seed;
    s ^= s >> 31;
    s *= 0xBF58476D1CE4E5B9u;
    s ^= s >> 29;
    return (float)(s >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* Block b of g fills the b-th of g even runs of the elements. */
static void fill_cpu(const rill_block_ctx *ctx, const void *args) {
    const bench_cuda_fill_args *a = args;
    uint64_t per = (a->n + ctx->grid_dim.x - 1) / ctx->grid_dim.x;
    uint64_t lo = per * ctx->block_idx.x;
    uint64_t hi = lo + per < a->n ? lo + per : a->n;
    float *x = a->x;
    for (uint64_t i = lo; i < hi; i++)
        x[i] = fill_value(i, a->seed);
}

/* ---- launches, events, host functions ---- */

static bool launch_failed(rill_stream *s, rill_kernel *k, const rill_launch *l) {
    return bench_failed(rill_launch_kernel(s, k, l), "rill_launch_kernel");
}

static bool sync_failed(rill_stream *s) {
    return bench_failed(rill_stream_synchronize(s), "rill_stream_synchronize");
}

static int sample_launch(rill_state *st, double *us) {
    uint64_t timed = 0;
    for (int b = 0; b < st->cfg->launch_batches; b++) {
        uint64_t t0 = bench_now_ns();
        for (int i = 0; i < st->cfg->launch_batch; i++)
            if (launch_failed(st->s1, st->k_empty, &one_block))
                return -1;
        timed += bench_now_ns() - t0;
        if (sync_failed(st->s1))
            return -1;
    }
    *us = (double)timed / 1e3 / ((double)st->cfg->launch_batches * st->cfg->launch_batch);
    return 0;
}

static int sample_launch_sync(rill_state *st, double *us) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->sync_rounds; i++)
        if (launch_failed(st->s1, st->k_empty, &one_block) || sync_failed(st->s1))
            return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3 / st->cfg->sync_rounds;
    return 0;
}

/* As cuda_side.c's: a kernel on s1, handed to s2 through e1, and back
 * through e2. */
static int sample_event_hop(rill_state *st, double *us) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->hops; i += 2) {
        if (launch_failed(st->s1, st->k_empty, &one_block) ||
            bench_failed(rill_event_record(st->e1, st->s1), "rill_event_record") ||
            bench_failed(rill_stream_wait_event(st->s2, st->e1), "rill_stream_wait_event") ||
            launch_failed(st->s2, st->k_empty, &one_block) ||
            bench_failed(rill_event_record(st->e2, st->s2), "rill_event_record") ||
            bench_failed(rill_stream_wait_event(st->s1, st->e2), "rill_stream_wait_event"))
            return -1;
    }
    if (sync_failed(st->s1) || sync_failed(st->s2))
        return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3 / st->cfg->hops;
    return 0;
}

static void count_call(void *user_data) {
    rill_state *st = user_data;
    atomic_fetch_add_explicit(&st->host_calls, 1, memory_order_relaxed);
}

static int sample_host_func(rill_state *st, double *us) {
    atomic_store(&st->host_calls, 0);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->host_funcs; i++)
        if (bench_failed(rill_launch_host_func(st->s1, count_call, st), "rill_launch_host_func"))
            return -1;
    if (sync_failed(st->s1))
        return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3 / st->cfg->host_funcs;
    if (atomic_load(&st->host_calls) != st->cfg->host_funcs) {
        fprintf(stderr, "bench: %ld of %d host functions ran\n", atomic_load(&st->host_calls),
                st->cfg->host_funcs);
        return -1;
    }
    return 0;
}

static int launch_spins(rill_state *st, bool two_streams) {
    bench_cuda_spin_args a = {st->cfg->spin_ns};
    rill_launch l = one_block;
    l.args = &a;
    l.args_size = sizeof a;
    for (int i = 0; i < st->cfg->spin_kernels; i++)
        if (launch_failed(two_streams && i % 2 ? st->s2 : st->s1, st->k_spin, &l))
            return -1;
    return sync_failed(st->s1) || sync_failed(st->s2) ? -1 : 0;
}

static int sample_two_streams(rill_state *st, double *speedup) {
    uint64_t t0 = bench_now_ns();
    if (launch_spins(st, false) != 0)
        return -1;
    uint64_t t1 = bench_now_ns();
    if (launch_spins(st, true) != 0)
        return -1;
    *speedup = (double)(t1 - t0) / (double)(bench_now_ns() - t1);
    return 0;
}

static int sample_idle_launch(rill_state *st, double *us) {
    bench_sleep_us(st->cfg->idle_ms * 1000u);
    uint64_t t0 = bench_now_ns();
    if (launch_failed(st->s1, st->k_empty, &one_block) || sync_failed(st->s1))
        return -1;
    *us = (double)(bench_now_ns() - t0) / 1e3;
    return 0;
}

/* ---- graphs ---- */

/* The chain or the fan of cuda_side.c's build_graph, by hand. */
static int build_graph(rill_state *st, bool fan) {
    int n = st->cfg->graph_nodes;
    rill_graph *g = NULL;
    rill_graph_node **nodes = calloc((size_t)n, sizeof(*nodes));
    int rc = -1;
    if (nodes == NULL) {
        fprintf(stderr, "bench: out of memory for %d graph nodes\n", n);
        return -1;
    }
    if (bench_failed(rill_graph_create(&g), "rill_graph_create"))
        goto out;
    for (int i = 0; i < n; i++) {
        rill_graph_node *const *deps = NULL;
        size_t num_deps = 0;
        if (i > 0 && !fan) {
            deps = &nodes[i - 1];
            num_deps = 1;
        } else if (i > 0 && i < n - 1) {
            deps = &nodes[0];
            num_deps = 1;
        } else if (i == n - 1) {
            deps = &nodes[1];
            num_deps = (size_t)n - 2;
        }
        if (bench_failed(
                rill_graph_add_kernel_node(g, deps, num_deps, st->k_empty, &one_block, &nodes[i]),
                "rill_graph_add_kernel_node"))
            goto out;
    }
    if (bench_failed(rill_graph_instantiate(g, &st->exec), "rill_graph_instantiate"))
        goto out;
    rc = 0;
out:
    if (g != NULL && bench_failed(rill_graph_destroy(g), "rill_graph_destroy"))
        rc = -1;
    free(nodes);
    return rc;
}

static int sample_graph(rill_state *st, double *ns_per_node) {
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < st->cfg->graph_runs; r++)
        if (bench_failed(rill_graph_launch(st->exec, st->s1), "rill_graph_launch") ||
            sync_failed(st->s1))
            return -1;
    *ns_per_node =
        (double)(bench_now_ns() - t0) / ((double)st->cfg->graph_runs * st->cfg->graph_nodes);
    return 0;
}

/* ---- stream-ordered memory ---- */

static int sample_alloc_pair(rill_state *st, double *ns_per_pair) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < st->cfg->alloc_pairs; i++) {
        void *p;
        if (bench_failed(rill_malloc_async(cb_pair_sizes[i % cb_num_pair_sizes], st->s1, &p),
                         "rill_malloc_async") ||
            bench_failed(rill_free_async(p, st->s1), "rill_free_async"))
            return -1;
    }
    *ns_per_pair = (double)(bench_now_ns() - t0) / st->cfg->alloc_pairs;
    return sync_failed(st->s1) ? -1 : 0;
}

/* ---- matrix products ---- */

static int fill(rill_state *st, float *x, size_t n, uint64_t seed) {
    bench_cuda_fill_args a = {x, n, seed};
    rill_access out = {x, n * sizeof(float), RILL_WRITE};
    rill_launch l = {.grid = {1024, 1, 1},
                     .block = {BENCH_CUDA_FILL_THREADS, 1, 1},
                     .args = &a,
                     .args_size = sizeof a,
                     .accesses = &out,
                     .num_accesses = 1};
    return launch_failed(st->s1, st->k_fill, &l) ? -1 : 0;
}

/* The inputs hold kernels.cu's values, as the CUDA side's do; halves are
 * those values cast by rill_op_cast_f32_f16, which rounds to nearest as
 * the CUDA side's __float2half does. */
static int prepare_matmul(rill_state *st, bool f16) {
    size_t n = f16 ? st->cfg->mm_f16_n : st->cfg->mm_f32_n;
    size_t bytes = n * n * (f16 ? sizeof(rill_half) : sizeof(float));
    float *tmp = NULL;
    int rc = -1;
    st->mm_n = n;
    if (bench_failed(rill_malloc(st->dev, bytes, &st->mm_a), "rill_malloc") ||
        bench_failed(rill_malloc(st->dev, bytes, &st->mm_b), "rill_malloc") ||
        bench_failed(rill_malloc(st->dev, bytes, &st->mm_c), "rill_malloc"))
        return -1;
    if (!f16)
        return fill(st, st->mm_a, n * n, 1) != 0 || fill(st, st->mm_b, n * n, 2) != 0 ||
                       sync_failed(st->s1)
                   ? -1
                   : 0;
    if (bench_failed(rill_malloc_async(n * n * sizeof(float), st->s1, (void **)&tmp),
                     "rill_malloc_async"))
        return -1;
    if (fill(st, tmp, n * n, 1) != 0 ||
        bench_failed(rill_op_cast_f32_f16(st->s1, st->mm_a, tmp, n * n), "rill_op_cast_f32_f16") ||
        fill(st, tmp, n * n, 2) != 0 ||
        bench_failed(rill_op_cast_f32_f16(st->s1, st->mm_b, tmp, n * n), "rill_op_cast_f32_f16"))
        goto out;
    rc = 0;
out:
    if (bench_failed(rill_free_async(tmp, st->s1), "rill_free_async") || sync_failed(st->s1))
        rc = -1;
    return rc;
}

static int sample_matmul(rill_state *st, bool f16, double *tflops) {
    size_t n = st->mm_n;
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < st->cfg->mm_runs; r++) {
        rill_status s = f16 ? rill_op_matmul_f16(st->s1, st->mm_c, st->mm_a, st->mm_b, n, n, n)
                            : rill_op_matmul_f32(st->s1, st->mm_c, st->mm_a, st->mm_b, n, n, n);
        if (bench_failed(s, f16 ? "rill_op_matmul_f16" : "rill_op_matmul_f32"))
            return -1;
    }
    if (sync_failed(st->s1))
        return -1;
    double flop = 2.0 * (double)n * (double)n * (double)n * st->cfg->mm_runs;
    *tflops = flop / (double)(bench_now_ns() - t0) / 1e3;
    return 0;
}

/* ---- the side's three functions ---- */

static int rill_sample(void *state, cb_op op, double *value) {
    rill_state *st = state;
    switch (op) {
    case CB_LAUNCH:
        return sample_launch(st, value);
    case CB_LAUNCH_SYNC:
        return sample_launch_sync(st, value);
    case CB_EVENT_HOP:
        return sample_event_hop(st, value);
    case CB_GRAPH_CHAIN:
    case CB_GRAPH_FAN:
        return sample_graph(st, value);
    case CB_ALLOC_PAIR:
        return sample_alloc_pair(st, value);
    case CB_HOST_FUNC:
        return sample_host_func(st, value);
    case CB_TWO_STREAMS:
        return sample_two_streams(st, value);
    case CB_IDLE_LAUNCH:
        return sample_idle_launch(st, value);
    case CB_MATMUL_F32:
    case CB_MATMUL_F16:
        return sample_matmul(st, op == CB_MATMUL_F16, value);
    case CB_NUM_OPS:
        break;
    }
    fprintf(stderr, "bench: the rill side cannot measure op %d\n", (int)op);
    return -1;
}

static int rill_prepare(void *state, cb_op op, char *note, size_t note_size) {
    rill_state *st = state;
    (void)note;
    (void)note_size;
    int rc = 0;
    if (op == CB_GRAPH_CHAIN || op == CB_GRAPH_FAN)
        rc = build_graph(st, op == CB_GRAPH_FAN);
    else if (op == CB_MATMUL_F32 || op == CB_MATMUL_F16)
        rc = prepare_matmul(st, op == CB_MATMUL_F16);
    if (rc != 0 || op == CB_IDLE_LAUNCH)
        return rc;
    double ignored;
    return rill_sample(st, op, &ignored);
}

static void rill_release(void *state, cb_op op) {
    rill_state *st = state;
    (void)op;
    if (st->exec != NULL)
        bench_failed(rill_graph_exec_destroy(st->exec), "rill_graph_exec_destroy");
    st->exec = NULL;
    void **bufs[] = {&st->mm_a, &st->mm_b, &st->mm_c};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (*bufs[i] != NULL)
            bench_failed(rill_free(*bufs[i]), "rill_free");
        *bufs[i] = NULL;
    }
}

/* ---- open and close ---- */

static bool kernel_failed(const char *entry, rill_cpu_kernel_fn cpu, rill_kernel **out) {
    rill_kernel_desc d = {
        .name = entry, .cpu = cpu, .cuda_ptx = bench_cuda_ptx(), .cuda_entry = entry};
    return bench_failed(rill_kernel_create(&d, out), "rill_kernel_create");
}

int rill_side_open(cb_side *side, const cb_config *cfg, char *name, size_t name_size, char *note,
                   size_t note_size) {
    rill_state *st = calloc(1, sizeof(*st));
    *side = (cb_side){.name = "rill",
                      .state = st,
                      .prepare = rill_prepare,
                      .sample = rill_sample,
                      .release = rill_release};
    if (st == NULL) {
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    st->cfg = cfg;
    atomic_init(&st->host_calls, 0);
    const char *chosen = getenv("RILL_DEVICE");
    bool by_env = chosen != NULL && chosen[0] != '\0';
    rill_status s =
        by_env ? rill_get_device(&st->dev) : rill_device_get_by_kind(RILL_DEVICE_CUDA, 0, &st->dev);
    if (s == RILL_ERROR_NO_DEVICE) {
        if (by_env)
            snprintf(note, note_size, "RILL_DEVICE names none");
        else
            snprintf(note, note_size, "no CUDA device in rill");
        fprintf(stderr, "bench: rill side: %s\n", rill_last_error());
        return 1;
    }
    rill_device_info info;
    if (bench_failed(s, by_env ? "rill_get_device" : "rill_device_get_by_kind") ||
        bench_failed(rill_device_get_info(st->dev, &info), "rill_device_get_info") ||
        bench_failed(rill_stream_create(st->dev, 0, &st->s1), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(st->s1, "bench-cuda-1"), "rill_stream_set_name") ||
        bench_failed(rill_stream_create(st->dev, 0, &st->s2), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(st->s2, "bench-cuda-2"), "rill_stream_set_name") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &st->e1), "rill_event_create") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &st->e2), "rill_event_create") ||
        kernel_failed(BENCH_CUDA_ENTRY_EMPTY, empty_cpu, &st->k_empty) ||
        kernel_failed(BENCH_CUDA_ENTRY_SPIN, spin_cpu, &st->k_spin) ||
        kernel_failed(BENCH_CUDA_ENTRY_FILL_F32, fill_cpu, &st->k_fill))
        return -1;
    snprintf(name, name_size, "%s %d, %.*s", info.kind == RILL_DEVICE_CUDA ? "cuda" : "cpu",
             info.ordinal, (int)sizeof info.name, info.name);
    return 0;
}

int rill_side_close(cb_side *side) {
    rill_state *st = side->state;
    int rc = 0;
    if (st != NULL) {
        rill_kernel *kernels[] = {st->k_empty, st->k_spin, st->k_fill};
        for (int i = 0; i < 3; i++)
            if (kernels[i] != NULL &&
                bench_failed(rill_kernel_destroy(kernels[i]), "rill_kernel_destroy"))
                rc = -1;
        rill_event *events[] = {st->e1, st->e2};
        for (int i = 0; i < 2; i++)
            if (events[i] != NULL &&
                bench_failed(rill_event_destroy(events[i]), "rill_event_destroy"))
                rc = -1;
        rill_stream *streams[] = {st->s1, st->s2};
        for (int i = 0; i < 2; i++)
            if (streams[i] != NULL &&
                bench_failed(rill_stream_destroy(streams[i]), "rill_stream_destroy"))
                rc = -1;
        free(st);
        side->state = NULL;
    }
    if (bench_rill_shutdown(NULL) != 0)
        rc = -1;
    return rc;
}
