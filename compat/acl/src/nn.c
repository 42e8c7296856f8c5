/* SPDX-License-Identifier: MIT */
/*
 * The op API's ops of one input, on rill's tensor ops: activations
 * (rill_op_map_f32), softmax and log-softmax along one dimension
 * (rill_op_softmax_f32, rill_op_log_softmax_f32), casts between float32
 * and float16 (rill_op_cast_*) and copies into a tensor
 * (rill_op_copy_strided_f32, or a copy or cast of contiguous memory). The
 * first phase checks the tensors as ops.c does for every op, then what
 * the rill op takes (float32, contiguous, shapes that match), so that the
 * second phase only submits.
 */
#include "nn.h"

#include <string.h>

#include "error.h"
#include "ops.h"

static const rill_map_op map_of[] = {[RILL_ACL_OP_RELU] = RILL_MAP_RELU,
                                     [RILL_ACL_OP_GELU] = RILL_MAP_GELU,
                                     [RILL_ACL_OP_SIGMOID] = RILL_MAP_SIGMOID,
                                     [RILL_ACL_OP_TANH] = RILL_MAP_TANH,
                                     [RILL_ACL_OP_SILU] = RILL_MAP_SILU};

/* The op API's second phase, which submits what the first phase checked. */
#define PHASE2(Name, OP, submit)                                                                   \
    aclnnStatus aclnn##Name(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,      \
                            aclrtStream stream) {                                                  \
        (void)workspace;                                                                           \
        (void)workspaceSize;                                                                       \
        return rill__acl_run(OP, executor, stream, submit);                                        \
    }

/* The refusal of a NULL argument: self, out, workspaceSize or else
 * executor. */
static aclnnStatus null_self_out(const char *call, const aclTensor *self, const aclTensor *out,
                                 const uint64_t *workspaceSize) {
    return rill__acl_null_arg(call, !self            ? "self"
                                    : !out           ? "out"
                                    : !workspaceSize ? "workspaceSize"
                                                     : "executor");
}

/* Takes self and out, float32, contiguous and of one shape, into e,
 * after refusing a NULL argument. */
static aclnnStatus take_same_f32(const char *call, const aclTensor *self, aclTensor *out,
                                 const uint64_t *workspaceSize, aclOpExecutor *const *executor,
                                 struct rill__acl_executor *e) {
    if (!self || !out || !workspaceSize || !executor)
        return null_self_out(call, self, out, workspaceSize);
    aclnnStatus st = rill__acl_take_view(call, "self", self, &e->a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "out", out, &e->out);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_float32(call, "self", &e->a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_float32(call, "out", &e->out);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_same_shape(call, "self", &e->out, &e->a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_contiguous(call, "self", &e->a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_contiguous(call, "out", &e->out);
    return st;
}

/* ---- activations ---- */

static aclnnStatus unary_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                                aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
    struct rill__acl_executor e = {.op = op};
    aclnnStatus st = take_same_f32(call, self, out, workspaceSize, executor, &e);
    if (st != ACLNN_SUCCESS)
        return st;
    return rill__acl_finish(call, &e, workspaceSize, executor);
}

static rill_status submit_map(rill_stream *s, const struct rill__acl_executor *e) {
    return rill_op_map_f32(s, map_of[e->op], (float *)e->out.data, (const float *)e->a.data, 0.0f,
                           (size_t)rill__acl_view_numel(&e->out));
}

#define UNARY_OP(Name, OP)                                                                         \
    aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor *self, aclTensor *out,               \
                                              uint64_t *workspaceSize, aclOpExecutor **executor) { \
        return unary_phase1("aclnn" #Name "GetWorkspaceSize", OP, self, out, workspaceSize,        \
                            executor);                                                             \
    }                                                                                              \
    PHASE2(Name, OP, submit_map)

UNARY_OP(Relu, RILL_ACL_OP_RELU)
UNARY_OP(Gelu, RILL_ACL_OP_GELU)
UNARY_OP(Sigmoid, RILL_ACL_OP_SIGMOID)
UNARY_OP(Tanh, RILL_ACL_OP_TANH)
UNARY_OP(Silu, RILL_ACL_OP_SILU)

/* ---- softmax ---- */

static aclnnStatus softmax_phase1(const char *call, enum rill__acl_op op, const aclTensor *self,
                                  int64_t dim, aclTensor *out, uint64_t *workspaceSize,
                                  aclOpExecutor **executor) {
    struct rill__acl_executor e = {.op = op};
    aclnnStatus st = take_same_f32(call, self, out, workspaceSize, executor, &e);
    if (st != ACLNN_SUCCESS)
        return st;
    int64_t ndim = e.a.ndim > 0 ? e.a.ndim : 1; /* a 0-d tensor has dimension 0 (or -1) */
    if (dim < -ndim || dim >= ndim)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: dim %lld is outside [%lld, %lld] for self's %d dimensions", call,
                              (long long)dim, (long long)-ndim, (long long)(ndim - 1), e.a.ndim);
    e.dim = dim < 0 ? dim + ndim : dim;
    return rill__acl_finish(call, &e, workspaceSize, executor);
}

static rill_status submit_softmax(rill_stream *s, const struct rill__acl_executor *e) {
    const struct rill__acl_view *a = &e->a;
    uint64_t outer = 1, inner = 1, len = a->ndim > 0 ? (uint64_t)a->dims[e->dim] : 1;
    for (int d = 0; d < a->ndim; d++) {
        if (d < e->dim)
            outer *= (uint64_t)a->dims[d];
        else if (d > e->dim)
            inner *= (uint64_t)a->dims[d];
    }
    rill_status (*fn)(rill_stream *, float *, const float *, size_t, size_t, size_t) =
        e->op == RILL_ACL_OP_SOFTMAX ? rill_op_softmax_f32 : rill_op_log_softmax_f32;
    return fn(s, (float *)e->out.data, (const float *)a->data, (size_t)outer, (size_t)len,
              (size_t)inner);
}

aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out,
                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
    return softmax_phase1("aclnnSoftmaxGetWorkspaceSize", RILL_ACL_OP_SOFTMAX, self, dim, out,
                          workspaceSize, executor);
}

PHASE2(Softmax, RILL_ACL_OP_SOFTMAX, submit_softmax)

aclnnStatus aclnnLogSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out,
                                            uint64_t *workspaceSize, aclOpExecutor **executor) {
    return softmax_phase1("aclnnLogSoftmaxGetWorkspaceSize", RILL_ACL_OP_LOG_SOFTMAX, self, dim,
                          out, workspaceSize, executor);
}

PHASE2(LogSoftmax, RILL_ACL_OP_LOG_SOFTMAX, submit_softmax)

/* ---- cast and copy ---- */

/* out = a for contiguous views of one shape: a copy, or a conversion
 * between float32 and float16. */
static rill_status convert(rill_stream *s, const struct rill__acl_view *out,
                           const struct rill__acl_view *a) {
    size_t n = (size_t)rill__acl_view_numel(out);
    if (out->dtype == a->dtype)
        return rill_memcpy_async(out->data, a->data, n * (out->dtype == ACL_FLOAT16 ? 2u : 4u), s);
    if (out->dtype == ACL_FLOAT16)
        return rill_op_cast_f32_f16(s, (rill_half *)out->data, (const float *)a->data, n);
    return rill_op_cast_f16_f32(s, (float *)out->data, (const rill_half *)a->data, n);
}

static rill_status submit_convert(rill_stream *s, const struct rill__acl_executor *e) {
    return convert(s, &e->out, &e->a);
}

aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self, const aclDataType dtype,
                                      aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
    const char *call = "aclnnCastGetWorkspaceSize";
    if (!self || !out || !workspaceSize || !executor)
        return null_self_out(call, self, out, workspaceSize);
    if (dtype != ACL_FLOAT && dtype != ACL_FLOAT16)
        return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: dtype %d is neither ACL_FLOAT nor ACL_FLOAT16, the types "
                              "rill converts between",
                              call, (int)dtype);
    struct rill__acl_executor e = {.op = RILL_ACL_OP_CAST};
    aclnnStatus st = rill__acl_take_view(call, "self", self, &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "out", out, &e.out);
    if (st == ACLNN_SUCCESS && e.out.dtype != dtype)
        st = rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: out has data type %d, not dtype %d; make out a tensor of dtype",
                            call, (int)e.out.dtype, (int)dtype);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_same_shape(call, "self", &e.out, &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_contiguous(call, "self", &e.a);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_contiguous(call, "out", &e.out);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_check_apart(call, "out", &e.out, "self", &e.a);
    if (st != ACLNN_SUCCESS)
        return st;
    return rill__acl_finish(call, &e, workspaceSize, executor);
}

PHASE2(Cast, RILL_ACL_OP_CAST, submit_convert)

/* Whether src's shape broadcasts to out's (aligned at the last dimension,
 * each size equal or 1, src no longer). */
static bool broadcasts_to(const struct rill__acl_view *src, const struct rill__acl_view *out) {
    if (src->ndim > out->ndim)
        return false;
    int shift = out->ndim - src->ndim;
    for (int d = 0; d < src->ndim; d++)
        if (src->dims[d] != 1 && src->dims[d] != out->dims[d + shift])
            return false;
    return true;
}

static bool float32_strided(const struct rill__acl_executor *e) {
    return e->out.dtype == ACL_FLOAT && e->a.dtype == ACL_FLOAT && e->out.ndim <= RILL_OP_MAX_DIMS;
}

static rill_status submit_copy(rill_stream *s, const struct rill__acl_executor *e) {
    if (!float32_strided(e))
        return convert(s, &e->out, &e->a);
    const struct rill__acl_view *out = &e->out, *src = &e->a;
    size_t shape[RILL_OP_MAX_DIMS], so[RILL_OP_MAX_DIMS], ss[RILL_OP_MAX_DIMS];
    int shift = out->ndim - src->ndim;
    for (int d = 0; d < out->ndim; d++) {
        int sd = d - shift;
        shape[d] = (size_t)out->dims[d];
        so[d] = (size_t)out->strides[d];
        ss[d] = sd < 0 || src->dims[sd] == 1 ? 0 : (size_t)src->strides[sd];
    }
    return rill_op_copy_strided_f32(s, (float *)out->data, so, (const float *)src->data, ss, shape,
                                    (size_t)out->ndim);
}

aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor *src,
                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
    const char *call = "aclnnInplaceCopyGetWorkspaceSize";
    if (!selfRef || !src || !workspaceSize || !executor)
        return rill__acl_null_arg(call, !selfRef         ? "selfRef"
                                        : !src           ? "src"
                                        : !workspaceSize ? "workspaceSize"
                                                         : "executor");
    struct rill__acl_executor e = {.op = RILL_ACL_OP_INPLACE_COPY};
    aclnnStatus st = rill__acl_take_view(call, "selfRef", selfRef, &e.out);
    if (st == ACLNN_SUCCESS)
        st = rill__acl_take_view(call, "src", src, &e.a);
    if (st != ACLNN_SUCCESS)
        return st;
    if (float32_strided(&e)) {
        if (!broadcasts_to(&e.a, &e.out)) {
            char bo[160], bs[160];
            rill__acl_format_dims(&e.out, bo, sizeof bo);
            rill__acl_format_dims(&e.a, bs, sizeof bs);
            return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                  "%s: src's shape %s does not broadcast to selfRef's %s", call, bs,
                                  bo);
        }
        for (int d = 0; d < e.out.ndim; d++)
            if (e.out.dims[d] > 1 && e.out.strides[d] == 0)
                return rill__acl_fail(ACLNN_ERR_PARAM_INVALID,
                                      "%s: selfRef has stride 0 along dimension %d of %lld "
                                      "elements, so a copy would write one element twice",
                                      call, d, (long long)e.out.dims[d]);
    } else {
        st = rill__acl_check_same_shape(call, "src", &e.out, &e.a);
        if (st == ACLNN_SUCCESS)
            st = rill__acl_check_contiguous(call, "src", &e.a);
        if (st == ACLNN_SUCCESS)
            st = rill__acl_check_contiguous(call, "selfRef", &e.out);
        if (st != ACLNN_SUCCESS)
            return st;
    }
    st = rill__acl_check_apart(call, "selfRef", &e.out, "src", &e.a);
    if (st != ACLNN_SUCCESS)
        return st;
    return rill__acl_finish(call, &e, workspaceSize, executor);
}

PHASE2(InplaceCopy, RILL_ACL_OP_INPLACE_COPY, submit_copy)
