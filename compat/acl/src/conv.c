/* SPDX-License-Identifier: MIT */
/*
 * The op API's 2-D convolution and pooling on rill's: aclnnConvolution on
 * rill_op_conv2d_ex2_f32 (with the bias added by rill_op_binary_f32, bias
 * broadcast over n and the image), aclnnAvgPool2d and aclnnMaxPool on
 * rill_op_pool2d_ex_f32. What rill's ops compute is torch's conv2d (not
 * transposed) and its pooling with symmetric padding; the first phase
 * refuses every other setting with a message, checks the shapes (out's
 * among them) and keeps the sizes in params.
 */
#include "conv.h"

#include "error.h"
#include "ops.h"

/* params of a convolution */
enum { C_N, C_C, C_H, C_W, C_K, C_R, C_S, C_SH, C_SW, C_PH, C_PW, C_DH, C_DW, C_G, C_BIAS };
/* params of a pooling: the sizes, then rill_pool2d_params' divisor and flags */
enum { P_PLANES, P_H, P_W, P_R, P_S, P_SH, P_SW, P_PH, P_PW, P_DH, P_DW, P_DIV, P_FLAGS };

/* Two values from an array of 1 (both) or 2; refused otherwise, or when a
 * value is below min. */
static aclnnStatus pair_of(const char *call, const char *name, const aclIntArray *handle,
                           int64_t min, int64_t out[2]) {
    struct rill__acl_int_array a;
    aclnnStatus st = rill__acl_int_array_read(call, name, handle, &a);
    if (st != ACLNN_SUCCESS)
        return st;
    if (a.size != 1 && a.size != 2)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: %s has %llu values; a 2-D op takes 2 (or 1 for both "
                              "dimensions)",
                              call, name, (unsigned long long)a.size);
    out[0] = a.values[0];
    out[1] = a.values[a.size - 1];
    for (int i = 0; i < 2; i++)
        if (out[i] < min)
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: %s[%d] is %lld; it must be at least %lld", call, name, i,
                                  (long long)out[i], (long long)min);
    return ACLNN_SUCCESS;
}

/* The extent of a window of window taps dilation apart. */
static int64_t span_of(int64_t window, int64_t dilation) {
    return (window - 1) * dilation + 1;
}

/* The output size of one dimension, as torch's: (in + 2 pad - span) /
 * stride + 1 for a window spanning span, rounded up in ceil mode less a
 * last window that would start past the input and its leading padding;
 * -1 when the window is larger than the padded input. */
static int64_t out_size(int64_t in, int64_t pad, int64_t span, int64_t stride, bool ceil) {
    if (in + 2 * pad < span)
        return -1;
    int64_t o = (in + 2 * pad - span + (ceil ? stride - 1 : 0)) / stride + 1;
    if (ceil && (o - 1) * stride >= in + pad)
        o--;
    return o;
}

static aclnnStatus check_out(const char *call, const char *name, const struct rill__acl_view *out,
                             const int64_t *dims, int ndim) {
    struct rill__acl_view want = {.ndim = ndim};
    for (int d = 0; d < ndim; d++)
        want.dims[d] = dims[d];
    return rill__acl_check_same_shape(call, name, out, &want);
}

static aclnnStatus float32_contiguous(const char *call, const char *name,
                                      const struct rill__acl_view *v) {
    aclnnStatus st = rill__acl_check_float32(call, name, v);
    return st == ACLNN_SUCCESS ? rill__acl_check_contiguous(call, name, v) : st;
}

/* ---- convolution ---- */

aclnnStatus aclnnConvolutionGetWorkspaceSize(const aclTensor *input, const aclTensor *weight,
                                             const aclTensor *bias, const aclIntArray *stride,
                                             const aclIntArray *padding,
                                             const aclIntArray *dilation, bool transposed,
                                             const aclIntArray *outputPadding, int64_t groups,
                                             aclTensor *output, int8_t cubeMathType,
                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
    const char *call = "aclnnConvolutionGetWorkspaceSize";
    (void)outputPadding; /* a transposed convolution's only */
    if (!input || !weight || !stride || !padding || !dilation || !output || !workspaceSize ||
        !executor)
        return rill__acl_null_arg(call, !input           ? "input"
                                        : !weight        ? "weight"
                                        : !stride        ? "stride"
                                        : !padding       ? "padding"
                                        : !dilation      ? "dilation"
                                        : !output        ? "output"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    if (transposed)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: transposed is true; rill's convolution is a forward one "
                              "(transposed false)",
                              call);
    if (groups < 1)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID, "%s: groups is %lld; it must be at least 1",
                              call, (long long)groups);
    if (cubeMathType < 0 || cubeMathType > 3)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: cubeMathType %d is none of 0 (KEEP_DTYPE) to 3 (USE_HF32)", call,
                              (int)cubeMathType);
    struct rill__acl_executor e = {.op = RILL_ACL_OP_CONVOLUTION};
    int64_t st2[2], pad[2], dil[2];
    aclnnStatus st = pair_of(call, "stride", stride, 1, st2);
    if (st == ACLNN_SUCCESS)
        st = pair_of(call, "padding", padding, 0, pad);
    if (st == ACLNN_SUCCESS)
        st = pair_of(call, "dilation", dilation, 1, dil);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "input", input, &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "weight", weight, &e.b);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "output", output, &e.out);
    const struct rill__acl_view *views[] = {&e.a, &e.b, &e.out};
    const char *names[] = {"input", "weight", "output"};
    for (int i = 0; i < 3 && st == ACLNN_SUCCESS; i++) {
        st = float32_contiguous(call, names[i], views[i]);
        if (st == ACLNN_SUCCESS && views[i]->ndim != 4)
            st = rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                "%s: %s has %d dimensions; a 2-D convolution takes 4 (NCHW)", call,
                                names[i], views[i]->ndim);
    }
    if (st == ACLNN_SUCCESS && bias) {
        st = rill__acl_take_view(call, "bias", bias, &e.c);
        if (st == ACLNN_SUCCESS)
            st = float32_contiguous(call, "bias", &e.c);
    }
    if (st != ACLNN_SUCCESS)
        return st;
    const int64_t *in = e.a.dims, *w = e.b.dims;
    if (in[1] % groups != 0 || w[0] % groups != 0)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: groups %lld does not divide input's %lld channels and "
                              "weight's %lld filters",
                              call, (long long)groups, (long long)in[1], (long long)w[0]);
    if (w[1] * groups != in[1])
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: weight has %lld input channels, input %lld in %lld groups "
                              "(%lld each); they must match",
                              call, (long long)w[1], (long long)in[1], (long long)groups,
                              (long long)(in[1] / groups));
    int64_t rh = span_of(w[2], dil[0]), rw = span_of(w[3], dil[1]);
    int64_t oh = out_size(in[2], pad[0], rh, st2[0], false);
    int64_t ow = out_size(in[3], pad[1], rw, st2[1], false);
    if (oh < 1 || ow < 1)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: the %lld x %lld filter (dilated) is larger than the padded "
                              "%lld x %lld input",
                              call, (long long)rh, (long long)rw, (long long)(in[2] + 2 * pad[0]),
                              (long long)(in[3] + 2 * pad[1]));
    int64_t want[4] = {in[0], w[0], oh, ow};
    st = check_out(call, "the convolution of input and weight", &e.out, want, 4);
    if (st == ACLNN_SUCCESS && bias && (e.c.ndim != 1 || e.c.dims[0] != w[0]))
        st = rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: bias must have one dimension of %lld (weight's output "
                            "channels)",
                            call, (long long)w[0]);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_apart(call, "output", &e.out, "input", &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_apart(call, "output", &e.out, "weight", &e.b);
    if (st == ACLNN_SUCCESS && bias)
        st = rill__acl_check_apart(call, "output", &e.out, "bias", &e.c);
    if (st != ACLNN_SUCCESS)
        return st;
    int64_t p[] = {in[0],  in[1],  in[2],  in[3],  w[0],   w[2],   w[3],        st2[0],
                   st2[1], pad[0], pad[1], dil[0], dil[1], groups, bias != NULL};
    for (int i = 0; i <= C_BIAS; i++)
        e.params[i] = p[i];
    return rill__acl_finish(call, &e, workspaceSize, executor);
}

static rill_status submit_conv(rill_stream *s, const struct rill__acl_executor *e) {
    const int64_t *p = e->params;
    rill_conv2d_params geometry = {(size_t)p[C_SH], (size_t)p[C_SW], (size_t)p[C_PH],
                                   (size_t)p[C_PW], (size_t)p[C_DH], (size_t)p[C_DW],
                                   (size_t)p[C_G]};
    rill_status st = rill_op_conv2d_ex2_f32(
        s, (float *)e->out.data, (const float *)e->a.data, (const float *)e->b.data, (size_t)p[C_N],
        (size_t)p[C_C], (size_t)p[C_H], (size_t)p[C_W], (size_t)p[C_K], (size_t)p[C_R],
        (size_t)p[C_S], &geometry);
    if (st != RILL_OK || !p[C_BIAS])
        return st;
    size_t shape[4] = {(size_t)e->out.dims[0], (size_t)e->out.dims[1], (size_t)e->out.dims[2],
                       (size_t)e->out.dims[3]};
    size_t contiguous[4] = {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
    size_t bias_strides[4] = {0, 1, 0, 0};
    float *out = (float *)e->out.data;
    return rill_op_binary_f32(s, RILL_BINARY_ADD, out, out, contiguous, (const float *)e->c.data,
                              bias_strides, shape, 4);
}

aclnnStatus aclnnConvolution(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                             aclrtStream stream) {
    (void)workspace;
    (void)workspaceSize;
    return rill__acl_run(RILL_ACL_OP_CONVOLUTION, executor, stream, submit_conv);
}

/* ---- pooling ---- */

/* A pooling's settings beyond self and out: each pair {h, w}. */
struct pool_geometry {
    int64_t window[2], stride[2], pad[2], dilation[2];
    int64_t divisor;
    unsigned flags; /* RILL_POOL_CEIL_MODE, RILL_POOL_EXCLUDE_PAD */
};

/* What both poolings check: self [n, c, h, w] or [c, h, w], the padding
 * (at most half the dilated window), and out's shape. */
static aclnnStatus pool_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                               const struct pool_geometry *g, aclTensor *out,
                               struct rill__acl_executor *e) {
    *e = (struct rill__acl_executor){.op = op};
    aclnnStatus st = rill__acl_take_view(call, "self", self, &e->a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "out", out, &e->out);
    if (st == ACLNN_SUCCESS)
        st = float32_contiguous(call, "self", &e->a);
    if (st == ACLNN_SUCCESS)
        st = float32_contiguous(call, "out", &e->out);
    if (st != ACLNN_SUCCESS)
        return st;
    int nd = e->a.ndim;
    if (nd != 3 && nd != 4)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: self has %d dimensions; 2-D pooling takes 4 (NCHW) or 3 (CHW)",
                              call, nd);
    int64_t span[2];
    for (int i = 0; i < 2; i++) {
        span[i] = span_of(g->window[i], g->dilation[i]);
        if (g->pad[i] * 2 > span[i])
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: padding %lld is more than half the window (%lld)", call,
                                  (long long)g->pad[i], (long long)span[i]);
    }
    bool ceil = (g->flags & RILL_POOL_CEIL_MODE) != 0;
    int64_t h = e->a.dims[nd - 2], w = e->a.dims[nd - 1];
    int64_t oh = out_size(h, g->pad[0], span[0], g->stride[0], ceil);
    int64_t ow = out_size(w, g->pad[1], span[1], g->stride[1], ceil);
    if (oh < 1 || ow < 1)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: the %lld x %lld window is larger than the padded %lld x %lld "
                              "image",
                              call, (long long)span[0], (long long)span[1],
                              (long long)(h + 2 * g->pad[0]), (long long)(w + 2 * g->pad[1]));
    int64_t want[4];
    int64_t planes = 1;
    for (int d = 0; d < nd - 2; d++) {
        want[d] = e->a.dims[d];
        planes *= e->a.dims[d];
    }
    want[nd - 2] = oh;
    want[nd - 1] = ow;
    st = check_out(call, "the pooling of self", &e->out, want, nd);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_apart(call, "out", &e->out, "self", &e->a);
    if (st != ACLNN_SUCCESS)
        return st;
    int64_t p[] = {
        planes,           h,         w,         g->window[0],   g->window[1],   g->stride[0],
        g->stride[1],     g->pad[0], g->pad[1], g->dilation[0], g->dilation[1], g->divisor,
        (int64_t)g->flags};
    for (int i = 0; i <= P_FLAGS; i++)
        e->params[i] = p[i];
    return ACLNN_SUCCESS;
}

static rill_status submit_pool(rill_stream *s, const struct rill__acl_executor *e) {
    const int64_t *p = e->params;
    rill_pool2d_params geometry = {
        (size_t)p[P_R],  (size_t)p[P_S],  (size_t)p[P_SH], (size_t)p[P_SW],  (size_t)p[P_PH],
        (size_t)p[P_PW], (size_t)p[P_DH], (size_t)p[P_DW], (size_t)p[P_DIV], (unsigned)p[P_FLAGS]};
    return rill_op_pool2d_ex_f32(s, e->op == RILL_ACL_OP_MAX_POOL ? RILL_POOL_MAX : RILL_POOL_AVG,
                                 (float *)e->out.data, NULL, (const float *)e->a.data,
                                 (size_t)p[P_PLANES], (size_t)p[P_H], (size_t)p[P_W], &geometry);
}

aclnnStatus aclnnAvgPool2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize,
                                           const aclIntArray *strides, const aclIntArray *paddings,
                                           const bool ceilMode, const bool countIncludePad,
                                           const int64_t divisorOverride, const int8_t cubeMathType,
                                           aclTensor *out, uint64_t *workspaceSize,
                                           aclOpExecutor **executor) {
    const char *call = "aclnnAvgPool2dGetWorkspaceSize";
    if (!self || !kernelSize || !strides || !paddings || !out || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !self            ? "self"
                                        : !kernelSize    ? "kernelSize"
                                        : !strides       ? "strides"
                                        : !paddings      ? "paddings"
                                        : !out           ? "out"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    if (divisorOverride < 0)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: divisorOverride is %lld; give 0 (divide by the window) or a "
                              "positive divisor",
                              call, (long long)divisorOverride);
    if (cubeMathType < 0 || cubeMathType > 3)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: cubeMathType %d is none of 0 (KEEP_DTYPE) to 3 (USE_HF32)", call,
                              (int)cubeMathType);
    struct pool_geometry g = {.dilation = {1, 1},
                              .divisor = divisorOverride,
                              .flags = (ceilMode ? RILL_POOL_CEIL_MODE : 0u) |
                                       (countIncludePad ? 0u : RILL_POOL_EXCLUDE_PAD)};
    aclnnStatus st = pair_of(call, "kernelSize", kernelSize, 1, g.window);
    if (st == ACLNN_SUCCESS)
        st = pair_of(call, "strides", strides, 1, g.stride);
    if (st == ACLNN_SUCCESS)
        st = pair_of(call, "paddings", paddings, 0, g.pad);
    if (st != ACLNN_SUCCESS)
        return st;
    struct rill__acl_executor e;
    st = pool_phase1(call, RILL_ACL_OP_AVG_POOL2D, self, &g, out, &e);
    return st == ACLNN_SUCCESS ? rill__acl_finish(call, &e, workspaceSize, executor) : st;
}

aclnnStatus aclnnAvgPool2d(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                           aclrtStream stream) {
    (void)workspace;
    (void)workspaceSize;
    return rill__acl_run(RILL_ACL_OP_AVG_POOL2D, executor, stream, submit_pool);
}

aclnnStatus aclnnMaxPoolGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelShape,
                                         const aclIntArray *strides, const int64_t autoPad,
                                         const aclIntArray *pads, const aclIntArray *dilations,
                                         const int64_t ceilMode, aclTensor *out,
                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
    const char *call = "aclnnMaxPoolGetWorkspaceSize";
    if (!self || !kernelShape || !strides || !pads || !out || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !self            ? "self"
                                        : !kernelShape   ? "kernelShape"
                                        : !strides       ? "strides"
                                        : !pads          ? "pads"
                                        : !out           ? "out"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    if (autoPad != 0)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: autoPad is not 0; rill's pooling takes explicit pads "
                              "(autoPad 0, NOTSET)",
                              call);
    if (ceilMode != 0 && ceilMode != 1)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: ceilMode is %lld; give 0 (round the output size down) or 1 "
                              "(up)",
                              call, (long long)ceilMode);
    struct pool_geometry g = {.dilation = {1, 1}, .flags = ceilMode ? RILL_POOL_CEIL_MODE : 0u};
    aclnnStatus st = pair_of(call, "kernelShape", kernelShape, 1, g.window);
    if (st == ACLNN_SUCCESS)
        st = pair_of(call, "strides", strides, 1, g.stride);
    if (st == ACLNN_SUCCESS && dilations)
        st = pair_of(call, "dilations", dilations, 1, g.dilation);
    struct rill__acl_int_array p;
    if (st == ACLNN_SUCCESS)
        st = rill__acl_int_array_read(call, "pads", pads, &p);
    if (st != ACLNN_SUCCESS)
        return st;
    if (p.size == 4 && (p.values[0] != p.values[2] || p.values[1] != p.values[3]))
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: pads {%lld, %lld, %lld, %lld} are not symmetric; rill pads "
                              "top and bottom alike, and left and right",
                              call, (long long)p.values[0], (long long)p.values[1],
                              (long long)p.values[2], (long long)p.values[3]);
    if (p.size != 2 && p.size != 4)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: pads has %llu values; give 2 ({h, w}) or 4 ({top, left, "
                              "bottom, right})",
                              call, (unsigned long long)p.size);
    g.pad[0] = p.values[0];
    g.pad[1] = p.values[1];
    if (g.pad[0] < 0 || g.pad[1] < 0)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID, "%s: pads are negative", call);
    struct rill__acl_executor e;
    st = pool_phase1(call, RILL_ACL_OP_MAX_POOL, self, &g, out, &e);
    return st == ACLNN_SUCCESS ? rill__acl_finish(call, &e, workspaceSize, executor) : st;
}

aclnnStatus aclnnMaxPool(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                         aclrtStream stream) {
    (void)workspace;
    (void)workspaceSize;
    return rill__acl_run(RILL_ACL_OP_MAX_POOL, executor, stream, submit_pool);
}
