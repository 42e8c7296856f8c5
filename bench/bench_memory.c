/* SPDX-License-Identifier: MIT */
/* bench_memory: what the stream-ordered caching pool costs and how much
 * memory it holds (m1..m4 below), each against a baseline in the same run
 * (harness.c): glibc malloc+free for the costs, a simulated power-of-two
 * caching allocator for the peak reserved / peak allocated ratios. */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harness.h"
#include "rill.h"
#include "rill_bench.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

typedef struct config {
    long pairs; /* m1: pairs per sample */
    int pair_repeats;
    long tracked_pairs; /* m2 */
    int tracked_repeats;
    long exchange_iterations; /* m3 */
    int trace_repeats;        /* m3, m4 */
    int trace_steps;          /* m4: training iterations in the trace */
} config;

static const config full_config = {1000000, 5, 200000, 5, 20000, 5, 3};
static const config quick_config = {100000, 3, 20000, 3, 2000, 2, 2};

/* m1 and m2 cycle through these sizes: both pools, each power of four. */
static const size_t pair_sizes[] = {256,      1 * KiB,   4 * KiB, 16 * KiB,
                                    64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB};
enum { NUM_PAIR_SIZES = sizeof pair_sizes / sizeof pair_sizes[0] };

typedef struct bench {
    config cfg;
    rill_device *dev;     /* borrowed: lives until rill_shutdown */
    bench_report *report; /* borrowed: bench_cli_main owns it */
} bench;

/* Prints a failed rill call and returns true; false when st is RILL_OK. */
static void empty_kernel(const rill_block_ctx *ctx, const void *args) {
    (void)ctx;
    (void)args;
}

/* ---- m1. a pair on one stream ---- */

typedef struct pair_ctx {
    rill_stream *stream; /* borrowed */
    long count;
} pair_ctx;

static int sample_pair(void *ctx, double *ns_per_pair) {
    pair_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->count; i++) {
        void *p;
        if (bench_failed(rill_malloc_async(pair_sizes[i % NUM_PAIR_SIZES], c->stream, &p),
                         "rill_malloc_async") ||
            bench_failed(rill_free_async(p, c->stream), "rill_free_async"))
            return -1;
    }
    *ns_per_pair = (double)(bench_now_ns() - t0) / (double)c->count;
    return 0;
}

/* The pointer goes to a volatile, so the compiler cannot drop the pair. */
static volatile uintptr_t glibc_sink;

static int sample_glibc_pair(void *ctx, double *ns_per_pair) {
    const pair_ctx *c = ctx;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->count; i++) {
        void *p = malloc(pair_sizes[i % NUM_PAIR_SIZES]);
        if (p == NULL) {
            fprintf(stderr, "bench: malloc failed\n");
            return -1;
        }
        glibc_sink = (uintptr_t)p;
        free(p);
    }
    *ns_per_pair = (double)(bench_now_ns() - t0) / (double)c->count;
    return 0;
}

static int figure_pair(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report, "m1. rill_malloc_async + rill_free_async on one stream, sizes "
                                    "256 B..4 MiB in turn (baseline: glibc malloc + free)");
    rill_stream *s = NULL;
    int rc = -1;
    if (bench_failed(rill_stream_create(b->dev, 0, &s), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(s, "bench-m1"), "rill_stream_set_name"))
        goto out;
    pair_ctx c = {s, b->cfg.pairs};
    pair_ctx warm = {s, b->cfg.pairs / 10};
    double ignored;
    if (sample_pair(&warm, &ignored) != 0 || sample_glibc_pair(&warm, &ignored) != 0)
        goto out;
    bench_row row = {.id = "m1",
                     .name = "malloc_async+free_async pair, one stream",
                     .unit = "ns/pair",
                     .baseline_name = "glibc malloc+free of the same sizes"};
    if (bench_measure_row(b->report, &row, sample_pair, &c, sample_glibc_pair, &c,
                          b->cfg.pair_repeats) != 0)
        goto out;
    rc = 0;
out:
    if (s && bench_failed(rill_stream_destroy(s), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- m2. a pair with a tracked use on another stream ---- */

enum { RETURN_FLOW_EVERY = 64 }; /* pairs between two waits of A for B */

/* What each iteration of the m2 loop does besides its launch on B. */
typedef enum tracked_mode {
    PAIR_TRACKED,   /* a pair on A; the kernel declares a read of the block */
    PAIR_UNTRACKED, /* a pair on A; the kernel declares nothing */
    LAUNCH_ONLY,    /* no pair; the kernel declares nothing */
} tracked_mode;

typedef struct tracked_ctx {
    rill_stream *a, *b;  /* borrowed */
    rill_event *b_done;  /* borrowed */
    rill_kernel *kernel; /* borrowed */
    long count;
    tracked_mode mode;
} tracked_ctx;

/* Each iteration: rill_malloc_async on A, a 1-block empty kernel on B that
 * declares a read of the block (the pool records B's use), and
 * rill_free_async on A. Every 64 iterations A waits for an event recorded
 * on B, the "return flow" that lets A reuse blocks B has used without a
 * host wait; the end synchronizes both streams. Time per iteration = all of
 * it over the iterations. B does not wait for A before each use: A has no
 * work, so the blocks are ready when they are handed out. The other modes
 * drop the declared access, or the pair. */
static int sample_tracked(void *ctx, double *ns_per_pair) {
    tracked_ctx *c = ctx;
    bool pair = c->mode != LAUNCH_ONLY;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < c->count; i++) {
        size_t bytes = pair_sizes[i % NUM_PAIR_SIZES];
        void *p = NULL;
        if (pair && bench_failed(rill_malloc_async(bytes, c->a, &p), "rill_malloc_async"))
            return -1;
        rill_access acc = {p, bytes, RILL_READ};
        rill_launch l = {.grid = {1, 1, 1},
                         .block = {1, 1, 1},
                         .accesses = &acc,
                         .num_accesses = c->mode == PAIR_TRACKED ? 1 : 0};
        if (bench_failed(rill_launch_kernel(c->b, c->kernel, &l), "rill_launch_kernel") ||
            (pair && bench_failed(rill_free_async(p, c->a), "rill_free_async")))
            return -1;
        if ((i + 1) % RETURN_FLOW_EVERY == 0 &&
            (bench_failed(rill_event_record(c->b_done, c->b), "rill_event_record") ||
             bench_failed(rill_stream_wait_event(c->a, c->b_done), "rill_stream_wait_event")))
            return -1;
    }
    if (bench_failed(rill_stream_synchronize(c->b), "rill_stream_synchronize") ||
        bench_failed(rill_stream_synchronize(c->a), "rill_stream_synchronize"))
        return -1;
    *ns_per_pair = (double)(bench_now_ns() - t0) / (double)c->count;
    return 0;
}

/* What one m2 row compares, and the row of the difference of its medians. */
typedef struct tracked_row {
    const char *id, *name, *baseline_name;
    tracked_mode baseline_mode;
    const char *diff_id, *diff_name;
} tracked_row;

/* Measures the tracked loop c against the same loop in r->baseline_mode,
 * then adds the difference of the two medians as a row of its own. */
static int measure_tracked_row(bench *b, const tracked_row *r, tracked_ctx *c) {
    tracked_ctx base = *c;
    base.mode = r->baseline_mode;
    bench_row row = {
        .id = r->id, .name = r->name, .unit = "ns/pair", .baseline_name = r->baseline_name};
    if (bench_measure_row(b->report, &row, sample_tracked, c, sample_tracked, &base,
                          b->cfg.tracked_repeats) != 0)
        return -1;
    bench_row d = {.id = r->diff_id,
                   .name = r->diff_name,
                   .unit = "ns/pair",
                   .value = {row.value.median - row.baseline.median, NAN, NAN, 1},
                   .probe_before_ns = row.probe_before_ns,
                   .probe_after_ns = row.probe_after_ns};
    return bench_report_add(b->report, &d);
}

/* The pair's cost (the loop against its launches alone), then the
 * tracking's share (the loop against the same loop untracked). */
static const tracked_row tracked_rows[] = {
    {"m2", "loop: pair + kernel on B using the block", "same launches and waits, no pairs",
     LAUNCH_ONLY, "m2p", "  the pair, its use tracked (m2 - base)"},
    {"m2u", "the loop again, vs the loop untracked", "same loop, kernel declares no access",
     PAIR_UNTRACKED, "m2t", "  tracking alone (m2u - base)"},
};

static int figure_tracked(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report,
                         "m2. the pair with a kernel on another stream using each block "
                         "(baselines: the same launches without the pairs; the same loop, "
                         "the kernel declaring no access)");
    rill_stream *sa = NULL, *sb = NULL;
    rill_event *e = NULL;
    rill_kernel *k = NULL;
    int rc = -1;
    const rill_kernel_desc desc = {.name = "bench_use", .cpu = empty_kernel};
    if (bench_failed(rill_stream_create(b->dev, 0, &sa), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(sa, "bench-m2-alloc"), "rill_stream_set_name") ||
        bench_failed(rill_stream_create(b->dev, 0, &sb), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(sb, "bench-m2-use"), "rill_stream_set_name") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &e), "rill_event_create") ||
        bench_failed(rill_kernel_create(&desc, &k), "rill_kernel_create"))
        goto out;
    tracked_ctx tracked = {sa, sb, e, k, b->cfg.tracked_pairs, PAIR_TRACKED};
    tracked_ctx warm = tracked;
    warm.count = b->cfg.tracked_pairs / 10;
    double ignored;
    if (sample_tracked(&warm, &ignored) != 0)
        goto out;
    for (size_t i = 0; i < sizeof tracked_rows / sizeof tracked_rows[0]; i++)
        if (measure_tracked_row(b, &tracked_rows[i], &tracked) != 0)
            goto out;
    rc = 0;
out:
    if (k && bench_failed(rill_kernel_destroy(k), "rill_kernel_destroy"))
        rc = -1;
    if (e && bench_failed(rill_event_destroy(e), "rill_event_destroy"))
        rc = -1;
    if (sb && bench_failed(rill_stream_destroy(sb), "rill_stream_destroy"))
        rc = -1;
    if (sa && bench_failed(rill_stream_destroy(sa), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

/* ---- traces: m3 and m4 ---- */

/* A program's memory calls in order, on two streams (0 and 1) with two
 * events (0 and 1). A use is a 1-block empty kernel that declares an access
 * to the block, so the pool sees it as a real kernel's. */
typedef enum op_kind {
    OP_ALLOC,       /* id = rill_malloc_async(bytes, stream) */
    OP_FREE,        /* rill_free_async(id, stream) */
    OP_USE,         /* a kernel on stream that reads and writes id */
    OP_RECORD,      /* rill_event_record(event other, stream) */
    OP_WAIT_EVENT,  /* rill_stream_wait_event(stream, event other) */
    OP_WAIT_STREAM, /* rill_stream_wait_stream(stream, stream other) */
} op_kind;

typedef struct trace_op {
    op_kind kind;
    int stream;
    int other;
    int id;
    size_t bytes;
} trace_op;

typedef struct trace {
    trace_op *ops; /* owned */
    int num_ops, cap_ops;
    int num_ids;
    bool failed; /* out of memory while building */
} trace;

static void trace_push(trace *t, trace_op op) {
    if (t->num_ops == t->cap_ops) {
        int cap = t->cap_ops != 0 ? 2 * t->cap_ops : 1024;
        trace_op *ops = realloc(t->ops, (size_t)cap * sizeof *ops);
        if (ops == NULL) {
            t->failed = true;
            return;
        }
        t->ops = ops;
        t->cap_ops = cap;
    }
    t->ops[t->num_ops++] = op;
}

static int trace_alloc(trace *t, int stream, size_t bytes) {
    int id = t->num_ids++;
    trace_push(t, (trace_op){OP_ALLOC, stream, 0, id, bytes});
    return id;
}

static void trace_free(trace *t, int stream, int id) {
    trace_push(t, (trace_op){OP_FREE, stream, 0, id, 0});
}

static void trace_use(trace *t, int stream, int id) {
    trace_push(t, (trace_op){OP_USE, stream, 0, id, 0});
}

static void trace_sync(trace *t, op_kind kind, int stream, int other) {
    trace_push(t, (trace_op){kind, stream, other, -1, 0});
}

/* Peaks of one replay or simulation. */
typedef struct peaks {
    size_t reserved, allocated, requested;
} peaks;

typedef struct replay_ctx {
    const trace *tr;     /* borrowed */
    rill_stream *s[2];   /* borrowed */
    rill_event *e[2];    /* borrowed */
    rill_kernel *kernel; /* borrowed */
    void **ptrs;         /* owned: by id */
    size_t *bytes;       /* owned: by id */
    bool requested;      /* report reserved / requested instead of / allocated */
    peaks last;
} replay_ctx;

static int replay_op(replay_ctx *c, const trace_op *op, size_t *live_requested) {
    rill_stream *s = c->s[op->stream];
    switch (op->kind) {
    case OP_ALLOC:
        c->bytes[op->id] = op->bytes;
        *live_requested += op->bytes;
        return bench_failed(rill_malloc_async(op->bytes, s, &c->ptrs[op->id]), "rill_malloc_async");
    case OP_FREE:
        *live_requested -= c->bytes[op->id];
        return bench_failed(rill_free_async(c->ptrs[op->id], s), "rill_free_async");
    case OP_USE: {
        rill_access acc = {c->ptrs[op->id], c->bytes[op->id], RILL_READ_WRITE};
        rill_launch l = {
            .grid = {1, 1, 1}, .block = {1, 1, 1}, .accesses = &acc, .num_accesses = 1};
        return bench_failed(rill_launch_kernel(s, c->kernel, &l), "rill_launch_kernel");
    }
    case OP_RECORD:
        return bench_failed(rill_event_record(c->e[op->other], s), "rill_event_record");
    case OP_WAIT_EVENT:
        return bench_failed(rill_stream_wait_event(s, c->e[op->other]), "rill_stream_wait_event");
    case OP_WAIT_STREAM:
        return bench_failed(rill_stream_wait_stream(s, c->s[op->other]), "rill_stream_wait_stream");
    }
    return 1;
}

/* Replays the trace from an empty pool and returns its peak reserved bytes
 * over its peak allocated (or requested) bytes. The pool starts with
 * nothing reserved (all work done, the cache emptied) and the stats are
 * read after every allocation: reserved and allocated only grow inside an
 * allocation, and only this thread allocates, so the maxima are the run's
 * exact peaks. */
static int sample_replay(void *ctx, double *ratio) {
    replay_ctx *c = ctx;
    rill_mem_stats st;
    if (bench_failed(rill_device_synchronize(NULL), "rill_device_synchronize") ||
        bench_failed(rill_mem_empty_cache(NULL), "rill_mem_empty_cache") ||
        bench_failed(rill_mem_get_stats(NULL, &st), "rill_mem_get_stats"))
        return -1;
    if (st.reserved_bytes != 0 || st.allocated_bytes != 0) {
        fprintf(stderr, "bench: %zu bytes still reserved before a replay\n", st.reserved_bytes);
        return -1;
    }
    peaks pk = {0};
    size_t live = 0;
    for (int i = 0; i < c->tr->num_ops; i++) {
        const trace_op *op = &c->tr->ops[i];
        if (replay_op(c, op, &live) != 0)
            return -1;
        if (op->kind != OP_ALLOC)
            continue;
        if (bench_failed(rill_mem_get_stats(NULL, &st), "rill_mem_get_stats"))
            return -1;
        if (st.reserved_bytes > pk.reserved)
            pk.reserved = st.reserved_bytes;
        if (st.allocated_bytes > pk.allocated)
            pk.allocated = st.allocated_bytes;
        if (live > pk.requested)
            pk.requested = live;
    }
    if (bench_failed(rill_stream_synchronize(c->s[0]), "rill_stream_synchronize") ||
        bench_failed(rill_stream_synchronize(c->s[1]), "rill_stream_synchronize"))
        return -1;
    c->last = pk;
    *ratio = (double)pk.reserved / (double)(c->requested ? pk.requested : pk.allocated);
    return 0;
}

/* The baseline: a caching allocator that rounds each request up to a power
 * of two (at least 512 B), keeps one free list per power, and never splits,
 * merges or returns a block; frees take effect at once (no stream order).
 * Its "allocated" is the rounded bytes, as rill's is its rounded bytes. */
typedef struct sim_ctx {
    const trace *tr; /* borrowed */
    bool requested;  /* reserved / requested instead of / allocated */
    peaks last;
} sim_ctx;

static unsigned pow2_class(size_t bytes) {
    unsigned c = 9; /* 512 B */
    while (((size_t)1 << c) < bytes)
        c++;
    return c;
}

static int sample_pow2(void *ctx, double *ratio) {
    sim_ctx *c = ctx;
    size_t cached[64] = {0}; /* free blocks per class */
    size_t *sizes = calloc((size_t)c->tr->num_ids, sizeof *sizes);
    if (sizes == NULL) {
        fprintf(stderr, "bench: out of memory for the simulation\n");
        return -1;
    }
    peaks pk = {0};
    size_t reserved = 0, allocated = 0, requested = 0;
    for (int i = 0; i < c->tr->num_ops; i++) {
        const trace_op *op = &c->tr->ops[i];
        if (op->kind == OP_ALLOC) {
            unsigned k = pow2_class(op->bytes);
            if (cached[k] > 0)
                cached[k]--;
            else
                reserved += (size_t)1 << k;
            allocated += (size_t)1 << k;
            requested += op->bytes;
            sizes[op->id] = op->bytes;
            if (reserved > pk.reserved)
                pk.reserved = reserved;
            if (allocated > pk.allocated)
                pk.allocated = allocated;
            if (requested > pk.requested)
                pk.requested = requested;
        } else if (op->kind == OP_FREE) {
            unsigned k = pow2_class(sizes[op->id]);
            cached[k]++;
            allocated -= (size_t)1 << k;
            requested -= sizes[op->id];
        }
    }
    free(sizes);
    c->last = pk;
    *ratio = (double)pk.reserved / (double)(c->requested ? pk.requested : pk.allocated);
    return 0;
}

/* The streams, events and kernel a replay runs on. */
typedef struct trace_env {
    rill_stream *s0, *s1;
    rill_event *e0, *e1;
    rill_kernel *kernel;
} trace_env;

/* Two rows for a trace: peak reserved over peak allocated (each
 * allocator's own rounded bytes), then over the bytes the program asked
 * for, which also counts what rounding and unsplit remainders hold. */
static int trace_rows(bench *b, const trace *tr, const char *id, const char *name,
                      const char *id_req, const trace_env *env) {
    int rc = -1;
    replay_ctx c = {
        .tr = tr, .s = {env->s0, env->s1}, .e = {env->e0, env->e1}, .kernel = env->kernel};
    c.ptrs = calloc((size_t)tr->num_ids, sizeof *c.ptrs);
    c.bytes = calloc((size_t)tr->num_ids, sizeof *c.bytes);
    if (c.ptrs == NULL || c.bytes == NULL) {
        fprintf(stderr, "bench: out of memory for a replay\n");
        goto out;
    }
    sim_ctx sim = {.tr = tr};
    bench_row row = {.id = id,
                     .name = name,
                     .unit = "x",
                     .baseline_name = "power-of-two caching allocator (simulated)"};
    if (bench_measure_row(b->report, &row, sample_replay, &c, sample_pow2, &sim,
                          b->cfg.trace_repeats) != 0)
        goto out;
    c.requested = sim.requested = true;
    bench_row req = {.id = id_req,
                     .name = "  the same, over peak requested bytes",
                     .unit = "x",
                     .baseline_name = "power-of-two caching allocator (simulated)"};
    if (bench_measure_row(b->report, &req, sample_replay, &c, sample_pow2, &sim,
                          b->cfg.trace_repeats) != 0)
        goto out;
    printf("    %s: peak requested %.1f MiB, rill peak allocated %.1f MiB and reserved %.1f MiB "
           "(last repeat); power-of-two peak reserved %.1f MiB\n",
           id, (double)c.last.requested / MiB, (double)c.last.allocated / MiB,
           (double)c.last.reserved / MiB, (double)sim.last.reserved / MiB);
    rc = 0;
out:
    free(c.bytes);
    free(c.ptrs);
    return rc;
}

/* ---- m3. two streams that free what the other allocated ---- */

enum { EXCHANGE_MAX_DEPTH = 32 };

/* Each iteration, stream A and stream B each allocate a block of a size
 * from the mix (with a few hundred bytes of jitter), write it (a use), and
 * record an event; each waits for the other's event and reads the other's
 * block; each frees, in its own stream order, the block of the other that
 * it read depth - 1 iterations before, so depth blocks per stream are live. */
static trace make_exchange_trace(long iterations, int depth) {
    static const size_t mix[] = {256,       3 * KiB,           24 * KiB, 100 * KiB,
                                 700 * KiB, 1 * MiB + 4 * KiB, 3 * MiB,  4 * MiB};
    const int n = (int)(sizeof mix / sizeof mix[0]);
    trace t = {0};
    int pending[2][EXCHANGE_MAX_DEPTH];
    for (long i = 0; i < iterations; i++) {
        for (int s = 0; s < 2; s++) {
            size_t bytes = mix[(i * (s + 3) + s) % n] + (size_t)(i % 5) * 160;
            int id = trace_alloc(&t, s, bytes);
            trace_use(&t, s, id);
            trace_sync(&t, OP_RECORD, s, s);
            pending[s][i % depth] = id;
        }
        for (int s = 0; s < 2; s++) {
            int o = 1 - s;
            trace_sync(&t, OP_WAIT_EVENT, s, o);
            trace_use(&t, s, pending[o][i % depth]);
            if (i >= depth - 1)
                trace_free(&t, s, pending[o][(i + 1) % depth]);
        }
    }
    for (long i = iterations - (depth - 1); i < iterations; i++) {
        if (i < 0)
            continue;
        for (int s = 0; s < 2; s++)
            trace_free(&t, s, pending[1 - s][i % depth]);
    }
    return t;
}

/* ---- m4. a transformer training trace ---- */

typedef struct model {
    size_t batch, seq, hidden, heads, ffn, vocab;
    int layers;
} model;

/* A GPT-style decoder: batch 8, sequence 512, hidden 1024, 16 heads, MLP
 * 4096, vocabulary 8192, 12 layers, float32. */
static const model gpt = {8, 512, 1024, 16, 4096, 8192, 12};

typedef struct layer_saved {
    int x, ln1, ln1_stats, qkv, probs, ctx, res1, ln2, ln2_stats, up, act;
} layer_saved;

typedef struct param_grads {
    int ids[64];
    int count;
} param_grads;

/* A gradient buffer: with a side stream, a kernel there uses it (an
 * all-reduce, say) after waiting for the main stream. */
static void grad(trace *t, param_grads *g, size_t bytes, bool side) {
    int id = trace_alloc(t, 0, bytes);
    if (g->count < (int)(sizeof g->ids / sizeof g->ids[0]))
        g->ids[g->count++] = id;
    if (side) {
        trace_sync(t, OP_WAIT_STREAM, 1, 0);
        trace_use(t, 1, id);
    }
}

static void free_grads(trace *t, param_grads *g) {
    for (int i = 0; i < g->count; i++)
        trace_free(t, 0, g->ids[i]);
    g->count = 0;
}

/* Forward of one layer: allocates what it keeps for backward and frees its
 * temporaries; returns the layer's output. */
static int layer_forward(trace *t, const model *m, int x, layer_saved *sv) {
    const size_t f = sizeof(float), tokens = m->batch * m->seq;
    const size_t act = tokens * m->hidden * f, stats = 2 * tokens * f;
    const size_t scores = m->batch * m->heads * m->seq * m->seq * f;
    sv->x = x;
    sv->ln1 = trace_alloc(t, 0, act);
    sv->ln1_stats = trace_alloc(t, 0, stats);
    sv->qkv = trace_alloc(t, 0, 3 * act);
    int raw = trace_alloc(t, 0, scores);   /* q k^T, scaled and masked */
    sv->probs = trace_alloc(t, 0, scores); /* softmax */
    trace_free(t, 0, raw);
    sv->ctx = trace_alloc(t, 0, act);
    int proj = trace_alloc(t, 0, act);
    sv->res1 = trace_alloc(t, 0, act);
    trace_free(t, 0, proj);
    sv->ln2 = trace_alloc(t, 0, act);
    sv->ln2_stats = trace_alloc(t, 0, stats);
    sv->up = trace_alloc(t, 0, tokens * m->ffn * f);
    sv->act = trace_alloc(t, 0, tokens * m->ffn * f); /* GELU */
    int down = trace_alloc(t, 0, act);
    int out = trace_alloc(t, 0, act); /* residual */
    trace_free(t, 0, down);
    return out;
}

/* Backward of one layer, in reverse: each step allocates its gradients and
 * frees what it consumed. Takes dy (freed) and returns dx. */
static int layer_backward(trace *t, const model *m, const layer_saved *sv, int dy, param_grads *g,
                          bool side) {
    const size_t f = sizeof(float), tokens = m->batch * m->seq;
    const size_t act = tokens * m->hidden * f, h = m->hidden;
    const size_t scores = m->batch * m->heads * m->seq * m->seq * f;
    grad(t, g, m->ffn * h * f, side); /* W_down */
    grad(t, g, h * f, side);          /* b_down */
    int d_act = trace_alloc(t, 0, tokens * m->ffn * f);
    trace_free(t, 0, sv->act);
    int d_up = trace_alloc(t, 0, tokens * m->ffn * f); /* GELU backward */
    trace_free(t, 0, d_act);
    grad(t, g, h * m->ffn * f, side); /* W_up */
    grad(t, g, m->ffn * f, side);     /* b_up */
    trace_free(t, 0, sv->up);
    int d_ln2 = trace_alloc(t, 0, act);
    trace_free(t, 0, d_up);
    trace_free(t, 0, sv->ln2);
    int d_res1 = trace_alloc(t, 0, act); /* LayerNorm backward, plus dy */
    grad(t, g, h * f, side);
    grad(t, g, h * f, side);
    trace_free(t, 0, d_ln2);
    trace_free(t, 0, sv->ln2_stats);
    trace_free(t, 0, sv->res1);
    trace_free(t, 0, dy);
    grad(t, g, h * h * f, side); /* W_proj */
    grad(t, g, h * f, side);     /* b_proj */
    int d_ctx = trace_alloc(t, 0, act);
    trace_free(t, 0, sv->ctx);
    int d_probs = trace_alloc(t, 0, scores);
    int d_raw = trace_alloc(t, 0, scores); /* softmax backward */
    trace_free(t, 0, d_probs);
    trace_free(t, 0, sv->probs);
    int d_qkv = trace_alloc(t, 0, 3 * act);
    trace_free(t, 0, d_raw);
    trace_free(t, 0, d_ctx);
    grad(t, g, 3 * h * h * f, side); /* W_qkv */
    grad(t, g, 3 * h * f, side);     /* b_qkv */
    trace_free(t, 0, sv->qkv);
    int d_ln1 = trace_alloc(t, 0, act);
    trace_free(t, 0, d_qkv);
    trace_free(t, 0, sv->ln1);
    int dx = trace_alloc(t, 0, act); /* LayerNorm backward, plus d_res1 */
    grad(t, g, h * f, side);
    grad(t, g, h * f, side);
    trace_free(t, 0, d_ln1);
    trace_free(t, 0, sv->ln1_stats);
    trace_free(t, 0, d_res1);
    trace_free(t, 0, sv->x);
    return dx;
}

/* Parameters and Adam's two moments stay allocated for the whole trace;
 * each step runs forward, the loss, backward (gradients of a layer are
 * freed after the optimizer step, as zero_grad(set_to_none) does), and
 * the step. With side, gradients are used on stream 1 and the main stream
 * waits for it before the step. */
static trace make_transformer_trace(const model *m, int steps, bool side) {
    const size_t f = sizeof(float), h = m->hidden, tokens = m->batch * m->seq;
    const size_t act = tokens * h * f;
    trace t = {0};
    int params[16 * 64 + 8], num_params = 0;
    size_t param_bytes[] = {3 * h * h * f,  3 * h * f, h * h * f, h * f, h * m->ffn * f, m->ffn * f,
                            m->ffn * h * f, h * f,     h * f,     h * f, h * f,          h * f};
    int per_layer = (int)(sizeof param_bytes / sizeof param_bytes[0]);
    params[num_params++] = trace_alloc(&t, 0, m->vocab * h * f); /* embedding, tied head */
    for (int l = 0; l < m->layers; l++)
        for (int i = 0; i < per_layer; i++)
            params[num_params++] = trace_alloc(&t, 0, param_bytes[i]);
    int moments[2 * (16 * 64 + 8)], num_moments = 0;
    layer_saved saved[64];
    param_grads g[64 + 1] = {0};
    for (int step = 0; step < steps; step++) {
        int tokens_id = trace_alloc(&t, 0, tokens * sizeof(int32_t));
        int x = trace_alloc(&t, 0, act); /* embedding lookup */
        for (int l = 0; l < m->layers; l++)
            x = layer_forward(&t, m, x, &saved[l]);
        int lnf = trace_alloc(&t, 0, act);
        int lnf_stats = trace_alloc(&t, 0, 2 * tokens * f);
        int logits = trace_alloc(&t, 0, tokens * m->vocab * f);
        int loss = trace_alloc(&t, 0, f);
        int d_logits = trace_alloc(&t, 0, tokens * m->vocab * f);
        trace_free(&t, 0, logits);
        trace_free(&t, 0, loss);
        grad(&t, &g[m->layers], m->vocab * h * f, side); /* tied embedding */
        int d_lnf = trace_alloc(&t, 0, act);
        trace_free(&t, 0, d_logits);
        int dy = trace_alloc(&t, 0, act);
        trace_free(&t, 0, d_lnf);
        trace_free(&t, 0, lnf);
        trace_free(&t, 0, lnf_stats);
        trace_free(&t, 0, x);
        for (int l = m->layers - 1; l >= 0; l--)
            dy = layer_backward(&t, m, &saved[l], dy, &g[l], side);
        trace_free(&t, 0, dy);
        trace_free(&t, 0, tokens_id);
        if (side)
            trace_sync(&t, OP_WAIT_STREAM, 0, 1);
        if (step == 0) {
            /* Adam's moments, created by the first step. */
            for (int i = 0; i < num_params; i++) {
                size_t bytes = i == 0 ? m->vocab * h * f : param_bytes[(i - 1) % per_layer];
                moments[num_moments++] = trace_alloc(&t, 0, bytes);
                moments[num_moments++] = trace_alloc(&t, 0, bytes);
            }
        }
        for (int l = 0; l <= m->layers; l++)
            free_grads(&t, &g[l]);
    }
    for (int i = 0; i < num_moments; i++)
        trace_free(&t, 0, moments[i]);
    for (int i = 0; i < num_params; i++)
        trace_free(&t, 0, params[i]);
    return t;
}

/* ---- the ratio figures ---- */

static int trace_env_create(bench *b, trace_env *env, const char *n0, const char *n1) {
    const rill_kernel_desc desc = {.name = "bench_trace_use", .cpu = empty_kernel};
    if (bench_failed(rill_stream_create(b->dev, 0, &env->s0), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(env->s0, n0), "rill_stream_set_name") ||
        bench_failed(rill_stream_create(b->dev, 0, &env->s1), "rill_stream_create") ||
        bench_failed(rill_stream_set_name(env->s1, n1), "rill_stream_set_name") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &env->e0), "rill_event_create") ||
        bench_failed(rill_event_create(RILL_EVENT_DEFAULT, &env->e1), "rill_event_create") ||
        bench_failed(rill_kernel_create(&desc, &env->kernel), "rill_kernel_create"))
        return -1;
    return 0;
}

static int trace_env_destroy(trace_env *env) {
    int rc = 0;
    if (env->kernel && bench_failed(rill_kernel_destroy(env->kernel), "rill_kernel_destroy"))
        rc = -1;
    if (env->e1 && bench_failed(rill_event_destroy(env->e1), "rill_event_destroy"))
        rc = -1;
    if (env->e0 && bench_failed(rill_event_destroy(env->e0), "rill_event_destroy"))
        rc = -1;
    if (env->s1 && bench_failed(rill_stream_destroy(env->s1), "rill_stream_destroy"))
        rc = -1;
    if (env->s0 && bench_failed(rill_stream_destroy(env->s0), "rill_stream_destroy"))
        rc = -1;
    return rc;
}

static int figure_exchange(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report,
                         "m3. two streams freeing each other's blocks, mixed sizes: peak "
                         "reserved / peak allocated (baseline: power-of-two caching allocator)");
    trace_env env = {0};
    /* 3 blocks in flight per stream (about 7 MiB live), where one block is
     * up to half the live set, then 32 (about 50 MiB), where holes between
     * live blocks of slightly different sizes add up. */
    trace small = make_exchange_trace(b->cfg.exchange_iterations, 3);
    trace deep = make_exchange_trace(b->cfg.exchange_iterations, EXCHANGE_MAX_DEPTH);
    int rc = -1;
    if (small.failed || deep.failed) {
        fprintf(stderr, "bench: out of memory for the m3 traces\n");
        goto out;
    }
    if (trace_env_create(b, &env, "bench-m3-a", "bench-m3-b") != 0 ||
        trace_rows(b, &small, "m3", "A, B free each other's: 3 in flight", "m3r", &env) != 0 ||
        trace_rows(b, &deep, "m3d", "A, B free each other's: 32 in flight", "m3dr", &env) != 0)
        goto out;
    rc = 0;
out:
    if (trace_env_destroy(&env) != 0)
        rc = -1;
    free(deep.ops);
    free(small.ops);
    return rc;
}

static int figure_transformer(void *ctx) {
    bench *b = ctx;
    bench_report_section(b->report,
                         "m4. transformer training trace (12 layers, batch 8, seq 512, hidden "
                         "1024, fp32): peak reserved / peak allocated");
    trace_env env = {0};
    trace one = make_transformer_trace(&gpt, b->cfg.trace_steps, false);
    trace two = make_transformer_trace(&gpt, b->cfg.trace_steps, true);
    int rc = -1;
    if (one.failed || two.failed) {
        fprintf(stderr, "bench: out of memory for the m4 traces\n");
        goto out;
    }
    if (trace_env_create(b, &env, "bench-m4-main", "bench-m4-side") != 0 ||
        trace_rows(b, &one, "m4", "one stream", "m4r", &env) != 0 ||
        trace_rows(b, &two, "m4s", "gradients also used on a side stream", "m4sr", &env) != 0)
        goto out;
    rc = 0;
out:
    if (trace_env_destroy(&env) != 0)
        rc = -1;
    free(two.ops);
    free(one.ops);
    return rc;
}

/* ---- main ---- */

static int setup(void *ctx, bool quick, bench_report *report, bench_cli_device *device) {
    bench *b = ctx;
    b->cfg = quick ? quick_config : full_config;
    b->report = report;
    rill_device_info info;
    if (bench_failed(rill_device_get_by_kind(RILL_DEVICE_CPU, 0, &b->dev),
                     "rill_device_get_by_kind") ||
        bench_failed(rill_device_get_info(b->dev, &info), "rill_device_get_info") ||
        bench_failed(rill_set_device(b->dev), "rill_set_device"))
        return -1;
    snprintf(device->name, sizeof(device->name), "%.*s", (int)sizeof(info.name), info.name);
    device->compute_units = info.compute_units;
    return 0;
}

static const bench_cli_figure figures[] = {
    {'1', figure_pair},
    {'2', figure_tracked},
    {'3', figure_exchange},
    {'4', figure_transformer},
};

static const bench_cli cli = {
    .program = "bench_memory",
    .subject = "rill",
    .figure_prefix = "m",
    .quick_help = "fewer pairs, iterations and repeats (a CI smoke run, a few s)",
    .figures_help = "                1 pair on one stream     2 pair with a tracked "
                    "cross-stream use\n"
                    "                3 two streams freeing each other's blocks\n"
                    "                4 transformer trace\n",
    .figures = figures,
    .num_figures = sizeof(figures) / sizeof(figures[0]),
    .setup = setup,
    .teardown = bench_rill_shutdown,
};

int main(int argc, char **argv) {
    bench b = {0};
    return bench_cli_main(&cli, &b, argc, argv);
}
