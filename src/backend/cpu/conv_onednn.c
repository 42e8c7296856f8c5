/* SPDX-License-Identifier: MIT */
/* conv2d and its gradients on oneDNN (Intel's deep-learning primitives,
 * which PyTorch's cpu device runs its convolutions on), where rill was
 * built with it (RILL_HAVE_ONEDNN). Layer: CPU backend, beside the op
 * bodies, which call it first.
 *
 * A block's slice is one convolution of oneDNN's on rill's layout: plain
 * NCHW tensors, described by their strides where the slice takes part of
 * the channels. oneDNN picks its own layouts (channels in blocks of 16 for
 * AVX-512); the slice's operands are reordered into them in a per-thread
 * buffer and the result reordered back. Each slice runs on the calling
 * worker alone: oneDNN's OpenMP team is cut to one thread while it runs, so
 * the grid's blocks are the parallelism, as for BLIS. oneDNN keeps the
 * primitives it compiled in its own cache, so a launch of a known shape
 * only looks them up (a few microseconds). Results are a function of the
 * inputs and the grid. */
#include "backend/cpu/conv_onednn.h"

#if RILL_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/onednn.h"
#include "platform/thread.h"

enum { CHANNEL_BLOCK = 16 }; /* slices of channels are multiples of this */

/* A worker keeps its buffer between launches up to this size; a larger
 * one is freed after its launch. */
#define BUFFER_KEEP_BYTES ((size_t)64 << 20)

/* A worker's oneDNN stream and the buffer its reorders and primitives'
 * scratch use, freed when the thread exits (a buffer over
 * BUFFER_KEEP_BYTES after each launch). */
typedef struct thread_state {
    dnnl_stream_t stream;
    void *buffer;
    size_t bytes;
} thread_state;

static void thread_state_free(void *v) {
    thread_state *t = v;
    dnnl_stream_destroy(t->stream);
    free(t->buffer);
    free(t);
}

static rill__exit_key state_key = {.fn = thread_state_free};
static _Thread_local thread_state *tls_state;
static _Atomic(dnnl_engine_t) engine;
/* The process's CPU engine, made by the first caller. */
static dnnl_engine_t get_engine(void) {
    dnnl_engine_t e = atomic_load_explicit(&engine, memory_order_acquire);
    if (e != NULL)
        return e;
    if (dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success)
        return NULL;
    dnnl_engine_t expected = NULL;
    if (!atomic_compare_exchange_strong(&engine, &expected, e)) {
        dnnl_engine_destroy(e);
        return expected;
    }
    return e;
}

static thread_state *get_state(dnnl_engine_t eng) {
    if (tls_state != NULL)
        return tls_state;
    thread_state *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (dnnl_stream_create(&t->stream, eng, dnnl_stream_default_flags) != dnnl_success) {
        free(t);
        return NULL;
    }
    rill__exit_key_set(&state_key, t);
    tls_state = t;
    return t;
}

/* The thread's buffer, at least bytes long (64-byte aligned), or NULL. */
static void *state_buffer(thread_state *t, size_t bytes) {
    if (bytes <= t->bytes)
        return t->buffer;
    void *b = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (b == NULL)
        return NULL;
    free(t->buffer);
    t->buffer = b;
    t->bytes = bytes;
    return b;
}

/* ---- one convolution ---- */

enum conv_kind { FORWARD, BACKWARD_DATA, BACKWARD_WEIGHTS };

/* One operand as rill holds it: dims (N or K first) and strides, in floats. */
typedef struct operand {
    float *data;
    dnnl_dims_t dims, strides;
} operand;

/* A slice: src [n, c, h, w], weights [k, c, r, s], dst [n, k, oh, ow];
 * for BACKWARD_DATA src is the gradient written, for BACKWARD_WEIGHTS the
 * weights are. */
typedef struct conv_slice {
    enum conv_kind kind;
    operand src, wei, dst;
    dnnl_dims_t strides, dilates, pad_l, pad_r;
} conv_slice;

/* Plain [d0, d1, d2, d3] with channel stride cs, first-dimension stride fs. */
static operand plain(float *data, size_t d0, size_t d1, size_t d2, size_t d3, size_t fs,
                     size_t cs) {
    return (operand){data,
                     {(dnnl_dim_t)d0, (dnnl_dim_t)d1, (dnnl_dim_t)d2, (dnnl_dim_t)d3},
                     {(dnnl_dim_t)fs, (dnnl_dim_t)cs, (dnnl_dim_t)d3, 1}};
}

/* What a run holds, destroyed by run_end. */
typedef struct run_state {
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t hint, pd, rpd[3];
    dnnl_primitive_t conv, reorder[3];
    dnnl_memory_t user[3], inner[3], scratch;
} run_state;

static void run_end(run_state *r) {
    for (int i = 0; i < 3; i++) {
        dnnl_primitive_destroy(r->reorder[i]);
        dnnl_primitive_desc_destroy(r->rpd[i]);
        dnnl_memory_destroy(r->user[i]);
        dnnl_memory_destroy(r->inner[i]);
    }
    dnnl_memory_destroy(r->scratch);
    dnnl_primitive_destroy(r->conv);
    dnnl_primitive_desc_destroy(r->pd);
    dnnl_primitive_desc_destroy(r->hint);
    dnnl_primitive_attr_destroy(r->attr);
}

/* Returns call's status from the function unless it succeeded. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return st_;                                                                            \
    } while (0)

/* The convolution's descriptor on mds (each format `any`, or not). */
static dnnl_status_t conv_desc(const conv_slice *s, enum conv_kind kind,
                               const dnnl_memory_desc_t md[3], dnnl_convolution_desc_t *d) {
    dnnl_alg_kind_t alg = dnnl_convolution_direct;
    switch (kind) {
    case FORWARD:
        return dnnl_dilated_convolution_forward_desc_init(d, dnnl_forward_training, alg, &md[0],
                                                          &md[1], NULL, &md[2], s->strides,
                                                          s->dilates, s->pad_l, s->pad_r);
    case BACKWARD_DATA:
        return dnnl_dilated_convolution_backward_data_desc_init(
            d, alg, &md[0], &md[1], &md[2], s->strides, s->dilates, s->pad_l, s->pad_r);
    case BACKWARD_WEIGHTS:
        return dnnl_dilated_convolution_backward_weights_desc_init(
            d, alg, &md[0], &md[1], NULL, &md[2], s->strides, s->dilates, s->pad_l, s->pad_r);
    }
    return dnnl_invalid_arguments;
}

/* The operand the primitive writes: the src gradient, the weight
 * gradient, or dst. */
static int written(enum conv_kind kind) {
    return kind == BACKWARD_DATA ? 0 : kind == BACKWARD_WEIGHTS ? 1 : 2;
}

static dnnl_status_t run(const conv_slice *s, dnnl_engine_t eng, thread_state *t, run_state *r) {
    const operand *ops[3] = {&s->src, &s->wei, &s->dst};
    static const int args[3][3] = {
        [FORWARD] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
        [BACKWARD_DATA] = {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
        [BACKWARD_WEIGHTS] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST},
    };
    dnnl_memory_desc_t user[3], any[3];
    for (int i = 0; i < 3; i++) {
        TRY(dnnl_memory_desc_init_by_strides(&user[i], 4, ops[i]->dims, dnnl_f32, ops[i]->strides));
        TRY(dnnl_memory_desc_init_by_tag(&any[i], 4, ops[i]->dims, dnnl_f32, dnnl_format_tag_any));
    }
    TRY(dnnl_primitive_attr_create(&r->attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(r->attr, dnnl_scratchpad_mode_user));
    dnnl_convolution_desc_t d;
    if (s->kind != FORWARD) { /* the gradients take the forward's choices as a hint */
        TRY(conv_desc(s, FORWARD, any, &d));
        TRY(dnnl_primitive_desc_create(&r->hint, &d, NULL, eng, NULL));
    }
    TRY(conv_desc(s, s->kind, any, &d));
    TRY(dnnl_primitive_desc_create(&r->pd, &d, r->attr, eng, r->hint));
    TRY(dnnl_primitive_create(&r->conv, r->pd));

    /* Where each operand goes: as it is, or reordered through the buffer. */
    const dnnl_memory_desc_t *inner[3];
    size_t offset[3], bytes = 0;
    for (int i = 0; i < 3; i++) {
        inner[i] = dnnl_primitive_desc_query_md(r->pd, dnnl_query_exec_arg_md, args[s->kind][i]);
        if (inner[i] == NULL)
            return dnnl_runtime_error;
        offset[i] = SIZE_MAX;
        if (!dnnl_memory_desc_equal(inner[i], &user[i])) {
            offset[i] = bytes;
            bytes += (dnnl_memory_desc_get_size(inner[i]) + 63) / 64 * 64;
        }
    }
    const dnnl_memory_desc_t *scratch_md =
        dnnl_primitive_desc_query_md(r->pd, dnnl_query_scratchpad_md, 0);
    size_t scratch_offset = bytes;
    bytes += scratch_md != NULL ? dnnl_memory_desc_get_size(scratch_md) : 0;
    unsigned char *buffer = state_buffer(t, bytes);
    if (bytes > 0 && buffer == NULL)
        return dnnl_out_of_memory;

    dnnl_exec_arg_t exec[4];
    for (int i = 0; i < 3; i++) {
        TRY(dnnl_memory_create(&r->user[i], &user[i], eng, ops[i]->data));
        exec[i].arg = args[s->kind][i];
        exec[i].memory = r->user[i];
        if (offset[i] == SIZE_MAX)
            continue;
        TRY(dnnl_memory_create(&r->inner[i], inner[i], eng, buffer + offset[i]));
        exec[i].memory = r->inner[i];
        if (i == written(s->kind))
            TRY(dnnl_reorder_primitive_desc_create(&r->rpd[i], inner[i], eng, &user[i], eng, NULL));
        else
            TRY(dnnl_reorder_primitive_desc_create(&r->rpd[i], &user[i], eng, inner[i], eng, NULL));
        TRY(dnnl_primitive_create(&r->reorder[i], r->rpd[i]));
    }
    int nexec = 3;
    if (scratch_md != NULL && dnnl_memory_desc_get_size(scratch_md) > 0) {
        TRY(dnnl_memory_create(&r->scratch, scratch_md, eng, buffer + scratch_offset));
        exec[nexec++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, r->scratch};
    }

    for (int i = 0; i < 3; i++) {
        if (r->reorder[i] == NULL || i == written(s->kind))
            continue;
        dnnl_exec_arg_t from_to[2] = {{DNNL_ARG_FROM, r->user[i]}, {DNNL_ARG_TO, r->inner[i]}};
        TRY(dnnl_primitive_execute(r->reorder[i], t->stream, 2, from_to));
    }
    TRY(dnnl_primitive_execute(r->conv, t->stream, nexec, exec));
    int w = written(s->kind);
    if (r->reorder[w] != NULL) {
        dnnl_exec_arg_t from_to[2] = {{DNNL_ARG_FROM, r->inner[w]}, {DNNL_ARG_TO, r->user[w]}};
        TRY(dnnl_primitive_execute(r->reorder[w], t->stream, 2, from_to));
    }
    return dnnl_stream_wait(t->stream);
}

/* Runs slice s on the calling thread alone; on failure, fails ctx's
 * launch, naming fn and oneDNN's status. */
static void run_slice(const rill_block_ctx *ctx, const char *fn, const conv_slice *s) {
    dnnl_engine_t eng = get_engine();
    thread_state *t = eng != NULL ? get_state(eng) : NULL;
    dnnl_status_t st = t != NULL ? dnnl_success : dnnl_out_of_memory;
    if (t != NULL) {
        int team = rill__cpu_onednn_solo();
        run_state r;
        memset(&r, 0, sizeof r);
        st = run(s, eng, t, &r);
        run_end(&r);
        if (t->bytes > BUFFER_KEEP_BYTES) {
            free(t->buffer);
            t->buffer = NULL;
            t->bytes = 0;
        }
        rill__cpu_onednn_team(team);
    }
    if (st == dnnl_success)
        return;
    char message[200];
    snprintf(message, sizeof message,
             "%s: oneDNN failed (%s)%s; set RILL_CPU_ONEDNN=0 to run rill's own convolutions", fn,
             dnnl_status2str(st),
             st == dnnl_out_of_memory ? ": the host is out of memory for its buffers" : "");
    rill__kernel_fail(ctx, message);
}

/* ---- the slices of a launch ---- */

/* [*begin, *end): part `part` of `parts` equal runs of count. */
static void share(size_t count, size_t parts, size_t part, size_t *begin, size_t *end) {
    size_t per = (count + parts - 1) / parts;
    *begin = part * per < count ? part * per : count;
    *end = count - *begin > per ? *begin + per : count;
}

/* Block ctx's images [*i0, *i1) and channels [*c0, *c1) of `channels`:
 * whole images when there are at least as many as blocks; otherwise
 * blocks / n parts of each image's channels, in multiples of
 * CHANNEL_BLOCK. */
static void split(const rill_block_ctx *ctx, size_t n, size_t channels, size_t *i0, size_t *i1,
                  size_t *c0, size_t *c1) {
    size_t blocks = ctx->grid_dim.x, b = ctx->block_idx.x;
    if (n >= blocks) {
        share(n, blocks, b, i0, i1);
        *c0 = 0, *c1 = channels;
        return;
    }
    size_t parts = blocks / n, chunks = (channels + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK;
    if (b >= n * parts) {
        *i0 = *i1 = *c0 = *c1 = 0;
        return;
    }
    *i0 = b / parts, *i1 = *i0 + 1;
    share(chunks, parts, b % parts, c0, c1);
    *c0 = *c0 * CHANNEL_BLOCK < channels ? *c0 * CHANNEL_BLOCK : channels;
    *c1 = *c1 * CHANNEL_BLOCK < channels ? *c1 * CHANNEL_BLOCK : channels;
}

static void geometry(conv_slice *s, size_t stride_h, size_t stride_w, size_t dil_h, size_t dil_w,
                     size_t pad_h, size_t pad_w) {
    s->strides[0] = (dnnl_dim_t)stride_h, s->strides[1] = (dnnl_dim_t)stride_w;
    s->dilates[0] = (dnnl_dim_t)dil_h - 1, s->dilates[1] = (dnnl_dim_t)dil_w - 1;
    /* Right padding as the left: the output sizes rill computed (floor of
     * the division) are what oneDNN computes from them. */
    s->pad_l[0] = s->pad_r[0] = (dnnl_dim_t)pad_h;
    s->pad_l[1] = s->pad_r[1] = (dnnl_dim_t)pad_w;
}

bool rill__cpu_onednn_conv2d(const rill_block_ctx *ctx, const rill__op_conv2d_ex_args *p) {
    if (p->groups != 1 || !rill__cpu_onednn_enabled())
        return false;
    size_t i0, i1, k0, k1;
    split(ctx, p->n, p->k, &i0, &i1, &k0, &k1);
    if (i0 == i1 || k0 == k1)
        return true; /* nothing for this block */
    size_t hw = p->h * p->w, ohw = p->oh * p->ow, crs = p->c * p->r * p->s;
    conv_slice s = {.kind = FORWARD};
    s.src = plain((float *)p->in + i0 * p->c * hw, i1 - i0, p->c, p->h, p->w, p->c * hw, hw);
    s.wei = plain((float *)p->weight + k0 * crs, k1 - k0, p->c, p->r, p->s, crs, p->r * p->s);
    s.dst = plain(p->out + (i0 * p->k + k0) * ohw, i1 - i0, k1 - k0, p->oh, p->ow, p->k * ohw, ohw);
    geometry(&s, p->stride_h, p->stride_w, p->dil_h, p->dil_w, p->pad_h, p->pad_w);
    run_slice(ctx, "conv2d", &s);
    return true;
}

bool rill__cpu_onednn_conv2d_backward_data(const rill_block_ctx *ctx,
                                           const rill__op_conv2d_backward_args *p) {
    if (p->conv_groups != 1 || !rill__cpu_onednn_enabled())
        return false;
    size_t i0, i1, c0, c1;
    split(ctx, p->n, p->c, &i0, &i1, &c0, &c1);
    if (i0 == i1 || c0 == c1)
        return true;
    size_t hw = p->h * p->w, ohw = p->oh * p->ow, rs = p->r * p->s;
    conv_slice s = {.kind = BACKWARD_DATA};
    s.src = plain(p->grad_in + (i0 * p->c + c0) * hw, i1 - i0, c1 - c0, p->h, p->w, p->c * hw, hw);
    s.wei = plain((float *)p->weight + c0 * rs, p->k, c1 - c0, p->r, p->s, p->c * rs, rs);
    s.dst =
        plain((float *)p->grad_out + i0 * p->k * ohw, i1 - i0, p->k, p->oh, p->ow, p->k * ohw, ohw);
    geometry(&s, p->stride_h, p->stride_w, p->dil_h, p->dil_w, p->pad_h, p->pad_w);
    run_slice(ctx, "conv2d's data gradient", &s);
    return true;
}

bool rill__cpu_onednn_conv2d_backward_filter(const rill_block_ctx *ctx,
                                             const rill__op_conv2d_backward_args *p) {
    if (p->conv_groups != 1 || !rill__cpu_onednn_enabled())
        return false;
    size_t chunks = (p->k + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK, k0, k1;
    share(chunks, ctx->grid_dim.x, ctx->block_idx.x, &k0, &k1);
    k0 *= CHANNEL_BLOCK;
    k1 = k1 * CHANNEL_BLOCK < p->k ? k1 * CHANNEL_BLOCK : p->k;
    if (k0 >= k1)
        return true;
    size_t hw = p->h * p->w, ohw = p->oh * p->ow, crs = p->c * p->r * p->s;
    conv_slice s = {.kind = BACKWARD_WEIGHTS};
    s.src = plain((float *)p->in, p->n, p->c, p->h, p->w, p->c * hw, hw);
    s.wei = plain(p->grad_weight + k0 * crs, k1 - k0, p->c, p->r, p->s, crs, p->r * p->s);
    s.dst = plain((float *)p->grad_out + k0 * ohw, p->n, k1 - k0, p->oh, p->ow, p->k * ohw, ohw);
    geometry(&s, p->stride_h, p->stride_w, p->dil_h, p->dil_w, p->pad_h, p->pad_w);
    run_slice(ctx, "conv2d's weight gradient", &s);
    return true;
}

#else

bool rill__cpu_onednn_conv2d(const rill_block_ctx *ctx, const rill__op_conv2d_ex_args *p) {
    (void)ctx, (void)p;
    return false;
}

bool rill__cpu_onednn_conv2d_backward_data(const rill_block_ctx *ctx,
                                           const rill__op_conv2d_backward_args *p) {
    (void)ctx, (void)p;
    return false;
}

bool rill__cpu_onednn_conv2d_backward_filter(const rill_block_ctx *ctx,
                                             const rill__op_conv2d_backward_args *p) {
    (void)ctx, (void)p;
    return false;
}

#endif
