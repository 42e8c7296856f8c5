/* SPDX-License-Identifier: MIT */
/*
 * The element-wise ops of the op API. When a, b and out are contiguous and
 * of one shape, rill's built-in ops do the work (on any device; division
 * of float16, which rill has no op for, excepted). Otherwise
 * (broadcasting, or strided views) a kernel of this layer does: made with
 * rill_kernel_create, launched with the three spans it touches declared,
 * and destroyed at once (rill releases it when its launches are done). Its
 * blocks each take CHUNK consecutive elements of out, in row-major order,
 * and walk the operands' strides; a broadcast dimension has stride 0.
 */
#include "elementwise.h"

#include <string.h>

#include "half.h"

enum { CHUNK = RILL_ACL_EW_CHUNK };

struct ew_args {
    int op;
    int is_half;
    float alpha;
    int ndim;
    int64_t dims[RILL_ACL_MAX_DIMS];
    int64_t so[RILL_ACL_MAX_DIMS], sa[RILL_ACL_MAX_DIMS], sb[RILL_ACL_MAX_DIMS];
    char *o;
    const char *a, *b;
    uint64_t n;
};

static float load(const char *base, int64_t i, int is_half) {
    if (is_half) {
        uint16_t h;
        memcpy(&h, base + i * 2, sizeof h);
        return rill__acl_half_to_float(h);
    }
    float f;
    memcpy(&f, base + i * 4, sizeof f);
    return f;
}

static void store(char *base, int64_t i, float v, int is_half) {
    if (is_half) {
        uint16_t h = rill__acl_float_to_half(v);
        memcpy(base + i * 2, &h, sizeof h);
    } else {
        memcpy(base + i * 4, &v, sizeof v);
    }
}

/* One block: elements [first, last) of out, coordinates carried from one
 * element to the next as an odometer. */
static void ew_body(const rill_block_ctx *ctx, const void *raw) {
    const struct ew_args *args = raw;
    uint64_t first = (uint64_t)ctx->block_idx.x * CHUNK;
    uint64_t last = first + CHUNK < args->n ? first + CHUNK : args->n;
    int64_t coord[RILL_ACL_MAX_DIMS];
    int64_t io = 0, ia = 0, ib = 0;
    uint64_t rest = first;
    for (int d = args->ndim - 1; d >= 0; d--) {
        coord[d] = (int64_t)(rest % (uint64_t)args->dims[d]);
        rest /= (uint64_t)args->dims[d];
        io += coord[d] * args->so[d];
        ia += coord[d] * args->sa[d];
        ib += coord[d] * args->sb[d];
    }
    for (uint64_t e = first; e < last; e++) {
        float x = load(args->a, ia, args->is_half);
        float y = load(args->b, ib, args->is_half);
        float r = args->op == RILL_ACL_EW_ADD   ? x + args->alpha * y
                  : args->op == RILL_ACL_EW_MUL ? x * y
                                                : x / y;
        store(args->o, io, r, args->is_half);
        for (int d = args->ndim - 1; d >= 0; d--) {
            io += args->so[d];
            ia += args->sa[d];
            ib += args->sb[d];
            if (++coord[d] < args->dims[d])
                break;
            io -= coord[d] * args->so[d];
            ia -= coord[d] * args->sa[d];
            ib -= coord[d] * args->sb[d];
            coord[d] = 0;
        }
    }
}

uint64_t rill__acl_view_numel(const struct rill__acl_view *v) {
    uint64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= (uint64_t)v->dims[d];
    return n;
}

bool rill__acl_view_is_contiguous(const struct rill__acl_view *v) {
    int64_t expect = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->dims[d] != 1 && v->strides[d] != expect)
            return false;
        expect *= v->dims[d];
    }
    return true;
}

static bool same_dims(const struct rill__acl_view *x, const struct rill__acl_view *y) {
    return x->ndim == y->ndim && memcmp(x->dims, y->dims, (size_t)x->ndim * sizeof x->dims[0]) == 0;
}

/* v's strides aligned to out's ndim dimensions, 0 where v is broadcast. */
static void broadcast_strides(const struct rill__acl_view *v, int ndim, int64_t *strides) {
    int shift = ndim - v->ndim;
    for (int d = 0; d < ndim; d++) {
        int vd = d - shift;
        strides[d] = vd < 0 || v->dims[vd] == 1 ? 0 : v->strides[vd];
    }
}

/* The bytes a view touches, from its first element to past its last. */
static rill_access span_of(const struct rill__acl_view *v, rill_access_mode mode) {
    size_t elem = v->dtype == ACL_FLOAT16 ? 2 : 4;
    uint64_t last = 0;
    for (int d = 0; d < v->ndim; d++)
        last += (uint64_t)(v->dims[d] - 1) * (uint64_t)v->strides[d];
    return (rill_access){v->data, (size_t)(last + 1) * elem, mode};
}

static rill_status builtin(rill_stream *stream, enum rill__acl_ew_op op,
                           const struct rill__acl_view *out, const struct rill__acl_view *a,
                           const struct rill__acl_view *b, float alpha, size_t n) {
    if (op == RILL_ACL_EW_DIV) { /* float32: rill has no float16 division */
        size_t shape = n, strides = 1;
        return rill_op_binary_f32(stream, RILL_BINARY_DIV, (float *)out->data,
                                  (const float *)a->data, &strides, (const float *)b->data,
                                  &strides, &shape, 1);
    }
    if (out->dtype == ACL_FLOAT16) {
        if (op == RILL_ACL_EW_ADD)
            return rill_op_add_f16(stream, (rill_half *)out->data, (const rill_half *)a->data,
                                   (const rill_half *)b->data, alpha, n);
        return rill_op_mul_f16(stream, (rill_half *)out->data, (const rill_half *)a->data,
                               (const rill_half *)b->data, n);
    }
    if (op == RILL_ACL_EW_ADD)
        return rill_op_add_f32(stream, (float *)out->data, (const float *)a->data,
                               (const float *)b->data, alpha, n);
    return rill_op_mul_f32(stream, (float *)out->data, (const float *)a->data,
                           (const float *)b->data, n);
}

rill_status rill__acl_elementwise(rill_stream *stream, enum rill__acl_ew_op op,
                                  const struct rill__acl_view *out, const struct rill__acl_view *a,
                                  const struct rill__acl_view *b, float alpha) {
    uint64_t n = rill__acl_view_numel(out);
    if (same_dims(out, a) && same_dims(out, b) && rill__acl_view_is_contiguous(out) &&
        rill__acl_view_is_contiguous(a) && rill__acl_view_is_contiguous(b) &&
        (op != RILL_ACL_EW_DIV || out->dtype == ACL_FLOAT))
        return builtin(stream, op, out, a, b, alpha, (size_t)n);

    struct ew_args args = {.op = op,
                           .is_half = out->dtype == ACL_FLOAT16,
                           .alpha = alpha,
                           .ndim = out->ndim,
                           .o = out->data,
                           .a = a->data,
                           .b = b->data,
                           .n = n};
    memcpy(args.dims, out->dims, sizeof args.dims);
    memcpy(args.so, out->strides, sizeof args.so);
    broadcast_strides(a, out->ndim, args.sa);
    broadcast_strides(b, out->ndim, args.sb);
    rill_access accesses[3] = {span_of(out, RILL_WRITE), span_of(a, RILL_READ),
                               span_of(b, RILL_READ)};
    rill_launch launch = {.grid = {(uint32_t)((n + CHUNK - 1) / CHUNK), 1, 1},
                          .block = {1, 1, 1},
                          .args = &args,
                          .args_size = sizeof args,
                          .accesses = accesses,
                          .num_accesses = 3};
    rill_kernel_desc desc = {.name = op == RILL_ACL_EW_ADD   ? "aclnnAdd"
                                     : op == RILL_ACL_EW_MUL ? "aclnnMul"
                                                             : "aclnnDiv",
                             .cpu = ew_body};
    rill_kernel *kernel;
    rill_status st = rill_kernel_create(&desc, &kernel);
    if (st != RILL_OK)
        return st;
    st = rill_launch_kernel(stream, kernel, &launch);
    rill_kernel_destroy(kernel);
    return st;
}
